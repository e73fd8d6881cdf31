// mpi_main.cpp — gtest main for MPI tests. MPI_THREAD_MULTIPLE; a failed assertion on any
// rank prints and calls MPI_Abort at once, because its peers would otherwise wait forever
// in the next collective. A test that runs longer than FASTRMA_TEST_STUCK_S seconds (150;
// 0: never) is named on stderr by every rank it holds, and the job aborted: the log then
// says which test hung, before ctest's timeout kills the job without a word.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <unistd.h>

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

// The watch's state lives as long as its thread (gtest deletes the listener at exit,
// while the detached thread may still look).
struct Watch {
    long limit_s;
    std::mutex mu;
    std::string name;
    std::chrono::steady_clock::time_point started;
    bool running = false;
};

class Watchdog : public ::testing::EmptyTestEventListener {
public:
    explicit Watchdog(long limit_s) : w_(new Watch{limit_s, {}, {}, {}, false}) {
        std::thread([w = w_] { watch(w); }).detach();
    }

private:
    void OnTestStart(const ::testing::TestInfo& t) override {
        std::lock_guard lk(w_->mu);
        w_->name = std::string(t.test_suite_name()) + "." + t.name();
        w_->started = std::chrono::steady_clock::now();
        w_->running = true;
    }
    void OnTestEnd(const ::testing::TestInfo&) override {
        std::lock_guard lk(w_->mu);
        w_->running = false;
    }
    // Every thread's stack to stderr, one line each (scripts/stacks.sh; nothing without
    // gdb): what a stuck run was waiting on, short enough for a CI log's tail.
    static void print_stacks() {
        char cmd[512];
        std::snprintf(cmd, sizeof cmd, "bash %s %d >&2", FASTRMA_STACKS_SCRIPT, int(getpid()));
        if (std::system(cmd) != 0) std::fprintf(stderr, "(no stacks)\n");
        std::this_thread::sleep_for(std::chrono::seconds(5));  // the other ranks print theirs before the abort
    }
    static void watch(Watch* w) {
        for (;;) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
            std::lock_guard lk(w->mu);
            if (!w->running || std::chrono::steady_clock::now() - w->started < std::chrono::seconds(w->limit_s))
                continue;
            int rank = -1;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            std::fprintf(stderr, "[rank %d] STUCK: %s has run for more than %ld s (FASTRMA_TEST_STUCK_S)\n", rank,
                         w->name.c_str(), w->limit_s);
            std::fflush(stderr);
            print_stacks();
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    Watch* const w_;
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
    const char* stuck = std::getenv("FASTRMA_TEST_STUCK_S");
    if (const long limit = stuck ? std::atol(stuck) : 150; limit > 0) listeners.Append(new Watchdog(limit));
    int rc = RUN_ALL_TESTS();
    MPI_Finalize();
    return rc;
}
