/*
 * host_pass.c — what fastrma's host-progress hooks add to every pass of the host MPI's
 * progress loop: ns per MPI_Iprobe (which runs one pass and finds nothing) with N create
 * windows over malloc'd memory open (each such window has a served-slot hook: transport/shm/served.hpp).
 * A plain MPI program, like win_churn: run it on the host MPI alone and with
 * libfastrma-mpi.so preloaded.
 *
 * usage: mpiexec -n 2 host_pass [WINDOWS] [PROBES]
 * Prints the best of 5 batches of PROBES probes on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    int provided, me;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const int n = argc > 1 ? atoi(argv[1]) : 1;
    const long probes = argc > 2 ? atol(argv[2]) : 300000;
    if (n < 0 || probes < 1) {
        if (me == 0) fprintf(stderr, "host_pass: WINDOWS >= 0, PROBES >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Win* win = malloc(sizeof(MPI_Win) * (size_t)(n ? n : 1));
    void** mem = malloc(sizeof(void*) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; ++i) {
        mem[i] = malloc(4096);
        MPI_Win_create(mem[i], 4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double best = 1e30;
    for (int b = 0; b < 5; ++b) {
        int flag;
        const double t0 = MPI_Wtime();
        for (long i = 0; i < probes; ++i) MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        const double ns = (MPI_Wtime() - t0) / (double)probes * 1e9;
        if (ns < best) best = ns;
    }
    if (me == 0) printf("host_pass: %d create windows open: %.1f ns per MPI_Iprobe (best of 5 batches)\n", n, best);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) {
        MPI_Win_free(&win[i]);
        free(mem[i]);
    }
    free(win);
    free(mem);
    MPI_Finalize();
    return 0;
}
