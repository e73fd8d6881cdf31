// offload.hpp — large contiguous copies handed to the progress thread, so the thread that
// issued a put or get returns to its computation while the data moves (overlap on shared
// memory, where otherwise the issuing core copies every byte itself).
//
// A copy is cut into pieces (FASTRMA_OFFLOAD_PIECE bytes) queued in one FIFO ring per
// process. Workers — the progress thread's poller, and any thread waiting for completion,
// which helps instead of idling — take pieces from the head. Each piece has a sequence
// number; retired() is the number of the first piece not yet finished, so "every piece
// queued before sequence s is done" is one acquire load: retired() >= s. submit() returns
// the sequence after its last piece; a window keeps the largest such number and its
// completion points (flush, unlock_all, fence, free) wait for it (docs/progress.md).
// A full ring makes submit() refuse: the caller copies itself (bounded memory, no stall).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "progress/progress.hpp"

namespace fastrma::detail {

class CopyOffload {
public:
    // piece: bytes per piece; capacity: pieces in the ring (rounded up to a power of 2).
    CopyOffload(std::size_t piece, std::size_t capacity);

    // Copy len bytes from src to dst (both mapped here). Returns the sequence to wait
    // for, or 0 when the ring has no room (nothing was queued).
    std::uint64_t submit(void* dst, const void* src, std::size_t len, std::atomic<int>* err);
    // Cross-memory attach: len bytes between local and remote address raddr of pid
    // (write: local -> remote). A failed transfer stores an MPI error class in *err.
    std::uint64_t submit_cma(pid_t pid, bool write, void* local, std::uint64_t raddr, std::size_t len,
                             std::atomic<int>* err);

    // An element-wise kernel instead of a copy (accumulate): fn(a0, a1, dst, src, bytes) on
    // pieces that are whole multiples of elem bytes.
    using Kernel = void (*)(const void* a0, const void* a1, void* dst, const void* src, std::size_t bytes);
    std::uint64_t submit_kernel(Kernel fn, const void* a0, const void* a1, void* dst, const void* src, std::size_t len,
                                std::size_t elem, std::atomic<int>* err);

    bool done(std::uint64_t seq) const { return retired_.load(std::memory_order_acquire) >= seq; }
    // Until every piece before seq is finished, helping with the queue meanwhile.
    void wait(std::uint64_t seq);
    // Runs one piece from the calling thread; false when the queue is empty.
    bool run_one();
    // The progress engine's poller: a bounded batch of pieces.
    Poll poll();

    std::uint64_t bytes_offloaded() const { return bytes_.load(std::memory_order_relaxed); }

private:
    struct Piece {
        unsigned char* local = nullptr;
        std::uint64_t remote = 0;  // address: mapped pointer, or the peer's (cma)
        std::size_t len = 0;
        pid_t pid = 0;  // 0: memcpy between mappings
        bool write = false;  // local -> remote
        bool finished = false;
        std::atomic<int>* err = nullptr;
        Kernel fn = nullptr;  // else a copy
        const void* a0 = nullptr;
        const void* a1 = nullptr;
    };
    std::uint64_t push(pid_t pid, bool write, void* local, std::uint64_t remote, std::size_t len, std::atomic<int>* err,
                       Kernel fn = nullptr, const void* a0 = nullptr, const void* a1 = nullptr, std::size_t elem = 1);
    static void execute(const Piece& p);

    const std::size_t piece_;
    std::vector<Piece> ring_;
    const std::uint64_t mask_;
    std::mutex mu_;
    std::uint64_t tail_ = 0;  // next sequence to queue     (mu_)
    std::uint64_t head_ = 0;  // next sequence to run       (mu_)
    std::atomic<std::uint64_t> retired_{0};  // every piece before it finished
    std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace fastrma::detail
