// offload.cpp — see offload.hpp.
#include "transport/shm/offload.hpp"

#include <mpi.h>
#include <sched.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "ops/copy.hpp"
#include "transport/shm/cma.hpp"

namespace fastrma::detail {

namespace {
std::size_t pow2_at_least(std::size_t n) {
    std::size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}
}  // namespace

CopyOffload::CopyOffload(std::size_t piece, std::size_t capacity)
    : piece_(std::max<std::size_t>(piece, 4096)),
      ring_(pow2_at_least(std::max<std::size_t>(capacity, 2))),
      mask_(ring_.size() - 1) {}

std::uint64_t CopyOffload::push(pid_t pid, bool write, void* local, std::uint64_t remote, std::size_t len,
                                std::atomic<int>* err, Kernel fn, const void* a0, const void* a1, std::size_t elem) {
    const std::size_t piece = std::max(elem, piece_ / elem * elem);  // whole elements
    const std::size_t n = (len + piece - 1) / piece;
    std::lock_guard lk(mu_);
    // Pieces between retired_ and tail_ occupy the ring (finished ones until retired).
    if (tail_ - retired_.load(std::memory_order_relaxed) + n > ring_.size()) return 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t off = i * piece;
        Piece& p = ring_[tail_ & mask_];
        p.local = static_cast<unsigned char*>(local) + off;
        p.remote = remote + off;
        p.len = std::min(piece, len - off);
        p.fn = fn;
        p.a0 = a0;
        p.a1 = a1;
        p.pid = pid;
        p.write = write;
        p.finished = false;
        p.err = err;
        ++tail_;
    }
    bytes_.fetch_add(len, std::memory_order_relaxed);
    return tail_;
}

std::uint64_t CopyOffload::submit(void* dst, const void* src, std::size_t len, std::atomic<int>* err) {
    // Stored as "local = src, remote = dst, write": one direction for both put and get.
    return push(0, true, const_cast<void*>(src), reinterpret_cast<std::uint64_t>(dst), len, err);
}

std::uint64_t CopyOffload::submit_cma(pid_t pid, bool write, void* local, std::uint64_t raddr, std::size_t len,
                                      std::atomic<int>* err) {
    return push(pid, write, local, raddr, len, err);
}

std::uint64_t CopyOffload::submit_kernel(Kernel fn, const void* a0, const void* a1, void* dst, const void* src,
                                         std::size_t len, std::size_t elem, std::atomic<int>* err) {
    return push(0, true, const_cast<void*>(src), reinterpret_cast<std::uint64_t>(dst), len, err, fn, a0, a1,
                std::max<std::size_t>(elem, 1));
}

void CopyOffload::execute(const Piece& p) {
    if (p.fn) {
        p.fn(p.a0, p.a1, reinterpret_cast<void*>(p.remote), p.local, p.len);
        return;
    }
    if (p.pid == 0) {
        copy_bytes(reinterpret_cast<void*>(p.remote), p.local, p.len);
        return;
    }
    if (!cma_copy(p.pid, p.write, p.local, p.remote, p.len)) {
        int expected = MPI_SUCCESS;
        p.err->compare_exchange_strong(expected, MPI_ERR_OTHER);
    }
}

bool CopyOffload::run_one() {
    std::uint64_t seq;
    Piece p;
    {
        std::lock_guard lk(mu_);
        if (head_ == tail_) return false;
        seq = head_++;
        p = ring_[seq & mask_];
    }
    execute(p);
    std::lock_guard lk(mu_);
    ring_[seq & mask_].finished = true;
    // Retire the finished prefix (pieces run by several workers finish out of order).
    std::uint64_t r = retired_.load(std::memory_order_relaxed);
    while (r < head_ && ring_[r & mask_].finished) ++r;
    retired_.store(r, std::memory_order_release);
    return true;
}

void CopyOffload::wait(std::uint64_t seq) {
    for (unsigned spins = 0; !done(seq);) {
        if (run_one()) continue;
        // Queue empty: the last pieces run on other workers; they take microseconds.
        if (++spins > 256)
            sched_yield();
        else
            __builtin_ia32_pause();
    }
}

Poll CopyOffload::poll() {
    bool any = false;
    for (int i = 0; i < 16 && run_one(); ++i) any = true;
    return any ? Poll::busy : Poll::idle;
}

}  // namespace fastrma::detail
