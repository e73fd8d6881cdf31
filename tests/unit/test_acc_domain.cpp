// test_acc_domain.cpp — the CPU domain's reader/writer discipline on the accumulate stripes
// (transport/shm/acc_domain.hpp): CPU-atomic ops and plain runs on the same elements lose no update,
// a plain run waits for the atomic ops in progress, an atomic op waits for a flagged stripe
// and not for an unflagged one, and a dead reader does not block a run forever.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "epochs/issue.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/acc_domain.hpp"

namespace fastrma::detail {
namespace {

constexpr std::size_t kWords = kStateBytes / 8;

// Three members' state areas side by side, as a node segment holds them; member 0 is the target.
struct States {
    alignas(64) std::uint64_t words[3 * kWords] = {};
    std::uint64_t* of(int i) { return words + std::size_t(i) * kWords; }
    AccReaders readers() { return AccReaders{reinterpret_cast<const unsigned char*>(words), kStateBytes, 3}; }
};

TEST(AccDomain, StripeOfAgreesWithTheStripeMask) {
    for (int n = 1; n <= kMaxAccStripes; ++n)
        for (std::uint64_t off = 0; off < 200 * kStripeUnit; off += 1021)
            ASSERT_EQ(1ull << acc_stripe_of(n, off), acc_stripe_mask(n, off, 1)) << n << " " << off;
}

TEST(AccDomain, AtomicOpsAndPlainRunsOnTheSameElementsLoseNothing) {
    // Two threads fetch-add single elements (each counted in its own member's reader word) while
    // a third adds 1 to every element in plain runs (vectorised loads and stores) under the
    // flagged stripes: every element ends at exactly the number of updates it received.
    auto st = std::make_unique<States>();
    constexpr std::size_t kElems = 3 * kStripeUnit / 8;  // three stripes of int64
    std::vector<std::uint64_t> data(kElems, 0);
    constexpr int kAdds = 300000;
    std::atomic<int> running{2};
    const int stripes = 16;
    auto atomic_adds = [&](int member) {
        std::uint64_t* mine = st->of(member) + kAccReaders;
        std::uint64_t x = std::uint64_t(member) * 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < kAdds; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const std::size_t e = (x >> 33) % kElems;
            acc_atomics_enter(mine, st->of(0), 1ull << acc_stripe_of(stripes, e * 8));
            __atomic_fetch_add(&data[e], 1, __ATOMIC_RELAXED);
            acc_atomics_exit(mine);
        }
        --running;
    };
    std::thread a(atomic_adds, 1), b(atomic_adds, 2);
    const std::uint64_t all = acc_stripe_mask(stripes, 0, kElems * 8);
    std::uint64_t runs = 0;
    for (; running.load() > 0 || runs < 100; ++runs) {  // as long as the atomic ops go on
        acc_run_lock(st->of(0), all, st->readers());
        for (std::size_t e = 0; e < kElems; ++e) data[e] += 1;
        acc_stripes_unlock(st->of(0), all);
    }
    a.join();
    b.join();
    std::uint64_t sum = 0;
    for (std::uint64_t v : data) sum += v;
    EXPECT_EQ(sum, runs * kElems + 2ull * kAdds);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(st->of(i)[kAccReaders], 0u);
}

TEST(AccDomain, APlainRunWaitsForTheAtomicOpsInProgress) {
    auto st = std::make_unique<States>();
    std::uint64_t* mine = st->of(2) + kAccReaders;
    acc_atomics_enter(mine, st->of(0), 1);
    std::atomic<bool> locked{false};
    std::thread run([&] {
        acc_run_lock(st->of(0), 1, st->readers());
        locked = true;
        acc_stripes_unlock(st->of(0), 1);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(locked.load()) << "the run did not wait for the atomic op in progress";
    acc_atomics_exit(mine);
    run.join();
    EXPECT_TRUE(locked.load());
}

TEST(AccDomain, AnAtomicOpWaitsForAFlaggedStripeOnly) {
    auto st = std::make_unique<States>();
    std::uint64_t* mine = st->of(1) + kAccReaders;
    // Held without the flag (a lock-domain type's run): atomic ops go on.
    acc_stripes_lock(st->of(0), 1ull << 3);
    acc_atomics_enter(mine, st->of(0), 1ull << 3);
    acc_atomics_exit(mine);
    acc_stripes_unlock(st->of(0), 1ull << 3);
    // Held for a CPU-domain run: an atomic op on that stripe waits, one on another does not.
    acc_run_lock(st->of(0), 1ull << 3, st->readers());
    acc_atomics_enter(mine, st->of(0), 1ull << 4);
    acc_atomics_exit(mine);
    std::atomic<bool> entered{false};
    std::thread t([&] {
        acc_atomics_enter(mine, st->of(0), (1ull << 2) | (1ull << 3));
        entered = true;
        acc_atomics_exit(mine);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(entered.load()) << "an atomic op passed a flagged stripe";
    EXPECT_EQ(__atomic_load_n(mine, __ATOMIC_ACQUIRE), 0u)
        << "a waiting atomic op must not count itself (the run would wait for it)";
    acc_stripes_unlock(st->of(0), 1ull << 3);
    t.join();
    EXPECT_TRUE(entered.load());
    EXPECT_EQ(*mine, 0u);
}

TEST(AccDomain, ADeadReaderDoesNotBlockARunForever) {
    auto st = std::make_unique<States>();
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_GT(child, 0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    st->of(1)[kInfoPid] = std::uint64_t(child);  // gone (reaped)
    st->of(1)[kAccReaders] = 1;  // it died counted
    const auto t0 = std::chrono::steady_clock::now();
    acc_run_lock(st->of(0), 1, st->readers());
    acc_stripes_unlock(st->of(0), 1);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
}  // namespace fastrma::detail
