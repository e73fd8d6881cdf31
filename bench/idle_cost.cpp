// idle_cost.cpp — what an idle fastrma engine costs: the CPU time of each rank's progress
// thread, and of the whole process, while the application sleeps with a window open (and
// after some RMA traffic, so the thread has been woken and gone back to sleep).
// Prints one line per rank and a CSV row: rank,idle_seconds,progress_cpu_ms,process_cpu_ms,percent_of_core
#include <fastrma/fastrma.h>
#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/c_api_internal.hpp"
#include "engine/engine.hpp"

static double process_cpu_ms() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

int main(int argc, char** argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
    void* base;
    FRMA_Win win;
    FRMA_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    // Some traffic first, including a lock that must be retried, so the thread has work.
    FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    long v = rank;
    for (int i = 0; i < 1000; ++i) FRMA_Put(&v, 1, MPI_LONG, 0, 8 * rank, 1, MPI_LONG, win);
    FRMA_Win_unlock(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    auto* eng = fastrma::detail::current_engine();
    const double t0 = process_cpu_ms();
    const double p0 = eng->progress().thread_cpu_ns() / 1e6;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double p1 = eng->progress().thread_cpu_ns() / 1e6;
    const double t1 = process_cpu_ms();
    const double pct = (p1 - p0) / (seconds * 1e3) * 100.0;
    std::printf(
        "rank %d: idle %.1f s: progress thread %.3f ms CPU (%.4f%% of a core), whole process %.3f ms, thread on PU "
        "%d\n",
        rank, seconds, p1 - p0, pct, t1 - t0, eng->progress().bound_pu());
    std::printf("CSV,idle_cost,%d,%.1f,%.3f,%.3f,%.4f\n", rank, seconds, p1 - p0, t1 - t0, pct);
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    FRMA_Win_free(&win);
    MPI_Finalize();
    return 0;
}
