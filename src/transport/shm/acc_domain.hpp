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

#include <sched.h>

#include <atomic>
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

// The target's striped accumulate lock (acc_locked): the stripes that cover [offset,
// offset + bytes) of a window part, and taking / freeing them on mapped state words
// (ascending order, spinning then yielding; as every origin and the owner do).
// A taken stripe holds its holder's pid. A waiter that finds the holder's process gone (its
// pidfd, liveness.hpp: a pid reused since still reads as gone) takes the stripe over (what the
// dead process left half-done stays so) and counts it in g_stripes_taken_over, which the
// window's next completion point reports as a dead peer.
std::uint64_t acc_stripe_mask(int acc_stripes, std::uint64_t offset, std::uint64_t bytes);
// flag: kStripeExcludesAtomics for a plain run of a CPU-domain type (acc_run_lock), else 0.
void acc_stripes_lock(std::uint64_t* state, std::uint64_t mask, std::uint64_t flag = 0);
void acc_stripes_unlock(std::uint64_t* state, std::uint64_t mask);
extern std::atomic<std::uint64_t> g_stripes_taken_over;
// Fault injection (FASTRMA_FAULT=kill_holding_stripe): the process kills itself right after
// it took stripes on mapped state words.
extern std::atomic<bool> g_fault_kill_holding_stripe;

// Takes one stripe word by try_take() (a CAS on the word), spinning, then yielding: the
// holder may be descheduled (oversubscribed ranks). Every 4096 yields (some milliseconds)
// take_over() may take it from a holder that died.
template <class TryTake, class TakeOver>
void take_stripe(TryTake try_take, TakeOver take_over) {
    for (unsigned spins = 0;; ++spins) {
        if (try_take()) return;
        if (spins > 64) {
            sched_yield();
            if (spins % 4096 == 0 && take_over()) return;
        } else {
            __builtin_ia32_pause();
        }
    }
}

}  // namespace fastrma::detail
