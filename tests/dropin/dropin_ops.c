/*
 * dropin_ops.c — the accumulate family and the request-based operations through plain MPI:
 * MPI_Accumulate (SUM, MAX, REPLACE), MPI_Get_accumulate (SUM, NO_OP), MPI_Fetch_and_op,
 * MPI_Compare_and_swap, on int64 and double; MPI_PROC_NULL targets and zero counts;
 * MPI_Rput / Rget / Raccumulate / Rget_accumulate completed by the host's MPI_Wait, MPI_Test,
 * MPI_Waitall, MPI_Waitany and MPI_Testall. Runs with 2 or more ranks.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

static int rank, size;

enum { SUM = 0, MAX = 1, REPL = 2, GACC = 3, FOP = 4, CAS = 5, NOOP = 6, SLOTS = 8 };

static void test_atomics(void) {
    SECTION("accumulate / get_accumulate / fetch_and_op / compare_and_swap (int64)");
    int64_t* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(SLOTS * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < SLOTS; ++i) base[i] = 0;
    base[NOOP] = 4242;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    MPI_OK(MPI_Win_lock_all(0, win));
    const int64_t mine = rank + 1;
    int64_t old_gacc = -1, old_fop = -1, old_cas = -1, noop = -1;
    const int64_t zero = 0, rank_plus_one = rank + 1;
    MPI_OK(MPI_Accumulate(&mine, 1, MPI_INT64_T, 0, SUM, 1, MPI_INT64_T, MPI_SUM, win));
    MPI_OK(MPI_Accumulate(&mine, 1, MPI_INT64_T, 0, MAX, 1, MPI_INT64_T, MPI_MAX, win));
    MPI_OK(MPI_Accumulate(&mine, 1, MPI_INT64_T, 0, REPL, 1, MPI_INT64_T, MPI_REPLACE, win));
    MPI_OK(MPI_Get_accumulate(&mine, 1, MPI_INT64_T, &old_gacc, 1, MPI_INT64_T, 0, GACC, 1, MPI_INT64_T, MPI_SUM, win));
    const int64_t one = 1;
    MPI_OK(MPI_Fetch_and_op(&one, &old_fop, MPI_INT64_T, 0, FOP, MPI_SUM, win));
    MPI_OK(MPI_Compare_and_swap(&rank_plus_one, &zero, &old_cas, MPI_INT64_T, 0, CAS, win));
    MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, &noop, 1, MPI_INT64_T, 0, NOOP, 1, MPI_INT64_T, MPI_NO_OP, win));
    /* MPI_PROC_NULL targets and zero counts are no-ops that succeed. */
    MPI_OK(MPI_Put(&mine, 1, MPI_INT64_T, MPI_PROC_NULL, 0, 1, MPI_INT64_T, win));
    MPI_OK(MPI_Accumulate(&mine, 1, MPI_INT64_T, MPI_PROC_NULL, 0, 1, MPI_INT64_T, MPI_SUM, win));
    MPI_OK(MPI_Put(NULL, 0, MPI_INT64_T, 0, 0, 0, MPI_INT64_T, win));
    MPI_OK(MPI_Get(NULL, 0, MPI_INT64_T, 0, 0, 0, MPI_INT64_T, win));
    MPI_OK(MPI_Win_flush(0, win));
    CHECK_EQ(noop, 4242);
    CHECK(old_fop >= 0 && old_fop < size, "fetch_and_op returns a count seen before");
    CHECK(old_gacc >= 0, "get_accumulate returns a partial sum");
    CHECK(old_cas == 0 || (old_cas >= 1 && old_cas <= size), "compare_and_swap returns 0 or a winner");
    MPI_OK(MPI_Win_unlock_all(win));

    /* Every fetched counter value is distinct: gather them at rank 0. */
    int64_t* fops = malloc(size * sizeof(int64_t));
    int64_t* cases = malloc(size * sizeof(int64_t));
    MPI_OK(MPI_Gather(&old_fop, 1, MPI_INT64_T, fops, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Gather(&old_cas, 1, MPI_INT64_T, cases, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_EQ(base[SUM], (int64_t)size * (size + 1) / 2);
        CHECK_EQ(base[MAX], size);
        CHECK(base[REPL] >= 1 && base[REPL] <= size, "REPLACE leaves one rank's value");
        CHECK_EQ(base[GACC], (int64_t)size * (size + 1) / 2);
        CHECK_EQ(base[FOP], size);
        int winners = 0;
        for (int r = 0; r < size; ++r) {
            if (cases[r] == 0) {
                ++winners;
                CHECK_EQ(base[CAS], r + 1);
            } else {
                CHECK_EQ(cases[r], base[CAS]);
            }
            for (int q = 0; q < r; ++q) CHECK(fops[q] != fops[r], "fetch_and_op values are distinct");
        }
        CHECK_EQ(winners, 1);
        CHECK_EQ(base[NOOP], 4242);
        MPI_OK(MPI_Win_unlock(0, win));
    }
    free(fops);
    free(cases);
    MPI_OK(MPI_Win_free(&win));
}

static void test_double(void) {
    SECTION("accumulate on doubles (fence)");
    double* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(4 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < 4; ++i) base[i] = 0.5;
    MPI_OK(MPI_Win_fence(0, win));
    double add[4] = {1.0, 0.25, -2.0, 1e6};
    for (int t = 0; t < size; ++t) MPI_OK(MPI_Accumulate(add, 4, MPI_DOUBLE, t, 0, 4, MPI_DOUBLE, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 4; ++i) CHECK(base[i] == 0.5 + size * add[i], "double sums are exact for these values");
    double prod = 2.0, oldv = 0;
    MPI_OK(MPI_Win_fence(0, win));
    if (rank == 0) MPI_OK(MPI_Fetch_and_op(&prod, &oldv, MPI_DOUBLE, size - 1, 0, MPI_PROD, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (rank == 0) CHECK(oldv == 0.5 + size * 1.0, "fetch_and_op PROD returns the old value");
    if (rank == size - 1) CHECK(base[0] == 2.0 * (0.5 + size * 1.0), "PROD applied");
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Win_free(&win));
}

/* Request-based operations, completed by the host MPI's completion calls. */
static void test_requests(void) {
    SECTION("Rput / Rget / Raccumulate / Rget_accumulate with Wait, Test, Waitall, Waitany, Testall");
    enum { K = 8 };
    int64_t* base = NULL;
    MPI_Win win;
    const int slots = K * size + 2;
    MPI_OK(MPI_Win_allocate(slots * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < slots; ++i) base[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_OK(MPI_Win_lock_all(0, win));
    /* Waitall over K Rputs into the right neighbour's row for me. */
    int64_t src[K];
    MPI_Request reqs[K];
    for (int i = 0; i < K; ++i) {
        src[i] = (int64_t)rank * 100 + i;
        MPI_OK(MPI_Rput(&src[i], 1, MPI_INT64_T, right, K * rank + i, 1, MPI_INT64_T, win, &reqs[i]));
        CHECK(reqs[i] != MPI_REQUEST_NULL, "Rput returns a request");
    }
    MPI_Status st[K];
    MPI_OK(MPI_Waitall(K, reqs, st));
    for (int i = 0; i < K; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL, "Waitall frees the requests");
    MPI_OK(MPI_Win_flush(right, win));

    /* Waitany over Raccumulates into rank 0's counter. */
    const int64_t one = 1;
    for (int i = 0; i < K; ++i)
        MPI_OK(MPI_Raccumulate(&one, 1, MPI_INT64_T, 0, slots - 2, 1, MPI_INT64_T, MPI_SUM, win, &reqs[i]));
    for (int done = 0; done < K; ++done) {
        int idx = MPI_UNDEFINED;
        MPI_OK(MPI_Waitany(K, reqs, &idx, MPI_STATUS_IGNORE));
        CHECK(idx >= 0 && idx < K, "Waitany names a request");
        CHECK(reqs[idx] == MPI_REQUEST_NULL, "Waitany frees it");
    }
    int idx = 0;
    MPI_OK(MPI_Waitany(K, reqs, &idx, MPI_STATUS_IGNORE));
    CHECK_EQ(idx, MPI_UNDEFINED);

    /* Testall over Rget_accumulates (fetch-and-add) on rank 0's second counter. */
    int64_t fetched[K];
    for (int i = 0; i < K; ++i)
        MPI_OK(MPI_Rget_accumulate(&one, 1, MPI_INT64_T, &fetched[i], 1, MPI_INT64_T, 0, slots - 1, 1, MPI_INT64_T,
                                   MPI_SUM, win, &reqs[i]));
    int flag = 0;
    while (!flag) MPI_OK(MPI_Testall(K, reqs, &flag, MPI_STATUSES_IGNORE));
    for (int i = 0; i < K; ++i) CHECK(fetched[i] >= 0 && fetched[i] < (int64_t)K * size, "fetched counter");
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* every Rput is flushed: read them back */

    /* Wait and Test on single Rgets of what the left neighbour put into my right... that
     * is: what I put into the right neighbour. */
    int64_t got[K];
    memset(got, 0, sizeof got);
    MPI_Request r;
    MPI_OK(MPI_Rget(got, K, MPI_INT64_T, right, K * rank, K, MPI_INT64_T, win, &r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < K; ++i) CHECK_EQ(got[i], (int64_t)rank * 100 + i);
    int64_t first = -1;
    MPI_OK(MPI_Rget(&first, 1, MPI_INT64_T, rank, K * left, 1, MPI_INT64_T, win, &r));
    flag = 0;
    while (!flag) MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(first, (int64_t)left * 100);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    if (rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_EQ(base[slots - 2], (int64_t)K * size);
        CHECK_EQ(base[slots - 1], (int64_t)K * size);
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Win_free(&win));
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) FAIL("run with 2 or more ranks");
    test_atomics();
    test_double();
    test_requests();
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    SECTION("all passed");
    MPI_OK(MPI_Finalize());
    return 0;
}
