// CmaBatch (transport/shm/cma_batch.*) by cross-memory attach to this very process: its lanes, their
// double buffers and the completion promise of drain() under several threads at once.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/cma_batch.hpp"

using namespace fastrma::detail;

namespace {
std::uint64_t addr(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
}  // namespace

TEST(CmaBatch, EveryPutOfAThreadHasLandedWhenItsDrainReturnsWhileOthersDrainToo) {
    // Four threads queue 8-byte puts to their own slots (remote base 0: offsets are addresses,
    // as on a dynamic window) and drain every few rounds; after each of its drains a thread
    // finds all its puts landed — also when another thread's drain was moving its lane's
    // buffer at that moment (a drain waits for a moving buffer before it returns). Each
    // round also adds 1 to a shared counter by accumulate: the sum is exact at the end.
    constexpr int kThreads = 4, kRounds = 4000, kSlots = 64;
    std::vector<std::uint64_t> mem(kThreads * kSlots, 0);
    std::int64_t counter = 0;
    // A whole state area of one process (the batch reads the served words too).
    std::vector<std::uint64_t> state(dyn_table_word0(1), 0);
    std::atomic<int> pending{0};
    CmaBatch batch(getpid(), 0, state.data(), 1, &pending);
    const TypeInfo* i64 = lookup_type(MPI_INT64_T);
    ASSERT_NE(i64, nullptr);
    std::atomic<int> errors{0}, late{0};
    auto body = [&](int t) {
        std::uint64_t* mine = mem.data() + t * kSlots;
        const std::int64_t one = 1;
        for (int r = 1; r <= kRounds; ++r) {
            for (int i = 0; i < kSlots; ++i) {
                const std::uint64_t v = std::uint64_t(r) << 16 | std::uint64_t(i);
                batch.put(addr(mine + i), &v, 8);
            }
            batch.acc(addr(&counter), MPI_SUM, *i64, 1, &one, nullptr);
            if (r % 3 == 0 || r == kRounds) {
                errors += batch.drain() != 0;
                for (int i = 0; i < kSlots; ++i)
                    late += __atomic_load_n(mine + i, __ATOMIC_RELAXED) != (std::uint64_t(r) << 16 | std::uint64_t(i));
            }
        }
    };
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) ts.emplace_back(body, t);
    for (auto& t : ts) t.join();
    EXPECT_EQ(batch.drain(), 0);
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(late.load(), 0) << "a drain returned before puts queued before it had landed";
    EXPECT_EQ(__atomic_load_n(&counter, __ATOMIC_RELAXED), std::int64_t(kThreads) * kRounds);
    EXPECT_FALSE(batch.due());
    EXPECT_EQ(pending.load(), 0);
}

TEST(CmaBatch, AFailedTransferDropsNoOtherThreadsPuts) {
    // Two threads queue puts into their lanes; one of thread A's goes to an address this
    // process does not map. The drain that moves both lanes together reports the failure,
    // and every other put — A's after the bad one, all of B's — has landed.
    std::vector<std::uint64_t> mem(64, 0);
    // A whole state area of one process (the batch reads the served words too).
    std::vector<std::uint64_t> state(dyn_table_word0(1), 0);
    std::atomic<int> pending{0}, queued{0};
    CmaBatch batch(getpid(), 0, state.data(), 1, &pending);
    auto queue = [&](int t, bool bad_first) {
        if (bad_first) {
            const std::uint64_t v = 1;
            batch.put(8, &v, 8);  // address 8: never mapped
        }
        for (int i = 0; i < 32; ++i) {
            const std::uint64_t v = 1000 * std::uint64_t(t + 1) + std::uint64_t(i);
            batch.put(addr(&mem[std::size_t(32 * t + i)]), &v, 8);
        }
        ++queued;
    };
    std::thread a(queue, 0, true), b(queue, 1, false);
    a.join();
    b.join();
    ASSERT_EQ(queued.load(), 2);
    EXPECT_NE(batch.drain(), 0) << "the failed put is reported";
    for (int t = 0; t < 2; ++t)
        for (int i = 0; i < 32; ++i)
            EXPECT_EQ(mem[std::size_t(32 * t + i)], 1000 * std::uint64_t(t + 1) + std::uint64_t(i))
                << "thread " << t << " put " << i;
    EXPECT_EQ(batch.drain(), 0) << "reported once";
}
