// main_unit.cpp — gtest main for the unit tier: MPI is initialised (singleton, no mpiexec)
// because the datatype table and some tests use MPI handles, never communication.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    ::testing::InitGoogleTest(&argc, argv);
    int rc = RUN_ALL_TESTS();
    MPI_Finalize();
    return rc;
}
