// transport.hpp — what a medium does natively: put, get, 8-byte atomics, flush.
//
// A transport never chooses between a native operation and a fallback (that lives in
// src/ops/). Posting reports done / posted / retry (backpressure) / error, never blocks
// forever. Remote synchronization words (locks, counters) live in each peer's state
// segment; atomic8() updates them in the transport's atomicity domain.
//
// Shaped for verbs too: a PeerRegion carries what a one-sided NIC operation needs
// (remote address; a registration key would join pid), and flush() is the bulk
// completion point per peer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

enum class Post : std::uint8_t { done, posted, retry, error };
// done: complete (the data is where it goes); posted: on its way, complete at the next
// flush(peer) of this transport (an am get's data, an am fetch's old values).
inline bool accepted(Post p) { return p == Post::done || p == Post::posted; }

// fetch_or has no plain IB verb (masked atomics are an extension): a verbs transport
// would do it with a compare-swap loop.
enum class AtomicOp : std::uint8_t { fetch_add, compare_swap, swap, load, fetch_or };

// An 8-byte atomic on a synchronization word this process can address (its own, or a node
// peer's mapped state): the old value. The shm transport and the am server share it.
inline std::uint64_t apply_atomic8(std::uint64_t* w, AtomicOp op, std::uint64_t operand, std::uint64_t compare) {
    switch (op) {
    case AtomicOp::fetch_add: return __atomic_fetch_add(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::swap: return __atomic_exchange_n(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::load: return __atomic_load_n(w, __ATOMIC_ACQUIRE);
    case AtomicOp::fetch_or: return __atomic_fetch_or(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::compare_swap:
        __atomic_compare_exchange_n(w, &compare, operand, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return compare;  // the old value either way
    }
    return 0;
}

// How this process reaches one peer's part of a window.
struct PeerRegion {
    unsigned char* mapped = nullptr;  // load/store address here, or null
    std::uint64_t remote_addr = 0;    // the data's address in the peer's address space
    pid_t pid = 0;                    // the peer process (cross-memory attach)
    std::uint64_t size = 0;           // bytes of window memory at the peer
    std::uint64_t* state = nullptr;   // the peer's state words, mapped here (null over am)
    int rank = -1;                    // the peer's rank in the window (am)
    void* am = nullptr;               // the window's AmEndpoint, for peers served by am
};

// One contiguous piece of a transfer: local buffer <-> [offset, offset + len) at the peer.
struct Chunk {
    void* local;
    std::uint64_t offset;
    std::size_t len;
};

class Transport {
public:
    struct Caps {
        bool load_store;        // peer memory is mapped here
        bool native_atomics;    // element atomics on peer data without the target's CPU
        bool needs_target_cpu;  // the target's progress thread must act
        // The peer applies this process's requests in the order they were posted, and an
        // answer to one means every earlier one was applied (am): a synchronization message
        // that is answered (a lock release) completes everything before it, and one that is
        // not (a PSCW complete) needs no flush ahead of it.
        bool ordered = false;
        // The target grants a lock request itself, in order with this process's requests
        // (lock_request): the origin sends its ops behind the request without waiting.
        bool queues_locks = false;
    };
    virtual ~Transport() = default;
    virtual const char* name() const = 0;
    virtual Caps caps(const PeerRegion& peer) const = 0;
    virtual Post put(const PeerRegion& peer, const Chunk* chunks, std::size_t n) = 0;
    virtual Post get(const PeerRegion& peer, const Chunk* chunks, std::size_t n) = 0;
    // 8-byte atomic on a synchronization word of the peer; returns the old value.
    virtual std::uint64_t atomic8(const PeerRegion& peer, std::size_t word, AtomicOp op,
                                  std::uint64_t operand, std::uint64_t compare = 0) = 0;
    // An 8-byte atomic whose old value lands in *old when atomic8_finish(peer, token)
    // returns: a transport that waits for the peer keeps two such in flight at once (a
    // lock's master and target words). Default: done here.
    virtual std::uint64_t atomic8_start(const PeerRegion& peer, std::size_t word, AtomicOp op,
                                        std::uint64_t operand, std::uint64_t compare, std::uint64_t* old) {
        *old = atomic8(peer, word, op, operand, compare);
        return 0;
    }
    virtual void atomic8_finish(const PeerRegion& /*peer*/, std::uint64_t /*token*/) {}
    // An 8-byte atomic whose old value nobody wants (a post, a complete): may leave
    // without waiting for the peer.
    virtual void notify8(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand) {
        (void)atomic8(peer, word, op, operand);
    }
    // A PSCW complete: everything posted to peer locally complete when this returns, and a
    // notify8 that the peer applies only after all of it. Default: remote completion, then
    // the notify. An ordered transport may send the notify first and complete locally after
    // (the signal then overlaps the wait for this process's own answers).
    virtual void complete_notify8(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand) {
        flush(peer);
        notify8(peer, word, op, operand);
    }
    // A lock release: n 8-byte atomics (old values unwanted) applied at the peer after
    // everything posted to it before. Default: one notify8 each (the caller completed the
    // epoch first). An ordered transport completes everything before them, locally and
    // remotely, when this returns (so the caller need not flush first): the releases ride
    // with the last ops, and leave one-way when every earlier request is already answered.
    struct Release {
        std::size_t word;
        AtomicOp op;
        std::uint64_t operand;
    };
    virtual void release(const PeerRegion& peer, const Release* r, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) notify8(peer, r[i].word, r[i].op, r[i].operand);
    }
    // Transports with Caps::queues_locks: queue a request for peer's lock (what) ahead of
    // every later request of this process to peer; the peer applies nothing of ours behind
    // it before it could take the lock (retrying as other holders release). The lock is
    // ours as far as this process can tell: ops may follow at once.
    enum class LockRequest : std::uint32_t { shared, exclusive, exclusive_with_master };
    virtual void lock_request(const PeerRegion& /*peer*/, LockRequest /*what*/) {}
    // Completion tokens, for operations that complete on their own (request-based ones):
    // mark(peer) stands for everything posted to peer so far and requests whatever makes it
    // complete (an am flush request), without waiting — 0 when all of it is complete now;
    // reached(peer, token) says, without blocking, whether all of it is complete at the
    // origin (buffers reusable, fetched data in place). A transport that completes at post:
    // 0 and always true.
    virtual std::uint64_t mark(const PeerRegion& /*peer*/) { return 0; }
    virtual bool reached(const PeerRegion& /*peer*/, std::uint64_t /*token*/) { return true; }
    // Remote completion of everything posted to peer.
    virtual void flush(const PeerRegion& peer) = 0;
    // Local completion: origin buffers reusable, fetched data (gets, old values) in place.
    virtual void flush_local(const PeerRegion& peer) { flush(peer); }
    // Transports that need the target's CPU run accumulates there: n basic elements of
    // type type_id (portable ids, TypeInfo::id / OpKind) at toff; src null for MPI_NO_OP,
    // compare only for compare-and-swap, old values to result (may be null).
    // Default: not supported (Post::error) — the ops layer then uses put/get under a lock.
    virtual Post accumulate(const PeerRegion&, int /*rma_kind*/, int /*op_id*/, int /*type_id*/,
                            std::uint64_t /*toff*/, std::uint64_t /*n*/, std::size_t /*elem_bytes*/,
                            const void* /*src*/, const void* /*compare*/, void* /*result*/) {
        return Post::error;
    }
    // Advance outstanding work; true if anything happened.
    virtual bool progress() { return false; }
};

}  // namespace fastrma::detail
