/*
 * atomic_latency.c — one fetch_and_op (MPI_SUM) or compare_and_swap of an 8-byte integer
 * + flush, rank 0 to rank 1, in one lock_all epoch, on a create window over malloc'd memory
 * or a dynamic window: what a PGAS counter costs when the peers cannot map each other's
 * memory. The target either waits inside MPI (a blocking MPI_Recv) or computes, calling
 * MPI_Test only every few hundred microseconds. Built twice: atomic_latency (FRMA_* calls,
 * fastrma) and atomic_latency_mpi (the same program on the host MPI's MPI_* calls).
 *
 * usage: mpiexec -n 2 atomic_latency [OPS] [fop|cas] [create|dynamic] [mpi|compute]
 * Prints the fastest and the median of 100 batch means (ns per op + flush) and checks the
 * counter.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_common.h"

int main(int argc, char** argv) {
    int provided, me, np;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const long ops = argc > 1 ? atol(argv[1]) : 20000;
    const int cas = argc > 2 && !strcmp(argv[2], "cas");
    const int dynamic = argc > 3 && !strcmp(argv[3], "dynamic");
    const int compute = argc > 4 && !strcmp(argv[4], "compute");
    if (np != 2 || ops < 100) {
        if (me == 0) fprintf(stderr, "atomic_latency: 2 ranks and at least 100 ops\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t* mem = calloc(512, sizeof(int64_t));
    WIN win;
    MPI_Aint disp = 0;
    if (dynamic) {
        W(Win_create_dynamic)(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        W(Win_attach)(win, mem, 512 * sizeof(int64_t));
        MPI_Get_address(mem, &disp);
    } else {
        W(Win_create)(mem, 512 * sizeof(int64_t), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    }
    MPI_Bcast(&disp, 1, MPI_AINT, 1, MPI_COMM_WORLD);  // rank 1's counter
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        enum { kBatches = 100 };
        double mean[kBatches];
        const long per = ops / kBatches;
        int64_t one = 1, zero = 0, old = 0;
        W(Win_lock_all)(0, win);
        for (int b = 0; b < kBatches; ++b) {
            const double t0 = now_ns();
            for (long i = 0; i < per; ++i) {
                if (cas)
                    W(Compare_and_swap)(&zero, &zero, &old, MPI_INT64_T, 1, disp, win);
                else
                    W(Fetch_and_op)(&one, &old, MPI_INT64_T, 1, disp, MPI_SUM, win);
                W(Win_flush)(1, win);
            }
            mean[b] = (now_ns() - t0) / per;
        }
        int64_t counter = -1;
        W(Fetch_and_op)(NULL, &counter, MPI_INT64_T, 1, disp, MPI_NO_OP, win);
        W(Win_unlock_all)(win);
        qsort(mean, kBatches, sizeof mean[0], by_value);
        const int64_t want = cas ? 0 : per * kBatches;
        printf("atomic_latency %s %s, target %s: min %.0f median %.0f ns per op + flush%s\n", cas ? "cas" : "fop",
               dynamic ? "dynamic" : "create", compute ? "computing" : "in MPI", mean[0], mean[kBatches / 2],
               counter == want ? "" : " WRONG COUNTER");
        if (counter != want) MPI_Abort(MPI_COMM_WORLD, 1);
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else if (compute) {
        MPI_Request rq;
        int done = 0, flag = 0;
        MPI_Irecv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rq);
        volatile double x = 0;
        while (!flag) {
            for (int k = 0; k < 200000; ++k) x += k * 1e-9;  // a few hundred microseconds
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
        }
    } else {
        int done;
        MPI_Recv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (dynamic) W(Win_detach)(win, mem);
    W(Win_free)(&win);
    free(mem);
    MPI_Finalize();
    return 0;
}
