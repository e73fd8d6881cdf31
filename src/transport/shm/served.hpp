// served.hpp — small operations on a node peer's memory that this process cannot map
// (create windows over plain user memory, dynamic windows), done by the peer's own CPU by
// load and store instead of cross-memory syscalls from here: fetch_and_op,
// compare_and_swap and contiguous accumulates and get_accumulates of up to kMaxBytes
// (epochs/issue.cpp), and contiguous puts and gets of up to kMaxBytes (the drain of a small
// CmaBatch, transport/shm/cma_batch.cpp); large and strided transfers stream through a bulk area
// (BulkChannel below, used by epochs/issue.cpp).
//
// The peer's state page holds kServedSlots request slots (state_words.hpp): a header and
// kMaxBytes of data each. An origin claims a free slot, writes the request (a put's data
// too), marks it posted, and spins until the answer is there (a get's data, an atomic's old
// value); the target learns of it from a flag word the origin sets beside the beat, or,
// for a while after it served a request, from the slots' own state words (Server::posted),
// takes posted slots with a CAS, applies each (atomics through its
// window's own accumulate path, under the striped accumulate lock as a cross-memory origin
// takes it: one atomicity domain; puts and gets by memcpy) and answers in the slot. Only a
// thread of the target that waits in MPI serves promptly, so the target advertises it: the
// host-progress hook, and fastrma's own waits in sync calls (EpochHost::serve_while_waiting),
// store the time in kServedBeat as they pass (every kBeatEveryNs at most). An origin posts
// only when the beat is fresh (the target waits in MPI) and withdraws its request if it is
// not taken within kServedWaitNs (the target left MPI meanwhile). The
// withdrawal is a CAS posted -> free that races the target's posted -> taken: exactly one
// wins, so a request is applied either by the target or, withdrawn, by the origin itself
// by cross-memory attach (which needs no target CPU: a target that computes is not woken
// up for it) — never both.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include <sys/types.h>

#include "base/spin_lock.hpp"
#include "ops/state_words.hpp"

namespace fastrma::detail::served {

constexpr std::uint64_t kFreshNs = 10'000;  // a beat this recent: the target serves
// A post not taken by then is withdrawn: served, a request takes well under this; a target
// thread descheduled meanwhile (oversubscribed cores) comes back only after a time slice.
constexpr std::uint64_t kServedWaitNs = 4'000;
// A serving thread refreshes its beat at most this often, and reads the clock once every
// kBeatPasses passes: a beat stored at every pass cost the target a clock read (about
// half of a hook pass here) and made every origin's fresh() miss its cache line.
constexpr std::uint64_t kBeatEveryNs = 2'000;
constexpr unsigned kBeatPasses = 16;
// After a request was served, this many passes read the slots themselves (Server::posted).
constexpr unsigned kHotPasses = 4096;
// A slot's words: state, request, target offset, answer, then the data (a put's or get's
// bytes; an atomic's operand and compare in, its old value out).
enum SlotWord : std::size_t { kState, kDesc, kToff, kAnswer, kData };
constexpr std::size_t kMaxBytes = (kServedSlotWords - kData) * 8;  // a put or get served: 96

// What one slot asks: rma_kind (put, get, acc, get_acc, fop or cas), op id and type id
// (accumulates), the target offset (dynamic windows: the address), bytes (fop and cas: the
// element's, <= 8; the others: <= kMaxBytes), origin data (accumulates: the operand, null
// for MPI_NO_OP; put: its bytes) and compare (cas only).
struct Request {
    int kind, op_id, type_id;
    std::uint64_t toff;
    std::size_t bytes;
    const void* origin;
    const void* compare;
};

// Is a thread of the peer whose state words are mapped at `state` waiting in MPI now (its
// beat at most within_ns old)? *at: the time read.
bool fresh(const std::uint64_t* state, std::uint64_t within_ns = kFreshNs, std::uint64_t* at = nullptr);

// A slot's or bulk buffer's state: free -> claimed (the origin writes) -> posted -> taken
// (the target applies) -> answered -> free (the origin read it); posted -> free when the
// origin withdraws. (Bulk buffers skip claimed: the origin holds the whole area.)
enum SlotState : std::uint64_t { kFree, kClaimed, kPosted, kTaken, kAnswered };

// A request in a peer's slot, from post() until finish().
struct Posted {
    std::uint64_t* slot = nullptr;
    std::uint64_t t0 = 0;  // when it was posted
    std::size_t bytes = 0;
    pid_t pid = 0;  // the target's process (its page's kInfoPid when posted), watched while it holds the request
};
enum class Outcome { answered, withdrawn, refused };
// While the target holds a request or bulk part, its process is checked this often
// (liveness.hpp): one that died is given up on.
constexpr std::uint64_t kLivenessEveryNs = 1'000'000;

// Claims a free slot of the peer, writes req into it and posts it. False: no slot free
// (nothing posted). Several may be posted before the first is finished. t0: the time now,
// if the caller has just read it (0: read here).
bool post(std::uint64_t* state, const Request& req, Posted* p, std::uint64_t t0 = 0);
// Waits for a posted request: answered (the get's data or the atomic's old value copied to
// result, which may be null for a put, and the peer's answer, an MPI error class, in *rc),
// withdrawn (nobody took it within kServedWaitNs) or refused by the peer; in the last two
// the origin applies it itself. The slot is free again on return. A target whose process
// exited while it held the request: refused (the origin's own path then finds it gone), the
// slot left as it is.
Outcome finish(Posted& p, void* result, int* rc);

// An accumulate, get_accumulate, fetch_and_op or compare_and_swap, one at a time: true:
// applied there, the old values (if asked) in *result and the answer in *rc. False: not
// taken (no fresh beat, no free slot, withdrawn or refused): apply it yourself.
bool try_remote(std::uint64_t* state, const Request& req, void* result, int* rc);

// Target: applies one request to my memory: kind, op id, type id, offset, bytes, origin,
// compare, result (a get's destination, accumulates' old values); an MPI error class, or
// kRefused to leave it to the origin (an address not attached to my dynamic window any
// more, a range outside my part). Called only with a request Server's decoder checked, its
// data copied out of the slot (a node peer may write the slot meanwhile).
using Apply = std::function<int(int, int, int, std::uint64_t, std::uint64_t, const void*, const void*, void*)>;
constexpr int kRefused = -1;

// Fault injection (FASTRMA_FAULT=kill_serving): the target kills itself right after it took a
// request or a bulk part, before it answers.
extern std::atomic<bool> g_fault_kill_serving;

// ---- Bulk: large and strided transfers (puts, gets, accumulates, get_accumulates) ----
//
// Besides the slots, a create or dynamic window's state area holds one bulk area
// (kServedBulkWord says where; FASTRMA_SERVED_BULK bytes): an owner word, then two buffers,
// each a header line and half the data. One origin at a time claims the area (CAS on the
// owner word), and streams a run of `count` pieces of `piece` bytes at target offset toff,
// `stride` apart (negative allowed; a contiguous transfer is pieces at stride = piece), in
// parts of as many pieces as half the data holds: it packs part k into buffer k % 2 and
// posts it while the target applies part k - 1, so a large transfer pipelines. The target
// takes a posted buffer with a CAS and applies the part as one strided call: puts and gets by
// copy_strided, accumulates through its window's strided accumulate path (under the
// accumulate-lock stripes of the part's footprint, as a cross-memory origin takes them: one
// atomicity domain). The rules are the slots': posted only while the beat is fresh, a part
// not taken within kServedWaitNs of the target's last progress on the area is withdrawn by
// CAS (exactly one side applies it), and a withdrawn or refused part, with every part after
// it, is moved by the origin itself (`fallback`).
struct BulkRun {
    int kind, op_id, type_id;
    std::uint64_t toff;
    std::int64_t stride;
    std::uint64_t piece, count;
    bool has_origin;  // puts; accumulates other than MPI_NO_OP
};

// The claimed bulk area of one peer, on the origin's side (one thread, one op).
class BulkChannel {
public:
    // Claims the area of the peer whose state words are mapped at `state` (its owner word
    // then holds this process's pid; an owner whose process exited is taken over). False: it
    // has no registered area, or its beat is stale or another origin holds it for wait_ns on end (meanwhile
    // this process serves its own peers with its own beat: two processes streaming to each
    // other meet so). patience_ns (an op that costs far more by cross-memory attach): a beat
    // that recent will do, and a part is withdrawn only when not taken for that long (the
    // peer may be in a long MPI call that serves between its steps).
    bool claim(std::uint64_t* state, std::uint64_t wait_ns = 0, std::uint64_t patience_ns = kFreshNs);
    ~BulkChannel();
    // While it waits for the target, serve(arg) serves what peers posted to this process
    // (both sides of a pair of origins streaming to each other wait in MPI at once).
    void serve_while_waiting(bool (*serve)(void*), void* arg) { serve_ = serve, serve_arg_ = arg; }
    // Data bytes one part carries (half the area's).
    std::size_t part_bytes() const { return half_; }
    // Streams run; pack(first, n, dst) writes pieces [first, first + n) packed to dst
    // (has_origin), unpack(first, n, src) takes their packed answer (gets, get_accumulates),
    // fallback(first, n) moves pieces the target did not take (an MPI error class). Pieces of
    // at most part_bytes(). Returns the first error (the target's answer or a fallback's).
    int run(const BulkRun& r, const std::function<void(std::uint64_t, std::uint64_t, unsigned char*)>& pack,
            const std::function<void(std::uint64_t, std::uint64_t, const unsigned char*)>& unpack,
            const std::function<int(std::uint64_t, std::uint64_t)>& fallback);

private:
    std::uint64_t* state_ = nullptr;
    std::uint64_t* area_ = nullptr;
    std::size_t half_ = 0;
    pid_t pid_ = 0;  // the target's process
    bool stop_ = false;  // a part was not taken and the beat is stale: the rest goes by fallback
    std::uint64_t fresh_ns_ = kFreshNs, wait_ns_ = kServedWaitNs;
    bool (*serve_)(void*) = nullptr;
    void* serve_arg_ = nullptr;
};

// Target: applies one bulk part: kind, op id, type id, toff, stride, piece, count, origin
// (packed pieces, or null), result (where the packed answer goes, or null). An MPI error
// class or kRefused, as Apply. Called only with a part Server's decoder checked.
using ApplyBulk =
    std::function<int(int, int, int, std::uint64_t, std::int64_t, std::uint64_t, std::uint64_t, const void*, void*)>;
// Words of a state area the bulk area of `bytes` takes (0: none).
std::size_t bulk_words(std::size_t bytes);

// Origins: where the node peers' bulk areas are, as this process laid them out at window
// creation (every member's alike): the state pages at first + i * page_words for i <
// members, each with its area at word `word`, `bytes` long. BulkChannel::claim takes only
// areas registered so, never the geometry a peer's page states. False (nothing registered):
// an area that does not fit the page.
bool register_bulk_areas(std::uint64_t* first, std::size_t page_words, std::size_t members, std::size_t word,
                         std::size_t bytes);
void unregister_bulk_areas(std::uint64_t* first);

// The target decodes each request as the message transport's server decodes a message: the
// slot's or buffer's header words copied once, every field checked (kind, flags, op and type
// ids, bytes against the slot or the element, piece * count against the buffer), the data
// copied out of the slot before it is applied. A malformed request is answered MPI_ERR_OTHER
// and never applied; a range outside my part is refused (Apply).
class Server {
public:
    // bulk_word, bulk_bytes: my bulk area as I laid it out (bulk_word words into my state
    // words, bulk_bytes long; 0: none), kept here: the page's words saying so are never read back.
    explicit Server(std::size_t bulk_word = 0, std::size_t bulk_bytes = 0);
    // Serves what origins posted to my state words; beat: advertise this thread as a
    // prompt server (the host-progress hook; not the progress thread, which may doze).
    // True if a request was served. Safe from any thread (one serves at a time).
    // The bulk area's parts through apply_bulk.
    bool poll(std::uint64_t* my_state, const Apply& apply, const ApplyBulk& apply_bulk, bool beat);
    bool poll(std::uint64_t* my_state, const Apply& apply, bool beat) { return poll(my_state, apply, nullptr, beat); }
    // The beat (as poll does), then whether nothing is posted: a caller on the host's
    // progress loop then skips building its appliers (the common pass); else it calls serve().
    bool nothing_posted(std::uint64_t* my_state, bool beat) {
        if (beat) beat_now(my_state);
        return !posted(my_state);
    }
    // Serves what is posted (poll without the beat and the check).
    bool serve(std::uint64_t* my_state, const Apply& apply, const ApplyBulk& apply_bulk);

private:
    // Is something posted? Idle (cold), one load: the word origins set after they post.
    // After a request was served, for kHotPasses passes (hot), the slots' own state words,
    // so that a request in a busy exchange is seen as soon as its one line arrives; the
    // target says so in kServedScanning, and origins then skip the word. Going cold is a
    // Dekker handshake with post(): the target clears kServedScanning, fences and reads the
    // slots once more; an origin stores its post, fences and reads kServedScanning: one of
    // the two sees the other.
    bool posted(std::uint64_t* my_state);
    bool slots_posted(const std::uint64_t* my_state) const;
    void serve_slot(std::uint64_t* s, const Apply& apply);
    void beat_now(std::uint64_t* my_state);
    bool poll_bulk(std::uint64_t* my_state, const ApplyBulk& apply_bulk);
    std::size_t bulk_word_ = 0, half_ = 0;  // my bulk area: where, and its buffers' data bytes (0: none)
    SpinLock mu_;
    std::unique_ptr<unsigned char[]> operand_;  // a get_accumulate part's origin data (mu_)
    std::size_t operand_bytes_ = 0;
    std::atomic<unsigned> beat_passes_{0};  // passes with beat, for the clock's pace
    // Passes left that read the slots (posted()); set to kHotPasses and brought to 0 only under
    // mu_, with kServedScanning, so that the word is set only while hot_ is not 0.
    std::atomic<unsigned> hot_{0};
};

}  // namespace fastrma::detail::served
