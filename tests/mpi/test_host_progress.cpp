// test_host_progress.cpp — the host-progress hook (src/progress/host_progress.hpp) on each
// host: a callback runs on the thread that waits inside the host MPI, stops when removed,
// and runs the served atomics of create windows (transport/shm/served.hpp) while the target
// blocks in MPI. Open MPI runs every entry (opal_progress_register); MPICH ch4:ucx runs
// only entries that make no MPI call (its ucp_worker_progress is the hook), and refuses the
// others. Fails if the host offers no hook, so it is registered only for hosts that have
// one (tests/mpi/CMakeLists.txt).
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/stats.hpp"
#include "common/mpi_world.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"
#include "ops/state_words.hpp"
#include "progress/host_progress.hpp"

using namespace fastrma::detail;

namespace {

struct Seen {
    std::atomic<long> runs{0}, inside{0}, on_main{0};
    std::thread::id main = std::this_thread::get_id();
};

// Every rank but 0 holds the barrier back for 100 ms, so rank 0 waits in it: its MPI spins
// its progress loop, and the hook runs our entry there.
void barrier_with_rank0_waiting() {
    if (world_rank() != 0) usleep(100'000);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(HostProgress, RunsOnTheThreadThatWaitsInMpiUntilRemoved) {
    ASSERT_GE(world_size(), 2);
    Seen seen;
    int key = 0;
    const bool added = host_progress_add(
        &key,
        [&seen] {
            seen.runs.fetch_add(1, std::memory_order_relaxed);
            if (in_host_progress()) seen.inside.fetch_add(1, std::memory_order_relaxed);
            if (std::this_thread::get_id() == seen.main) seen.on_main.fetch_add(1, std::memory_order_relaxed);
            return false;
        },
        HookCalls::no_mpi);
    ASSERT_TRUE(added) << "no host-progress hook (" << host_progress_kind() << ")";
#if defined(MPICH_VERSION) && !defined(OMPI_MAJOR_VERSION)
    EXPECT_STREQ(host_progress_kind(), "ucp_worker_progress");
#else
    EXPECT_STREQ(host_progress_kind(), "opal_progress");
#endif
    barrier_with_rank0_waiting();
    if (world_rank() == 0) {
        EXPECT_GT(seen.on_main.load(), 0) << "the entry never ran on the thread waiting in MPI_Barrier";
        EXPECT_EQ(seen.inside.load(), seen.runs.load()) << "in_host_progress() false inside the entry";
    }
    host_progress_remove(&key);
    const long after = seen.runs.load();
    barrier_with_rank0_waiting();
    EXPECT_EQ(seen.runs.load(), after) << "the entry ran after host_progress_remove";
}

TEST(HostProgress, EntriesThatCallMpiRunOnlyWhereTheHookMayCallMpi) {
    int key = 0;
    const bool added = host_progress_add(
        &key, [] { return false; }, HookCalls::mpi);
#if defined(MPICH_VERSION) && !defined(OMPI_MAJOR_VERSION)
    // MPICH runs the hook under its non-recursive lock: an MPI call there would abort.
    EXPECT_FALSE(added);
#else
    EXPECT_TRUE(added);
#endif
    if (added) host_progress_remove(&key);
    EXPECT_FALSE(in_host_progress());
}

// fetch_and_op on a create window over malloc'd memory (peers cannot map it): while rank 0
// blocks in MPI_Recv, its hook runs the window's served-atomic entry, which publishes a
// beat in rank 0's state words (transport/shm/served.hpp; only the hook stores it, never the
// progress thread). The origins watch the beat move, then run fetch_and_op + flush: served
// by the target while it runs at the same time as the origin (counted in atomics_served,
// printed), by cross-memory attach otherwise; the sum must be exact either way. How many are
// served depends on the machine's load (both ranks must hold a core at once), so only the
// beat is asserted; it stays 0 with FASTRMA_HOST_PROGRESS=0.
TEST(HostProgress, BeatsForTheServedAtomicsOfACreateWindowWhileTheTargetWaitsInMpi) {
    const int me = world_rank(), n = world_size();
    ASSERT_GE(n, 2);
    std::vector<std::int64_t> mem(8, 0);
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(mem.data(), 8 * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Barrier(MPI_COMM_WORLD);
    long my_ops = 0;
    if (me == 0) {
        for (int i = 1; i < n; ++i)
            MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        // (Rank 0 on another node: its beat is not in my segment; the fetch_and_ops go by
        // its transport.)
        const std::uint64_t* state0 = window_of(win)->state_words(0);
        const std::uint64_t* beat = state0 ? state0 + kServedBeat : nullptr;
        std::uint64_t last = 0;
        int moves = beat ? 0 : 3;
        const double t0 = MPI_Wtime();
        while (moves < 3 && MPI_Wtime() - t0 < 20.0) {
            const std::uint64_t b = __atomic_load_n(beat, __ATOMIC_ACQUIRE);
            if (b != 0 && b != last) ++moves;
            last = b;
            usleep(100);
        }
        EXPECT_EQ(moves, 3) << "rank 0's served-atomic beat did not move while it waited in MPI_Recv ("
                            << host_progress_kind() << ")";
        const std::uint64_t served0 = stat_total(Stat::atomics_served);
        const std::int64_t one = 1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        std::int64_t prev = -1;
        for (; my_ops < 2000; ++my_ops) {
            std::int64_t old = -1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 3, MPI_SUM, win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));
            ASSERT_GT(old, prev) << "fetch_and_op " << my_ops << " fetched a value not above the last";
            prev = old;
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
        std::printf("[rank %d] %llu of %ld fetch_and_op served by the target (%s)\n", me,
                    static_cast<unsigned long long>(stat_total(Stat::atomics_served) - served0), my_ops,
                    host_progress_kind());
        MPI_Send(nullptr, 0, MPI_BYTE, 0, 77, MPI_COMM_WORLD);
    }
    long total = 0;
    MPI_Allreduce(&my_ops, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(mem[3], total);
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

}  // namespace
