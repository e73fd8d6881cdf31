// win_memory.cpp — what a window costs per process as the number of ranks grows: the
// engine's per-window bookkeeping (Window::metadata_bytes), the mappings it adds (VMAs in
// /proc/self/maps) and the resident memory, for each flavor, averaged over K windows.
// Window memory itself is 4 KiB per rank and not counted in metadata.
// CSV: CSV,win_memory,flavor,ranks,metadata_bytes,vmas,rss_kib,create_us
#include <fastrma/fastrma.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"

static long vmas() {
    std::ifstream f("/proc/self/maps");
    std::string line;
    long n = 0;
    while (std::getline(f, line)) ++n;
    return n;
}
static long rss_kib() {
    std::ifstream f("/proc/self/statm");
    long size = 0, rss = 0;
    f >> size >> rss;
    return rss * 4;
}

int main(int argc, char** argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int K = argc > 1 ? std::atoi(argv[1]) : 20;
    const char* flavors[] = {"allocate", "create", "shared", "dynamic"};
    for (const char* fl : flavors) {
        std::vector<FRMA_Win> wins(static_cast<std::size_t>(K), FRMA_WIN_NULL);
        std::vector<std::vector<char>> mem(static_cast<std::size_t>(K));
        MPI_Barrier(MPI_COMM_WORLD);
        const long v0 = vmas(), r0 = rss_kib();
        double t = MPI_Wtime();
        for (int k = 0; k < K; ++k) {
            void* base;
            if (!std::strcmp(fl, "allocate"))
                FRMA_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &wins[k]);
            else if (!std::strcmp(fl, "shared"))
                FRMA_Win_allocate_shared(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &wins[k]);
            else if (!std::strcmp(fl, "dynamic"))
                FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &wins[k]);
            else {
                mem[k].assign(4096, 0);
                FRMA_Win_create(mem[k].data(), 4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wins[k]);
            }
        }
        t = (MPI_Wtime() - t) / K;
        const long v1 = vmas(), r1 = rss_kib();
        std::size_t meta = 0;
        for (auto w : wins) meta += fastrma::detail::window_of(w)->metadata_bytes();
        double row[4] = {double(meta) / K, double(v1 - v0) / K, double(r1 - r0) / K, t * 1e6};
        double maxrow[4];
        MPI_Reduce(row, maxrow, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            std::printf(
                "%-8s ranks %2d: metadata %8.0f B/window, %5.1f mappings/window, RSS %+7.1f KiB/window, create %8.1f "
                "us\n",
                fl, size, maxrow[0], maxrow[1], maxrow[2], maxrow[3]);
            std::printf("CSV,win_memory,%s,%d,%.0f,%.1f,%.1f,%.1f\n", fl, size, maxrow[0], maxrow[1], maxrow[2],
                        maxrow[3]);
            std::fflush(stdout);
        }
        for (auto& w : wins) FRMA_Win_free(&w);
    }
    MPI_Finalize();
    return 0;
}
