// mpi_world.hpp — this process's rank and the size of MPI_COMM_WORLD, for the MPI-tier tests.
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <cstring>

inline int world_rank() {
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size() {
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// The info the tests' windows are created with: MPI_INFO_NULL, or no_locks=true when
// TEST_WINDOW_NO_LOCKS=1 — the runs over am with neither a progress thread nor the host
// hook, where fastrma refuses windows that could be locked (active target only).
inline MPI_Info window_info() {
    static const MPI_Info info = [] {
        const char* v = std::getenv("TEST_WINDOW_NO_LOCKS");
        if (!v || std::strcmp(v, "1") != 0) return MPI_INFO_NULL;
        MPI_Info i;
        MPI_Info_create(&i);
        MPI_Info_set(i, "no_locks", "true");
        return i;
    }();
    return info;
}
