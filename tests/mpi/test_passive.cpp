// test_passive.cpp — passive-target RMA through the C API, on every window flavor the
// foundation has (allocate, create), with 1..4 ranks: data lands where MPI says, locks
// exclude and share, accumulates are element-wise atomic across ranks and threads, bad
// input gets its error class and leaves the window usable, op floods past the pools land.
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/mpi_world.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/engine.hpp"
#include "engine/window.hpp"
#include "progress/host_progress.hpp"
#include "progress/spin_wait.hpp"
#include "transport/ofi.hpp"
#include "transport/shm/served.hpp"

namespace {

// create_allocmem: FRMA_Win_create over FRMA_Alloc_mem memory (the ARMCI-MPI pattern).
enum class Flavor { allocate, create, create_allocmem };
const char* flavor_name(Flavor f) {
    return f == Flavor::allocate ? "allocate" : f == Flavor::create ? "create" : "create_allocmem";
}

// A window of `bytes` per rank, zero-filled, of the given flavor.
struct TestWin {
    FRMA_Win win = FRMA_WIN_NULL;
    unsigned char* base = nullptr;
    std::vector<unsigned char> user;  // create flavor: the user's memory
    std::size_t bytes = 0;

    TestWin(Flavor f, std::size_t n, int disp_unit = 1, MPI_Comm comm = MPI_COMM_WORLD) : bytes(n) {
        if (f == Flavor::allocate) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(n), disp_unit, MPI_INFO_NULL, comm, &base, &win));
        } else if (f == Flavor::create) {
            user.assign(n + 64, 0xEE);  // 64 guard bytes past the window
            base = user.data();
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create(base, MPI_Aint(n), disp_unit, MPI_INFO_NULL, comm, &win));
        } else {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Alloc_mem(MPI_Aint(n + 64), MPI_INFO_NULL, &allocmem));
            base = static_cast<unsigned char*>(allocmem);
            std::memset(base + n, 0xEE, 64);
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create(base, MPI_Aint(n), disp_unit, MPI_INFO_NULL, comm, &win));
            // The point of FRMA_Alloc_mem: every part is mapped, CPU atomics are the domain.
            auto* impl = fastrma::detail::window_of(win);
            int size = 0;
            MPI_Comm_size(comm, &size);
            // Every part in my node segment is mapped (peers off it are reached by messages or
            // the network: the target applies their ops itself).
            for (int r : impl->node_ranks()) {
                if (n > 0) {
                    EXPECT_TRUE(impl->peer_mapped(r)) << "rank " << r;
                }
            }
            for (int r = 0; r < size; ++r) {
                if (r == impl->rank() && impl->uses_network()) continue;  // (my words by the network's atomics)
                EXPECT_NE(impl->peer_remote(r),
                          std::count(impl->node_ranks().begin(), impl->node_ranks().end(), r) == 1)
                    << "rank " << r;
            }
            // CPU atomics are the domain where node peers share my part; a process alone in
            // its segment applies every accumulate under its own striped lock.
            if (n > 0) {
                EXPECT_EQ(!impl->uses_am() || (impl->node_ranks().size() > 1 && !impl->uses_network()),
                          impl->cpu_atomics());
            }
        }
        if (n) std::memset(base, 0, n);
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(comm);
    }
    ~TestWin() {
        if (win != FRMA_WIN_NULL) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
        }
        if (allocmem) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(allocmem));
        }
    }
    void* allocmem = nullptr;  // create_allocmem flavor
    template <class T>
    T* at(std::size_t i) {
        return reinterpret_cast<T*>(base) + i;
    }
};

class Passive : public ::testing::TestWithParam<Flavor> {};

// ---- put / get ----------------------------------------------------------------------

TEST_P(Passive, PutGetAcrossProtocolSizes) {
    const int me = world_rank(), n = world_size();
    // Both sides of every protocol boundary: am batch (1 KiB), eager message / zero-copy
    // (4000 B), put pieces (64 KiB), get answer pieces (256 KiB); shm offload sizes.
    const std::size_t sizes[] = {0, 1, 8, 64, 1024, 1025, 3999, 4000, 4097, 65536, 65537, 262145, 1 << 20};
    for (std::size_t sz : sizes) {
        TestWin w(GetParam(), 2 * sz + 8);
        const int right = (me + 1) % n, left = (me + n - 1) % n;
        std::vector<unsigned char> src(sz), back(sz, 0);
        for (std::size_t i = 0; i < sz; ++i) src[i] = static_cast<unsigned char>(me * 31 + i * 7 + 1);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src.data(), int(sz), MPI_BYTE, right, MPI_Aint(sz), int(sz), MPI_BYTE, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(back.data(), int(sz), MPI_BYTE, right, MPI_Aint(sz), int(sz), MPI_BYTE, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_local(right, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        EXPECT_EQ(src, back) << "size " << sz;
        MPI_Barrier(MPI_COMM_WORLD);
        for (std::size_t i = 0; i < sz; ++i) {
            ASSERT_EQ(w.base[i], 0) << "bytes before the displacement were written, size " << sz;
            ASSERT_EQ(w.base[sz + i], static_cast<unsigned char>(left * 31 + i * 7 + 1)) << "size " << sz << " i " << i;
        }
        for (std::size_t i = 2 * sz; i < 2 * sz + 8; ++i) {
            ASSERT_EQ(w.base[i], 0);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST_P(Passive, DispUnitScalesDisplacement) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 16 * sizeof(double), sizeof(double));
    double v = 100.0 + me;
    const int right = (me + 1) % n;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, right, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_DOUBLE, right, 5, 1, MPI_DOUBLE, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(*w.at<double>(5), 100.0 + (me + n - 1) % n);
    EXPECT_EQ(*w.at<double>(4), 0.0);
    EXPECT_EQ(*w.at<double>(6), 0.0);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, PairTypePutKeepsTargetPadding) {
    // MPI_DOUBLE_INT has 4 bytes of padding per element that MPI does not let us write.
    const int me = world_rank(), n = world_size();
    struct DI {
        double d;
        int i;
    };
    TestWin w(GetParam(), 4 * sizeof(DI));
    std::memset(w.base, 0x5A, w.bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    DI src[4];
    std::memset(src, 0, sizeof src);
    for (int k = 0; k < 4; ++k) src[k] = {1.5 * k + me, k + 10 * me};
    const int right = (me + 1) % n;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src, 4, MPI_DOUBLE_INT, right, 0, 4, MPI_DOUBLE_INT, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    const int left = (me + n - 1) % n;
    for (int k = 0; k < 4; ++k) {
        DI got;
        std::memcpy(&got, w.base + k * sizeof(DI), sizeof got);
        EXPECT_EQ(got.d, 1.5 * k + left);
        EXPECT_EQ(got.i, k + 10 * left);
        for (std::size_t b = 12; b < sizeof(DI); ++b) EXPECT_EQ(w.base[k * sizeof(DI) + b], 0x5A) << "padding written";
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, ZeroSizeWindowAndZeroCountOps) {
    TestWin w(GetParam(), 0);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    EXPECT_EQ(MPI_SUCCESS, FRMA_Put(nullptr, 0, MPI_INT, 0, 0, 0, MPI_INT, w.win));
    EXPECT_EQ(MPI_SUCCESS, FRMA_Get(nullptr, 0, MPI_INT, 0, 0, 0, MPI_INT, w.win));
    EXPECT_EQ(MPI_SUCCESS, FRMA_Accumulate(nullptr, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_SUM, w.win));
    int v = 1;
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, w.win));
    EXPECT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
}

TEST_P(Passive, SingleRankWindowOnSelf) {
    TestWin w(GetParam(), 64, 1, MPI_COMM_SELF);
    long v = 42, got = 0, one = 1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_LONG, 0, 8, 1, MPI_LONG, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
    EXPECT_EQ(*w.at<long>(1), 42);  // a lock on self is granted: load/store allowed
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &got, MPI_LONG, 0, 8, MPI_SUM, w.win));
    long seen = 0, seen2 = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(nullptr, &seen, MPI_LONG, 0, 8, MPI_NO_OP, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    EXPECT_EQ(got, 42);
    EXPECT_EQ(seen, 43);
    EXPECT_EQ(*w.at<long>(1), 43);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));  // the lock_all fast path too
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(nullptr, &seen2, MPI_LONG, 0, 8, MPI_NO_OP, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    EXPECT_EQ(seen2, 43);
}

TEST_P(Passive, AttributesDescribeTheWindow) {
    TestWin w(GetParam(), 96, 4);
    void* base = nullptr;
    MPI_Aint* size = nullptr;
    int *du = nullptr, *flavor = nullptr, *model = nullptr, flag = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, MPI_WIN_BASE, &base, &flag));
    EXPECT_TRUE(flag);
    EXPECT_EQ(base, w.base);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, MPI_WIN_SIZE, &size, &flag));
    EXPECT_EQ(*size, 96);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, MPI_WIN_DISP_UNIT, &du, &flag));
    EXPECT_EQ(*du, 4);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    EXPECT_EQ(*flavor, GetParam() == Flavor::allocate ? MPI_WIN_FLAVOR_ALLOCATE : MPI_WIN_FLAVOR_CREATE);
    // User memory of other processes is reached by cross-memory attach: no CPU atomics
    // (with one rank the only part is the caller's own, which is mapped).
    if (GetParam() == Flavor::create && world_size() > 1 && !fastrma::detail::window_of(w.win)->uses_am()) {
        EXPECT_FALSE(fastrma::detail::window_of(w.win)->cpu_atomics());
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, MPI_WIN_MODEL, &model, &flag));
    EXPECT_EQ(*model, MPI_WIN_UNIFIED);
    MPI_Group g;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_group(w.win, &g));
    int gs = 0;
    MPI_Group_size(g, &gs);
    EXPECT_EQ(gs, world_size());
    MPI_Group_free(&g);
}

// ---- locks ----------------------------------------------------------------------------

TEST_P(Passive, ExclusiveLocksLoseNoUpdate) {
    // Read-modify-write with get, flush, put under an exclusive lock: only mutual
    // exclusion makes the final count right.
    const int n = world_size();
    TestWin w(GetParam(), 64);
    const int iters = 200;
    for (int it = 0; it < iters; ++it) {
        for (int target = 0; target < n; target += std::max(1, n - 1)) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, w.win));
            std::int64_t v = 0;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(target, w.win));
            ++v;
            if (it % 7 == 0) std::this_thread::yield();  // widen the race window
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(target, w.win));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const int me = world_rank();
    if (me == 0 || me == n - 1) {
        EXPECT_EQ(*w.at<std::int64_t>(0), std::int64_t(iters) * n);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, ExclusiveExcludesLockAll) {
    // Ranks alternate between lock_all RMW on a word at rank 0 ... under lock_all the
    // updates would race, so here lock_all holders only read, and exclusive holders write
    // two words that must always be seen equal by lock_all readers.
    const int me = world_rank();
    TestWin w(GetParam(), 64);
    for (int it = 0; it < 100; ++it) {
        if (me % 2 == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
            std::int64_t v[2];
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(v, 2, MPI_INT64_T, 0, 0, 2, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
            ASSERT_EQ(v[0], v[1]);
            std::int64_t a = v[0] + 1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&a, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
            std::this_thread::yield();
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&a, 1, MPI_INT64_T, 0, 8, 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
        } else {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            std::int64_t v[2];
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(v, 2, MPI_INT64_T, 0, 0, 2, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
            ASSERT_EQ(v[0], v[1]) << "lock_all overlapped an exclusive lock";
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, ExclusiveSharedAndLockAllExcludeUnderThreads) {
    // Every rank's part holds two counters A (offset 0) and B (offset 8). Exclusive
    // holders read both (get + flush), then write A + 1, flush, and write B + 1 50 us
    // later: a non-atomic read-modify-write in which A != B for a while. Shared holders
    // read A, flush, and read B 20 us later; lock_all holders read every pair; all must
    // find A == B. And no increment may be lost: A and B end equal to the number of
    // exclusive epochs every rank ran on that target, exactly.
    // The last rank runs one thread that alternates lock_all reads and exclusive updates
    // of every target (a process may not hold lock_all beside a lock); the others run two
    // threads each, thread j taking the targets t with t % 2 == j (a process may not lock
    // one target twice) with exclusive updates and shared reads in turn. 1 rank: skipped.
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs two ranks";
    TestWin w(GetParam(), 64);
    constexpr int kThreads = 2, kRounds = 100;
    std::vector<std::atomic<std::int64_t>> mine(static_cast<std::size_t>(n));  // my exclusive epochs per target
    std::atomic<int> errors{0}, torn{0};
    std::string first_error;
    std::mutex first_mu;
    auto fail = [&](int rc, const char* what) {
        if (rc == MPI_SUCCESS) return false;
        std::lock_guard lk(first_mu);
        if (errors++ == 0) first_error = std::string(what) + ": " + FRMA_Last_error_message();
        return true;
    };
    auto hold = [](int us) {  // stay inside the epoch a while (on a core or off it)
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
    };
    auto update = [&](int t) {  // one exclusive read-modify-write of t's pair
        if (fail(FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w.win), "lock exclusive")) return;
        std::int64_t v[2] = {-1, -1};
        fail(FRMA_Get(v, 2, MPI_INT64_T, t, 0, 2, MPI_INT64_T, w.win), "get");
        fail(FRMA_Win_flush(t, w.win), "flush");
        if (v[0] != v[1]) ++torn;
        const std::int64_t a = v[0] + 1, b = v[1] + 1;
        fail(FRMA_Put(&a, 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, w.win), "put A");
        fail(FRMA_Win_flush(t, w.win), "flush");
        hold(50);  // widen the window in which A != B
        fail(FRMA_Put(&b, 1, MPI_INT64_T, t, 8, 1, MPI_INT64_T, w.win), "put B");
        fail(FRMA_Win_unlock(t, w.win), "unlock");
        ++mine[std::size_t(t)];
    };
    auto read_shared = [&](int t) {
        if (fail(FRMA_Win_lock(MPI_LOCK_SHARED, t, 0, w.win), "lock shared")) return;
        std::int64_t v[2] = {-1, -1};
        fail(FRMA_Get(&v[0], 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, w.win), "get A");
        fail(FRMA_Win_flush(t, w.win), "flush");
        hold(20);  // an exclusive holder that got in now would be seen
        fail(FRMA_Get(&v[1], 1, MPI_INT64_T, t, 8, 1, MPI_INT64_T, w.win), "get B");
        fail(FRMA_Win_unlock(t, w.win), "unlock");
        if (v[0] != v[1]) ++torn;
    };
    if (me == n - 1) {
        for (int round = 0; round < kRounds; ++round) {
            if (!fail(FRMA_Win_lock_all(0, w.win), "lock_all")) {
                std::vector<std::int64_t> v(2 * std::size_t(n), -1);
                for (int t = 0; t < n; ++t)
                    fail(FRMA_Get(&v[2 * std::size_t(t)], 2, MPI_INT64_T, t, 0, 2, MPI_INT64_T, w.win), "get");
                fail(FRMA_Win_flush_all(w.win), "flush_all");
                hold(20);
                fail(FRMA_Win_unlock_all(w.win), "unlock_all");
                for (int t = 0; t < n; ++t) torn += v[2 * std::size_t(t)] != v[2 * std::size_t(t) + 1];
            }
            update(round % n);
        }
    } else {
        std::vector<std::thread> ts;
        for (int j = 0; j < kThreads; ++j)
            ts.emplace_back([&, j] {
                for (int round = 0; round < kRounds; ++round)
                    for (int t = j; t < n; t += kThreads) {
                        update(t);
                        read_shared(t);
                    }
            });
        for (auto& t : ts) t.join();
    }
    EXPECT_EQ(errors.load(), 0) << first_error;
    EXPECT_EQ(torn.load(), 0) << "a reader or an exclusive holder saw a pair half updated: a lock did not exclude";
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n)), total(static_cast<std::size_t>(n));
    for (int t = 0; t < n; ++t) counts[std::size_t(t)] = mine[std::size_t(t)].load();
    MPI_Allreduce(counts.data(), total.data(), n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    // (A lost update leaves A below the count of exclusive epochs that ran on it.)
    EXPECT_EQ(*w.at<std::int64_t>(0), total[std::size_t(me)]) << "updates lost at rank " << me;
    EXPECT_EQ(*w.at<std::int64_t>(1), total[std::size_t(me)]) << "updates lost at rank " << me;
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, FourThreadsLockTargetsCollideCleanlyAndNeverBesideALockAll) {
    // Four threads per rank, thread j locking target (me + j) % n exclusively: with fewer
    // than four ranks two threads of a process share a target, and a lock of a target that
    // a sibling holds (or is locking or unlocking) must fail with MPI_ERR_RMA_SYNC and
    // change nothing. Each epoch that got its lock is a non-atomic read-modify-write of the
    // target's counter (get, flush_local or flush, put, flush, unlock), so a lock that let
    // two holders in (two processes, or two threads of one) loses an increment: the
    // counters must end at the number of epochs that succeeded, exactly. The progress
    // thread runs meanwhile (by default). Then thread 0 alternates lock_all epochs (a
    // fetch_and_op on counter 2) with the others' locks: every call succeeds or fails with
    // MPI_ERR_RMA_SYNC, and a lock_all never holds beside a lock of its own process.
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 64);
    constexpr int kThreads = 4, kRounds = 300;
    std::vector<std::atomic<std::int64_t>> mine(static_cast<std::size_t>(n));  // my successful epochs per target
    std::atomic<std::int64_t> fops{0};  // my fetch_and_ops under lock_all (to rank (me + 1) % n)
    std::atomic<int> errors{0}, collisions{0}, overlaps{0};
    std::atomic<int> locks_in{0}, all_in{0};
    std::string first_error;
    std::mutex first_mu;
    auto bad = [&](int rc, const char* what) {  // anything but success
        if (rc == MPI_SUCCESS) return false;
        std::lock_guard lk(first_mu);
        if (errors++ == 0) first_error = std::string(what) + ": " + FRMA_Last_error_message();
        return true;
    };
    auto epoch = [&](int t, int round, bool check_all) {  // one exclusive read-modify-write of t's counter
        const int rc = FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w.win);
        if (rc == MPI_ERR_RMA_SYNC) {  // a sibling holds t, or (check_all) a lock_all is open
            ++collisions;
            return;
        }
        if (bad(rc, "lock")) return;
        ++locks_in;
        if (check_all && all_in.load()) ++overlaps;
        std::int64_t v = -1;
        bad(FRMA_Get(&v, 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, w.win), "get");
        bad(round % 2 ? FRMA_Win_flush_local(t, w.win) : FRMA_Win_flush(t, w.win), "flush");
        const std::int64_t next = v + 1;
        if (round % 3 == 0) std::this_thread::yield();  // a sibling may try t meanwhile
        bad(FRMA_Put(&next, 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, w.win), "put");
        bad(FRMA_Win_flush(t, w.win), "flush");
        --locks_in;
        if (!bad(FRMA_Win_unlock(t, w.win), "unlock")) ++mine[std::size_t(t)];
    };
    for (int phase = 0; phase < 2; ++phase) {
        std::vector<std::thread> ts;
        for (int j = 0; j < kThreads; ++j)
            ts.emplace_back([&, j] {
                const int t = (me + j) % n;
                for (int round = 0; round < kRounds; ++round) {
                    if (phase == 0 || j != 0) {
                        epoch(t, round, phase == 1);
                        continue;
                    }
                    const int rc = FRMA_Win_lock_all(0, w.win);
                    if (rc == MPI_ERR_RMA_SYNC) {  // a sibling's lock is open
                        ++collisions;
                        continue;
                    }
                    if (bad(rc, "lock_all")) continue;
                    all_in = 1;
                    if (locks_in.load()) ++overlaps;
                    const std::int64_t one = 1;
                    std::int64_t old = -1;
                    const int fr = FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, (me + 1) % n, 8, MPI_SUM, w.win);
                    bad(FRMA_Win_flush_all(w.win), "flush_all");
                    all_in = 0;
                    if (!bad(FRMA_Win_unlock_all(w.win), "unlock_all") && !bad(fr, "fetch_and_op")) ++fops;
                }
            });
        for (auto& t : ts) t.join();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    EXPECT_EQ(errors.load(), 0) << first_error;
    EXPECT_EQ(overlaps.load(), 0) << "a lock_all held beside a lock of the same process";
    if (n < kThreads) {
        EXPECT_GT(mine[std::size_t(me)].load(), 0);  // (collisions are likely, not certain)
    }
    // Nothing is locked now: the lock epochs are over, and other kinds of epoch may open.
    std::int64_t x = 0;
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_unlock(me, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush(me, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush_all(w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&x, 1, MPI_INT64_T, me, 0, 1, MPI_INT64_T, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_unlock_all(w.win));
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n)), total(static_cast<std::size_t>(n));
    for (int t = 0; t < n; ++t) counts[std::size_t(t)] = mine[std::size_t(t)].load();
    MPI_Allreduce(counts.data(), total.data(), n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    std::int64_t fops_in = 0, fops_mine = fops.load();
    const int from = (me + n - 1) % n;
    MPI_Sendrecv(&fops_mine, 1, MPI_INT64_T, (me + 1) % n, 31, &fops_in, 1, MPI_INT64_T, from, 31, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
    EXPECT_EQ(*w.at<std::int64_t>(0), total[std::size_t(me)]) << "updates lost at rank " << me;
    EXPECT_EQ(*w.at<std::int64_t>(1), fops_in) << "fetch_and_ops lost at rank " << me;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
    // And a lock epoch after the fences works again.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, me, 0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock_all(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_fence(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&x, 1, MPI_INT64_T, me, 0, 1, MPI_INT64_T, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(me, w.win));
    EXPECT_EQ(x, total[std::size_t(me)]);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, SharedLocksShare) {
    // Every rank takes a shared lock on rank 0 and forces it to be granted (get + flush),
    // then all meet in a barrier while holding it: only possible if the locks coexist.
    TestWin w(GetParam(), 64);
    int v = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, LocksOnSeveralTargetsAtOnce) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 8 * std::size_t(n));
    for (int t = 0; t < n; ++t) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, t, 0, w.win));
    }
    for (int t = 0; t < n; ++t) {
        std::int64_t v = 1000 * me + t;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, 8 * me, 1, MPI_INT64_T, w.win));
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_local_all(w.win));
    for (int t = n - 1; t >= 0; --t) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int o = 0; o < n; ++o) EXPECT_EQ(*w.at<std::int64_t>(std::size_t(o)), 1000 * o + me);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, NothingAppliesUnderAnUngrantedLock) {
    // The holder takes an exclusive lock on itself; every other rank then locks the holder
    // (exclusive, then shared), posts a put, a get and a fetch_and_op, and tells the holder.
    // None of it may touch the holder's memory while it holds the lock (over am the
    // target keeps them behind the lock request; on shared memory the origin queues them).
    // Then the holder lets go and every origin's ops apply, one exclusive holder at a time.
    // Holder 0 is the locks' master (the target takes both words); holder n-1 has the
    // master elsewhere (at rank 0: its count taken there first; at rank 1..n-2: the
    // atomic protocol).
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a second rank";
    TestWin w(GetParam(), 64 + 8 * std::size_t(n), 8);
    for (int lock_type : {MPI_LOCK_EXCLUSIVE, MPI_LOCK_SHARED}) {
        for (int holder : {0, n - 1}) {
            SCOPED_TRACE(::testing::Message()
                         << "holder " << holder << (lock_type == MPI_LOCK_SHARED ? " shared" : " exclusive"));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, w.win));
            std::memset(w.at<std::int64_t>(0), 0, 64 + 8 * std::size_t(n));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(me, w.win));
            MPI_Barrier(MPI_COMM_WORLD);
            const std::uint64_t parked0 = fastrma::detail::stat_total(fastrma::detail::Stat::locks_parked);
            if (me == holder) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, w.win));
                *w.at<std::int64_t>(0) = 100;  // the counter the origins fetch-add to
                for (int r = 0; r < n; ++r)
                    if (r != me) MPI_Send(nullptr, 0, MPI_BYTE, r, 21, MPI_COMM_WORLD);
                for (int r = 0; r < n; ++r)
                    if (r != me) MPI_Recv(nullptr, 0, MPI_BYTE, r, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time to break in
                // Over am the requests park here once they arrive (they may still be on their way).
                if (fastrma::detail::window_of(w.win)->uses_am() && !fastrma::detail::window_of(w.win)->uses_network())
                    for (int i = 0;
                         i < 200 && fastrma::detail::stat_total(fastrma::detail::Stat::locks_parked) == parked0; ++i)
                        std::this_thread::sleep_for(std::chrono::milliseconds(10));
                EXPECT_EQ(*w.at<std::int64_t>(0), 100) << "a fetch_and_op applied under my exclusive lock";
                for (int r = 0; r < n; ++r)
                    EXPECT_EQ(*w.at<std::int64_t>(8 + std::size_t(r)), 0)
                        << "rank " << r << "'s put applied under my exclusive lock";
                *w.at<std::int64_t>(1) = 55;  // what the origins' gets must read
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(me, w.win));
            } else {
                MPI_Recv(nullptr, 0, MPI_BYTE, holder, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(lock_type, holder, 0, w.win));
                const std::int64_t mine = 1000 + me, one = 1;
                std::int64_t got = -1, old = -1;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&mine, 1, MPI_INT64_T, holder, 8 + me, 1, MPI_INT64_T, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, holder, 1, 1, MPI_INT64_T, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, holder, 0, MPI_SUM, w.win));
                MPI_Send(nullptr, 0, MPI_BYTE, holder, 22, MPI_COMM_WORLD);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(holder, w.win));
                EXPECT_EQ(got, 55) << "the get ran before the holder let go";
                EXPECT_GE(old, 100);
                EXPECT_LT(old, 100 + n - 1);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (me == holder) {
                // Over am rank 0's requests (its own master word, or the holder's) wait here.
                if (fastrma::detail::window_of(w.win)->uses_am() &&
                    !fastrma::detail::window_of(w.win)->uses_network()) {
                    EXPECT_GT(fastrma::detail::stat_total(fastrma::detail::Stat::locks_parked), parked0);
                }
                EXPECT_EQ(*w.at<std::int64_t>(0), 100 + n - 1);
                for (int r = 0; r < n; ++r) {
                    if (r != me) {
                        EXPECT_EQ(*w.at<std::int64_t>(8 + std::size_t(r)), 1000 + r);
                    }
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

TEST_P(Passive, NocheckLockAndSync) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 64);
    const int right = (me + 1) % n;
    int v = 7 + me;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, right, MPI_MODE_NOCHECK, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(MPI_MODE_NOCHECK, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(w.win));
    EXPECT_EQ(*w.at<int>(0), 7 + (me + n - 1) % n);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- accumulates --------------------------------------------------------------------

TEST_P(Passive, AccumulateIsAtomicAcrossRanksAndThreads) {
    // Every rank, 4 threads each, hammers element 0 of rank 0 with fetch_and_op SUM (int64
    // and double: native or locked path) and accumulate SUM on long double (always locked).
    const int n = world_size();
    TestWin w(GetParam(), 64);
    const int threads = 4, iters = 2000;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    std::vector<std::thread> ts;
    std::atomic<int> errors{0};
    // Fetched values are the implementation's until the epoch completes them (over am they
    // are written when the answer arrives): they live until the unlock_all.
    std::vector<std::int64_t> olds(std::size_t(threads * iters), -1);
    std::vector<double> dolds(std::size_t(threads * iters));
    const std::int64_t one = 1;
    const double half = 0.5;
    const long double ld = 1.0L;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (int i = 0; i < iters; ++i) {
                const std::size_t k = std::size_t(t * iters + i);
                errors += FRMA_Fetch_and_op(&one, &olds[k], MPI_INT64_T, 0, 0, MPI_SUM, w.win) != MPI_SUCCESS;
                errors += FRMA_Fetch_and_op(&half, &dolds[k], MPI_DOUBLE, 0, 8, MPI_SUM, w.win) != MPI_SUCCESS;
                if (i % 4 == 0)
                    errors += FRMA_Accumulate(&ld, 1, MPI_LONG_DOUBLE, 0, 32, 1, MPI_LONG_DOUBLE, MPI_SUM, w.win) !=
                              MPI_SUCCESS;
            }
        });
    for (auto& t : ts) t.join();
    ASSERT_EQ(errors.load(), 0) << FRMA_Last_error_message();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    // Every fetch_and_op saw a distinct value: the old values of all ranks are 0..total-1.
    const std::size_t total = std::size_t(n) * olds.size();
    std::vector<std::int64_t> all(world_rank() == 0 ? total : 0);
    MPI_Gather(olds.data(), int(olds.size()), MPI_INT64_T, all.data(), int(olds.size()), MPI_INT64_T, 0,
               MPI_COMM_WORLD);
    if (world_rank() == 0) {
        EXPECT_EQ(*w.at<std::int64_t>(0), std::int64_t(n) * threads * iters);
        EXPECT_EQ(*w.at<double>(1), 0.5 * n * threads * iters);
        EXPECT_EQ(*reinterpret_cast<long double*>(w.base + 32), (long double)(n * threads * iters / 4));
        std::sort(all.begin(), all.end());
        for (std::size_t k = 0; k < total; ++k)
            ASSERT_EQ(all[k], std::int64_t(k)) << "a fetched value was lost or duplicated";
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

template <class T>
void acc_case(TestWin& w, MPI_Datatype type, MPI_Op op, T init, T operand, T expect_after_all) {
    // Each rank applies `operand` once to element 0 of rank 0 (initialised to init);
    // expect_after_all is the result after every rank did so.
    const int me = world_rank();
    if (me == 0) std::memcpy(w.base, &init, sizeof(T));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&operand, 1, type, 0, 0, 1, type, op, w.win)) << FRMA_Last_error_message();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        T got;
        std::memcpy(&got, w.base, sizeof(T));
        EXPECT_TRUE(std::memcmp(&got, &expect_after_all, sizeof(T)) == 0 || got == expect_after_all);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, AccumulateOpsOnRepresentativeTypes) {
    const int n = world_size();
    TestWin w(GetParam(), 64);
    acc_case<std::int32_t>(w, MPI_INT32_T, MPI_SUM, 5, 3, 5 + 3 * n);
    acc_case<double>(w, MPI_DOUBLE, MPI_PROD, 1.0, 2.0, double(1 << n));
    acc_case<float>(w, MPI_FLOAT, MPI_MAX, -100.f, 2.5f, 2.5f);
    acc_case<std::int8_t>(w, MPI_INT8_T, MPI_MIN, 10, -3, -3);
    acc_case<std::uint64_t>(w, MPI_UINT64_T, MPI_BXOR, 0xF0F0ull, 0xFFull, n % 2 ? 0xF00Full : 0xF0F0ull);
    acc_case<std::uint16_t>(w, MPI_UNSIGNED_SHORT, MPI_BOR, 1, 6, 7);
    acc_case<int>(w, MPI_INT, MPI_LAND, 5, 0, 0);
    acc_case<long double>(w, MPI_LONG_DOUBLE, MPI_REPLACE, 1.0L, 9.0L, 9.0L);
    acc_case<std::complex<double>>(w, MPI_C_DOUBLE_COMPLEX, MPI_SUM, {1, 1}, {0.5, -1}, {1 + 0.5 * n, 1.0 - n});
}

TEST_P(Passive, GetAccumulateFetchAndOpCompareAndSwap) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 256);
    // MAXLOC on MPI_DOUBLE_INT: rank r offers (r % 2, r): the winner is value 1 (or 0 with
    // one rank), lowest index among ties.
    struct DI {
        double d;
        int i;
    };
    if (me == 0) {
        DI init{-1.0, 99};
        std::memcpy(w.base + 64, &init, sizeof init);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    DI mine{double(me % 2), me}, old{};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(&mine, 1, MPI_DOUBLE_INT, &old, 1, MPI_DOUBLE_INT, 0, 64, 1,
                                               MPI_DOUBLE_INT, MPI_MAXLOC, w.win));
    // NO_OP get_accumulate reads atomically; origin is ignored.
    std::int64_t cur = -1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(nullptr, 0, MPI_INT64_T, &cur, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T,
                                               MPI_NO_OP, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
    EXPECT_GE(cur, 0);
    // fetch_and_op REPLACE as an atomic swap on word 16: all old values + final are distinct.
    std::int64_t token = 1000 + me, prev = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&token, &prev, MPI_INT64_T, 0, 128, MPI_REPLACE, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
    // compare_and_swap as a ticket: exactly one rank wins 0 -> 1 + me.
    std::int64_t cmp = 0, desired = 1 + me, got = -1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Compare_and_swap(&desired, &cmp, &got, MPI_INT64_T, 0, 136, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    int won = got == 0, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(winners, 1);
    std::int64_t prevs[64] = {};
    MPI_Gather(&prev, 1, MPI_INT64_T, prevs, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        DI fin;
        std::memcpy(&fin, w.base + 64, sizeof fin);
        EXPECT_EQ(fin.d, n > 1 ? 1.0 : 0.0);
        EXPECT_EQ(fin.i, n > 1 ? 1 : 0);
        std::vector<std::int64_t> seen(prevs, prevs + n);
        seen.push_back(*w.at<std::int64_t>(16));
        std::sort(seen.begin(), seen.end());
        std::vector<std::int64_t> want{0};
        for (int r = 0; r < n; ++r) want.push_back(1000 + r);
        EXPECT_EQ(seen, want) << "a swap was lost or duplicated";
        EXPECT_GE(*w.at<std::int64_t>(17), 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- threads --------------------------------------------------------------------------

TEST_P(Passive, FourThreadsPostToOneWindow) {
    const int me = world_rank(), n = world_size();
    const int threads = 4, per = 256;
    TestWin w(GetParam(), std::size_t(n) * threads * per * sizeof(std::int64_t));
    // Half the rounds under lock_all, half under per-target shared locks.
    for (int mode = 0; mode < 2; ++mode) {
        if (mode == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        } else
            for (int t = 0; t < n; ++t) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, t, 0, w.win));
            }
        std::vector<std::thread> ts;
        std::atomic<int> errors{0};
        for (int th = 0; th < threads; ++th)
            ts.emplace_back([&, th] {
                for (int i = 0; i < per; ++i) {
                    std::int64_t v = (std::int64_t(mode) << 40) | (std::int64_t(me) << 20) | (th << 12) | i;
                    int target = (i + th) % n;
                    MPI_Aint disp = MPI_Aint(((me * threads + th) * per + i) * sizeof(std::int64_t));
                    errors += FRMA_Put(&v, 1, MPI_INT64_T, target, disp, 1, MPI_INT64_T, w.win) != MPI_SUCCESS;
                    if (i % 32 == 0) errors += FRMA_Win_flush(target, w.win) != MPI_SUCCESS;
                }
            });
        for (auto& t : ts) t.join();
        ASSERT_EQ(errors.load(), 0) << FRMA_Last_error_message();
        if (mode == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        } else
            for (int t = 0; t < n; ++t) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
            }
        MPI_Barrier(MPI_COMM_WORLD);
        for (int o = 0; o < n; ++o)
            for (int th = 0; th < threads; ++th)
                for (int i = 0; i < per; ++i) {
                    if ((i + th) % n != me) continue;
                    std::int64_t want = (std::int64_t(mode) << 40) | (std::int64_t(o) << 20) | (th << 12) | i;
                    ASSERT_EQ(*w.at<std::int64_t>(std::size_t((o * threads + th) * per + i)), want);
                }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST_P(Passive, AFlushCompletesOtherThreadsOpsAndAccumulatesKeepTheirOrderAcrossThreads) {
    // Small transfers to a part not mapped here wait in a lane per thread (cma_batch.hpp).
    // Two threads take turns, synchronized through an atomic: one queues a get, the other
    // flushes, and the flush completes the first thread's get (MPI: a flush completes the
    // process's operations, whichever thread issued them). Then the first queues an
    // accumulate (REPLACE) and the second a get_accumulate (REPLACE) of the same slot: the
    // second applies after the first (it was issued after it), so its fetched value is the
    // first one's and the slot ends with the second one's. The threads swap roles every
    // round, so whichever lane numbers they got, half the rounds have the later accumulate
    // in the lower lane.
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    constexpr int kRounds = 64;
    TestWin w(GetParam(), 1024 * sizeof(std::int64_t));
    auto* mem = w.at<std::int64_t>(0);
    for (int i = 0; i < 1024; ++i) mem[i] = 1000000 * me + i;
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    std::atomic<int> turn{0}, errors{0};
    std::vector<std::int64_t> got(kRounds, -1), old(kRounds, -1), first_val(kRounds), second_val(kRounds);
    std::vector<int> got_ok(kRounds, 0);
    auto wait_for = [&](int v) {
        while (turn.load(std::memory_order_acquire) < v) std::this_thread::yield();
    };
    auto body = [&](int t) {
        for (int r = 0; r < kRounds; ++r) {
            const int phase = 4 * r;
            const MPI_Aint slot = MPI_Aint(8 + r) * 8, gslot = MPI_Aint(300 + r) * 8;
            if (t == r % 2) {
                wait_for(phase);
                errors +=
                    FRMA_Get(&got[std::size_t(r)], 1, MPI_INT64_T, right, gslot, 1, MPI_INT64_T, w.win) != MPI_SUCCESS;
                turn.store(phase + 1, std::memory_order_release);
                wait_for(phase + 2);  // the other thread's flush has returned
                got_ok[std::size_t(r)] = got[std::size_t(r)] == 1000000 * right + 300 + r;
                first_val[std::size_t(r)] = 100000 + r;
                errors += FRMA_Accumulate(&first_val[std::size_t(r)], 1, MPI_INT64_T, right, slot, 1, MPI_INT64_T,
                                          MPI_REPLACE, w.win) != MPI_SUCCESS;
                turn.store(phase + 3, std::memory_order_release);
                wait_for(phase + 4);
            } else {
                wait_for(phase + 1);
                errors += FRMA_Win_flush(right, w.win) != MPI_SUCCESS;
                turn.store(phase + 2, std::memory_order_release);
                wait_for(phase + 3);
                second_val[std::size_t(r)] = 200000 + r;
                errors +=
                    FRMA_Get_accumulate(&second_val[std::size_t(r)], 1, MPI_INT64_T, &old[std::size_t(r)], 1,
                                        MPI_INT64_T, right, slot, 1, MPI_INT64_T, MPI_REPLACE, w.win) != MPI_SUCCESS;
                if (r % 4 == 3) errors += FRMA_Win_flush(right, w.win) != MPI_SUCCESS;  // else queued on
                turn.store(phase + 4, std::memory_order_release);
            }
        }
    };
    std::thread a(body, 0), b(body, 1);
    a.join();
    b.join();
    ASSERT_EQ(errors.load(), 0) << FRMA_Last_error_message();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    for (int r = 0; r < kRounds; ++r) {
        EXPECT_TRUE(got_ok[std::size_t(r)]) << "round " << r << ": the other thread's flush did not complete the get";
        EXPECT_EQ(old[std::size_t(r)], 100000 + r) << "round " << r << ": the later accumulate did not see the earlier";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);
    for (int r = 0; r < kRounds; ++r)
        EXPECT_EQ(mem[8 + r], 200000 + r) << "round " << r << ": accumulates from " << left << " applied out of order";
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- bad input ------------------------------------------------------------------------

TEST_P(Passive, BadInputGetsItsErrorClassAndLeavesTheWindowUsable) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 64);
    int v = 5;
    // Op outside any epoch.
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, w.win));
    EXPECT_NE(std::string(FRMA_Last_error_message()).find("FRMA_Put"), std::string::npos);
    // Unlock without lock, flush without epoch, unlock_all without lock_all.
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_unlock(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_unlock_all(w.win));
    // Bad lock type / rank / assert.
    EXPECT_EQ(MPI_ERR_LOCKTYPE, FRMA_Win_lock(12345, 0, 0, w.win));
    EXPECT_EQ(MPI_ERR_RANK, FRMA_Win_lock(MPI_LOCK_SHARED, n, 0, w.win));
    EXPECT_EQ(MPI_ERR_RANK, FRMA_Win_lock(MPI_LOCK_SHARED, -5, 0, w.win));
    EXPECT_EQ(MPI_ERR_ASSERT, FRMA_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOPRECEDE, w.win));

    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win)) << "double lock";
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock_all(0, w.win)) << "lock_all inside a lock epoch";
    if (n > 1) {
        EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&v, 1, MPI_INT, 1, 0, 1, MPI_INT, w.win)) << "rank 1 not locked";
    }
    // Out of range: past the end, negative displacement, overflow; nothing written.
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 1, MPI_INT, 0, 61, 1, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 17, MPI_INT, 0, 0, 17, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_DISP, FRMA_Put(&v, 1, MPI_INT, 0, -4, 1, MPI_INT, w.win));  // an invalid argument
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 1, MPI_INT, 0, MPI_Aint(1) << 62, 1, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Accumulate(&v, 1, MPI_INT, 0, 64, 1, MPI_INT, MPI_SUM, w.win));
    // Bad rank, count, type, op.
    EXPECT_EQ(MPI_ERR_RANK, FRMA_Put(&v, 1, MPI_INT, n + 3, 0, 1, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_COUNT, FRMA_Put(&v, -1, MPI_INT, 0, 0, -1, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_TYPE, FRMA_Put(&v, 1, MPI_DATATYPE_NULL, 0, 0, 1, MPI_INT, w.win));
    EXPECT_EQ(MPI_ERR_TYPE, FRMA_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_FLOAT, w.win)) << "signature mismatch";
    EXPECT_EQ(MPI_ERR_TYPE, FRMA_Accumulate(&v, 1, MPI_FLOAT, 0, 0, 1, MPI_FLOAT, MPI_BAND, w.win)) << "BAND on float";
    EXPECT_EQ(MPI_ERR_OP, FRMA_Accumulate(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_OP_NULL, w.win));
    double d = 1, dres;
    EXPECT_EQ(MPI_ERR_TYPE, FRMA_Compare_and_swap(&d, &d, &dres, MPI_DOUBLE, 0, 0, w.win)) << "CAS on double";
    MPI_Op user_op;
    MPI_Op_create([](void*, void*, int*, MPI_Datatype*) {}, 1, &user_op);
    EXPECT_EQ(MPI_ERR_OP, FRMA_Accumulate(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, user_op, w.win));
    MPI_Op_free(&user_op);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        for (std::size_t i = 0; i < 64; ++i) {
            ASSERT_EQ(w.base[i], 0) << "a rejected op wrote byte " << i;
        }
    }
    if (GetParam() != Flavor::allocate) {
        for (std::size_t i = 64; i < 128; ++i) {
            ASSERT_EQ(w.base[i], 0xEE) << "guard byte " << i;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Still usable.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(*w.at<int>(0), 5 * n);
    }
    // Invalid handles.
    FRMA_Win bad = FRMA_WIN_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    EXPECT_EQ(MPI_ERR_WIN, FRMA_Win_lock_all(0, bad));
    void* nb = nullptr;
    EXPECT_EQ(MPI_ERR_SIZE, FRMA_Win_allocate(-1, 1, MPI_INFO_NULL, MPI_COMM_SELF, &nb, &bad));
    EXPECT_EQ(MPI_ERR_DISP, FRMA_Win_allocate(8, 0, MPI_INFO_NULL, MPI_COMM_SELF, &nb, &bad));
    EXPECT_EQ(bad, FRMA_WIN_NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    // Free with an open epoch is refused, then works.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_free(&w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
}

int g_handler_calls = 0;
int g_handler_code = 0;
void count_errors(FRMA_Win*, int* code, ...) {
    ++g_handler_calls;
    g_handler_code = *code;
}

// Under a granted lock_all the calls take the window's fast paths (window_fast.hpp), which
// check op and type with the type's op mask: every verdict the general path gives must come
// out the same, through each entry point and both atomicity domains (int: CPU atomics,
// double: the stripes), with nothing written; the flush family's fast path still reports a
// flush outside any epoch.
TEST_P(Passive, BadInputUnderLockAllGetsTheSameErrorClassesAsTheGeneralPath) {
    const int me = world_rank(), n = world_size();
    TestWin w(GetParam(), 64);
    const int right = (me + 1) % n;
    ASSERT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush_all(w.win));
    ASSERT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush_local_all(w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    int v = 5, vres = 0;
    double d = 1.5, dres = 0;
    MPI_Op user_op;
    MPI_Op_create([](void*, void*, int*, MPI_Datatype*) {}, 1, &user_op);
    for (int round = 0; round < 2; ++round) {  // the second after the epoch was granted by ops
        EXPECT_EQ(MPI_ERR_TYPE, FRMA_Accumulate(&d, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, MPI_BAND, w.win));
        EXPECT_EQ(MPI_ERR_TYPE, FRMA_Accumulate(&d, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, MPI_LXOR, w.win));
        EXPECT_EQ(MPI_ERR_OP, FRMA_Accumulate(&d, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, user_op, w.win));
        EXPECT_EQ(MPI_ERR_OP, FRMA_Accumulate(&v, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_OP_NULL, w.win));
        EXPECT_EQ(MPI_ERR_TYPE, FRMA_Accumulate(&v, 1, MPI_FLOAT, right, 0, 1, MPI_FLOAT, MPI_BOR, w.win));
        EXPECT_EQ(MPI_ERR_TYPE, FRMA_Get_accumulate(&d, 1, MPI_DOUBLE, &dres, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE,
                                                    MPI_BXOR, w.win));
        EXPECT_EQ(MPI_ERR_OP,
                  FRMA_Get_accumulate(&v, 1, MPI_INT, &vres, 1, MPI_INT, right, 0, 1, MPI_INT, user_op, w.win));
        EXPECT_EQ(MPI_ERR_TYPE, FRMA_Fetch_and_op(&d, &dres, MPI_DOUBLE, right, 0, MPI_BAND, w.win));
        EXPECT_EQ(MPI_ERR_OP, FRMA_Fetch_and_op(&v, &vres, MPI_INT, right, 0, MPI_OP_NULL, w.win));
        EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Accumulate(&d, 1, MPI_DOUBLE, right, 60, 1, MPI_DOUBLE, MPI_SUM, w.win));
        EXPECT_EQ(MPI_ERR_RANK, FRMA_Accumulate(&d, 1, MPI_DOUBLE, n, 0, 1, MPI_DOUBLE, MPI_SUM, w.win));
        EXPECT_EQ(MPI_ERR_RANK, FRMA_Win_flush(n, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush_local_all(w.win));
        // Valid ones go through, in both domains.
        EXPECT_EQ(MPI_SUCCESS, FRMA_Accumulate(&v, 1, MPI_INT, right, 8, 1, MPI_INT, MPI_SUM, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Accumulate(&d, 1, MPI_DOUBLE, right, 16, 1, MPI_DOUBLE, MPI_SUM, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&d, &dres, MPI_DOUBLE, right, 24, MPI_MAX, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush_local_all(w.win));
    }
    MPI_Op_free(&user_op);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(w.base[i], 0) << "a rejected op wrote byte " << i;
    int vi;
    double vd, vm;
    std::memcpy(&vi, w.base + 8, sizeof vi);
    std::memcpy(&vd, w.base + 16, sizeof vd);
    std::memcpy(&vm, w.base + 24, sizeof vm);
    EXPECT_EQ(vi, 10);
    EXPECT_EQ(vd, 3.0);
    EXPECT_EQ(vm, 1.5);
    for (std::size_t i = 32; i < 64; ++i) EXPECT_EQ(w.base[i], 0) << "a rejected op wrote byte " << i;
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, UserErrorHandlerIsCalledWithTheWindow) {
    TestWin w(GetParam(), 16);
    MPI_Errhandler eh;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_errhandler(count_errors, &eh));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_errhandler(w.win, eh));
    MPI_Errhandler back;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_errhandler(w.win, &back));
    EXPECT_EQ(back, eh);
    g_handler_calls = 0;
    int v = 1;
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, w.win));
    EXPECT_EQ(g_handler_calls, 1);
    EXPECT_EQ(g_handler_code, MPI_ERR_RMA_SYNC);
    FRMA_Win_call_errhandler(w.win, MPI_ERR_OTHER);
    EXPECT_EQ(g_handler_calls, 2);
    FRMA_Win_set_errhandler(w.win, MPI_ERRORS_RETURN);
    FRMA_Errhandler_free(&eh);
}

// ---- pools ----------------------------------------------------------------------------

TEST_P(Passive, FloodPastThePoolsUnderAnUngrantedLock) {
    // The holder holds an exclusive lock on itself; the last rank locks it too (not granted
    // yet) and posts 10x more puts than its pools hold. Garbage collection must wait for
    // the grant, issue the queue, and recycle ops: every put lands, the pools stay bounded.
    // The holder lets go only when a watcher thread of the flooder has seen garbage collection
    // start (or the flood end without it, which then fails below): a fixed hold time let a
    // slow build (ASan, am) post fewer ops than the pools hold before the grant.
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a second rank";
    // The holder is not the locks' master (rank 0) when there are three ranks: over am an
    // origin queues only while the master's word is elsewhere; a target that takes the
    // words itself keeps the requests instead (NothingAppliesUnderAnUngrantedLock).
    const int holder = n >= 3 ? 1 : 0;
    using namespace fastrma::detail;
    Engine* e0 = nullptr;
    TestWin w(GetParam(), 1 << 16);
    e0 = current_engine();
    Window* win = window_of(w.win);
    ASSERT_NE(win, nullptr);
    const std::size_t cap = e0->config().win_op_pool + e0->config().op_pool;
    const std::size_t nops = std::min<std::size_t>(10 * cap, (1 << 16) / sizeof(std::int32_t));
    const int flooder = n - 1;
    if (n == 2 && win->uses_am()) GTEST_SKIP() << "over am with two ranks the target holds the ops";
    // A window that spans nodes: an off-node target takes its node master's word itself too.
    if (win->uses_am() && !win->uses_network() && win->lock_master_of(holder) != win->lock_master_of(flooder))
        GTEST_SKIP() << "holder and flooder on two nodes: the target holds the ops";
    if (me == holder) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, holder, 0, w.win));
        MPI_Send(nullptr, 0, MPI_BYTE, flooder, 7, MPI_COMM_WORLD);
        MPI_Recv(nullptr, 0, MPI_BYTE, flooder, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(holder, w.win));
    } else if (me == flooder) {
        MPI_Recv(nullptr, 0, MPI_BYTE, holder, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const std::uint64_t gc0 = stat_total(Stat::gc_runs);
        std::vector<std::int32_t> vals(nops);
        std::iota(vals.begin(), vals.end(), 1);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, holder, 0, w.win));  // not granted yet
        std::atomic<bool> posted{false};
        std::thread watcher([&] {  // tells rank 0 to unlock once the pools overflowed
            while (stat_total(Stat::gc_runs) == gc0 && !posted.load())
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            MPI_Send(nullptr, 0, MPI_BYTE, holder, 8, MPI_COMM_WORLD);
        });
        int rc = MPI_SUCCESS;
        for (std::size_t i = 0; i < nops && rc == MPI_SUCCESS; ++i)
            rc = FRMA_Put(&vals[i], 1, MPI_INT32_T, holder, MPI_Aint(i * 4), 1, MPI_INT32_T, w.win);
        posted.store(true);
        watcher.join();
        ASSERT_EQ(MPI_SUCCESS, rc);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(holder, w.win));
        EXPECT_GT(stat_total(Stat::gc_runs), gc0) << "the flood never reached the pool bound";
        EXPECT_LE(win->op_pool().peak(), e0->config().win_op_pool);
        EXPECT_LE(e0->op_pool().peak(), e0->config().op_pool);
        EXPECT_EQ(win->queued_ops(), 0u);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == holder) {
        for (std::size_t i = 0; i < nops; ++i) {
            ASSERT_EQ(*w.at<std::int32_t>(i), std::int32_t(i + 1)) << i;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// A transport that is full refuses a new op (Post::retry: over am, 256 requests beyond the
// newest answer); the op then queues on its Target in whatever synchronization mode, later
// ops to that target queue behind it, and the progress thread or the completing call issues
// them. In each mode every rank floods its right neighbour: 1,280-byte MPI_REPLACE
// accumulates (a message each) onto 8 rotating blocks — the last of each block must win,
// so the queue kept their order —, small MPI_SUM counts, one small put per op to its own
// slot, gets of known values, and (lock_all) request-based puts. Every byte is checked.
TEST_P(Passive, AFullTransportQueuesOpsInEverySyncModeAndKeepsTheirOrder) {
    using namespace fastrma::detail;
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    constexpr int K = 1200, kBlock = 160, kBlocks = 8;
    // Window layout (int64 units): blocks [0, 1280), counter 1280, put slots [1288, 1288+K),
    // known values [2600, 2600+64), request-put slots [2700, 2700+K/4*1).
    constexpr std::size_t kCounter = 1280, kSlots = 1288, kKnown = 2600, kReq = 2700;
    TestWin w(GetParam(), (kReq + K) * 8);
    Window* win = window_of(w.win);
    const std::uint64_t retries0 = stat_total(Stat::retries);
    MPI_Group world_group, left_group, right_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, 1, &left, &left_group);
    MPI_Group_incl(world_group, 1, &right, &right_group);
    enum Mode { lock_all, lock, fence, pscw };
    for (int mode : {lock_all, lock, fence, pscw}) {
        SCOPED_TRACE(mode);
        std::memset(w.base, 0, w.bytes);
        for (int k = 0; k < 64; ++k) *w.at<std::int64_t>(kKnown + k) = 1000 * me + k;
        MPI_Barrier(MPI_COMM_WORLD);
        if (mode == lock_all) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        }
        if (mode == lock) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, w.win));
        }
        if (mode == fence) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        }
        if (mode == pscw) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(left_group, 0, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(right_group, 0, w.win));
        }
        std::vector<std::int64_t> blocks(std::size_t(K) * kBlock), vals(K), got(K, -1), reqv(K);
        std::vector<MPI_Request> rqs;
        const std::int64_t one = 1;
        for (int i = 0; i < K; ++i) {
            std::int64_t* b = &blocks[std::size_t(i) * kBlock];
            std::fill(b, b + kBlock, std::int64_t(i) * 4 + mode);
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(b, kBlock, MPI_INT64_T, right, MPI_Aint(8 * kBlock * (i % kBlocks)),
                                                   kBlock, MPI_INT64_T, MPI_REPLACE, w.win));
            if (i % 3 == 0) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, right, MPI_Aint(8 * kCounter), 1,
                                                       MPI_INT64_T, MPI_SUM, w.win));
            }
            vals[std::size_t(i)] = 7 * i + 1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&vals[std::size_t(i)], 1, MPI_INT64_T, right, MPI_Aint(8 * (kSlots + i)), 1,
                                            MPI_INT64_T, w.win));
            if (i % 4 == 0) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got[std::size_t(i)], 1, MPI_INT64_T, right,
                                                MPI_Aint(8 * (kKnown + i % 64)), 1, MPI_INT64_T, w.win));
            }
            if (mode == lock_all && i % 4 == 1) {
                reqv[std::size_t(i)] = 3 * i + 2;
                rqs.emplace_back();
                ASSERT_EQ(MPI_SUCCESS, FRMA_Rput(&reqv[std::size_t(i)], 1, MPI_INT64_T, right, MPI_Aint(8 * (kReq + i)),
                                                 1, MPI_INT64_T, w.win, &rqs.back()));
            }
        }
        if (mode == lock_all) {
            ASSERT_EQ(MPI_SUCCESS, MPI_Waitall(int(rqs.size()), rqs.data(), MPI_STATUSES_IGNORE));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        }
        if (mode == lock) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, w.win));
        }
        if (mode == fence) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
        }
        if (mode == pscw) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));
        }
        EXPECT_EQ(win->queued_ops(), 0u);
        for (int i = 0; i < K; i += 4) EXPECT_EQ(got[std::size_t(i)], 1000 * right + i % 64) << "get " << i;
        MPI_Barrier(MPI_COMM_WORLD);
        // What my left neighbour sent me.
        for (int j = 0; j < kBlocks; ++j) {
            const std::int64_t last = std::int64_t(K - kBlocks + j) * 4 + mode;
            for (int e = 0; e < kBlock; ++e)
                ASSERT_EQ(*w.at<std::int64_t>(std::size_t(j) * kBlock + std::size_t(e)), last)
                    << "block " << j << " element " << e << ": an earlier accumulate landed after the last";
        }
        EXPECT_EQ(*w.at<std::int64_t>(kCounter), (K + 2) / 3);
        for (int i = 0; i < K; ++i) {
            ASSERT_EQ(*w.at<std::int64_t>(kSlots + std::size_t(i)), 7 * i + 1) << "put " << i;
        }
        for (int i = 1; i < K && mode == lock_all; i += 4) {
            ASSERT_EQ(*w.at<std::int64_t>(kReq + std::size_t(i)), 3 * i + 2) << "rput " << i;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    const char* transport = std::getenv("FASTRMA_TRANSPORT");
    if (win->uses_am() && n > 1 && transport && std::string(transport) == "am") {
        // Somewhere in the ring: with more ranks than cores a given target's progress thread
        // may keep up with its descheduled origin for the whole flood (seen at 6 ranks).
        unsigned long long mine = stat_total(Stat::retries) - retries0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        EXPECT_GT(all, 0ull) << "the flood never filled the am transport at any rank";
    }
    MPI_Group_free(&left_group);
    MPI_Group_free(&right_group);
    MPI_Group_free(&world_group);
}

TEST_P(Passive, LargeTransfersCompleteAtEveryCompletionPoint) {
    // Puts and gets of at least FASTRMA_OFFLOAD_MIN are copied by the progress thread while
    // the caller goes on; every completion point must still see all their bytes: flush,
    // flush_local, flush_all, flush_local_all, unlock_all and fence, with several transfers
    // in flight at once, sizes that do not divide into pieces, and two threads posting.
    using namespace fastrma::detail;
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    const std::size_t sizes[] = {65536, 3 * 65536 + 13, (1 << 20) + 5};
    const std::size_t region = (1 << 20) + 64;
    TestWin w(GetParam(), 4 * region);
    Engine* e = current_engine();
    const std::uint64_t off0 = e->offload() ? e->offload()->bytes_offloaded() : 0;
    auto pattern = [](int from, int k, std::size_t i) {
        return static_cast<unsigned char>(from * 13 + k * 5 + i * 3 + 1);
    };
    const char* modes[] = {"flush", "flush_local", "flush_all", "flush_local_all", "unlock_all", "fence", "threads"};
    for (const char* mode : modes) {
        for (std::size_t sz : sizes) {
            std::memset(w.base, 0, w.bytes);
            MPI_Barrier(MPI_COMM_WORLD);
            std::vector<std::vector<unsigned char>> src(4, std::vector<unsigned char>(sz));
            for (int k = 0; k < 4; ++k)
                for (std::size_t i = 0; i < sz; ++i) src[std::size_t(k)][i] = pattern(me, k, i);
            const bool fence = !std::strcmp(mode, "fence");
            if (fence)
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
            else
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            auto put = [&](int k) {
                return FRMA_Put(src[std::size_t(k)].data(), int(sz), MPI_BYTE, right, MPI_Aint(std::size_t(k) * region),
                                int(sz), MPI_BYTE, w.win);
            };
            if (!std::strcmp(mode, "threads")) {
                std::atomic<int> bad{0};
                std::thread t1([&] {
                    bad += put(0) != MPI_SUCCESS;
                    bad += put(1) != MPI_SUCCESS;
                    bad += FRMA_Win_flush(right, w.win) != MPI_SUCCESS;
                });
                std::thread t2([&] {
                    bad += put(2) != MPI_SUCCESS;
                    bad += put(3) != MPI_SUCCESS;
                    bad += FRMA_Win_flush(right, w.win) != MPI_SUCCESS;
                });
                t1.join();
                t2.join();
                ASSERT_EQ(bad.load(), 0);
            } else {
                for (int k = 0; k < 4; ++k) {
                    ASSERT_EQ(MPI_SUCCESS, put(k));
                }
            }
            int rc = MPI_SUCCESS;
            if (!std::strcmp(mode, "flush"))
                rc = FRMA_Win_flush(right, w.win);
            else if (!std::strcmp(mode, "flush_local"))
                rc = FRMA_Win_flush_local(right, w.win);
            else if (!std::strcmp(mode, "flush_all"))
                rc = FRMA_Win_flush_all(w.win);
            else if (!std::strcmp(mode, "flush_local_all"))
                rc = FRMA_Win_flush_local_all(w.win);
            ASSERT_EQ(MPI_SUCCESS, rc) << mode;
            // After local completion the origin buffers are ours again: scribble on them.
            const bool closes_epoch = !std::strcmp(mode, "unlock_all") || fence;
            if (!closes_epoch)
                for (auto& b : src) std::memset(b.data(), 0xAB, b.size());
            // Read back what landed at the right neighbour (gets are offloaded too).
            std::vector<unsigned char> back(sz, 0);
            if (!closes_epoch) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(back.data(), int(sz), MPI_BYTE, right, MPI_Aint(2 * region), int(sz),
                                                MPI_BYTE, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
                for (std::size_t i = 0; i < sz; ++i)
                    ASSERT_EQ(back[i], pattern(me, 2, i)) << mode << " get " << sz << " i " << i;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
            } else if (fence) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
            } else {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
            }
            MPI_Barrier(MPI_COMM_WORLD);
            FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
            for (int k = 0; k < 4; ++k)
                for (std::size_t i = 0; i < sz; ++i)
                    ASSERT_EQ(w.base[std::size_t(k) * region + i], pattern(left, k, i))
                        << mode << " size " << sz << " k " << k << " i " << i;
            for (int k = 0; k < 4; ++k) {
                ASSERT_EQ(w.base[std::size_t(k) * region + sz], 0) << "past the end";
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (fence) {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
            }
        }
    }
    // The copies did go through the progress thread where it runs and memory is reachable
    // without messages (not over am, not with FASTRMA_PROGRESS=0 or FASTRMA_OFFLOAD_MIN=0;
    // FRMA_Alloc_mem memory of create windows takes the general path, which copies at once).
    const char* forced = std::getenv("FASTRMA_OFFLOAD");
    if (forced && !std::strcmp(forced, "on") && e->offload() && !window_of(w.win)->uses_am()) {
        EXPECT_TRUE(window_of(w.win)->offloads()) << "FASTRMA_OFFLOAD=on did not turn it on";
    }
    // (A right neighbour on another node is reached by messages: nothing to offload.)
    if (window_of(w.win)->offloads() && n > 1 && GetParam() != Flavor::create_allocmem &&
        !window_of(w.win)->peer_remote((world_rank() + 1) % n)) {
        EXPECT_GT(e->offload()->bytes_offloaded(), off0) << "nothing was offloaded";
    }
}

// Large fetched results: over am each 32 KiB run's old values come back as an answer the
// target sends from a buffer of its own and completes later, while it serves the next runs;
// the origin pulls them all at the flush. Every old value must arrive intact (a server that
// lost an answer's buffer while the answer was in flight crashed here, or returned garbage).
TEST_P(Passive, LargeFetchedResultsArriveIntact) {
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    const std::size_t count = std::size_t(1) << 17;  // 1 MiB of doubles
    TestWin w(GetParam(), count * sizeof(double));
    auto* mine = reinterpret_cast<double*>(w.base);
    for (std::size_t i = 0; i < count; ++i) mine[i] = double(me * 1000000 + i);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<double> add(count, 0.5), old(count, -1.0);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    for (int round = 0; round < 3; ++round) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(add.data(), int(count), MPI_DOUBLE, old.data(), int(count),
                                                   MPI_DOUBLE, right, 0, int(count), MPI_DOUBLE, MPI_SUM, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
        for (std::size_t i = 0; i < count; ++i)
            ASSERT_EQ(old[i], double(right * 1000000 + i) + 0.5 * round) << "round " << round << " element " << i;
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
    (void)left;
    for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(mine[i], double(me * 1000000 + i) + 1.5) << "element " << i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, LargeAccumulatesStayOrderedAndAtomic) {
    // Every rank accumulates into every other rank's array at once (atomicity across
    // origins), and each origin follows its large SUM with a REPLACE then a fetch_and_op on
    // one element and a large MAX, all
    // without a flush in between: MPI orders accumulates from one origin to one location,
    // so the REPLACE must land after the SUM and the fetch must see it.
    const int me = world_rank(), n = world_size();
    const std::size_t count = (1 << 22) + 3;  // 32 MiB + 24 B of int64: long enough to be still running
    TestWin w(GetParam(), count * 8 + 64);
    std::vector<std::int64_t> ones(count), big(count);
    for (std::size_t i = 0; i < count; ++i) {
        ones[i] = std::int64_t(i % 7 + 1);
        big[i] = std::int64_t(1) << 40;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    for (int t = 0; t < n; ++t) {
        if (t == me) continue;
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Accumulate(ones.data(), int(count), MPI_INT64_T, t, 0, int(count), MPI_INT64_T, MPI_SUM, w.win));
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Accumulate(ones.data(), int(count), MPI_INT64_T, t, 0, int(count), MPI_INT64_T, MPI_SUM, w.win));
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
    for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(*w.at<std::int64_t>(i), 2 * std::int64_t(n - 1) * std::int64_t(i % 7 + 1)) << "element " << i;
    MPI_Barrier(MPI_COMM_WORLD);
    // Ordering: one origin (the right neighbour of each target) per target.
    const int right = (me + 1) % n;
    if (n > 1) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        std::int64_t v = 5, got = -1, one = 1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(ones.data(), int(count), MPI_INT64_T, right, 0, int(count), MPI_INT64_T,
                                               MPI_SUM, w.win));
        // The last element: the one a SUM still running elsewhere reaches last.
        const MPI_Aint last = MPI_Aint(count - 1) * 8;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&v, 1, MPI_INT64_T, right, last, 1, MPI_INT64_T, MPI_REPLACE, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &got, MPI_INT64_T, right, last, MPI_SUM, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(big.data(), int(count), MPI_INT64_T, right, 0, int(count), MPI_INT64_T,
                                               MPI_MAX, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
        EXPECT_EQ(got, 5) << "the fetch_and_op passed the REPLACE or the REPLACE passed the SUM";
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        MPI_Barrier(MPI_COMM_WORLD);
        FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
        for (std::size_t i = 0; i < count; ++i) {
            ASSERT_EQ(*w.at<std::int64_t>(i), std::int64_t(1) << 40) << i;
        }
        for (std::size_t b = count * 8; b < count * 8 + 64; ++b) {
            ASSERT_EQ(w.base[b], 0) << "past the end";
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// One region of the window per type: its elements, and the bytes of the hot range at its
// start that the small plain runs and the single-element ops share.
struct MixedRegion {
    MPI_Datatype type;
    std::size_t size, offset, bytes;
    std::size_t elems() const { return bytes / size; }
};

// Adds the element-wise +1 of a run over elements [0, n) of region r to counts (indexed by
// the element's byte offset in the window).
void count_run(std::vector<std::int64_t>& counts, const MixedRegion& r, std::size_t n) {
    for (std::size_t e = 0; e < n; ++e) ++counts[r.offset + e * r.size];
}

TEST_P(Passive, LargeAccumulatesAndFetchAndOpCountersOnTheSameElementsAreExact) {
    // Every rank, from three threads, adds 1 to elements of rank 0 in three regions (MPI_CHAR,
    // MPI_INT, MPI_INT64_T): accumulates and get_accumulates of every element of a hot range
    // (just above the plain-run size: runs under the stripes on CPU-domain windows), of 4 KiB
    // and of the whole region (64 KiB - 1 MiB); fetch_and_op counters on elements of the hot
    // range and the middle of the region; compare_and_swap increments in the hot range
    // (int and int64); for 0.4 s. Each element must end at the number of ops that covered it, modulo
    // its width: a CPU-atomic op landing inside a plain run's read-modify-write loses one.
    const int me = world_rank();
    const MixedRegion regions[3] = {
        {MPI_CHAR, 1, 0, 64 << 10}, {MPI_INT, 4, 64 << 10, 256 << 10}, {MPI_INT64_T, 8, 320 << 10, 1 << 20}};
    const std::size_t total = regions[2].offset + regions[2].bytes;
    TestWin w(GetParam(), total);
    const std::size_t run_min = fastrma::detail::current_engine()->config().acc_run_min;
    const std::size_t hot = std::max<std::size_t>(512, (run_min + 63) / 64 * 64);
    // All-ones as each type: a char 1, an int 1, an int64 1 (little-endian: the low byte).
    std::vector<unsigned char> one_char(1 << 20, 1), one_int(1 << 20, 0), one_i64(1 << 20, 0);
    for (std::size_t i = 0; i < one_int.size(); i += 4) one_int[i] = 1;
    for (std::size_t i = 0; i < one_i64.size(); i += 8) one_i64[i] = 1;
    const unsigned char* operand[3] = {one_char.data(), one_int.data(), one_i64.data()};
    std::vector<std::int64_t> counts(total, 0);  // updates of the element at each byte offset
    std::vector<std::vector<std::int64_t>> thread_counts(3, std::vector<std::int64_t>(total, 0));
    std::atomic<int> errors{0};
    std::vector<unsigned char> sink(1 << 20);  // get_accumulate's old values (bulk thread only)
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    // Each thread goes on for 0.4 s (and at least some ops), so that they overlap on 2 cores.
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
    auto over = [&] { return std::chrono::steady_clock::now() > end; };
    auto bulk = [&](int t) {
        for (int i = 0; i < 200 || !over(); ++i) {
            const MixedRegion& r = regions[(i + t) % 3];
            const std::size_t bytes = i % 64 == 63 ? r.bytes : i % 8 == 1 ? 4096 : hot;
            const int n = int(bytes / r.size);
            const MPI_Aint disp = MPI_Aint(r.offset);
            int rc;
            if (i % 2)
                rc = FRMA_Get_accumulate(operand[(i + t) % 3], n, r.type, sink.data(), n, r.type, 0, disp, n, r.type,
                                         MPI_SUM, w.win);
            else
                rc = FRMA_Accumulate(operand[(i + t) % 3], n, r.type, 0, disp, n, r.type, MPI_SUM, w.win);
            errors += rc != MPI_SUCCESS;
            errors += FRMA_Win_flush(0, w.win) != MPI_SUCCESS;
            count_run(thread_counts[std::size_t(t)], r, std::size_t(n));
        }
    };
    auto fops = [&](int t) {
        std::int64_t got = 0;
        const std::int64_t one64 = 1;
        const int one32 = 1;
        const char one8 = 1;
        const void* one[3] = {&one8, &one32, &one64};
        for (int i = 0; i < 1000 || !over(); ++i) {
            const MixedRegion& r = regions[i % 3];
            const std::size_t e =
                i % 16 == 0 ? r.elems() / 2 + std::size_t(i % 97) : std::size_t(i * 7) % (hot / r.size);
            errors += FRMA_Fetch_and_op(one[i % 3], &got, r.type, 0, MPI_Aint(r.offset + e * r.size), MPI_SUM, w.win) !=
                      MPI_SUCCESS;
            if (i % 4 == 0) errors += FRMA_Win_flush(0, w.win) != MPI_SUCCESS;
            ++thread_counts[std::size_t(t)][r.offset + e * r.size];
        }
        // The operands and `got` live on this thread's stack: its last ops complete before it
        // returns (an op still queued at the unlock_all read a dead stack's bytes as its operand).
        errors += FRMA_Win_flush(0, w.win) != MPI_SUCCESS;
    };
    auto cas = [&](int t) {
        for (int i = 0; i < 200 || !over(); ++i) {
            const MixedRegion& r = regions[1 + i % 2];
            const std::size_t e = std::size_t(i * 5) % (hot / r.size);
            const MPI_Aint disp = MPI_Aint(r.offset + e * r.size);
            std::int64_t old = 0, seen = 0, want = 0;
            errors += FRMA_Fetch_and_op(nullptr, &old, r.type, 0, disp, MPI_NO_OP, w.win) != MPI_SUCCESS;
            errors += FRMA_Win_flush(0, w.win) != MPI_SUCCESS;
            for (;;) {
                // Only the low r.size bytes are the value (little-endian).
                want = old + 1;
                seen = 0;
                errors += FRMA_Compare_and_swap(&want, &old, &seen, r.type, 0, disp, w.win) != MPI_SUCCESS;
                errors += FRMA_Win_flush(0, w.win) != MPI_SUCCESS;
                if (r.size == 4 ? std::int32_t(seen) == std::int32_t(old) : seen == old) break;
                old = seen;
            }
            ++thread_counts[std::size_t(t)][r.offset + e * r.size];
        }
    };
    std::thread a(bulk, 0), b(fops, 1), c(cas, 2);
    a.join();
    b.join();
    c.join();
    ASSERT_EQ(errors.load(), 0) << FRMA_Last_error_message();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    for (auto& tc : thread_counts)
        for (std::size_t k = 0; k < total; ++k) counts[k] += tc[k];
    std::vector<std::int64_t> sum(me == 0 ? total : 0);
    MPI_Reduce(counts.data(), sum.data(), int(total), MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
    if (me == 0) {
        int bad = 0;
        for (const MixedRegion& r : regions)
            for (std::size_t e = 0; e < r.elems() && bad < 10; ++e) {
                const std::int64_t want = sum[r.offset + e * r.size];
                const unsigned char* at = w.base + r.offset + e * r.size;
                std::int64_t got, wrapped;
                if (r.size == 1) {
                    got = *at;
                    wrapped = static_cast<unsigned char>(want);
                } else if (r.size == 4) {
                    got = *reinterpret_cast<const std::uint32_t*>(at);
                    wrapped = static_cast<std::uint32_t>(want);
                } else {
                    got = *reinterpret_cast<const std::int64_t*>(at);
                    wrapped = want;
                }
                if (got != wrapped) {
                    ++bad;
                    ADD_FAILURE() << "element " << e << " of the " << r.size << "-byte region: " << want << " updates ("
                                  << wrapped << " in its width), the element holds " << got;
                }
            }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, SmallOpsInterleavedWithOthersLandInOrder) {
    // Over am, small puts and accumulates without result travel in batches (several to a
    // message) while fetching ops, larger puts and gets go alone: the order per target must
    // still hold. Without any flush in between, each fetch_and_op(NO_OP) must see exactly
    // the SUMs issued before it (MPI orders accumulates from one origin to one location),
    // and puts of every size (batched, single message, zero-copy) land with their data.
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    constexpr int kSlots = 64, kOps = 3000, kEvery = 97;
    const std::size_t put_base = 4096, put_bytes = 1 << 18;
    TestWin w(GetParam(), put_base + put_bytes);
    std::vector<std::int64_t> fetched(kOps / kEvery + 1, -1), expect(kOps / kEvery + 1, -2);
    const std::int64_t one = 1;
    const double half = 0.5;
    std::vector<std::size_t> sizes = {8, 24, 1000, 1024, 1025, 3000, 4096, 20000, 8, 16};
    std::vector<unsigned char> src(put_bytes);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + me);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    std::int64_t slot0 = 0;
    std::size_t put_off = 0, puts = 0;
    for (int k = 0, f = 0; k < kOps; ++k) {
        const int slot = k % kSlots;
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Accumulate(&one, 1, MPI_INT64_T, right, MPI_Aint(slot) * 8, 1, MPI_INT64_T, MPI_SUM, w.win));
        if (slot == 0) ++slot0;
        if (k % 5 == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&half, 1, MPI_DOUBLE, right, MPI_Aint(kSlots) * 8, 1, MPI_DOUBLE,
                                                   MPI_SUM, w.win));
        }
        if (k % kEvery == 0) {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Fetch_and_op(nullptr, &fetched[std::size_t(f)], MPI_INT64_T, right, 0, MPI_NO_OP, w.win));
            expect[std::size_t(f++)] = slot0;
        }
        const std::size_t len = sizes[puts % sizes.size()];
        if (k % 11 == 0 && put_off + len <= put_bytes) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src.data() + put_off, int(len), MPI_BYTE, right,
                                            MPI_Aint(put_base + put_off), int(len), MPI_BYTE, w.win));
            put_off += len;
            ++puts;
        }
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
    for (std::size_t f = 0; f < fetched.size(); ++f) {
        ASSERT_EQ(fetched[f], expect[f]) << "fetch " << f;
    }
    std::vector<unsigned char> back(put_off);
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Get(back.data(), int(put_off), MPI_BYTE, right, MPI_Aint(put_base), int(put_off), MPI_BYTE, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    for (std::size_t i = 0; i < put_off; ++i) {
        ASSERT_EQ(back[i], src[i]) << "byte " << i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
    // What the left neighbour did to me.
    for (int s = 0; s < kSlots; ++s)
        ASSERT_EQ(*w.at<std::int64_t>(std::size_t(s)), kOps / kSlots + (s < kOps % kSlots ? 1 : 0)) << "slot " << s;
    double d;
    std::memcpy(&d, w.base + kSlots * 8, 8);
    EXPECT_EQ(d, 0.5 * ((kOps + 4) / 5));
    for (std::size_t i = 0; i < put_off; ++i)
        ASSERT_EQ(w.base[put_base + i], static_cast<unsigned char>(i * 7 + left)) << "byte " << i;
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_P(Passive, SmallTransfersCompleteAtEveryCompletionPoint) {
    // On a create window, small puts and gets to parts not mapped here wait in a batch per
    // peer (FASTRMA_CMA_BATCH) and move at the next completion point. Every completion point
    // must move them — flush, flush_local, flush_all, flush_local_all, unlock, unlock_all,
    // fence, PSCW complete, a request-based get's wait — with contiguous runs (merged into
    // one transfer), scattered pieces, sizes around the batch limit (1024), more pieces than
    // a batch holds (128), and gets in between. Gaps between the pieces stay untouched.
    using namespace fastrma::detail;
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    constexpr std::size_t kRegion = 32 * 1024;  // puts land in [0, kRegion); gets read [kRegion, 2 kRegion)
    TestWin w(GetParam(), 2 * kRegion);
    auto known = [](int owner, std::size_t i) { return static_cast<unsigned char>(owner * 31 + i * 11 + 5); };
    for (std::size_t i = 0; i < kRegion; ++i) w.base[kRegion + i] = known(me, i);
    std::vector<std::pair<std::size_t, std::size_t>> plan;  // (offset, bytes) of each put
    std::size_t end = 0;
    for (int i = 0; i < 100; ++i, end += 8) plan.push_back({end, 8});  // one contiguous run
    for (int i = 0; i < 150; ++i) plan.push_back({end + std::size_t(i) * 40, 8 + std::size_t(i % 3) * 8});  // scattered
    end += 150 * 40;
    for (std::size_t len : {1000, 1024, 1025, 4000, 1, 17}) {
        plan.push_back({end, len});
        end += len + 8;
    }
    ASSERT_LE(end, kRegion);
    auto value = [](int from, int mode, std::size_t i) {
        return static_cast<unsigned char>(from * 7 + mode * 13 + i * 3 + 1);
    };
    MPI_Group world, peers_to, peers_from;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &right, &peers_to);
    MPI_Group_incl(world, 1, &left, &peers_from);
    const std::uint64_t batched0 = stat_total(Stat::cma_batched);
    const char* modes[] = {"flush", "flush_local", "flush_all", "flush_local_all", "unlock", "unlock_all",
                           "fence", "pscw",        "rget"};
    for (int m = 0; m < int(std::size(modes)); ++m) {
        const std::string mode = modes[m];
        std::memset(w.base, 0, kRegion);
        MPI_Barrier(MPI_COMM_WORLD);
        if (mode == "fence") {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        } else if (mode == "pscw") {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(peers_from, 0, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(peers_to, 0, w.win));
        } else if (mode == "unlock") {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, right, 0, w.win));
        } else {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        }
        std::vector<unsigned char> src(end);
        for (std::size_t i = 0; i < end; ++i) src[i] = value(me, m, i);
        for (auto [o, len] : plan)
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Put(src.data() + o, int(len), MPI_BYTE, right, MPI_Aint(o), int(len), MPI_BYTE, w.win));
        // 200 gets of 8 bytes into one contiguous buffer, from remote places that are
        // contiguous for a while, then jump.
        std::vector<unsigned char> got(200 * 8, 0);
        auto from = [](int i) { return std::size_t(i < 100 ? i * 8 : 2000 + i * 24); };
        MPI_Request rq = MPI_REQUEST_NULL;
        if (mode == "rget") {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Rget(got.data(), 8, MPI_BYTE, right, MPI_Aint(kRegion), 8, MPI_BYTE, w.win, &rq));
        } else {
            for (int i = 0; i < 200; ++i)
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data() + i * 8, 8, MPI_BYTE, right, MPI_Aint(kRegion + from(i)), 8,
                                                MPI_BYTE, w.win));
        }
        auto check_gets = [&] {
            const int k = mode == "rget" ? 1 : 200;
            for (int i = 0; i < k; ++i)
                for (std::size_t b = 0; b < 8; ++b)
                    ASSERT_EQ(got[std::size_t(i) * 8 + b], known(right, (mode == "rget" ? 0 : from(i)) + b))
                        << mode << " get " << i;
        };
        int rc = MPI_SUCCESS;
        bool open = true;
        if (mode == "flush")
            rc = FRMA_Win_flush(right, w.win);
        else if (mode == "flush_local")
            rc = FRMA_Win_flush_local(right, w.win);
        else if (mode == "flush_all")
            rc = FRMA_Win_flush_all(w.win);
        else if (mode == "flush_local_all")
            rc = FRMA_Win_flush_local_all(w.win);
        else if (mode == "rget")
            rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
        else {
            open = false;
            if (mode == "unlock")
                rc = FRMA_Win_unlock(right, w.win);
            else if (mode == "unlock_all")
                rc = FRMA_Win_unlock_all(w.win);
            else if (mode == "fence")
                rc = FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win);
            else {
                rc = FRMA_Win_complete(w.win);
                if (rc == MPI_SUCCESS) rc = FRMA_Win_wait(w.win);
            }
        }
        ASSERT_EQ(MPI_SUCCESS, rc) << mode << ": " << FRMA_Last_error_message();
        check_gets();
        // Local completion at least: the origin buffer is ours again.
        std::memset(src.data(), 0xAB, src.size());
        if (open) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
        std::vector<char> covered(kRegion, 0);
        for (auto [o, len] : plan)
            for (std::size_t i = o; i < o + len; ++i) {
                covered[i] = 1;
                ASSERT_EQ(w.base[i], value(left, m, i)) << mode << " byte " << i;
            }
        for (std::size_t i = 0; i < kRegion; ++i)
            if (!covered[i]) {
                ASSERT_EQ(w.base[i], 0) << mode << " gap byte " << i;
            }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Group_free(&peers_to);
    MPI_Group_free(&peers_from);
    MPI_Group_free(&world);
    // The batches were in use where parts are unmapped (create windows of several ranks
    // over shared memory; am, allocate and FRMA_Alloc_mem parts move otherwise).
    if (GetParam() == Flavor::create && n > 1 && !window_of(w.win)->uses_am()) {
        EXPECT_GT(stat_total(Stat::cma_batched), batched0 + 9 * 300);
    }
}

TEST_P(Passive, SmallAccumulatesApplyInIssueOrderAtTheFlush) {
    // On a create window, small accumulates to a part not mapped here wait in the peer's
    // batch with the small puts and gets and apply at the flush (cma_batch.hpp). Without a
    // flush in between: accumulates to the same bytes apply in issue order (fetched values
    // show each step), partial overlaps and runs longer than a batch still add up, a put
    // after an accumulate of the same bytes lands after it, a get before an accumulate
    // reads the value before it. Every rank's slots are written only by its left neighbour.
    using namespace fastrma::detail;
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    constexpr int kRun = 300;  // > 128: the batch drains on its own in the middle
    TestWin w(GetParam(), 256 + kRun * 8);
    auto* slot = w.at<std::int64_t>(0);
    slot[6] = 77;  // read by the left neighbour's get before its accumulate
    for (int i = 0; i < 4; ++i) slot[8 + i] = 1000 * (i + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    const std::uint64_t batched0 = stat_total(Stat::cma_batched), served0 = stat_total(Stat::atomics_served);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    auto acc = [&](std::int64_t v, MPI_Aint at, MPI_Op op) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&v, 1, MPI_INT64_T, right, at * 8, 1, MPI_INT64_T, op, w.win));
    };
    std::int64_t seen[5] = {-1, -1, -1, -1, -1};
    auto peek = [&](int k) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(nullptr, &seen[k], MPI_INT64_T, right, 0, MPI_NO_OP, w.win));
    };
    // Slot 0: one step after another, each visible to the fetch issued after it.
    acc(5, 0, MPI_SUM);
    peek(0);
    acc(3, 0, MPI_MAX);
    peek(1);
    acc(2, 0, MPI_PROD);
    peek(2);
    acc(7, 0, MPI_REPLACE);
    acc(1, 0, MPI_SUM);
    peek(3);
    std::int64_t old0 = -1, one = 1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old0, MPI_INT64_T, right, 0, MPI_SUM, w.win));
    // Slots 1..3: partial overlaps.
    const std::int64_t two[2] = {1, 2}, hundred[2] = {100, 100};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(two, 2, MPI_INT64_T, right, 2 * 8, 2, MPI_INT64_T, MPI_SUM, w.win));
    acc(10, 3, MPI_SUM);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(hundred, 2, MPI_INT64_T, right, 1 * 8, 2, MPI_INT64_T, MPI_SUM, w.win));
    // Slot 5: a put after an accumulate of it.
    acc(3, 5, MPI_SUM);
    const std::int64_t nine = 9;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&nine, 1, MPI_INT64_T, right, 5 * 8, 1, MPI_INT64_T, w.win));
    // Slot 6: a get before an accumulate of it.
    std::int64_t got6 = -1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got6, 1, MPI_INT64_T, right, 6 * 8, 1, MPI_INT64_T, w.win));
    acc(1, 6, MPI_SUM);
    // Slots 8..11: get_accumulate twice, old values of each step.
    const std::int64_t add4[4] = {1, 2, 3, 4};
    std::int64_t old1[4] = {-1, -1, -1, -1}, old2[4] = {-1, -1, -1, -1};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(add4, 4, MPI_INT64_T, old1, 4, MPI_INT64_T, right, 8 * 8, 4, MPI_INT64_T,
                                               MPI_SUM, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(add4, 4, MPI_INT64_T, old2, 4, MPI_INT64_T, right, 8 * 8, 4, MPI_INT64_T,
                                               MPI_SUM, w.win));
    // A run of doubles longer than a batch, each slot twice.
    for (int rep = 0; rep < 2; ++rep)
        for (int i = 0; i < kRun; ++i) {
            const double v = 0.5 * (i + 1);
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Accumulate(&v, 1, MPI_DOUBLE, right, 256 + MPI_Aint(i) * 8, 1, MPI_DOUBLE, MPI_SUM, w.win))
                << FRMA_Last_error_message();
        }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win)) << FRMA_Last_error_message();
    EXPECT_EQ(seen[0], 5);
    EXPECT_EQ(seen[1], 5);
    EXPECT_EQ(seen[2], 10);
    EXPECT_EQ(seen[3], 8);
    EXPECT_EQ(old0, 8);
    EXPECT_EQ(got6, 77);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(old1[i], 1000 * (i + 1)) << i;
        EXPECT_EQ(old2[i], 1000 * (i + 1) + (i + 1)) << i;
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_sync(w.win);  // remote updates were applied by our server thread (am)
    (void)left;
    EXPECT_EQ(slot[0], 9);
    EXPECT_EQ(slot[1], 100);
    EXPECT_EQ(slot[2], 101);
    EXPECT_EQ(slot[3], 12);
    EXPECT_EQ(slot[5], 9);
    EXPECT_EQ(slot[6], 78);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(slot[8 + i], 1000 * (i + 1) + 2 * (i + 1)) << i;
    for (int i = 0; i < kRun; ++i) {
        double d;
        std::memcpy(&d, w.base + 256 + i * 8, 8);
        ASSERT_EQ(d, 1.0 * (i + 1)) << "run slot " << i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Batched, or served by the neighbour while it waits in a flush or the barrier.
    if (GetParam() == Flavor::create && n > 1 && !window_of(w.win)->uses_am()) {
        EXPECT_GT(stat_total(Stat::cma_batched) - batched0 + stat_total(Stat::atomics_served) - served0, 2u * kRun);
    }
}

// FASTRMA_WAIT_SPIN_US=auto (spin_wait.hpp): a waiter spins 20 us before it yields, 2 us
// once a window has more ranks on this node than the rank's cpuset has processing units
// (the thread that will answer may need this one's core). Run at 1..4 ranks on 2 PUs, this
// sees both branches.
TEST(Waiting, SpinBudgetFollowsRanksOnTheNodeAgainstTheCpuset) {
    MPI_Comm node;
    ASSERT_EQ(MPI_SUCCESS, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int local = 0;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(0, sched_getaffinity(0, sizeof set, &set));
    const int pus = CPU_COUNT(&set);
    using namespace fastrma::detail;
    std::uint64_t want = local > pus ? kWaitSpinOversubscribedNs : kWaitSpinNs;
    if (const char* v = std::getenv("FASTRMA_WAIT_SPIN_US"); v && std::strcmp(v, "auto") != 0)
        want = std::uint64_t(std::atol(v)) * 1000;
    TestWin w(Flavor::allocate, 64);
    EXPECT_EQ(g_wait_spin_ns.load(), want) << local << " ranks on the node, " << pus << " PUs";
    MPI_Barrier(MPI_COMM_WORLD);
}

// Over ofi an operation can fail after it was posted (the provider reports it in the
// completion queue): the flush, flush_all or unlock that completes it returns an MPI error
// class with the provider's message, once, and the job goes on. Injected: puts and gets
// naming a key the target never registered (ofi::inject_bad_keys). tcp;ofi_rxm cancels
// such an operation and drops the connection (later operations to that peer on the same
// window fail too), so each case has a window of its own; a window made afterwards works.
TEST(OfiErrors, AFailedCompletionIsReportedAtTheCompletionPointThatCompletesIt) {
    const int me = world_rank(), n = world_size();
    // The last rank: another node than rank 0 in every layout these tests run in (fake
    // nodes, two hosts), so an ofi peer wherever the window mixes media.
    const int peer = n - 1;
    using fastrma::detail::ofi::inject_bad_keys;
    for (int round = 0; round < 3; ++round) {
        TestWin w(Flavor::allocate, 4096);
        if (n < 2 || !fastrma::detail::window_of(w.win)->uses_network()) GTEST_SKIP() << "not an ofi window";
        if (me == 0) {
            std::uint64_t v = 7, got = 0;
            int rc = MPI_SUCCESS;
            if (round == 0) {  // a put, completed by a flush
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                inject_bad_keys(1);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_UINT64_T, peer, 0, 1, MPI_UINT64_T, w.win));
                rc = FRMA_Win_flush(peer, w.win);
            } else if (round == 1) {  // a get, completed by a flush_all
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                inject_bad_keys(1);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_UINT64_T, peer, 8, 1, MPI_UINT64_T, w.win));
                rc = FRMA_Win_flush_all(w.win);
            } else {  // a put under a lock, completed by the unlock
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, w.win));
                inject_bad_keys(1);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_UINT64_T, peer, 0, 1, MPI_UINT64_T, w.win));
                rc = FRMA_Win_unlock(peer, w.win);
            }
            inject_bad_keys(0);
            EXPECT_NE(MPI_SUCCESS, rc) << "round " << round;
            const std::string msg = FRMA_Last_error_message();
            EXPECT_NE(std::string::npos, msg.find("ofi")) << msg;
            EXPECT_NE(std::string::npos, msg.find("rank " + std::to_string(peer))) << msg;
            if (round < 2) {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(w.win));  // reported once
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == peer) {
            EXPECT_EQ(0u, *w.at<std::uint64_t>(0)) << "the failed put landed";
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    // The job goes on: a new window moves data.
    TestWin w(Flavor::allocate, 4096);
    if (me == 0) {
        std::uint64_t v = 42;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_UINT64_T, peer, 16, 1, MPI_UINT64_T, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == peer) {
        FRMA_Win_sync(w.win);
        EXPECT_EQ(42u, *w.at<std::uint64_t>(2));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- small puts and gets served by the target's CPU (transport/shm/served.hpp) ------------------
//
// Create windows over plain memory and dynamic windows: a node peer's part is not mapped
// here. A drain of a few puts and gets of up to served::kMaxBytes goes to the peer's
// state-page slots when a thread of it waits in MPI, else by cross-memory attach.

constexpr std::size_t kServedBound = 96;  // served::kMaxBytes
static_assert(kServedBound == fastrma::detail::served::kMaxBytes);

unsigned char fill_of(int rank, std::size_t i) { return static_cast<unsigned char>(rank * 31 + i * 7 + 3); }
unsigned char put_value(int round, std::size_t len, std::size_t i) {
    return static_cast<unsigned char>(0x80 + round * 11 + len * 5 + i * 3);
}

// A create window (disp_unit 1) over user memory, or a dynamic window with that memory
// attached, filled with fill_of(rank, i); disp[r]: the displacement of r's byte 0.
struct UnmappedWin {
    FRMA_Win win = FRMA_WIN_NULL;
    std::vector<unsigned char> mem;
    std::vector<MPI_Aint> disp;
    bool dynamic;
    UnmappedWin(bool dyn, std::size_t bytes) : mem(bytes), dynamic(dyn) {
        const int me = world_rank(), n = world_size();
        for (std::size_t i = 0; i < bytes; ++i) mem[i] = fill_of(me, i);
        if (dyn) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem.data(), MPI_Aint(bytes)));
        } else {
            EXPECT_EQ(MPI_SUCCESS,
                      FRMA_Win_create(mem.data(), MPI_Aint(bytes), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        }
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Aint mine = 0;
        if (dyn) MPI_Get_address(mem.data(), &mine);
        disp.resize(std::size_t(n));
        MPI_Allgather(&mine, 1, MPI_AINT, disp.data(), 1, MPI_AINT, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    ~UnmappedWin() {
        if (dynamic) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, mem.data()));
        }
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    }
    fastrma::detail::Window* impl() const { return fastrma::detail::window_of(win); }
    // Peers on the node reached by cross-memory attach (not over am or ofi).
    bool over_cma() const { return !impl()->uses_am(); }
    // Does a target waiting in MPI advertise itself? Its beat comes from the host MPI's
    // progress hook (Open MPI's opal_progress, MPICH ch4:ucx's ucp_worker_progress, which
    // takes MPI-free entries only; not FASTRMA_HOST_PROGRESS=0), and only batched transfers
    // go there (FASTRMA_CMA_BATCH=0: none).
    bool served_expected() const {
        static int key;
        const bool hooked = fastrma::detail::host_progress_add(
            &key, [] { return false; }, fastrma::detail::HookCalls::no_mpi);
        if (hooked) fastrma::detail::host_progress_remove(&key);
        const auto& c = impl()->engine().config();
        return hooked && c.host_progress && c.cma_batch >= kServedBound;
    }
};

// The end of a round of the served-atomics tests below: the target waited in the barrier
// (serving); another round unless an op was served somewhere or 10 s have gone.
bool another_served_round(std::uint64_t served, std::chrono::steady_clock::time_point t0) {
    MPI_Barrier(MPI_COMM_WORLD);  // the target waits here: serves
    int any = served > 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int more = !any && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10);
    MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return more;
}

// Rank 0, after those rounds: where the target serves and its beat was seen fresh often, some
// of rank 0's ops were served; the count is printed either way.
void expect_served(const UnmappedWin& w, const char* what, std::uint64_t served, int rounds, int fresh_seen) {
    const char* kind = w.dynamic ? "dynamic" : "create";
    if (w.served_expected() && fresh_seen >= 20) {
        EXPECT_GT(served, 0u) << kind << ": no " << what << " served in " << rounds
                              << " rounds, the target's beat seen fresh " << fresh_seen << " times";
    }
    std::printf("ServedTransfers (%s %s): %llu served in %d rounds, the beat fresh %d times\n", kind, what,
                static_cast<unsigned long long>(served), rounds, fresh_seen);
}

// Where each length's put lands in the target's part (8 untouched bytes between), and the
// get region (the target's fill pattern) above it.
struct SizePlan {
    std::vector<std::pair<std::size_t, std::size_t>> at;  // (offset, len)
    std::size_t end = 0;
    static constexpr std::size_t kGet = 8192, kBytes = 16384;
    SizePlan() {
        for (std::size_t len = 1; len <= kServedBound + 4; ++len) add(len);
        for (std::size_t len : {128, 200}) add(len);  // beyond one slot: served in 2-3 chunks
    }
    void add(std::size_t len) {
        at.push_back({end, len});
        end += len + 8;
    }
};

// The origin's side of one round: each length put then flushed, then got back from the get
// region and flushed, checked byte by byte (the bytes past the get untouched). Mismatches
// are counted, not asserted: the target must still be released.
int round_trip(const UnmappedWin& w, const SizePlan& plan, int target, int round) {
    int bad = 0;
    std::vector<unsigned char> src(256), got(256 + 8);
    for (auto [o, len] : plan.at) {
        for (std::size_t i = 0; i < len; ++i) src[i] = put_value(round, len, i);
        if (FRMA_Put(src.data(), int(len), MPI_BYTE, target, w.disp[std::size_t(target)] + MPI_Aint(o), int(len),
                     MPI_BYTE, w.win) != MPI_SUCCESS ||
            FRMA_Win_flush(target, w.win) != MPI_SUCCESS)
            ++bad;
        std::memset(got.data(), 0x5A, got.size());
        const MPI_Aint from = w.disp[std::size_t(target)] + MPI_Aint(SizePlan::kGet + o);
        if (FRMA_Get(got.data(), int(len), MPI_BYTE, target, from, int(len), MPI_BYTE, w.win) != MPI_SUCCESS ||
            FRMA_Win_flush(target, w.win) != MPI_SUCCESS)
            ++bad;
        for (std::size_t i = 0; i < len; ++i) bad += got[i] != fill_of(target, SizePlan::kGet + o + i);
        for (std::size_t i = len; i < got.size(); ++i) bad += got[i] != 0x5A;
    }
    return bad;
}

// The target's check after a round: every put's bytes, the bytes between them and the get
// region untouched; then the put region refilled for the next round.
int check_target(UnmappedWin& w, const SizePlan& plan, int round) {
    const int me = world_rank();
    std::vector<char> written(SizePlan::kBytes, 0);
    int bad = 0;
    for (auto [o, len] : plan.at)
        for (std::size_t i = 0; i < len; ++i) {
            written[o + i] = 1;
            bad += w.mem[o + i] != put_value(round, len, i);
        }
    for (std::size_t i = 0; i < SizePlan::kBytes; ++i)
        if (!written[i]) bad += w.mem[i] != fill_of(me, i);
    for (std::size_t i = 0; i < plan.end; ++i) w.mem[i] = fill_of(me, i);
    return bad;
}

std::uint64_t served_transfers() { return fastrma::detail::stat_total(fastrma::detail::Stat::transfers_served); }

// The target waits in MPI_Recv: rounds of every length 1..bound+4 (and two beyond), until
// one round was served at least in part, for up to 10 s. On an oversubscribed machine the
// target's blocking call yields its core and runs in bursts (beats 30-400 us apart were
// seen with 3 ranks on 2 busy cores), so that most drains find its beat stale and move by
// cross-memory attach (checked too). The origin samples the beat itself between rounds:
// once it has seen it fresh often, some transfer must have been served.
TEST(ServedTransfers, PutsAndGetsOfEveryLengthWhileTheTargetWaitsInMpi) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, SizePlan::kBytes);
        if (!w.over_cma()) continue;
        const SizePlan plan;
        ASSERT_LE(plan.end, SizePlan::kGet);
        std::uint64_t served = 0;
        int round = 0, fresh_seen = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int more = 1; more; ++round) {
            int bad = 0;
            if (me == 0) {
                const std::uint64_t s0 = served_transfers();
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                bad = round_trip(w, plan, 1, round);
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
                served += served_transfers() - s0;
                fresh_seen += fastrma::detail::served::fresh(w.impl()->state_words(1));
                MPI_Send(&bad, 1, MPI_INT, 1, 71, MPI_COMM_WORLD);
            } else if (me == 1) {
                MPI_Recv(&bad, 1, MPI_INT, 0, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  // in MPI: serves
                bad = check_target(w, plan, round);
            }
            MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            ASSERT_EQ(bad, 0) << (dyn ? "dynamic" : "create") << " round " << round;
            more = served == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10);
            MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        if (me == 0) {
            if (w.served_expected()) {
                if (fresh_seen >= 20) {
                    EXPECT_GT(served, 0u) << (dyn ? "dynamic" : "create") << ": no transfer served in " << round
                                          << " rounds, the target's beat seen fresh " << fresh_seen << " times";
                }
                std::printf("ServedTransfers (%s): %llu served in %d rounds, the beat fresh %d times\n",
                            dyn ? "dynamic" : "create", static_cast<unsigned long long>(served), round, fresh_seen);
            } else {
                EXPECT_EQ(served, 0u);
            }
            // A bad displacement is still refused at the origin, and the window goes on.
            const std::uint64_t v = 1;
            const MPI_Aint beyond = dyn ? w.disp[1] + MPI_Aint(SizePlan::kBytes) + 4096 : MPI_Aint(SizePlan::kBytes);
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            EXPECT_NE(MPI_SUCCESS, FRMA_Put(&v, 8, MPI_BYTE, 1, beyond - 4, 8, MPI_BYTE, w.win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(1, w.win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// Small contiguous accumulates and get_accumulates (up to 8 chunks of 96 bytes) to a target
// waiting in MPI go through its served slots too, in one atomicity domain with the
// cross-memory ones: every origin but rank 1 adds 1 to ints 0..len-1 of a region (len 1..24
// in turn, and every 8th op 25..192 ints: several chunks) and
// get_accumulates SUM on one double counter (each old value must be new to it, and the
// last value is the total), flushing each; the target, in MPI_Barrier meanwhile, checks
// every int. Rounds until some were served (up to 10 s), as above.
TEST(ServedTransfers, SmallAccumulatesAndGetAccumulatesWhileTheTargetWaits) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    constexpr int kPerRound = 48, kMaxLen = 192;  // 192 ints: 768 bytes, all 8 slots
    auto len_of = [](int k) {
        return k == kPerRound - 1 ? kMaxLen : k % 8 == 7 ? 25 + (k * 37) % (kMaxLen - 24) : 1 + k % 24;
    };
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, 4096);
        if (!w.over_cma()) continue;
        for (std::size_t i = 0; i < 4096; ++i) w.mem[i] = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        const int origins = n - 1;
        std::uint64_t served = 0;
        int round = 0, fresh_seen = 0, bad = 0;
        std::vector<double> olds;
        const auto t0 = std::chrono::steady_clock::now();
        for (int more = 1; more; ++round) {
            if (me != 1) {
                const std::uint64_t s0 = fastrma::detail::stat_total(fastrma::detail::Stat::atomics_served);
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                for (int k = 0; k < kPerRound; ++k) {
                    const int len = len_of(k);
                    const std::vector<int> ones(std::size_t(len), 1);
                    EXPECT_EQ(MPI_SUCCESS,
                              FRMA_Accumulate(ones.data(), len, MPI_INT, 1, w.disp[1], len, MPI_INT, MPI_SUM, w.win));
                    const double one = 1;
                    double old = -1;
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(&one, 1, MPI_DOUBLE, &old, 1, MPI_DOUBLE, 1,
                                                               w.disp[1] + 1024, 1, MPI_DOUBLE, MPI_SUM, w.win));
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(1, w.win));
                    olds.push_back(old);
                }
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
                served += fastrma::detail::stat_total(fastrma::detail::Stat::atomics_served) - s0;
                fresh_seen += fastrma::detail::served::fresh(w.impl()->state_words(1));
            }
            more = another_served_round(served, t0);
        }
        if (me == 1) {
            // Int i got one add per op with len > i, from every origin, every round.
            for (int i = 0; i < kMaxLen; ++i) {
                int per_round = 0;
                for (int k = 0; k < kPerRound; ++k) per_round += len_of(k) > i;
                int v;
                std::memcpy(&v, w.mem.data() + std::size_t(i) * 4, 4);
                bad += v != per_round * origins * round;
            }
            for (std::size_t i = 4 * kMaxLen; i < 1024; ++i) bad += w.mem[i] != 0;
            double total;
            std::memcpy(&total, w.mem.data() + 1024, 8);
            bad += total != double(kPerRound) * origins * round;
        } else {
            std::sort(olds.begin(), olds.end());
            bad += std::adjacent_find(olds.begin(), olds.end()) != olds.end();  // every old value once
            bad += olds.front() < 0;
        }
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(bad, 0) << (dyn ? "dynamic" : "create") << " after " << round << " rounds";
        if (me == 0) expect_served(w, "accumulate", served, round, fresh_seen);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// fetch_and_op and compare_and_swap on a create or dynamic window take the inline fast
// path to the served slots (Window::fast_served_atomic) when the target waits in MPI. Two
// threads per origin, each round: fetch_and_op SUM of 1 on one counter (every fetched value
// must be new: gathered and checked to be 0 .. total-1), a compare_and_swap increment loop
// on a second counter, fetch_and_op MPI_NO_OP reads of the first (never above the final
// total); the target sits in MPI_Barrier. Out-of-range displacements and an unattached
// address still get their error classes, with nothing written. Rounds until some were
// served (up to 10 s).
TEST(ServedTransfers, FetchAndOpAndCompareAndSwapOnTheFastPathWhileTheTargetWaits) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    constexpr int kThreads = 2, kPerThread = 200;
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, 4096);
        if (!w.over_cma()) continue;
        for (std::size_t i = 0; i < 4096; ++i) w.mem[i] = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        const MPI_Aint base = w.disp[1];  // counters at +0 (fetch_and_op) and +64 (compare_and_swap)
        std::uint64_t served = 0;
        int round = 0, bad = 0, fresh_seen = 0;
        std::vector<std::int64_t> olds;
        std::int64_t max_read = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int more = 1; more; ++round) {
            if (me != 1) {
                const std::uint64_t s0 = fastrma::detail::stat_total(fastrma::detail::Stat::atomics_served);
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                std::vector<std::vector<std::int64_t>> mine(kThreads);
                std::vector<std::int64_t> reads(kThreads, 0);
                std::vector<int> errs(kThreads, 0);
                std::vector<std::thread> th;
                for (int t = 0; t < kThreads; ++t)
                    th.emplace_back([&, t] {
                        const std::int64_t one = 1;
                        mine[t].assign(kPerThread, -1);  // (results are defined at the next flush)
                        for (int k = 0; k < kPerThread; ++k) {
                            std::int64_t& old = mine[t][std::size_t(k)];
                            errs[t] += FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, 1, base, MPI_SUM, w.win) != 0;
                            for (std::int64_t seen = 0;;) {  // compare_and_swap increment
                                const std::int64_t next = seen + 1;
                                std::int64_t got = -1;
                                errs[t] +=
                                    FRMA_Compare_and_swap(&next, &seen, &got, MPI_INT64_T, 1, base + 64, w.win) != 0;
                                errs[t] += FRMA_Win_flush(1, w.win) != 0;  // (got is defined then)
                                if (got == seen || got < 0) break;
                                seen = got;
                            }
                            std::int64_t now = -1;
                            errs[t] += FRMA_Fetch_and_op(nullptr, &now, MPI_INT64_T, 1, base, MPI_NO_OP, w.win) != 0;
                            errs[t] += FRMA_Win_flush(1, w.win) != 0;
                            reads[t] = std::max(reads[t], now);
                            errs[t] += now <= old;  // my own add is in it
                        }
                        errs[t] += FRMA_Win_flush(1, w.win) != 0;
                    });
                for (auto& x : th) x.join();
                for (int t = 0; t < kThreads; ++t) {
                    bad += errs[t];
                    olds.insert(olds.end(), mine[t].begin(), mine[t].end());
                    max_read = std::max(max_read, reads[t]);
                }
                // Bad input on the same path: the error class, nothing applied.
                const std::int64_t one = 1;
                std::int64_t old = 0;
                const int range =
                    FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, 1, dyn ? base + 4096 : 4096, MPI_SUM, w.win);
                bad += range != MPI_ERR_RMA_RANGE;
                bad += FRMA_Compare_and_swap(&one, &one, &old, MPI_INT64_T, 1, dyn ? base - 8 : -8, w.win) !=
                       (dyn ? MPI_ERR_RMA_RANGE : MPI_ERR_DISP);
                bad += FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, n, base, MPI_SUM, w.win) != MPI_ERR_RANK;
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
                served += fastrma::detail::stat_total(fastrma::detail::Stat::atomics_served) - s0;
                fresh_seen += fastrma::detail::served::fresh(w.impl()->state_words(1));
            }
            more = another_served_round(served, t0);
        }
        const std::int64_t total = std::int64_t(n - 1) * kThreads * kPerThread * round;
        // Every fetched old value, from every origin, once: 0 .. total-1.
        int count = int(olds.size());
        std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
        MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 1, MPI_COMM_WORLD);
        int sum = 0;
        for (int r = 0; r < n; ++r) displs[std::size_t(r)] = sum, sum += counts[std::size_t(r)];
        std::vector<std::int64_t> all(std::size_t(me == 1 ? sum : 0));
        MPI_Gatherv(olds.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 1,
                    MPI_COMM_WORLD);
        if (me == 1) {
            std::sort(all.begin(), all.end());
            bad += std::int64_t(all.size()) != total;
            for (std::size_t i = 0; i < all.size(); ++i) bad += all[i] != std::int64_t(i);
            std::int64_t add = 0, swap = 0;
            std::memcpy(&add, w.mem.data(), 8);
            std::memcpy(&swap, w.mem.data() + 64, 8);
            bad += add != total;
            bad += swap != total;
            for (std::size_t i = 8; i < 4096; ++i) bad += (i < 64 || i >= 72) && w.mem[i] != 0;
        } else {
            bad += max_read > total;
        }
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(bad, 0) << (dyn ? "dynamic" : "create") << " after " << round << " rounds";
        if (me == 0) expect_served(w, "fetch_and_op / compare_and_swap", served, round, fresh_seen);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// A target that waits in fastrma's own sync calls (PSCW's wait, a fence) serves as one
// waiting in the host MPI does: its wait loop advertises it and answers the served slots
// (without that, only the host's progress hook would, and a target inside FRMA_Win_wait or
// FRMA_Win_fence never runs it). Rounds of one put and one get each (a drain of at most 8
// small pieces goes to the served slots), the lengths in turn, drained at the complete or
// the fence, until some were served (up to 10 s each mode); every byte checked.
TEST(ServedTransfers, ATargetWaitingInPscwOrFenceServes) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, SizePlan::kBytes);
        if (!w.over_cma()) continue;
        const bool expected = w.impl()->engine().config().cma_batch >= kServedBound;
        const SizePlan plan;
        MPI_Group world, peer_grp;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        const int peer = me == 0 ? 1 : 0;
        MPI_Group_incl(world, 1, &peer, &peer_grp);
        for (const char* mode : {"pscw", "fence"}) {
            const bool pscw = mode[0] == 'p';
            std::uint64_t served = 0;
            int round = 0, fresh_seen = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (int more = 1; more; ++round) {
                int bad = 0;
                std::vector<unsigned char> src(plan.end), got(plan.end, 0x5A);
                if (pscw) {
                    if (me == 1) {
                        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_post(peer_grp, 0, w.win));
                    } else if (me == 0) {
                        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_start(peer_grp, 0, w.win));
                    }
                } else {
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
                }
                const std::uint64_t s0 = served_transfers();
                const auto [o, len] = plan.at[std::size_t(round) % plan.at.size()];
                if (me == 0) {
                    for (std::size_t i = 0; i < len; ++i) src[o + i] = put_value(round, len, i);
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Put(src.data() + o, int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(o),
                                                    int(len), MPI_BYTE, w.win));
                    EXPECT_EQ(MPI_SUCCESS,
                              FRMA_Get(got.data() + o, int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(SizePlan::kGet + o),
                                       int(len), MPI_BYTE, w.win));
                }
                if (me == 0) fresh_seen += fastrma::detail::served::fresh(w.impl()->state_words(1));
                if (pscw) {
                    if (me == 0) {
                        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
                    } else if (me == 1) {
                        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));  // waits here: serves
                    }
                } else {
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));  // the target waits here: serves
                }
                if (me == 0) {
                    served += served_transfers() - s0;
                    for (std::size_t i = 0; i < len; ++i) bad += got[o + i] != fill_of(1, SizePlan::kGet + o + i);
                    for (std::size_t i = o + len; i < std::min(o + len + 8, got.size()); ++i) bad += got[i] != 0x5A;
                } else if (me == 1) {
                    // This round's bytes, the 8 after them untouched; then the fill again.
                    for (std::size_t i = 0; i < len; ++i) bad += w.mem[o + i] != put_value(round, len, i);
                    for (std::size_t i = o + len; i < o + len + 8; ++i) bad += w.mem[i] != fill_of(me, i);
                    for (std::size_t i = 0; i < len; ++i) w.mem[o + i] = fill_of(me, o + i);
                }
                MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                ASSERT_EQ(bad, 0) << (dyn ? "dynamic " : "create ") << mode << " round " << round;
                more = expected && served == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10);
                MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
            }
            if (!pscw) {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
            }
            if (me == 0) {
                // With more ranks than cores the target may never run while the origin
                // drains (MPICH's blocking calls spin on the other ranks' cores): a beat seen
                // fresh when the op was issued says nothing of the drain at complete or fence
                // (CI, MPICH, 4 ranks under load: fresh 24 times, 0 served). Asserted where
                // every rank has a core: no more ranks than cores, and no other work taking
                // them (a 1-minute load average of at most twice the cores, the ranks' own
                // threads included: seen failing at load 11, main's binary as well as a
                // branch's, 1-2 runs in 3).
                double load = 0;
                const int cores = int(std::thread::hardware_concurrency());
                const bool own_cores = n <= cores && getloadavg(&load, 1) == 1 && load <= 2.0 * cores;
                if (expected && own_cores) {
                    EXPECT_GT(served, 0u)
                        << (dyn ? "dynamic " : "create ") << mode << ": nothing served in " << round
                        << " rounds while the target waited in fastrma, its beat seen fresh " << fresh_seen << " times";
                }
                std::printf("ServedTransfers (%s, %s): %llu served in %d rounds, the beat fresh %d times\n",
                            dyn ? "dynamic" : "create", mode, static_cast<unsigned long long>(served), round,
                            fresh_seen);
            }
        }
        MPI_Group_free(&peer_grp);
        MPI_Group_free(&world);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// The target computes outside MPI (spins on its memory): no fresh beat, so the origin moves
// everything by cross-memory attach itself, without waiting for a target that does not
// answer. The last put sets the flag the target waits for. The origin starts only once the
// target has returned from its last MPI call (a word in a host shared-memory window, written
// after its barrier): a target still inside a barrier that the origin has left does serve,
// as it should.
TEST(ServedTransfers, ATargetComputingOutsideMpiIsNotWaitedFor) {
    using namespace fastrma::detail;
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    MPI_Comm node;
    ASSERT_EQ(MPI_SUCCESS, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    std::uint64_t* out_of_mpi = nullptr;  // rank 1's word: the round it left MPI in
    MPI_Win side = MPI_WIN_NULL;
    if (node_size == n) {
        ASSERT_EQ(MPI_SUCCESS, MPI_Win_allocate_shared(me == 1 ? 8 : 0, 8, MPI_INFO_NULL, node, &out_of_mpi, &side));
        MPI_Aint sz = 0;
        int du = 0;
        ASSERT_EQ(MPI_SUCCESS, MPI_Win_shared_query(side, 1, &sz, &du, &out_of_mpi));
        if (me == 1) __atomic_store_n(out_of_mpi, 0, __ATOMIC_RELEASE);
    }
    std::uint64_t round = 0;
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, SizePlan::kBytes + 8);
        if (!w.over_cma() || !out_of_mpi) continue;
        ++round;
        const SizePlan plan;
        const std::size_t flag = SizePlan::kBytes;
        int bad = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0) {
            const auto t0 = std::chrono::steady_clock::now();
            while (__atomic_load_n(out_of_mpi, __ATOMIC_ACQUIRE) != round) {
                if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
                    ADD_FAILURE() << "the target never left its barrier";
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            const std::uint64_t s0 = served_transfers(), d0 = stat_total(Stat::cma_drains);
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            bad = round_trip(w, plan, 1, 0);
            const unsigned char one = 1;
            EXPECT_EQ(MPI_SUCCESS, FRMA_Put(&one, 1, MPI_BYTE, 1, w.disp[1] + MPI_Aint(flag), 1, MPI_BYTE, w.win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
            // (The first transfers may still see the beat of the target's last MPI call.)
            EXPECT_LE(served_transfers() - s0, 8u);
            if (w.impl()->engine().config().cma_batch >= kServedBound) {  // (FASTRMA_CMA_BATCH=0: no batch)
                EXPECT_GE(stat_total(Stat::cma_drains) - d0, 2 * plan.at.size() - 8);
            }
        } else if (me == 1) {
            __atomic_store_n(out_of_mpi, round, __ATOMIC_RELEASE);
            const auto t0 = std::chrono::steady_clock::now();
            while (__atomic_load_n(&w.mem[flag], __ATOMIC_ACQUIRE) != 1) {
                if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
                    ADD_FAILURE() << "the flag never came";
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            w.mem[flag] = fill_of(me, flag);
            bad = check_target(w, plan, 0);
        }
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(bad, 0) << (dyn ? "dynamic" : "create");
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (side != MPI_WIN_NULL) MPI_Win_free(&side);
    MPI_Comm_free(&node);
}

// Four origin threads at once, each its own lengths and slice of the target's part, each op
// flushed by its thread: the slots are shared, every transfer lands once and intact.
TEST(ServedTransfers, ManyThreadsAtOnce) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    constexpr int kThreads = 4;
    constexpr std::size_t kSlice = 2048;
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, 2 * kThreads * kSlice);
        if (!w.over_cma()) continue;
        int bad = 0;
        // Thread t, op k: len = 1 + (k * 7 + t) % bound at t * kSlice + k * 104.
        auto len_of = [](int t, int k) { return std::size_t(1 + (k * 7 + t) % int(kServedBound)); };
        constexpr int kOps = 19;
        if (me == 0) {
            const std::uint64_t s0 = served_transfers();
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            std::atomic<int> errs{0};
            std::vector<std::thread> ts;
            for (int t = 0; t < kThreads; ++t)
                ts.emplace_back([&, t] {
                    unsigned char src[kServedBound], got[kServedBound];
                    for (int rep = 0; rep < 20; ++rep)
                        for (int k = 0; k < kOps; ++k) {
                            const std::size_t len = len_of(t, k), o = std::size_t(t) * kSlice + std::size_t(k) * 104;
                            for (std::size_t i = 0; i < len; ++i) src[i] = put_value(t, len, i);
                            if (FRMA_Put(src, int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(o), int(len), MPI_BYTE,
                                         w.win) != MPI_SUCCESS ||
                                FRMA_Win_flush(1, w.win) != MPI_SUCCESS)
                                errs.fetch_add(1);
                            const std::size_t g = kThreads * kSlice + o;
                            if (FRMA_Get(got, int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(g), int(len), MPI_BYTE,
                                         w.win) != MPI_SUCCESS ||
                                FRMA_Win_flush(1, w.win) != MPI_SUCCESS)
                                errs.fetch_add(1);
                            for (std::size_t i = 0; i < len; ++i)
                                if (got[i] != fill_of(1, g + i)) errs.fetch_add(1);
                        }
                });
            for (auto& t : ts) t.join();
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
            bad = errs.load();
            const std::uint64_t served = served_transfers() - s0;
            MPI_Send(&bad, 1, MPI_INT, 1, 72, MPI_COMM_WORLD);
            std::printf("ServedTransfers.ManyThreadsAtOnce (%s): %llu of %d transfers served\n",
                        dyn ? "dynamic" : "create", static_cast<unsigned long long>(served), 2 * kThreads * kOps * 20);
        } else if (me == 1) {
            MPI_Recv(&bad, 1, MPI_INT, 0, 72, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            std::vector<char> written(w.mem.size(), 0);
            for (int t = 0; t < kThreads; ++t)
                for (int k = 0; k < kOps; ++k) {
                    const std::size_t len = len_of(t, k), o = std::size_t(t) * kSlice + std::size_t(k) * 104;
                    for (std::size_t i = 0; i < len; ++i) {
                        written[o + i] = 1;
                        bad += w.mem[o + i] != put_value(t, len, i);
                    }
                }
            for (std::size_t i = 0; i < w.mem.size(); ++i)
                if (!written[i]) bad += w.mem[i] != fill_of(me, i);
        }
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(bad, 0) << (dyn ? "dynamic" : "create");
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// A put completed by a flush is there for everyone: rank 0 puts to rank 1 and flushes, then
// tells rank 2, whose gets from rank 1 must see every byte. Rank 1 waits in MPI throughout.
TEST(ServedTransfers, APutFlushedIsSeenByAThirdRanksGet) {
    const int me = world_rank(), n = world_size();
    if (n < 3) GTEST_SKIP() << "needs three ranks";
    for (bool dyn : {false, true}) {
        UnmappedWin w(dyn, SizePlan::kBytes);
        if (!w.over_cma()) continue;
        const SizePlan plan;
        int bad = 0;
        if (me == 0 || me == 2) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        }
        for (int round = 0; round < 5; ++round) {
            if (me == 0) {
                std::vector<unsigned char> src(256);
                for (auto [o, len] : plan.at) {
                    for (std::size_t i = 0; i < len; ++i) src[i] = put_value(round, len, i);
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Put(src.data(), int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(o),
                                                    int(len), MPI_BYTE, w.win));
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(1, w.win));
                }
                MPI_Send(nullptr, 0, MPI_BYTE, 2, 73, MPI_COMM_WORLD);
                MPI_Recv(nullptr, 0, MPI_BYTE, 2, 74, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (me == 2) {
                MPI_Recv(nullptr, 0, MPI_BYTE, 0, 73, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                std::vector<unsigned char> got(256 + 8);
                for (auto [o, len] : plan.at) {
                    std::memset(got.data(), 0x5A, got.size());
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Get(got.data(), int(len), MPI_BYTE, 1, w.disp[1] + MPI_Aint(o),
                                                    int(len), MPI_BYTE, w.win));
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(1, w.win));
                    for (std::size_t i = 0; i < len; ++i) bad += got[i] != put_value(round, len, i);
                    for (std::size_t i = len; i < got.size(); ++i) bad += got[i] != 0x5A;
                }
                MPI_Send(nullptr, 0, MPI_BYTE, 0, 74, MPI_COMM_WORLD);
            }
        }
        if (me == 0 || me == 2) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        }
        // Rank 1 has waited in this reduction all along.
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(bad, 0) << (dyn ? "dynamic" : "create");
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// ---- The served bulk area (served.hpp, bulk): large and strided transfers ----------------

// One op of the bulk test on its own region of the target's part: `pieces` blocks of `bl`
// elements of et at `stride` elements apart (negative: downward; 0: one contiguous run of
// bl elements, sent with the basic type), kind put / get / acc / gacc, op SUM or NO_OP.
struct BulkCase {
    char kind;  // 'p' put, 'g' get, 'a' acc, 'x' get_accumulate
    bool dbl;  // MPI_DOUBLE, else MPI_INT (MPI_BYTE for contiguous puts and gets)
    bool noop;
    int pieces, bl, stride;
    std::size_t base = 0, span = 0;  // the region in the target's part (set by BulkPlan)
    std::size_t esize() const { return stride == 0 && (kind == 'p' || kind == 'g') ? 1 : dbl ? 8 : 4; }
    std::size_t elems() const { return std::size_t(pieces) * std::size_t(bl); }
    // Byte offset, from base, of element e of piece k.
    std::size_t at(std::size_t k, std::size_t e) const {
        const std::size_t step = std::size_t(std::abs(stride)) * esize();
        const std::size_t top = stride < 0 ? std::size_t(pieces - 1) * step : 0;
        return stride < 0 ? top - k * step + e * esize() : k * step + e * esize();
    }
    MPI_Aint disp0() const { return MPI_Aint(at(0, 0)); }  // of piece 0, from base
};

// Every case at the thresholds: contiguous lengths around the batch's 1024 B, the slots'
// 768 B, FASTRMA_SERVED_BULK_MAX (16 KiB), a bulk part (32640 B of the default 64 KiB area),
// an accumulate of 9 parts;
// strided ops of 100 to 20000 pieces (one to several parts), both stride signs, a get whose
// pieces are sparse (1200 B apart: served) and one whose are dense (read by cross-memory attach).
struct BulkPlan {
    std::vector<BulkCase> cases;
    std::size_t bytes = 0;
    static constexpr std::size_t kGuard = 64;
    BulkPlan() {
        for (int n : {767, 769, 1024, 1025, 4096, 16384, 16385, 32640, 32641}) {
            add({'p', false, false, 1, n, 0});
            add({'g', false, false, 1, n, 0});
        }
        for (int n : {193, 257, 1024, 8160, 8161, 16384, 70001}) add({'a', false, false, 1, n, 0});
        for (int n : {97, 129, 4080, 4081, 8192, 8193}) add({'x', true, false, 1, n, 0});
        add({'x', true, true, 1, 4096, 0});
        for (int st : {2, -2}) {
            for (int n : {100, 5000, 20000}) add({'p', false, false, n, 1, st});
            add({'a', false, false, 5000, 1, st});
            add({'x', true, false, 5000, 1, st});
            add({'g', false, false, 200, 1, st * 150});
        }
        add({'p', true, false, 3000, 3, 5});
        add({'a', true, false, 20000, 1, 3});
        add({'a', false, false, 3000, 2, -7});
        add({'x', true, true, 5000, 1, 3});
        add({'x', false, false, 3000, 1, -4});
        add({'g', false, false, 5000, 1, 2});
    }
    void add(BulkCase c) {
        const std::size_t step = std::size_t(std::abs(c.stride)) * c.esize();
        c.span =
            c.stride == 0 ? c.elems() * c.esize() : std::size_t(c.pieces - 1) * step + std::size_t(c.bl) * c.esize();
        c.base = bytes + kGuard;
        bytes = c.base + (c.span + 7) / 8 * 8;
        cases.push_back(c);
    }
};

// The target's bytes at the start of a round: guard bytes 0xA5, each region's elements a
// function of their index (ints k * 7 + 3, doubles k * 0.25, bytes as fill_of).
void bulk_init(const BulkPlan& plan, unsigned char* mem, std::size_t total) {
    std::memset(mem, 0xA5, total);
    for (const BulkCase& c : plan.cases) {
        const std::size_t es = c.esize();
        for (std::size_t i = 0; i * es < c.span; ++i) {
            unsigned char* p = mem + c.base + i * es;
            if (es == 1) {
                *p = fill_of(1, c.base + i);
            } else if (es == 4) {
                const std::int32_t v = std::int32_t(i * 7 + 3);
                std::memcpy(p, &v, 4);
            } else {
                const double v = double(i) * 0.25;
                std::memcpy(p, &v, 8);
            }
        }
    }
}

// The origin's element j of case ci in round r (ints, doubles; bytes: its low byte).
std::int64_t bulk_value(int round, std::size_t ci, std::size_t j) {
    return std::int64_t(round) * 1000 + std::int64_t(ci) * 17 + std::int64_t(j % 5003);
}

// Applies what origin o did in round r to `mem` (the target's bytes at origin region
// offset region), and with `result` (may be null) the values a get or get_accumulate must
// have returned: the model the target and the origins check against.
void bulk_model(const BulkPlan& plan, int round, std::size_t ci, unsigned char* region,
                std::vector<unsigned char>* result) {
    const BulkCase& c = plan.cases[ci];
    const std::size_t es = c.esize();
    if (result) result->assign(c.elems() * es, 0);
    for (std::size_t k = 0, j = 0; k < std::size_t(c.pieces); ++k)
        for (std::size_t e = 0; e < std::size_t(c.bl); ++e, ++j) {
            unsigned char* t = region + c.base + c.at(k, e);
            if (result) std::memcpy(result->data() + j * es, t, es);
            const std::int64_t v = bulk_value(round, ci, j);
            if (c.kind == 'g' || c.noop) continue;
            if (es == 1) {
                *t = static_cast<unsigned char>(v);
            } else if (es == 4) {
                std::int32_t x;
                std::memcpy(&x, t, 4);
                x = c.kind == 'p' ? std::int32_t(v) : std::int32_t(std::uint32_t(x) + std::uint32_t(v));
                std::memcpy(t, &x, 4);
            } else {
                double x;
                std::memcpy(&x, t, 8);
                x = c.kind == 'p' ? double(v) * 0.5 : x + double(v) * 0.5;
                std::memcpy(t, &x, 8);
            }
        }
}

std::uint64_t bulk_served_parts() { return fastrma::detail::stat_total(fastrma::detail::Stat::bulk_served); }
std::uint64_t bulk_withdrawn_parts() { return fastrma::detail::stat_total(fastrma::detail::Stat::bulk_withdrawn); }

// Every rank but 1 runs the plan's ops on a region of its own in rank 1's part (each op
// flushed), in rounds; rank 1 resets its part, then either waits in MPI_Barrier (served:
// parts go through its bulk area; at 3 ranks two origins contend for it, one at a time) or
// computes outside MPI for 150 ms first (its beat stale: the origins move the ops themselves
// by cross-memory attach). Afterwards rank 1 compares every byte of its part (guards
// included) with the model, and the origins compare every get's and get_accumulate's
// result: an apply skipped, or landed at a wrong offset or with the wrong stride, fails.
// The served mode repeats until a part was served (at most 10 s), asserting it once the
// target's beat was seen fresh often; create and dynamic windows.
TEST(ServedBulk, LargeAndStridedTransfersLandExactly) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a target";
    const BulkPlan plan;
    const int origins = n - 1;
    auto oidx = [](int r) { return r == 0 ? 0 : r - 1; };  // origin r's region index
    for (bool computing : {false, true}) {
        for (bool dyn : {false, true}) {
            UnmappedWin w(dyn, plan.bytes * std::size_t(origins));
            if (!w.over_cma()) continue;
            std::uint64_t served = 0;
            unsigned long long all_served = 0;  // by every origin
            int round = 0, fresh_seen = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (int more = 1; more; ++round) {
                int bad = 0;
                if (me == 1)
                    for (int o = 0; o < origins; ++o)
                        bulk_init(plan, w.mem.data() + std::size_t(o) * plan.bytes, plan.bytes);
                std::vector<unsigned char> model;
                if (me != 1) {  // the origin's view of its region, for get results
                    model.resize(plan.bytes);
                    bulk_init(plan, model.data(), model.size());
                }
                MPI_Barrier(MPI_COMM_WORLD);
                if (me != 1) {
                    const std::uint64_t s0 = bulk_served_parts();
                    const std::size_t region = std::size_t(oidx(me)) * plan.bytes;
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
                    for (std::size_t ci = 0; ci < plan.cases.size(); ++ci) {
                        const BulkCase& c = plan.cases[ci];
                        const std::size_t es = c.esize(), ne = c.elems();
                        const MPI_Datatype et = es == 1 ? MPI_BYTE : c.dbl ? MPI_DOUBLE : MPI_INT;
                        std::vector<unsigned char> src(ne * es), res(ne * es, 0x5A);
                        for (std::size_t j = 0; j < ne; ++j) {
                            const std::int64_t v = bulk_value(round, ci, j);
                            if (es == 1) {
                                src[j] = static_cast<unsigned char>(v);
                            } else if (es == 4) {
                                const std::int32_t x = std::int32_t(v);
                                std::memcpy(&src[j * 4], &x, 4);
                            } else {
                                const double x = double(v) * 0.5;
                                std::memcpy(&src[j * 8], &x, 8);
                            }
                        }
                        MPI_Datatype tt = et;
                        int tcount = int(ne);
                        if (c.stride != 0) {
                            MPI_Type_create_hvector(c.pieces, c.bl, MPI_Aint(c.stride) * MPI_Aint(es), et, &tt);
                            MPI_Type_commit(&tt);
                            tcount = 1;
                        }
                        const MPI_Aint disp = w.disp[1] + MPI_Aint(region + c.base) + c.disp0();
                        const MPI_Op op = c.noop ? MPI_NO_OP : MPI_SUM;
                        int rc = MPI_SUCCESS;
                        if (c.kind == 'p')
                            rc = FRMA_Put(src.data(), int(ne), et, 1, disp, tcount, tt, w.win);
                        else if (c.kind == 'g')
                            rc = FRMA_Get(res.data(), int(ne), et, 1, disp, tcount, tt, w.win);
                        else if (c.kind == 'a')
                            rc = FRMA_Accumulate(src.data(), int(ne), et, 1, disp, tcount, tt, op, w.win);
                        else
                            rc = FRMA_Get_accumulate(src.data(), int(ne), et, res.data(), int(ne), et, 1, disp, tcount,
                                                     tt, op, w.win);
                        EXPECT_EQ(MPI_SUCCESS, rc) << "case " << ci;
                        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(1, w.win));
                        if (tt != et) MPI_Type_free(&tt);
                        std::vector<unsigned char> want;
                        bulk_model(plan, round, ci, model.data(), &want);
                        if ((c.kind == 'g' || c.kind == 'x') && res != want) {
                            ++bad;
                            ADD_FAILURE() << (dyn ? "dynamic" : "create") << (computing ? ", computing" : ", waiting")
                                          << ": case " << ci << " (" << c.kind << ", " << c.pieces << " x " << c.bl
                                          << " at stride " << c.stride << "): wrong result";
                        }
                    }
                    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
                    served += bulk_served_parts() - s0;
                    fresh_seen += fastrma::detail::served::fresh(w.impl()->state_words(1));
                } else if (computing) {
                    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
                    volatile std::uint64_t x = 0;
                    while (std::chrono::steady_clock::now() < until) x = x + 1;  // no MPI call
                }
                MPI_Barrier(MPI_COMM_WORLD);  // rank 1 (served mode) has waited here all along
                if (me == 1) {
                    std::vector<unsigned char> want(w.mem.size());
                    for (int o = 0; o < origins; ++o) {  // (every region alike: origin o's at o * plan.bytes)
                        std::vector<unsigned char> one(plan.bytes);
                        bulk_init(plan, one.data(), one.size());
                        for (std::size_t ci = 0; ci < plan.cases.size(); ++ci)
                            bulk_model(plan, round, ci, one.data(), nullptr);
                        std::memcpy(want.data() + std::size_t(o) * plan.bytes, one.data(), plan.bytes);
                    }
                    for (std::size_t i = 0; i < want.size(); ++i)
                        if (w.mem[i] != want[i]) {
                            std::size_t ci = 0;
                            const std::size_t r = i % plan.bytes;
                            while (ci + 1 < plan.cases.size() && plan.cases[ci + 1].base <= r + BulkPlan::kGuard) ++ci;
                            ADD_FAILURE()
                                << (dyn ? "dynamic" : "create") << (computing ? ", computing" : ", waiting")
                                << ": target byte " << i << " (origin region " << i / plan.bytes << ", near case " << ci
                                << ") is " << int(w.mem[i]) << ", not " << int(want[i]);
                            ++bad;
                            break;
                        }
                }
                MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                ASSERT_EQ(bad, 0) << (dyn ? "dynamic" : "create") << " round " << round;
                all_served = served;
                MPI_Allreduce(MPI_IN_PLACE, &all_served, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
                more =
                    !computing && all_served == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10);
                MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
            }
            if (me == 0) {
                std::printf(
                    "ServedBulk (%s, %s): %llu parts served in %d rounds (%llu withdrawn or refused so far), "
                    "the beat fresh %d times\n",
                    dyn ? "dynamic" : "create", computing ? "target computing" : "target waiting",
                    static_cast<unsigned long long>(served), round,
                    static_cast<unsigned long long>(bulk_withdrawn_parts()), fresh_seen);
                if (!computing && w.served_expected() && fresh_seen >= 5) {
                    EXPECT_GT(all_served, 0u) << "no bulk part served in " << round << " rounds";
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Flavors, Passive, ::testing::Values(Flavor::allocate, Flavor::create, Flavor::create_allocmem),
                         [](const auto& info) { return std::string(flavor_name(info.param)); });

}  // namespace
