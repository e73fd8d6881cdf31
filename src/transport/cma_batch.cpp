// cma_batch.cpp — see cma_batch.hpp.
#include "transport/cma_batch.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>

#include "engine/stats.hpp"
#include "transport/shm.hpp"

namespace fastrma::detail {

void CmaBatch::put(std::uint64_t remote, const void* src, std::size_t len) {
    std::lock_guard lk(mu_);
    if (nput_ + nget_ == kMaxItems || staged_ + len > kStageBytes) drain_locked();
    if (!stage_) stage_ = std::make_unique<unsigned char[]>(kStageBytes);
    unsigned char* at = stage_.get() + staged_;
    std::memcpy(at, src, len);
    staged_ += len;
    add(true, remote, at, len);
}

void CmaBatch::get(std::uint64_t remote, void* dst, std::size_t len) {
    std::lock_guard lk(mu_);
    if (nput_ + nget_ == kMaxItems) drain_locked();
    add(false, remote, static_cast<unsigned char*>(dst), len);
}

void CmaBatch::add(bool write, std::uint64_t remote, unsigned char* local, std::size_t len) {
    if (!put_local_) {
        put_local_ = std::make_unique<iovec[]>(kMaxItems);
        put_remote_ = std::make_unique<iovec[]>(kMaxItems);
        get_local_ = std::make_unique<iovec[]>(kMaxItems);
        get_remote_ = std::make_unique<iovec[]>(kMaxItems);
    }
    bump(Stat::cma_batched);
    std::uint32_t& k = write ? nput_ : nget_;
    iovec* const l = (write ? put_local_ : get_local_).get();
    iovec* const r = (write ? put_remote_ : get_remote_).get();
    // The kernel pins the remote pages of every iovec on its own (~0.5 us each here, most
    // of the syscall): a transfer that continues the previous one on both sides extends it.
    if (k && static_cast<unsigned char*>(r[k - 1].iov_base) + r[k - 1].iov_len == reinterpret_cast<unsigned char*>(remote) &&
        static_cast<unsigned char*>(l[k - 1].iov_base) + l[k - 1].iov_len == local) {
        r[k - 1].iov_len += len;
        l[k - 1].iov_len += len;
    } else {
        l[k] = {local, len};
        r[k] = {reinterpret_cast<void*>(remote), len};
        ++k;
    }
    if (!listed_.load(std::memory_order_relaxed)) {
        listed_.store(true, std::memory_order_relaxed);
        pending_->fetch_add(1, std::memory_order_release);
    }
}

void CmaBatch::drain_locked() {
    if (nput_ + nget_ == 0) return;
    // Puts first: they were copied at issue; a get of the same epoch may not touch what a
    // put of it updates (MPI: conflicting accesses), so this order is as good as any.
    if (nput_ && !ShmTransport::cma_vec(pid_, true, put_local_.get(), put_remote_.get(), nput_) && !err_)
        err_ = errno ? errno : EFAULT;
    if (nget_ && !ShmTransport::cma_vec(pid_, false, get_local_.get(), get_remote_.get(), nget_) && !err_)
        err_ = errno ? errno : EFAULT;
    bump(Stat::cma_drains, (nput_ != 0) + (nget_ != 0));
    nput_ = nget_ = 0;
    staged_ = 0;
}

int CmaBatch::drain() {
    std::lock_guard lk(mu_);
    drain_locked();
    if (listed_.load(std::memory_order_relaxed)) {
        listed_.store(false, std::memory_order_relaxed);
        pending_->fetch_sub(1, std::memory_order_release);
    }
    const int e = err_;
    err_ = 0;
    return e;
}

}  // namespace fastrma::detail
