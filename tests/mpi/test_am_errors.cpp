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
#include <deque>
#include <mutex>
#include <string>
#include <vector>
#include "common/mpi_world.hpp"

namespace {

// Isend calls still to fail, on any thread, among those with a tag of at least min_tag
// (the am transport's answers use reply tags from 1000 up, its requests tag 7, payloads 8).
std::atomic<int> fail_any_thread{0};
std::atomic<int> min_tag{0};
std::atomic<int> failed_calls{0};

// Requests to send with their target offset moved far outside the target's part (a wrong
// peer), on any thread: a get of one segment (kind 2, one segment: its offset and length
// are the message's last 16 bytes) or a batch of one put record (kind 8, one record: kind
// 1, 16 body bytes, offset, 8 data bytes: the message's last 24 bytes).
std::atomic<int> misdirect_get{0}, misdirect_put{0}, misdirected{0};
std::mutex sent_mu;
std::deque<std::vector<unsigned char>> sent_copies;  // the altered messages, alive until exit

const void* misdirected_copy(const void* buf, int count) {
    const auto* b = static_cast<const unsigned char*>(buf);
    if (!b || count < 40) return buf;
    std::uint32_t kind, nseg, rec[2];
    std::memcpy(&kind, b, 4);
    std::memcpy(&nseg, b + 4, 4);
    std::memcpy(rec, b + count - 24, 8);
    std::size_t at = 0;
    if (kind == 2 && nseg == 1 && misdirect_get.load() > 0 && misdirect_get.fetch_sub(1) > 0)
        at = std::size_t(count) - 16;
    else if (kind == 8 && nseg == 1 && rec[0] == 1 && rec[1] == 16 && misdirect_put.load() > 0 &&
             misdirect_put.fetch_sub(1) > 0)
        at = std::size_t(count) - 16;
    if (!at) return buf;
    std::lock_guard lk(sent_mu);
    std::vector<unsigned char>& c = sent_copies.emplace_back(b, b + count);
    const std::uint64_t far = std::uint64_t(1) << 40;
    std::memcpy(c.data() + at, &far, 8);
    misdirected.fetch_add(1);
    return c.data();
}

}  // namespace

extern "C" int PMPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* rq) {
    using Fn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "PMPI_Isend"));
    if (tag >= min_tag.load() && fail_any_thread.load() > 0 && fail_any_thread.fetch_sub(1) > 0) {
        failed_calls.fetch_add(1);
        return MPI_ERR_INTERN;
    }
    if (tag == 7 && type == MPI_BYTE && (misdirect_get.load() > 0 || misdirect_put.load() > 0))
        buf = misdirected_copy(buf, count);
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

// A request the target refused (out of its part: a wrong peer, played by the interposer
// above) is reported by the completion point that completes it, on allocate and create
// windows as on dynamic ones (issue 36, 2): flush for a get and a put, fence for a get. The
// get's buffer stays as it was, nothing lands, and the window stays usable.
TEST(AmRefusals, ARefusedRequestIsReportedOnAllocateAndCreateWindows) {
    const int me = world_rank();
    std::vector<std::int64_t> user(8, 0);
    for (const bool create : {false, true}) {
        SCOPED_TRACE(create ? "create" : "allocate");
        FRMA_Win win = FRMA_WIN_NULL;
        std::int64_t* mem = user.data();
        if (create)
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, 64, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        else
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
        for (int i = 0; i < 8; ++i) mem[i] = 100 + i;
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(MPI_COMM_WORLD);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        if (me == 1) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));  // the lock's messages are out
            std::int64_t got = -1;
            misdirected = 0;
            misdirect_get = 1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, win));
            EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Win_flush(0, win)) << "the refused get";
            misdirect_get = 0;
            EXPECT_EQ(misdirected.load(), 1);
            const std::string msg = FRMA_Last_error_message();
            EXPECT_NE(msg.find("FRMA_Win_flush"), std::string::npos) << msg;
            EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
            EXPECT_EQ(got, -1) << "a refused get leaves the buffer alone";
            const std::int64_t v = 55;
            misdirect_put = 1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, 0, 3, 1, MPI_INT64_T, win));
            EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Win_flush(0, win)) << "the refused put";
            misdirect_put = 0;
            EXPECT_EQ(misdirected.load(), 2);
            // Reported once; the window goes on.
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, win));
            EXPECT_EQ(got, 102);
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
        // A fence epoch: the fence that completes the refused get reports it.
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, win));
        int rc = MPI_SUCCESS;
        if (me == 1) {
            std::int64_t got = -1;
            misdirected = 0;
            misdirect_get = 1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, 0, 4, 1, MPI_INT64_T, win));
            rc = FRMA_Win_fence(0, win);
            misdirect_get = 0;
            EXPECT_EQ(misdirected.load(), 1);
            EXPECT_EQ(got, -1);
        } else {
            rc = FRMA_Win_fence(0, win);
        }
        EXPECT_EQ(rc, me == 1 ? MPI_ERR_RMA_RANGE : MPI_SUCCESS) << FRMA_Last_error_message();
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, win));
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0) {
            for (int i = 0; i < 8; ++i) EXPECT_EQ(mem[i], 100 + i) << "int64 " << i << ": nothing landed";
        }
        MPI_Barrier(MPI_COMM_WORLD);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    }
}

}  // namespace
