/*
 * lock_latency.c — MPI_Win_lock(EXCLUSIVE or SHARED, 1) + one 8-byte operation +
 * MPI_Win_unlock(1), rank 0 to rank 1, on an MPI_Win_allocate window, in a tight loop: the
 * per-epoch cost of a passive-target lock on shared memory, without the suite's harness
 * around it (a loop to profile). Rank 1 waits in a blocking MPI_Recv meanwhile. Built
 * twice: lock_latency (FRMA_* calls, fastrma) and lock_latency_mpi (the same program on the
 * host MPI's MPI_* calls, e.g. under --mca osc sm).
 *
 * usage: mpiexec -n 2 lock_latency [EPOCHS] [put|get|acc|fop|none] [excl|shared]
 * Prints the fastest and the median of 100 batch means (ns per lock + op + unlock) and
 * checks the target's value (acc and fop add 1 per epoch).
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
    const long epochs = argc > 1 ? atol(argv[1]) : 200000;
    const char* op = argc > 2 ? argv[2] : "put";
    const int shared = argc > 3 && !strcmp(argv[3], "shared");
    const int lock_type = shared ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE;
    if (np != 2 || epochs < 100) {
        if (me == 0) fprintf(stderr, "lock_latency: 2 ranks and at least 100 epochs\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t* base = NULL;
    WIN win;
    W(Win_allocate)(4096, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    base[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        enum { kBatches = 100 };
        double mean[kBatches];
        const long per = epochs / kBatches;
        int64_t one = 1, old = 0;
        const int kind = !strcmp(op, "put") ? 1 : !strcmp(op, "get") ? 2 : !strcmp(op, "acc") ? 3 : !strcmp(op, "fop") ? 4 : 0;
        const int adds = kind == 3 || kind == 4;
        for (int b = 0; b < kBatches; ++b) {
            const double t0 = now_ns();
            for (long i = 0; i < per; ++i) {
                W(Win_lock)(lock_type, 1, 0, win);
                if (kind == 1)
                    W(Put)(&one, 1, MPI_INT64_T, 1, 1, 1, MPI_INT64_T, win);
                else if (kind == 2)
                    W(Get)(&old, 1, MPI_INT64_T, 1, 1, 1, MPI_INT64_T, win);
                else if (kind == 3)
                    W(Accumulate)(&one, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, MPI_SUM, win);
                else if (kind == 4)
                    W(Fetch_and_op)(&one, &old, MPI_INT64_T, 1, 0, MPI_SUM, win);
                W(Win_unlock)(1, win);
            }
            mean[b] = (now_ns() - t0) / per;
        }
        int64_t value = -1;
        W(Win_lock)(MPI_LOCK_SHARED, 1, 0, win);
        W(Get)(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
        W(Win_unlock)(1, win);
        qsort(mean, kBatches, sizeof mean[0], by_value);
        const int64_t want = adds ? per * kBatches : 0;
        printf("lock_latency %s %s: min %.1f median %.1f ns per lock + op + unlock%s\n", shared ? "shared" : "excl",
               op, mean[0], mean[kBatches / 2], value == want ? "" : " WRONG VALUE");
        if (value != want) MPI_Abort(MPI_COMM_WORLD, 1);
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else {
        int done;
        MPI_Recv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    W(Win_free)(&win);
    MPI_Finalize();
    return 0;
}
