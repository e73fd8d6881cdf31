// pool.hpp — bounded object pools: a per-window pool first, then the process-global one.
//
// A pool hands out at most `capacity` objects over its lifetime and keeps freed ones on a
// free list, so memory stays bounded under floods; get() returns nullptr when both the
// window's pool and its parent are exhausted, and the caller collects garbage (forces
// pending work out) and retries. Every object remembers the pool it came from.
// Thread-safe; the lock is held for a few instructions only.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "base/spin_lock.hpp"

namespace fastrma::detail {

template <class T>
class Pool {
public:
    explicit Pool(std::size_t capacity, Pool* parent = nullptr) : capacity_(capacity), parent_(parent) {}
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    T* get() {
        {
            std::lock_guard lk(mu_);
            if (!free_.empty()) {
                T* t = free_.back();
                free_.pop_back();
                note_live(+1);
                return t;
            }
            if (storage_.size() < capacity_) {
                storage_.push_back(std::make_unique<T>());
                T* t = storage_.back().get();
                t->home = this;
                note_live(+1);
                return t;
            }
        }
        return parent_ ? parent_->get() : nullptr;
    }

    // Returns t to the pool it came from.
    static void put(T* t) {
        Pool* p = static_cast<Pool*>(t->home);
        *t = T{};
        t->home = p;
        std::lock_guard lk(p->mu_);
        p->free_.push_back(t);
        p->note_live(-1);
    }

    std::size_t capacity() const { return capacity_; }
    std::size_t live() const {
        std::lock_guard lk(mu_);
        return live_;
    }
    std::size_t peak() const {
        std::lock_guard lk(mu_);
        return peak_;
    }
    std::size_t allocated() const {
        std::lock_guard lk(mu_);
        return storage_.size();
    }

private:
    void note_live(long d) {
        live_ = std::size_t(long(live_) + d);
        if (live_ > peak_) peak_ = live_;
    }
    mutable SpinLock mu_;
    std::size_t capacity_;
    Pool* parent_;
    std::vector<std::unique_ptr<T>> storage_;
    std::vector<T*> free_;
    std::size_t live_ = 0, peak_ = 0;
};

}  // namespace fastrma::detail
