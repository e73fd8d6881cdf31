// test_served.cpp — fetch_and_op / compare_and_swap and small puts and gets applied by the
// target's CPU through its state page (transport/shm/served.hpp), with origin and target as threads.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/copy.hpp"
#include "ops/op.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/served.hpp"

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

// How the target finds posts (Server::posted), one thread playing both sides: idle, an
// origin sets the flag word and the pass reads only that; after serving, the passes read
// the slots (kServedScanning set, origins skip the flag) for kHotPasses passes, then go back.
// A post at each stage is found and answered at the next pass.
TEST(ServedAtomic, PostsAreFoundByTheFlagWhenIdleAndByTheSlotsAfterServing) {
    StatePage page;
    std::uint64_t cell = 0;
    served::Server server;
    const std::uint64_t one = 1;
    const served::Request rq{int(RmaKind::fop), 0, 0, 0, 8, &one, nullptr};
    auto post_and_serve = [&](std::uint64_t want_old) -> bool {
        served::Posted p;
        if (!served::post(page.w, rq, &p)) {
            ADD_FAILURE() << "no free slot";
            return false;
        }
        const bool flagged = __atomic_load_n(&page.w[kServedPosted], __ATOMIC_RELAXED) != 0;
        EXPECT_TRUE(server.poll(page.w, adder(&cell), false));
        std::uint64_t old = ~0ull;
        int rc = -2;
        EXPECT_EQ(served::finish(p, &old, &rc), served::Outcome::answered);
        EXPECT_EQ(old, want_old);
        EXPECT_EQ(__atomic_load_n(&page.w[kServedPosted], __ATOMIC_RELAXED), 0u) << "the flag is cleared";
        return flagged;
    };
    EXPECT_FALSE(server.poll(page.w, adder(&cell), false));  // nothing posted
    EXPECT_TRUE(post_and_serve(0)) << "idle: the origin sets the flag";
    EXPECT_EQ(page.w[kServedScanning], 1u) << "after serving, the passes read the slots";
    EXPECT_FALSE(post_and_serve(1)) << "hot: the origin skips the flag";
    for (unsigned i = 0; i + 1 < served::kHotPasses; ++i) ASSERT_FALSE(server.poll(page.w, adder(&cell), false));
    EXPECT_EQ(page.w[kServedScanning], 1u);
    EXPECT_FALSE(post_and_serve(2)) << "the last hot pass still reads the slots";
    for (unsigned i = 0; i < served::kHotPasses; ++i) ASSERT_FALSE(server.poll(page.w, adder(&cell), false));
    EXPECT_EQ(page.w[kServedScanning], 0u) << "idle again after kHotPasses passes";
    EXPECT_TRUE(post_and_serve(3)) << "cold again: the flag";
    EXPECT_EQ(cell, 4u);
    // Two target threads serving at once while posts come in bursts with idle gaps, so that
    // going idle races going busy; then, alone again, a post must still be found (the
    // scanning word left set with no pass reading the slots would lose it).
    std::atomic<bool> stop{false};
    std::vector<std::thread> targets;
    for (int t = 0; t < 2; ++t)
        targets.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) server.poll(page.w, adder(&cell), true);
        });
    std::uint64_t answered = 0;
    const auto t0 = std::chrono::steady_clock::now();
    // (On a loaded machine the target threads may miss whole bursts: go on until one was
    // answered, up to 5 s.)
    for (int burst = 0;
         burst < 200 || (answered == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)); ++burst) {
        for (int k = 0; k < 5; ++k) {
            std::uint64_t old = 0;
            int rc = -2;
            answered += served::try_remote(page.w, rq, &old, &rc);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(burst % 7 == 0 ? 300 : 5));
    }
    stop.store(true);
    for (auto& t : targets) t.join();
    EXPECT_GT(answered, 0u);
    EXPECT_EQ(cell, 4u + answered);
    for (unsigned i = 0; i < 2 * served::kHotPasses; ++i) server.poll(page.w, adder(&cell), false);
    EXPECT_TRUE(post_and_serve(4 + answered)) << "idle after the races: the flag";
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

// ---- The bulk area -------------------------------------------------------------------------

namespace {
// A state page with a bulk area of kArea bytes right after it (parts of 3968 bytes).
constexpr std::size_t kArea = 8192;
struct alignas(64) BulkState {
    std::uint64_t w[kStateBytes / 8 + kArea / 8] = {};
    BulkState() {
        w[kServedBulkWord] = kStateBytes / 8;
        w[kServedBulkBytes] = kArea;
        w[kInfoPid] = std::uint64_t(getpid());
        served::register_bulk_areas(w, sizeof w / 8, 1, kStateBytes / 8, kArea);  // (as a window does)
    }
    ~BulkState() { served::unregister_bulk_areas(w); }
};

std::uint64_t mono_ns() {
    return std::uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// The target's side of bulk puts and gets on mem (toff: an offset), counting the pieces applied.
served::ApplyBulk bulk_copier(unsigned char* mem, std::size_t size, std::atomic<std::uint64_t>* pieces) {
    return [=](int kind, int, int, std::uint64_t toff, std::int64_t stride, std::uint64_t piece, std::uint64_t count,
               const void* src, void* res) {
        std::uint64_t lo = 0, span = 0;
        if (!strided_footprint(toff, stride, piece, count, &lo, &span) || lo + span > size) return served::kRefused;
        if (kind == int(RmaKind::put))
            copy_strided(mem + toff, stride, src, std::int64_t(piece), piece, count);
        else
            copy_strided(res, std::int64_t(piece), mem + toff, stride, piece, count);
        pieces->fetch_add(count);
        return int(MPI_SUCCESS);
    };
}
}  // namespace

// A strided put of 5000 4-byte pieces (upward and downward) streams through the two buffers in
// parts (992 pieces each), and a strided get brings them back: every piece at its place, the
// gaps untouched, nothing left to the origin.
TEST(ServedBulk, StridedPutAndGetStreamInParts) {
    BulkState st;
    std::vector<unsigned char> mem(5000 * 12 + 64, 0xEE);
    std::atomic<std::uint64_t> applied{0};
    served::Server server(kStateBytes / 8, kArea);
    std::atomic<bool> stop{false};
    std::thread target([&] {
        while (!stop.load())
            server.poll(
                st.w, [](auto...) { return int(MPI_SUCCESS); }, bulk_copier(mem.data(), mem.size(), &applied), true);
    });
    while (!__atomic_load_n(&st.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    constexpr std::uint64_t kN = 5000;
    for (std::int64_t stride : {12, -12}) {
        std::fill(mem.begin(), mem.end(), 0xEE);
        applied = 0;
        std::vector<std::uint32_t> src(kN), back(kN, 0);
        for (std::uint64_t i = 0; i < kN; ++i) src[i] = std::uint32_t(i * 2654435761u);
        const std::uint64_t toff = stride < 0 ? (kN - 1) * 12 : 0;
        std::uint64_t by_origin = 0;
        for (int kind : {int(RmaKind::put), int(RmaKind::get)}) {
            served::BulkChannel ch;
            // (patience: a target thread descheduled on a busy machine is waited for)
            ASSERT_TRUE(ch.claim(st.w, 2'000'000'000, 2'000'000'000));
            EXPECT_EQ(ch.part_bytes(), 3968u);
            const bool put = kind == int(RmaKind::put);
            const int rc = ch.run(
                served::BulkRun{kind, 0, 0, toff, stride, 4, kN, put},
                [&](std::uint64_t first, std::uint64_t n, unsigned char* dst) { std::memcpy(dst, &src[first], n * 4); },
                [&](std::uint64_t first, std::uint64_t n, const unsigned char* from) {
                    if (!put) std::memcpy(&back[first], from, n * 4);
                },
                [&](std::uint64_t, std::uint64_t n) {
                    by_origin += n;
                    return int(MPI_SUCCESS);
                });
            EXPECT_EQ(rc, MPI_SUCCESS);
        }
        EXPECT_EQ(by_origin, 0u);
        EXPECT_EQ(applied.load(), 2 * kN);
        for (std::uint64_t i = 0; i < kN; ++i) {
            std::uint32_t v;
            std::memcpy(&v, &mem[toff + std::uint64_t(std::int64_t(i) * stride)], 4);
            ASSERT_EQ(v, src[i]) << "piece " << i << " stride " << stride;
            for (int g = 4; g < 12; ++g) ASSERT_EQ(mem[i * 12 + std::size_t(g)], 0xEE) << "gap after " << i;
        }
        EXPECT_EQ(back, src);
    }
    stop.store(true);
    target.join();
}

// Without a server the parts are withdrawn: the origin moves every piece itself, each once;
// against a target that serves in bursts with pauses longer than the withdrawal time, every
// piece is applied exactly once, by one side or the other (counted per piece).
TEST(ServedBulk, EveryPieceIsAppliedOnceByOneSide) {
    constexpr std::uint64_t kN = 20000;
    {
        BulkState st;
        served::BulkChannel ch;
        // Fresh, but nobody serves. The beat is fresh for 10 us (kFreshNs): written again
        // when this thread was preempted in between.
        bool claimed = false;
        for (int i = 0; i < 100 && !claimed; ++i) {
            st.w[kServedBeat] = mono_ns();
            claimed = ch.claim(st.w);
        }
        ASSERT_TRUE(claimed);
        std::vector<int> seen(kN, 0);
        const int rc = ch.run(
            served::BulkRun{int(RmaKind::put), 0, 0, 0, 4, 4, kN, true}, [](auto...) {}, [](auto...) {},
            [&](std::uint64_t first, std::uint64_t n) {
                for (std::uint64_t i = first; i < first + n; ++i) ++seen[i];
                return int(MPI_SUCCESS);
            });
        EXPECT_EQ(rc, MPI_SUCCESS);
        for (std::uint64_t i = 0; i < kN; ++i) ASSERT_EQ(seen[i], 1) << "piece " << i;
    }
    BulkState st;
    std::vector<std::atomic<int>> count(kN);
    served::Server server(kStateBytes / 8, kArea);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> by_target{0};
    const served::ApplyBulk counter = [&](int, int, int, std::uint64_t toff, std::int64_t stride, std::uint64_t,
                                          std::uint64_t n, const void*, void*) {
        for (std::uint64_t i = 0; i < n; ++i) count[(toff + i * std::uint64_t(stride)) / 4].fetch_add(1);
        by_target += n;
        return int(MPI_SUCCESS);
    };
    std::thread target([&] {
        for (unsigned k = 0; !stop.load(); ++k) {
            server.poll(
                st.w, [](auto...) { return int(MPI_SUCCESS); }, counter, true);
            if (k % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    });
    while (!__atomic_load_n(&st.w[kServedBeat], __ATOMIC_ACQUIRE)) std::this_thread::yield();
    std::uint64_t by_origin = 0;
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    // (at least 20 rounds, more until the target took some: a loaded machine deschedules it)
    for (; reps < 20 || (by_target.load() == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
         ++reps) {
        served::BulkChannel ch;
        while (!ch.claim(st.w)) std::this_thread::yield();
        ch.run(
            served::BulkRun{int(RmaKind::acc), 0, 0, 0, 4, 4, kN, true}, [](auto...) {}, [](auto...) {},
            [&](std::uint64_t first, std::uint64_t n) {
                for (std::uint64_t i = first; i < first + n; ++i) count[i].fetch_add(1);
                by_origin += n;
                return int(MPI_SUCCESS);
            });
    }
    stop.store(true);
    target.join();
    for (std::uint64_t i = 0; i < kN; ++i) ASSERT_EQ(count[i].load(), reps) << "piece " << i;
    EXPECT_GT(by_target.load(), 0u);
    std::printf("ServedBulk: %llu pieces applied by the target, %llu by the origin\n",
                static_cast<unsigned long long>(by_target.load()), static_cast<unsigned long long>(by_origin));
}
