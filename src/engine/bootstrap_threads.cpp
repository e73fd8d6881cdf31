// bootstrap_threads.cpp — see bootstrap_threads.hpp.
#include "engine/bootstrap_threads.hpp"

#include <cstring>

namespace fastrma::detail {

void ThreadGroup::barrier() {
    std::unique_lock lk(mu_);
    std::uint64_t gen = generation_;
    if (++arrived_ == n_) {
        arrived_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    cv_.wait(lk, [&] { return generation_ != gen; });
}

void ThreadGroup::allgather(int rank, const void* in, std::size_t bytes, void* out) {
    {
        std::lock_guard lk(mu_);
        slots_[rank].assign(static_cast<const unsigned char*>(in), static_cast<const unsigned char*>(in) + bytes);
    }
    barrier();
    {
        std::lock_guard lk(mu_);
        for (int r = 0; r < n_; ++r) std::memcpy(static_cast<unsigned char*>(out) + r * bytes, slots_[r].data(), bytes);
    }
    barrier();  // nobody overwrites a slot before everyone has read it
}

}  // namespace fastrma::detail
