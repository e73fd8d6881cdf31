// path_costs.hpp — the choice between two ways of moving the same contiguous transfer, by
// what each cost here lately (used by epochs/issue.cpp for the served bulk area against one
// cross-memory-attach syscall).
#pragma once

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace fastrma::detail {

// A contiguous put or get that either the peer's served bulk area or one cross-memory-attach
// syscall can move goes the way that cost less here lately. The area's cost is the peer's
// CPU turning a request around, which depends on where the host places the two processes'
// CPUs (docs/performance.md, *OSU one-sided*); a syscall's does not. Costs are kept per
// direction and size class (powers of two) for the process, as moving averages of clock
// ticks. Every kExplore-th choice of a thread (every 2nd or 4th kExplore-th while the other
// way costs 2x or 4x as much) starts a run of kBurst choices the other way, so both averages
// stay current; the first op after a change of way is not counted (the
// window's lines then move to the other core: a cost of the change, not of the way).
// A thread's exploration count, run and last way (the same for every PathCosts it uses).
struct PathThreadState {
    unsigned tick = 0, burst = 0;
    bool used = false, last_area = false, counts = false;
};
inline thread_local PathThreadState t_path_state;

class PathCosts {
public:
    // Clock ticks (the TSC on x86-64, else nanoseconds): only compared with each other.
    static std::uint64_t ticks() noexcept {
#if defined(__x86_64__)
        return __builtin_ia32_rdtsc();
#else
        timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return std::uint64_t(t.tv_sec) * 1000000000ull + std::uint64_t(t.tv_nsec);
#endif
    }
    // True: through the area (also while nothing is known yet: the area was the only way).
    bool serve(bool put, std::uint64_t bytes) noexcept {
        const Class& c = at(put, bytes);
        const std::uint64_t area = c.area.load(std::memory_order_relaxed);
        const std::uint64_t cma = c.cma.load(std::memory_order_relaxed);
        const bool area_better = cma == 0 || area <= cma;
        const std::uint64_t lo = std::min(area, cma), hi = std::max(area, cma);
        const unsigned period = kExplore << (lo == 0 ? 0 : hi >= 4 * lo ? 2 : hi >= 2 * lo ? 1 : 0);
        if (t_path_state.burst == 0 && ++t_path_state.tick % period == 0) t_path_state.burst = kBurst;
        bool area_now = area_better;
        if (t_path_state.burst) {
            --t_path_state.burst;
            area_now = !area_better;
        }
        t_path_state.counts = t_path_state.used && t_path_state.last_area == area_now;
        t_path_state.used = true;
        t_path_state.last_area = area_now;
        return area_now;
    }
    void record(bool put, std::uint64_t bytes, bool area, std::uint64_t spent) noexcept {
        if (!t_path_state.counts) return;
        std::atomic<std::uint64_t>& a = area ? at(put, bytes).area : at(put, bytes).cma;
        const std::uint64_t old = a.load(std::memory_order_relaxed);
        // One descheduled sample moves the average by at most half of it again.
        if (old) spent = std::min(spent, 4 * old);
        a.store(old ? old - old / 8 + spent / 8 : std::max<std::uint64_t>(spent, 1), std::memory_order_relaxed);
    }

private:
    static constexpr unsigned kExplore = 256, kBurst = 8, kClasses = 64;
    struct Class {
        std::atomic<std::uint64_t> area{0}, cma{0};
    };
    Class& at(bool put, std::uint64_t bytes) noexcept {
        const unsigned width = bytes > 1 ? unsigned(64 - __builtin_clzll(bytes - 1)) : 0;
        return classes_[put][std::min(width, kClasses - 1)];
    }
    Class classes_[2][kClasses];
};

}  // namespace fastrma::detail
