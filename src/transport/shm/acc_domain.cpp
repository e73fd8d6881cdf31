// acc_domain.cpp — see acc_domain.hpp.
#include "transport/shm/acc_domain.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "transport/shm/liveness.hpp"

namespace fastrma::detail {

std::uint64_t acc_stripe_mask(int acc_stripes, std::uint64_t offset, std::uint64_t bytes) {
    const int n = std::max(1, std::min(acc_stripes, kMaxAccStripes));
    const std::uint64_t first = offset / kStripeUnit, last = (offset + (bytes ? bytes - 1 : 0)) / kStripeUnit;
    if (last - first + 1 >= std::uint64_t(n)) return n == 64 ? ~0ull : (1ull << n) - 1;
    std::uint64_t mask = 0;
    for (std::uint64_t l = first; l <= last; ++l) mask |= 1ull << (l % std::uint64_t(n));
    return mask;
}

std::atomic<std::uint64_t> g_stripes_taken_over{0};
std::atomic<bool> g_fault_kill_holding_stripe{false};

void acc_stripes_lock(std::uint64_t* state, std::uint64_t mask, std::uint64_t flag) {
    static const std::uint64_t me = std::uint64_t(getpid());  // the holder's tag (getpid is a syscall)
    const std::uint64_t tag = me | flag;
    for (std::uint64_t m = mask; m; m &= m - 1) {  // ascending order: no deadlock between origins
        std::uint64_t* w = &state[stripe_word(__builtin_ctzll(m))];
        take_stripe(
            [w, tag] {
                std::uint64_t expect = 0;
                return __atomic_compare_exchange_n(w, &expect, tag, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
            },
            [w, tag] {
                std::uint64_t holder = __atomic_load_n(w, __ATOMIC_RELAXED);
                const std::uint64_t pid = holder & ~kStripeExcludesAtomics;
                if (pid <= 1 || pid == me || !pid_exited(pid_t(pid))) return false;
                if (!__atomic_compare_exchange_n(w, &holder, tag, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                    return false;
                g_stripes_taken_over.fetch_add(1, std::memory_order_relaxed);
                return true;
            });
    }
    if (g_fault_kill_holding_stripe.load(std::memory_order_relaxed)) kill(getpid(), SIGKILL);
}

void acc_run_lock(std::uint64_t* state, std::uint64_t mask, const AccReaders& readers) {
    // The locked CAS that took the last stripe is the fence between the flag and the loads
    // of the reader words.
    acc_stripes_lock(state, mask, kStripeExcludesAtomics);
    for (int i = 0; i < readers.n; ++i) {
        const std::uint64_t* w = readers.word(i);
        for (unsigned spins = 0; __atomic_load_n(w, __ATOMIC_ACQUIRE) != 0; ++spins) {
            if (spins <= 64) {
                __builtin_ia32_pause();
                continue;
            }
            sched_yield();
            // A reader whose process died holds its count forever (its state area lies
            // beside its reader word: kInfoPid).
            if (spins % 4096 == 0) {
                const pid_t pid = pid_t(w[std::ptrdiff_t(kInfoPid) - std::ptrdiff_t(kAccReaders)]);
                if (pid > 0 && pid_exited(pid)) break;
            }
        }
    }
}

namespace {
// Frees the stripes of mask whose holder's process is gone (counted as taken over).
void acc_stripes_free_dead(std::uint64_t* state, std::uint64_t mask) {
    for (std::uint64_t m = mask; m; m &= m - 1) {
        std::uint64_t* w = &state[stripe_word(__builtin_ctzll(m))];
        std::uint64_t holder = __atomic_load_n(w, __ATOMIC_RELAXED);
        const std::uint64_t pid = holder & ~kStripeExcludesAtomics;
        if (pid <= 1 || !pid_exited(pid_t(pid))) continue;
        if (__atomic_compare_exchange_n(w, &holder, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            g_stripes_taken_over.fetch_add(1, std::memory_order_relaxed);
    }
}
}  // namespace

void acc_atomics_wait(std::uint64_t* mine, const std::uint64_t* state, std::uint64_t mask) {
    do {
        __atomic_fetch_sub(mine, 1, __ATOMIC_RELEASE);
        for (unsigned spins = 0; acc_stripes_exclude(state, mask); ++spins) {
            if (spins <= 64) {
                __builtin_ia32_pause();
                continue;
            }
            sched_yield();
            if (spins % 4096 == 0) acc_stripes_free_dead(const_cast<std::uint64_t*>(state), mask);
        }
        __atomic_fetch_add(mine, 1, __ATOMIC_SEQ_CST);
    } while (acc_stripes_exclude(state, mask));
}

void acc_stripes_unlock(std::uint64_t* state, std::uint64_t mask) {
    // A release store (no locked instruction) frees a stripe.
    for (std::uint64_t m = mask; m; m &= m - 1)
        __atomic_store_n(&state[stripe_word(__builtin_ctzll(m))], 0, __ATOMIC_RELEASE);
}

}  // namespace fastrma::detail
