// cma_batch.hpp — small cross-memory-attach operations on one peer, moved in few syscalls.
//
// A put, get or accumulate on a create or dynamic window's unmapped part costs one or two
// process_vm_writev / readv calls each (microseconds apiece, where an 8-byte copy into
// mapped memory costs nanoseconds). MPI completes them only at a synchronization call,
// so small ones wait here and move together at the next completion point (flush, unlock,
// fence, complete, free) or when the batch is full: all puts in one writev; all
// accumulates under the target's accumulate-lock stripes, in one readv + one writev; then
// all gets in one readv. A drain of a few small puts and gets (no accumulates) to a peer
// with a thread inside MPI is moved by that peer's CPU instead, through the slots of its
// state page (transport/shm/served.hpp), and what it does not take by cross-memory attach: either
// way everything has landed when the drain returns.
//
// Lanes: each application thread queues into a lane of its own (threads take lanes in turn,
// kLanes of them), so that threads posting to the same peer do not bounce one lock and one
// set of buffers between cores for every 8-byte put; a completion point drains every lane
// that holds something, all of them in one syscall a side (a lane drains alone only when it
// is full, or before an accumulate of another thread).
//
// Invariants: a put's and an accumulate's origin bytes are copied in at issue (the caller's
// buffer is free at once); a get's destination and an accumulate's result buffer are the
// caller's, filled when the batch drains (MPI lets them be read only after completion).
// Within a lane (one thread's operations) accumulates apply in the order they were issued:
// one that covers exactly the bytes of a queued one applies to the same copy after it; one
// that overlaps a queued one otherwise, and a put that overlaps a queued accumulate, drain
// the lane first. Across lanes accumulates apply in issue order too: a thread that queues
// an accumulate first drains every other lane that holds one (an accumulate another thread
// issued before this one — if they were ordered at all — applies first). A failure (the
// peer exited) is kept and reported by the next drain(): the completion point raises.
// Thread-safe: one spin lock per lane, held to queue and to swap buffers, never across a
// syscall; a drain takes the locks of the lanes it moves in index order (nothing else holds
// two) and releases them before moving.
#pragma once

#include <mpi.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/spin_lock.hpp"

namespace fastrma::detail {

struct TypeInfo;
struct StridedChunk;

// The density rule for reading a group of target pieces by cross-memory attach as one span
// (gap bytes read into a buffer, the pieces scattered here) instead of one iovec each: the
// kernel pins the remote pages of every iovec on its own, which costs far more than copying
// a KiB (figures: docs/performance.md, bench/cma_iovec.c), so a group is one span when its
// gap bytes average at most kSpanGapPerPiece per piece (or the whole span is one page), and
// the span is at most kSpanMax bytes (the buffer; it stays in the L2 cache for the scatter).
inline constexpr std::uint64_t kSpanGapPerPiece = 1024;
inline constexpr std::uint64_t kSpanMax = 256 * 1024;
inline bool cma_span_dense(std::uint64_t hull, std::uint64_t data, std::uint64_t pieces) {
    if (hull > kSpanMax) return false;
    return hull <= 4096 || hull - std::min(hull, data) <= kSpanGapPerPiece * pieces;
}

// One put or get of many pieces (a derived datatype's StridedChunks) to or from one peer by
// cross-memory attach, moved at once (not deferred as CmaBatch's small operations are).
// Gets: consecutive pieces that meet the density rule are read as one span into a buffer and
// scattered (copy_strided); other pieces, and every piece of a put (gap bytes are never
// written: another origin or the target itself may store there), move one iovec each, up to
// 512 a syscall. A span that cannot be read whole (a dynamic window's gap between attached
// regions) is read piece by piece instead. Not thread-safe: one per op, on the issuing thread.
class CmaPieces {
public:
    CmaPieces(pid_t pid, std::uint64_t remote_base, bool write);
    CmaPieces(const CmaPieces&) = delete;
    CmaPieces& operator=(const CmaPieces&) = delete;
    void add(const StridedChunk& c);
    // Moves what is left. 0, or the errno of the first piece that failed (the others moved).
    int finish();
    // Between its syscalls, serve(arg) serves what node peers posted to this process (a
    // transfer of many pieces takes milliseconds; transport/shm/served.hpp).
    void serve_while_moving(bool (*serve)(void*), void* arg) { serve_ = serve, serve_arg_ = arg; }

private:
    struct Piece {  // a StridedChunk's fields, as the group keeps them
        unsigned char* local;
        std::uint64_t offset;
        std::size_t len;
        std::uint64_t n;
        std::int64_t lstride, rstride;
    };
    void add_piece(const Piece& p);
    void direct(const Piece& p);  // its pieces as iovecs
    void flush_group();
    void move_direct();
    const pid_t pid_;
    const std::uint64_t base_;
    const bool write_;
    int err_ = 0;
    std::vector<Piece> group_;
    std::uint64_t lo_ = 0, hi_ = 0, data_ = 0, pieces_ = 0;
    std::vector<iovec> l_, r_;
    bool (*serve_)(void*) = nullptr;
    void* serve_arg_ = nullptr;
};

class CmaBatch {
public:
    static constexpr std::size_t kMaxItems = 128;  // operations per lane drain (< IOV_MAX)
    static constexpr std::size_t kStageBytes = 16384;  // origin bytes of queued puts/accumulates
    static constexpr unsigned kLanes = 8;  // threads beyond this share lanes

    // remote_base: the peer's address of offset 0 (create: its window base; dynamic: 0).
    // state: the peer's state words, mapped here (its accumulate-lock stripes, its served
    // slots);
    // acc_stripes: how many it has. pending: the owner's count of lanes that hold
    // something (one load tells a completion point whether any drain is due).
    CmaBatch(pid_t pid, std::uint64_t remote_base, std::uint64_t* state, int acc_stripes, std::atomic<int>* pending);
    CmaBatch(const CmaBatch&) = delete;
    CmaBatch& operator=(const CmaBatch&) = delete;
    ~CmaBatch();

    // Queue len bytes (at most the caller's item limit, <= kStageBytes) to / from offset off
    // of the peer's part, in the calling thread's lane. Drains that lane first when it is full.
    void put(std::uint64_t off, const void* src, std::size_t len);
    void get(std::uint64_t off, void* dst, std::size_t len);
    void transfer(bool write, std::uint64_t off, void* local, std::size_t len) {
        if (write)
            put(off, local, len);
        else
            get(off, local, len);
    }
    // An accumulate-class op on n contiguous elements of ti (size == extent) at off: origin
    // null for MPI_NO_OP; old values to result (may be null) at the drain.
    void acc(std::uint64_t off, MPI_Op op, const TypeInfo& ti, std::size_t n, const void* origin, void* result);
    // Moves everything queued in every lane. 0, or the errno of the first transfer that
    // failed since the last drain (what failed is lost; the completion point reports it).
    int drain();
    // Something queued or an error to report since the last drain().
    bool due() const { return due_.load(std::memory_order_acquire) != 0; }
    // Memory it holds (the object and the lanes and buffers made so far).
    std::size_t bytes();

private:
    struct Acc {
        std::uint64_t off;
        std::uint32_t len;
        std::uint32_t scratch;  // offset of its target bytes' copy in scratch_
        std::uint32_t src;  // offset of its origin bytes in stage_, or kNoSrc
        MPI_Op op;
        const TypeInfo* ti;
        std::size_t n;
        void* result;
    };
    static constexpr std::uint32_t kNoSrc = ~0u;
    // What one drain moves: a lane's queued operations and the buffers they point into.
    struct Buf {
        std::uint32_t nput = 0, nget = 0, nacc_iov = 0;  // iovec pairs queued
        std::size_t staged = 0, scratched = 0;
        std::uint64_t acc_mask = 0;  // stripes the queued accumulates need
        std::uint64_t acc_lo = 0, acc_hi = 0;  // the span of their target bytes
        std::vector<Acc> accs;
        // Allocated on first use.
        std::unique_ptr<iovec[]> put_l, put_r, get_l, get_r, acc_l, acc_r;
        std::unique_ptr<unsigned char[]> stage, scratch;
        std::size_t count() const { return nput + nget + accs.size(); }
        void reset();
        std::size_t bytes() const;
    };
    // One thread's queue, double-buffered: a drain swaps the filled buffer out under mu and
    // moves it with mu released (the owner goes on queueing into the other one); the next
    // drain of the lane waits until that one has finished (moving clear).
    struct alignas(64) Lane {
        SpinLock mu;
        unsigned index = 0;  // in lanes_
        Buf bufs[2];
        Buf* cur = &bufs[0];  // where operations are queued (mu)
        bool moving = false;  // the other buffer is being moved (mu)
        bool moving_accs = false;  // ... and holds accumulates (mu)
        int err = 0;  // of a move since the last drain() (mu)
        bool listed = false;  // counted in *pending_ and due_ (mu)
        bool acc_listed = false;  // its bit set in acc_lanes_ (mu)
    };
    Lane& my_lane();  // the calling thread's, made on first use
    // Appends one piece to a list of iovec pairs, extending the last one when the piece
    // continues it on both sides (the kernel pins the remote pages of each iovec separately,
    // most of a syscall's cost).
    void add(iovec* l, iovec* r, std::uint32_t& k, std::uint64_t off, unsigned char* local, std::size_t len);
    // Sets lane i's bits in due_ (something queued, moving or an error to report) and
    // acc_lanes_ (accumulates queued or moving), and its count in *pending_ (l.mu held).
    void relist(Lane& l);
    static bool full(const Buf& b, std::size_t stage_bytes, std::size_t scratch_bytes);
    static unsigned char* stage(Buf& b, const void* src, std::size_t len);  // copies src in (room made)
    bool overlaps_acc(const Buf& b, std::uint64_t off, std::size_t len, std::size_t* exact) const;
    // Moves what n lanes (ascending index, distinct, no lane lock held by the caller) have
    // queued, after whatever of theirs is moving: on return every operation queued in them
    // before the call is complete. Errors land in the lanes' err.
    void drain_lanes(Lane* const* ls, unsigned n);
    void move(Buf* const* bs, unsigned n, int* err);  // the syscalls (no lock held)
    // A drain of a few small puts and gets (no accumulates) to a peer with a thread in MPI:
    // moved by the peer's CPU (transport/shm/served.hpp), what it did not take by cross-memory attach.
    // False: not eligible, nothing moved.
    bool move_served(const iovec* pl, const iovec* pr, std::size_t np, const iovec* gl, const iovec* gr, std::size_t ng,
                     int* err);
    // One put or get through the peer's served bulk area (transport/shm/served.hpp), moved here by
    // cross-memory attach if not taken. False: no area, stale beat or taken: nothing moved.
    bool move_bulk(bool put, const iovec& l, const iovec& r, int* err);
    void apply_accs(Buf& b, int* err);
    const pid_t pid_;
    const std::uint64_t base_;
    std::uint64_t* const state_;
    const int stripes_;
    std::atomic<int>* const pending_;
    std::atomic<std::uint32_t> due_{0};  // bit i: lane i holds something (relist)
    std::atomic<std::uint32_t> acc_lanes_{0};  // bit i: lane i holds an accumulate (relist)
    std::atomic<Lane*> lanes_[kLanes] = {};  // made on first use (make_mu_)
    SpinLock make_mu_;
};

// Moves what waits in batch (rank's; may be null); an MPI error class (raised) when a
// transfer in it failed.
int drain_batch(CmaBatch* batch, int rank);

}  // namespace fastrma::detail
