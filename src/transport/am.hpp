// am.hpp — the active-message transport: RMA over MPI two-sided messages, executed at the
// target by its progress thread (or by any thread of the target inside MPI, or waiting).
//
// One AmEndpoint per window, on a private duplicate of the window's communicator. Requests
// go to the target with one tag, into a ring of pre-posted receives served in the order
// they matched (MPI keeps the order of two messages between two processes on one tag, so
// the target applies one origin's requests in the order that origin sent them). A request
// that wants an answer carries a fresh reply tag on which the origin has already posted
// its receive.
//   put       : segments (offset, length) + data, at most kMaxMessage bytes a message;
//               pieces of 16 KiB and more go as a header plus a second message straight
//               from the user's buffer, which the target receives in place (no packing,
//               no bounce buffer: above Open MPI's eager limit one copy in all);
//   strided put: (target offset, piece length, stride, count) + the pieces packed, at most
//               kMaxMessage bytes of them a message; the target checks the footprint once;
//   strided get: the same descriptor, answered with the pieces packed (scattered on arrival);
//   strided accumulate: the same for an accumulate without result, the pieces applied by
//               one strided call of the accumulate path (LocalTarget::accumulate_strided);
//   strided get_accumulate: the same with the old values answered packed (scattered into
//               the result layout on arrival); MPI_NO_OP carries no origin data;
//   get       : segments -> reply with the data, received straight into the user's buffer;
//               returns at once, the data is in place at the next flush;
//   atomic8   : one synchronization word of the target's state area -> reply old value;
//   accumulate: a run of n basic elements (op and type as portable ids) -> the target's
//               accumulate path, the same code and atomicity domain its local ops use;
//   flush     : -> empty reply, sent after every earlier request from this origin was
//               applied.
// Notifies (an 8-byte atomic without answer: PSCW post and complete) are batch records
// that send the batch at once.
//   lock      : a batch record; the target takes its lock words itself, or parks every
//               request of that origin until it can (retried at each poll);
//   fence     : request counts by MPI_Reduce_scatter_block (fence()); a request stamped
//               with a later fence than the target has finished waits (parked) until it has.
// Batching: a small put or an accumulate without result joins the peer's open batch (one
// kBatch message of records, at most kBatchMax bytes) instead of leaving as a message of
// its own; the batch leaves when it is full, before any other request to that peer (so
// order per target holds), at flush / flush_local, and when it has waited kBatchAge
// (send_old_batches(), called by the progress thread). One MPI message then carries many
// puts: the host's per-message cost is paid once per batch.
// Completion by sequence numbers: every request to a target gets the next number; an
// answer to request s means the target has applied every request up to s. A put or
// accumulate asks for an (empty) answer when no such ack is already on its way, so there is
// at most one ack in flight per target: a flush whose newest request carries an answer
// waits for the answers only (after work that hid their round trip: nothing to wait for),
// and sends a flush request only when the newest request has none.
// Flow control: a put, get or accumulate posted with `window` requests (FASTRMA_AM_WINDOW,
// 256) beyond the
// newest answer from its target is refused (Post::retry: the epochs queue it and post it
// again when answers came), and one that has started may take the count to twice that
// before it waits for answers (as synchronization messages do), so a flood cannot make the
// target buffer without bound (nor the origin: requests without an answer are sent with
// MPI_Isend and their buffers kept until they complete).
// Needs MPI_THREAD_MULTIPLE (application threads and the progress thread both call MPI).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "base/errors.hpp"
#include "ops/copy.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

class SpinWait;

// What a target's endpoint needs to serve requests against its local part.
using AmLocal = LocalTarget;

class AmEndpoint {
public:
    static constexpr std::size_t kMaxMessage = 64 * 1024;
    // comm is duplicated (collective over it). window: requests beyond the newest answer
    // from a target before new operations to it are refused (flow control, above).
    AmEndpoint(MPI_Comm comm, AmLocal local, int window);
    ~AmEndpoint();
    int error() const { return err_; }
    // The first host MPI call that failed since the last call (a return code other than
    // MPI_SUCCESS: the endpoint's communicator returns errors): its MPI error class, the
    // message in *what (may be null); MPI_SUCCESS when none did. The operation it served
    // was dropped (a request not sent, an answer not received); nothing waits for it.
    int take_failure(std::string* what);

    // Origin side (called through AmTransport).
    Post put(int rank, const Chunk* chunks, std::size_t n);
    Post get(int rank, const Chunk* chunks, std::size_t n);
    // n pieces of len bytes (len <= kStridedPieceMax): piece i from local + i * lstride to
    // offset + i * rstride at the target (strides may be negative), as kPutStrided requests
    // of at most kMaxMessage bytes of pieces each, packed here; the target checks the
    // footprint once and copies the pieces out.
    Post put_strided(int rank, const void* local, std::int64_t lstride, std::uint64_t offset, std::int64_t rstride,
                     std::size_t len, std::uint64_t n);
    static constexpr std::size_t kStridedPieceMax = 3999;  // larger pieces: put() (in place)
    // The get of the same pieces (the target answers them packed, scattered here on arrival;
    // in place at the next flush).
    Post get_strided(int rank, void* local, std::int64_t lstride, std::uint64_t offset, std::int64_t rstride,
                     std::size_t len, std::uint64_t n);
    // n pieces of elems elements of elem_bytes (a piece at most kStridedPieceMax bytes), an
    // accumulate without result (rma_kind: acc): piece i from src + i * lstride onto toff +
    // i * rstride, as kAccStrided requests of at most kMaxMessage bytes of pieces, packed
    // here; the target checks the footprint once and applies the pieces by one strided call
    // of its accumulate path (accumulate_runs).
    Post accumulate_strided(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff, std::int64_t rstride,
                            std::uint64_t elems, std::size_t elem_bytes, const void* src, std::int64_t lstride,
                            std::uint64_t n);
    // The get_accumulate of the same pieces (rma_kind get_acc; src null: MPI_NO_OP, no origin
    // data sent), as kGetAccStrided requests of at most kMaxMessage bytes of pieces: the
    // target checks the footprint once, applies them as accumulate_strided does and answers
    // their old values packed, scattered here to result + i * res_stride on arrival (in
    // place at the next flush; a refused request leaves result as it was).
    Post get_accumulate_strided(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                                std::int64_t rstride, std::uint64_t elems, std::size_t elem_bytes, const void* src,
                                std::int64_t lstride, void* result, std::int64_t res_stride, std::uint64_t n);
    // Pieces of a get up to this size travel gathered: many (at most 256, at most
    // kMaxMessage bytes) in one request, answered in one message and scattered on arrival.
    static constexpr std::size_t kGatherPieceMax = 4096;
    std::uint64_t atomic8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand, std::uint64_t compare);
    Post accumulate(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n,
                    std::size_t elem_bytes, const void* src, const void* compare, void* result);
    Post read_state(int rank, std::size_t word, std::size_t count, std::uint64_t* out);
    // atomic8 in two halves: the request leaves, its answer lands in *old by finish.
    std::uint64_t atomic8_start(int rank, std::size_t word, AtomicOp op, std::uint64_t operand, std::uint64_t compare,
                                std::uint64_t* old);
    void atomic8_finish(int rank, std::uint64_t seq) { wait_answer(rank, seq); }
    void notify8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand);  // no answer
    // A PSCW complete: the notify leaves at once (in the batch with the last small puts),
    // then local completion; requests apply in order at the target, so it counts the
    // notify after our ops. Only an answer still being pulled from the target's window (a
    // get above the eager limit) makes the notify wait for local completion: the target
    // must not change that memory before the data has left.
    void complete_notify8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand);
    // A lock request (a batch record, leaving with the epoch's first ops): the target serves
    // nothing of ours behind it before it took the lock. While it cannot, our requests wait
    // in its parked queue, and every poll of the target retries.
    void lock_request(int rank, Transport::LockRequest what);
    // Transport::release: the releases join the batch; one-way when every earlier request
    // is answered already (the epoch is complete), else the batch asks for the answer that
    // completes the epoch (lock + put + unlock: one message, one answer).
    void release(int rank, const Transport::Release* r, std::size_t n);
    bool has_parked() const { return parked_n_.load(std::memory_order_relaxed) != 0; }
    // Origin side, after a completion point: serve_arrived() serves every request our ring
    // has received — among them the targets' refusal notices (kRejected), which a target
    // sends before the answers that completed our wait (one sender's messages are matched
    // in the order they were sent), so they are in by then; take_rejected(rank): how many
    // requests to rank its server refused since the last call (dynamic windows: outside its
    // attached regions when they arrived). Requests without an answer (PSCW complete) are
    // reported at a later completion point.
    void serve_arrived();
    std::uint64_t take_rejected(int rank);
    // PSCW without waiting for the post (MPI lets MPI_Win_start return before the matching
    // MPI_Win_post). The target counts its posts per origin (post_to: the count, then a
    // kPosted note to the origin); the origin stamps every request of its k-th access epoch
    // to a target with k, and the target holds back (parks) an origin's requests stamped
    // beyond its own count, so nothing of epoch k touches its memory before its k-th post.
    // The origin's start may run one epoch ahead of the target's posts, not more
    // (may_start: the post of its previous epoch with that target has arrived): the parked
    // requests stay bounded. A start then sends its ops at once, and a target whose origin
    // is ahead finds the whole epoch waiting when it posts.
    void post_to(int rank);
    bool may_start(int rank);  // the previous epoch's post has arrived
    void begin_access(int rank);
    void end_access(int rank);
    void flush(int rank);
    // Transport::mark / reached: the flush that covers every request to rank so far,
    // requested (flush_start); whether its answers are in (try-locks: never blocks).
    std::uint64_t mark(int rank) { return flush_start(rank, false); }
    bool reached(int rank, std::uint64_t upto);
    void flush_all();  // every peer: all requests out first, then all answers
    // MPI_Win_fence over am (collective): what this process sent leaves, one
    // MPI_Reduce_scatter_block of the request counts tells each process how many requests
    // were sent to it since the window was created, and it serves until it has applied as
    // many; then local completion. One collective, no round trip per target. Requests sent
    // after a fence wait at a target that has not finished it (Header::epoch).
    int fence();
    void flush_local(int rank);  // sends complete, every answer carrying data in place
    // Before the window's closing barrier: every request of ours applied at its target,
    // one-way ones too (a lock's master release): nothing of ours is left to arrive.
    void quiesce();
    // The window's closing barrier, over the am communicator, serving while it waits: a
    // peer still in its quiesce() (or in a get it issued before its fence) waits for our
    // answers, and with neither a progress thread nor the host hook (FASTRMA_PROGRESS=0,
    // FASTRMA_HOST_PROGRESS=0, or a host MPI without the hook) a blocking collective here
    // would never give them.
    int barrier();
    // How long the server waits for the payload of a kPutData / kAccData request whose
    // header has arrived (FASTRMA_AM_PAYLOAD_MS). Past it the request is dropped (refused:
    // its origin is told) and the failure recorded: this process's next completion point
    // reports it (take_failure).
    void set_payload_wait(std::chrono::milliseconds ms) { payload_wait_ = ms; }
    // Does a progress thread or the host hook serve us while an application thread blocks
    // in a host collective? Then fence() and barrier() use the blocking collectives (the
    // non-blocking ones cost more per fence); else they serve.
    void set_served_elsewhere(bool yes) { served_elsewhere_ = yes; }

    // Target side: serve what has arrived (bounded batch). True if anything was served.
    bool poll();
    // The decoder of one request message from source, as the ring hands it over (serve_mu_
    // taken here): the narrow entry of the fuzz test (tests/mpi/test_am_fuzz.cpp). A
    // kPutData / kAccData request receives its payload from source on comm() (tag kPayloadTag).
    void serve_message(const unsigned char* msg, std::size_t len, int source);
    MPI_Comm comm() const { return comm_; }
    static constexpr int kPayloadTag = 8;
    // Called on every pass of a thread waiting here for answers (it serves meanwhile).
    void set_on_wait(std::function<void()> f) { on_wait_ = std::move(f); }
    // gone(rank): an MPI error class once rank is known to have died (Transport::set_peer_gone):
    // a wait for its answers or for our sends to it then ends with that error recorded.
    void set_peer_gone(std::function<int(int)> gone) { gone_ = std::move(gone); }
    // Orders what the server threads applied to my memory before this call before the
    // caller's later loads (MPI_Win_sync): the server applies requests under serve_mu_.
    void sync_with_server() { std::lock_guard lk(serve_mu_); }
    // Dynamic windows, after the table changed (detach): every request the server let
    // through under the old table is done with my memory when this returns — served, its
    // payload landed, its answer sent from my memory complete.
    void settle();
    // Origin side: sends the batches that have waited long enough. True if any left.
    bool send_old_batches();
    // Records of a batch, a batch message's size (one eager message of the host).
    static constexpr std::size_t kBatchMax = 4096;
    static constexpr std::size_t kBatchItemMax = 1024;  // larger puts/accumulates go alone
    static constexpr std::uint64_t kBatchAgeNs = 20000;  // the progress thread sends it then

    // The largest request message (put: header, 256 segments, kMaxMessage bytes of data;
    // accumulate runs are at most 32 KiB): the size of each pre-posted receive.
    static constexpr std::size_t kMaxRequest = 64 + 256 * 16 + kMaxMessage;

private:
    struct Header;
    int next_tag();

public:
    // How many reply tags fit below the host's MPI_TAG_UB (a power of two; 0: too few).
    static int reply_tag_span(int tag_ub);

private:
    int tag_mask_ = 0;  // reply_tag_span() - 1
    // Sends a request and, when reply != null, waits for reply_len bytes of answer,
    // serving incoming requests meanwhile (so two processes asking each other progress).
    void request(int rank, std::vector<unsigned char>& msg, void* reply, std::size_t reply_len);
    void serve(const unsigned char* msg, std::size_t len, int source);
    // serve()'s handlers, one per request kind (am.cpp), and the answers they send.
    struct Incoming;
    void serve_put(const Incoming& in);
    void serve_put_strided(const Incoming& in);
    void serve_get_strided(const Incoming& in);
    void serve_acc_strided(const Incoming& in);
    void serve_get_acc_strided(const Incoming& in);
    bool serve_batch(const Incoming& in);  // false: parked behind a lock request (not served yet)
    void serve_put_data(const Incoming& in);
    void serve_get(const Incoming& in);
    void serve_atomic8(const Incoming& in);
    void serve_accumulate(const Incoming& in);  // kAccumulate and kAccData
    void serve_read_state(const Incoming& in);
    bool answer(const Incoming& in, const void* data, std::size_t n, MPI_Request* rq);
    void reply(const Incoming& in, const void* data, std::size_t n);  // data that outlives the send
    void reply_owned(const Incoming& in, PageOffsetBuffer&& buf, std::size_t n);
    void reply_copy(const Incoming& in, const void* data, std::size_t n);
    PageOffsetBuffer answer_buffer(const Incoming& in, std::size_t n);
    void wait_by_test(MPI_Request* rq);  // the server's wait (no serving: no re-entry)
    // rc of a host MPI call: true when MPI_SUCCESS, else the failure is recorded (the first
    // one, for take_failure) and false. rank: the peer it concerned (-1: none).
    bool host_ok(int rc, const char* call, int rank = -1);
    void note_failure(int cls, const char* what);  // records a failure as host_ok does
    std::mutex failure_mu_;
    std::atomic<bool> failed_{false};
    int failure_class_ = MPI_SUCCESS;  // failure_mu_
    std::string failure_;  // failure_mu_
    int wait_serving(MPI_Request* rq);  // an application thread's wait (serves)
    // One idle pass of an application thread's wait: mark the help, serve, pace.
    void serve_while_waiting(SpinWait& pace);
    bool served_elsewhere_ = true;
    bool start_ring();
    void stop_ring();

    // What is on its way to one target, under its own mutex: threads sending to different
    // targets never meet; to one target the mutex keeps sequence numbers in MPI's order.
    enum class Ack { none, maybe, always };
    // Data received into a bounce buffer at the sender's page offset (see slow_distance()):
    // copied to dst when the receive completes, the buffer then kept for reuse. Empty buf:
    // received in place, nothing to do.
    // A gathered get's answer (many small pieces in one message) is scattered from the
    // buffer to the pieces' destinations, in order.
    struct Landing {
        PageOffsetBuffer buf;
        unsigned char* dst = nullptr;
        std::size_t n = 0;
        std::vector<std::pair<unsigned char*, std::size_t>> scatter;  // (dst, bytes) pieces
        // A strided get's answer: pieces of `piece` bytes packed, then one byte (1: the
        // target applied it), scattered to dst at lstride.
        std::uint64_t pieces = 0;
        std::size_t piece = 0;
        std::int64_t lstride = 0;
        // A gathered or strided answer's bounce, taken when the request leaves (not while
        // it is deferred): `take` bytes, those from `zero_from` on zeroed (applied flags).
        std::size_t take = 0, zero_from = 0;
        void finish(std::vector<PageOffsetBuffer>& spares) {
            if (!buf) return;
            // The bounce was written by the host MPI, possibly on another thread inside its
            // own progress; the receive's completion, which this thread saw, orders that
            // write before this read, but inside the uninstrumented MPI: ThreadSanitizer
            // cannot see it (tsan.supp's header), so the read is annotated, not suppressed.
            [[maybe_unused]] TsanIgnoreReads ignore;
            if (pieces) {
                if (buf.data()[pieces * piece])
                    copy_strided(dst, lstride, buf.data(), std::int64_t(piece), piece, pieces);
            } else if (!scatter.empty()) {
                // The pieces' data, then one byte per piece: 1 if the target applied it (a
                // refused piece leaves its destination as it was).
                std::size_t total = 0;
                for (const auto& piece : scatter) total += piece.second;
                const unsigned char* from = buf.data();
                const unsigned char* applied = buf.data() + total;
                for (std::size_t k = 0; k < scatter.size(); ++k) {
                    if (applied[k]) std::memcpy(scatter[k].first, from, scatter[k].second);
                    from += scatter[k].second;
                }
            } else if (n) {
                copy_bytes(dst, buf.data(), n);  // (n = 0: a refused put's data, dropped)
            }
            PageOffsetBuffer::recycle(spares, std::move(buf));
        }
    };
    struct Answer {  // a posted receive of an answer: an ack, or a get's data
        std::uint64_t seq;
        bool ack;  // the empty answer a put/accumulate asked for (ack_in_flight)
        bool data;  // carries data into a buffer of ours (a get, old values): local
            // completion (flush_local) waits for it
        bool big;  // larger than the eager limit: counted in big_in_flight
        Landing land{};  // a get's data received into a bounce buffer (empty: in place)
    };
    // Requests in flight are kept as arrays of MPI_Request beside what belongs to them, so
    // that one MPI_Testsome / MPI_Testall (one pass of the host's progress) covers them all.
    struct Peer {
        std::mutex mu;
        std::atomic<std::uint64_t> sent{0};  // sequence number of the newest request (mu)
        std::atomic<std::uint64_t> answered{0};  // newest sequence number whose answer arrived
        std::vector<MPI_Request> send_rq;  // requests sent with MPI_Isend ...
        std::vector<std::vector<unsigned char>> send_buf;  // ... their buffers
        std::vector<std::uint8_t> send_big;  // ... and whether each is above the eager limit
        std::uint32_t big_in_flight = 0;  // such sends and answers not yet completed
        std::vector<MPI_Request> answer_rq;  // posted receives of answers ...
        std::vector<Answer> answers;  // ... in sequence order
        bool ack_in_flight = false;  // a put/accumulate ack among answers
        std::vector<int> testsome_idx;  // MPI_Testsome's scratch (mu)
        std::vector<unsigned char> batch;  // the open batch (Header + records), or empty
        std::vector<std::vector<unsigned char>> spare_batches;  // sent batches' buffers (mu)
        std::uint32_t batch_records = 0;
        std::uint64_t batch_opened_ns = 0;  // when its first record joined
        std::vector<PageOffsetBuffer> spares;  // bounce buffers of answers, for reuse (mu)
        std::atomic<std::uint64_t> rejected_seen{0};  // the target's refusals it told us of
        std::uint64_t rejected_taken = 0;  // ... reported by take_rejected (mu)
        // PSCW over am (see post_to): as target, my posts to this rank so far; as origin,
        // its posts to me that arrived, my access epochs to it (mu), and the stamp my
        // requests to it carry now (mu; 0 outside an access epoch).
        std::atomic<std::uint32_t> posted_to{0};
        std::atomic<std::uint64_t> posts_received{0};
        std::uint32_t access_epochs = 0;
        std::uint32_t pscw_stamp = 0;
        // Requests numbered but not sent yet: beyond the flow-control window, while an
        // answer that makes room is on its way; sent in order as answers arrive (pump).
        struct Deferred {
            std::vector<unsigned char> msg;
            Ack ack;
            const void* data;
            std::size_t data_len;
            void* answer_buf;
            std::size_t answer_len;
            int answer_src_page;
            bool has_landing;
            Landing landing;
            std::uint64_t seq;
            // What it holds while deferred (a bounce is taken only when it leaves).
            std::size_t bytes() const { return msg.capacity() + landing.buf.capacity(); }
        };
        std::deque<Deferred> deferred;  // (mu)
        std::atomic<std::size_t> deferred_bytes{0};  // their messages' and landings' bytes
        // Threads inside send() for this peer: pollers (progress thread, hook, request tests)
        // leave its answers alone meanwhile, or their MPI_Testsome under mu (which moves the
        // answers' data) would hold each post up.
        std::atomic<int> posting{0};
        std::atomic<std::uint64_t> deferred_ns{0};  // when the newest request was deferred
        // ... and for this long after that, pollers leave the peer to its poster too (it is
        // likely still posting the same operation's requests).
        static constexpr std::uint64_t kPostingQuietNs = 50'000;
        bool busy_posting() const;  // (the clock is read only while requests are deferred)
        std::uint64_t posted = 0;  // sequence number of the newest request sent (mu)
    };
    // Appends one record (kind, body parts) to rank's batch, sending the batch first when
    // the record does not fit. p.mu held.
    void batch_append(Peer& p, int rank, std::uint32_t kind, const void* a, std::size_t alen, const void* b,
                      std::size_t blen);
    // p.mu held; flags: bits or'ed into the record's op (kNotifyAnyEpoch).
    void append_notify(Peer& p, int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                       std::uint64_t flags = 0);
    void notify_locked(Peer& p, int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                       std::uint64_t flags = 0);  // ... and sent
    void send_batch(Peer& p, int rank, Ack ack);  // p.mu held; no-op when no batch is open
    // A record into rank's batch, then flow control; op: an operation's record, refused
    // (Post::retry) when admit() would refuse it.
    Post batched(int rank, std::uint32_t kind, const void* a, std::size_t alen, const void* b, std::size_t blen,
                 bool op);
    std::atomic<int> batches_open_{0};
    // Sends msg (its Header's reply_tag patched when an answer is wanted) and, for put data,
    // the payload after it, under the peer's mutex so that sequence numbers follow MPI's order.
    // answer_buf/answer_len: where the answer lands (a get's data; null for an empty ack).
    // Returns the request's sequence number.
    std::uint64_t send(int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data = nullptr,
                       std::size_t data_len = 0, void* answer_buf = nullptr, std::size_t answer_len = 0,
                       int answer_src_page = -1, bool reap_first = true, Landing* landing = nullptr);
    // answer_src_page: the page offset of the answer's data at the target (a get), so that
    // an answer buffer at a slow distance from it is received through a bounce buffer.
    std::uint64_t send_locked(Peer& p, int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data,
                              std::size_t data_len, void* answer_buf, std::size_t answer_len, int answer_src_page = -1,
                              bool reap_first = true, Landing* landing = nullptr);
    // send_locked's second half for request seq (numbered, stamped): the answer's receive,
    // then the sends. A request that cannot leave takes its number back (with every
    // deferred one after it): returns seq - 1 then.
    std::uint64_t post_now(Peer& p, int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data,
                           std::size_t data_len, void* answer_buf, std::size_t answer_len, int answer_src_page,
                           Landing* landing, std::uint64_t seq);
    // Sends deferred requests while the window has room (p.mu held); the one that fills it
    // asks for an answer, so that the rest can follow.
    void pump(Peer& p);
    std::atomic<int> deferred_peers_{0};  // peers with deferred requests
    // A peer's deferred bytes beyond which the posting thread waits (throttle) and new
    // operations are refused (admit), as without deferral: memory stays bounded whatever the
    // operation's size. The window's worth of full messages (256 x 64 KiB = 16 MiB).
    std::size_t deferred_max() const { return std::size_t(max_unanswered_) * kMaxMessage; }
    // send_locked's sends, request seq (answered: its answer's receive is posted, the newest
    // entry). A request that cannot leave takes its number back: returns seq - 1 then.
    std::uint64_t send_request(Peer& p, int rank, std::vector<unsigned char>&& msg, const void* data,
                               std::size_t data_len, std::uint64_t seq, bool answered);
    // landing: where the answer lands instead (a gathered get's buffer and its scatter list).
    // reap_first: one pass over what is in flight before sending when large messages are
    // on their way (their rendezvous advances only inside our MPI calls). A get leaves
    // without it: the host would pull the previous pieces' data inside the posting call.
    void reap(Peer& p);  // p.mu held: drop completed sends and answers
    void reap_answers(Peer& p);
    void reap_sends(Peer& p);
    // MPI_Testall, serving meanwhile; false: given up, rank (>= 0) being dead (the requests
    // freed, still active: their buffers must outlive them).
    bool wait_all_serving(std::vector<MPI_Request>& rqs, int rank = -1);
    std::vector<std::vector<unsigned char>> abandoned_;  // buffers of sends to a dead peer (abandoned_mu_)
    std::mutex abandoned_mu_;
    template <class Done>
    void wait_until(int rank, Done done);  // serving meanwhile, until done(peer) (p.mu held)
    void wait_answer(int rank, std::uint64_t seq);
    void note_answered(Peer& p, std::uint64_t seq);
    void throttle(int rank);  // flow control after a request: waits once deferral is full
    // The landing of a strided answer: `pieces` of `piece` bytes packed (a bounce from the
    // peer's spares) plus the applied byte, scattered to dst at stride on arrival.
    Landing strided_landing(int rank, void* dst, std::uint64_t pieces, std::size_t piece, std::int64_t stride);
    // Room for a new operation's requests (the soft bound), or for deferring them: two
    // loads when there is.
    bool admit(int rank) {
        const Peer& p = peers_[std::size_t(rank)];
        return p.sent.load(std::memory_order_relaxed) - p.answered.load(std::memory_order_acquire) < max_unanswered_ ||
               p.deferred_bytes.load(std::memory_order_relaxed) < deferred_max() || admit_full(rank);
    }
    bool admit_full(int rank);  // ... and when there is not: take in answers, ask for one
    void complete_sends(int rank);
    // flush(): what it must wait for, requested. reap_first: take in the answers that have
    // arrived first (mark() does not: the host would move pending answers' data inside it).
    std::uint64_t flush_start(int rank, bool reap_first = true);
    void flush_finish(int rank, std::uint64_t upto);
    std::unique_ptr<Peer[]> peers_;

    MPI_Comm comm_ = MPI_COMM_NULL;
    const std::uint64_t max_unanswered_;  // the flow-control window (admit; twice it: throttle)
    AmLocal local_;
    int err_ = MPI_SUCCESS;
    std::atomic<int> tag_{0};
    std::mutex serve_mu_;  // one server at a time keeps requests in arrival order
    // The ring of pre-posted receives for requests (persistent), served in posting order.
    static constexpr int kRing = 8;
    std::vector<unsigned char> ring_buf_;
    MPI_Request ring_[kRing];
    int ring_head_ = 0;  // serve_mu_
    // Answers on their way back (serve_mu_): completed by later polls.
    std::vector<MPI_Request> replies_rq_;
    std::vector<PageOffsetBuffer> replies_buf_;  // owned answers (empty: sent from the window)
    std::vector<PageOffsetBuffer> spares_;  // bounce buffers for reuse (serve_mu_)
    std::vector<int> reply_idx_;
    // Receives of put payloads posted and not yet complete (serve_mu_): every later
    // request, and any ack, waits for them (requests apply in order).
    std::vector<MPI_Request> data_rq_;
    std::vector<Landing> data_land_;  // beside data_rq_: where each payload lands
    PageOffsetBuffer acc_scratch_;  // a large accumulate's origin data (serve_mu_)
    // Dynamic windows: requests refused per origin (serve_mu_; sized on the first), and the
    // check itself: false (and the origin told) when [off, off + n) is not attached here.
    std::vector<std::uint64_t> rejected_;
    bool accepts(int source, std::uint64_t off, std::uint64_t n);
    // Strided requests' runs (pieces of elems elements at toff + i * stride, origin data and
    // old values packed; either may be null) through local_.accumulate_strided, or run by
    // run through local_.accumulate where it has none. An MPI error class.
    int accumulate_runs(int rma_kind, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                        std::uint64_t elems, std::uint64_t pieces, std::uint64_t eb, const void* src, void* res);
    void refuse(int source);  // the notice of accepts() (serve_mu_ held)
    void discard_data(int source);  // consumes a payload message that is not applied (serve_mu_ held)
    // The payload of source's request: its receive into dst started (*rq) when it is want
    // bytes long; else received and dropped, false (serve_mu_ held).
    // A payload that has not arrived within payload_wait_: false, the failure recorded.
    bool receive_payload(int source, void* dst, std::size_t want, MPI_Request* rq);
    std::chrono::milliseconds payload_wait_{5000};
    void serve_ring();  // serve_mu_ held: every request the ring has received
    std::uint64_t served_ring_ = 0;  // ring messages served (serve_mu_)
    // Origins whose lock request could not be granted yet (serve_mu_): their requests, in
    // arrival order, from the rest of the batch that held the request on.
    // Also origins whose requests come from a fence epoch this process has not reached yet
    // (lock false: until fence_epoch_ >= epoch).
    // Also origins whose requests belong to a PSCW access epoch this process has not posted
    // for yet (pscw: until Peer::posted_to >= the stamp).
    enum class Why { lock, fence, pscw };
    struct Parked {
        bool active = false;
        Why why = Why::lock;
        Transport::LockRequest what{};
        std::uint32_t epoch = 0;  // fence: the epoch; pscw: the stamp
        std::vector<std::vector<unsigned char>> msgs;
    };
    std::vector<Parked> parked_;
    std::atomic<int> parked_n_{0};
    int park_next_ = 0;
    void park(int source, Transport::LockRequest what, const Header& h, const unsigned char* rest, std::size_t rest_len,
              std::uint32_t rest_records);
    Parked& start_parking(int source);  // serve_mu_ held: source's requests wait from now on
    // serve_mu_ held: a message of a parked origin (its header h, nrec records) joins pk's
    // queue, less what applies at once (kNotifyAnyEpoch notifies).
    void keep_parked(Parked& pk, const Header& h, const unsigned char* recs, std::size_t len, std::uint32_t nrec);
    void park_until(int source, Why why, std::uint32_t n, const unsigned char* msg, std::size_t len);
    bool retry_parked();  // serve_mu_ held: grants what it can and serves what waited
    std::atomic<std::uint32_t> fence_epoch_{0};  // fences this process completed on the window
    std::atomic<std::uint64_t> served_{0};  // requests applied here (from every origin)
    void complete_data();
    void land_data();  // after data_rq_ completed: bounce copies, then clear both
    void reap_replies();
    int nprocs_ = 0;
    std::function<void()> on_wait_;
    std::function<int(int)> gone_;
    // A wait for rank given up: it is known dead (gone_), the failure recorded. Asked when
    // alive is due (every kAliveCheckNs of the wait).
    bool given_up(int rank, Every& alive);
    std::vector<std::uint16_t> peer_page_;  // page offset of each rank's window base
};

// The transport object of one window: its endpoint, reached through the Transport
// interface (PeerRegion::rank names the peer).
class AmTransport final : public Transport {
public:
    // strided: put_strided is offered (caps().strided_piece_max; FASTRMA_AM_STRIDED=0: not).
    explicit AmTransport(std::unique_ptr<AmEndpoint> ep, bool strided = true) : ep_(std::move(ep)), strided_(strided) {}
    const char* name() const override { return "am"; }
    Caps caps(const PeerRegion&) const override {
        Caps c{false, false, true, true, true};
        c.gates_access = true;
        c.inline_max = AmEndpoint::kBatchItemMax;
        c.strided_piece_max = strided_ ? AmEndpoint::kStridedPieceMax : 0;
        return c;
    }
    Post put(const PeerRegion& p, const Chunk* c, std::size_t n) override { return ep_->put(p.rank, c, n); }
    Post get(const PeerRegion& p, const Chunk* c, std::size_t n) override { return ep_->get(p.rank, c, n); }
    Post put_strided(const PeerRegion& p, const void* local, std::int64_t lstride, std::uint64_t offset,
                     std::int64_t rstride, std::size_t len, std::uint64_t n) override {
        return ep_->put_strided(p.rank, local, lstride, offset, rstride, len, n);
    }
    Post get_strided(const PeerRegion& p, void* local, std::int64_t lstride, std::uint64_t offset, std::int64_t rstride,
                     std::size_t len, std::uint64_t n) override {
        return ep_->get_strided(p.rank, local, lstride, offset, rstride, len, n);
    }
    Post accumulate_strided(const PeerRegion& p, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                            std::int64_t rstride, std::uint64_t elems, std::size_t elem_bytes, const void* src,
                            std::int64_t lstride, std::uint64_t n) override {
        return ep_->accumulate_strided(p.rank, rma_kind, op_id, type_id, toff, rstride, elems, elem_bytes, src, lstride,
                                       n);
    }
    Post get_accumulate_strided(const PeerRegion& p, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                                std::int64_t rstride, std::uint64_t elems, std::size_t elem_bytes, const void* src,
                                std::int64_t lstride, void* result, std::int64_t res_stride, std::uint64_t n) override {
        return ep_->get_accumulate_strided(p.rank, rma_kind, op_id, type_id, toff, rstride, elems, elem_bytes, src,
                                           lstride, result, res_stride, n);
    }
    std::uint64_t atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override {
        return ep_->atomic8(p.rank, word, op, operand, compare);
    }
    std::uint64_t atomic8_start(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                                std::uint64_t compare, std::uint64_t* old) override {
        return ep_->atomic8_start(p.rank, word, op, operand, compare, old);
    }
    void atomic8_finish(const PeerRegion& p, std::uint64_t token) override { ep_->atomic8_finish(p.rank, token); }
    void notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override {
        ep_->notify8(p.rank, word, op, operand);
    }
    void complete_notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override {
        ep_->complete_notify8(p.rank, word, op, operand);
        ep_->end_access(p.rank);  // (after an ungated start: a no-op)
    }
    void lock_request(const PeerRegion& p, LockRequest what) override { ep_->lock_request(p.rank, what); }
    void release(const PeerRegion& p, const Release* r, std::size_t n) override { ep_->release(p.rank, r, n); }
    std::uint64_t mark(const PeerRegion& p) override { return ep_->mark(p.rank); }
    bool reached(const PeerRegion& p, std::uint64_t token) override { return ep_->reached(p.rank, token); }
    void flush(const PeerRegion& p) override { ep_->flush(p.rank); }
    void flush_local(const PeerRegion& p) override { ep_->flush_local(p.rank); }
    Post accumulate(const PeerRegion& p, int rma_kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n,
                    std::size_t elem_bytes, const void* src, const void* compare, void* result) override {
        return ep_->accumulate(p.rank, rma_kind, op_id, type_id, toff, n, elem_bytes, src, compare, result);
    }
    void read_state(const PeerRegion& p, std::size_t word, std::size_t count, std::uint64_t* out) override {
        ep_->read_state(p.rank, word, count, out);
    }
    void collect_refusals() override { ep_->serve_arrived(); }
    int failed(const PeerRegion&, const char* call) override {
        std::string what;
        const int e = ep_->take_failure(&what);
        return e ? raise(e, "%s: %s", call, what.c_str()) : MPI_SUCCESS;
    }
    std::uint64_t refused(const PeerRegion& p) override { return ep_->take_rejected(p.rank); }
    void open_gate(const PeerRegion& p) override { ep_->post_to(p.rank); }
    bool gate_ready(const PeerRegion& p) override { return ep_->may_start(p.rank); }
    void enter_gate(const PeerRegion& p) override { ep_->begin_access(p.rank); }
    void flush_all() override { ep_->flush_all(); }
    int fence_sync(Bootstrap&) override { return ep_->fence(); }
    int close_sync(Bootstrap&) override {
        ep_->quiesce();  // one-way messages of ours applied, too
        return ep_->barrier();
    }
    bool serve() override { return ep_->poll(); }
    bool progress() override {
        const bool served = ep_->poll();
        return ep_->send_old_batches() || served;
    }
    bool has_waiting() const override { return ep_->has_parked(); }
    void sync_served() override { ep_->sync_with_server(); }
    void settle() override { ep_->settle(); }
    void set_on_wait(std::function<void()> f) override { ep_->set_on_wait(std::move(f)); }
    void set_peer_gone(std::function<int(int)> gone) override { ep_->set_peer_gone(std::move(gone)); }
    void set_served_elsewhere(bool yes) override { ep_->set_served_elsewhere(yes); }

private:
    std::unique_ptr<AmEndpoint> ep_;
    bool strided_;
};

}  // namespace fastrma::detail
