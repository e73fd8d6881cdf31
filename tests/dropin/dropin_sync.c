/*
 * dropin_sync.c — every synchronization mode on every window flavor, through plain MPI:
 * fence (with assertions), PSCW (wait and test), lock (exclusive and shared) with the
 * flush family, lock_all with win_sync, dynamic windows (attach / detach), shared windows
 * (allocate_shared + shared_query), and a create window over MPI_Alloc_mem memory.
 * Values are checked element by element. Runs with 2 or more ranks.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

enum { N = 16 };
static int rank, size;

static int64_t val(int from, int i) { return (int64_t)from * 1000 + i; }

/* fence: put to the right neighbour, get from the left one, accumulate into rank 0. */
static void test_fence(void) {
    SECTION("fence on an allocate window");
    int64_t* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(2 * N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < 2 * N; ++i) base[i] = -1;
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int64_t src[N];
    for (int i = 0; i < N; ++i) src[i] = val(rank, i);

    MPI_OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    MPI_OK(MPI_Put(src, N, MPI_INT64_T, right, 0, N, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; ++i) CHECK_EQ(base[i], val(left, i));
    for (int i = N; i < 2 * N; ++i) CHECK_EQ(base[i], -1);

    /* Get what the left neighbour received (from its own left). */
    int64_t got[N];
    memset(got, 0, sizeof got);
    MPI_OK(MPI_Get(got, N, MPI_INT64_T, left, 0, N, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSTORE, win));
    const int left2 = (left + size - 1) % size;
    for (int i = 0; i < N; ++i) CHECK_EQ(got[i], val(left2, i));

    /* Everyone adds (rank + 1) * i into rank 0's second half. */
    int64_t add[N];
    for (int i = 0; i < N; ++i) add[i] = (int64_t)(rank + 1) * i;
    if (rank == 0)
        for (int i = N; i < 2 * N; ++i) base[i] = 0;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate(add, N, MPI_INT64_T, 0, N, N, MPI_INT64_T, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    if (rank == 0) {
        const int64_t factor = (int64_t)size * (size + 1) / 2;
        for (int i = 0; i < N; ++i) CHECK_EQ(base[N + i], factor * i);
    }
    MPI_OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free resets the handle");
}

/* PSCW on a create window: expose to the left neighbour, access the right one. */
static void test_pscw(void) {
    SECTION("PSCW on a create window (wait, then test)");
    int32_t* mem = malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; ++i) mem[i] = -1;
    MPI_Win win;
    MPI_OK(MPI_Win_create(mem, N * sizeof(int32_t), sizeof(int32_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Group world, from_left, to_right;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Group_incl(world, 1, &left, &from_left));
    MPI_OK(MPI_Group_incl(world, 1, &right, &to_right));

    for (int round = 0; round < 2; ++round) {
        int32_t src[N];
        for (int i = 0; i < N; ++i) src[i] = (int32_t)(val(rank, i) + round * 7);
        MPI_OK(MPI_Win_post(from_left, 0, win));
        MPI_OK(MPI_Win_start(to_right, 0, win));
        MPI_OK(MPI_Put(src, N / 2, MPI_INT32_T, right, 0, N / 2, MPI_INT32_T, win));
        MPI_OK(MPI_Put(src + N / 2, N / 2, MPI_INT32_T, right, N / 2, N / 2, MPI_INT32_T, win));
        MPI_OK(MPI_Win_complete(win));
        if (round == 0) {
            MPI_OK(MPI_Win_wait(win));
        } else {
            int flag = 0;
            while (!flag) MPI_OK(MPI_Win_test(win, &flag));
        }
        for (int i = 0; i < N; ++i) CHECK_EQ(mem[i], (int32_t)(val(left, i) + round * 7));
    }

    /* Access epoch with a get: read the right neighbour's memory. */
    int32_t got[N];
    MPI_OK(MPI_Win_post(from_left, MPI_MODE_NOPUT, win));
    MPI_OK(MPI_Win_start(to_right, 0, win));
    MPI_OK(MPI_Get(got, N, MPI_INT32_T, right, 0, N, MPI_INT32_T, win));
    MPI_OK(MPI_Win_complete(win));
    MPI_OK(MPI_Win_wait(win));
    for (int i = 0; i < N; ++i) CHECK_EQ(got[i], (int32_t)(val(rank, i) + 7));

    MPI_OK(MPI_Group_free(&from_left));
    MPI_OK(MPI_Group_free(&to_right));
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Win_free(&win));
    free(mem);
}

/* lock / unlock: an exclusive read-modify-write counter, shared-lock puts with the flush
 * family. */
static void test_lock(void) {
    SECTION("lock exclusive / shared with flush, flush_local");
    int64_t* base = NULL;
    MPI_Win win;
    const int slots = 1 + size;
    MPI_OK(MPI_Win_allocate(slots * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < slots; ++i) base[i] = 0;
    MPI_OK(MPI_Win_unlock(rank, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    for (int k = 0; k < 5; ++k) {
        int64_t c = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&c, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_flush(0, win));
        ++c;
        MPI_OK(MPI_Put(&c, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }

    /* Shared locks: each rank writes its slot at every target. */
    for (int t = 0; t < size; ++t) {
        int64_t v = val(rank, t);
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
        MPI_OK(MPI_Put(&v, 1, MPI_INT64_T, t, 1 + rank, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_flush_local(t, win));
        v = -5; /* the origin buffer is reusable after flush_local */
        MPI_OK(MPI_Win_flush(t, win));
        MPI_OK(MPI_Win_unlock(t, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    if (rank == 0) CHECK_EQ(base[0], 5 * size);
    for (int r = 0; r < size; ++r) CHECK_EQ(base[1 + r], val(r, rank));
    MPI_OK(MPI_Win_unlock(rank, win));
    MPI_OK(MPI_Win_free(&win));
}

/* lock_all: puts to every rank, the whole flush family, win_sync before local reads. */
static void test_lock_all(void) {
    SECTION("lock_all with flush / flush_all / flush_local_all / win_sync");
    int64_t* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(size * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < size; ++i) base[i] = -1;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    MPI_OK(MPI_Win_lock_all(0, win));
    int64_t* src = malloc(size * sizeof(int64_t));
    for (int t = 0; t < size; ++t) {
        src[t] = val(rank, t);
        MPI_OK(MPI_Put(&src[t], 1, MPI_INT64_T, t, rank, 1, MPI_INT64_T, win));
        if (t % 2)
            MPI_OK(MPI_Win_flush(t, win));
        else
            MPI_OK(MPI_Win_flush_local(t, win));
    }
    MPI_OK(MPI_Win_flush_local_all(win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    for (int r = 0; r < size; ++r) CHECK_EQ(base[r], val(r, rank));
    /* A get of what the right neighbour holds. */
    const int right = (rank + 1) % size;
    int64_t got = 0;
    MPI_OK(MPI_Get(&got, 1, MPI_INT64_T, right, rank, 1, MPI_INT64_T, win));
    MPI_OK(MPI_Win_flush(right, win));
    CHECK_EQ(got, val(rank, right));
    MPI_OK(MPI_Win_unlock_all(win));
    free(src);
    MPI_OK(MPI_Win_free(&win));
}

/* A dynamic window: attach, exchange addresses, put to the right neighbour, detach. */
static void test_dynamic(void) {
    SECTION("dynamic window: attach / put / get / detach");
    MPI_Win win;
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int64_t* mem = malloc(N * sizeof(int64_t));
    for (int i = 0; i < N; ++i) mem[i] = -1;
    MPI_OK(MPI_Win_attach(win, mem, N * sizeof(int64_t)));
    MPI_Aint mine, *addrs = malloc(size * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(mem, &mine));
    MPI_OK(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));

    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int64_t src[N];
    for (int i = 0; i < N; ++i) src[i] = val(rank, i);
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Put(src, N, MPI_INT64_T, right, addrs[right], N, MPI_INT64_T, win));
    MPI_OK(MPI_Win_flush(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    for (int i = 0; i < N; ++i) CHECK_EQ(mem[i], val(left, i));
    int64_t got = 0;
    MPI_OK(MPI_Get(&got, 1, MPI_INT64_T, left, addrs[left] + 3 * (MPI_Aint)sizeof(int64_t), 1, MPI_INT64_T, win));
    MPI_OK(MPI_Win_flush(left, win));
    CHECK_EQ(got, val((left + size - 1) % size, 3));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_detach(win, mem));
    MPI_OK(MPI_Win_free(&win));
    free(addrs);
    free(mem);
}

/* allocate_shared: each rank writes its part, everyone reads its neighbour's by load. */
static void test_shared(void) {
    SECTION("allocate_shared + shared_query (load/store)");
    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int nrank, nsize;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    int64_t* mine = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate_shared(N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, node, &mine, &win));
    MPI_OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < N; ++i) mine[i] = val(nrank, i);
    MPI_OK(MPI_Win_sync(win));
    MPI_OK(MPI_Barrier(node));
    MPI_OK(MPI_Win_sync(win));
    const int peer = (nrank + 1) % nsize;
    MPI_Aint psize = 0;
    int pdisp = 0;
    int64_t* theirs = NULL;
    MPI_OK(MPI_Win_shared_query(win, peer, &psize, &pdisp, &theirs));
    CHECK_EQ(psize, N * sizeof(int64_t));
    CHECK_EQ(pdisp, sizeof(int64_t));
    for (int i = 0; i < N; ++i) CHECK_EQ(theirs[i], val(peer, i));
    /* And an RMA put into the peer's part, visible by load after a flush + barrier. */
    int64_t v = val(nrank, 99);
    MPI_OK(MPI_Put(&v, 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, win));
    MPI_OK(MPI_Win_flush(peer, win));
    MPI_OK(MPI_Barrier(node));
    MPI_OK(MPI_Win_sync(win));
    CHECK_EQ(mine[0], val((nrank + nsize - 1) % nsize, 99));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Comm_free(&node));
}

/* MPI_Alloc_mem memory under a create window (the ARMCI-MPI pattern). */
static void test_alloc_mem(void) {
    SECTION("MPI_Alloc_mem + MPI_Win_create, accumulate and fetch_and_op");
    int64_t* mem = NULL;
    MPI_OK(MPI_Alloc_mem(N * sizeof(int64_t), MPI_INFO_NULL, &mem));
    CHECK(mem != NULL, "MPI_Alloc_mem returns memory");
    for (int i = 0; i < N; ++i) mem[i] = 0;
    MPI_Win win;
    MPI_OK(MPI_Win_create(mem, N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_fence(0, win));
    int64_t one = 1, old = -1;
    for (int t = 0; t < size; ++t) MPI_OK(MPI_Accumulate(&one, 1, MPI_INT64_T, t, rank, 1, MPI_INT64_T, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int r = 0; r < size; ++r) CHECK_EQ(mem[r], 1);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Win_free(&win));

    MPI_OK(MPI_Win_create(mem, N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, N - 1, MPI_SUM, win));
    MPI_OK(MPI_Win_flush(0, win));
    CHECK(old >= 0 && old < size, "fetch_and_op returns a previous count");
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_EQ(mem[N - 1], size);
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Free_mem(mem));
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) FAIL("run with 2 or more ranks");
    test_fence();
    test_pscw();
    test_lock();
    test_lock_all();
    test_dynamic();
    test_shared();
    test_alloc_mem();
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    SECTION("all passed");
    MPI_OK(MPI_Finalize());
    return 0;
}
