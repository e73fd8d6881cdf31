// mpi_main.cpp — gtest main for MPI tests. MPI_THREAD_MULTIPLE; a failed assertion on any
// rank prints and calls MPI_Abort at once, because its peers would otherwise wait forever
// in the next collective.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {
class AbortOnFailure : public ::testing::EmptyTestEventListener {
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        std::fprintf(stderr, "[rank %d] FAILED at %s:%d\n%s\n", rank, r.file_name() ? r.file_name() : "?",
                     r.line_number(), r.summary());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
};
}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        std::fprintf(stderr, "host MPI gives thread level %d, tests need MPI_THREAD_MULTIPLE\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ::testing::InitGoogleTest(&argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (rank != 0) delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new AbortOnFailure);
    int rc = RUN_ALL_TESTS();
    MPI_Finalize();
    return rc;
}
