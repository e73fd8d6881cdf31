/*
 * dropin_ga.c — a Global Arrays application (Debian's libga over ARMCI-MPI over MPI-3 RMA)
 * through the drop-in: the calls a chemistry code makes, each result checked against what
 * it must be (integer-valued data, so that every sum is exact and the host's run and the
 * preloaded run give the same numbers):
 *   - irregular 2-D int and double arrays: every rank puts its patches, every rank reads the
 *     whole array back (NGA_Put / NGA_Get);
 *   - NGA_Acc from every rank onto one overlapping patch, with alpha;
 *   - NGA_Scatter / NGA_Gather / NGA_Scatter_acc of element lists;
 *   - NGA_Read_inc on a shared counter: every fetched value once;
 *   - GA mutexes (ARMCI mutexes: exclusive locks + fetch_and_op on a mutex window): a
 *     get / add / put under GA_Lock loses no update;
 *   - GA_Dgemm, GA_Ddot, GA_Add, GA_Copy, GA_Scale, GA_Transpose, NGA_Select_elem,
 *     GA_Dgop / GA_Igop / GA_Brdcst;
 *   - NGA_Access / NGA_Release_update of the local block;
 *   - GA_Duplicate / GA_Destroy again and again (a window each).
 * Prints one line per check that fails and exits 1 on every rank if any did.
 */
#include <ga.h>
#include <macdecls.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np, failures;
static int ld1[1] = {1}; /* GA reads ld even for 1-D patches */

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            ++failures;                                          \
            fprintf(stderr, "dropin_ga: rank %d: FAILED: ", me); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);   \
        }                                                        \
    } while (0)

enum { R = 37, C = 29 }; /* irregular: blocks of unequal sizes on every rank count */

static int value_of(int i, int j) { return 1000 * i + j; }

static void puts_and_gets(void) {
    int dims[2] = {R, C};
    int g = NGA_Create(C_INT, 2, dims, "ints", NULL);
    CHECK(g != 0, "NGA_Create");
    int zero = 0;
    GA_Fill(g, &zero);
    /* Rank k puts the rows i with i % np == k, each row a patch. */
    int row[C];
    for (int i = me; i < R; i += np) {
        for (int j = 0; j < C; ++j) row[j] = value_of(i, j);
        int lo[2] = {i, 0}, hi[2] = {i, C - 1}, ld[1] = {C};
        NGA_Put(g, lo, hi, row, ld);
    }
    GA_Sync();
    int* all = malloc(sizeof(int) * R * C);
    int lo[2] = {0, 0}, hi[2] = {R - 1, C - 1}, ld[1] = {C};
    NGA_Get(g, lo, hi, all, ld);
    int bad = 0;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) bad += all[i * C + j] != value_of(i, j);
    CHECK(bad == 0, "put/get: %d of %d elements wrong", bad, R * C);
    /* A strided sub-patch read back: rows 3..20, columns 5..17. */
    int sub[18 * 13];
    int slo[2] = {3, 5}, shi[2] = {20, 17}, sld[1] = {13};
    NGA_Get(g, slo, shi, sub, sld);
    bad = 0;
    for (int i = 0; i < 18; ++i)
        for (int j = 0; j < 13; ++j) bad += sub[i * 13 + j] != value_of(3 + i, 5 + j);
    CHECK(bad == 0, "strided get: %d wrong", bad);
    free(all);
    GA_Destroy(g);
}

static void accumulates(void) {
    int dims[2] = {R, C};
    int g = NGA_Create(C_DBL, 2, dims, "doubles", NULL);
    GA_Zero(g);
    GA_Sync();
    /* Everyone adds alpha * (i + j + rank) to rows 5..30, columns 2..25, three times. */
    enum { PR = 26, PC = 24 };
    double buf[PR * PC];
    for (int i = 0; i < PR; ++i)
        for (int j = 0; j < PC; ++j) buf[i * PC + j] = (double)(i + j + me);
    double alpha = 2.0;
    int lo[2] = {5, 2}, hi[2] = {30, 25}, ld[1] = {PC};
    for (int k = 0; k < 3; ++k) NGA_Acc(g, lo, hi, buf, ld, &alpha);
    GA_Sync();
    double* all = malloc(sizeof(double) * R * C);
    int alo[2] = {0, 0}, ahi[2] = {R - 1, C - 1}, ald[1] = {C};
    NGA_Get(g, alo, ahi, all, ald);
    const double ranks = (double)np * (np - 1) / 2;
    int bad = 0;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) {
            const int in = i >= 5 && i <= 30 && j >= 2 && j <= 25;
            const double want = in ? 3 * 2.0 * ((double)np * ((i - 5) + (j - 2)) + ranks) : 0.0;
            bad += all[i * C + j] != want;
        }
    CHECK(bad == 0, "acc: %d of %d elements wrong", bad, R * C);

    /* Scatter, gather, scatter_acc on a fresh 1-D array. */
    enum { N = 101, K = 16 };
    int n1 = N;
    int v = NGA_Create(C_DBL, 1, &n1, "vec", NULL);
    GA_Zero(v);
    GA_Sync();
    int subs_mem[K], *subs[K];
    double vals[K];
    for (int k = 0; k < K; ++k) {
        subs_mem[k] = (me * K + k * 7) % N; /* distinct within a rank (7 and 101 coprime) */
        subs[k] = &subs_mem[k];
        vals[k] = (double)(me + 1);
    }
    double one = 1.0;
    NGA_Scatter_acc(v, vals, subs, K, &one);
    GA_Sync();
    double want[N];
    memset(want, 0, sizeof want);
    for (int r = 0; r < np; ++r)
        for (int k = 0; k < K; ++k) want[(r * K + k * 7) % N] += (double)(r + 1);
    double got[K];
    NGA_Gather(v, got, subs, K);
    bad = 0;
    for (int k = 0; k < K; ++k) bad += got[k] != want[subs_mem[k]];
    CHECK(bad == 0, "scatter_acc/gather: %d of %d wrong", bad, K);
    GA_Sync();
    /* Rank 0 scatters plain values over everything; everyone gathers them. */
    if (me == 0) {
        for (int k = 0; k < K; ++k) vals[k] = 100.0 + subs_mem[k];
        NGA_Scatter(v, vals, subs, K);
    }
    GA_Sync();
    if (me == 0) {
        NGA_Gather(v, got, subs, K);
        bad = 0;
        for (int k = 0; k < K; ++k) bad += got[k] != 100.0 + subs_mem[k];
        CHECK(bad == 0, "scatter/gather: %d wrong", bad);
    }
    free(all);
    GA_Destroy(v);
    GA_Destroy(g);
}

static void counters_and_mutexes(void) {
    enum { K = 200 };
    int one = 1;
    int c = NGA_Create(C_LONG, 1, &one, "counter", NULL);
    GA_Zero(c);
    GA_Sync();
    long mine[K];
    int sub[1] = {0};
    for (int k = 0; k < K; ++k) mine[k] = NGA_Read_inc(c, sub, 1);
    GA_Sync();
    /* Every fetched value once: mark them in a table summed over ranks. */
    int* seen = calloc((size_t)np * K, sizeof(int));
    int bad = 0;
    for (int k = 0; k < K; ++k) {
        if (mine[k] < 0 || mine[k] >= (long)np * K)
            ++bad;
        else
            seen[mine[k]] += 1;
    }
    GA_Igop(seen, np * K, "+");
    for (int i = 0; i < np * K; ++i) bad += seen[i] != 1;
    CHECK(bad == 0, "read_inc: %d fetched values missing, repeated or out of range", bad);
    long final = -1;
    NGA_Get(c, sub, sub, &final, ld1);
    CHECK(final == (long)np * K, "read_inc: counter %ld, want %ld", final, (long)np * K);
    free(seen);

    /* A read-modify-write under a GA mutex. */
    int m = NGA_Create(C_INT, 1, &one, "guarded", NULL);
    GA_Zero(m);
    CHECK(GA_Create_mutexes(2), "GA_Create_mutexes");
    GA_Sync();
    for (int k = 0; k < 50; ++k) {
        GA_Lock(1);
        int x = -1;
        NGA_Get(m, sub, sub, &x, ld1);
        ++x;
        NGA_Put(m, sub, sub, &x, ld1);
        GA_Unlock(1);
    }
    GA_Sync();
    int guarded = -1;
    NGA_Get(m, sub, sub, &guarded, ld1);
    CHECK(guarded == 50 * np, "mutex: counter %d, want %d", guarded, 50 * np);
    CHECK(GA_Destroy_mutexes(), "GA_Destroy_mutexes");
    GA_Destroy(m);
    GA_Destroy(c);
}

static void linear_algebra(void) {
    enum { N = 24 };
    int dims[2] = {N, N};
    int a = NGA_Create(C_DBL, 2, dims, "A", NULL);
    int b = GA_Duplicate(a, "B");
    int cm = GA_Duplicate(a, "C");
    /* A[i][j] = (i + 2j) % 7 - 3, B[i][j] = (3i + j) % 5 - 2: small integers, exact sums. */
    static double la[N * N], lb[N * N], want[N * N];
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            la[i * N + j] = (double)((i + 2 * j) % 7 - 3);
            lb[i * N + j] = (double)((3 * i + j) % 5 - 2);
        }
    int lo[2] = {0, 0}, hi[2] = {N - 1, N - 1}, ld[1] = {N};
    if (me == 0) {
        NGA_Put(a, lo, hi, la, ld);
        NGA_Put(b, lo, hi, lb, ld);
    }
    GA_Sync();
    GA_Dgemm('N', 'N', N, N, N, 1.0, a, b, 0.0, cm);
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            double s = 0;
            for (int k = 0; k < N; ++k) s += la[i * N + k] * lb[k * N + j];
            want[i * N + j] = s;
        }
    static double got[N * N];
    NGA_Get(cm, lo, hi, got, ld);
    int bad = 0;
    for (int i = 0; i < N * N; ++i) bad += got[i] != want[i];
    CHECK(bad == 0, "dgemm: %d of %d wrong", bad, N * N);

    double dot = 0;
    for (int i = 0; i < N * N; ++i) dot += la[i] * lb[i];
    CHECK(GA_Ddot(a, b) == dot, "ddot: %g, want %g", GA_Ddot(a, b), dot);

    double two = 2.0, minus = -1.0;
    GA_Add(&two, a, &minus, b, cm); /* C = 2A - B */
    NGA_Get(cm, lo, hi, got, ld);
    bad = 0;
    for (int i = 0; i < N * N; ++i) bad += got[i] != 2 * la[i] - lb[i];
    CHECK(bad == 0, "add: %d wrong", bad);

    GA_Copy(a, cm);
    double three = 3.0;
    GA_Scale(cm, &three);
    GA_Transpose(cm, b); /* B = (3A)^T */
    NGA_Get(b, lo, hi, got, ld);
    bad = 0;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) bad += got[i * N + j] != 3 * la[j * N + i];
    CHECK(bad == 0, "copy/scale/transpose: %d wrong", bad);

    double top = 0;
    int where[2] = {-1, -1};
    NGA_Select_elem(a, "max", &top, where);
    CHECK(top == 3.0 && la[where[0] * N + where[1]] == 3.0, "select_elem max: %g at (%d, %d)", top, where[0], where[1]);

    /* The local block, in place: everyone adds its rank + 1 to its own elements. */
    int llo[2], lhi[2];
    NGA_Distribution(a, me, llo, lhi);
    if (llo[0] <= lhi[0] && llo[1] <= lhi[1]) {
        double* p = NULL;
        int lld[1];
        NGA_Access(a, llo, lhi, &p, lld);
        for (int i = 0; i <= lhi[0] - llo[0]; ++i)
            for (int j = 0; j <= lhi[1] - llo[1]; ++j) p[i * lld[0] + j] += me + 1;
        NGA_Release_update(a, llo, lhi);
    }
    GA_Sync();
    NGA_Get(a, lo, hi, got, ld);
    bad = 0;
    for (int r = 0; r < np; ++r) {
        int rlo[2], rhi[2];
        NGA_Distribution(a, r, rlo, rhi);
        for (int i = rlo[0]; i <= rhi[0]; ++i)
            for (int j = rlo[1]; j <= rhi[1]; ++j) bad += got[i * N + j] != la[i * N + j] + r + 1;
    }
    CHECK(bad == 0, "access/release_update: %d wrong", bad);

    double x[2] = {me, 1.0};
    GA_Dgop(x, 2, "+");
    CHECK(x[0] == (double)np * (np - 1) / 2 && x[1] == np, "dgop: %g %g", x[0], x[1]);
    int word = me == np - 1 ? 4242 : 0;
    GA_Brdcst(&word, sizeof word, np - 1);
    CHECK(word == 4242, "brdcst: %d", word);
    GA_Destroy(cm);
    GA_Destroy(b);
    GA_Destroy(a);
}

static void churn(void) {
    int dims[2] = {64, 48};
    int g = NGA_Create(C_DBL, 2, dims, "base", NULL);
    GA_Zero(g);
    for (int k = 0; k < 60; ++k) {
        int d = GA_Duplicate(g, "dup");
        CHECK(d != 0, "duplicate %d", k);
        double v = k;
        GA_Fill(d, &v);
        int lo[2] = {(k * 5) % 64, (k * 3) % 48}, hi[2];
        hi[0] = lo[0], hi[1] = lo[1];
        double got = -1;
        NGA_Get(d, lo, hi, &got, ld1);
        CHECK(got == v, "duplicate %d: %g", k, got);
        GA_Destroy(d);
    }
    GA_Destroy(g);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    GA_Initialize();
    if (!MA_init(C_DBL, 1 << 20, 1 << 20)) GA_Error("MA_init", 0);
    me = GA_Nodeid();
    np = GA_Nnodes();
    puts_and_gets();
    accumulates();
    counters_and_mutexes();
    linear_algebra();
    churn();
    GA_Sync();
    int all = failures;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) printf("dropin_ga: %d ranks, %s\n", np, all ? "FAILED" : "all checks passed");
    GA_Terminate();
    MPI_Finalize();
    return all ? 1 : 0;
}
