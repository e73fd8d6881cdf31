// cma_batch.hpp — small cross-memory-attach transfers to one peer, moved in one syscall.
//
// A put or get on a create or dynamic window's unmapped part costs a process_vm_writev /
// readv each (1-2 us on this VM, where an 8-byte copy into mapped memory costs nanoseconds).
// MPI completes puts and gets only at a synchronization call, so small ones wait here and
// leave together at the next completion point (flush, unlock, fence, complete, free) or when
// the batch is full: one syscall for up to kMaxItems of them.
//
// Invariants: a put's origin bytes are copied in at issue (the caller's buffer is free at
// once, as before); a get's destination is the caller's buffer, filled when the batch
// drains (MPI allows reading it only after completion). Puts drain before gets. A failure
// (the peer exited) is kept and reported by the next drain(): the completion point raises.
// Thread-safe: one spin lock per batch (appends and the drain).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/spin_lock.hpp"

namespace fastrma::detail {

class CmaBatch {
public:
    static constexpr std::size_t kMaxItems = 128;        // iovecs per drain (< IOV_MAX)
    static constexpr std::size_t kStageBytes = 16384;    // origin bytes of the queued puts

    // pending: the owner's count of batches that hold something (one load tells a
    // completion point whether any drain is due).
    CmaBatch(pid_t pid, std::atomic<int>* pending) : pid_(pid), pending_(pending) {}
    CmaBatch(const CmaBatch&) = delete;
    CmaBatch& operator=(const CmaBatch&) = delete;

    // Queue len bytes (at most the caller's item limit, <= kStageBytes) to / from the peer's
    // address remote. Drains first when the batch is full.
    void put(std::uint64_t remote, const void* src, std::size_t len);
    void get(std::uint64_t remote, void* dst, std::size_t len);
    // Moves everything queued. 0, or the errno of the first transfer that failed since
    // the last drain (what failed is lost; the completion point reports it).
    int drain();
    // Something queued or an error to report since the last drain().
    bool due() const { return listed_.load(std::memory_order_acquire); }

private:
    void add(bool write, std::uint64_t remote, unsigned char* local, std::size_t len);  // mu_ held, room made
    void drain_locked();
    SpinLock mu_;
    const pid_t pid_;
    std::atomic<int>* const pending_;
    std::atomic<bool> listed_{false};  // counted in *pending_ (mu_): cleared only by drain()
    std::uint32_t nput_ = 0, nget_ = 0;  // queued (mu_)
    std::size_t staged_ = 0;
    int err_ = 0;
    // Allocated on first use: a window has a batch per unmapped peer, most never used.
    std::unique_ptr<iovec[]> put_local_, put_remote_, get_local_, get_remote_;
    std::unique_ptr<unsigned char[]> stage_;
};

}  // namespace fastrma::detail
