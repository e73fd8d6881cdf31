// acc_domain.hpp — the CPU domain's two ways of applying an accumulate, and what keeps them
// apart (docs/accumulate.md, "Atomicity").
//
// On windows whose atomicity domain is the CPU (every node part mapped), an accumulate-family
// op on a CPU-domain type (TypeInfo::cpu_domain: integers, logical, byte) is applied either
//   - by CPU atomics, element by element (fetch_and_op, compare_and_swap, accumulates below
//     Config::acc_run_min bytes): the applying thread counts itself in its process's reader
//     word (kAccReaders, its own state area) and checks that no stripe it touches is held
//     for a plain run; or
//   - as a plain run (accumulates of acc_run_min bytes or more): the stripes that cover it are
//     taken with kStripeExcludesAtomics set, then every node member's reader word is awaited
//     at zero, then the plain vectorised reduce() applies it.
// Both sides make their announcement with a locked instruction before they read the other's
// (Dekker), so at least one of them sees the other: an atomic op never lands inside a plain
// run's read-modify-write of the same element. Atomic ops never wait for each other, and a
// plain run of a lock-domain type (no flag) excludes no atomic op.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/state_words.hpp"

namespace fastrma::detail {

// In a stripe word (kAccStripe0 + s lines; otherwise the holder's pid): held for a plain run
// of a CPU-domain type; CPU-atomic ops on elements of that stripe wait until it is free.
constexpr std::uint64_t kStripeExcludesAtomics = 1ull << 62;
// Stripes cover kStripeUnit-byte units of the target's window, unit u on stripe u % n.
constexpr std::uint64_t kStripeUnit = 4096;

inline std::size_t stripe_word(int s) { return kAccStripe0 + std::size_t(s) * kWordsPerLine; }

// The stripe of the element at offset off in a part, with n stripes (1 <= n <= 32).
inline int acc_stripe_of(int n, std::uint64_t off) {
    const std::uint64_t unit = off / kStripeUnit;
    return int((n & (n - 1)) == 0 ? unit & std::uint64_t(n - 1) : unit % std::uint64_t(n));
}

// The node members' state areas, member i's at base + i * stride: the reader words a plain
// run of a CPU-domain type waits for (n == 0: none to wait for).
struct AccReaders {
    const unsigned char* base = nullptr;
    std::size_t stride = 0;
    int n = 0;
    const std::uint64_t* word(int i) const {
        return reinterpret_cast<const std::uint64_t*>(base + std::size_t(i) * stride) + kAccReaders;
    }
};

// Out of line: the reader steps back (uncounts itself), waits until no stripe of mask on
// state is held for a plain run, and counts itself again.
void acc_atomics_wait(std::uint64_t* mine, const std::uint64_t* state, std::uint64_t mask);

inline bool acc_stripes_exclude(const std::uint64_t* state, std::uint64_t mask) {
    for (std::uint64_t m = mask; m; m &= m - 1)
        if (__atomic_load_n(&state[stripe_word(__builtin_ctzll(m))], __ATOMIC_ACQUIRE) & kStripeExcludesAtomics)
            return true;
    return false;
}

// Brackets CPU-atomic ops on a target's elements that lie on the stripes of mask: mine is
// the applying process's reader word (its own state area's kAccReaders), state the target's
// state words.
inline void acc_atomics_enter(std::uint64_t* mine, const std::uint64_t* state, std::uint64_t mask) {
    __atomic_fetch_add(mine, 1, __ATOMIC_SEQ_CST);  // a locked instruction: a full fence
    if (acc_stripes_exclude(state, mask)) [[unlikely]]
        acc_atomics_wait(mine, state, mask);
}
inline void acc_atomics_exit(std::uint64_t* mine) { __atomic_fetch_sub(mine, 1, __ATOMIC_RELEASE); }

class AccAtomicsGuard {
public:
    AccAtomicsGuard(std::uint64_t* mine, const std::uint64_t* state, std::uint64_t mask) : mine_(mine) {
        acc_atomics_enter(mine, state, mask);
    }
    ~AccAtomicsGuard() { acc_atomics_exit(mine_); }
    AccAtomicsGuard(const AccAtomicsGuard&) = delete;
    AccAtomicsGuard& operator=(const AccAtomicsGuard&) = delete;

private:
    std::uint64_t* mine_;
};

// The plain-run side: takes the stripes of mask on state flagged kStripeExcludesAtomics (as
// acc_stripes_lock, ascending), then waits until every reader word of readers is zero (a
// member whose process died is skipped after some milliseconds). Freed by acc_stripes_unlock.
void acc_run_lock(std::uint64_t* state, std::uint64_t mask, const AccReaders& readers);

}  // namespace fastrma::detail
