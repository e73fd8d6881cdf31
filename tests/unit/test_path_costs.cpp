// PathCosts (ops/path_costs.hpp): the served bulk area or cross-memory attach for a contiguous
// transfer, by what each cost lately. Each case runs in a thread of its own (the exploration
// count and last way are per thread).
#include <gtest/gtest.h>

#include <thread>

#include "ops/path_costs.hpp"

using fastrma::detail::PathCosts;

namespace {

// n choices for a put of `bytes`, each recorded at the cost its way takes: how many went by
// the area.
int run(PathCosts& pc, int n, std::uint64_t bytes, std::uint64_t area_cost, std::uint64_t cma_cost) {
    int area = 0;
    for (int i = 0; i < n; ++i) {
        const bool a = pc.serve(true, bytes);
        area += a;
        pc.record(true, bytes, a, a ? area_cost : cma_cost);
    }
    return area;
}

template <class F>
void in_thread(F f) {
    std::thread t(f);
    t.join();
}

}  // namespace

TEST(PathCosts, TheAreaFirstThenTheCheaperWayWithAFewExploringRuns) {
    in_thread([] {
        PathCosts pc;
        // Nothing known: the area, as before there was a choice.
        EXPECT_TRUE(pc.serve(true, 4096));
        // The area costs 3x what a syscall does (a far placement): after the first exploring
        // run, nearly everything goes by cross-memory attach.
        run(pc, 300, 4096, 3000, 1000);
        const int area = run(pc, 5120, 4096, 3000, 1000);
        EXPECT_GE(area, 5120 / 512 * 8 - 8);  // the exploring runs, 8 of every 512 (a 2x gap)
        EXPECT_LE(area, 5120 / 512 * 8 + 8);
        // The placement changes (the area costs a third): the next exploring runs see it.
        run(pc, 1600, 4096, 300, 1000);
        const int back = run(pc, 5120, 4096, 300, 1000);
        EXPECT_GE(back, 5120 - 5120 / 512 * 8 - 8);  // (a 3.3x gap: every 512th)
    });
}

TEST(PathCosts, ClassesAndDirectionsAreKeptApart) {
    in_thread([] {
        PathCosts pc;
        run(pc, 1000, 4096, 3000, 1000);  // 4 KiB puts: the syscall wins
        // (64 choices each: an exploring run takes at most 8 of them)
        auto area_of_64 = [&](bool put, std::uint64_t bytes) {
            int n = 0;
            for (int i = 0; i < 64; ++i) n += pc.serve(put, bytes);
            return n;
        };
        EXPECT_LE(area_of_64(true, 4000), 8);  // same class (2-4 KiB]
        EXPECT_EQ(area_of_64(true, 16384), 64);  // nothing known of 16 KiB puts
        EXPECT_EQ(area_of_64(false, 4096), 64);  // nor of 4 KiB gets
    });
}

TEST(PathCosts, TheFirstOpAfterAChangeOfWayIsNotCounted) {
    in_thread([] {
        PathCosts pc;
        run(pc, 600, 8192, 1000, 1200);  // the area wins narrowly, both known
        // Every first op after a change of way costs 3x (the lines move): not counted, so
        // the area keeps winning (counted, they would send whole stretches the other way).
        int area = 0;
        bool last = true;
        for (int i = 0; i < 5000; ++i) {
            const bool a = pc.serve(true, 8192);
            area += a;
            const std::uint64_t base = a ? 1000 : 1200;
            pc.record(true, 8192, a, a != last ? 3 * base : base);
            last = a;
        }
        EXPECT_GE(area, 5000 - 5000 / 256 * 8 - 8);
    });
}

TEST(PathCosts, OneDescheduledOpDoesNotTurnTheChoice) {
    in_thread([] {
        PathCosts pc;
        run(pc, 600, 8192, 1000, 2000);  // the area wins, both known
        // One area op of a million ticks (the thread lost its core): clamped to 4x.
        EXPECT_TRUE(pc.serve(true, 8192) || pc.serve(true, 8192));
        pc.record(true, 8192, true, 1000000);
        int after = 0;
        for (int i = 0; i < 64; ++i) after += pc.serve(true, 8192);
        EXPECT_GE(after, 64 - 8);
    });
}
