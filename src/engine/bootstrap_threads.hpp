// bootstrap_threads.hpp — Bootstrap over threads of one process: unit tests run each rank
// as a thread with its own Engine. A ThreadGroup is shared by the n members; each thread
// holds a ThreadBootstrap(group, rank).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "base/bootstrap.hpp"

namespace fastrma::detail {

class ThreadGroup {
public:
    explicit ThreadGroup(int n) : n_(n), slots_(n) {}
    int size() const { return n_; }
    void barrier();
    void allgather(int rank, const void* in, std::size_t bytes, void* out);

private:
    int n_;
    std::mutex mu_;
    std::condition_variable cv_;
    int arrived_ = 0;
    std::uint64_t generation_ = 0;
    std::vector<std::vector<unsigned char>> slots_;
};

class ThreadBootstrap final : public Bootstrap {
public:
    ThreadBootstrap(std::shared_ptr<ThreadGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_->size(); }
    void allgather(const void* in, std::size_t bytes, void* out) override { g_->allgather(rank_, in, bytes, out); }
    void barrier() override { g_->barrier(); }
    const char* kind() const override { return "threads"; }

private:
    std::shared_ptr<ThreadGroup> g_;
    int rank_;
};

}  // namespace fastrma::detail
