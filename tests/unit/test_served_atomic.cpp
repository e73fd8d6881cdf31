// test_served_atomic.cpp — fetch_and_op / compare_and_swap applied by the target's CPU
// through its state page (ops/served_atomic.hpp), with origin and target as threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/op.hpp"
#include "ops/served_atomic.hpp"
#include "ops/state_words.hpp"

using namespace fastrma::detail;

namespace {
struct alignas(64) StatePage {
    std::uint64_t w[kStateBytes / 8] = {};
};

// The target's side: applies a 64-bit fetch-add or compare-and-swap to `cell` (offset 0).
served::Apply adder(std::uint64_t* cell) {
    return [cell](int kind, int, int, std::uint64_t toff, std::uint64_t count, const void* src, const void* cmp,
                  void* res) {
        if (toff != 0 || count != 1) return int(MPI_ERR_RMA_RANGE);
        std::uint64_t old = *cell, x = 0, c = 0;
        if (src) std::memcpy(&x, src, 8);
        if (cmp) std::memcpy(&c, cmp, 8);
        if (kind == int(RmaKind::cas)) {
            if (old == c) *cell = x;
        } else {
            *cell = old + x;
        }
        std::memcpy(res, &old, 8);
        return int(MPI_SUCCESS);
    };
}
}  // namespace

TEST(ServedAtomic, ATargetThatServesAppliesEveryRequestOnce) {
    StatePage page;
    std::uint64_t cell = 0;
    served::Server server;
    std::atomic<bool> stop{false};
    std::thread target([&] {
        while (!stop.load()) server.poll(page.w, adder(&cell), true);
    });
    while (!__atomic_load_n(&page.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    constexpr int kOrigins = 3, kEach = 500;
    std::vector<std::vector<std::uint64_t>> olds(kOrigins);
    std::atomic<int> served_count{0};
    std::vector<std::thread> origins;
    for (int o = 0; o < kOrigins; ++o)
        origins.emplace_back([&, o] {
            for (int k = 0; k < kEach; ++k) {
                const std::uint64_t one = 1;
                std::uint64_t old = ~0ull;
                int rc = -2;
                const served::Request rq{int(RmaKind::fop), 0, 0, 0, 8, &one, nullptr};
                // Not taken in time (the target thread descheduled): a real origin applies
                // it by cross-memory attach; here it asks again.
                while (!served::try_remote(page.w, rq, &old, &rc)) std::this_thread::yield();
                EXPECT_EQ(rc, MPI_SUCCESS);
                olds[std::size_t(o)].push_back(old);
                served_count.fetch_add(1);
            }
        });
    for (auto& t : origins) t.join();
    stop.store(true);
    target.join();
    EXPECT_EQ(cell, std::uint64_t(kOrigins * kEach));
    std::vector<std::uint64_t> all;
    for (auto& v : olds) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);  // each value fetched once
    // Compare-and-swap: the old value comes back, the swap happens only on a match.
    std::thread t2([&] {
        for (int i = 0; i < 100000 && server.poll(page.w, adder(&cell), true) == false; ++i) {}
    });
    const std::uint64_t want = std::uint64_t(kOrigins * kEach), to = 7;
    std::uint64_t old = 0;
    int rc = -2;
    const served::Request cas{int(RmaKind::cas), 0, 0, 0, 8, &to, &want};
    const bool took = served::try_remote(page.w, cas, &old, &rc);
    t2.join();
    if (took) {
        EXPECT_EQ(old, want);
        EXPECT_EQ(cell, 7u);
    }
}

TEST(ServedAtomic, NoFreshBeatOrNoServerLeavesTheOperationToTheOrigin) {
    StatePage page;
    std::uint64_t old = 0;
    int rc = -2;
    const std::uint64_t one = 1;
    const served::Request rq{int(RmaKind::fop), 0, 0, 0, 8, &one, nullptr};
    EXPECT_FALSE(served::try_remote(page.w, rq, &old, &rc));  // never served: no beat
    // A fresh beat but nobody polls: posted, then withdrawn; the slot is free again.
    std::uint64_t cell = 0;
    served::Server server;
    server.poll(page.w, adder(&cell), true);  // only the beat
    EXPECT_FALSE(served::try_remote(page.w, rq, &old, &rc));
    EXPECT_FALSE(server.poll(page.w, adder(&cell), false));  // nothing left posted
    EXPECT_EQ(cell, 0u);
    // A refusal (a detached dynamic region) leaves it to the origin too.
    std::atomic<bool> stop{false};
    std::thread target([&] {
        while (!stop.load())
            server.poll(
                page.w,
                [](int, int, int, std::uint64_t, std::uint64_t, const void*, const void*, void*) {
                    return served::kRefused;
                },
                true);
    });
    while (!__atomic_load_n(&page.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    bool any = false;
    for (int i = 0; i < 50; ++i) any = any || served::try_remote(page.w, rq, &old, &rc);
    stop.store(true);
    target.join();
    EXPECT_FALSE(any);
}
