/*
 * dropin_datatypes.c — derived datatypes in one-sided operations through plain MPI:
 * a vector type on the origin side, on the target side and on both, in put, get and
 * accumulate, plus a contiguous type and an indexed type; holes of the target type must keep
 * their values. Fence and lock_all epochs. Runs with 2 or more ranks.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

static int rank, size;

enum { COUNT = 4, BLOCK = 2, STRIDE = 3, SPAN = COUNT * STRIDE, PACKED = COUNT * BLOCK };

/* Element j of the packed sequence sits at this index of a vector-laid-out buffer. */
static int vec_index(int j) { return (j / BLOCK) * STRIDE + j % BLOCK; }
static int in_vector(int i) { return i % STRIDE < BLOCK && i < SPAN; }
static int32_t v(int from, int j) { return from * 1000 + j; }

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) FAIL("run with 2 or more ranks");
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Datatype vec, contig, idx;
    MPI_OK(MPI_Type_vector(COUNT, BLOCK, STRIDE, MPI_INT32_T, &vec));
    MPI_OK(MPI_Type_commit(&vec));
    MPI_OK(MPI_Type_contiguous(PACKED, MPI_INT32_T, &contig));
    MPI_OK(MPI_Type_commit(&contig));
    int lens[3] = {1, 3, 2}, displs[3] = {0, 4, 10};
    MPI_OK(MPI_Type_indexed(3, lens, displs, MPI_INT32_T, &idx));
    MPI_OK(MPI_Type_commit(&idx));

    int32_t* base = NULL;
    MPI_Win win;
    enum { WSIZE = 2 * SPAN };
    MPI_OK(MPI_Win_allocate(WSIZE * sizeof(int32_t), sizeof(int32_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));

    int32_t packed[PACKED], spread[SPAN];
    for (int j = 0; j < PACKED; ++j) packed[j] = v(rank, j);
    for (int i = 0; i < SPAN; ++i) spread[i] = -7;
    for (int j = 0; j < PACKED; ++j) spread[vec_index(j)] = v(rank, j);

    SECTION("put: contiguous origin -> vector target (fence)");
    for (int i = 0; i < WSIZE; ++i) base[i] = -1;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(packed, PACKED, MPI_INT32_T, right, 0, 1, vec, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < WSIZE; ++i) {
        if (in_vector(i))
            CHECK_EQ(base[i], v(left, (i / STRIDE) * BLOCK + i % STRIDE));
        else
            CHECK_EQ(base[i], -1); /* holes keep their values */
    }
    /* The next epoch has begun: hold the neighbour's next put until this check is done. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    SECTION("put: vector origin -> contiguous target (fence)");
    MPI_OK(MPI_Put(spread, 1, vec, right, SPAN, 1, contig, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int j = 0; j < PACKED; ++j) CHECK_EQ(base[SPAN + j], v(left, j));
    for (int i = SPAN + PACKED; i < WSIZE; ++i) CHECK_EQ(base[i], -1);

    SECTION("get: vector target -> contiguous origin, vector -> vector");
    int32_t got[PACKED], got_spread[SPAN];
    memset(got, 0, sizeof got);
    for (int i = 0; i < SPAN; ++i) got_spread[i] = -9;
    MPI_OK(MPI_Get(got, PACKED, MPI_INT32_T, right, 0, 1, vec, win));
    MPI_OK(MPI_Get(got_spread, 1, vec, right, 0, 1, vec, win));
    MPI_OK(MPI_Win_fence(0, win));
    /* right's window holds my values in the vector layout */
    for (int j = 0; j < PACKED; ++j) CHECK_EQ(got[j], v(rank, j));
    for (int i = 0; i < SPAN; ++i) {
        if (in_vector(i))
            CHECK_EQ(got_spread[i], v(rank, (i / STRIDE) * BLOCK + i % STRIDE));
        else
            CHECK_EQ(got_spread[i], -9);
    }

    SECTION("accumulate SUM with a vector target (lock_all)");
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    int32_t ones[PACKED];
    for (int j = 0; j < PACKED; ++j) ones[j] = j + 1;
    for (int t = 0; t < size; ++t) MPI_OK(MPI_Accumulate(ones, PACKED, MPI_INT32_T, t, 0, 1, vec, MPI_SUM, win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    for (int i = 0; i < SPAN; ++i) {
        const int j = (i / STRIDE) * BLOCK + i % STRIDE;
        if (in_vector(i))
            CHECK_EQ(base[i], v(left, j) + size * (j + 1));
        else
            CHECK_EQ(base[i], -1);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    SECTION("indexed target type in put and get (lock_all)");
    int32_t six[6] = {11, 12, 13, 14, 15, 16};
    MPI_OK(MPI_Put(six, 6, MPI_INT32_T, right, SPAN, 1, idx, win));
    MPI_OK(MPI_Win_flush(right, win));
    int32_t back[6] = {0};
    MPI_OK(MPI_Get(back, 6, MPI_INT32_T, right, SPAN, 1, idx, win));
    MPI_OK(MPI_Win_flush(right, win));
    for (int k = 0; k < 6; ++k) CHECK_EQ(back[k], six[k]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    CHECK_EQ(base[SPAN + 0], 11);
    CHECK_EQ(base[SPAN + 1], v(left, 1)); /* hole */
    CHECK_EQ(base[SPAN + 4], 12);
    CHECK_EQ(base[SPAN + 6], 14);
    CHECK_EQ(base[SPAN + 10], 15);
    CHECK_EQ(base[SPAN + 11], 16);
    MPI_OK(MPI_Win_unlock_all(win));

    /* The type may be freed while nothing is pending; the window keeps working. */
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&contig));
    MPI_OK(MPI_Type_free(&idx));
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    SECTION("all passed");
    MPI_OK(MPI_Finalize());
    return 0;
}
