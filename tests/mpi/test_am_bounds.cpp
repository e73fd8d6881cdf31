// test_am_bounds.cpp — the am target's own checks (AmEndpoint::serve): a request whose
// offset, length, state word, type or size does not fit what the target has is not applied
// (and its origin is told), answered requests still get an (empty) answer, and nothing is
// written outside the target's part. The origin side here is the raw endpoint, which does
// not check anything itself (the Window does): it plays a wrong peer. 2 ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/mpi_world.hpp"
#include "ops/state_words.hpp"
#include "transport/am.hpp"

using namespace fastrma::detail;

namespace {

TEST(AmServer, RequestsOutsideThePartAreRefusedNotApplied) {
    if (world_size() != 2) GTEST_SKIP() << "two ranks";
    const int me = world_rank();
    constexpr std::size_t kPart = 64, kGuard = 64 * 1024;
    // The part sits inside a guard region filled with a pattern that must survive.
    std::vector<unsigned char> mem(kGuard + kPart + kGuard, 0xAB);
    std::vector<std::uint64_t> state(16, 0);
    int accumulates = 0;
    AmLocal local;
    local.base = mem.data() + kGuard;
    local.size = kPart;
    local.state = state.data();
    local.state_words = state.size();
    local.accumulate = [&](int, int, int, std::uint64_t, std::uint64_t, std::uint64_t, const void*, const void*,
                           void*) {
        ++accumulates;
        return MPI_SUCCESS;
    };
    local.accumulate_strided = [&](int, int, int, std::uint64_t, std::int64_t, std::uint64_t, std::uint64_t,
                                   std::uint64_t, const void*, void*) {
        ++accumulates;
        return MPI_SUCCESS;
    };
    local.grant_lock = [](Transport::LockRequest) { return true; };
    AmEndpoint ep(MPI_COMM_WORLD, local, 256);
    ASSERT_EQ(ep.error(), MPI_SUCCESS);
    ep.set_served_elsewhere(false);  // no progress thread: the target serves inside its fence
    if (me == 1) {
        std::uint64_t v = 0x1111111111111111ull;
        const Chunk far{&v, 1ull << 40, 8}, across{&v, kPart - 4, 8}, ok{&v, 0, 8};
        ep.put(0, &far, 1);
        ep.put(0, &across, 1);
        ep.put(0, &ok, 1);
        std::vector<unsigned char> big(8192, 0xCD);
        const Chunk big_far{big.data(), 0, big.size()};  // a payload message (kPutData), too long for the part
        ep.put(0, &big_far, 1);
        // Strided puts: the footprint past the end, below the start (downward), a stride
        // whose footprint overflows 64 bits; then one inside (bytes 16-19 and 32-35).
        const std::uint32_t v4[9] = {0x22222222, 0x22222222, 0x22222222, 0x22222222, 0x22222222,
                                     0x22222222, 0x22222222, 0x22222222, 0x22222222};
        ep.put_strided(0, v4, 4, 0, 8, 4, 9);  // last piece at 64
        ep.put_strided(0, v4, 4, 8, -8, 4, 3);  // first byte at -8
        ep.put_strided(0, v4, 4, 0, std::int64_t(1) << 62, 4, 5);  // 4 * 2^62 past 0
        ep.put_strided(0, v4, 4, 60, -(std::int64_t(1) << 62), 4, 5);
        ep.put_strided(0, v4, 4, 16, 16, 4, 2);  // inside
        // Strided accumulates (sum of doubles): past the end, below the start, element bytes
        // 0 and 65, and a stride whose footprint overflows: none reaches the accumulate path.
        double d3[16] = {1, 2, 3};  // the origin reads len + (n - 1) * lstride bytes: 73 for 65-byte elements
        ep.accumulate_strided(0, 2, 2, 0, 48, 16, 1, 8, d3, 8, 2);
        ep.accumulate_strided(0, 2, 2, 0, 8, -16, 1, 8, d3, 8, 2);
        ep.accumulate_strided(0, 2, 2, 0, 0, 16, 1, 0, d3, 8, 2);
        ep.accumulate_strided(0, 2, 2, 0, 0, 16, 1, 65, d3, 8, 2);
        ep.accumulate_strided(0, 2, 2, 0, 0, std::int64_t(1) << 62, 1, 8, d3, 8, 3);
        // Strided get_accumulates (sum of doubles, and MPI_NO_OP without origin data): past the
        // end, below the start, element bytes 65, a footprint that overflows: refused, answered
        // empty, the result buffer left alone.
        double r3[16];
        for (double& r : r3) r = 42;
        ep.get_accumulate_strided(0, 3, 2, 0, 48, 16, 1, 8, d3, 8, r3, 8, 2);
        ep.get_accumulate_strided(0, 3, 2, 0, 8, -16, 1, 8, d3, 8, r3, 8, 2);
        ep.get_accumulate_strided(0, 3, 2, 0, 0, 16, 1, 65, d3, 8, r3, 8, 2);  // reads and writes 73 bytes
        ep.get_accumulate_strided(0, 3, 2, 0, 0, std::int64_t(1) << 62, 1, 8, d3, 8, r3, 8, 3);
        ep.get_accumulate_strided(0, 3, 13 /* no_op */, 0, 56, 8, 1, 8, nullptr, 0, r3, 8, 2);
        std::uint64_t got = 42;
        const Chunk get_far{&got, 1ull << 50, 8};
        ep.get(0, &get_far, 1);
        EXPECT_EQ(ep.atomic8(0, 1ull << 40, AtomicOp::fetch_add, 1, 0), 0u) << "a state word beyond the state area";
        std::vector<std::uint64_t> words(1 << 20, 7);  // 8 MiB: far more words than the target has
        ep.read_state(0, 0, words.size(), words.data());
        EXPECT_EQ(words[0], 7u) << "the refused read leaves the buffer alone";
        const double d = 1;
        ep.accumulate(0, 2 /* acc */, 2 /* sum */, 0, 1ull << 40, 1, 8, &d, nullptr, nullptr);
        std::uint32_t got4[4] = {42, 42, 42, 42};
        ep.get_strided(0, got4, 4, 0, 24, 4, 4);  // last piece at 72: past the end
        ep.get_strided(0, got4, 4, 8, -8, 4, 2 + 1);  // first byte at -8
        ep.flush(0);
        EXPECT_EQ(got, 42u) << "a refused get leaves the buffer alone";
        for (std::uint32_t g : got4) EXPECT_EQ(g, 42u) << "a refused strided get leaves the buffer alone";
        for (double r : r3) EXPECT_EQ(r, 42.0) << "a refused strided get_accumulate leaves the result alone";
    }
    ASSERT_EQ(ep.fence(), MPI_SUCCESS);
    if (me == 0) {
        for (std::size_t i = 0; i < kGuard; ++i) ASSERT_EQ(mem[i], 0xAB) << "guard below, byte " << i;
        for (std::size_t i = kGuard + kPart; i < mem.size(); ++i) ASSERT_EQ(mem[i], 0xAB) << "guard above, byte " << i;
        std::uint64_t first;
        std::memcpy(&first, local.base, 8);
        EXPECT_EQ(first, 0x1111111111111111ull) << "the valid put landed";
        for (std::size_t i = 8; i < kPart; ++i) {
            const bool strided = (i >= 16 && i < 20) || (i >= 32 && i < 36);
            EXPECT_EQ(local.base[i], strided ? 0x22 : 0xAB) << "byte " << i;
        }
        EXPECT_EQ(accumulates, 0) << "an accumulate outside the part reached the window";
        for (std::uint64_t w : state) EXPECT_EQ(w, 0u);
    } else {
        ep.serve_arrived();
        EXPECT_GE(ep.take_rejected(0), 22u) << "every refused request was reported";
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// An origin's lock request that the target cannot grant yet holds back everything that
// origin sends it after, in order, except its announcements to the lock master's count
// (Transport::notify8 on kLockGlobal: the unlock of a lock held at another process, a
// lock_all attempt undone). Those belong to no epoch of the origin at this target; held
// back, they kept the count up, the count kept lock_all attempts failing, and their transient
// holds kept lock requests parked: a livelock across two hosts (twohost_mpi_passive_am).
TEST(AmServer, AParkedOriginsMasterNotifiesApplyAtOnceItsOtherRequestsWait) {
    if (world_size() != 2) GTEST_SKIP() << "two ranks";
    const int me = world_rank();
    std::vector<unsigned char> mem(64, 0);
    std::vector<std::uint64_t> state(kLockKick + kWordsPerLine, 0);
    std::atomic<bool> grantable{false};
    int grants = 0;
    AmLocal local;
    local.base = mem.data();
    local.size = mem.size();
    local.state = state.data();
    local.state_words = state.size();
    local.grant_lock = [&](Transport::LockRequest) {
        if (!grantable.load()) return false;
        ++grants;
        return true;
    };
    AmEndpoint ep(MPI_COMM_WORLD, local, 256);
    ASSERT_EQ(ep.error(), MPI_SUCCESS);
    ep.set_served_elsewhere(false);
    std::uint64_t v = 0x5555aaaa5555aaaaull;
    if (me == 1) {
        ep.lock_request(0, Transport::LockRequest::exclusive);
        const Chunk put{&v, 8, 8};
        ep.put(0, &put, 1);  // batched behind the lock request
        ep.notify8(0, kLockGlobal, AtomicOp::fetch_add, 5);  // same batch: sends it
        ep.notify8(0, kLockGlobal, AtomicOp::fetch_add, 7);  // a batch of its own
        ep.notify8(0, kLockLocal, AtomicOp::fetch_add, 1);  // not a master's count: waits
        ep.flush(0);  // answered once the lock was granted and everything applied
    } else {
        auto serve_until = [&](auto done) {
            const double until = MPI_Wtime() + 20;
            while (!done() && MPI_Wtime() < until) ep.poll();
            return done();
        };
        EXPECT_TRUE(serve_until([&] { return __atomic_load_n(&state[kLockGlobal], __ATOMIC_ACQUIRE) == 12; }))
            << "the master notifies waited behind the parked lock request: " << state[kLockGlobal];
        // Serve a while longer: nothing else may apply before the grant.
        for (const double t = MPI_Wtime() + 0.2; MPI_Wtime() < t;) ep.poll();
        EXPECT_EQ(grants, 0);
        std::uint64_t got = 0;
        std::memcpy(&got, mem.data() + 8, 8);
        EXPECT_EQ(got, 0u) << "the put overtook its lock request";
        EXPECT_EQ(state[kLockLocal], 0u) << "a notify of the parked epoch's kind overtook the lock request";
        grantable = true;
        EXPECT_TRUE(serve_until([&] {
            std::uint64_t now = 0;
            std::memcpy(&now, mem.data() + 8, 8);
            return now == v && __atomic_load_n(&state[kLockLocal], __ATOMIC_ACQUIRE) == 1;
        })) << "what waited behind the lock request was not applied once it was granted";
        EXPECT_EQ(grants, 1);
        EXPECT_EQ(state[kLockGlobal], 12u);
    }
    // The origin's flush needs the target serving until it is answered.
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    for (int done = 0; !done;) {
        ep.poll();
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
    }
}

TEST(AmTags, ReplyTagsStayAtOrBelowTheHostsTagUpperBound) {
    for (int ub : {32767, 65535, 100000, (1 << 20) + 999, (1 << 20) + 1000, 2147483647}) {
        const int span = AmEndpoint::reply_tag_span(ub);
        ASSERT_GT(span, 0) << "ub " << ub;
        EXPECT_EQ(span & (span - 1), 0) << "a power of two";
        EXPECT_LE(1000 + span - 1, ub) << "the largest reply tag exceeds MPI_TAG_UB " << ub;
        EXPECT_GE(2 * span, std::min(ub - 1000 + 1, 1 << 21) / 2) << "not needlessly small";
    }
    EXPECT_EQ(AmEndpoint::reply_tag_span(1100), 0) << "too few tags above the fixed ones";
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    ASSERT_TRUE(flag);
    EXPECT_LE(1000 + AmEndpoint::reply_tag_span(*ub) - 1, *ub);
}

}  // namespace
