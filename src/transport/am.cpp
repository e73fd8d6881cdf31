// am.cpp — see am.hpp.
#include "transport/am.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/errors.hpp"
#include "base/stats.hpp"
#include "ops/copy.hpp"
#include "ops/state_words.hpp"
#include "progress/host_progress.hpp"
#include "progress/progress.hpp"
#include "progress/spin_wait.hpp"

namespace fastrma::detail {

namespace {
constexpr int kTagRequest = 7;
constexpr int kTagData = AmEndpoint::kPayloadTag;  // the payload of a kPutData (in place) or kAccData request
// Pieces at least this long travel as a header plus the user's own buffer, received
// straight into the window: no packing at the origin, no copy out of a bounce buffer at
// the target (above Open MPI's eager limit the host moves it with one copy). Below it a
// put is one message that stays within the eager limit (4096 B with our 80 B of header),
// so a 4 KiB put never goes rendezvous.
constexpr std::uint64_t kZeroCopyMin = 4000;
// ... in pieces of this size, whose receives the target posts as their headers arrive
// without waiting for each (pipelined; the piece sizes tried: docs/performance.md).
constexpr std::uint64_t kZeroCopyMax = 1024 * 1024;
// A get's answer is one message up to this size: the origin pulls it inside its flush
// whatever its size (no overlap to keep), and fewer rendezvous beat a train of them; larger
// gets go in 1 MiB pieces, which keeps sanitizer runs of the large-transfer tests fast
// (docs/performance.md).
constexpr std::uint64_t kGetPieceMax = 1024 * 1024;
// The largest accumulate run the ops layer sends (issue.cpp: runs up to 256 KiB).
constexpr std::uint64_t kAccRunMax = 256 * 1024;
constexpr int kTagReply0 = 1000;
// Messages up to this size leave eagerly (Open MPI's shared-memory eager limit); larger ones
// and larger answers move only while we call MPI (see send()).
constexpr std::size_t kEagerMax = 4096;
constexpr int kTagReplySpan = 1 << 20;

enum Kind : std::uint32_t {
    kPut = 1,
    kGet,
    kAtomic8,
    kAccumulate,
    kFlush,
    kReadState,
    kPutData,
    kBatch,
    kAccData,
    kLockReq,
    kRejected,  // target -> origin: a = its refusals of that origin's requests so far
    kPosted,  // target -> origin: a = its PSCW posts to that origin so far
    // a = target offset of the first piece, b = piece bytes, c = pieces; body: i64 target
    // stride, then the pieces packed.
    kPutStrided,
    // op_id, type_id, rma_kind (acc); a = target offset of the first piece, b = elements a
    // piece, c = element bytes; body: i64 target stride, u64 pieces, then the pieces'
    // origin data packed.
    kAccStrided,
    // a = target offset of the first piece, b = piece bytes, c = pieces (at most kMaxMessage
    // bytes of them); body: i64 target stride. Answer: the pieces packed, then a byte (1:
    // applied).
    kGetStrided,
    // op_id, type_id, rma_kind (get_acc); a = target offset of the first piece, b = elements
    // a piece, c = element bytes, aop & 4: origin data follows (else MPI_NO_OP); body: i64
    // target stride, u64 pieces (at most kMaxMessage bytes of them), then the pieces' origin
    // data packed. Answer: the old values packed, then a byte (1: applied).
    kGetAccStrided
};

// A batch record: u32 kind, u32 body bytes, body. kPut body: u64 offset, data.
// kAccumulate body: AccRecord, then the origin data (flags & 4). kAtomic8: NotifyRecord.
// kLockReq: u64 Transport::LockRequest.
struct AccRecord {
    std::int32_t op_id, type_id, rma_kind;
    std::uint32_t flags;
    std::uint64_t toff, n, elem_bytes;
};
// kAtomic8 body (a notify: no answer): a state word, the operand, the AtomicOp.
struct NotifyRecord {
    std::uint64_t word, operand, op;
};
// NotifyRecord.op bit: the notify belongs to none of its origin's epochs at this target (an
// announcement to a lock master of a lock held elsewhere, or of a lock_all attempt undone):
// applied even while that origin's requests wait behind a lock request of its here.
constexpr std::uint64_t kNotifyAnyEpoch = 1ull << 32;

template <class T>
void append(std::vector<unsigned char>& v, const T& x) {
    const auto* p = reinterpret_cast<const unsigned char*>(&x);
    v.insert(v.end(), p, p + sizeof x);
}
void append_bytes(std::vector<unsigned char>& v, const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    v.insert(v.end(), b, b + n);
}
}  // namespace

struct AmEndpoint::Header {
    std::uint32_t kind;
    std::uint32_t nseg;
    std::int32_t reply_tag;  // -1: no answer wanted
    std::int32_t op_id;
    std::int32_t type_id;
    std::int32_t rma_kind;
    std::uint64_t a, b, c;  // kind-specific: word/operand/compare, toff/n/elem_bytes
    std::uint32_t aop;  // AtomicOp; accumulate: has_result | has_compare << 1
    // Page offsets + 1 (0: not given) of the origin's buffers for this request, bits 0-15:
    // the payload sent behind it, bits 16-31: the answer's buffer (see slow_distance()).
    std::uint32_t pages;
    // The fences the origin had completed on the window when it sent this (send_locked): a
    // target that has completed fewer holds it back (see fence()).
    std::uint32_t epoch = 0;
    // The origin's PSCW access epoch to this target that the request belongs to (its count of
    // them; 0: none): a target that has posted fewer times to the origin holds it back.
    std::uint32_t pscw = 0;
};

// A request as serve() hands it to its handler: the header (copied out of the message), the
// whole message, its body after the header, and the origin.
struct AmEndpoint::Incoming {
    const Header& h;
    const unsigned char* msg;
    std::size_t len;
    const unsigned char* p;
    int source;
};

AmEndpoint::AmEndpoint(MPI_Comm comm, AmLocal local, int window)
    : max_unanswered_(std::uint64_t(window < 1 ? 1 : window)), local_(std::move(local)) {
    for (auto& r : ring_) r = MPI_REQUEST_NULL;
    err_ = PMPI_Comm_dup(comm, &comm_);
    if (err_ != MPI_SUCCESS) {
        comm_ = MPI_COMM_NULL;
        return;
    }
    if (!host_ok(PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler") ||
        !host_ok(PMPI_Comm_size(comm_, &nprocs_), "MPI_Comm_size")) {
        err_ = take_failure(nullptr);
        PMPI_Comm_free(&comm_);  // (its own failure changes nothing: creation fails anyway)
        comm_ = MPI_COMM_NULL;
        return;
    }
    peers_.reset(new Peer[std::size_t(nprocs_)]);
    // Each base's page offset: where a get's data starts within its page, known at the origin.
    peer_page_.resize(std::size_t(nprocs_));
    const std::uint16_t mine = std::uint16_t(reinterpret_cast<std::uintptr_t>(local_.base) & 4095);
    err_ = PMPI_Allgather(&mine, 1, MPI_UINT16_T, peer_page_.data(), 1, MPI_UINT16_T, comm_);
    // Reply tags below the host's MPI_TAG_UB (the same value in every process).
    int* tag_ub = nullptr;
    int flag = 0;
    if (!host_ok(PMPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &flag), "MPI_Comm_get_attr(MPI_TAG_UB)")) flag = 0;
    const int span = reply_tag_span(flag && tag_ub ? *tag_ub : 32767);
    if (err_ == MPI_SUCCESS && span == 0) err_ = MPI_ERR_INTERN;
    tag_mask_ = span ? span - 1 : 0;
    if (err_ == MPI_SUCCESS && !start_ring()) err_ = MPI_ERR_INTERN;
    if (err_ == MPI_SUCCESS && failed_.load()) err_ = take_failure(nullptr);
}

AmEndpoint::~AmEndpoint() {
    // Teardown reports to no one: a failure of the calls below leaves a request or the
    // communicator to the host's own finalization.
    int finalized = 0;
    if (PMPI_Finalized(&finalized) != MPI_SUCCESS) finalized = 1;
    if (comm_ != MPI_COMM_NULL && !finalized) {
        for (int r = 0; r < nprocs_; ++r) {
            // acks not yet reaped, requests not yet sent
            wait_until(r, [](const Peer& p) { return p.answers.empty() && p.deferred.empty(); });
            complete_sends(r);
        }
        {
            std::lock_guard lk(serve_mu_);
            for (auto& rq : replies_rq_) wait_by_test(&rq);  // every origin has taken its answers
            replies_rq_.clear();
            replies_buf_.clear();
        }
        stop_ring();
        PMPI_Comm_free(&comm_);
    }
}

// Pre-posted receives: an incoming request lands straight in one of these buffers (no
// probe, no allocation, no copy out of the host's unexpected-message buffers).
bool AmEndpoint::start_ring() {
    ring_buf_.resize(std::size_t(kRing) * kMaxRequest);
    for (int i = 0; i < kRing; ++i) {
        if (!host_ok(PMPI_Recv_init(ring_buf_.data() + std::size_t(i) * kMaxRequest, int(kMaxRequest), MPI_BYTE,
                                    MPI_ANY_SOURCE, kTagRequest, comm_, &ring_[i]),
                     "MPI_Recv_init"))
            return false;
        if (!host_ok(PMPI_Start(&ring_[i]), "MPI_Start")) return false;
    }
    return true;
}

void AmEndpoint::stop_ring() {
    // Called after the window's closing barrier: no request is on its way to us.
    for (auto& rq : ring_) {
        if (rq == MPI_REQUEST_NULL) continue;
        if (PMPI_Cancel(&rq) == MPI_SUCCESS) wait_by_test(&rq);
        if (rq != MPI_REQUEST_NULL) PMPI_Request_free(&rq);  // (teardown: see ~AmEndpoint)
    }
}

int AmEndpoint::next_tag() { return kTagReply0 + (tag_.fetch_add(1, std::memory_order_relaxed) & tag_mask_); }

int AmEndpoint::reply_tag_span(int tag_ub) {
    // Reply tags run over [kTagReply0, kTagReply0 + span), span a power of two (next_tag
    // masks), and must stay <= MPI_TAG_UB (MPI guarantees only 32767). 0: too small.
    if (tag_ub < kTagReply0 + 255) return 0;
    int span = kTagReplySpan;
    while (kTagReply0 + span - 1 > tag_ub) span >>= 1;
    return span;
}

void AmEndpoint::note_answered(Peer& p, std::uint64_t seq) {
    std::uint64_t cur = p.answered.load(std::memory_order_relaxed);
    while (cur < seq && !p.answered.compare_exchange_weak(cur, seq, std::memory_order_release)) {}
}

bool AmEndpoint::host_ok(int rc, const char* call, int rank) {
    if (rc == MPI_SUCCESS) return true;
    int cls = MPI_ERR_OTHER;
    if (PMPI_Error_class(rc, &cls) != MPI_SUCCESS || cls == MPI_SUCCESS) cls = MPI_ERR_OTHER;
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error code %d", rc);
    char what[MPI_MAX_ERROR_STRING + 160];
    if (rank >= 0)
        std::snprintf(what, sizeof what, "the host MPI's %s (rank %d) failed in the am transport: %s", call, rank,
                      text);
    else
        std::snprintf(what, sizeof what, "the host MPI's %s failed in the am transport: %s", call, text);
    note_failure(cls, what);
    return false;
}

void AmEndpoint::note_failure(int cls, const char* what) {
    std::lock_guard lk(failure_mu_);
    if (failure_class_ == MPI_SUCCESS) {  // the first one is reported; later ones follow from it
        failure_class_ = cls;
        failure_ = what;
    }
    failed_.store(true, std::memory_order_release);
}

int AmEndpoint::take_failure(std::string* what) {
    if (!failed_.load(std::memory_order_acquire)) return MPI_SUCCESS;
    std::lock_guard lk(failure_mu_);
    const int cls = failure_class_;
    if (what) *what = std::move(failure_);
    failure_.clear();
    failure_class_ = MPI_SUCCESS;
    failed_.store(false, std::memory_order_relaxed);
    return cls;
}

namespace {
// One MPI_Testsome over rqs (one pass of the host's progress engine), then the completed
// entries go: done(i) for each, and the rest move to the front with move(to, from) keeping
// their parallel data beside them. Returns the new length; the caller shrinks the parallel
// arrays to it. Never moves an entry onto itself (a vector moved onto itself frees its
// buffer: an answer in flight was once sent from freed memory that way).
// rc: MPI_Testsome's return code (a request that completed in error is freed by the host and
// counts as done).
template <class Done, class Move>
std::size_t test_and_compact(std::vector<MPI_Request>& rqs, std::vector<int>& idx, int& rc, Done done, Move move) {
    if (idx.size() < rqs.size()) idx.resize(rqs.size());
    int outcount = 0;
    rc = PMPI_Testsome(int(rqs.size()), rqs.data(), &outcount, idx.data(), MPI_STATUSES_IGNORE);
    std::size_t keep = 0;
    for (std::size_t i = 0; i < rqs.size(); ++i) {
        if (rqs[i] == MPI_REQUEST_NULL) {
            done(i);
            continue;
        }
        if (keep != i) {
            rqs[keep] = rqs[i];
            move(keep, i);
        }
        ++keep;
    }
    rqs.resize(keep);
    return keep;
}
}  // namespace

void AmEndpoint::reap_sends(Peer& p) {
    if (p.send_rq.empty()) return;
    int rc = MPI_SUCCESS;
    const std::size_t n = test_and_compact(
        p.send_rq, p.testsome_idx, rc,
        [&](std::size_t i) {
            p.big_in_flight -= p.send_big[i];
            // A sent batch's buffer serves the next batch (no 4 KiB malloc per message).
            if (p.send_buf[i].capacity() >= kBatchMax && p.spare_batches.size() < 4)
                p.spare_batches.push_back(std::move(p.send_buf[i]));
        },
        [&](std::size_t to, std::size_t from) {
            p.send_buf[to] = std::move(p.send_buf[from]);
            p.send_big[to] = p.send_big[from];
        });
    p.send_buf.resize(n);
    p.send_big.resize(n);
    host_ok(rc, "MPI_Testsome (sends)");
}

void AmEndpoint::reap_answers(Peer& p) {
    // Any order (different tags); each one's arrival means the target applied every
    // request up to its sequence number.
    if (p.answer_rq.empty()) return;
    int rc = MPI_SUCCESS;
    const std::size_t n = test_and_compact(
        p.answer_rq, p.testsome_idx, rc,
        [&](std::size_t i) {
            note_answered(p, p.answers[i].seq);
            if (p.answers[i].ack) p.ack_in_flight = false;
            if (p.answers[i].big) --p.big_in_flight;
            p.answers[i].land.finish(p.spares);
        },
        [&](std::size_t to, std::size_t from) { p.answers[to] = std::move(p.answers[from]); });
    p.answers.resize(n);
    host_ok(rc, "MPI_Testsome (answers)");
}

void AmEndpoint::reap(Peer& p) {
    reap_sends(p);
    reap_answers(p);
    if (!p.deferred.empty()) pump(p);
}

std::uint64_t AmEndpoint::send(int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data,
                               std::size_t data_len, void* answer_buf, std::size_t answer_len, int answer_src_page,
                               bool reap_first, Landing* landing) {
    Peer& p = peers_[std::size_t(rank)];
    p.posting.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t seq;
    {
        std::lock_guard lk(p.mu);
        send_batch(p, rank, Ack::none);  // what was batched goes first: order per target
        seq = send_locked(p, rank, std::move(msg), ack, data, data_len, answer_buf, answer_len, answer_src_page,
                          reap_first, landing);
    }
    p.posting.fetch_sub(1, std::memory_order_relaxed);
    return seq;
}

void AmEndpoint::send_batch(Peer& p, int rank, Ack ack) {
    if (p.batch.empty()) return;
    auto* h = reinterpret_cast<Header*>(p.batch.data());
    h->nseg = p.batch_records;
    std::vector<unsigned char> msg = std::move(p.batch);
    p.batch.clear();
    p.batch_records = 0;
    batches_open_.fetch_sub(1, std::memory_order_relaxed);
    send_locked(p, rank, std::move(msg), ack, nullptr, 0, nullptr, 0);
}

void AmEndpoint::batch_append(Peer& p, int rank, std::uint32_t kind, const void* a, std::size_t alen, const void* b,
                              std::size_t blen) {
    const std::size_t rec = 8 + alen + blen;
    if (!p.batch.empty() && p.batch.size() + rec > kBatchMax) send_batch(p, rank, Ack::maybe);
    if (p.batch.empty()) {
        if (!p.spare_batches.empty()) {
            p.batch = std::move(p.spare_batches.back());
            p.spare_batches.pop_back();
            p.batch.clear();
        } else {
            p.batch.reserve(kBatchMax);
        }
        p.batch.resize(sizeof(Header));
        const Header h{kBatch, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(p.batch.data(), &h, sizeof h);
        p.batch_opened_ns = now_ns();
        batches_open_.fetch_add(1, std::memory_order_relaxed);
    }
    const std::uint32_t rh[2] = {kind, std::uint32_t(alen + blen)};
    append_bytes(p.batch, rh, sizeof rh);
    append_bytes(p.batch, a, alen);
    if (blen) append_bytes(p.batch, b, blen);
    ++p.batch_records;
}

Post AmEndpoint::batched(int rank, std::uint32_t kind, const void* a, std::size_t alen, const void* b, std::size_t blen,
                         bool op) {
    Peer& p = peers_[std::size_t(rank)];
    {
        std::lock_guard lk(p.mu);
        // An operation's admission is tested here, where the peer's line is ours anyway.
        const bool room = !op || p.sent.load(std::memory_order_relaxed) - p.answered.load(std::memory_order_acquire) <
                                     max_unanswered_;
        if (room) batch_append(p, rank, kind, a, alen, b, blen);
        op = !room;
    }
    if (op) return admit_full(rank) ? batched(rank, kind, a, alen, b, blen, false) : Post::retry;
    throttle(rank);
    return Post::posted;  // copied into the batch (the caller's buffer is free), applied by the flush
}

bool AmEndpoint::send_old_batches() {
    if (batches_open_.load(std::memory_order_relaxed) == 0) return false;
    const std::uint64_t now = now_ns();
    bool any = false;
    for (int r = 0; r < nprocs_; ++r) {
        Peer& p = peers_[std::size_t(r)];
        std::unique_lock lk(p.mu, std::try_to_lock);  // busy: its owner sends it soon enough
        if (!lk.owns_lock() || p.batch.empty() || now - p.batch_opened_ns < kBatchAgeNs) continue;
        send_batch(p, r, Ack::maybe);
        any = true;
    }
    return any;
}

std::uint64_t AmEndpoint::send_locked(Peer& p, int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data,
                                      std::size_t data_len, void* answer_buf, std::size_t answer_len,
                                      int answer_src_page, bool reap_first, Landing* landing) {
    // One pass over what is in flight while a large message or answer is on its way: it is
    // the host's progress for them, whose rendezvous advance only inside an MPI call of
    // ours (docs/performance.md). Small messages leave eagerly: their sends and acks are reaped at
    // the next flush (or every 64 sends), two MPI calls per small put saved. Not for gets
    // (!reap_first) nor while requests are deferred: the pass would move the answers' data
    // here, inside the posting call (pollers and the flush take them in; the window bounds
    // what is in flight).
    if (reap_first && p.deferred.empty() && (p.big_in_flight || p.send_rq.size() >= 64)) reap(p);
    auto* h = reinterpret_cast<Header*>(msg.data());
    h->epoch = fence_epoch_.load(std::memory_order_relaxed);
    h->pscw = p.pscw_stamp;
    const std::uint64_t seq = p.sent.load(std::memory_order_relaxed) + 1;
    p.sent.store(seq, std::memory_order_relaxed);
    // Beyond the window (twice the soft bound), the request waits here, numbered, until
    // answers make room: the posting thread goes on. An answer covering everything sent must
    // be on its way for that; if none is, this request goes now and asks for it.
    if (!p.deferred.empty() || p.posted - p.answered.load(std::memory_order_acquire) >= 2 * max_unanswered_) {
        const bool answer_coming = !p.answers.empty() && p.answers.back().seq == p.posted;
        if (!p.deferred.empty() || answer_coming) {
            if (p.deferred.empty()) deferred_peers_.fetch_add(1, std::memory_order_relaxed);
            p.deferred.push_back(Peer::Deferred{std::move(msg), ack, data, data_len, answer_buf, answer_len,
                                                answer_src_page, landing != nullptr,
                                                landing ? std::move(*landing) : Landing{}, seq});
            p.deferred_bytes.fetch_add(p.deferred.back().bytes(), std::memory_order_relaxed);
            p.deferred_ns.store(now_ns(), std::memory_order_relaxed);
            return seq;
        }
        ack = Ack::always;
    }
    return post_now(p, rank, std::move(msg), ack, data, data_len, answer_buf, answer_len, answer_src_page, landing,
                    seq);
}

bool AmEndpoint::Peer::busy_posting() const {
    return posting.load(std::memory_order_relaxed) ||
           (deferred_bytes.load(std::memory_order_relaxed) &&
            now_ns() - deferred_ns.load(std::memory_order_relaxed) < kPostingQuietNs);
}

void AmEndpoint::pump(Peer& p) {
    const int rank = int(&p - peers_.get());
    while (!p.deferred.empty() && p.posted - p.answered.load(std::memory_order_acquire) < 2 * max_unanswered_) {
        Peer::Deferred d = std::move(p.deferred.front());
        p.deferred.pop_front();
        p.deferred_bytes.fetch_sub(d.bytes(), std::memory_order_relaxed);
        const bool fills = p.posted + 1 - p.answered.load(std::memory_order_acquire) >= 2 * max_unanswered_;
        if (fills && !p.deferred.empty()) d.ack = Ack::always;  // its answer lets the rest go
        const std::uint64_t seq = d.seq;
        if (post_now(p, rank, std::move(d.msg), d.ack, d.data, d.data_len, d.answer_buf, d.answer_len,
                     d.answer_src_page, d.has_landing ? &d.landing : nullptr, seq) != seq) {
            // It could not leave (the host failed; recorded): neither can those behind it,
            // whose numbers are taken back with its own (waits stop at the last one sent).
            for (const Peer::Deferred& rest : p.deferred)
                p.deferred_bytes.fetch_sub(rest.bytes(), std::memory_order_relaxed);
            p.deferred.clear();
            p.sent.store(seq - 1, std::memory_order_relaxed);
        }
    }
    if (p.deferred.empty()) deferred_peers_.fetch_sub(1, std::memory_order_relaxed);
}

std::uint64_t AmEndpoint::post_now(Peer& p, int rank, std::vector<unsigned char>&& msg, Ack ack, const void* data,
                                   std::size_t data_len, void* answer_buf, std::size_t answer_len, int answer_src_page,
                                   Landing* landing, std::uint64_t seq) {
    auto* h = reinterpret_cast<Header*>(msg.data());
    auto page_tag = [](const void* b, std::size_t n) -> std::uint32_t {
        return b && n >= kPageOffsetMin ? std::uint32_t(reinterpret_cast<std::uintptr_t>(b) & 4095) + 1 : 0;
    };
    // An answer that the host would copy at a slow distance from its source lands in a
    // bounce buffer at the source's page offset first (the receiver makes the host's copy:
    // the bounce is then hot in this core's cache for the copy to answer_buf).
    Landing land;
    if (landing) {
        land = std::move(*landing);
        if (!land.buf && land.take) {
            land.buf = PageOffsetBuffer::take(p.spares, land.take, 0);
            std::memset(land.buf.data() + land.zero_from, 0, land.take - land.zero_from);
        }
        answer_buf = land.buf.data();
    } else if (answer_buf && answer_src_page >= 0 && answer_len >= kPageOffsetMin &&
               slow_distance(reinterpret_cast<std::uintptr_t>(answer_buf), std::uintptr_t(answer_src_page))) {
        land = {PageOffsetBuffer::take(p.spares, answer_len, std::size_t(answer_src_page)),
                static_cast<unsigned char*>(answer_buf),
                answer_len,
                {}};
        answer_buf = land.buf.data();
    }
    h->pages = page_tag(data, data_len) | page_tag(answer_buf, answer_len) << 16;
    const bool want = ack == Ack::always || (ack == Ack::maybe && !p.ack_in_flight);
    // A host call that fails is recorded (host_ok: reported by the next completion point)
    // and leaves nothing to wait for: no answer awaited, the request's number taken back.
    if (want) {
        h->reply_tag = next_tag();
        MPI_Request rq;
        if (!host_ok(PMPI_Irecv(answer_buf, int(answer_len), MPI_BYTE, rank, h->reply_tag, comm_, &rq), "MPI_Irecv",
                     rank)) {
            h->reply_tag = -1;  // the target answers no one
            return p.posted = send_request(p, rank, std::move(msg), data, data_len, seq, false);
        }
        const bool big = answer_len > kEagerMax;
        p.answer_rq.push_back(rq);
        p.answers.push_back({seq, ack == Ack::maybe, answer_buf != nullptr, big, std::move(land)});
        if (ack == Ack::maybe) p.ack_in_flight = true;
        if (big) ++p.big_in_flight;
    } else {
        h->reply_tag = -1;
    }
    return p.posted = send_request(p, rank, std::move(msg), data, data_len, seq, want);
}

std::uint64_t AmEndpoint::send_request(Peer& p, int rank, std::vector<unsigned char>&& msg, const void* data,
                                       std::size_t data_len, std::uint64_t seq, bool answered) {
    MPI_Request rq;
    const bool big = msg.size() > kEagerMax;
    if (!host_ok(PMPI_Isend(msg.data(), int(msg.size()), MPI_BYTE, rank, kTagRequest, comm_, &rq), "MPI_Isend", rank)) {
        if (answered) {  // the answer's receive goes again (it is the newest entry)
            MPI_Request& arq = p.answer_rq.back();
            if (PMPI_Cancel(&arq) == MPI_SUCCESS) wait_by_test(&arq);
            if (p.answers.back().ack) p.ack_in_flight = false;
            if (p.answers.back().big) --p.big_in_flight;
            p.answer_rq.pop_back();
            p.answers.pop_back();
        }
        p.sent.store(seq - 1, std::memory_order_relaxed);  // never sent: not counted at the target
        return seq - 1;
    }
    p.send_rq.push_back(rq);
    p.send_buf.push_back(std::move(msg));
    p.send_big.push_back(big);
    if (big) ++p.big_in_flight;
    if (data) {
        // The payload right behind its header (same lock): another thread's pair must not
        // slip between them, or the target would receive its payload for our header. The
        // user's buffer is theirs again when this send completes (by the next flush).
        // Failed, an empty payload stands in for it: the target's receive must complete.
        if (!host_ok(PMPI_Isend(data, int(data_len), MPI_BYTE, rank, kTagData, comm_, &rq), "MPI_Isend (payload)",
                     rank) &&
            !host_ok(PMPI_Isend(nullptr, 0, MPI_BYTE, rank, kTagData, comm_, &rq), "MPI_Isend (payload)", rank))
            return seq;
        p.send_rq.push_back(rq);
        p.send_buf.emplace_back();
        p.send_big.push_back(data_len > kEagerMax);
        if (data_len > kEagerMax) ++p.big_in_flight;
    }
    return seq;
}

bool AmEndpoint::given_up(int rank, Every& alive) {
    // Asked every kAliveCheckNs of waiting, whatever the passes do (a pidfd poll each).
    if (!gone_ || !alive.due()) return false;
    // The one waited for first (the message names it), then any (one holding up its answer).
    int e = rank >= 0 ? gone_(rank) : MPI_SUCCESS;
    if (!e) e = gone_(-1);
    if (e) note_failure(e, last_error_message().c_str());
    return e != MPI_SUCCESS;
}

template <class Done>
void AmEndpoint::wait_until(int rank, Done done) {
    Peer& p = peers_[std::size_t(rank)];
    Every alive{kAliveCheckNs};
    for (SpinWait pace;;) {
        {
            std::lock_guard lk(p.mu);
            reap(p);
            if (done(p)) return;
        }
        // Serve others while waiting: a target that is itself waiting on us must progress
        // even when no progress thread runs.
        serve_while_waiting(pace);
        if (given_up(rank, alive)) return;  // (its answers never come)
    }
}

void AmEndpoint::serve_while_waiting(SpinWait& pace) {
    if (on_wait_) on_wait_();
    if (!poll()) pace.idle();
}

void AmEndpoint::wait_answer(int rank, std::uint64_t seq) {
    wait_until(rank, [seq](const Peer& p) {
        if (seq > p.posted && seq <= p.sent.load(std::memory_order_relaxed)) return false;  // deferred
        for (const Answer& a : p.answers)
            if (a.seq == seq) return false;
        return true;
    });
}

void AmEndpoint::request(int rank, std::vector<unsigned char>& msg, void* reply, std::size_t reply_len) {
    wait_answer(rank, send(rank, std::move(msg), Ack::always, nullptr, 0, reply, reply_len));
}

void AmEndpoint::complete_sends(int rank) {
    std::vector<MPI_Request> rqs;
    std::vector<std::vector<unsigned char>> bufs;
    {
        Peer& p = peers_[std::size_t(rank)];
        std::lock_guard lk(p.mu);
        // Usually every send has completed (small ones leave eagerly): reaped here, the
        // arrays keep their capacity and batch buffers go back to spare_batches.
        reap_sends(p);
        if (p.send_rq.empty()) return;
        rqs.swap(p.send_rq);
        bufs.swap(p.send_buf);
        for (std::uint8_t b : p.send_big) p.big_in_flight -= b;  // waited for below
        p.send_big.clear();
    }
    if (!wait_all_serving(rqs, rank)) {
        std::lock_guard lk(abandoned_mu_);
        for (auto& b : bufs) abandoned_.push_back(std::move(b));
    }
}

bool AmEndpoint::wait_all_serving(std::vector<MPI_Request>& rqs, int rank) {
    Every alive{kAliveCheckNs};
    for (SpinWait pace; !rqs.empty();) {
        int done = 0;
        // Failed: the requests that completed in error are freed; the rest are given up.
        if (!host_ok(PMPI_Testall(int(rqs.size()), rqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall")) return true;
        if (done) return true;
        if (!poll()) pace.idle();
        if (rank >= 0 && given_up(rank, alive)) {
            // Sends to a dead peer never complete: freed while active (the host may still
            // hold their buffers, which the caller keeps).
            for (MPI_Request& rq : rqs)
                if (rq != MPI_REQUEST_NULL) PMPI_Request_free(&rq);
            return false;
        }
    }
    return true;
}

void AmEndpoint::throttle(int rank) {
    if (peers_[std::size_t(rank)].deferred_bytes.load(std::memory_order_relaxed) > deferred_max()) flush(rank);
}

bool AmEndpoint::admit_full(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    auto room = [this, &p] {
        return p.sent.load(std::memory_order_relaxed) - p.answered.load(std::memory_order_acquire) < max_unanswered_;
    };
    // Full: take in the answers that arrived, and make sure one covering the newest request
    // is on its way (sends the open batch asking for it, or a flush request; nothing when
    // one is coming already), so that room appears without anyone flushing.
    flush_start(rank, true);
    if (room()) return true;
    bump(Stat::retries);
    return false;
}

Post AmEndpoint::put(int rank, const Chunk* chunks, std::size_t n) {
    // A small piece joins the open batch.
    if (n == 1 && chunks[0].len <= kBatchItemMax)
        return batched(rank, kPut, &chunks[0].offset, 8, chunks[0].local, chunks[0].len, true);
    if (!admit(rank)) return Post::retry;
    // One chunk below the zero-copy size: one message, within the host's eager limit.
    static_assert(sizeof(Header) + 16 + kZeroCopyMin - 1 <= kEagerMax, "must fit one eager message");
    if (n == 1 && chunks[0].len < kZeroCopyMin) {
        std::vector<unsigned char> msg;
        msg.reserve(sizeof(Header) + 16 + chunks[0].len);  // written once, not zeroed first
        const Header h{kPut, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        const std::uint64_t seg[2] = {chunks[0].offset, chunks[0].len};
        msg.resize(sizeof h + sizeof seg);
        std::memcpy(msg.data(), &h, sizeof h);
        std::memcpy(msg.data() + sizeof h, seg, sizeof seg);
        append_bytes(msg, chunks[0].local, chunks[0].len);
        send(rank, std::move(msg), Ack::maybe);
        throttle(rank);
        return Post::posted;
    }
    // Pieces of at most a message, packed into messages of at most kMaxMessage data bytes
    // and 256 segments: small strided transfers travel together, large ones are pipelined.
    // Only the last message of the transfer asks for an ack: the flush after it then needs
    // no request of its own.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> segs;
    std::vector<const unsigned char*> srcs;
    std::size_t bytes = 0;
    auto pack = [&](Ack ack) {
        if (segs.empty()) return;
        std::vector<unsigned char> msg(sizeof(Header));
        Header h{kPut, std::uint32_t(segs.size()), -1, 0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        msg.reserve(sizeof h + 16 * segs.size() + bytes);
        for (auto& s : segs) {
            append(msg, s.first);
            append(msg, s.second);
        }
        for (std::size_t k = 0; k < segs.size(); ++k) append_bytes(msg, srcs[k], segs[k].second);
        send(rank, std::move(msg), ack);
        segs.clear();
        srcs.clear();
        bytes = 0;
        throttle(rank);
    };
    for (std::size_t i = 0; i < n; ++i) {
        const Chunk& c = chunks[i];
        if (c.len >= kZeroCopyMin) {
            pack(Ack::none);  // what was packed before goes first (order per target)
            for (std::uint64_t off = 0; off < c.len; off += kZeroCopyMax) {
                const std::uint64_t piece = std::min<std::uint64_t>(kZeroCopyMax, c.len - off);
                std::vector<unsigned char> msg(sizeof(Header));
                Header h{kPutData, 1, -1, 0, 0, 0, c.offset + off, piece, 0, 0, 0};
                std::memcpy(msg.data(), &h, sizeof h);
                const bool last = i + 1 == n && off + piece == c.len;
                send(rank, std::move(msg), last ? Ack::maybe : Ack::none,
                     static_cast<const unsigned char*>(c.local) + off, piece);
                throttle(rank);
            }
            continue;
        }
        for (std::uint64_t off = 0; off < c.len;) {
            const std::uint64_t piece = std::min<std::uint64_t>(kMaxMessage, c.len - off);
            if (bytes + piece > kMaxMessage || segs.size() == 256) pack(Ack::none);
            segs.emplace_back(c.offset + off, piece);
            srcs.push_back(static_cast<const unsigned char*>(c.local) + off);
            bytes += piece;
            off += piece;
        }
    }
    pack(Ack::maybe);
    return Post::posted;
}

Post AmEndpoint::put_strided(int rank, const void* local, std::int64_t lstride, std::uint64_t offset,
                             std::int64_t rstride, std::size_t len, std::uint64_t n) {
    if (len == 0 || n == 0) return Post::done;
    if (len > kStridedPieceMax) return Post::error;  // (a request must fit the ring's receives)
    if (!admit(rank)) return Post::retry;
    // Pieces of len bytes, at most kMaxMessage bytes of them a message: one kPutStrided
    // request each (its target offset, piece size, stride, count, then the pieces packed
    // here). Only the last message asks for an ack, as put() does.
    const std::uint64_t per = std::max<std::uint64_t>(1, kMaxMessage / len);
    const auto* src = static_cast<const unsigned char*>(local);
    for (std::uint64_t i = 0; i < n;) {
        const std::uint64_t m = std::min<std::uint64_t>(per, n - i);
        const std::uint64_t toff = offset + i * std::uint64_t(rstride);  // (two's complement steps)
        std::vector<unsigned char> msg(sizeof(Header) + 8 + m * len);
        const Header h{kPutStrided, 0, -1, 0, 0, 0, toff, len, m, 0, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        std::memcpy(msg.data() + sizeof h, &rstride, 8);
        copy_strided(msg.data() + sizeof h + 8, std::int64_t(len), src + std::int64_t(i) * lstride, lstride, len, m);
        i += m;
        send(rank, std::move(msg), i == n ? Ack::maybe : Ack::none);
        throttle(rank);
    }
    return Post::posted;
}

Post AmEndpoint::accumulate_strided(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                                    std::int64_t rstride, std::uint64_t elems, std::size_t elem_bytes, const void* src,
                                    std::int64_t lstride, std::uint64_t n) {
    const std::uint64_t len = elems * elem_bytes;
    if (len == 0 || n == 0) return Post::done;
    if (len > kStridedPieceMax) return Post::error;
    if (!admit(rank)) return Post::retry;
    // As put_strided: at most kMaxMessage bytes of pieces a kAccStrided request.
    const std::uint64_t per = std::max<std::uint64_t>(1, kMaxMessage / len);
    const auto* from = static_cast<const unsigned char*>(src);
    for (std::uint64_t i = 0; i < n;) {
        const std::uint64_t m = std::min<std::uint64_t>(per, n - i);
        std::vector<unsigned char> msg(sizeof(Header) + 16 + m * len);
        const Header h{kAccStrided, 0,          -1, op_id, type_id, rma_kind, toff + i * std::uint64_t(rstride),
                       elems,       elem_bytes, 0,  0};
        std::memcpy(msg.data(), &h, sizeof h);
        std::memcpy(msg.data() + sizeof h, &rstride, 8);
        std::memcpy(msg.data() + sizeof h + 8, &m, 8);
        copy_strided(msg.data() + sizeof h + 16, std::int64_t(len), from + std::int64_t(i) * lstride, lstride, len, m);
        i += m;
        send(rank, std::move(msg), i == n ? Ack::maybe : Ack::none);
        throttle(rank);
    }
    return Post::posted;
}

Post AmEndpoint::get_accumulate_strided(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                                        std::int64_t rstride, std::uint64_t elems, std::size_t elem_bytes,
                                        const void* src, std::int64_t lstride, void* result, std::int64_t res_stride,
                                        std::uint64_t n) {
    const std::uint64_t len = elems * elem_bytes;
    if (len == 0 || n == 0) return Post::done;
    if (len > kStridedPieceMax) return Post::error;
    if (!admit(rank)) return Post::retry;
    // At most kMaxMessage bytes of pieces a kGetAccStrided request (their origin data packed
    // here unless MPI_NO_OP), answered with their old values packed into a buffer of ours,
    // scattered to result at res_stride when the answer completes (as get_strided).
    const std::uint64_t per = std::max<std::uint64_t>(1, kMaxMessage / len);
    const auto* from = static_cast<const unsigned char*>(src);
    for (std::uint64_t i = 0; i < n;) {
        const std::uint64_t m = std::min<std::uint64_t>(per, n - i);
        std::vector<unsigned char> msg(sizeof(Header) + 16 + (src ? m * len : 0));
        const Header h{
            kGetAccStrided, 0, -1, op_id, type_id, rma_kind, toff + i * std::uint64_t(rstride), elems, elem_bytes,
            src ? 4u : 0u,  0};
        std::memcpy(msg.data(), &h, sizeof h);
        std::memcpy(msg.data() + sizeof h, &rstride, 8);
        std::memcpy(msg.data() + sizeof h + 8, &m, 8);
        if (src)
            copy_strided(msg.data() + sizeof h + 16, std::int64_t(len), from + std::int64_t(i) * lstride, lstride, len,
                         m);
        Landing land = strided_landing(rank, static_cast<unsigned char*>(result) + std::int64_t(i) * res_stride, m, len,
                                       res_stride);
        send(rank, std::move(msg), Ack::always, nullptr, 0, nullptr, m * len + 1, -1, true, &land);
        throttle(rank);
        i += m;
    }
    return Post::posted;
}

AmEndpoint::Landing AmEndpoint::strided_landing(int rank, void* dst, std::uint64_t pieces, std::size_t piece,
                                                std::int64_t stride) {
    (void)rank;
    Landing land;
    land.take = pieces * piece + 1;
    land.zero_from = pieces * piece;  // nothing applied until told
    land.dst = static_cast<unsigned char*>(dst);
    land.pieces = pieces;
    land.piece = piece;
    land.lstride = stride;
    return land;
}

Post AmEndpoint::get_strided(int rank, void* local, std::int64_t lstride, std::uint64_t offset, std::int64_t rstride,
                             std::size_t len, std::uint64_t n) {
    if (len == 0 || n == 0) return Post::done;
    if (len > kStridedPieceMax) return Post::error;
    if (!admit(rank)) return Post::retry;
    // At most kMaxMessage bytes of pieces a kGetStrided request, answered packed into a
    // buffer of ours and scattered to local at lstride when the answer completes.
    const std::uint64_t per = std::max<std::uint64_t>(1, kMaxMessage / len);
    for (std::uint64_t i = 0; i < n;) {
        const std::uint64_t m = std::min<std::uint64_t>(per, n - i);
        std::vector<unsigned char> msg(sizeof(Header) + 8);
        const Header h{kGetStrided, 0, -1, 0, 0, 0, offset + i * std::uint64_t(rstride), len, m, 0, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        std::memcpy(msg.data() + sizeof h, &rstride, 8);
        Landing land =
            strided_landing(rank, static_cast<unsigned char*>(local) + std::int64_t(i) * lstride, m, len, lstride);
        send(rank, std::move(msg), Ack::always, nullptr, 0, nullptr, m * len + 1, -1, false, &land);
        throttle(rank);
        i += m;
    }
    return Post::posted;
}

Post AmEndpoint::get(int rank, const Chunk* chunks, std::size_t n) {
    if (!admit(rank)) return Post::retry;
    // One request per piece of at most a message, each answered straight into the user's
    // buffer; runs of small pieces (a derived type's blocks) gathered, many to a request,
    // answered in one message and scattered on arrival. Nothing waits here: the data is in
    // place at the next flush (MPI's contract), so the round trips overlap with whatever
    // the caller does meanwhile.
    auto get_direct = [&](void* local, std::uint64_t offset, std::uint64_t len) {
        for (std::uint64_t off = 0; off < len; off += kGetPieceMax) {
            const std::uint64_t piece = std::min<std::uint64_t>(kGetPieceMax, len - off);
            std::vector<unsigned char> msg(sizeof(Header) + 16);
            Header h{kGet, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
            std::memcpy(msg.data(), &h, sizeof h);
            const std::uint64_t seg[2] = {offset + off, piece};
            std::memcpy(msg.data() + sizeof h, seg, 16);
            const int src_page = int((peer_page_[std::size_t(rank)] + offset + off) & 4095);
            send(rank, std::move(msg), Ack::always, nullptr, 0, static_cast<unsigned char*>(local) + off, piece,
                 src_page, false);
            throttle(rank);
        }
    };
    if (n == 1) {  // one piece: no gathering (and nothing allocated for it)
        get_direct(chunks[0].local, chunks[0].offset, chunks[0].len);
        return Post::posted;
    }
    std::vector<std::uint64_t> segs;  // the gathered pieces' (offset, length) pairs
    Landing gather;
    std::size_t gathered = 0;
    auto send_gathered = [&] {
        const std::size_t nseg = gather.scatter.size();
        if (nseg == 1) get_direct(gather.scatter[0].first, segs[0], segs[1]);
        if (nseg >= 2) {
            std::vector<unsigned char> msg(sizeof(Header) + 16 * nseg);
            const Header h{kGet, std::uint32_t(nseg), -1, 0, 0, 0, 0, 0, 0, 0, 0};
            std::memcpy(msg.data(), &h, sizeof h);
            std::memcpy(msg.data() + sizeof h, segs.data(), 16 * nseg);
            gather.take = gathered + nseg;
            gather.zero_from = gathered;  // nothing applied until told
            send(rank, std::move(msg), Ack::always, nullptr, 0, nullptr, gathered + nseg, -1, false, &gather);
            throttle(rank);
        }
        gather = Landing{};
        segs.clear();
        gathered = 0;
    };
    for (std::size_t i = 0; i < n; ++i) {
        const Chunk& c = chunks[i];
        if (c.len > kGatherPieceMax) {
            send_gathered();  // in order: what was gathered before this piece leaves first
            get_direct(c.local, c.offset, c.len);
            continue;
        }
        if (gather.scatter.size() == 256 || gathered + c.len > kMaxMessage) send_gathered();
        gather.scatter.emplace_back(static_cast<unsigned char*>(c.local), c.len);
        segs.push_back(c.offset);
        segs.push_back(c.len);
        gathered += c.len;
    }
    send_gathered();
    return Post::posted;
}

std::uint64_t AmEndpoint::atomic8_start(int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                                        std::uint64_t compare, std::uint64_t* old) {
    std::vector<unsigned char> msg(sizeof(Header));
    const Header h{kAtomic8, 0, -1, 0, 0, 0, word, operand, compare, std::uint32_t(op), 0};
    std::memcpy(msg.data(), &h, sizeof h);
    return send(rank, std::move(msg), Ack::always, nullptr, 0, old, sizeof *old);
}

std::uint64_t AmEndpoint::atomic8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                                  std::uint64_t compare) {
    std::uint64_t old = 0;
    atomic8_finish(rank, atomic8_start(rank, word, op, operand, compare, &old));
    return old;
}

// A notify is a batch record, sent at once: with the small puts batched before it, one
// message (a PSCW epoch of small puts is then one message each way).
void AmEndpoint::append_notify(Peer& p, int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                               std::uint64_t flags) {
    const NotifyRecord r{word, operand, std::uint64_t(op) | flags};
    batch_append(p, rank, kAtomic8, &r, sizeof r, nullptr, 0);
}

void AmEndpoint::notify_locked(Peer& p, int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                               std::uint64_t flags) {
    append_notify(p, rank, word, op, operand, flags);
    send_batch(p, rank, Ack::none);
}

void AmEndpoint::notify8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand) {
    {
        Peer& p = peers_[std::size_t(rank)];
        std::lock_guard lk(p.mu);
        // On a lock master's count (lock_protocol: the exclusive holders' count after a lock
        // elsewhere, a lock_all left or undone) it must not wait behind a parked lock request
        // of ours there: until applied the count keeps lock_all attempts failing, whose
        // transient holds in turn keep lock requests parked (a livelock: docs/twohost.md).
        notify_locked(p, rank, word, op, operand, word == kLockGlobal ? kNotifyAnyEpoch : 0);
    }
    throttle(rank);
}

void AmEndpoint::post_to(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    const std::uint32_t n = p.posted_to.fetch_add(1, std::memory_order_acq_rel) + 1;
    // The note is not a request (no sequence number, never parked at the origin): one
    // message of its own, its buffer kept until the send completes (reap_sends).
    std::vector<unsigned char> msg(sizeof(Header));
    const Header h{kPosted, 0, -1, 0, 0, 0, n, 0, 0, 0, 0};
    std::memcpy(msg.data(), &h, sizeof h);
    {
        std::lock_guard lk(p.mu);
        MPI_Request rq;
        if (host_ok(PMPI_Isend(msg.data(), int(msg.size()), MPI_BYTE, rank, kTagRequest, comm_, &rq), "MPI_Isend",
                    rank)) {
            p.send_rq.push_back(rq);
            p.send_buf.push_back(std::move(msg));
            p.send_big.push_back(0);
        }
    }
    // What that origin sent early for this epoch may be applied now.
    if (has_parked()) poll();
}

bool AmEndpoint::may_start(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    std::lock_guard lk(p.mu);
    return p.posts_received.load(std::memory_order_acquire) >= p.access_epochs;
}

void AmEndpoint::begin_access(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    std::lock_guard lk(p.mu);
    send_batch(p, rank, Ack::none);  // (nothing of before the epoch gets its stamp)
    p.pscw_stamp = ++p.access_epochs;
}

void AmEndpoint::end_access(int rank) {  // after complete_notify8, which sent the batch
    Peer& p = peers_[std::size_t(rank)];
    std::lock_guard lk(p.mu);
    p.pscw_stamp = 0;
}

void AmEndpoint::lock_request(int rank, Transport::LockRequest what) {
    const std::uint64_t r = std::uint64_t(what);
    batched(rank, kLockReq, &r, sizeof r, nullptr, 0, false);
}

void AmEndpoint::release(int rank, const Transport::Release* r, std::size_t n) {
    Peer& p = peers_[std::size_t(rank)];
    bool one_way;
    {
        std::lock_guard lk(p.mu);
        reap(p);
        one_way = p.batch.empty() && p.answers.empty() &&
                  p.answered.load(std::memory_order_relaxed) == p.sent.load(std::memory_order_relaxed);
        for (std::size_t i = 0; i < n; ++i) append_notify(p, rank, r[i].word, r[i].op, r[i].operand);
        if (one_way) send_batch(p, rank, Ack::none);
    }
    if (!one_way) {
        flush(rank);  // the batch asks for the answer
        return;
    }
    complete_sends(rank);
    throttle(rank);
}

void AmEndpoint::complete_notify8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand) {
    bool sent = false;
    {
        Peer& p = peers_[std::size_t(rank)];
        std::lock_guard lk(p.mu);
        reap(p);
        const bool pulling = std::any_of(p.answers.begin(), p.answers.end(), [](const Answer& a) { return a.big; });
        if (!pulling) {
            notify_locked(p, rank, word, op, operand);
            sent = true;
        }
    }
    flush_local(rank);
    if (!sent)
        notify8(rank, word, op, operand);
    else
        throttle(rank);
}

Post AmEndpoint::accumulate(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n,
                            std::size_t elem_bytes, const void* src, const void* compare, void* result) {
    const std::size_t src_len = src ? n * elem_bytes : 0, cmp_len = compare ? elem_bytes : 0;
    if (!result && !compare && src_len <= kBatchItemMax) {
        const AccRecord r{op_id, type_id, rma_kind, src ? 4u : 0u, toff, n, elem_bytes};
        return batched(rank, kAccumulate, &r, sizeof r, src, src_len, true);
    }
    if (!admit(rank)) return Post::retry;
    const std::uint32_t flags = (result ? 1u : 0u) | (compare ? 2u : 0u) | (src ? 4u : 0u);
    if (!compare && src_len >= kZeroCopyMin) {
        // Large: a header, then the origin data straight from the caller's buffer (theirs
        // again at the next flush, as for a put), received by the target into its scratch
        // buffer — no copy into the request, and one eager header instead of a rendezvous
        // into the request ring.
        std::vector<unsigned char> msg(sizeof(Header));
        const Header h{kAccData, 0, -1, op_id, type_id, rma_kind, toff, n, elem_bytes, flags, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        if (result)
            send(rank, std::move(msg), Ack::always, src, src_len, result, n * elem_bytes);
        else
            send(rank, std::move(msg), Ack::maybe, src, src_len);
        throttle(rank);
        return Post::posted;
    }
    // Inline: the origin data inside the request (below kZeroCopyMin, or a compare_and_swap).
    if (sizeof(Header) + src_len + cmp_len > kMaxRequest) return Post::error;  // the ops layer keeps runs at 256 KiB
    std::vector<unsigned char> msg;
    msg.reserve(sizeof(Header) + src_len + cmp_len);  // written once, not zeroed first
    const Header h{kAccumulate, 0, -1, op_id, type_id, rma_kind, toff, n, elem_bytes, flags, 0};
    msg.resize(sizeof h);
    std::memcpy(msg.data(), &h, sizeof h);
    if (src_len) append_bytes(msg, src, src_len);
    if (cmp_len) append_bytes(msg, compare, cmp_len);
    // The old values are answered straight into the caller's result buffer, in place at
    // the next flush, like a get's data.
    if (result)
        send(rank, std::move(msg), Ack::always, nullptr, 0, result, n * elem_bytes);
    else
        send(rank, std::move(msg), Ack::maybe);
    throttle(rank);
    return Post::posted;
}

Post AmEndpoint::read_state(int rank, std::size_t word, std::size_t count, std::uint64_t* out) {
    std::vector<unsigned char> msg(sizeof(Header));
    Header h{kReadState, 0, -1, 0, 0, 0, word, count, 0, 0, 0};
    std::memcpy(msg.data(), &h, sizeof h);
    request(rank, msg, out, count * 8);
    return Post::done;
}

std::uint64_t AmEndpoint::flush_start(int rank, bool reap_first) {
    Peer& p = peers_[std::size_t(rank)];
    std::uint64_t upto;
    bool tail_answered;
    {
        std::lock_guard lk(p.mu);
        // The batch asks for the answer this flush needs: with another thread's ack in
        // flight, Ack::maybe would leave it unanswered and cost a flush request of its own.
        send_batch(p, rank, Ack::always);
        if (reap_first) reap(p);
        upto = p.sent.load(std::memory_order_relaxed);
        tail_answered = !p.answers.empty() && p.answers.back().seq == upto;
    }
    if (p.answered.load(std::memory_order_acquire) < upto && !tail_answered) {
        // The newest request has no answer coming: ask for one. Its answer covers everything.
        std::vector<unsigned char> msg(sizeof(Header));
        Header h{kFlush, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        upto = send(rank, std::move(msg), Ack::always);
    }
    return upto;
}

void AmEndpoint::flush_finish(int rank, std::uint64_t upto) {
    // Every answer up to upto in place (a get's data, old values), and the newest covers
    // every request without one.
    wait_until(rank, [upto](const Peer& q) {
        // (a request that could not leave took its number back, with those deferred after it)
        const std::uint64_t u = std::min(upto, q.sent.load(std::memory_order_relaxed));
        if (q.answered.load(std::memory_order_acquire) < u) return false;
        return q.answers.empty() || q.answers.front().seq > u;
    });
    complete_sends(rank);  // answered: every earlier message of ours has arrived
}

void AmEndpoint::flush(int rank) { flush_finish(rank, flush_start(rank)); }

bool AmEndpoint::reached(int rank, std::uint64_t upto) {
    // As flush_finish's test; the target answered after applying every earlier request, so
    // the payloads sent from origin buffers have arrived as well.
    Peer& p = peers_[std::size_t(rank)];
    if (p.busy_posting()) return false;  // (its poster is busy with it)
    std::unique_lock lk(p.mu, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    reap(p);
    const std::uint64_t u = std::min(upto, p.sent.load(std::memory_order_relaxed));
    if (p.answered.load(std::memory_order_acquire) < u) return false;
    return p.answers.empty() || p.answers.front().seq > u;
}

void AmEndpoint::flush_all() {
    // Every target's request leaves before any answer is waited for: one round trip for a
    // fence or flush_all, not one per target.
    std::vector<std::uint64_t> upto(static_cast<std::size_t>(nprocs_));
    for (int r = 0; r < nprocs_; ++r) upto[std::size_t(r)] = flush_start(r);
    for (int r = 0; r < nprocs_; ++r) flush_finish(r, upto[std::size_t(r)]);
}

int AmEndpoint::fence() {
    // What was batched leaves now (one-way): counted below like every request.
    for (int r = 0; r < nprocs_; ++r) {
        Peer& p = peers_[std::size_t(r)];
        std::lock_guard lk(p.mu);
        send_batch(p, r, Ack::none);
    }
    std::vector<std::uint64_t> sent(static_cast<std::size_t>(nprocs_));
    for (int r = 0; r < nprocs_; ++r)
        sent[std::size_t(r)] = peers_[std::size_t(r)].sent.load(std::memory_order_relaxed);
    std::uint64_t to_me = 0;
    // A peer that has not reached its fence yet may be waiting for an answer of ours (a
    // dynamic window's region table, an atomic): without a progress thread or the host
    // hook only this thread can give it, so then the exchange is non-blocking and served.
    // So it is where peers are watched for death (gone_): a blocking collective with a dead
    // member never returns.
    if (served_elsewhere_ && !gone_) {
        if (!host_ok(PMPI_Reduce_scatter_block(sent.data(), &to_me, 1, MPI_UINT64_T, MPI_SUM, comm_),
                     "MPI_Reduce_scatter_block"))
            return take_failure(nullptr);
    } else {
        MPI_Request rq;
        if (!host_ok(PMPI_Ireduce_scatter_block(sent.data(), &to_me, 1, MPI_UINT64_T, MPI_SUM, comm_, &rq),
                     "MPI_Ireduce_scatter_block"))
            return take_failure(nullptr);
        if (int rc = wait_serving(&rq)) return rc;
    }
    for (SpinWait pace; served_.load(std::memory_order_acquire) < to_me;) serve_while_waiting(pace);
    {
        std::lock_guard lk(serve_mu_);
        complete_data();  // put payloads whose headers were served
    }
    for (int r = 0; r < nprocs_; ++r) flush_local(r);  // our gets' data, our payloads' sends
    fence_epoch_.fetch_add(1, std::memory_order_acq_rel);
    poll();  // what an origin already sent for the next epoch
    return MPI_SUCCESS;
}

void AmEndpoint::quiesce() { flush_all(); }

int AmEndpoint::barrier() {
    if (served_elsewhere_ && !gone_)
        return host_ok(PMPI_Barrier(comm_), "MPI_Barrier") ? MPI_SUCCESS : take_failure(nullptr);
    MPI_Request rq;
    if (!host_ok(PMPI_Ibarrier(comm_, &rq), "MPI_Ibarrier")) return take_failure(nullptr);
    return wait_serving(&rq);
}

int AmEndpoint::wait_serving(MPI_Request* rq) {
    unsigned passes = 0;
    Every alive{kAliveCheckNs};
    for (SpinWait pace;;) {
        int done = 0;
        if (!host_ok(PMPI_Test(rq, &done, MPI_STATUS_IGNORE), "MPI_Test")) return take_failure(nullptr);
        if (done) return MPI_SUCCESS;
        // Served elsewhere too (the host's hook runs in MPI_Test): this thread serves on one
        // pass in 8.
        if (!served_elsewhere_ || (++passes & 7) == 0)
            serve_while_waiting(pace);
        else
            pace.idle();
        // A member that died never joins: the collective is left behind (the window is
        // unusable from now on) and the death reported.
        if (given_up(-1, alive)) return take_failure(nullptr);
    }
}

void AmEndpoint::flush_local(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    std::uint64_t upto;
    {
        std::lock_guard lk(p.mu);
        send_batch(p, rank, Ack::none);  // its data was copied: sent, not waited for
        reap(p);
        upto = p.sent.load(std::memory_order_relaxed);
    }
    wait_until(rank, [upto](const Peer& q) {
        if (!q.deferred.empty() && q.deferred.front().seq <= upto) return false;  // not sent yet
        for (const Answer& a : q.answers)
            if (a.data && a.seq <= upto) return false;
        return true;
    });
    complete_sends(rank);
}

// Serving may run inside the host's progress loop (host_progress.hpp), where a blocking
// MPI call would wait on a condition only that loop signals (Open MPI's sync_wait_mt: a
// deadlock). So the server completes its receives and replies by testing.
void AmEndpoint::wait_by_test(MPI_Request* rq) {
    for (int done = 0;;) {
        if (!host_ok(PMPI_Test(rq, &done, MPI_STATUS_IGNORE), "MPI_Test")) return;  // (given up)
        if (done) return;
        __builtin_ia32_pause();
    }
}

void AmEndpoint::reap_replies() {  // serve_mu_ held
    if (replies_rq_.empty()) return;
    int rc = MPI_SUCCESS;
    replies_buf_.resize(test_and_compact(
        replies_rq_, reply_idx_, rc,
        [&](std::size_t i) { PageOffsetBuffer::recycle(spares_, std::move(replies_buf_[i])); },
        [&](std::size_t to, std::size_t from) { replies_buf_[to] = std::move(replies_buf_[from]); }));
    host_ok(rc, "MPI_Testsome (answers sent)");
}

bool AmEndpoint::poll() {
    std::unique_lock lk(serve_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    HostProgressGuard no_reentry;  // the MPI calls below progress the host, which calls us
    bool any = false;
    reap_replies();
    if (!data_rq_.empty()) {  // payloads in flight: let them land while nothing else waits
        int done = 0;
        const bool ok = host_ok(PMPI_Testall(int(data_rq_.size()), data_rq_.data(), &done, MPI_STATUSES_IGNORE),
                                "MPI_Testall (payloads)");
        if (done || !ok) complete_data();  // (failed: what did not complete in error is waited for)
    }
    const std::uint64_t before = served_ring_;
    serve_ring();
    if (served_ring_ != before) any = true;
    // A parked origin may go on now: a release came in, this process released a lock of its
    // own, or finished the fence its next-epoch requests waited for (both wake the
    // progress thread).
    if (parked_n_.load(std::memory_order_relaxed) && retry_parked()) any = true;
    // Requests deferred beyond the flow-control window leave as answers make room, also
    // while the thread that posted them does something else.
    if (deferred_peers_.load(std::memory_order_relaxed)) {
        for (int r = 0; r < nprocs_; ++r) {
            Peer& p = peers_[std::size_t(r)];
            if (p.busy_posting()) continue;
            std::unique_lock pl(p.mu, std::try_to_lock);
            if (!pl.owns_lock() || p.deferred.empty()) continue;
            const std::size_t before = p.deferred.size();
            reap(p);
            if (p.deferred.size() != before) any = true;
        }
    }
    return any;
}

void AmEndpoint::serve_ring() {  // serve_mu_ held
    // Requests are served in the order the ring's receives matched them (posting order):
    // one origin's requests in the order it sent them.
    for (int batch = 0; batch < 64; ++batch) {
        MPI_Request& rq = ring_[ring_head_];
        int flag = 0;
        MPI_Status st;
        // A receive that failed is not served (recorded: host_ok), and goes again.
        const bool ok = host_ok(PMPI_Test(&rq, &flag, &st), "MPI_Test (request ring)");
        if (!flag && ok) break;
        int count = 0;
        if (ok && host_ok(PMPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count") && count != MPI_UNDEFINED)
            serve(ring_buf_.data() + std::size_t(ring_head_) * kMaxRequest, std::size_t(count), st.MPI_SOURCE);
        if (!host_ok(PMPI_Start(&rq), "MPI_Start (request ring)")) break;  // (retried at the next poll)
        ring_head_ = (ring_head_ + 1) % kRing;
        ++served_ring_;
    }
}

void AmEndpoint::serve_message(const unsigned char* msg, std::size_t len, int source) {
    std::lock_guard lk(serve_mu_);
    HostProgressGuard no_reentry;
    serve(msg, len, source);
}

void AmEndpoint::serve_arrived() {
    std::lock_guard lk(serve_mu_);
    HostProgressGuard no_reentry;
    std::uint64_t before;
    do {
        before = served_ring_;
        serve_ring();
    } while (served_ring_ != before);
}

std::uint64_t AmEndpoint::take_rejected(int rank) {
    Peer& p = peers_[std::size_t(rank)];
    if (p.rejected_seen.load(std::memory_order_acquire) == 0) return 0;  // never refused: no lock
    std::lock_guard lk(p.mu);
    const std::uint64_t seen = p.rejected_seen.load(std::memory_order_acquire);
    const std::uint64_t fresh = seen - p.rejected_taken;
    p.rejected_taken = seen;
    return fresh;
}

void AmEndpoint::settle() {
    std::lock_guard lk(serve_mu_);
    HostProgressGuard no_reentry;
    complete_data();
    for (MPI_Request& rq : replies_rq_) wait_by_test(&rq);
    reap_replies();
}

// Whether [off, off + n) lies in my part (dynamic windows: in a region attached here now).
// Origins check their own view first; this is the check that holds against a detach since
// then, and against a wrong peer. A request outside is not applied, and its origin is told.
bool AmEndpoint::accepts(int source, std::uint64_t off, std::uint64_t n) {  // serve_mu_ held
    const bool inside =
        local_.attached ? n == 0 || local_.attached(off, n) : off <= local_.size && n <= local_.size - off;
    if (!inside) refuse(source);
    return inside;
}

void AmEndpoint::refuse(int source) {  // serve_mu_ held
    if (rejected_.empty()) rejected_.resize(std::size_t(nprocs_));
    // The origin learns of it from a notice sent like a request (its server records it)
    // ahead of any answer of ours, so its completion point sees it.
    const Header h{kRejected, 0, -1, 0, 0, 0, ++rejected_[std::size_t(source)], 0, 0, 0, 0};
    PageOffsetBuffer b(sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    MPI_Request rq;
    if (!host_ok(PMPI_Isend(b.data(), int(sizeof h), MPI_BYTE, source, kTagRequest, comm_, &rq), "MPI_Isend (refusal)",
                 source))
        return;
    replies_rq_.push_back(rq);
    replies_buf_.push_back(std::move(b));
}

void AmEndpoint::discard_data(int source) {  // serve_mu_ held
    MPI_Request rq;
    receive_payload(source, nullptr, ~std::size_t(0), &rq);  // (never that size: dropped)
}

// The payload follows its header on kTagData. It is matched first (MPI_Improbe, by test: the
// server never blocks) and its real size checked against the header's, because a receive
// shorter than a large message is not safe with every host transport: Open MPI's ob1 over
// its self path copied a whole rendezvous message into a 0-byte receive (a fuzzed request
// crashed the server that way), so a payload longer than announced would land past dst.
// A correct origin sends the payload right behind its header; one that never comes (an
// origin killed between its two sends, a mismatched peer) is waited for payload_wait_ at
// most, holding serve_mu_, then given up: the request is dropped and the failure recorded.
// Should that payload arrive later, it is taken for the next payload of that origin (and
// dropped there unless it has the size that one announced).
bool AmEndpoint::receive_payload(int source, void* dst, std::size_t want, MPI_Request* rq) {  // serve_mu_ held
    MPI_Message m = MPI_MESSAGE_NULL;
    MPI_Status st;
    std::chrono::steady_clock::time_point give_up{};
    for (unsigned polls = 0;; ++polls) {
        int found = 0;
        if (!host_ok(PMPI_Improbe(source, kTagData, comm_, &found, &m, &st), "MPI_Improbe (payload)", source))
            return false;
        if (found) break;
        if (polls % 256 == 0) {  // the clock now and then: the payload normally is there at once
            const auto now = std::chrono::steady_clock::now();
            if (polls == 0) {
                give_up = now + payload_wait_;
            } else if (now >= give_up) {
                char what[200];
                std::snprintf(what, sizeof what,
                              "the payload of a request from rank %d did not arrive within %lld ms of its header "
                              "(FASTRMA_AM_PAYLOAD_MS); the request was dropped",
                              source, static_cast<long long>(payload_wait_.count()));
                note_failure(MPI_ERR_OTHER, what);
                return false;
            }
        }
        __builtin_ia32_pause();
    }
    int count = 0;
    if (!host_ok(PMPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count (payload)", source) || count < 0) count = 0;
    if (std::size_t(count) == want)
        return host_ok(PMPI_Imrecv(dst, count, MPI_BYTE, &m, rq), "MPI_Imrecv (payload)", source);
    std::vector<unsigned char> sink(std::size_t(count) + 1);  // not the announced size: dropped
    if (host_ok(PMPI_Imrecv(sink.data(), count, MPI_BYTE, &m, rq), "MPI_Imrecv (payload)", source)) wait_by_test(rq);
    return false;
}

AmEndpoint::Parked& AmEndpoint::start_parking(int source) {
    if (parked_.empty()) parked_.resize(std::size_t(nprocs_));
    Parked& pk = parked_[std::size_t(source)];
    pk.active = true;
    pk.msgs.clear();
    parked_n_.fetch_add(1, std::memory_order_relaxed);
    return pk;
}

void AmEndpoint::park(int source, Transport::LockRequest what, const Header& h, const unsigned char* rest,
                      std::size_t rest_len, std::uint32_t rest_records) {
    Parked& pk = start_parking(source);
    pk.why = Why::lock;
    pk.what = what;
    // The rest of the batch and its ack; empty, it still counts as served once granted (fence()).
    keep_parked(pk, h, rest, rest_len, rest_records);
    bump(Stat::locks_parked);
}

void AmEndpoint::keep_parked(Parked& pk, const Header& h, const unsigned char* recs, std::size_t len,
                             std::uint32_t nrec) {
    Header kh = h;
    kh.nseg = nrec;
    std::vector<unsigned char> m(sizeof kh);
    if (pk.why == Why::lock && h.kind == kBatch) {
        // Notifies of no epoch of the origin here (kNotifyAnyEpoch) apply now; the other
        // records wait, in order. A malformed record ends the scan: it and the rest wait
        // (serve_batch refuses it when they are served).
        kh.nseg = 0;
        const unsigned char* q = recs;
        const unsigned char* const end = recs + len;
        std::uint32_t i = 0;
        for (; i < nrec && std::size_t(end - q) >= 8; ++i) {
            std::uint32_t rh[2];
            std::memcpy(rh, q, sizeof rh);
            if (rh[1] > std::size_t(end - q) - 8) break;
            NotifyRecord r{};
            if (rh[0] == kAtomic8 && rh[1] >= sizeof r) std::memcpy(&r, q + 8, sizeof r);
            if ((r.op & kNotifyAnyEpoch) && r.word < local_.state_words) {
                apply_atomic8(local_.state + r.word, AtomicOp(r.op & ~kNotifyAnyEpoch), r.operand, 0);
            } else {
                m.insert(m.end(), q, q + 8 + rh[1]);
                ++kh.nseg;
            }
            q += 8 + rh[1];
        }
        m.insert(m.end(), q, end);
        kh.nseg += nrec - i;
    } else {
        m.insert(m.end(), recs, recs + len);
    }
    std::memcpy(m.data(), &kh, sizeof kh);
    pk.msgs.push_back(std::move(m));
}

void AmEndpoint::park_until(int source, Why why, std::uint32_t n, const unsigned char* msg, std::size_t len) {
    Parked& pk = start_parking(source);
    pk.why = why;
    pk.epoch = n;
    pk.msgs.emplace_back(msg, msg + len);
}

bool AmEndpoint::retry_parked() {
    bool any = false;
    // From the rank after the last one granted: no origin waits forever behind lower ranks.
    for (int k = 0; k < nprocs_ && parked_n_.load(std::memory_order_relaxed); ++k) {
        const int s = (park_next_ + k) % nprocs_;
        Parked& pk = parked_[std::size_t(s)];
        if (!pk.active) continue;
        const bool go = pk.why == Why::lock ? local_.grant_lock(pk.what)
                        : pk.why == Why::fence
                            ? pk.epoch <= fence_epoch_.load(std::memory_order_acquire)
                            : pk.epoch <= peers_[std::size_t(s)].posted_to.load(std::memory_order_acquire);
        if (!go) continue;
        pk.active = false;
        parked_n_.fetch_sub(1, std::memory_order_relaxed);
        park_next_ = (s + 1) % nprocs_;
        std::vector<std::vector<unsigned char>> msgs = std::move(pk.msgs);
        pk.msgs.clear();
        for (const auto& m : msgs) serve(m.data(), m.size(), s);  // parks again at a later request
        any = true;
    }
    return any;
}

void AmEndpoint::complete_data() {  // serve_mu_ held
    for (MPI_Request& rq : data_rq_) wait_by_test(&rq);
    land_data();
}

void AmEndpoint::land_data() {  // serve_mu_ held, every receive of data_rq_ complete
    for (Landing& l : data_land_) l.finish(spares_);
    data_rq_.clear();
    data_land_.clear();
}

int AmEndpoint::accumulate_runs(int rma_kind, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                                std::uint64_t elems, std::uint64_t pieces, std::uint64_t eb, const void* src,
                                void* res) {
    if (local_.accumulate_strided)
        return local_.accumulate_strided(rma_kind, op_id, type_id, toff, stride, elems, pieces, eb, src, res);
    const std::uint64_t piece = elems * eb;
    for (std::uint64_t i = 0; i < pieces; ++i) {
        const void* s = src ? static_cast<const unsigned char*>(src) + i * piece : nullptr;
        void* r = res ? static_cast<unsigned char*>(res) + i * piece : nullptr;
        if (int rc =
                local_.accumulate(rma_kind, op_id, type_id, toff + i * std::uint64_t(stride), elems, eb, s, nullptr, r))
            return rc;
    }
    return MPI_SUCCESS;
}

void AmEndpoint::serve(const unsigned char* msg, std::size_t len, int source) {
    Header h;
    if (len < sizeof h || source < 0 || source >= nprocs_) {  // not a request of ours: counted, dropped
        served_.store(served_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        return;
    }
    std::memcpy(&h, msg, sizeof h);
    // Notes to us as an origin, not requests (never parked, not counted in served_): the
    // target's running count, which only grows (only the server threads write it).
    if (h.kind == kRejected || h.kind == kPosted) {
        Peer& from = peers_[std::size_t(source)];
        std::atomic<std::uint64_t>& count = h.kind == kRejected ? from.rejected_seen : from.posts_received;
        if (h.a > count.load(std::memory_order_relaxed)) count.store(h.a, std::memory_order_release);
        return;
    }
    // A parked origin (its lock request waits, or a request of its from a later fence epoch):
    // everything it sends waits behind, in order.
    if (parked_n_.load(std::memory_order_relaxed) && parked_[std::size_t(source)].active) {
        keep_parked(parked_[std::size_t(source)], h, msg + sizeof h, len - sizeof h, h.nseg);
        return;
    }
    // Sent after a fence this process has not completed yet: it waits until every request
    // of the closing epoch was applied here (fence()), so an op of the next epoch can never
    // overtake one of the last from another origin.
    if (h.epoch > fence_epoch_.load(std::memory_order_acquire)) {
        park_until(source, Why::fence, h.epoch, msg, len);
        return;
    }
    // Of a PSCW access epoch we have not posted for yet (the origin did not wait for it).
    if (h.pscw > peers_[std::size_t(source)].posted_to.load(std::memory_order_acquire)) {
        park_until(source, Why::pscw, h.pscw, msg, len);
        return;
    }
    // Requests apply in order: put payloads still arriving land before anything else.
    if (h.kind != kPutData && !data_rq_.empty()) complete_data();
    const Incoming in{h, msg, len, msg + sizeof h, source};
    switch (h.kind) {
    case kPut:
        serve_put(in);
        break;
    case kPutStrided:
        serve_put_strided(in);
        break;
    case kGetStrided:
        serve_get_strided(in);
        break;
    case kAccStrided:
        serve_acc_strided(in);
        break;
    case kGetAccStrided:
        serve_get_acc_strided(in);
        break;
    case kBatch:
        if (!serve_batch(in)) return;  // parked behind a lock request: counted once served
        break;
    case kPutData:
        serve_put_data(in);
        break;
    case kGet:
        serve_get(in);
        break;
    case kAtomic8:
        serve_atomic8(in);
        break;
    case kAccumulate:
    case kAccData:
        serve_accumulate(in);
        break;
    case kReadState:
        serve_read_state(in);
        break;
    case kFlush:
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        reply(in, nullptr, 0);
        break;
    }
    // Applied: counted for fence(), which waits for the count (a put's payload may still be
    // landing: fence() completes those). Only the server threads write it (serve_mu_).
    served_.store(served_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Answers leave with MPI_Isend and are completed later (poll): a large one (a get's data,
// sent straight from the window) completes only when the origin pulls it, and the server
// goes on meanwhile — with several gets in flight the origin pulls them all at once instead
// of one per round of handshakes. A later request that changes the memory an answer is being
// read from conflicts with that get (MPI leaves the outcome undefined); nothing of ours
// depends on the order. An answer that cannot leave is recorded (host_ok: reported at this
// process's next completion point) and an empty one tried in its place: the origin's wait
// must end.
bool AmEndpoint::answer(const Incoming& in, const void* data, std::size_t n, MPI_Request* rq) {
    return host_ok(PMPI_Isend(data, int(n), MPI_BYTE, in.source, in.h.reply_tag, comm_, rq), "MPI_Isend (answer)",
                   in.source) ||
           host_ok(PMPI_Isend(nullptr, 0, MPI_BYTE, in.source, in.h.reply_tag, comm_, rq), "MPI_Isend (answer)",
                   in.source);
}

void AmEndpoint::reply_owned(const Incoming& in, PageOffsetBuffer&& buf, std::size_t n) {
    MPI_Request rq;
    if (!answer(in, buf.data(), n, &rq)) return;
    replies_rq_.push_back(rq);
    replies_buf_.push_back(std::move(buf));
    note_answer_sent();
}

// A buffer for an answer of n bytes, at the page offset of the origin's answer buffer when it
// gave one (the host's single copy into it then runs at full speed).
PageOffsetBuffer AmEndpoint::answer_buffer(const Incoming& in, std::size_t n) {
    return (in.h.pages >> 16) ? PageOffsetBuffer::take(spares_, n, (in.h.pages >> 16) - 1) : PageOffsetBuffer(n);
}

void AmEndpoint::reply(const Incoming& in, const void* data, std::size_t n) {  // data that outlives the send
    MPI_Request rq;
    if (!answer(in, data, n, &rq)) return;
    replies_rq_.push_back(rq);
    replies_buf_.emplace_back();
    note_answer_sent();
}

void AmEndpoint::reply_copy(const Incoming& in, const void* data, std::size_t n) {
    PageOffsetBuffer b(n);
    if (n) std::memcpy(b.data(), data, n);  // (a state read of 0 words: no buffer at all)
    reply_owned(in, std::move(b), n);
}

void AmEndpoint::serve_put(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const std::size_t len = in.len;
    // Segments (offset, length), then their data; every length must lie in the message.
    const std::size_t body = len - sizeof h;
    std::size_t left = h.nseg <= body / 16 ? body - std::size_t(h.nseg) * 16 : 0;
    if (h.nseg > body / 16) refuse(source);
    const unsigned char* data = p + std::size_t(h.nseg) * 16;
    for (std::uint32_t s = 0; s < h.nseg && h.nseg <= body / 16; ++s) {
        std::uint64_t off, n;
        std::memcpy(&off, p + 16 * s, 8);
        std::memcpy(&n, p + 16 * s + 8, 8);
        if (n > left) {
            refuse(source);
            break;
        }
        if (accepts(source, off, n))
            copy_bytes(local_.base + off, data, n);  // dynamic windows: base null, off = address
        data += n;
        left -= n;
    }
    if (h.reply_tag >= 0) reply(in, nullptr, 0);  // the ack
}

void AmEndpoint::serve_put_strided(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const std::size_t len = in.len;
    // c pieces of b bytes from offset a at a stride (negative allowed): the packed
    // pieces must be exactly the rest of the message, and the whole footprint, from the
    // lowest piece's first byte to the highest's last, inside the part (one check).
    const std::uint64_t piece = h.b, n = h.c;
    const std::size_t body = len - sizeof h;
    std::int64_t stride = 0;
    if (body >= 8) std::memcpy(&stride, p, 8);
    const bool sized = body >= 8 && piece != 0 && n != 0 && piece <= (body - 8) / n && piece * n == body - 8;
    std::uint64_t lo = 0, span = 0;
    if (!sized || !strided_footprint(h.a, stride, piece, n, &lo, &span))
        refuse(source);
    else if (accepts(source, lo, span))
        copy_strided(local_.base + h.a, stride, p + 8, std::int64_t(piece), piece, n);
    if (h.reply_tag >= 0) reply(in, nullptr, 0);  // the ack
}

void AmEndpoint::serve_get_strided(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const std::size_t len = in.len;
    // c pieces of b bytes from offset a at a stride, at most kMaxMessage bytes of them,
    // the footprint inside the part (one check): answered packed, then a byte 1. A
    // refused one is answered empty (the origin's buffer stays as it was).
    const std::uint64_t piece = h.b, n = h.c;
    std::int64_t stride = 0;
    if (len - sizeof h >= 8) std::memcpy(&stride, p, 8);
    const bool sized = len - sizeof h == 8 && piece != 0 && n != 0 && piece <= kMaxMessage / n;
    std::uint64_t lo = 0, span = 0;
    if (!sized || !strided_footprint(h.a, stride, piece, n, &lo, &span)) {
        refuse(source);
        reply(in, nullptr, 0);
        return;
    }
    if (!accepts(source, lo, span)) {
        reply(in, nullptr, 0);
        return;
    }
    PageOffsetBuffer b = answer_buffer(in, std::size_t(piece * n) + 1);
    copy_strided(b.data(), std::int64_t(piece), local_.base + h.a, stride, piece, n);
    b.data()[piece * n] = 1;
    reply_owned(in, std::move(b), std::size_t(piece * n) + 1);
}

namespace {
// The head of a strided accumulate's body (kAccStrided, kGetAccStrided): its stride and
// piece count, and whether the body holds them and the runs (b elements of c bytes) are
// ones the ops layer sends, n not 0.
struct AccStrided {
    std::size_t body = 0;
    std::int64_t stride = 0;
    std::uint64_t n = 0, piece = 0;
    bool runs_ok = false;
};

AccStrided acc_strided_head(std::size_t body, const unsigned char* p, std::uint64_t elems, std::uint64_t eb) {
    AccStrided a;
    a.body = body;
    if (body >= 16) {
        std::memcpy(&a.stride, p, 8);
        std::memcpy(&a.n, p + 8, 8);
    }
    a.piece = eb * elems;
    a.runs_ok = body >= 16 && eb != 0 && eb <= 64 && elems != 0 && elems <= kAccRunMax / eb && a.n != 0;
    return a;
}
}  // namespace

void AmEndpoint::serve_acc_strided(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    // Pieces of b elements of c bytes from offset a at a stride, through the accumulate
    // path as one strided call (accumulate_runs: one check of kind, op and type, the
    // stripes of the whole footprint); the packed data must be exactly the rest of the
    // message, the footprint inside the part (one check, before any piece is applied).
    const AccStrided a = acc_strided_head(in.len - sizeof h, p, h.b, h.c);
    const std::uint64_t elems = h.b, eb = h.c, piece = a.piece, n = a.n;
    const std::int64_t stride = a.stride;
    const bool sized = a.runs_ok && n <= (a.body - 16) / piece && piece * n == a.body - 16;
    std::uint64_t lo = 0, span = 0;
    if (!sized || !strided_footprint(h.a, stride, piece, n, &lo, &span))
        refuse(source);
    else if (accepts(source, lo, span) &&
             accumulate_runs(h.rma_kind, h.op_id, h.type_id, h.a, stride, elems, n, eb, p + 16, nullptr) != MPI_SUCCESS)
        refuse(source);
    if (h.reply_tag >= 0) reply(in, nullptr, 0);  // the ack
}

void AmEndpoint::serve_get_acc_strided(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    // Pieces of b elements of c bytes from offset a at a stride, at most kMaxMessage
    // bytes of them (the answer's size), origin data (aop & 4) exactly the rest of the
    // message, the footprint inside the part (one check, before anything is applied):
    // applied as kAccStrided, their old values answered packed, then a byte 1. A refused
    // one is answered empty (the origin's result buffer stays as it was).
    const AccStrided a = acc_strided_head(in.len - sizeof h, p, h.b, h.c);
    const std::uint64_t elems = h.b, eb = h.c, piece = a.piece, n = a.n;
    const std::int64_t stride = a.stride;
    const bool data = (h.aop & 4) != 0;
    const bool sized = a.runs_ok && piece <= kMaxMessage / n && a.body - 16 == (data ? piece * n : 0);
    std::uint64_t lo = 0, span = 0;
    if (!sized || !strided_footprint(h.a, stride, piece, n, &lo, &span)) {
        refuse(source);
        reply(in, nullptr, 0);
        return;
    }
    if (!accepts(source, lo, span)) {
        reply(in, nullptr, 0);
        return;
    }
    PageOffsetBuffer b = answer_buffer(in, std::size_t(piece * n) + 1);
    if (accumulate_runs(h.rma_kind, h.op_id, h.type_id, h.a, stride, elems, n, eb, data ? p + 16 : nullptr, b.data()) !=
        MPI_SUCCESS) {
        refuse(source);
        reply(in, nullptr, 0);
        return;
    }
    b.data()[piece * n] = 1;
    reply_owned(in, std::move(b), std::size_t(piece * n) + 1);
}

bool AmEndpoint::serve_batch(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const unsigned char* const msg = in.msg;
    const std::size_t len = in.len;
    const unsigned char* q = p;
    const unsigned char* const end = msg + len;
    for (std::uint32_t i = 0; i < h.nseg; ++i) {
        // A record (kind, body bytes, body) must lie in the message, its body hold what
        // its kind reads; the rest of a batch with a bad record is not applied.
        std::uint32_t rh[2];
        if (std::size_t(end - q) < sizeof rh) {
            refuse(source);
            break;
        }
        std::memcpy(rh, q, sizeof rh);
        const unsigned char* body = q + sizeof rh;
        const std::size_t need = rh[0] == kPut          ? 8
                                 : rh[0] == kAtomic8    ? sizeof(NotifyRecord)
                                 : rh[0] == kLockReq    ? 8
                                 : rh[0] == kAccumulate ? sizeof(AccRecord)
                                                        : ~std::size_t(0);
        if (rh[1] > std::size_t(end - body) || rh[1] < need) {
            refuse(source);
            break;
        }
        if (rh[0] == kPut) {
            std::uint64_t off;
            std::memcpy(&off, body, 8);
            if (accepts(source, off, rh[1] - 8)) copy_bytes(local_.base + off, body + 8, rh[1] - 8);
        } else if (rh[0] == kAtomic8) {
            NotifyRecord r;
            std::memcpy(&r, body, sizeof r);
            if (r.word < local_.state_words)
                apply_atomic8(local_.state + r.word, AtomicOp(r.op & ~kNotifyAnyEpoch), r.operand, 0);
            else
                refuse(source);
        } else if (rh[0] == kLockReq) {
            std::uint64_t what;
            std::memcpy(&what, body, sizeof what);
            if (what > std::uint64_t(Transport::LockRequest::exclusive_with_master)) {
                refuse(source);
            } else if (!local_.grant_lock(Transport::LockRequest(what))) {
                const unsigned char* rest = body + rh[1];
                park(source, Transport::LockRequest(what), h, rest, std::size_t(msg + len - rest), h.nseg - i - 1);
                return false;  // the rest of the batch (and its ack) once granted; counted then
            }
        } else {
            AccRecord r;
            std::memcpy(&r, body, sizeof r);
            // Element bytes of a predefined type, a run the ops layer sends, and its data
            // (flags & 4) in the record: n * elem_bytes then cannot wrap.
            const bool fits = r.elem_bytes && r.elem_bytes <= 64 && r.n <= kAccRunMax / r.elem_bytes &&
                              (!(r.flags & 4) || r.n <= (rh[1] - sizeof r) / r.elem_bytes);
            if (!fits)
                refuse(source);
            else if (accepts(source, r.toff, r.n * r.elem_bytes) &&
                     local_.accumulate(r.rma_kind, r.op_id, r.type_id, r.toff, r.n, r.elem_bytes,
                                       (r.flags & 4) ? body + sizeof r : nullptr, nullptr, nullptr) != MPI_SUCCESS)
                refuse(source);
        }
        q = body + rh[1];
    }
    if (h.reply_tag >= 0) reply(in, nullptr, 0);  // the ack
    return true;
}

void AmEndpoint::serve_put_data(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    // The payload's receive stays pending, so that the pieces of a large put are all
    // in flight at once (pipelined by the host) instead of one handshake after
    // another; every later request waits for them first (above), and so does the ack.
    if (h.b > kZeroCopyMax) {  // never sent by a correct origin: consumed, not applied
        refuse(source);
        discard_data(source);
        if (h.reply_tag >= 0) reply(in, nullptr, 0);
        return;
    }
    MPI_Request rq;
    unsigned char* dst = nullptr;  // (base + a only once a is known to be inside)
    Landing land;
    if (!accepts(source, h.a, h.b)) {  // received all the same (the stream goes on), then dropped
        land = {PageOffsetBuffer::take(spares_, h.b, 0), nullptr, 0, {}};
        dst = land.buf.data();
    } else if (dst = local_.base + h.a;
               (h.pages & 0xffff) && slow_distance(reinterpret_cast<std::uintptr_t>(dst), (h.pages & 0xffff) - 1)) {
        land = {PageOffsetBuffer::take(spares_, h.b, (h.pages & 0xffff) - 1), dst, h.b, {}};
        dst = land.buf.data();
    }
    if (receive_payload(source, dst, h.b, &rq)) {
        data_rq_.push_back(rq);
        data_land_.push_back(std::move(land));
    } else {
        refuse(source);
    }
    if (h.reply_tag >= 0) {
        complete_data();
        reply(in, nullptr, 0);  // the ack
    }
}

void AmEndpoint::serve_get(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const std::size_t len = in.len;
    // One segment answered straight from the window; several (a gathered get) copied
    // into one answer, in order. A refused request is answered all the same (empty, or
    // a gathered one with the piece marked not applied): the origin's receive must
    // complete, and its buffer stays as it was.
    const std::size_t body = len - sizeof h;
    if (h.nseg > 1) {
        bool sane = h.nseg <= 256 && h.nseg <= body / 16;
        std::uint64_t total = 0;
        for (std::uint32_t s = 0; sane && s < h.nseg; ++s) {
            std::uint64_t off, n;
            std::memcpy(&off, p + 16 * s, 8);
            std::memcpy(&n, p + 16 * s + 8, 8);
            total += n;
            sane = n <= kMaxMessage && total <= kMaxMessage;
        }
        if (!sane) {
            refuse(source);
            reply(in, nullptr, 0);
            return;
        }
        // The data of every piece, then a byte per piece: 1 = applied (Landing::finish).
        PageOffsetBuffer b = answer_buffer(in, std::size_t(total) + h.nseg);
        unsigned char* to = b.data();
        unsigned char* applied = b.data() + total;
        for (std::uint32_t s = 0; s < h.nseg; ++s) {
            std::uint64_t off, n;
            std::memcpy(&off, p + 16 * s, 8);
            std::memcpy(&n, p + 16 * s + 8, 8);
            applied[s] = accepts(source, off, n) ? 1 : 0;
            if (applied[s]) std::memcpy(to, local_.base + off, n);
            to += n;
        }
        reply_owned(in, std::move(b), std::size_t(total) + h.nseg);
        return;
    }
    std::uint64_t off = 0, n = 0;
    if (body >= 16) {
        std::memcpy(&off, p, 8);
        std::memcpy(&n, p + 8, 8);
    }
    const bool sane = body >= 16 && n <= kGetPieceMax;
    if (!sane) refuse(source);
    if (sane && accepts(source, off, n))
        reply(in, local_.base + off, n);  // a slow distance is the origin's to avoid (send())
    else
        reply(in, nullptr, 0);  // an empty answer: the origin's buffer stays as it was
}

void AmEndpoint::serve_atomic8(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    std::uint64_t old = 0;
    if (h.a < local_.state_words)
        old = apply_atomic8(local_.state + h.a, AtomicOp(h.aop), h.b, h.c);
    else
        refuse(source);
    reply_copy(in, &old, sizeof old);  // a notify is a batch record (no answer)
}

void AmEndpoint::serve_accumulate(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    const unsigned char* const p = in.p;
    const std::size_t len = in.len;
    // Origin data inside the request, or (kAccData) in the message right behind it,
    // received into the scratch buffer.
    const std::uint64_t n = h.b, eb = h.c;
    // Element bytes of a predefined type, a run the ops layer sends (at most kAccRunMax
    // bytes), and inline data that lies in the message.
    const std::size_t inline_bytes =
        h.kind == kAccData ? ((h.aop & 2) ? eb : 0) : ((h.aop & 4) ? n * eb : 0) + ((h.aop & 2) ? eb : 0);
    if (eb == 0 || eb > 64 || n > kAccRunMax / eb || inline_bytes > len - sizeof h) {
        refuse(source);
        if (h.kind == kAccData) discard_data(source);
        if (h.reply_tag >= 0) reply(in, nullptr, 0);
        return;
    }
    const void* src = (h.aop & 4) ? p : nullptr;
    const void* cmp = (h.aop & 2) ? p + ((h.aop & 4) && h.kind != kAccData ? n * eb : 0) : nullptr;
    if (h.kind == kAccData) {
        const std::size_t page = (h.pages & 0xffff) ? (h.pages & 0xffff) - 1 : 0;
        if (acc_scratch_.fits(n * eb))
            acc_scratch_.place(page);  // at the origin data's page offset
        else
            acc_scratch_ = PageOffsetBuffer(n * eb, page);
        MPI_Request rq;
        if (!receive_payload(source, acc_scratch_.data(), n * eb, &rq)) {
            refuse(source);  // not applied: its data did not come as announced
            if (h.reply_tag >= 0) reply(in, nullptr, 0);
            return;
        }
        wait_by_test(&rq);
        src = acc_scratch_.data();
    }
    if (!accepts(source, h.a, n * eb)) {
        if (h.reply_tag >= 0) reply(in, nullptr, 0);  // no old values: the result buffer stays as it was
        return;
    }
    const std::size_t result_len = (h.aop & 1) ? n * eb : 0;
    PageOffsetBuffer result = result_len ? answer_buffer(in, result_len) : PageOffsetBuffer();
    const int rc =
        local_.accumulate(h.rma_kind, h.op_id, h.type_id, h.a, n, eb, src, cmp, result_len ? result.data() : nullptr);
    if (rc != MPI_SUCCESS) refuse(source);
    if (h.reply_tag >= 0) {  // old values, or the ack
        if (result_len && rc == MPI_SUCCESS)
            reply_owned(in, std::move(result), result_len);
        else
            reply(in, nullptr, 0);
    }
}

void AmEndpoint::serve_read_state(const Incoming& in) {
    const Header& h = in.h;
    const int source = in.source;
    if (h.a > local_.state_words || h.b > local_.state_words - h.a) {
        refuse(source);
        reply(in, nullptr, 0);  // the origin's buffer stays as it was
        return;
    }
    std::vector<std::uint64_t> words(h.b);
    for (std::uint64_t i = 0; i < h.b; ++i) words[i] = __atomic_load_n(local_.state + h.a + i, __ATOMIC_ACQUIRE);
    reply_copy(in, words.data(), words.size() * 8);
}

}  // namespace fastrma::detail
