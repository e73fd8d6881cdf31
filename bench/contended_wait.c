/* contended_wait.c — synchronisation loops whose speed is how well the waiting ranks give up
 * the cores: 4 ranks on 2 cores beside a busy process (bench/contention_bench.sh), the same
 * plain MPI program under the drop-in and under the host MPI's own RMA.
 *
 * Phases, on an allocate window of 8 int64 per rank, each rank's target its right neighbour:
 *   lockall_flush  lock_all; ITERS x (put + flush); unlock_all
 *   fence          ITERS/8 x (put; fence)
 *   lock_excl      ITERS/8 x (lock exclusive on the right; put; unlock)
 *   lock_contended ITERS/8 x (lock exclusive on rank 0; get its counter, flush, put it + 1;
 *                  unlock): every rank waits for the same lock
 * and checks the last value every rank received (and rank 0's counter: every increment). Prints per phase the slowest rank's time per
 * iteration of the phase:
 *   contended_wait,IMPL,PHASE,MICROSECONDS
 * usage: contended_wait IMPL [ITERS] (default 20000) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "contended_wait: %s failed (%d)\n", what, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void report(const char* impl, const char* phase, double t0, int iterations) {
    double mine = (MPI_Wtime() - t0) / iterations, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) printf("contended_wait,%s,%s,%.3f\n", impl, phase, 1e6 * slowest);
}

/* Every rank's slot 0 holds what its left neighbour put last: want. Read under a lock of
 * the rank's own part, after every rank's epoch ended (the barrier). */
static void expect(const int64_t* mem, MPI_Win win, int64_t want, const char* phase) {
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win), "MPI_Win_lock (check)");
    const int64_t got = mem[0];
    check(MPI_Win_unlock(me, win), "MPI_Win_unlock (check)");
    if (got != want) {
        fprintf(stderr, "contended_wait: %s: slot 0 holds %lld, want %lld\n", phase, (long long)got, (long long)want);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char** argv) {
    int provided, me, n;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char* impl = argc > 1 ? argv[1] : "?";
    const int iters = argc > 2 ? atoi(argv[2]) : 20000;
    const int right = (me + 1) % n;
    int64_t* mem = NULL;
    MPI_Win win;
    check(MPI_Win_allocate(8 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win),
          "MPI_Win_allocate");
    for (int i = 0; i < 8; ++i) mem[i] = -1;
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t v = 0;
    double t0 = MPI_Wtime();
    check(MPI_Win_lock_all(0, win), "MPI_Win_lock_all");
    for (int i = 0; i < iters; ++i) {
        v = 1000000 * (int64_t)me + i;
        check(MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win), "MPI_Put");
        check(MPI_Win_flush(right, win), "MPI_Win_flush");
    }
    check(MPI_Win_unlock_all(win), "MPI_Win_unlock_all");
    report(impl, "lockall_flush", t0, iters);
    const int left = (me + n - 1) % n;
    expect(mem, win, 1000000 * (int64_t)left + iters - 1, "lockall_flush");

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    check(MPI_Win_fence(MPI_MODE_NOPRECEDE, win), "MPI_Win_fence");
    for (int i = 0; i < iters / 8; ++i) {
        v = 2000000 * (int64_t)(me + 1) + i;
        check(MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win), "MPI_Put");
        check(MPI_Win_fence(i + 1 == iters / 8 ? MPI_MODE_NOSUCCEED : 0, win), "MPI_Win_fence");
    }
    report(impl, "fence", t0, iters / 8);
    expect(mem, win, 2000000 * (int64_t)(left + 1) + iters / 8 - 1, "fence");

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters / 8; ++i) {
        v = 3000000 * (int64_t)(me + 1) + i;
        check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win), "MPI_Win_lock");
        check(MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win), "MPI_Put");
        check(MPI_Win_unlock(right, win), "MPI_Win_unlock");
    }
    report(impl, "lock_excl", t0, iters / 8);
    expect(mem, win, 3000000 * (int64_t)(left + 1) + iters / 8 - 1, "lock_excl");

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters / 8; ++i) {
        int64_t count = -1;
        check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win), "MPI_Win_lock (contended)");
        check(MPI_Get(&count, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win), "MPI_Get");
        check(MPI_Win_flush(0, win), "MPI_Win_flush");
        ++count;
        check(MPI_Put(&count, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win), "MPI_Put");
        check(MPI_Win_unlock(0, win), "MPI_Win_unlock (contended)");
    }
    report(impl, "lock_contended", t0, iters / 8);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        int n;
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        check(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), "MPI_Win_lock (check)");
        const int64_t got = mem[1] + 1, want = (int64_t)n * (iters / 8); /* (slot 1 starts at -1) */
        check(MPI_Win_unlock(0, win), "MPI_Win_unlock (check)");
        if (got != want) {
            fprintf(stderr, "contended_wait: lock_contended: counter %lld, want %lld\n", (long long)got,
                    (long long)want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
