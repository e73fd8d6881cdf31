/* ga_pattern.c — the access pattern of a Global Arrays application (a chemistry code's
 * Fock build), through GA's C API over ARMCI-MPI over whatever MPI RMA is underneath:
 * Open MPI's own osc component, or fastrma when libfastrma-mpi.so is preloaded.
 *
 * Phases, each timed separately (slowest rank, after a barrier):
 *   create_destroy   NGA_Create + GA_Zero + GA_Destroy of a 256 x 256 double array
 *   put/get/acc      NGA_Put / NGA_Get / NGA_Acc of one 2-D patch on the next rank's block,
 *                    "contig" (whole rows of the owner's block: contiguous at the target)
 *                    and "strided" (a square-ish sub-block: one run per row), 8 B to 1 MiB
 *   read_inc         NGA_Read_inc on one shared counter (every rank at once)
 *   task_pool        SCF-like iterations: create F, then tasks taken from a shared counter
 *                    (read_inc -> get a block of D -> b x b x b multiply -> acc into F),
 *                    then destroy F; the result is checked
 *
 * ARMCI-MPI turns these into MPI_Alloc_mem/MPI_Win_create/MPI_Win_free per array,
 * MPI_Accumulate(REPLACE) / MPI_Get_accumulate(NO_OP) / MPI_Accumulate(SUM) on subarray
 * datatypes under MPI_Win_lock_all + MPI_Win_flush, and MPI_Fetch_and_op.
 *
 * Usage: ga_pattern [--label NAME] [--scale X] [--csv FILE] [--phases a,b,...]
 * Output: a human table on stdout and, with --csv, rows
 *   label,ranks,phase,shape,bytes,calls,seconds,us_per_call
 * Exit status 1 if a result check fails. */
#include <ga.h>
#include <macdecls.h>
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;
static const char* label = "run";
static double scale = 1.0;
static FILE* csv;
static const char* phases = "create_destroy,put,get,acc,read_inc,task_pool";
static int failures;

static int want(const char* phase) {
    const char* p = phases;
    size_t n = strlen(phase);
    while (p && *p) {
        if (strncmp(p, phase, n) == 0 && (p[n] == ',' || p[n] == '\0')) return 1;
        p = strchr(p, ',');
        if (p) ++p;
    }
    return 0;
}

static long scaled(long n) {
    long v = (long)(n * scale);
    return v < 1 ? 1 : v;
}

/* Slowest rank's time for the phase; one row of output. */
static void report(const char* phase, const char* shape, long bytes, long calls, double t) {
    double tmax = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (me != 0) return;
    printf("%-8s %-15s %-8s %8ld B %7ld calls %9.4f s %10.2f us/call\n", label, phase, shape, bytes, calls, tmax,
           1e6 * tmax / (double)calls);
    fflush(stdout);
    if (csv)
        fprintf(csv, "%s,%d,%s,%s,%ld,%ld,%.6f,%.3f\n", label, np, phase, shape, bytes, calls, tmax,
                1e6 * tmax / (double)calls);
}

static void check(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "ga_pattern: rank %d: check failed: %s\n", me, what);
        ++failures;
    }
}

static void phase_create_destroy(void) {
    int dims[2] = {256, 256};
    long n = scaled(200);
    GA_Sync();
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; ++i) {
        int g = NGA_Create(C_DBL, 2, dims, "tmp", NULL);
        check(g != 0, "NGA_Create");
        GA_Zero(g);
        GA_Destroy(g);
    }
    report("create_destroy", "256x256", 256 * 256 * 8, n, MPI_Wtime() - t0);
}

/* One array of np blocks of kRows x kCols doubles, distributed by rows. */
enum { kRows = 512, kCols = 512 };

struct Shape {
    const char* kind;
    int rows, cols;
};

static void phase_patches(int which) { /* 0 put, 1 get, 2 acc */
    static const char* names[] = {"put", "get", "acc"};
    int dims[2] = {kRows * np, kCols};
    int chunk[2] = {kRows, kCols};
    int g = NGA_Create(C_DBL, 2, dims, "patches", chunk);
    GA_Zero(g);
    const struct Shape shapes[] = {
        {"contig", 1, 1},  {"contig", 1, 64},   {"contig", 2, 512},    {"contig", 32, 512},   {"contig", 256, 512},
        {"strided", 8, 8}, {"strided", 32, 32}, {"strided", 128, 128}, {"strided", 512, 256},
    };
    double* buf = malloc(sizeof(double) * kRows * kCols);
    for (int i = 0; i < kRows * kCols; ++i) buf[i] = 1.0;
    const int target = (me + 1) % np;
    int tlo[2], thi[2];
    NGA_Distribution(g, target, tlo, thi);
    double one = 1.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        const struct Shape* sh = &shapes[s];
        long bytes = 8L * sh->rows * sh->cols;
        long n = scaled(bytes <= 8192 ? 5000 : bytes <= 131072 ? 300 : 40);
        int lo[2] = {tlo[0], tlo[1]};
        int hi[2] = {tlo[0] + sh->rows - 1, tlo[1] + sh->cols - 1};
        int ld[1] = {sh->cols};
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", sh->rows, sh->cols);
        char phase[32];
        snprintf(phase, sizeof phase, "%s_%s", names[which], sh->kind);
        GA_Sync();
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; ++i) {
            if (which == 0)
                NGA_Put(g, lo, hi, buf, ld);
            else if (which == 1)
                NGA_Get(g, lo, hi, buf, ld);
            else
                NGA_Acc(g, lo, hi, buf, ld, &one);
        }
        double t = MPI_Wtime() - t0;
        report(phase, shape, bytes, n, t);
    }
    GA_Sync();
    if (which == 2) {
        /* The last shape covered 512 x 256 of my block, written by my left neighbour: at
         * least scaled(40) accumulates of 1.0 landed on every element of it. */
        int lo[2], hi[2];
        NGA_Distribution(g, me, lo, hi);
        hi[1] = lo[1] + 255;
        int ld[1] = {256};
        NGA_Get(g, lo, hi, buf, ld);
        int ok = 1;
        for (int i = 0; i < kRows * 256; ++i) ok = ok && buf[i] >= (double)scaled(40);
        check(ok, "acc: every element of the strided patch received the accumulates");
    } else if (which == 0) {
        int lo[2], hi[2];
        NGA_Distribution(g, me, lo, hi);
        int ld[1] = {kCols};
        hi[0] = lo[0];
        NGA_Get(g, lo, hi, buf, ld);
        int ok = 1;
        for (int i = 0; i < kCols; ++i) ok = ok && buf[i] == 1.0;
        check(ok, "put: the first row of my block holds the neighbour's ones");
    }
    free(buf);
    GA_Destroy(g);
}

static void phase_read_inc(void) {
    int dims[1] = {1};
    int g = NGA_Create(C_LONG, 1, dims, "counter", NULL);
    GA_Zero(g);
    long n = scaled(5000);
    int sub[1] = {0};
    GA_Sync();
    double t0 = MPI_Wtime();
    long last = -1;
    int ok = 1;
    for (long i = 0; i < n; ++i) {
        long v = NGA_Read_inc(g, sub, 1);
        ok = ok && v > last;
        last = v;
    }
    double t = MPI_Wtime() - t0;
    GA_Sync();
    check(ok, "read_inc: values increase");
    long total = NGA_Read_inc(g, sub, 0);
    check(total == n * np, "read_inc: every increment counted once");
    report("read_inc", "1", 8, n, t);
    GA_Destroy(g);
}

/* The Fock-build loop: nb x nb tasks of b x b blocks, dealt out by a shared counter. */
static void phase_task_pool(void) {
    const int b = 48, nb = 12, N = b * nb;
    const long iters = scaled(5);
    int dims[2] = {N, N};
    int gd = NGA_Create(C_DBL, 2, dims, "D", NULL);
    double dval = 1.0;
    GA_Fill(gd, &dval);
    int cdims[1] = {1};
    double* blk = malloc(sizeof(double) * b * b);
    double* out = malloc(sizeof(double) * b * b);
    long tasks = 0;
    GA_Sync();
    double t0 = MPI_Wtime();
    for (long it = 0; it < iters; ++it) {
        int gf = NGA_Create(C_DBL, 2, dims, "F", NULL);
        int gc = NGA_Create(C_LONG, 1, cdims, "task counter", NULL);
        GA_Zero(gf);
        GA_Zero(gc);
        int sub[1] = {0};
        for (;;) {
            long t = NGA_Read_inc(gc, sub, 1);
            if (t >= (long)nb * nb) break;
            ++tasks;
            const int bi = (int)(t / nb), bj = (int)(t % nb);
            int lo[2] = {bi * b, bj * b}, hi[2] = {bi * b + b - 1, bj * b + b - 1};
            int ld[1] = {b};
            NGA_Get(gd, lo, hi, blk, ld);
            for (int i = 0; i < b; ++i)
                for (int j = 0; j < b; ++j) {
                    double s = 0;
                    for (int k = 0; k < b; ++k) s += blk[i * b + k] * blk[k * b + j];
                    out[i * b + j] = s;
                }
            int tlo[2] = {bj * b, bi * b}, thi[2] = {bj * b + b - 1, bi * b + b - 1};
            double alpha = 0.5;
            NGA_Acc(gf, tlo, thi, out, ld, &alpha);
            (void)hi;
        }
        GA_Sync();
        /* Every element of F is 0.5 * b: check my own block. */
        int mlo[2], mhi[2];
        NGA_Distribution(gf, me, mlo, mhi);
        if (mhi[0] >= mlo[0] && mhi[1] >= mlo[1]) {
            int rows = mhi[0] - mlo[0] + 1, cols = mhi[1] - mlo[1] + 1;
            double* mine = malloc(sizeof(double) * (size_t)rows * (size_t)cols);
            int ld[1] = {cols};
            NGA_Get(gf, mlo, mhi, mine, ld);
            int ok = 1;
            for (long i = 0; i < (long)rows * cols; ++i) ok = ok && fabs(mine[i] - 0.5 * b) < 1e-9;
            check(ok, "task_pool: F = 0.5 * b everywhere");
            free(mine);
        }
        GA_Destroy(gc);
        GA_Destroy(gf);
    }
    double t = MPI_Wtime() - t0;
    long all = 0;
    MPI_Allreduce(&tasks, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    check(all == iters * nb * nb, "task_pool: every task done once");
    report("task_pool", "48x48", 8L * b * b, all, t);
    free(blk);
    free(out);
    GA_Destroy(gd);
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--phases") && i + 1 < argc)
            phases = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv = fopen(argv[++i], "a");
            if (!csv) {
                perror("ga_pattern: --csv");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: ga_pattern [--label NAME] [--scale X] [--csv FILE] [--phases a,b,...]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    GA_Initialize();
    if (!MA_init(C_DBL, 1 << 20, 1 << 20)) GA_Error("MA_init", 0);
    me = GA_Nodeid();
    np = GA_Nnodes();
    if (me != 0 && csv) {
        fclose(csv);
        csv = NULL;
    }
    double t0 = MPI_Wtime();
    if (want("create_destroy")) phase_create_destroy();
    if (want("put")) phase_patches(0);
    if (want("get")) phase_patches(1);
    if (want("acc")) phase_patches(2);
    if (want("read_inc")) phase_read_inc();
    if (want("task_pool")) phase_task_pool();
    GA_Sync();
    report("total", "-", 0, 1, MPI_Wtime() - t0);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (csv) fclose(csv);
    GA_Terminate();
    MPI_Finalize();
    return all ? 1 : 0;
}
