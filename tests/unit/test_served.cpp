// test_served.cpp — fetch_and_op / compare_and_swap and small puts and gets applied by the
// target's CPU through its state page (ops/served.hpp), with origin and target as threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/op.hpp"
#include "ops/served.hpp"
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
        if (toff != 0 || count != 8) return int(MPI_ERR_RMA_RANGE);  // (bytes: one 8-byte element)
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

namespace {
// The target's side of puts and gets: memcpy into / out of `mem` (bytes long); offsets
// outside it are refused. applied counts the requests applied.
served::Apply copier(unsigned char* mem, std::size_t bytes, std::atomic<int>* applied) {
    return [=](int kind, int, int, std::uint64_t toff, std::uint64_t count, const void* src, const void*, void* res) {
        if (toff > bytes || count > bytes - toff) return served::kRefused;
        if (kind == int(RmaKind::put))
            std::memcpy(mem + toff, src, count);
        else
            std::memcpy(res, mem + toff, count);
        applied->fetch_add(1);
        return int(MPI_SUCCESS);
    };
}
}  // namespace

TEST(ServedTransfers, PutsAndGetsOfEveryLengthUpToTheBound) {
    StatePage page;
    std::vector<unsigned char> mem(8192, 0);
    std::atomic<int> applied{0};
    served::Server server;
    std::atomic<bool> stop{false};
    std::thread target([&] {
        while (!stop.load()) server.poll(page.w, copier(mem.data(), mem.size(), &applied), true);
    });
    struct Join {  // (also when an assertion returns early)
        std::atomic<bool>& stop;
        std::thread& t;
        ~Join() {
            stop.store(true);
            t.join();
        }
    } join{stop, target};
    while (!__atomic_load_n(&page.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    std::size_t off = 0;
    for (std::size_t len = 1; len <= served::kMaxBytes; off += len + 8, ++len) {
        ASSERT_LE(off + len + 8, mem.size());
        unsigned char src[served::kMaxBytes], got[served::kMaxBytes + 8];
        for (std::size_t i = 0; i < len; ++i) src[i] = static_cast<unsigned char>(len * 3 + i + 1);
        const served::Request put{int(RmaKind::put), 0, 0, off, len, src, nullptr};
        served::Posted p;
        int rc = -2;
        served::Outcome o;
        do {  // (a withdrawn post: the target thread descheduled; post again)
            ASSERT_TRUE(served::post(page.w, put, &p));
            o = served::finish(p, nullptr, &rc);
        } while (o == served::Outcome::withdrawn);
        ASSERT_EQ(o, served::Outcome::answered) << len;
        EXPECT_EQ(rc, MPI_SUCCESS);
        std::memset(got, 0x5A, sizeof got);
        const served::Request get{int(RmaKind::get), 0, 0, off, len, nullptr, nullptr};
        do {
            ASSERT_TRUE(served::post(page.w, get, &p));
            o = served::finish(p, got, &rc);
        } while (o == served::Outcome::withdrawn);
        ASSERT_EQ(o, served::Outcome::answered) << len;
        for (std::size_t i = 0; i < len; ++i) ASSERT_EQ(got[i], src[i]) << len;
        for (std::size_t i = len; i < sizeof got; ++i) ASSERT_EQ(got[i], 0x5A) << len;  // only len bytes come back
        EXPECT_EQ(mem[off + len], 0) << len;  // the neighbour untouched
    }
    // One byte past the bound is not posted at all; a range outside the target's memory is refused.
    served::Posted p;
    unsigned char big[served::kMaxBytes + 1] = {};
    EXPECT_FALSE(served::post(page.w, {int(RmaKind::put), 0, 0, 0, sizeof big, big, nullptr}, &p));
    const served::Request out{int(RmaKind::put), 0, 0, mem.size() - 4, 8, big, nullptr};
    int rc = -2;
    served::Outcome o;
    do {
        ASSERT_TRUE(served::post(page.w, out, &p));
        o = served::finish(p, nullptr, &rc);
    } while (o == served::Outcome::withdrawn);
    EXPECT_EQ(o, served::Outcome::refused);
}

// Withdrawal races the target's take: each request is applied exactly once, by the target
// (answered) or by the origin (withdrawn or refused), never both, never neither. A target
// that serves in bursts with pauses longer than the withdrawal time makes both happen.
TEST(ServedTransfers, AWithdrawnPostIsNeverAppliedTwice) {
    StatePage page;
    std::vector<unsigned char> mem(64, 0);
    std::atomic<int> by_target{0};
    served::Server server;
    std::atomic<bool> stop{false};
    std::thread target([&] {
        for (unsigned k = 0; !stop.load(); ++k) {
            server.poll(page.w, copier(mem.data(), mem.size(), &by_target), true);
            if (k % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    });
    while (!__atomic_load_n(&page.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    constexpr int kOrigins = 3, kEach = 2000;
    std::atomic<int> answered{0}, by_origin{0};
    std::vector<std::thread> origins;
    for (int o = 0; o < kOrigins; ++o)
        origins.emplace_back([&, o] {
            const std::uint64_t v = std::uint64_t(o);
            for (int k = 0; k < kEach; ++k) {
                served::Posted p;
                const served::Request rq{int(RmaKind::put), 0, 0, std::uint64_t(o) * 8, 8, &v, nullptr};
                if (!served::post(page.w, rq, &p)) {
                    by_origin.fetch_add(1);  // no slot: the origin's own path
                    continue;
                }
                int rc = -2;
                if (served::finish(p, nullptr, &rc) == served::Outcome::answered)
                    answered.fetch_add(1);
                else
                    by_origin.fetch_add(1);
            }
        });
    for (auto& t : origins) t.join();
    stop.store(true);
    target.join();
    EXPECT_EQ(answered.load(), by_target.load());  // every answer was one application
    EXPECT_EQ(answered.load() + by_origin.load(), kOrigins * kEach);
    EXPECT_GT(answered.load(), 0);
}
