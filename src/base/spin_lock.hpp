// spin_lock.hpp — the lock of short, rarely contended critical sections on hot paths.
#pragma once

#include <sched.h>

#include <atomic>

namespace fastrma::detail {

// For a slot of the target table and an object pool: held for a few dozen instructions
// (find a target, link an op, pop a free object), almost never contended, taken several
// times per lock/op/unlock sequence.
// A test-and-test-and-set lock whose release is a plain store (glibc's mutex costs an
// atomic read-modify-write on both sides: docs/performance.md). A
// waiter spins briefly, then yields (the holder may be descheduled: ranks and progress
// threads oversubscribe the cores).
class SpinLock {
public:
    void lock() {
        for (unsigned spins = 0; !try_lock(); ++spins) {
            while (held_.load(std::memory_order_relaxed)) {
                if (++spins > 64) {
                    sched_yield();
                    spins = 0;
                } else
                    __builtin_ia32_pause();
            }
        }
    }
    bool try_lock() {
        return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
    }
    void unlock() { held_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> held_{false};
};

}  // namespace fastrma::detail
