// mpi_world.hpp — this process's rank and the size of MPI_COMM_WORLD, for the MPI-tier tests.
#pragma once

#include <mpi.h>

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
