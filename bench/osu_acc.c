/*
 * osu_acc.c — the shapes of OSU 7.4's osu_acc_latency (and 8-byte osu_fop_latency) as a plain
 * MPI program: rank 0 applies MPI_Accumulate(MPI_SUM) of SIZE bytes of TYPE to rank 1, which
 * waits in MPI_Barrier, on an allocate or create window, synchronized as OSU's -s flush
 * (MPI_Win_lock(shared) once; accumulate + MPI_Win_flush per iteration) or -s lock
 * (MPI_Win_lock(shared) + accumulate + MPI_Win_unlock per iteration). The same binary
 * measures whichever implementation serves the window (the drop-in preloaded, --mca osc sm /
 * rdma / pt2pt); bench/osu_acc_bench.sh runs it under each, alternating.
 *
 * usage: mpiexec -n 2 osu_acc LABEL [ITER_SCALE]
 * Environment: OSU_ACC_WINDOWS=allocate|create, OSU_ACC_TYPES=char|int (default both),
 * OSU_ACC_SIZES=comma-separated bytes (default 8,4096,65536,1048576).
 * Prints one line per point: osu_acc,LABEL,SHAPE,BYTES,MEDIAN_US,MIN_US (of 9 batches;
 * SHAPE is acc-WINDOW-SYNC-TYPE, or fop-WINDOW-flush-int64 for 8-byte MPI_Fetch_and_op
 * MPI_SUM + flush). The target checks the last ints of its window at the end against wrapping
 * sums (a mismatch is reported on stderr).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_common.h"

enum { kBatches = 9, kMaxBytes = 1 << 20 };

static int kSizes[16] = {8, 4096, 65536, 1 << 20};
static int nsizes = 4;

static long iterations_for(int bytes, double scale) {
    long n = bytes <= 8 ? 20000 : bytes <= 4096 ? 4000 : bytes <= 65536 ? 600 : 60;
    n = (long)(n * scale);
    return n < 1 ? 1 : n;
}

/* iters accumulates of count elements of type to rank 1, each followed by its sync (the lock
 * of -s flush is held by the caller). */
static void accumulates(MPI_Win win, int lock_sync, const void* origin, int count, MPI_Datatype type, long iters) {
    for (long i = 0; i < iters; ++i) {
        if (lock_sync) MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        MPI_Accumulate(origin, count, type, 1, 0, count, type, MPI_SUM, win);
        if (lock_sync)
            MPI_Win_unlock(1, win);
        else
            MPI_Win_flush(1, win);
    }
}

/* One point: median and minimum of kBatches batch means, in microseconds (rank 0). */
static void point(MPI_Win win, int create, int lock_sync, MPI_Datatype type, int elsize, int bytes, long iters,
                  const char* label, const char* tname, void* origin, long* applied) {
    double mean[kBatches];
    const int count = bytes / elsize;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        if (!lock_sync) MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        accumulates(win, lock_sync, origin, count, type, iters / 10 + 1); /* warm-up */
        *applied += iters / 10 + 1;
        for (int b = 0; b < kBatches; ++b) {
            const double t0 = now_ns();
            accumulates(win, lock_sync, origin, count, type, iters);
            mean[b] = (now_ns() - t0) / 1e3 / (double)iters;
        }
        *applied += (long)kBatches * iters;
        if (!lock_sync) MPI_Win_unlock(1, win);
        qsort(mean, kBatches, sizeof mean[0], by_value);
        printf("osu_acc,%s,acc-%s-%s-%s,%d,%.3f,%.3f\n", label, create ? "create" : "allocate",
               lock_sync ? "lock" : "flush", tname, bytes, mean[kBatches / 2], mean[0]);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* 8-byte fetch_and_op (MPI_SUM of int64) + flush: the single-element atomic's cost. */
static void fop_point(MPI_Win win, int create, long iters, const char* label, int64_t* counted) {
    double mean[kBatches];
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        const int64_t one = 1;
        int64_t got = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int b = 0; b < kBatches; ++b) {
            const double t0 = now_ns();
            for (long i = 0; i < iters; ++i) {
                MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 1, 0, MPI_SUM, win);
                MPI_Win_flush(1, win);
            }
            mean[b] = (now_ns() - t0) / 1e3 / (double)iters;
        }
        MPI_Win_unlock(1, win);
        *counted += (int64_t)kBatches * iters;
        qsort(mean, kBatches, sizeof mean[0], by_value);
        printf("osu_acc,%s,fop-%s-flush-int64,8,%.3f,%.3f\n", label, create ? "create" : "allocate", mean[kBatches / 2],
               mean[0]);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
    int provided, me, np;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char* label = argc > 1 ? argv[1] : "unnamed";
    const double scale = argc > 2 ? atof(argv[2]) : 1.0;
    const char* only = getenv("OSU_ACC_WINDOWS"); /* "allocate", "create" or unset: both */
    const char* types = getenv("OSU_ACC_TYPES"); /* "char", "int" or unset: both */
    if (getenv("OSU_ACC_SIZES")) { /* comma-separated bytes, at most 16, each <= 1 MiB */
        char* list = strdup(getenv("OSU_ACC_SIZES"));
        nsizes = 0;
        for (char* t = strtok(list, ","); t && nsizes < 16; t = strtok(NULL, ","))
            if (atoi(t) > 0 && atoi(t) <= kMaxBytes) kSizes[nsizes++] = atoi(t);
        free(list);
    }
    if (np != 2) {
        if (me == 0) fprintf(stderr, "osu_acc: 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char* origin = malloc(kMaxBytes);
    memset(origin, 1, kMaxBytes); /* every char 1, every int 0x01010101 */
    for (int create = 0; create <= 1; ++create) {
        if (only && strcmp(only, create ? "create" : "allocate") != 0) continue;
        void* base = NULL;
        MPI_Win win;
        if (create) {
            MPI_Alloc_mem(kMaxBytes, MPI_INFO_NULL, &base);
            memset(base, 0, kMaxBytes);
            MPI_Win_create(base, kMaxBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        } else {
            MPI_Win_allocate(kMaxBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win);
            memset(base, 0, kMaxBytes);
            MPI_Win_unlock(me, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        long applied_char_1m = 0, applied_int_1m = 0;
        for (int t = 0; t < 2; ++t) {
            if (types && strcmp(types, t ? "int" : "char") != 0) continue;
            const MPI_Datatype type = t ? MPI_INT : MPI_CHAR;
            const int elsize = t ? 4 : 1;
            for (int lock_sync = 0; lock_sync <= 1; ++lock_sync)
                for (int s = 0; s < nsizes; ++s) {
                    long n = 0;
                    point(win, create, lock_sync, type, elsize, kSizes[s], iterations_for(kSizes[s], scale), label,
                          t ? "int" : "char", origin, &n);
                    if (kSizes[s] == (1 << 20)) *(t ? &applied_int_1m : &applied_char_1m) += n;
                }
        }
        /* The target checks its last bytes (touched by the 1 MiB points only): each char
         * accumulate added 1 to each byte modulo 2^8, each int one 0x01010101 to each int
         * modulo 2^32. A mismatch is reported, not fatal: Open MPI 4.1.4's MPI_CHAR sums
         * saturate at 127 instead of wrapping. */
        MPI_Bcast(&applied_char_1m, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        MPI_Bcast(&applied_int_1m, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (me == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
            /* the char points came first: every byte then held applied_char_1m mod 256 */
            const uint32_t want =
                (uint32_t)((applied_char_1m & 0xff) * 0x01010101u) + (uint32_t)((uint64_t)applied_int_1m * 0x01010101u);
            const uint32_t* w = (const uint32_t*)((char*)base + kMaxBytes - 64);
            int bad = 0;
            for (int i = 0; i < 16; ++i) bad |= w[i] != want;
            if (bad)
                fprintf(stderr,
                        "osu_acc: %s, %s window: the target's last ints hold %u, wrapping sums give %u (%ld char "
                        "and %ld int 1 MiB accumulates)\n",
                        label, create ? "create" : "allocate", w[0], want, applied_char_1m, applied_int_1m);
            MPI_Win_unlock(1, win);
        }
        int64_t counted = 0;
        fop_point(win, create, (long)(20000 * scale) + 1, label, &counted);
        MPI_Win_free(&win);
        if (create) MPI_Free_mem(base);
    }
    free(origin);
    MPI_Finalize();
    return 0;
}
