// clock.hpp — monotonic time, and the pace of a wait loop's slow checks.
#pragma once

#include <time.h>

#include <cstdint>

namespace fastrma::detail {

// Monotonic time in nanoseconds (back-off deadlines).
inline std::uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

// When a wait loop asks its slow question (is a peer's process dead?): once per interval of
// waiting, whatever its passes do — spin, complete something, sleep or block in a provider.
// due() reads the clock every 8th call; the first interval starts at the first reading.
class Every {
public:
    explicit Every(std::uint64_t interval_ns) : interval_(interval_ns) {}
    bool due() {
        if ((++calls_ & 7) != 0) return false;
        const std::uint64_t now = now_ns();
        if (next_ == 0) {
            next_ = now + interval_;
            return false;
        }
        if (now < next_) return false;
        next_ = now + interval_;
        return true;
    }

private:
    std::uint64_t interval_;
    std::uint64_t next_ = 0;
    unsigned calls_ = 0;
};

// How often a wait asks whether the processes it may wait for are alive.
constexpr std::uint64_t kAliveCheckNs = 10'000'000;

}  // namespace fastrma::detail
