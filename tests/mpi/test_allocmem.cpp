// test_allocmem.cpp — FRMA_Alloc_mem memory under create windows, the ARMCI-MPI / Global
// Arrays pattern: many allocations live at once and recycled, windows created and freed over
// them again and again. Peers must reach every part by load/store (a mapping of the owner's
// arena chunk, at the right offset, also after the same chunk was exposed before at other
// offsets), CPU atomics must be the window's domain, and descriptors must stay bounded.
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/fds.hpp"
#include "common/mpi_world.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"

namespace {

void* alloc_mem(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(MPI_SUCCESS, FRMA_Alloc_mem(MPI_Aint(n), MPI_INFO_NULL, &p));
    EXPECT_NE(p, nullptr);
    return p;
}

// A create window over `base` (n words per rank): every peer's part is mapped here, and the
// test stores into each peer's part through that mapping and loads its neighbour's stores.
void check_peers_reach_by_load_store(std::uint64_t* base, std::size_t n, int tag) {
    const int me = world_rank(), np = world_size();
    for (std::size_t i = 0; i < n; ++i) base[i] = 0;
    FRMA_Win win = FRMA_WIN_NULL;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(base, MPI_Aint(8 * n), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    auto* impl = fastrma::detail::window_of(win);
    if (impl->uses_am()) {  // FASTRMA_TRANSPORT=am: nothing is mapped by design
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
        GTEST_SKIP() << "am transport";
    }
    EXPECT_TRUE(impl->cpu_atomics());
    const int right = (me + 1) % np;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    auto* theirs = reinterpret_cast<std::uint64_t*>(impl->peer_address(right));
    ASSERT_NE(theirs, nullptr) << "rank " << right << "'s FRMA_Alloc_mem part is not mapped";
    // Store into the right neighbour's part directly, and one atomic add per word.
    for (std::size_t i = 0; i < n; ++i) {
        __atomic_store_n(&theirs[i], std::uint64_t(tag) * 1000000u + std::uint64_t(me) * 1000u + i, __ATOMIC_RELAXED);
        __atomic_fetch_add(&theirs[i], 7, __ATOMIC_RELAXED);
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    const int left = (me + np - 1) % np;
    for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(__atomic_load_n(&base[i], __ATOMIC_RELAXED),
                  std::uint64_t(tag) * 1000000u + std::uint64_t(left) * 1000u + i + 7)
            << "word " << i << " of window " << tag;
    MPI_Barrier(MPI_COMM_WORLD);  // everybody has checked before the next change
    // And the engine's own path (fetch_and_op) lands in the same memory.
    std::uint64_t one = 1, old = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_UINT64_T, right, MPI_Aint(n - 1), MPI_SUM, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    EXPECT_EQ(old, std::uint64_t(tag) * 1000000u + std::uint64_t(me) * 1000u + (n - 1) + 7);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(base[n - 1], std::uint64_t(tag) * 1000000u + std::uint64_t(left) * 1000u + (n - 1) + 8);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

}  // namespace

// Windows come and go over recycled arena blocks of changing sizes and offsets (GA creates
// and destroys arrays all the time): a peer's cached mapping of a chunk must give the new
// window's memory, not an old one's.
TEST(AllocMem, WindowsOverRecycledBlocksAreReachedByLoadStore) {
    const int me = world_rank();
    std::vector<void*> scratch;
    for (int it = 0; it < 60; ++it) {
        // Scratch buffers before and between, as ARMCI takes them, so offsets move around.
        scratch.push_back(alloc_mem(std::size_t(64 + 200 * ((it + me) % 5))));
        const std::size_t n = std::size_t(16 + 37 * (it % 9) + (it % 3 == 0 ? 2000 : 0));
        auto* base = static_cast<std::uint64_t*>(alloc_mem(8 * n));
        check_peers_reach_by_load_store(base, n, it);
        if (HasFatalFailure() || IsSkipped()) return;
        EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(base));
        if (it % 2) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(scratch.front()));
            scratch.erase(scratch.begin());
        }
    }
    for (void* p : scratch) EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(p));
}

// Thousands of live allocations (ARMCI-MPI keeps one per array and buffer), with the soft
// descriptor limit just above what is open: one descriptor per allocation cannot pass.
TEST(AllocMem, ThousandsOfLiveAllocationsAndAWindowOverTheLast) {
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    rlimit tight = old;
    tight.rlim_cur = rlim_t(open_fds() + 100);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    std::vector<void*> ps;
    for (int i = 0; i < 3000; ++i) {
        void* p = nullptr;
        int rc = FRMA_Alloc_mem(MPI_Aint(48 + 40 * (i % 50)), MPI_INFO_NULL, &p);
        if (rc != MPI_SUCCESS) {
            ADD_FAILURE() << "FRMA_Alloc_mem number " << i << " failed: " << FRMA_Last_error_message();
            break;
        }
        static_cast<char*>(p)[0] = char(i);
        ps.push_back(p);
    }
    auto* base = static_cast<std::uint64_t*>(alloc_mem(8 * 512));
    check_peers_reach_by_load_store(base, 512, 99);
    EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(base));
    for (std::size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(static_cast<char*>(ps[i])[0], char(i)) << "allocation " << i << " was overwritten";
        EXPECT_EQ(MPI_SUCCESS, FRMA_Free_mem(ps[i]));
    }
    setrlimit(RLIMIT_NOFILE, &old);
    MPI_Barrier(MPI_COMM_WORLD);
}

// An allocate window of the same layout as the one freed last on its communicator takes
// over its segment (no new shared memory, no exchange): it must start with clear sync
// words. Three PSCW epochs advance the target's completion counter in the first window; in
// the second, the origins put only after a delay, so a counter left over would end the
// target's wait before the data is there.
TEST(WindowReuse, AnAllocateWindowOfTheSameLayoutStartsClean) {
    const int me = world_rank(), np = world_size();
    if (np < 2) GTEST_SKIP() << "needs an origin and a target";
    MPI_Group world, target, origins;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    const int zero = 0;
    MPI_Group_incl(world, 1, &zero, &target);
    MPI_Group_excl(world, 1, &zero, &origins);
    auto epoch = [&](FRMA_Win win, std::uint64_t value, bool late) {
        if (me == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(origins, 0, win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(win));
        } else {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(target, 0, win));
            if (late) usleep(100000);
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&value, 1, MPI_UINT64_T, 0, MPI_Aint(me), 1, MPI_UINT64_T, win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(win));
        }
    };
    std::uint64_t* a = nullptr;
    FRMA_Win wa = FRMA_WIN_NULL;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(8 * np), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &a, &wa));
    for (int e = 0; e < 3; ++e) {
        epoch(wa, 100u + unsigned(e), false);
        if (HasFatalFailure()) return;
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, wa));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&wa));

    std::uint64_t* b = nullptr;
    FRMA_Win wb = FRMA_WIN_NULL;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(8 * np), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &b, &wb));
    if (!fastrma::detail::window_of(wb)->uses_am()) {
        EXPECT_EQ(a, b) << "the freed window's segment was not taken over";
    }
    if (me == 0)
        for (int r = 0; r < np; ++r) b[r] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    epoch(wb, 7000u + unsigned(me), true);
    if (HasFatalFailure()) return;
    if (me == 0) {
        for (int r = 1; r < np; ++r) EXPECT_EQ(b[r], 7000u + unsigned(r)) << "origin " << r;
    }
    // Locks start free: every rank takes the exclusive lock in turn.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wb));
    std::uint64_t one = 1, old = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_UINT64_T, 0, 0, MPI_SUM, wb));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, wb));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(b[0], std::uint64_t(np));
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&wb));
    MPI_Group_free(&world);
    MPI_Group_free(&target);
    MPI_Group_free(&origins);
}
