// cma_batch.hpp — small cross-memory-attach operations on one peer, moved in few syscalls.
//
// A put, get or accumulate on a create or dynamic window's unmapped part costs one or two
// process_vm_writev / readv calls each (1.8-2.5 us apiece on this VM, where an 8-byte copy
// into mapped memory costs nanoseconds). MPI completes them only at a synchronization call,
// so small ones wait here and move together at the next completion point (flush, unlock,
// fence, complete, free) or when the batch is full: all puts in one writev; all
// accumulates under the target's accumulate-lock stripes, in one readv + one writev; then
// all gets in one readv.
//
// Invariants: a put's and an accumulate's origin bytes are copied in at issue (the caller's
// buffer is free at once); a get's destination and an accumulate's result buffer are the
// caller's, filled when the batch drains (MPI lets them be read only after completion).
// Accumulates apply in the order they were issued: one that covers exactly the bytes of a
// queued one applies to the same copy after it; one that overlaps a queued one otherwise,
// and a put that overlaps a queued accumulate, drain the batch first. A failure (the peer
// exited) is kept and reported by the next drain(): the completion point raises.
// Thread-safe: one spin lock per batch (appends and the drain).
#pragma once

#include <mpi.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/spin_lock.hpp"

namespace fastrma::detail {

struct TypeInfo;

class CmaBatch {
public:
    static constexpr std::size_t kMaxItems = 128;        // operations per drain (< IOV_MAX)
    static constexpr std::size_t kStageBytes = 16384;    // origin bytes of queued puts/accumulates

    // remote_base: the peer's address of offset 0 (create: its window base; dynamic: 0).
    // state: the peer's state words, mapped here (its accumulate-lock stripes);
    // acc_stripes: how many it has. pending: the owner's count of batches that hold
    // something (one load tells a completion point whether any drain is due).
    CmaBatch(pid_t pid, std::uint64_t remote_base, std::uint64_t* state, int acc_stripes,
             std::atomic<int>* pending);
    CmaBatch(const CmaBatch&) = delete;
    CmaBatch& operator=(const CmaBatch&) = delete;

    // Queue len bytes (at most the caller's item limit, <= kStageBytes) to / from offset off
    // of the peer's part. Drains first when the batch is full.
    void put(std::uint64_t off, const void* src, std::size_t len);
    void get(std::uint64_t off, void* dst, std::size_t len);
    void transfer(bool write, std::uint64_t off, void* local, std::size_t len) {
        if (write) put(off, local, len);
        else get(off, local, len);
    }
    // An accumulate-class op on n contiguous elements of ti (size == extent) at off: origin
    // null for MPI_NO_OP; old values to result (may be null) at the drain.
    void acc(std::uint64_t off, MPI_Op op, const TypeInfo& ti, std::size_t n, const void* origin, void* result);
    // Moves everything queued. 0, or the errno of the first transfer that failed since
    // the last drain (what failed is lost; the completion point reports it).
    int drain();
    // Something queued or an error to report since the last drain().
    bool due() const { return listed_.load(std::memory_order_acquire); }
    // Memory it holds (the object and the buffers made so far).
    std::size_t bytes();

private:
    struct Acc {
        std::uint64_t off;
        std::uint32_t len;
        std::uint32_t scratch;  // offset of its target bytes' copy in scratch_
        std::uint32_t src;      // offset of its origin bytes in stage_, or kNoSrc
        MPI_Op op;
        const TypeInfo* ti;
        std::size_t n;
        void* result;
    };
    static constexpr std::uint32_t kNoSrc = ~0u;
    // Appends one piece to a list of iovec pairs, extending the last one when the piece
    // continues it on both sides (the kernel pins the remote pages of each iovec separately:
    // ~0.5 us an iovec, most of a syscall's cost here). mu_ held.
    void add(iovec* l, iovec* r, std::uint32_t& k, std::uint64_t off, unsigned char* local, std::size_t len);
    void list();  // counted in *pending_ (mu_ held)
    std::size_t count() const { return nput_ + nget_ + accs_.size(); }
    bool full(std::size_t stage_bytes, std::size_t scratch_bytes) const;
    unsigned char* stage(const void* src, std::size_t len);  // copies src in (room made)
    bool overlaps_acc(std::uint64_t off, std::size_t len, std::size_t* exact) const;
    void drain_locked();
    void apply_accs();
    SpinLock mu_;
    const pid_t pid_;
    const std::uint64_t base_;
    std::uint64_t* const state_;
    const int stripes_;
    std::atomic<int>* const pending_;
    std::atomic<bool> listed_{false};  // counted in *pending_ (mu_): cleared only by drain()
    std::uint32_t nput_ = 0, nget_ = 0, nacc_iov_ = 0;  // iovec pairs queued (mu_)
    std::size_t staged_ = 0, scratched_ = 0;
    std::uint64_t acc_mask_ = 0;  // stripes the queued accumulates need
    std::uint64_t acc_lo_ = 0, acc_hi_ = 0;  // the span of their target bytes
    std::vector<Acc> accs_;
    int err_ = 0;
    // Allocated on first use: a window has a batch per unmapped peer, most never used.
    std::unique_ptr<iovec[]> put_l_, put_r_, get_l_, get_r_, acc_l_, acc_r_;
    std::unique_ptr<unsigned char[]> stage_, scratch_;
};

}  // namespace fastrma::detail
