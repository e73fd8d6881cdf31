/*
 * osc_served.c — which one-sided component served the windows, and that a PMPI tool still
 * sees the application's calls.
 *
 *   osc_served [fastrma] every window (the four flavors) reports the engine's info key
 *                        fastrma_transport through MPI_Win_get_info: mca_osc_fastrma served it;
 *                        and MPI_Win_set_info(no_locks) reaches the engine;
 *   osc_served host      no window reports it: one of Open MPI's own components served it.
 *
 * In both, each window carries a put to the right neighbour between two fences (it must
 * land), and the PMPI wrapper linked in (osc_count_put.c) must have counted every MPI_Put.
 *
 *   osc_served fatal     a put out of range on a window left with MPI_ERRORS_ARE_FATAL: the
 *                        job aborts (the test expects the engine's message and Open MPI's).
 */
#include <stdint.h>

#include "check.h"

int osc_count_put_calls(void);

/* 1 if win's info names a fastrma transport. */
static int fastrma_served(MPI_Win win) {
    MPI_Info info;
    MPI_OK(MPI_Win_get_info(win, &info));
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    MPI_OK(MPI_Info_get(info, "fastrma_transport", MPI_MAX_INFO_VAL, value, &flag));
    MPI_OK(MPI_Info_free(&info));
    return flag && value[0];
}

/* A put of rank + 1000 * round into the right neighbour's first word, between fences;
 * mem is this rank's window memory as the window's first word sees it. */
static void put_round(MPI_Win win, MPI_Aint disp, int64_t* mem, int round, int* puts) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t value = rank + 1000 * round;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(&value, 1, MPI_INT64_T, (rank + 1) % size, disp, 1, MPI_INT64_T, win));
    ++*puts;
    MPI_OK(MPI_Win_fence(0, win));
    CHECK_EQ(*mem, (rank + size - 1) % size + 1000 * round);
}

/* MPI_Win_set_info reaches the engine: with no_locks=true it refuses MPI_Win_lock
 * (MPI_ERR_RMA_SYNC), with no_locks=false it grants it again. */
static void no_locks_reaches_engine(MPI_Win win) {
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Info hint;
    MPI_OK(MPI_Info_create(&hint));
    MPI_OK(MPI_Info_set(hint, "no_locks", "true"));
    MPI_OK(MPI_Win_set_info(win, hint));
    int cls = MPI_SUCCESS;
    MPI_Error_class(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), &cls);
    CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Info_set(hint, "no_locks", "false"));
    MPI_OK(MPI_Win_set_info(win, hint));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_OK(MPI_Win_unlock(0, win));
    MPI_OK(MPI_Info_free(&hint));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const char* mode = argc > 1 ? argv[1] : "fastrma";
    if (strcmp(mode, "fastrma") && strcmp(mode, "host") && strcmp(mode, "fatal"))
        FAIL("usage: osc_served [fastrma|host|fatal]");
    if (strcmp(mode, "fatal") == 0) {
        int64_t* mem = NULL;
        MPI_Win fatal;
        MPI_OK(MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &fatal));
        MPI_OK(MPI_Win_fence(0, fatal));
        /* One rank errs, so that one abort message reaches mpirun (two at once can lose it). */
        int64_t value = 1;
        if (check_rank() == 0) {
            MPI_Put(&value, 1, MPI_INT64_T, 0, 1000, 1, MPI_INT64_T, fatal);
            FAIL("a put out of range returned under MPI_ERRORS_ARE_FATAL");
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the abort ends it here */
        FAIL("rank 0's abort did not end the job");
    }
    const int want = strcmp(mode, "fastrma") == 0;
    int puts = 0;

    SECTION("allocate");
    int64_t* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    CHECK_EQ(fastrma_served(win), want);
    int* model = NULL;
    int flag = 0;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED, "the memory model is unified");
    if (want) no_locks_reaches_engine(win);
    put_round(win, 0, base, 1, &puts);
    MPI_OK(MPI_Win_free(&win));

    SECTION("create");
    int64_t word = -1;
    MPI_OK(MPI_Win_create(&word, sizeof word, sizeof word, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_EQ(fastrma_served(win), want);
    put_round(win, 0, &word, 2, &puts);
    MPI_OK(MPI_Win_free(&win));

    SECTION("allocate_shared");
    MPI_OK(MPI_Win_allocate_shared(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    CHECK_EQ(fastrma_served(win), want);
    put_round(win, 0, base, 3, &puts);
    MPI_OK(MPI_Win_free(&win));

    SECTION("dynamic");
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_EQ(fastrma_served(win), want);
    int64_t attached = -1;
    MPI_OK(MPI_Win_attach(win, &attached, sizeof attached));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Aint mine, right;
    MPI_OK(MPI_Get_address(&attached, &mine));
    MPI_Aint* all = malloc(sizeof(MPI_Aint) * (size_t)size);
    MPI_OK(MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD));
    right = all[(rank + 1) % size];
    free(all);
    put_round(win, right, &attached, 4, &puts);
    MPI_OK(MPI_Win_detach(win, &attached));
    MPI_OK(MPI_Win_free(&win));

    SECTION("PMPI wrapper");
    CHECK_EQ(osc_count_put_calls(), puts);

    MPI_Finalize();
    if (rank == 0) printf("osc_served: PASS (%s)\n", mode);
    return 0;
}
