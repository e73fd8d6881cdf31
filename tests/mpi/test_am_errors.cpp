// test_am_errors.cpp — a host MPI call that fails inside the am transport is reported, not
// dropped and not fatal: this binary interposes PMPI_Isend (the executable's definition
// comes before libmpi's) and makes chosen calls fail with MPI_ERR_INTERN. An origin's
// failed request send is reported by its flush; a target's failed answer by its own next
// completion point (its origin's wait still ends: an empty answer takes its place); the
// window stays usable. Runs with FASTRMA_TRANSPORT=am, 2 ranks.
#include <dlfcn.h>
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include "common/mpi_world.hpp"

namespace {

// Isend calls still to fail, on any thread, among those with a tag of at least min_tag
// (the am transport's answers use reply tags from 1000 up, its requests tag 7, payloads 8).
std::atomic<int> fail_any_thread{0};
std::atomic<int> min_tag{0};
std::atomic<int> failed_calls{0};

}  // namespace

extern "C" int PMPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* rq) {
    using Fn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "PMPI_Isend"));
    if (tag >= min_tag.load() && fail_any_thread.load() > 0 && fail_any_thread.fetch_sub(1) > 0) {
        failed_calls.fetch_add(1);
        return MPI_ERR_INTERN;
    }
    return real(buf, count, type, dest, tag, comm, rq);
}

namespace {

struct Win {
    FRMA_Win win = FRMA_WIN_NULL;
    std::int64_t* base = nullptr;
    Win() {
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        std::memset(base, 0, 64);
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    ~Win() { EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win)); }
};

TEST(AmHostErrors, AFailedRequestSendIsReportedByTheFlushAndTheWindowStaysUsable) {
    const int me = world_rank();
    Win w;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    if (me == 1) {
        const std::int64_t lost = 5, kept = 7;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));  // the lock's messages are out
        // The send of the batch that holds the put fails, whichever thread sends it: the
        // flush, or the progress thread once the batch has waited long enough (slow runs).
        failed_calls = 0;
        min_tag = 7;
        fail_any_thread = 1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&lost, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, w.win));
        const int rc = FRMA_Win_flush(0, w.win);
        fail_any_thread = 0;
        EXPECT_EQ(failed_calls.load(), 1);
        EXPECT_EQ(rc, MPI_ERR_INTERN);
        const std::string msg = FRMA_Last_error_message();
        EXPECT_NE(msg.find("FRMA_Win_flush"), std::string::npos) << msg;
        EXPECT_NE(msg.find("MPI_Isend"), std::string::npos) << msg;
        // Reported once; the next put goes through.
        EXPECT_EQ(MPI_SUCCESS, FRMA_Put(&kept, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.base[1], 7);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(AmHostErrors, AFailedAnswerIsReportedAtTheTargetAndTheOriginsWaitEnds) {
    const int me = world_rank();
    Win w;
    if (me == 0) w.base[2] = 42;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    if (me == 1) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(w.win));  // the lock's answers are in
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {  // the server's next answer fails (whichever thread of ours sends it)
        failed_calls = 0;
        min_tag = 1000;
        fail_any_thread = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 1) {
        std::int64_t got = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));  // ends: an empty answer came instead
        EXPECT_EQ(got, -1);  // (not applied: the buffer keeps its contents)
        got = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, w.win));
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
        EXPECT_EQ(got, 42);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        fail_any_thread = 0;
        EXPECT_EQ(failed_calls.load(), 1);
        const int rc = FRMA_Win_flush_all(w.win);  // this process's next completion point
        EXPECT_EQ(rc, MPI_ERR_INTERN);
        const std::string msg = FRMA_Last_error_message();
        EXPECT_NE(msg.find("MPI_Isend (answer)"), std::string::npos) << msg;
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(w.win));  // reported once
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
