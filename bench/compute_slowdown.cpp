// compute_slowdown.cpp — what fastrma's progress thread takes from the application's
// computation. Rank 0 times a fixed compute kernel (no MPI calls) three ways:
//   quiet    : a window exists, nobody communicates (the progress thread sleeps);
//   serving  : the other ranks keep issuing puts + flushes to rank 0 (over am, rank 0's
//              progress thread serves every one; over shm, nobody needs rank 0's CPU);
// and reports the slowdown of "serving" against "quiet", median of repetitions.
// Usage: compute_slowdown [REPS] [GAP_US]: with GAP_US > 0 the other ranks pause that long
// between their batches (64 puts + flush): a paced stream of requests instead of a flood.
// CSV: CSV,compute_slowdown,transport,quiet_ms,serving_ms,slowdown_pct,ops_served
#include <fastrma/fastrma.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static double kernel(int iters) {
    volatile double x = 1.0;
    double y = 0.0;
    for (int i = 0; i < iters; ++i) {
        y += x * 1.0000001;
        x = y * 0.5 + 1e-9;
    }
    return y;
}

int main(int argc, char** argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    const long gap_us = argc > 2 ? std::atol(argv[2]) : 0;
    const int iters = 40'000'000;
    std::int64_t* base;
    FRMA_Win win;
    FRMA_Win_allocate(1 << 16, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    const char* tr = std::getenv("FASTRMA_TRANSPORT");
    double med[2] = {0, 0};
    long served = 0;
    for (int mode = 0; mode < 2; ++mode) {
        std::vector<double> t;
        for (int r = 0; r < reps; ++r) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                auto t0 = std::chrono::steady_clock::now();
                kernel(iters);
                t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                int stop = 1;
                for (int p = 1; p < size; ++p) MPI_Send(&stop, 1, MPI_INT, p, 9, MPI_COMM_WORLD);
            } else {
                int flag = 0, stop = 0;
                MPI_Request rq;
                MPI_Irecv(&stop, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &rq);
                if (mode == 1) FRMA_Win_lock_all(0, win);
                std::int64_t v = rank;
                while (!flag) {
                    if (mode == 1) {
                        for (int k = 0; k < 64; ++k) FRMA_Put(&v, 1, MPI_INT64_T, 0, 8 * k, 1, MPI_INT64_T, win);
                        FRMA_Win_flush(0, win);
                        served += 65;
                        if (gap_us > 0) {
                            struct timespec gap {
                                gap_us / 1000000, (gap_us % 1000000) * 1000
                            };
                            nanosleep(&gap, nullptr);
                        }
                    } else {
                        struct timespec ts {
                            0, 200000
                        };
                        nanosleep(&ts, nullptr);
                    }
                    MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
                }
                if (mode == 1) FRMA_Win_unlock_all(win);
            }
        }
        if (rank == 0) {
            std::sort(t.begin(), t.end());
            med[mode] = t[t.size() / 2];
        }
    }
    long total = 0;
    MPI_Reduce(&served, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        const double pct = (med[1] / med[0] - 1.0) * 100.0;
        std::printf(
            "transport %s, %d ranks%s: compute %.1f ms quiet, %.1f ms while serving %ld requests: slowdown %.1f%%\n",
            tr ? tr : "auto(shm)", size, gap_us > 0 ? " (paced)" : "", med[0], med[1], total, pct);
        std::printf("CSV,compute_slowdown,%s,%.2f,%.2f,%.2f,%ld\n", tr ? tr : "shm", med[0], med[1], pct, total);
    }
    FRMA_Win_free(&win);
    MPI_Finalize();
    return 0;
}
