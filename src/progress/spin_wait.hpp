// spin_wait.hpp — how a thread paces a wait for something another thread or process does
// within microseconds (an answer, a send's completion, a post, a collective).
//
// Spin (pause) for the first g_wait_spin_ns of the wait, then yield the processor once per idle
// pass. The budget is time, not a count of passes: a pass costs from a pause to a poll of
// the am server, so a count meant a different wait on every path.
// Why not yield at once: on a paravirtualised guest a sched_yield is a kernel round trip,
// and an event that arrives while the waiter is in it waits for it (docs/progress.md,
// Waiting). Why yield at all: with more threads than cores the thread that will answer may
// need this one's core.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "progress/progress.hpp"

namespace fastrma::detail {

// The spin budget in nanoseconds (FASTRMA_WAIT_SPIN_US; auto: 20 us, 2 us once a window
// has more ranks on this node than the rank's cpuset has processing units — then the thread
// that will answer may well be waiting for this one's core). Set at window creation.
inline std::atomic<std::uint64_t> g_wait_spin_ns{20000};
constexpr std::uint64_t kWaitSpinNs = 20000, kWaitSpinOversubscribedNs = 2000;

class SpinWait {
public:
    // Nothing is read at construction: most waits end before their first idle pass (an
    // uncontended lock constructs one and never waits: a clock read there would cost every
    // lock + unlock).
    SpinWait() = default;
    // One pass with nothing done: pause while within the budget, else yield. The clock
    // starts at the first idle pass.
    void idle() {
        if (!yielding_) {
            if (passes_++ == 0) {
                t0_ = now_ns();
                budget_ = g_wait_spin_ns.load(std::memory_order_relaxed);
            }
            if ((passes_ & 15) != 0 || now_ns() - t0_ < budget_) {
                __builtin_ia32_pause();
                return;
            }
            yielding_ = true;
        }
        sched_yield();
    }
    // Something was done: the wait starts over (spinning again).
    void progressed() {
        yielding_ = false;
        passes_ = 0;
    }
    bool yielding() const { return yielding_; }

private:
    std::uint64_t t0_ = 0;
    std::uint64_t budget_ = 0;
    unsigned passes_ = 0;
    bool yielding_ = false;
};

}  // namespace fastrma::detail
