/*
 * osc_latency.c — rank 0's 8-byte MPI_Put + MPI_Win_flush, MPI_Get + MPI_Win_flush, and
 * MPI_Put alone (the per-call cost; one flush per batch) to rank 1 on an MPI_Win_allocate
 * window in a lock_all epoch, while rank 1 waits in MPI_Recv. A plain MPI program: the same
 * binary measures whichever implementation serves the window (--mca osc fastrma, the
 * drop-in preloaded, --mca osc sm / rdma); bench/osc_bench.sh runs it under each.
 *
 * usage: mpiexec -n 2 osc_latency LABEL [ITERATIONS]
 * Prints one line per measurement: osc_latency,LABEL,OP,MIN_NS,MEDIAN_NS (of 50 batch means).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_common.h"

enum { kBatches = 50 };

/* The per-op mean of each batch of op (0: put + flush, 1: get + flush, 2: put), sorted. */
static void measure(MPI_Win win, int op, long per, double* mean) {
    int64_t value = 42, got = 0;
    for (int b = 0; b < kBatches; ++b) {
        const double t0 = now_ns();
        for (long i = 0; i < per; ++i) {
            if (op == 1)
                MPI_Get(&got, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
            else
                MPI_Put(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
            if (op != 2) MPI_Win_flush(1, win);
        }
        if (op == 2) MPI_Win_flush(1, win);
        mean[b] = (now_ns() - t0) / (double)per;
    }
    qsort(mean, kBatches, sizeof mean[0], by_value);
    if (op == 1 && got != 42) {
        fprintf(stderr, "osc_latency: get read %lld, expected 42\n", (long long)got);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char** argv) {
    int provided, me, np;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char* label = argc > 1 ? argv[1] : "unnamed";
    const long iterations = argc > 2 ? atol(argv[2]) : 20000;
    if (np != 2 || iterations < kBatches) {
        if (me == 0) fprintf(stderr, "osc_latency: 2 ranks, at least %d iterations\n", kBatches);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t* base = NULL;
    MPI_Win win;
    MPI_Win_allocate(4096, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    base[0] = 0;
    MPI_Win_lock_all(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        static const char* names[] = {"put_flush", "get_flush", "put"};
        double mean[kBatches];
        for (int op = 0; op < 3; ++op) {
            measure(win, op, iterations / kBatches, mean);
            printf("osc_latency,%s,%s,%.1f,%.1f\n", label, names[op], mean[0], mean[kBatches / 2]);
        }
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else {
        int done;
        MPI_Recv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
