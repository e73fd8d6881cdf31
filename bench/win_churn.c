/* win_churn.c — the cost of creating and freeing a window, as PGAS layers do it for every
 * array: MPI_Win_allocate (or MPI_Alloc_mem + MPI_Win_create) of 256 KiB per rank,
 * MPI_Win_lock_all / MPI_Win_unlock_all, MPI_Win_free, repeated. A plain MPI program: run it
 * on Open MPI alone and with libfastrma-mpi.so preloaded.
 *
 * Usage: win_churn [ITERATIONS (200)] [0: allocate, 1: alloc_mem + create]
 * Prints (rank 0) the median of create + free per iteration and the mean of each step. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const int n = argc > 1 ? atoi(argv[1]) : 200;
    const int create = argc > 2 ? atoi(argv[2]) : 0;
    double ta = 0, tl = 0, tu = 0, tf = 0;
    double* per = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; ++i) {
        MPI_Win w;
        void* base;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (create) {
            MPI_Alloc_mem(262144, MPI_INFO_NULL, &base);
            MPI_Win_create(base, 262144, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);
        } else {
            MPI_Win_allocate(262144, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w);
        }
        double t1 = MPI_Wtime();
        MPI_Win_lock_all(MPI_MODE_NOCHECK, w);
        double t2 = MPI_Wtime();
        MPI_Win_unlock_all(w);
        double t3 = MPI_Wtime();
        MPI_Win_free(&w);
        if (create) MPI_Free_mem(base);
        double t4 = MPI_Wtime();
        per[i] = t4 - t0;
        ta += t1 - t0;
        tl += t2 - t1;
        tu += t3 - t2;
        tf += t4 - t3;
    }
    qsort(per, (size_t)n, sizeof(double), cmp);
    if (me == 0 && n > 0)
        printf("%s: median create+free %.1f us; mean create %.1f, lock_all %.1f, unlock_all %.1f, free %.1f us\n",
               create ? "alloc_mem+create" : "allocate", 1e6 * per[n / 2], 1e6 * ta / n, 1e6 * tl / n, 1e6 * tu / n,
               1e6 * tf / n);
    free(per);
    MPI_Finalize();
    return 0;
}
