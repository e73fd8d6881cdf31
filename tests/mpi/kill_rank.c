/* kill_rank.c — a job in which one rank dies by SIGKILL, for the segment-cleanup test.
 * argv[1] = "after": every rank creates an allocate and a create window and starts an
 * epoch; then the last rank kills itself while the others wait in a barrier.
 * argv[1] = "during": window creation itself is interrupted (FASTRMA_FAULT=
 * kill_after_segment makes the last rank die right after its segment exists).
 * argv[1] = "clean": a normal job (its engine start sweeps stale names). */
#include <fastrma/fastrma.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char* mode = argc > 1 ? argv[1] : "clean";
    void* base = NULL;
    FRMA_Win a, c;
    static char user[4096];
    FRMA_Win_allocate(1 << 20, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &a);
    FRMA_Win_create(user, sizeof user, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &c);
    FRMA_Win_lock_all(0, a);
    int v = 1;
    FRMA_Put(&v, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, a);
    FRMA_Win_flush_all(a);
    if (!strcmp(mode, "after") && rank == size - 1) kill(getpid(), SIGKILL);
    FRMA_Win_unlock_all(a);
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_free(&c);
    FRMA_Win_free(&a);
    MPI_Finalize();
    return 0;
}
