/*
 * dropin_armci.c — ARMCI-MPI (Debian's libarmci-openmpi) on its own API, run by ctest on the
 * host MPI alone and with libfastrma-mpi preloaded (2 and 3 ranks). ARMCI-MPI turns every
 * call into MPI-3 RMA: ARMCI_Malloc is MPI_Win_allocate, Put/Get are accumulates with
 * MPI_REPLACE / MPI_NO_OP on MPI_BYTE, Acc an MPI_Accumulate(MPI_SUM) of the scaled values,
 * the strided and vector calls datatypes or one operation per piece, ARMCI_Rmw
 * MPI_Fetch_and_op, the mutexes a window of bytes under exclusive locks. Every value is
 * checked against what the calls must produce, so both runs check the same results; a
 * mismatch aborts the job (check.h).
 */
#include <armci.h>
#include <complex.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { kN = 1024, kRows = 8, kCols = 16, kLd = 32, kSegs = 5, kSegLen = 3, kIncs = 50 };

static int me, np;

/* ARMCI memory of this rank is read and written locally only between Access_begin/end. */
static void local_fill(void* base, size_t bytes, int byte) {
    ARMCI_Access_begin(base);
    memset(base, byte, bytes);
    ARMCI_Access_end(base);
}

static void sync_all(void) {
    ARMCI_AllFence();
    ARMCI_Barrier();
}

/* Contiguous put / get / acc of every ARMCI accumulate type. */
static void contiguous(void** dbl, void** ints, void** lngs, void** flts, void** cpls, void** dcps) {
    const int right = (me + 1) % np, left = (me + np - 1) % np;
    double src[64], got[64];
    for (int i = 0; i < 64; ++i) src[i] = me * 1000.0 + i;
    ARMCI_Put(src, dbl[right], (int)sizeof src, right);
    sync_all();
    ARMCI_Get(dbl[me], got, (int)sizeof got, me); /* my own block, written by left */
    for (int i = 0; i < 64; ++i) CHECK_EQ(got[i], left * 1000.0 + i);
    ARMCI_Get(dbl[right], got, (int)sizeof got, right); /* what I put there */
    for (int i = 0; i < 64; ++i) CHECK_EQ(got[i], me * 1000.0 + i);

    /* Every rank accumulates into rank 0, scaled. */
    double dscale = 2.0, dsrc[64];
    int iscale = 3, isrc[64];
    long lscale = 5, lsrc[64];
    float fscale = 0.5f, fsrc[64];
    float complex cscale = 1.0f + 1.0f * I, csrc[64];
    double complex zscale = 2.0 - 1.0 * I, zsrc[64];
    for (int i = 0; i < 64; ++i) {
        dsrc[i] = (me + 1) * i;
        isrc[i] = (me + 1) * i;
        lsrc[i] = (long)(me + 1) * i * 100000L;
        fsrc[i] = (float)((me + 1) * i);
        csrc[i] = (float)(me + 1) + (float)i * I;
        zsrc[i] = (double)i + (double)(me + 1) * I;
    }
    ARMCI_Acc(ARMCI_ACC_DBL, &dscale, dsrc, (double*)dbl[0] + 64, (int)sizeof dsrc, 0);
    ARMCI_Acc(ARMCI_ACC_INT, &iscale, isrc, ints[0], (int)sizeof isrc, 0);
    ARMCI_Acc(ARMCI_ACC_LNG, &lscale, lsrc, lngs[0], (int)sizeof lsrc, 0);
    ARMCI_Acc(ARMCI_ACC_FLT, &fscale, fsrc, flts[0], (int)sizeof fsrc, 0);
    ARMCI_Acc(ARMCI_ACC_CPL, &cscale, csrc, cpls[0], (int)sizeof csrc, 0);
    ARMCI_Acc(ARMCI_ACC_DCP, &zscale, zsrc, dcps[0], (int)sizeof zsrc, 0);
    sync_all();
    const long tri = (long)np * (np + 1) / 2; /* sum over ranks of (me + 1) */
    double dgot[64];
    int igot[64];
    long lgot[64];
    float fgot[64];
    float complex cgot[64];
    double complex zgot[64];
    ARMCI_Get((double*)dbl[0] + 64, dgot, (int)sizeof dgot, 0);
    ARMCI_Get(ints[0], igot, (int)sizeof igot, 0);
    ARMCI_Get(lngs[0], lgot, (int)sizeof lgot, 0);
    ARMCI_Get(flts[0], fgot, (int)sizeof fgot, 0);
    ARMCI_Get(cpls[0], cgot, (int)sizeof cgot, 0);
    ARMCI_Get(dcps[0], zgot, (int)sizeof zgot, 0);
    for (int i = 0; i < 64; ++i) {
        CHECK_EQ(dgot[i], 2.0 * tri * i);
        CHECK_EQ(igot[i], 3 * tri * i);
        CHECK_EQ(lgot[i], 5 * tri * i * 100000L);
        CHECK_EQ(fgot[i], 0.5f * (float)(tri * i));
        /* (1 + i)(r + 1 + k i) summed: real sum(r+1) - np k, imaginary sum(r+1) + np k */
        CHECK_EQ(crealf(cgot[i]), (float)(tri - (long)np * i));
        CHECK_EQ(cimagf(cgot[i]), (float)(tri + (long)np * i));
        /* (2 - i)(k + (r+1) i): real 2 np k + sum(r+1), imaginary 2 sum(r+1) - np k */
        CHECK_EQ(creal(zgot[i]), 2.0 * np * i + tri);
        CHECK_EQ(cimag(zgot[i]), 2.0 * tri - (double)np * i);
    }
}

/* A kRows x kCols patch of doubles, kLd apart at the target, 2 * kCols apart at the origin. */
static void strided(void** dbl) {
    const int right = (me + 1) % np;
    double* const patch = (double*)dbl[right] + 256;
    double src[kRows][2 * kCols], back[kRows][kCols];
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < 2 * kCols; ++c) src[r][c] = me * 10000.0 + r * 100.0 + c;
    int src_stride[1] = {(int)sizeof src[0]}, dst_stride[1] = {kLd * (int)sizeof(double)};
    int back_stride[1] = {(int)sizeof back[0]};
    int count[2] = {kCols * (int)sizeof(double), kRows};
    ARMCI_PutS(src, src_stride, patch, dst_stride, count, 1, right);
    sync_all();
    ARMCI_GetS(patch, dst_stride, back, back_stride, count, 1, right);
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kCols; ++c) CHECK_EQ(back[r][c], me * 10000.0 + r * 100.0 + c);
    /* The gaps between the rows were not written (zero since the start). */
    double gap[kLd - kCols];
    ARMCI_Get(patch + kCols, gap, (int)sizeof gap, right);
    for (int c = 0; c < kLd - kCols; ++c) CHECK_EQ(gap[c], 0.0);

    /* Every rank adds 1.5 * (r + c) into rank 0's patch. */
    double one[kRows][kCols], scale = 1.5;
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kCols; ++c) one[r][c] = r + c;
    double* const acc_patch = (double*)dbl[0] + 512;
    int one_stride[1] = {(int)sizeof one[0]};
    ARMCI_AccS(ARMCI_ACC_DBL, &scale, one, one_stride, acc_patch, dst_stride, count, 1, 0);
    sync_all();
    ARMCI_GetS(acc_patch, dst_stride, back, back_stride, count, 1, 0);
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kCols; ++c) CHECK_EQ(back[r][c], 1.5 * np * (r + c));
}

/* kSegs segments of kSegLen longs: scattered at the target, packed at the origin. */
static void vectors(void** lngs) {
    const int right = (me + 1) % np;
    long src[kSegs * kSegLen], back[kSegs * kSegLen];
    void *src_ptrs[kSegs], *dst_ptrs[kSegs], *back_ptrs[kSegs];
    for (int i = 0; i < kSegs * kSegLen; ++i) src[i] = me * 1000L + i + 1;
    for (int s = 0; s < kSegs; ++s) {
        src_ptrs[s] = &src[s * kSegLen];
        dst_ptrs[s] = (long*)lngs[right] + 128 + s * 7; /* 4 longs apart */
        back_ptrs[s] = &back[s * kSegLen];
    }
    armci_giov_t put = {src_ptrs, dst_ptrs, kSegLen * (int)sizeof(long), kSegs};
    ARMCI_PutV(&put, 1, right);
    sync_all();
    armci_giov_t get = {dst_ptrs, back_ptrs, kSegLen * (int)sizeof(long), kSegs};
    ARMCI_GetV(&get, 1, right);
    for (int i = 0; i < kSegs * kSegLen; ++i) CHECK_EQ(back[i], me * 1000L + i + 1);
    long between = -1;
    ARMCI_Get((long*)lngs[right] + 128 + kSegLen, &between, (int)sizeof between, right);
    CHECK_EQ(between, 0);

    /* Every rank adds its segments, scaled by 2, into rank 0's. */
    void* acc_dst[kSegs];
    for (int s = 0; s < kSegs; ++s) acc_dst[s] = (long*)lngs[0] + 256 + s * 7;
    long scale = 2;
    armci_giov_t acc = {src_ptrs, acc_dst, kSegLen * (int)sizeof(long), kSegs};
    ARMCI_AccV(ARMCI_ACC_LNG, &scale, &acc, 1, 0);
    sync_all();
    armci_giov_t get0 = {acc_dst, back_ptrs, kSegLen * (int)sizeof(long), kSegs};
    ARMCI_GetV(&get0, 1, 0);
    const long ranks = (long)np * (np - 1) / 2;
    for (int i = 0; i < kSegs * kSegLen; ++i) CHECK_EQ(back[i], 2 * (1000L * ranks + (long)np * (i + 1)));
}

static int cmp_long(const void* a, const void* b) {
    const long x = *(const long*)a, y = *(const long*)b;
    return (x > y) - (x < y);
}

/* Fetch-and-add (int, long) and swap (int, long) on rank 0's words. */
static void rmw(void** ints, void** lngs) {
    int* const icount = (int*)ints[0] + 512;
    long* const lcount = (long*)lngs[0] + 512;
    long olds[kIncs], all[kIncs * 8];
    for (int k = 0; k < kIncs; ++k) {
        int old = -1;
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD, &old, icount, 1, 0);
        olds[k] = old;
    }
    MPI_OK(MPI_Allgather(olds, kIncs, MPI_LONG, all, kIncs, MPI_LONG, MPI_COMM_WORLD));
    qsort(all, (size_t)(kIncs * np), sizeof all[0], cmp_long);
    for (int i = 0; i < kIncs * np; ++i) CHECK_EQ(all[i], i); /* each value fetched once */
    for (int k = 0; k < kIncs; ++k) {
        long old = -1;
        ARMCI_Rmw(ARMCI_FETCH_AND_ADD_LONG, &old, lcount, 1000000, 0);
        olds[k] = old / 1000000;
    }
    MPI_OK(MPI_Allgather(olds, kIncs, MPI_LONG, all, kIncs, MPI_LONG, MPI_COMM_WORLD));
    qsort(all, (size_t)(kIncs * np), sizeof all[0], cmp_long);
    for (int i = 0; i < kIncs * np; ++i) CHECK_EQ(all[i], i);
    sync_all();
    int ifinal = 0;
    long lfinal = 0;
    ARMCI_Get(icount, &ifinal, (int)sizeof ifinal, 0);
    ARMCI_Get(lcount, &lfinal, (int)sizeof lfinal, 0);
    CHECK_EQ(ifinal, kIncs * np);
    CHECK_EQ(lfinal, 1000000L * kIncs * np);

    /* Swaps: the old values and the final value are the initial value and every rank's. */
    int* const iswap = icount + 1;
    long* const lswap = lcount + 1;
    int iold = 0;
    long lold = 0;
    ARMCI_Rmw(ARMCI_SWAP, &iold, iswap, 0, 0); /* swap: the value travels in *ploc */
    iold = me + 100;
    ARMCI_Rmw(ARMCI_SWAP, &iold, iswap, 0, 0);
    lold = (me + 1) * 10000000000L;
    ARMCI_Rmw(ARMCI_SWAP_LONG, &lold, lswap, 0, 0);
    sync_all();
    /* The long word: the old values and the final value are 0 and each rank's value, once
     * each. The int word: every rank's last swap put r + 100, so one of those stays. */
    long mine[2] = {iold, lold}, every[16];
    MPI_OK(MPI_Allgather(mine, 2, MPI_LONG, every, 2, MPI_LONG, MPI_COMM_WORLD));
    int ifin = -1;
    long lfin = -1;
    ARMCI_Get(iswap, &ifin, (int)sizeof ifin, 0);
    ARMCI_Get(lswap, &lfin, (int)sizeof lfin, 0);
    long lvals[9];
    int n = 0;
    for (int r = 0; r < np; ++r) lvals[n++] = every[2 * r + 1];
    lvals[n++] = lfin;
    qsort(lvals, (size_t)n, sizeof lvals[0], cmp_long);
    CHECK_EQ(lvals[0], 0); /* the initial value came out once */
    for (int r = 0; r < np; ++r) CHECK_EQ(lvals[r + 1], (r + 1) * 10000000000L);
    CHECK(ifin >= 100 && ifin < 100 + np, "the last int swapped in stays");
}

/* A counter at rank 0 read, incremented and written back under ARMCI mutex 0 of rank
 * (np - 1): no increment may be lost. */
static void mutexes(void** ints) {
    ARMCI_Create_mutexes(2);
    int* const counter = (int*)ints[0] + 600;
    const int owner = np - 1;
    for (int k = 0; k < kIncs; ++k) {
        ARMCI_Lock(0, owner);
        int v = -1;
        ARMCI_Get(counter, &v, (int)sizeof v, 0);
        ++v;
        ARMCI_Put(&v, counter, (int)sizeof v, 0);
        ARMCI_Fence(0);
        ARMCI_Unlock(0, owner);
    }
    ARMCI_Barrier();
    int total = -1;
    ARMCI_Get(counter, &total, (int)sizeof total, 0);
    CHECK_EQ(total, kIncs * np);
    /* Mutex 1 of every rank taken and given back, in rank order. */
    for (int r = 0; r < np; ++r) {
        ARMCI_Lock(1, r);
        ARMCI_Unlock(1, r);
    }
    ARMCI_Barrier();
    ARMCI_Destroy_mutexes();
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np > 8) FAIL("at most 8 ranks (got %d)", np);
    CHECK_EQ(ARMCI_Init(), 0);

    void *dbl[8], *ints[8], *lngs[8], *flts[8], *cpls[8], *dcps[8];
    CHECK_EQ(ARMCI_Malloc(dbl, kN * sizeof(double)), 0);
    CHECK_EQ(ARMCI_Malloc(ints, kN * sizeof(int)), 0);
    CHECK_EQ(ARMCI_Malloc(lngs, kN * sizeof(long)), 0);
    CHECK_EQ(ARMCI_Malloc(flts, 64 * sizeof(float)), 0);
    CHECK_EQ(ARMCI_Malloc(cpls, 64 * sizeof(float complex)), 0);
    CHECK_EQ(ARMCI_Malloc(dcps, 64 * sizeof(double complex)), 0);
    local_fill(dbl[me], kN * sizeof(double), 0);
    local_fill(ints[me], kN * sizeof(int), 0);
    local_fill(lngs[me], kN * sizeof(long), 0);
    local_fill(flts[me], 64 * sizeof(float), 0);
    local_fill(cpls[me], 64 * sizeof(float complex), 0);
    local_fill(dcps[me], 64 * sizeof(double complex), 0);
    ARMCI_Barrier();

    contiguous(dbl, ints, lngs, flts, cpls, dcps);
    strided(dbl);
    vectors(lngs);
    rmw(ints, lngs);
    mutexes(ints);

    /* ARMCI_Malloc_local memory is MPI_Alloc_mem'd: a put from it and a get into it. */
    long* scratch = ARMCI_Malloc_local(16 * sizeof(long));
    CHECK(scratch != NULL, "ARMCI_Malloc_local");
    for (int i = 0; i < 16; ++i) scratch[i] = me * 100 + i;
    const int right = (me + 1) % np;
    ARMCI_Put(scratch, (long*)lngs[right] + 800, 16 * (int)sizeof(long), right);
    sync_all();
    ARMCI_Get((long*)lngs[me] + 800, scratch, 16 * (int)sizeof(long), me);
    for (int i = 0; i < 16; ++i) CHECK_EQ(scratch[i], ((me + np - 1) % np) * 100 + i);
    ARMCI_Free_local(scratch);

    ARMCI_Free(dcps[me]);
    ARMCI_Free(cpls[me]);
    ARMCI_Free(flts[me]);
    ARMCI_Free(lngs[me]);
    ARMCI_Free(ints[me]);
    ARMCI_Free(dbl[me]);
    ARMCI_Finalize();
    if (me == 0) printf("dropin_armci: %d ranks, all checks passed\n", np);
    MPI_Finalize();
    return 0;
}
