/*
 * The install test's consumer: the smallest real use of an installed fastrma. One process
 * (an MPI singleton), one window on MPI_COMM_SELF, one FRMA_Put to itself inside a
 * lock_all epoch, read back with FRMA_Get and by load. Exits 0 and prints
 * "fastrma consumer: OK" when everything matched; anything else is a failure.
 */
#include <fastrma/fastrma.h>

#include <stdio.h>

static int failures = 0;

/* Report a failed call or check; keep going so one run shows every problem. */
static void check(int ok, const char* what) {
    if (!ok) {
        const char* msg = FRMA_Last_error_message();
        fprintf(stderr, "fastrma consumer: FAILED: %s%s%s\n", what, (msg && *msg) ? ": " : "",
                (msg && *msg) ? msg : "");
        ++failures;
    }
}

int main(int argc, char** argv) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "fastrma consumer: FAILED: MPI_Init\n");
        return 1;
    }

    FRMA_Win win = FRMA_WIN_NULL;
    int* base = NULL;
    int rc = FRMA_Win_allocate((MPI_Aint)sizeof(int), (int)sizeof(int), MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
    check(rc == MPI_SUCCESS && win != FRMA_WIN_NULL && base != NULL, "FRMA_Win_allocate");

    if (failures == 0) {
        *base = 0;
        const int value = 42;
        int fetched = -1;
        check(FRMA_Win_lock_all(0, win) == MPI_SUCCESS, "FRMA_Win_lock_all");
        check(FRMA_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win) == MPI_SUCCESS, "FRMA_Put");
        check(FRMA_Win_flush(0, win) == MPI_SUCCESS, "FRMA_Win_flush");
        check(FRMA_Get(&fetched, 1, MPI_INT, 0, 0, 1, MPI_INT, win) == MPI_SUCCESS, "FRMA_Get");
        check(FRMA_Win_flush(0, win) == MPI_SUCCESS, "FRMA_Win_flush after get");
        check(fetched == value, "FRMA_Get returned the value put");
        check(FRMA_Win_unlock_all(win) == MPI_SUCCESS, "FRMA_Win_unlock_all");
        check(*base == value, "window memory holds the value put");
        if (fetched != value || *base != value) {
            fprintf(stderr, "fastrma consumer: put %d, got %d, memory holds %d\n", value, fetched, *base);
        }
        check(FRMA_Win_free(&win) == MPI_SUCCESS, "FRMA_Win_free");
        check(win == FRMA_WIN_NULL, "FRMA_Win_free resets the handle");
    }

    if (MPI_Finalize() != MPI_SUCCESS) {
        fprintf(stderr, "fastrma consumer: FAILED: MPI_Finalize\n");
        ++failures;
    }
    if (failures != 0) return 1;
    printf("fastrma consumer: OK\n");
    return 0;
}
