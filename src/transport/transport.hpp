// transport.hpp — what a medium does natively: put, get, 8-byte atomics, flush.
//
// A transport never chooses between a native operation and a fallback (that lives in
// src/ops/). Posting reports done / posted / retry (backpressure) / error, never blocks
// forever. Remote synchronization words (locks, counters) live in each peer's state
// segment; atomic8() updates them in the transport's atomicity domain.
//
// A transport object serves the peers of one window (the shared-memory transport is one
// stateless object for all windows): besides the per-peer operations it offers the few
// window-wide ones the epochs need (flush_all, fence_sync, close_sync) and, where it needs
// the target's CPU, a target side that executes requests through a LocalTarget. Callers
// ask the capabilities (Caps), never the type; select.hpp makes the objects.
//
// Shaped for verbs too: a PeerRegion carries what a one-sided NIC operation needs
// (remote address; a registration key would join pid), and flush() is the bulk
// completion point per peer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ops/chunk.hpp"

namespace fastrma::detail {

class Bootstrap;

enum class Post : std::uint8_t { done, posted, retry, error };
// done: complete (the data is where it goes); posted: on its way, complete at the next
// flush(peer) of this transport (every am request; the origin buffer of a put may already
// be free: Caps::inline_max); retry: not taken now (backpressure), post it again later.
inline bool accepted(Post p) { return p == Post::done || p == Post::posted; }

// fetch_xor has no plain IB verb (masked atomics are an extension): a verbs transport
// would do it with a compare-swap loop.
enum class AtomicOp : std::uint8_t { fetch_add, compare_swap, swap, load, fetch_xor };

// An 8-byte atomic on a synchronization word this process can address (its own, or a node
// peer's mapped state): the old value. The shm transport and the am server share it.
inline std::uint64_t apply_atomic8(std::uint64_t* w, AtomicOp op, std::uint64_t operand, std::uint64_t compare) {
    switch (op) {
    case AtomicOp::fetch_add:
        return __atomic_fetch_add(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::swap:
        return __atomic_exchange_n(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::load:
        return __atomic_load_n(w, __ATOMIC_ACQUIRE);
    case AtomicOp::fetch_xor:
        return __atomic_fetch_xor(w, operand, __ATOMIC_ACQ_REL);
    case AtomicOp::compare_swap:
        __atomic_compare_exchange_n(w, &compare, operand, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return compare;  // the old value either way
    }
    return 0;
}

// The representation of one basic element, for transports whose hardware applies element
// atomics itself (ofi): what an accumulate's type id stands for, told once per window.
enum class ElemKind : std::uint8_t { none, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, f_long, c32, c64, c_long };

// How this process reaches one peer's part of a window.
struct PeerRegion {
    unsigned char* mapped = nullptr;  // load/store address here, or null
    std::uint64_t remote_addr = 0;  // the data's address in the peer's address space
    pid_t pid = 0;  // the peer process (cross-memory attach)
    std::uint64_t size = 0;  // bytes of window memory at the peer
    std::uint64_t* state = nullptr;  // the peer's state words, mapped here (null: reached by messages)
    int rank = -1;  // the peer's rank in the window
};

class Transport {
public:
    struct Caps {
        bool load_store;  // peer memory is mapped here
        bool native_atomics;  // element atomics on peer data without the target's CPU
        bool needs_target_cpu;  // the target's progress thread must act
        // The peer applies this process's requests in the order they were posted, and an
        // answer to one means every earlier one was applied (am): a synchronization message
        // that is answered (a lock release) completes everything before it, and one that is
        // not (a PSCW complete) needs no flush ahead of it.
        bool ordered = false;
        // The target grants a lock request itself, in order with this process's requests
        // (lock_request): the origin sends its ops behind the request without waiting.
        bool queues_locks = false;
        // Gated access epochs (open_gate / gate_ready / enter_gate): an origin's requests
        // of its k-th access epoch to a target wait at that target until it opened its
        // gate to the origin k times, so an access epoch may start before the exposure's
        // signal arrived (MPI_Win_start need not wait for MPI_Win_post).
        bool gates_access = false;
        // Largest put / accumulate the transport copies into its own buffer at post (the
        // origin buffer is free at once, and the op costs no message of its own).
        std::size_t inline_max = 0;
        // Largest piece of a put_strided / get_strided / accumulate_strided /
        // get_accumulate_strided (0: not offered).
        std::size_t strided_piece_max = 0;
    };
    virtual ~Transport() = default;
    virtual const char* name() const = 0;
    virtual Caps caps(const PeerRegion& peer) const = 0;
    virtual Post put(const PeerRegion& peer, const Chunk* chunks, std::size_t n) = 0;
    virtual Post get(const PeerRegion& peer, const Chunk* chunks, std::size_t n) = 0;
    // n pieces of len bytes (len <= caps().strided_piece_max): piece i from local + i * lstride
    // to offset + i * rstride at the peer, strides possibly negative; as put() otherwise.
    // Only called when caps() offers it.
    virtual Post put_strided(const PeerRegion& /*peer*/, const void* /*local*/, std::int64_t /*lstride*/,
                             std::uint64_t /*offset*/, std::int64_t /*rstride*/, std::size_t /*len*/,
                             std::uint64_t /*n*/) {
        return Post::error;
    }
    // The get of such pieces (the data in place at the next flush, as get()).
    virtual Post get_strided(const PeerRegion& /*peer*/, void* /*local*/, std::int64_t /*lstride*/,
                             std::uint64_t /*offset*/, std::int64_t /*rstride*/, std::size_t /*len*/,
                             std::uint64_t /*n*/) {
        return Post::error;
    }
    // An accumulate without result (rma_kind acc) of n pieces of elems basic elements of
    // elem_bytes (a piece at most caps().strided_piece_max bytes): piece i from src + i *
    // lstride onto toff + i * rstride, each applied as accumulate() applies a run. Only
    // called when caps() offers strided puts.
    virtual Post accumulate_strided(const PeerRegion& /*peer*/, int /*rma_kind*/, int /*op_id*/, int /*type_id*/,
                                    std::uint64_t /*toff*/, std::int64_t /*rstride*/, std::uint64_t /*elems*/,
                                    std::size_t /*elem_bytes*/, const void* /*src*/, std::int64_t /*lstride*/,
                                    std::uint64_t /*n*/) {
        return Post::error;
    }
    // The get_accumulate of such pieces (rma_kind get_acc): piece i from src + i * lstride
    // (src null: MPI_NO_OP, nothing read) onto toff + i * rstride, its old values to result
    // + i * res_stride (in place at the next flush, as get()). Each element's old value is
    // the one this op's update replaced, read and updated under the target's accumulate
    // path as accumulate() does. Only called when caps() offers strided puts.
    virtual Post get_accumulate_strided(const PeerRegion& /*peer*/, int /*rma_kind*/, int /*op_id*/, int /*type_id*/,
                                        std::uint64_t /*toff*/, std::int64_t /*rstride*/, std::uint64_t /*elems*/,
                                        std::size_t /*elem_bytes*/, const void* /*src*/, std::int64_t /*lstride*/,
                                        void* /*result*/, std::int64_t /*res_stride*/, std::uint64_t /*n*/) {
        return Post::error;
    }
    // 8-byte atomic on a synchronization word of the peer; returns the old value.
    virtual std::uint64_t atomic8(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand,
                                  std::uint64_t compare = 0) = 0;
    // An 8-byte atomic whose old value lands in *old when atomic8_finish(peer, token)
    // returns: a transport that waits for the peer keeps two such in flight at once (a
    // lock's master and target words). Default: done here.
    virtual std::uint64_t atomic8_start(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand,
                                        std::uint64_t compare, std::uint64_t* old) {
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
    virtual Post accumulate(const PeerRegion&, int /*rma_kind*/, int /*op_id*/, int /*type_id*/, std::uint64_t /*toff*/,
                            std::uint64_t /*n*/, std::size_t /*elem_bytes*/, const void* /*src*/,
                            const void* /*compare*/, void* /*result*/) {
        return Post::error;
    }
    // Native element atomics: the window declares, once per basic type it may accumulate on,
    // the element's representation and every op MPI allows on it (bit i: OpKind i; replace
    // and no_op included) and whether compare-and-swap is allowed; true when the transport
    // applies every one of them atomically without the target's CPU (fi_query_atomic). Once
    // every process of the window said so, enable_native_type(type_id): native_type() says
    // yes from then on, and accumulate() takes every operation on that type — all of them,
    // so a location never sees two atomicity domains. Default: never.
    virtual bool declare_native_type(int /*type_id*/, ElemKind /*kind*/, std::uint32_t /*op_bits*/, bool /*cas*/) {
        return false;
    }
    virtual void enable_native_type(int /*type_id*/) {}  // every process of the window can
    virtual bool native_type(int /*type_id*/) const { return false; }
    // Reads count state words of the peer (its dynamic region table): by load where they
    // are mapped, else by message. Default: atomic8 loads.
    virtual void read_state(const PeerRegion& peer, std::size_t word, std::size_t count, std::uint64_t* out) {
        for (std::size_t i = 0; i < count; ++i) out[i] = atomic8(peer, word + i, AtomicOp::load, 0);
    }
    // Origin side: how many requests the peer refused since the last call (dynamic windows:
    // outside the regions it had attached when they arrived); counted up to the last
    // completion of this process's requests to it, once collect_refusals() took in the
    // refusal notices that arrived (one call before asking any number of peers).
    virtual void collect_refusals() {}
    virtual std::uint64_t refused(const PeerRegion& /*peer*/) { return 0; }
    // Origin side: the first operation to the peer that failed after it was posted (a
    // failed completion), or a failure of the medium itself that no operation could report
    // when it happened (a host MPI call of the message transport, its server's included:
    // reported to whichever peer is asked first), since the last call: an MPI error class,
    // raised with the medium's message naming call; 0 if none. Every completion point asks.
    virtual int failed(const PeerRegion& /*peer*/, const char* /*call*/) { return 0; }
    // True while an operation to peer is still in flight on another medium that data moved
    // straight through a mapping would overtake (SplitTransport: a network accumulate): the
    // caller then puts or gets through put()/get(), which order it.
    virtual bool data_must_wait(const PeerRegion& /*peer*/) const { return false; }
    // Dynamic windows over a transport that registers memory with the network (ofi): this
    // process attaches [base, base + size) (registered before any peer can learn of it; an
    // MPI error class, raised) or detaches it (no access lands in it once this returns);
    // an origin read a peer's table of attached regions (count pairs base, size) and tells
    // the transport, which names each region's registration by it. Default: nothing to do.
    virtual int expose_region(void* /*base*/, std::uint64_t /*size*/) { return 0; }
    virtual void withdraw_region(const void* /*base*/) {}
    virtual void learn_regions(const PeerRegion& /*peer*/, const std::uint64_t* /*pairs*/, std::size_t /*count*/) {}

    // Gated access epochs (Caps::gates_access). Target side: the exposure to origin opens
    // (MPI_Win_post). Origin side: whether this process may open its next access epoch to
    // target (its gate for the previous one has opened), and the epoch opens.
    virtual void open_gate(const PeerRegion& /*origin*/) {}
    virtual bool gate_ready(const PeerRegion& /*target*/) { return true; }
    virtual void enter_gate(const PeerRegion& /*target*/) {}

    // Window-wide operations, over every peer this object serves.
    // Remote completion of everything posted to any of them.
    virtual void flush_all() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
    // The core of MPI_Win_fence, collective: when it returns at any member, everything any
    // member posted before it is complete at its target. An MPI error class.
    virtual int fence_sync(Bootstrap& group);
    // Before a window's memory goes (MPI_Win_free), collective: nothing posted by any member
    // is left to arrive anywhere. An MPI error class.
    // Default: flush_all, then the group's barrier() — not the fence's barrier of a node
    // window, whose word rank 0 clears right after (Window::leave_node) while a member may
    // still be reading it.
    virtual int close_sync(Bootstrap& group);

    // Target side (transports that need the target's CPU).
    // Serve what has arrived (try-locks only: safe inside the host MPI's progress loop);
    // true if anything was served.
    virtual bool serve() { return false; }
    // serve(), and send what waited to leave; true if anything happened.
    virtual bool progress() { return serve(); }
    // Requests wait here for something this process changes (a lock word, an exposure):
    // progress() should run again soon.
    virtual bool has_waiting() const { return false; }
    // Orders what served requests wrote to my memory before the caller's later loads.
    virtual void sync_served() {}
    // My dynamic region table changed: once this returns, no request admitted under the old
    // table touches my memory any more.
    virtual void settle() {}
    // Called on every idle pass of a thread waiting inside the transport (a progress thread
    // may then stand down); and whether someone else serves this process while one of its
    // threads blocks in a group collective (else fence_sync and close_sync serve).
    virtual void set_on_wait(std::function<void()> /*f*/) {}
    virtual void set_served_elsewhere(bool /*yes*/) {}
    // gone(rank): whether rank (rank >= 0), or any process of the window (-1: also one that
    // may hold up another's answers, as a lock a dead process held at the target), is known to
    // have died (an MPI error class raised for it, else MPI_SUCCESS). A transport whose waits
    // would otherwise wait for ever asks it while it waits, and gives the wait up with that
    // error; one that judges a connection asks for its peer only.
    virtual void set_peer_gone(std::function<int(int)> /*gone*/) {}
    // A file descriptor that becomes readable when something arrives for this transport that
    // only its progress() handles (a provider's completion wait fd), re-armed by progress();
    // -1: none. The progress thread sleeps on it besides its doorbell.
    virtual int wait_fd() const { return -1; }
};

// What a transport that needs the target's CPU calls to execute requests against this
// process's part of a window: the window's narrow interface to the requests it serves.
struct LocalTarget {
    unsigned char* base = nullptr;  // my window data (dynamic: null, offsets are addresses)
    std::uint64_t size = 0;  // bytes of my window data (dynamic: unused, `attached` decides)
    std::uint64_t* state = nullptr;  // my state words
    std::uint64_t state_words = 0;
    // Executes one accumulate run at my memory (the window's own accumulate path):
    // rma_kind, op id, type id, target offset, elements, element bytes, origin data, compare
    // (cas), result buffer (may be null). Returns an MPI error class, applying nothing when
    // kind, op, type or element bytes do not make a valid accumulate.
    std::function<int(int, int, int, std::uint64_t, std::uint64_t, std::uint64_t, const void*, const void*, void*)>
        accumulate;
    // The same for `pieces` runs of count elements at once (a strided accumulate request):
    // rma_kind, op id, type id, target offset of run 0, the target step between runs
    // (bytes, may be negative), count, pieces, element bytes, origin data packed run after
    // run (null: MPI_NO_OP), old values packed likewise (may be null). One check of kind, op
    // and type, then the runs under the accumulate lock of their whole footprint, in order
    // (nothing applied when the check fails). Null: each run goes through `accumulate`.
    std::function<int(int, int, int, std::uint64_t, std::int64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                      const void*, void*)>
        accumulate_strided;
    // One attempt to take my lock words for an origin's queued request (the lock rules of
    // src/epochs: lockproto::grant).
    std::function<bool(Transport::LockRequest)> grant_lock;
    // Dynamic windows: whether [address, address + bytes) lies in one region attached here
    // now. Origins check their cached copy of my table; this is the check that holds when
    // I detached a region since (a request outside is not applied, and its origin is told).
    // Null for other flavors (the origin's bounds check is exact).
    std::function<bool(std::uint64_t, std::uint64_t)> attached;
};

}  // namespace fastrma::detail
