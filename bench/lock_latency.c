/*
 * lock_latency.c — MPI_Win_lock(EXCLUSIVE or SHARED, 1) + one 8-byte operation +
 * MPI_Win_unlock(1), rank 0 to rank 1, on an MPI_Win_allocate window, in a tight loop: the
 * per-epoch cost of a passive-target lock on shared memory, without the suite's harness
 * around it (a loop to profile). Rank 1 waits in a blocking MPI_Recv meanwhile. Built
 * twice: lock_latency (FRMA_* calls, fastrma) and lock_latency_mpi (the same program on the
 * host MPI's MPI_* calls, e.g. under --mca osc sm).
 *
 * usage: mpiexec -n 2 lock_latency [EPOCHS] [put|get|acc|fop|none] [excl|shared] [THREADS]
 * Prints the fastest and the median of 100 batch means (ns per lock + op + unlock) and
 * checks the targets' values (acc and fop add 1 per epoch). THREADS > 1: that many threads
 * of rank 0 run the loop at once, thread t on target (t + 1) % 2 (each its own lock when
 * THREADS is 2), one line each; rank 1 then sleeps between polls instead of waiting in
 * MPI_Recv, so that the threads have the cores.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_common.h"

enum { kBatches = 100 };
static WIN win;
static long per;
static int lock_type, kind;
struct Thread {
    int target;
    double mean[kBatches];
};

static void* loop(void* arg) {
    struct Thread* t = arg;
    const int r = t->target;
    int64_t one = 1, old = 0;
    for (int b = 0; b < kBatches; ++b) {
        const double t0 = now_ns();
        for (long i = 0; i < per; ++i) {
            W(Win_lock)(lock_type, r, 0, win);
            if (kind == 1)
                W(Put)(&one, 1, MPI_INT64_T, r, 1, 1, MPI_INT64_T, win);
            else if (kind == 2)
                W(Get)(&old, 1, MPI_INT64_T, r, 1, 1, MPI_INT64_T, win);
            else if (kind == 3)
                W(Accumulate)(&one, 1, MPI_INT64_T, r, 0, 1, MPI_INT64_T, MPI_SUM, win);
            else if (kind == 4)
                W(Fetch_and_op)(&one, &old, MPI_INT64_T, r, 0, MPI_SUM, win);
            W(Win_unlock)(r, win);
        }
        t->mean[b] = (now_ns() - t0) / per;
    }
    qsort(t->mean, kBatches, sizeof t->mean[0], by_value);
    return NULL;
}

int main(int argc, char** argv) {
    int provided, me, np;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const long epochs = argc > 1 ? atol(argv[1]) : 200000;
    const char* op = argc > 2 ? argv[2] : "put";
    const int shared = argc > 3 && !strcmp(argv[3], "shared");
    const int threads = argc > 4 ? atoi(argv[4]) : 1;
    lock_type = shared ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE;
    if (np != 2 || epochs < 100 || threads < 1 || threads > 64) {
        if (me == 0) fprintf(stderr, "lock_latency: 2 ranks, at least 100 epochs, 1-64 threads\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t* base = NULL;
    W(Win_allocate)(4096, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    base[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        per = epochs / kBatches;
        kind = !strcmp(op, "put") ? 1 : !strcmp(op, "get") ? 2 : !strcmp(op, "acc") ? 3 : !strcmp(op, "fop") ? 4 : 0;
        const int adds = kind == 3 || kind == 4;
        struct Thread* t = calloc((size_t)threads, sizeof *t);
        pthread_t* th = calloc((size_t)threads, sizeof *th);
        for (int k = 0; k < threads; ++k) t[k].target = threads == 1 ? 1 : (k + 1) % 2;
        if (threads == 1) {
            loop(&t[0]);
        } else {
            for (int k = 0; k < threads; ++k) pthread_create(&th[k], NULL, loop, &t[k]);
            for (int k = 0; k < threads; ++k) pthread_join(th[k], NULL);
        }
        int wrong = 0;
        for (int r = 0; r < 2; ++r) {
            int64_t value = -1, want = 0;
            for (int k = 0; k < threads; ++k) want += adds && t[k].target == r ? per * kBatches : 0;
            W(Win_lock)(MPI_LOCK_SHARED, r, 0, win);
            W(Get)(&value, 1, MPI_INT64_T, r, 0, 1, MPI_INT64_T, win);
            W(Win_unlock)(r, win);
            wrong |= value != want;
        }
        for (int k = 0; k < threads; ++k) {
            char who[48] = "";
            if (threads > 1) snprintf(who, sizeof who, " thread %d of %d (target %d)", k, threads, t[k].target);
            printf("lock_latency %s %s%s: min %.1f median %.1f ns per lock + op + unlock%s\n",
                   shared ? "shared" : "excl", op, who, t[k].mean[0], t[k].mean[kBatches / 2],
                   wrong ? " WRONG VALUE" : "");
        }
        if (wrong) MPI_Abort(MPI_COMM_WORLD, 1);
        free(t);
        free(th);
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else if (threads == 1) {
        int done;
        MPI_Recv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        int done, flag = 0;
        MPI_Request rq;
        MPI_Irecv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rq);
        while (!flag) {
            usleep(10000);
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    W(Win_free)(&win);
    MPI_Finalize();
    return 0;
}
