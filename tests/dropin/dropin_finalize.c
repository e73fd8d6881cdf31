/*
 * dropin_finalize.c — initialisation and teardown through plain MPI: MPI_Init_thread with
 * MPI_THREAD_MULTIPLE, and a window that the application frees in an MPI_COMM_SELF delete
 * callback, which MPI runs at the start of MPI_Finalize (MPI-3.1 §8.7.1). The window must
 * still work there, the engine must go down once (run_dropin.sh counts one stats line per
 * rank) and nothing may run after the host has finalized. Runs with 2 or more ranks.
 */
#include <stdint.h>

#include "check.h"

static MPI_Win win = MPI_WIN_NULL;
static int64_t* base;
static int freed_in_callback;

static int free_window(MPI_Comm comm, int keyval, void* value, void* extra) {
    (void)comm, (void)keyval, (void)value, (void)extra;
    /* Still a working window: one more epoch, then free it. */
    if (MPI_Win_fence(0, win) != MPI_SUCCESS) FAIL("fence inside MPI_Finalize");
    if (MPI_Win_free(&win) != MPI_SUCCESS) FAIL("MPI_Win_free inside MPI_Finalize");
    freed_in_callback = win == MPI_WIN_NULL;
    return MPI_SUCCESS;
}

int main(int argc, char** argv) {
    int provided = -1, q = -1, rank, size;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_OK(MPI_Query_thread(&q));
    CHECK_EQ(q, provided);
    CHECK_EQ(provided, MPI_THREAD_MULTIPLE); /* Open MPI 4.1.4 here provides it */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) FAIL("run with 2 or more ranks");

    SECTION("a window freed by an MPI_COMM_SELF delete callback inside MPI_Finalize");
    MPI_OK(MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    *base = -1;
    MPI_OK(MPI_Win_fence(0, win));
    int64_t v = rank;
    MPI_OK(MPI_Put(&v, 1, MPI_INT64_T, (rank + 1) % size, 0, 1, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK_EQ(*base, (rank + size - 1) % size);

    /* Set after the first window: MPI deletes COMM_SELF attributes in reverse order of
     * setting, so this callback runs before any hook set when the RMA library started. */
    int keyval;
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_window, &keyval, NULL));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL));
    MPI_OK(MPI_Finalize());

    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin || !freed_in_callback) {
        fprintf(stderr, "FAIL rank %d: finalized %d, window freed in the callback %d\n", rank, fin, freed_in_callback);
        return 1;
    }
    if (rank == 0) printf("-- all passed\n");
    return 0;
}
