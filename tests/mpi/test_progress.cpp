// test_progress.cpp — passive-target progress: the origin's lock, put, get, accumulate,
// fetch_and_op and flush complete while the target computes without any MPI or fastrma
// call. The target spins on its own window memory until the origin's last write (a flag)
// lands; with no asynchronous progress it would spin forever and the ctest TIMEOUT fails
// the test. Not timed otherwise. Run over shm and over am (FASTRMA_TRANSPORT=am, where the
// target's progress thread must serve every request). A third run has the target block in
// MPI_Recv with the progress thread off over am: only the host-progress hook (Open MPI's
// progress loop running fastrma's am service, src/progress/host_progress.hpp) can serve.
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "common/mpi_world.hpp"

namespace {

void run(bool allocate) {
    const int me = world_rank(), n = world_size();
    ASSERT_GE(n, 2);
    FRMA_Win win;
    std::int64_t* mem = nullptr;
    std::vector<std::int64_t> user;
    if (allocate) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(64 * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    } else {
        user.assign(64, 0);
        mem = user.data();
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, 64 * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    std::memset(mem, 0, 64 * 8);
    mem[10] = 1000;  // read by the origin's get and fetch_and_op
    MPI_Barrier(MPI_COMM_WORLD);
    const bool waits_in_mpi = std::getenv("TEST_TARGET_WAITS_IN_MPI") != nullptr;
    if (me == 0 && waits_in_mpi) {
        // The target blocks in a receive of the host MPI (no fastrma call). Run with
        // FASTRMA_PROGRESS=0 over am, only the host-progress hook can serve the origins.
        MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT_EQ(mem[63], 42);
        EXPECT_EQ(mem[1], 7);
        EXPECT_EQ(mem[2], 5 + (n - 1));
        EXPECT_EQ(mem[10], 1000 + (n - 1));
    } else if (me == 0) {
        // The target: compute on its own memory, no MPI, until the flag arrives.
        volatile std::int64_t* flag = mem + 63;
        std::uint64_t spins = 0;
        double x = 1.0;
        while (__atomic_load_n(const_cast<std::int64_t*>(flag), __ATOMIC_ACQUIRE) != 42) {
            x = x * 1.0000001 + 1e-9;  // "computation"
            ++spins;
        }
        EXPECT_GT(x, 0.0);
        EXPECT_EQ(mem[1], 7);
        EXPECT_EQ(mem[2], 5 + (n - 1));  // accumulates from every origin
        EXPECT_EQ(mem[10], 1000 + (n - 1));
    } else {
        // Every other rank: an exclusive-lock sequence against rank 0, then a shared one.
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        std::int64_t seven = 7, one = 1, got = 0, old = 0;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&seven, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 10, 1, MPI_INT64_T, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));
        EXPECT_GE(got, 1000);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        std::int64_t five = me == 1 ? 5 : 0;
        if (me == 1) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&five, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, MPI_SUM, win));
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, MPI_SUM, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 10, MPI_SUM, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, win));
        // The last origin raises the flag once everyone is done (a counter at rank 0).
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        std::int64_t done = 0;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &done, MPI_INT64_T, 0, 62, MPI_SUM, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));
        if (done == n - 2) {
            std::int64_t flag = 42;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&flag, 1, MPI_INT64_T, 0, 63, 1, MPI_INT64_T, win));
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, win));
        if (done == n - 2 && waits_in_mpi) MPI_Send(nullptr, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

TEST(PassiveProgress, TargetComputesWithoutMpiOnAllocateWindow) { run(true); }
TEST(PassiveProgress, TargetComputesWithoutMpiOnCreateWindow) { run(false); }

// A small put leaves within a bounded time even when the origin makes no further fastrma
// call: over am it waits in a batch, which the origin's progress thread sends once it has
// aged (am.hpp, kBatchAgeNs). MPI does not promise this (completion is at flush), fastrma
// does, for overlap: the origin waits in MPI_Recv, the target spins on its memory until
// the value shows and only then answers. Needs the progress thread (not run without).
TEST(PassiveProgress, SmallPutLeavesWithoutAFlush) {
    const int me = world_rank(), n = world_size();
    ASSERT_GE(n, 2);
    FRMA_Win win;
    std::int64_t* mem = nullptr;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(64 * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    std::memset(mem, 0, 64 * 8);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 1) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        const std::int64_t v = 77;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, 0, 5, 1, MPI_INT64_T, win));
        MPI_Recv(nullptr, 0, MPI_BYTE, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    } else if (me == 0) {
        while (__atomic_load_n(mem + 5, __ATOMIC_ACQUIRE) != 77) {}
        MPI_Send(nullptr, 0, MPI_BYTE, 1, 98, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

}  // namespace
