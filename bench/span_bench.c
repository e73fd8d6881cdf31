/*
 * span_bench.c — RMA on a window whose ranks sit on two hosts: rank 0 the origin, rank 1 a
 * target on the same host, rank 2 a target on the other host (4 ranks, 2 per host: 0,1 on
 * host A, 2,3 on host B; scripts/twohost.sh makes the two hosts on one machine). A plain MPI
 * program (MPI_* calls only): it measures the host MPI's own RMA, or fastrma's when
 * libfastrma-mpi.so is preloaded. scripts/span_bench.sh runs it across the hosts for every
 * implementation, interleaved, and on one host as the reference (docs/performance.md,
 * *Windows that span two hosts*).
 *
 * usage: mpiexec -n 4 span_bench [multiple|serialized|funneled|single] [--quick]
 *                               [--csv FILE] [--impl LABEL] [--idle mpi|sleep]
 *   level     thread level to initialise at (default multiple; single calls MPI_Init:
 *             Open MPI's osc pt2pt refuses MPI_THREAD_MULTIPLE)
 *   --quick   5 batches of ~4 ms per number instead of 11 of ~15 ms
 *   --csv     append one row per number: impl,level,section,target,bytes,usec
 *             (usec: per operation, or per epoch; bandwidth rows: per operation of BYTES,
 *             MB/s = bytes / usec)
 *   --impl    the impl column (default: "fastrma-" + the window's fastrma_transport info
 *             key when fastrma serves the window, else "mpi")
 *   --idle    how the ranks that take no part in a passive measurement wait: in a blocking
 *             MPI_Recv (mpi, default: they serve requests like a real target), or polling
 *             an MPI_Irecv every 500 us and sleeping between (sleep: they leave the cores
 *             to the origin and the target). The target of the measurement always waits in
 *             MPI_Recv.
 *
 * Measured for each target (same = rank 1, other = rank 2), on one MPI_Win_allocate window:
 *   lockall  one MPI_Win_lock_all epoch of rank 0: 8-byte put + MPI_Win_flush, get + flush,
 *            accumulate(MPI_SUM, MPI_INT64_T) + flush, fetch_and_op(MPI_SUM) + flush,
 *            compare_and_swap(MPI_INT64_T, equal, 0 for 0) + flush;
 *   bw       put / get of 64 KiB and 1 MiB: n operations to consecutive offsets (4 MiB in
 *            all), then one flush; usec per operation;
 *   lock     MPI_Win_lock(EXCLUSIVE or SHARED) + 8-byte put + MPI_Win_unlock;
 *   fence    8-byte put (rank 0 to the target) + MPI_Win_fence, all 4 ranks; per epoch;
 *   pscw     origin MPI_Win_start + put + MPI_Win_complete, target MPI_Win_post +
 *            MPI_Win_wait; per epoch.
 * Each number: a warm-up (a tenth of the budget, at least 3 repetitions) that sizes the
 * batches, then the median over batches of the time per repetition (lo and hi: fastest and
 * slowest batch, in the human table). Checks: the accumulate and fetch_and_op counters and
 * a put/get word are read back at the end; a wrong value prints WRONG and exits 1.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kWinBytes = (4 << 20) + 4096, kDataOff = 4096, kBwBytes = 4 << 20, kMaxBatches = 11 };
enum { kDone = 77, kCount = 78 };

static int me, np, quick, batches, idle_sleep;
static double budget_ns;
static MPI_Win win;
static char* base;
static char* local;
static FILE* csv;
static char impl[64] = "mpi";
static const char* level_name = "multiple";
static int64_t acc_count[3], fop_count[3];
static MPI_Group world_group;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

typedef void (*RepFn)(int target, long reps, size_t bytes);

static void report(const char* section, int target, size_t bytes, double* mean, int n) {
    qsort(mean, (size_t)n, sizeof mean[0], by_value);
    const double med = mean[n / 2] / 1e3, lo = mean[0] / 1e3, hi = mean[n - 1] / 1e3;
    const char* where = target == 1 ? "same" : "other";
    if (bytes >= 4096)
        printf("  %-16s %-5s %8zu B  %10.2f us  (%8.2f - %8.2f)  %9.1f MB/s\n", section, where, bytes, med, lo, hi,
               bytes / med);
    else
        printf("  %-16s %-5s %8zu B  %10.2f us  (%8.2f - %8.2f)\n", section, where, bytes, med, lo, hi);
    fflush(stdout);
    if (csv) {
        fprintf(csv, "%s,%s,%s,%s,%zu,%.3f\n", impl, level_name, section, where, bytes, med);
        fflush(csv);
    }
}

/* The origin alone times fn: warm-up sizes the batches, then `batches` batches. */
static void measure_origin(const char* section, int target, size_t bytes, RepFn fn, long per_rep_ops) {
    long reps = 0;
    const double t0 = now_ns();
    double t = t0;
    while (reps < 3 || t - t0 < budget_ns / 10) {
        fn(target, 1, bytes);
        ++reps;
        t = now_ns();
    }
    const double per = (t - t0) / reps;
    long n = (long)(budget_ns / batches / per);
    if (n < 1) n = 1;
    double mean[kMaxBatches];
    for (int b = 0; b < batches; ++b) {
        const double s = now_ns();
        fn(target, n, bytes);
        mean[b] = (now_ns() - s) / n / per_rep_ops;
    }
    report(section, target, bytes, mean, batches);
}

/* ---- passive target: one lock_all epoch ---- */
static void rep_put(int t, long reps, size_t bytes) {
    for (long i = 0; i < reps; ++i) {
        MPI_Put(local, (int)bytes, MPI_BYTE, t, kDataOff, (int)bytes, MPI_BYTE, win);
        MPI_Win_flush(t, win);
    }
}
static void rep_get(int t, long reps, size_t bytes) {
    for (long i = 0; i < reps; ++i) {
        MPI_Get(local, (int)bytes, MPI_BYTE, t, kDataOff, (int)bytes, MPI_BYTE, win);
        MPI_Win_flush(t, win);
    }
}
static void rep_acc(int t, long reps, size_t bytes) {
    (void)bytes;
    const int64_t one = 1;
    for (long i = 0; i < reps; ++i) {
        MPI_Accumulate(&one, 1, MPI_INT64_T, t, 8, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Win_flush(t, win);
    }
    acc_count[t] += reps;
}
static void rep_fop(int t, long reps, size_t bytes) {
    (void)bytes;
    const int64_t one = 1;
    int64_t old;
    for (long i = 0; i < reps; ++i) {
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, t, 0, MPI_SUM, win);
        MPI_Win_flush(t, win);
    }
    fop_count[t] += reps;
}
static void rep_cas(int t, long reps, size_t bytes) {
    (void)bytes;
    const int64_t zero = 0;
    int64_t old;
    for (long i = 0; i < reps; ++i) {
        MPI_Compare_and_swap(&zero, &zero, &old, MPI_INT64_T, t, 16, win);
        MPI_Win_flush(t, win);
    }
}
static long bw_ops(size_t bytes) { return (long)(kBwBytes / bytes); }
static void rep_bw_put(int t, long reps, size_t bytes) {
    const long n = bw_ops(bytes);
    for (long i = 0; i < reps; ++i) {
        for (long k = 0; k < n; ++k)
            MPI_Put(local + k * bytes, (int)bytes, MPI_BYTE, t, kDataOff + k * bytes, (int)bytes, MPI_BYTE, win);
        MPI_Win_flush(t, win);
    }
}
static void rep_bw_get(int t, long reps, size_t bytes) {
    const long n = bw_ops(bytes);
    for (long i = 0; i < reps; ++i) {
        for (long k = 0; k < n; ++k)
            MPI_Get(local + k * bytes, (int)bytes, MPI_BYTE, t, kDataOff + k * bytes, (int)bytes, MPI_BYTE, win);
        MPI_Win_flush(t, win);
    }
}
/* ---- passive target: lock per epoch ---- */
static void rep_lock(int t, long reps, size_t bytes, int type) {
    for (long i = 0; i < reps; ++i) {
        MPI_Win_lock(type, t, 0, win);
        MPI_Put(local, (int)bytes, MPI_BYTE, t, kDataOff, (int)bytes, MPI_BYTE, win);
        MPI_Win_unlock(t, win);
    }
}
static void rep_lock_excl(int t, long reps, size_t bytes) { rep_lock(t, reps, bytes, MPI_LOCK_EXCLUSIVE); }
static void rep_lock_shared(int t, long reps, size_t bytes) { rep_lock(t, reps, bytes, MPI_LOCK_SHARED); }

/* Every rank but the origin: wait for the origin's done message (a passive phase). */
static void wait_done(int target) {
    int done;
    if (!idle_sleep || me == target) {
        MPI_Recv(&done, 1, MPI_INT, 0, kDone, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return;
    }
    MPI_Request rq;
    int flag = 0;
    MPI_Irecv(&done, 1, MPI_INT, 0, kDone, MPI_COMM_WORLD, &rq);
    while (!flag) {
        usleep(500);
        MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
    }
}
static void send_done(void) {
    int done = 1;
    for (int r = 1; r < np; ++r) MPI_Send(&done, 1, MPI_INT, r, kDone, MPI_COMM_WORLD);
}

static void passive(int target) {
    if (me == 0) {
        MPI_Win_lock_all(0, win);
        measure_origin("put", target, 8, rep_put, 1);
        measure_origin("get", target, 8, rep_get, 1);
        measure_origin("acc", target, 8, rep_acc, 1);
        measure_origin("fetch_and_op", target, 8, rep_fop, 1);
        measure_origin("cas", target, 8, rep_cas, 1);
        measure_origin("bw_put", target, 64 << 10, rep_bw_put, bw_ops(64 << 10));
        measure_origin("bw_put", target, 1 << 20, rep_bw_put, bw_ops(1 << 20));
        measure_origin("bw_get", target, 64 << 10, rep_bw_get, bw_ops(64 << 10));
        measure_origin("bw_get", target, 1 << 20, rep_bw_get, bw_ops(1 << 20));
        MPI_Win_unlock_all(win);
        measure_origin("lock_excl_put", target, 8, rep_lock_excl, 1);
        measure_origin("lock_shared_put", target, 8, rep_lock_shared, 1);
        send_done();
    } else {
        wait_done(target);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- fence: every rank; rank 0 sizes the batches and broadcasts the counts ---- */
static void fence_reps(int target, long n) {
    for (long i = 0; i < n; ++i) {
        if (me == 0) MPI_Put(local, 8, MPI_BYTE, target, kDataOff, 8, MPI_BYTE, win);
        MPI_Win_fence(0, win);
    }
}
static void fence(int target) {
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    long n = 0;
    double t0 = now_ns(), per;
    long warm = 0;
    /* warm-up: at least 3 epochs, then until a tenth of the budget (decided by rank 0) */
    for (;;) {
        fence_reps(target, 1);
        ++warm;
        int more = 0;
        if (me == 0) more = warm < 3 || now_ns() - t0 < budget_ns / 10;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
    }
    per = (now_ns() - t0) / warm;
    if (me == 0) {
        n = (long)(budget_ns / batches / per);
        if (n < 1) n = 1;
    }
    MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    double mean[kMaxBatches];
    for (int b = 0; b < batches; ++b) {
        const double s = now_ns();
        fence_reps(target, n);
        mean[b] = (now_ns() - s) / n;
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    if (me == 0) report("fence_put", target, 8, mean, batches);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- PSCW: origin 0 and the target; the others wait ---- */
static void pscw_reps(int target, long n, MPI_Group peer) {
    for (long i = 0; i < n; ++i) {
        if (me == 0) {
            MPI_Win_start(peer, 0, win);
            MPI_Put(local, 8, MPI_BYTE, target, kDataOff, 8, MPI_BYTE, win);
            MPI_Win_complete(win);
        } else {
            MPI_Win_post(peer, 0, win);
            MPI_Win_wait(win);
        }
    }
}
static void pscw(int target) {
    if (me == 0 || me == target) {
        MPI_Group peer;
        const int other = me == 0 ? target : 0;
        MPI_Group_incl(world_group, 1, &other, &peer);
        /* rank 0 sends the count of each step (warm-up epochs one by one, then batches) */
        double mean[kMaxBatches];
        const double t0 = now_ns();
        long warm = 0, n;
        for (;;) {
            int more = 0;
            if (me == 0) {
                more = warm < 3 || now_ns() - t0 < budget_ns / 10;
                MPI_Send(&more, 1, MPI_INT, target, kCount, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&more, 1, MPI_INT, 0, kCount, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            if (!more) break;
            pscw_reps(target, 1, peer);
            ++warm;
        }
        if (me == 0) {
            n = (long)(budget_ns / batches / ((now_ns() - t0) / warm));
            if (n < 1) n = 1;
            MPI_Send(&n, 1, MPI_LONG, target, kCount, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&n, 1, MPI_LONG, 0, kCount, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int b = 0; b < batches; ++b) {
            const double s = now_ns();
            pscw_reps(target, n, peer);
            mean[b] = (now_ns() - s) / n;
        }
        MPI_Group_free(&peer);
        if (me == 0) {
            report("pscw_put", target, 8, mean, batches);
            int done = 1;
            for (int r = 1; r < np; ++r)
                if (r != target) MPI_Send(&done, 1, MPI_INT, r, kDone, MPI_COMM_WORLD);
        }
    } else {
        wait_done(target);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Which host each rank is on, as the host MPI sees it (MPI_COMM_TYPE_SHARED), printed by
 * rank 0; returns 1 when ranks 0,1 share a node, 2,3 share a node, and 0 and 2 do not. */
static int grouping(void) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int node_rank, leader;
    MPI_Comm_rank(node, &node_rank);
    leader = me;
    MPI_Bcast(&leader, 1, MPI_INT, 0, node); /* lowest world rank of my node */
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len;
    MPI_Get_processor_name(name, &len);
    const char* fake = getenv("FASTRMA_NODE_NAME");
    char line[MPI_MAX_PROCESSOR_NAME + 64];
    snprintf(line, sizeof line, "%s%s%s", name, fake ? " FASTRMA_NODE_NAME=" : "", fake ? fake : "");
    int* leaders = me == 0 ? malloc(sizeof(int) * np) : NULL;
    char* lines = me == 0 ? malloc(sizeof line * np) : NULL;
    MPI_Gather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(line, sizeof line, MPI_CHAR, lines, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    int split = 0;
    if (me == 0) {
        for (int r = 0; r < np; ++r)
            printf("span_bench: rank %d on %s, node of rank %d (MPI_COMM_TYPE_SHARED)\n", r, lines + r * sizeof line,
                   leaders[r]);
        split = leaders[1] == 0 && leaders[2] == 2 && leaders[3] == 2;
        printf("span_bench: host MPI sees %s\n",
               split ? "two hosts: {0,1} {2,3}" : "not {0,1} {2,3} (one host: the 'other' target is on this one)");
        free(leaders);
        free(lines);
    }
    MPI_Bcast(&split, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return split;
}

static void usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n 4 span_bench [multiple|serialized|funneled|single] [--quick] [--csv FILE] "
            "[--impl LABEL] [--idle mpi|sleep]\n");
}

int main(int argc, char** argv) {
    int want = MPI_THREAD_MULTIPLE, use_init = 0;
    const char* csv_path = NULL;
    const char* impl_arg = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else if (!strcmp(argv[i], "--impl") && i + 1 < argc)
            impl_arg = argv[++i];
        else if (!strcmp(argv[i], "--idle") && i + 1 < argc)
            idle_sleep = !strcmp(argv[++i], "sleep");
        else if (!strcmp(argv[i], "multiple"))
            want = MPI_THREAD_MULTIPLE, level_name = "multiple";
        else if (!strcmp(argv[i], "serialized"))
            want = MPI_THREAD_SERIALIZED, level_name = "serialized";
        else if (!strcmp(argv[i], "funneled"))
            want = MPI_THREAD_FUNNELED, level_name = "funneled";
        else if (!strcmp(argv[i], "single"))
            use_init = 1, level_name = "single";
        else {
            usage();
            return 2;
        }
    }
    int provided = MPI_THREAD_SINGLE;
    if (use_init) {
        MPI_Init(&argc, &argv);
        MPI_Query_thread(&provided);
    } else {
        MPI_Init_thread(&argc, &argv, want, &provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np != 4) {
        if (me == 0) fprintf(stderr, "span_bench: needs 4 ranks (2 per host), not %d\n", np);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    batches = quick ? 5 : 11;
    budget_ns = quick ? 20e6 : 165e6; /* ~4 ms / ~15 ms per batch */
    const int split = grouping();
    (void)split;

    MPI_Win_allocate(kWinBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, kWinBytes);
    local = malloc(kBwBytes);
    memset(local, 0xab, kBwBytes);

    /* fastrma says what served the window in an info key; the host MPI has no such key */
    MPI_Info info;
    char transport[64] = "";
    int flag = 0;
    MPI_Win_get_info(win, &info);
    MPI_Info_get(info, "fastrma_transport", sizeof transport - 1, transport, &flag);
    MPI_Info_free(&info);
    if (impl_arg)
        snprintf(impl, sizeof impl, "%s", impl_arg);
    else if (flag)
        snprintf(impl, sizeof impl, "fastrma-%s", transport);
    char osc[64] = "";
    const char* e = getenv("OMPI_MCA_osc");
    if (e) snprintf(osc, sizeof osc, " OMPI_MCA_osc=%s", e);
    if (me == 0) {
        printf("span_bench: impl %s, thread level %s (provided %d), window transport %s%s, %s, idle %s\n", impl,
               level_name, provided, flag ? transport : "(host MPI)", osc, quick ? "quick" : "full",
               idle_sleep ? "sleep" : "mpi");
        printf("  %-16s %-5s %10s  %10s   %21s\n", "section", "tgt", "bytes", "median", "(fastest - slowest)");
        fflush(stdout);
    }
    if (csv_path && me == 0) {
        csv = fopen(csv_path, "a");
        if (!csv) {
            perror(csv_path);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    for (int target = 1; target <= 2; ++target) {
        passive(target);
        fence(target);
        pscw(target);
    }

    /* checks: counters and a put word, read back by rank 0 */
    int wrong = 0;
    if (me == 0) {
        const int64_t magic = 0x5350414e42454e43LL;
        MPI_Win_lock_all(0, win);
        for (int t = 1; t <= 2; ++t) {
            int64_t fop = -1, acc = -1, got = -1;
            MPI_Put(&magic, 1, MPI_INT64_T, t, 24, 1, MPI_INT64_T, win);
            MPI_Win_flush(t, win);
            MPI_Get(&fop, 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, win);
            MPI_Get(&acc, 1, MPI_INT64_T, t, 8, 1, MPI_INT64_T, win);
            MPI_Get(&got, 1, MPI_INT64_T, t, 24, 1, MPI_INT64_T, win);
            MPI_Win_flush(t, win);
            if (fop != fop_count[t] || acc != acc_count[t] || got != magic) {
                printf(
                    "span_bench: WRONG at rank %d: fetch_and_op counter %lld (want %lld), accumulate %lld (want %lld), "
                    "put word %s\n",
                    t, (long long)fop, (long long)fop_count[t], (long long)acc, (long long)acc_count[t],
                    got == magic ? "ok" : "wrong");
                wrong = 1;
            }
        }
        MPI_Win_unlock_all(win);
        if (!wrong) printf("span_bench: checks passed (counters and put word at ranks 1 and 2)\n");
    }
    MPI_Bcast(&wrong, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (me == 0) printf("span_bench: MPI_Win_free\n"), fflush(stdout);
    MPI_Win_free(&win);
    if (me == 0) printf("span_bench: MPI_Finalize\n"), fflush(stdout);
    if (csv) fclose(csv);
    free(local);
    MPI_Group_free(&world_group);
    MPI_Finalize();
    if (me == 0) printf("span_bench: done\n"), fflush(stdout);
    return wrong;
}
