/*
 * loop_common.h — what the small two-rank C loops (atomic_latency, lock_latency) share:
 * the same source built twice, on fastrma's FRMA_* calls or, with BENCH_HOST_MPI defined,
 * on the host MPI's MPI_* calls (WIN, W(name)); a monotonic clock in ns; and the ordering
 * their batch means are sorted by (fastest and median reported).
 */
#pragma once
#include <mpi.h>
#include <time.h>

#ifdef BENCH_HOST_MPI
#define WIN MPI_Win
#define W(name) MPI_##name
#else
#include <fastrma/fastrma.h>
#define WIN FRMA_Win
#define W(name) FRMA_##name
#endif

static inline double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static inline int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}
