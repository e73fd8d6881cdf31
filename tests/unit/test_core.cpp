// test_core.cpp — unit tier for the engine's pieces: pools, slot table, targets, config,
// shared segments, the progress engine, and the lock protocol with ranks as threads (each
// thread a rank with its own Engine over a ThreadBootstrap).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.hpp"
#include "base/errors.hpp"
#include "base/pool.hpp"
#include "engine/bootstrap_threads.hpp"
#include "engine/engine.hpp"
#include "engine/window.hpp"
#include "epochs/lock_protocol.hpp"
#include "epochs/slot_table.hpp"
#include "ops/state_words.hpp"
#include "progress/progress.hpp"
#include "progress/spin_wait.hpp"
#include "transport/peer_links.hpp"
#include "transport/shm/offload.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/shm.hpp"

using namespace fastrma::detail;

namespace {

TEST(Pool, BoundedWithParentFallbackAndRecycling) {
    Pool<Op> global(3);
    Pool<Op> local(2, &global);
    std::vector<Op*> got;
    for (int i = 0; i < 5; ++i) {
        Op* op = local.get();
        ASSERT_NE(op, nullptr) << i;
        got.push_back(op);
    }
    EXPECT_EQ(local.get(), nullptr) << "both pools exhausted";
    EXPECT_EQ(local.live(), 2u);
    EXPECT_EQ(global.live(), 3u);
    EXPECT_EQ(got[0]->home, &local);
    EXPECT_EQ(got[4]->home, &global);
    got[4]->tcount = 99;
    Pool<Op>::put(got[4]);  // back to its own pool, reset
    EXPECT_EQ(global.live(), 2u);
    Op* again = local.get();
    ASSERT_EQ(again, got[4]);
    EXPECT_EQ(again->tcount, 0u);
    EXPECT_EQ(again->home, &global);
    for (Op* op : got) Pool<Op>::put(op);
    EXPECT_EQ(local.live() + global.live(), 0u);
    EXPECT_EQ(local.allocated(), 2u);
    EXPECT_EQ(global.allocated(), 3u);
    EXPECT_EQ(local.peak(), 2u);
    EXPECT_EQ(global.peak(), 3u);
}

TEST(SlotTable, RanksHashToSlotsAndAreFoundAgain) {
    SlotTable st(4);
    Target a, b, c;
    a.rank = 1;
    b.rank = 5;  // same slot as 1
    c.rank = 2;
    st.insert(&a);
    st.insert(&b);
    st.insert(&c);
    EXPECT_EQ(&st.slot_of(1), &st.slot_of(5));
    EXPECT_NE(&st.slot_of(1), &st.slot_of(2));
    EXPECT_EQ(st.find(1), &a);
    EXPECT_EQ(st.find(5), &b);
    EXPECT_EQ(st.find(2), &c);
    EXPECT_EQ(st.find(3), nullptr);
    st.remove(&b);
    EXPECT_EQ(st.find(5), nullptr);
    EXPECT_EQ(st.find(1), &a);
}

TEST(Target, QueueIsFifo) {
    Target t;
    Op o[3];
    for (int i = 0; i < 3; ++i) {
        o[i].tcount = std::uint64_t(i);
        t.push(&o[i]);
    }
    EXPECT_EQ(t.npending, 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(t.pop()->tcount, std::uint64_t(i));
    EXPECT_EQ(t.pop(), nullptr);
    EXPECT_EQ(t.tail, nullptr);
}

TEST(Config, ReadsEnvironmentAndRejectsBadValues) {
    setenv("FASTRMA_SLOTS", "7", 1);
    setenv("FASTRMA_OP_POOL", "nonsense", 1);
    setenv("FASTRMA_SHM_METHOD", "shm_open", 1);
    Config c = Config::from_env();
    EXPECT_EQ(c.slots, 7u);
    EXPECT_EQ(c.op_pool, 4096u) << "bad value falls back to the default";
    EXPECT_EQ(c.shm_method, ShmMethod::shm_open);
    unsetenv("FASTRMA_SLOTS");
    unsetenv("FASTRMA_OP_POOL");
    unsetenv("FASTRMA_SHM_METHOD");
    EXPECT_EQ(c.progress_core, -1) << "auto by default";
    EXPECT_EQ(c.poll_idle_us, 10000);
    EXPECT_EQ(c.poll_min_us, 1);
    for (auto [word, value] : {std::pair{"follow", -3}, {"none", -2}, {"auto", -1}, {"3", 3}, {"-4", -1}}) {
        setenv("FASTRMA_PROGRESS_CORE", word, 1);
        EXPECT_EQ(Config::from_env().progress_core, value) << "FASTRMA_PROGRESS_CORE=" << word;
    }
    unsetenv("FASTRMA_PROGRESS_CORE");
    for (const auto& p : config_params()) EXPECT_EQ(std::strncmp(p.name, "FASTRMA_", 8), 0);
}

TEST(ShmSegment, BothMethodsMapTheSameMemoryAndLeaveNoName) {
    for (ShmMethod m : {ShmMethod::pidfd, ShmMethod::shm_open}) {
        ShmSegment own;
        ASSERT_EQ(own.create(10000, m), MPI_SUCCESS);
        EXPECT_GE(own.size(), 10000u);
        ShmSegment peer;
        ASSERT_EQ(peer.map_peer(own.export_info()), MPI_SUCCESS);
        std::string name = own.export_info().name;
        own.seal();
        own.data()[4321] = 77;
        EXPECT_EQ(peer.data()[4321], 77) << "two mappings of one segment";
        if (m == ShmMethod::shm_open) {
            ASSERT_FALSE(name.empty());
            EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0) << "name unlinked at seal";
        }
    }
}

TEST(ShmSegment, SweepRemovesNamesOfDeadCreators) {
    // A name whose pid cannot exist (pid_max is far below 2^30).
    char name[128];
    std::snprintf(name, sizeof name, "/fastrma-%u-%d-deadbeef", unsigned(getuid()), (1 << 30) + 5);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
    EXPECT_GE(sweep_stale_segments(), 1);
    EXPECT_NE(access((std::string("/dev/shm") + name).c_str(), F_OK), 0);
}

// A waiter spins (no yield) until its time budget is spent, counted from its first idle
// pass, then yields on every pass; progress starts the budget over.
TEST(SpinWait, SpinsForItsBudgetThenYieldsAndStartsOverOnProgress) {
    const std::uint64_t saved = g_wait_spin_ns.load();
    g_wait_spin_ns.store(5'000'000);  // 5 ms
    SpinWait w;
    const std::uint64_t t0 = now_ns();
    while (now_ns() - t0 < 1'000'000) {
        w.idle();
        ASSERT_FALSE(w.yielding()) << "yielded within the budget, after " << (now_ns() - t0) << " ns";
    }
    while (!w.yielding()) {
        w.idle();
        ASSERT_LT(now_ns() - t0, 2'000'000'000ull) << "never yields";
    }
    EXPECT_GE(now_ns() - t0, 5'000'000ull) << "yields before its budget";
    w.progressed();
    EXPECT_FALSE(w.yielding());
    g_wait_spin_ns.store(0);  // no budget: yields at the first clock check (16 passes)
    SpinWait z;
    for (int i = 0; i < 15; ++i) z.idle();
    EXPECT_FALSE(z.yielding());
    z.idle();
    EXPECT_TRUE(z.yielding());
    g_wait_spin_ns.store(saved);
}

TEST(Progress, RunsPollersSleepsWhenIdleAndWakesOnTheDoorbell) {
    Config cfg;
    cfg.spin_us = 10;
    ProgressEngine pe(cfg, 0);
    std::atomic<int> work{0}, done{0};
    pe.add_poller([&] {
        if (work.load() > 0) {
            work.fetch_sub(1);
            done.fetch_add(1);
            return Poll::busy;
        }
        return Poll::idle;
    });
    pe.start();
    auto wait_for = [&](auto pred) {
        for (int i = 0; i < 2000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return pred();
    };
    ASSERT_TRUE(wait_for([&] { return pe.sleeps() >= 1; })) << "idle thread never slept";
    const std::uint64_t cpu0 = pe.thread_cpu_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_LT(pe.thread_cpu_ns() - cpu0, 20'000'000u) << "idle thread burns CPU";
    work.store(5);
    pe.wake();
    ASSERT_TRUE(wait_for([&] { return done.load() == 5; })) << "doorbell did not wake the thread";
    pe.stop();
    EXPECT_FALSE(pe.running());
}

// A transport's wait fd (watch_fd): while the thread sleeps in its idle back-off tier (here
// sleeps doubling from 1 ms to 2 s: after 1.2 s quiet each is 0.5-1 s), a readable fd wakes
// it at once; after unwatch_fd it no longer does. Without the waker each round would wait
// for the sleep to end (fails 3 of 3 with watch_fd a no-op).
TEST(Progress, AWatchedFdWakesTheThreadOutOfItsLongSleeps) {
    Config cfg;
    cfg.spin_us = 0;
    cfg.poll_predict = false;
    cfg.poll_max_us = 1000;
    cfg.poll_quiet_ms = 1;
    cfg.poll_idle_us = 2'000'000;
    ProgressEngine pe(cfg, 0);
    int fds[2];
    ASSERT_EQ(0, pipe2(fds, O_NONBLOCK | O_CLOEXEC));
    std::atomic<int> arrived{0};
    std::atomic<bool> done{false};
    pe.add_poller([&] {  // a network peer's traffic: only polling finds it
        char c;
        if (read(fds[0], &c, 1) == 1) {
            arrived.fetch_add(1);
            return Poll::busy;
        }
        return done.load() ? Poll::idle : Poll::waiting;  // (stop() waits for idle)
    });
    pe.start();
    int key = 0;
    pe.watch_fd(&key, fds[0]);
    auto took_ms = [&](int want) {
        const auto t0 = std::chrono::steady_clock::now();
        while (arrived.load() < want && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    };
    for (int round = 1; round <= 3; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // into the long sleeps
        ASSERT_EQ(1, write(fds[1], "x", 1));
        EXPECT_LT(took_ms(round), 150) << "round " << round << ": the fd did not wake the thread";
        EXPECT_EQ(arrived.load(), round);
    }
    pe.unwatch_fd(&key);
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    ASSERT_EQ(1, write(fds[1], "x", 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(arrived.load(), 3) << "an unwatched fd still woke the thread";
    done.store(true);
    pe.stop();
    close(fds[0]);
    close(fds[1]);
}

TEST(Progress, PredictsTheQuietOnlyFromEightLongOnesAfterAnswers) {
    QuietPredictor q;
    for (int i = 0; i < 7; ++i) q.record(500'000);
    EXPECT_EQ(q.first_sleep_ns(), 0u) << "fewer than 8 quiet periods seen";
    q.record(400'000);
    EXPECT_EQ(q.first_sleep_ns(), 200'000u) << "half the shortest";
    q.record(30'000);  // under 50 us: a conversation (a misprediction is recorded as 0)
    EXPECT_EQ(q.first_sleep_ns(), 0u);
    for (int i = 0; i < 7; ++i) q.record(500'000);
    EXPECT_EQ(q.first_sleep_ns(), 0u) << "the short one is still among the last 8";
    q.record(500'000);
    EXPECT_EQ(q.first_sleep_ns(), 250'000u);
}

// A poller with a burst of work every 2 ms, each answering an origin (note_answer_sent), and
// nothing in between but an am peer to poll (waiting). With FASTRMA_POLL_PREDICT the thread
// learns the pause and sleeps through half of it, then polls every 100 us (FASTRMA_POLL_MAX_US):
// about 11 passes per pause, against about 25 for the 1, 2, 4 ... 100 us back-off.
long passes_per_pause(bool predict) {
    Config cfg;
    cfg.spin_us = 0;
    cfg.poll_predict = predict;
    ProgressEngine pe(cfg, 0);
    using clk = std::chrono::steady_clock;
    std::atomic<long> passes{0}, bursts{0};
    std::atomic<bool> stop{false};
    auto next = clk::now() + std::chrono::milliseconds(2);
    pe.add_poller([&] {
        if (stop.load()) return Poll::idle;
        if (clk::now() >= next) {
            next = clk::now() + std::chrono::milliseconds(2);
            bursts.fetch_add(1);
            note_answer_sent();
            return Poll::busy;
        }
        passes.fetch_add(1);
        return Poll::waiting;
    });
    pe.start();
    while (bursts.load() < 12) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // learning
    const long p0 = passes.load(), b0 = bursts.load();
    while (bursts.load() < b0 + 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long per = (passes.load() - p0) / (bursts.load() - b0);
    EXPECT_EQ(pe.predictions() > 0, predict);
    stop.store(true);
    pe.stop();
    return per;
}

TEST(Progress, SleepsThroughAPauseItHasSeenAfterEachAnswer) {
    // (Measured here: 9-14 against 21-23. Relative, since a loaded machine stretches every
    // short sleep and so thins the plain back-off's passes too; up to three attempts, as a
    // machine loaded by other jobs can stretch them until the two meet.)
    long with = 0, without = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
        with = passes_per_pause(true), without = passes_per_pause(false);
        std::printf("passes per 2-ms pause: %ld with the prediction, %ld without\n", with, without);
        if (with + 4 < without) break;
    }
    EXPECT_LT(with + 4, without) << "the prediction did not spare the pause's wake-ups";
}

// The stand-down tests: a thread that polls every 20 us at most when not standing down,
// and dozes of 50 us doubling to 2 ms.
Config stand_down_config() {
    Config cfg;
    cfg.spin_us = 10;
    cfg.poll_max_us = 20;
    cfg.stand_down_us = 2000;
    return cfg;
}

// Calls serve() every 20 us for 100 ms, spinning in between, as a waiting thread does, and
// stamps each call in *last (steady-clock ns). Returns the number of calls.
template <class Serve>
long serve_for_100ms(Serve serve, std::atomic<std::int64_t>* last) {
    using clk = std::chrono::steady_clock;
    const auto until = clk::now() + std::chrono::milliseconds(100);
    long calls = 0;
    while (clk::now() < until) {
        last->store(clk::now().time_since_epoch().count());
        serve();
        ++calls;
        const auto next = clk::now() + std::chrono::microseconds(20);
        while (clk::now() < next) {}
    }
    return calls;
}

// Whether the last serve() call was less than 200 us ago. The stand-down tests count only the
// progress thread's passes that close to a serve: on a loaded machine (a sanitizer suite
// beside this one) the serving thread is at times preempted for milliseconds, and then the
// progress thread rightly resumes polling; those passes say nothing about the stand-down.
bool recently(const std::atomic<std::int64_t>& last) {
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    return now - last.load() < 200'000;
}

// Sets a flag when the test body leaves, however it leaves (a failed ASSERT too): the pollers
// then report idle, and the engine's destructor, which drains before it joins, returns.
struct SetOnExit {
    std::atomic<bool>& flag;
    ~SetOnExit() { flag.store(true); }
};

// A waiting application thread that helps (help()) runs the pollers itself, and the
// progress thread stands down while it does: next to no poller call from the progress
// thread during the help, and it polls again once the help stopped.
TEST(Progress, StandsDownWhileAWaiterHelpsAndResumesAfter) {
    std::atomic<std::thread::id> helper{};
    std::atomic<int> by_thread{0}, by_helper{0}, by_thread_helped{0};
    std::atomic<std::int64_t> last_help{0};
    std::atomic<bool> finished{false};
    ProgressEngine pe(stand_down_config(), 0);
    SetOnExit done{finished};
    pe.add_poller([&] {
        if (std::this_thread::get_id() == helper.load()) {
            by_helper.fetch_add(1);
        } else {
            by_thread.fetch_add(1);
            if (recently(last_help)) by_thread_helped.fetch_add(1);
        }
        return finished.load() ? Poll::idle : Poll::waiting;  // waiting: the thread keeps polling
    });
    pe.start();
    auto wait_for = [&](auto pred) {
        for (int i = 0; i < 2000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return pred();
    };
    ASSERT_TRUE(wait_for([&] { return by_thread.load() > 10; })) << "the progress thread does not poll";
    helper.store(std::this_thread::get_id());
    pe.help();  // the first help: the thread may be inside a pass right now
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const int before = by_thread_helped.load();
    const long helps = serve_for_100ms([&] { pe.help(); }, &last_help);  // a waiter helps between polls of its flag
    // Dozes of 50 us doubling to 2 ms, one pass after each: about 55 passes in 100 ms, against
    // one per help (every ~20 us: poll_max_us = 20) without the stand-down.
    EXPECT_LE(5 * (by_thread_helped.load() - before), helps) << "the progress thread polled while a waiter helped";
    EXPECT_GT(by_helper.load(), 50) << "help() did not run the pollers";
    EXPECT_GT(pe.stand_downs(), 0u);
    const int after = by_thread.load();
    EXPECT_TRUE(wait_for([&] { return by_thread.load() > after + 10; })) << "the progress thread did not resume";
    finished.store(true);
    pe.stop();
}

// A thread that enters MPI only now and then (an MPI_Test every 200 us in a compute loop:
// the host-progress hook marks a help each time) does not stand the progress thread down: it
// keeps polling at its own pace. (Standing down for it made every am request wait for the
// application's next MPI call: rma_suite rate over am with the target asleep, 0.26 M puts/s.)
TEST(Progress, ASparseHelperDoesNotStandTheThreadDown) {
    std::atomic<int> passes{0};
    std::atomic<bool> finished{false};
    Config cfg = stand_down_config();
    cfg.poll_quiet_ms = 10000;  // (no idle tier: a poller with work seen recently)
    ProgressEngine pe(cfg, 0);
    SetOnExit done{finished};
    pe.add_poller([&] {
        passes.fetch_add(1);
        return finished.load() ? Poll::idle : Poll::waiting;
    });
    pe.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // The thread's own pace, alone, then with a helper every 200 us, each over 100 ms: a ratio,
    // so that a loaded machine (fewer passes either way) does not decide.
    auto count_for_100ms = [&](bool help) {
        const int p0 = passes.load();
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (std::chrono::steady_clock::now() < until) {
            if (help) pe.mark_hook_helped();
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        return passes.load() - p0;
    };
    const int alone = count_for_100ms(false);
    const int helped = count_for_100ms(true);
    std::printf("sparse helper: %d passes in 100 ms (alone: %d), %llu stand-downs\n", helped, alone,
                (unsigned long long)pe.stand_downs());
    // Standing down for each help (dozes of 50 us doubling to 2 ms) left about 5 % of the
    // passes; now the thread keeps its own pace (calls 200 us apart are no steady helper).
    EXPECT_GT(5 * helped, alone) << "the thread stood down for a helper that calls in every 200 us";
    finished.store(true);
    pe.stop();
}

// mark_helped() and mark_hook_helped(): another thread serving for us (an am flush wait,
// the host-progress hook) stands the thread down like a help; called from the progress thread itself (a poller
// inside MPI, whose progress runs the hook) it must not, or the thread would doze while it
// is the only one serving.
TEST(Progress, MarkHelpedStandsDownOnlyForOtherThreads) {
    std::atomic<int> passes{0}, passes_helped{0};
    std::atomic<std::int64_t> last_help{0};
    std::atomic<bool> finished{false};
    ProgressEngine pe(stand_down_config(), 0);
    SetOnExit done{finished};
    pe.add_poller([&] {
        passes.fetch_add(1);
        if (recently(last_help)) passes_helped.fetch_add(1);
        pe.mark_helped();  // on the progress thread: no-ops
        pe.mark_hook_helped();
        return finished.load() ? Poll::idle : Poll::waiting;
    });
    pe.start();
    // 100 ms, or up to 5 s where other jobs take the cores or a sanitizer slows the thread
    // (it then gets fewer passes in the same time; what matters is that it keeps polling:
    // TSan at load 9 gave 114 in the first second).
    for (int i = 0; i < 50 && passes.load() <= 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(pe.stand_downs(), 0u) << "the progress thread stood itself down";
    EXPECT_GT(passes.load(), 200) << "the thread did not keep polling";
    for (bool hook : {false, true}) {
        SCOPED_TRACE(hook ? "the host-progress hook, a mark every 20 us" : "a flush waiter, a mark every 20 us");
        // Up to three rounds: on a loaded machine the marking thread may lose its core for
        // longer than the hook's gap, and a round without a steady helper proves nothing.
        bool stood_down = false;
        for (int round = 0; round < 3 && !stood_down; ++round) {
            const int before = passes_helped.load();
            const std::uint64_t downs = pe.stand_downs();
            const long helps = serve_for_100ms([&] { hook ? pe.mark_hook_helped() : pe.mark_helped(); }, &last_help);
            stood_down = pe.stand_downs() > downs;
            if (stood_down) {
                EXPECT_LE(5 * (passes_helped.load() - before), helps)
                    << "the thread kept polling while another thread served";
            }
        }
        EXPECT_TRUE(stood_down) << "no stand-down in three rounds of a steady helper";
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // (out of the stand-down)
    }
    finished.store(true);
    pe.stop();
}

// Pinned inside the process's cpuset; with FASTRMA_SPIN_US=auto it spins (20 us) only when
// the cpuset leaves it a PU besides the application's, not on a rank bound to one PU. ctest
// runs this twice: as launched, and under `taskset -c 0` (unit_one_pu).
TEST(Progress, PinsInsideTheCpusetAndSpinsOnlyWithAPuToSpare) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    const int pus = CPU_COUNT(&set);
    for (int configured : {-1, 5}) {
        Config cfg;
        cfg.spin_us = configured;
        ProgressEngine pe(cfg, 0);
        EXPECT_EQ(pe.spin_us(), -1) << "in use before the thread started";
        pe.start();
        for (int i = 0; i < 2000 && pe.spin_us() == -1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(pe.spin_us(), configured >= 0 ? configured : pus == 1 ? 0 : 20) << pus << " PUs";
        const int pu = pe.bound_pu();
        ASSERT_GE(pu, 0) << "not pinned";
        EXPECT_TRUE(CPU_ISSET(pu, &set)) << "pinned outside the cpuset: PU " << pu;
        pe.stop();
    }
}

// FASTRMA_PROGRESS_NICE applies to the progress thread only: the thread reads its own value
// back, and the calling thread's stays as it was. (A raise, which needs no privilege.)
TEST(Progress, NiceAppliesToTheProgressThreadOnly) {
    errno = 0;
    const int mine = getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)));
    ASSERT_EQ(errno, 0);
    Config cfg;
    cfg.progress_nice = std::min(19, mine + 7);
    ProgressEngine pe(cfg, 0);
    EXPECT_EQ(pe.nice(), INT_MIN) << "in use before the thread started";
    pe.start();
    for (int i = 0; i < 2000 && pe.nice() == INT_MIN; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(pe.nice(), cfg.progress_nice);
    EXPECT_EQ(getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid))), mine) << "the caller's nice value changed";
    pe.stop();
}

TEST(Progress, PlacementLeavesAPuOfItsOwnOnlyWhenTheCpusetHasOneToSpare) {
    // (configured, cpuset PUs, machine PUs, local index, local size)
    auto at = [](int c, int n, int m, int i, int l) { return ProgressEngine::placement(c, n, m, i, l); };
    auto pu = [](Placement p) { return p.kind == Placement::pu ? p.index : -100 - int(p.kind); };
    const int follow = -100 - int(Placement::follow), unpinned = -100 - int(Placement::unpinned);
    EXPECT_EQ(pu(at(5, 4, 4, 0, 2)), 1) << "an index, modulo the cpuset";
    EXPECT_EQ(pu(at(-2, 4, 4, 0, 2)), unpinned);
    EXPECT_EQ(pu(at(-1, 1, 2, 0, 2)), 0) << "bound to one PU: that one";
    EXPECT_EQ(pu(at(-3, 1, 4, 0, 1)), 0) << "follow on one PU: that one";
    EXPECT_EQ(pu(at(-1, 2, 2, 0, 2)), follow) << "2 unbound ranks on 2 PUs: none to spare";
    EXPECT_EQ(pu(at(-1, 2, 2, 1, 3)), follow);
    EXPECT_EQ(pu(at(-1, 2, 2, 0, 1)), 1) << "1 rank on 2 PUs: the other PU";
    EXPECT_EQ(pu(at(-1, 8, 16, 3, 8)), 4) << "8 ranks bound per socket of 8 PUs: 4 per socket, PUs to spare";
    EXPECT_EQ(pu(at(-1, 8, 16, 3, 16)), follow) << "16 ranks, 8 per socket";
    EXPECT_EQ(pu(at(-1, 16, 16, 2, 4)), 13);
    EXPECT_EQ(pu(at(-3, 16, 16, 2, 4)), follow) << "follow asked for";
}

// Follow placement: the thread moves to the PU the main thread (this test's) runs on.
TEST(Progress, PinsToThePuOfTheMainThreadWhenFollowing) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    Config cfg;
    cfg.progress_core = -3;
    ProgressEngine pe(cfg, 0);
    // Work now and then, waiting in between: the thread polls with back-off and, while work
    // comes, looks where the main thread runs.
    std::atomic<int> passes{0};
    const int id = pe.add_poller([&] { return ++passes % 8 == 0 ? Poll::busy : Poll::waiting; });
    pe.start();
    auto wait_for = [&](auto done) {
        for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return done();
    };
    if (cpus.size() == 1) {
        EXPECT_TRUE(wait_for([&] { return pe.bound_pu() == cpus[0]; })) << "one PU: pinned to it";
        EXPECT_FALSE(pe.following());
    } else {
        EXPECT_TRUE(wait_for([&] { return pe.following(); }));
        for (int round = 0; round < 2; ++round) {
            for (int c : {cpus.front(), cpus.back()}) {
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
                EXPECT_TRUE(wait_for([&] { return pe.bound_pu() == c; }))
                    << "main thread on PU " << c << ", progress thread on " << pe.bound_pu();
            }
        }
        ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
    }
    pe.remove_poller(id);
    pe.stop();
}

TEST(CopyOffload, PiecesRunByManyWorkersRetireInOrderAndAFullRingRefuses) {
    CopyOffload q(4096, 8);  // 8 pieces of 4 KiB
    std::vector<unsigned char> src(6 * 4096 + 100), dst(src.size(), 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    std::atomic<int> err{0};
    const std::uint64_t seq = q.submit(dst.data(), src.data(), src.size(), &err);
    ASSERT_EQ(seq, 7u);  // 7 pieces
    EXPECT_FALSE(q.done(seq));
    EXPECT_EQ(q.submit(dst.data(), src.data(), 2 * 4096, &err), 0u) << "ring overfilled";
    // Two workers and the waiter share the pieces; done(seq) only when all finished.
    std::thread a([&] {
        while (q.run_one()) {}
    }),
        b([&] {
            while (q.run_one()) {}
        });
    q.wait(seq);
    a.join();
    b.join();
    EXPECT_TRUE(q.done(seq));
    EXPECT_EQ(src, dst);
    EXPECT_EQ(err.load(), 0);
    // Room again once retired; a piece of a later submit is not reported done early.
    const std::uint64_t s2 = q.submit(dst.data(), src.data(), 4096, &err);
    EXPECT_EQ(s2, 8u);
    EXPECT_FALSE(q.done(s2));
    EXPECT_EQ(q.poll(), Poll::busy);
    EXPECT_TRUE(q.done(s2));
    EXPECT_EQ(q.poll(), Poll::idle);
}

TEST(CopyOffload, FailedCrossMemoryAttachStoresAnErrorClass) {
    CopyOffload q(4096, 4);
    std::atomic<int> err{0};
    char buf[64] = {};
    // pid 0x7ffffff0 does not exist: process_vm_writev fails, the waiter sees the error.
    const std::uint64_t seq = q.submit_cma(pid_t(0x7ffffff0), true, buf, 4096, sizeof buf, &err);
    ASSERT_NE(seq, 0u);
    q.wait(seq);
    EXPECT_EQ(err.load(), MPI_ERR_OTHER);
}

// A peer still in a window's closing barrier watches this process through a connection to
// its listener: the listener must outlive the engine (finalize), or the peer reads a death.
TEST(PeerLinks, TheListenerOutlivesTheEngine) {
    LinkAddress a{};
    {
        Config cfg;
        Engine eng(cfg, 0);
        a = eng.links().local();
    }
    if (a.n == 0) GTEST_SKIP() << "no IPv4 address but the loopback: nothing listens";
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = a.port;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa)) << std::strerror(errno);
    {
        Config cfg;
        Engine eng(cfg, 0);  // a second engine, destroyed too: the same listener
        EXPECT_EQ(a.port, eng.links().local().port);
    }
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    EXPECT_EQ(0, poll(&p, 1, 50)) << "the connection was closed: revents " << p.revents;
    close(fd);
}

// ---- ranks as threads -----------------------------------------------------------------

template <class Fn>
void run_ranks(int n, Fn&& fn) {
    auto group = std::make_shared<ThreadGroup>(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
            Config cfg;
            Engine eng(cfg, r);
            fn(eng, std::make_unique<ThreadBootstrap>(group, r), r);
        });
    for (auto& t : ts) t.join();
}

OpRequest rma(RmaKind kind, const void* origin, void* result, int target, MPI_Aint disp, MPI_Datatype type,
              MPI_Op op = MPI_OP_NULL) {
    return OpRequest::make(kind, "test", origin, 1, type, result, 1, type, target, disp, 1, type, op);
}

TEST(LockProtocolAsThreads, ExclusiveRmwLosesNoUpdateAndLockAllExcludes) {
    const int n = 4, iters = 300;
    std::atomic<int> failures{0};
    std::atomic<void*> base0{nullptr};
    run_ranks(n, [&](Engine& eng, std::unique_ptr<Bootstrap> bs, int r) {
        std::unique_ptr<Window> w;
        void* base = nullptr;
        Bootstrap* b = bs.get();
        ASSERT_EQ(Window::allocate(eng, std::move(bs), 64, 1, &base, &w), MPI_SUCCESS);
        if (r == 0) {
            std::memset(base, 0, 64);
            base0 = base;
        }
        b->barrier();
        for (int i = 0; i < iters; ++i) {
            if (r == 3 && i % 3 == 0) {
                // lock_all readers must never see the two words differ.
                failures += w->lock_all(0) != MPI_SUCCESS;
                std::int64_t v[2] = {0, 0};
                OpRequest g = rma(RmaKind::get, v, nullptr, 0, 0, MPI_INT64_T);
                g.origin_count = g.target_count = 2;
                failures += w->post(g) != MPI_SUCCESS;
                failures += w->flush(0, false) != MPI_SUCCESS;
                failures += v[0] != v[1];
                failures += w->unlock_all() != MPI_SUCCESS;
                continue;
            }
            failures += w->lock(MPI_LOCK_EXCLUSIVE, 0, 0) != MPI_SUCCESS;
            std::int64_t v = 0;
            failures += w->post(rma(RmaKind::get, &v, nullptr, 0, 0, MPI_INT64_T)) != MPI_SUCCESS;
            failures += w->flush(0, false) != MPI_SUCCESS;
            ++v;
            failures += w->post(rma(RmaKind::put, &v, nullptr, 0, 0, MPI_INT64_T)) != MPI_SUCCESS;
            failures += w->flush(0, false) != MPI_SUCCESS;
            std::this_thread::yield();
            failures += w->post(rma(RmaKind::put, &v, nullptr, 0, 8, MPI_INT64_T)) != MPI_SUCCESS;
            failures += w->unlock(0) != MPI_SUCCESS;
        }
        b->barrier();
        if (r == 0) {
            auto* p = static_cast<std::int64_t*>(base);
            EXPECT_EQ(p[0], std::int64_t(iters) * (n - 1) + (iters - (iters + 2) / 3));
            EXPECT_EQ(p[0], p[1]);
        }
        failures += w->free_collective() != MPI_SUCCESS;
    });
    EXPECT_EQ(failures.load(), 0) << last_error_message();
}

// The doorbell is a process-shared futex: a peer rings it through its own mapping of our
// bell page (here: a second mapping of the same memfd, taken with pidfd_getfd as a node
// peer does). A private futex would key on the address and never wake us: this test would
// then hang until the ctest TIMEOUT.
TEST(Doorbell, ARingThroughAnotherMappingWakesAThreadDozing) {
    Config cfg;
    cfg.progress_thread = false;
    Engine ringer(cfg, 1), owner(cfg, 0);
    ProgressEngine& pe = owner.progress();
    const SegmentExport bell = owner.bell_export();
    ASSERT_GT(bell.pid, 0) << "no shared bell page (memfd)";
    std::atomic<bool> go{false}, woke{false};
    std::thread sleeper([&] {
        while (!go.load()) pe.doze(0);  // 0: no time limit, only a ring ends it
        woke = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    go = true;
    for (int i = 0; i < 5000 && !woke.load(); ++i) {
        ASSERT_TRUE(ringer.ring_peer(bell));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    sleeper.join();
    EXPECT_TRUE(woke.load());
}

// A process that waits for a lock marks itself in the lock owner's waiter bitmap; the
// releaser kicks it (its kLockKick word) and rings its doorbell.
TEST(Doorbell, ReleasingALockRingsTheWaiter) {
    std::atomic<int> failures{0}, phase{0};
    std::atomic<std::uint64_t> kicks{0};
    const std::uint64_t rung0 = stat_total(Stat::bells_rung);
    run_ranks(3, [&](Engine& eng, std::unique_ptr<Bootstrap> bs, int r) {
        std::unique_ptr<Window> w;
        void* base = nullptr;
        Bootstrap* b = bs.get();
        ASSERT_EQ(Window::allocate(eng, std::move(bs), 64, 1, &base, &w), MPI_SUCCESS);
        b->barrier();
        if (r == 1) {
            failures += w->lock(MPI_LOCK_EXCLUSIVE, 0, 0) != MPI_SUCCESS;
            phase = 1;
            while (phase.load() < 2) std::this_thread::yield();  // rank 2 is waiting
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            failures += w->unlock(0) != MPI_SUCCESS;
        } else if (r == 2) {
            while (phase.load() < 1) std::this_thread::yield();
            std::int64_t v = 7;
            failures += w->lock(MPI_LOCK_EXCLUSIVE, 0, 0) != MPI_SUCCESS;  // not granted yet
            phase = 2;
            failures += w->post(rma(RmaKind::put, &v, nullptr, 0, 0, MPI_INT64_T)) != MPI_SUCCESS;
            failures += w->unlock(0) != MPI_SUCCESS;  // waits: rung awake by rank 1's release
            kicks = w->state_words(2)[kLockKick];
        }
        b->barrier();
        if (r == 0) {
            EXPECT_EQ(*static_cast<std::int64_t*>(base), 7);
        }
        failures += w->free_collective() != MPI_SUCCESS;
    });
    EXPECT_EQ(failures.load(), 0) << last_error_message();
    EXPECT_GE(kicks.load(), 1u) << "the releaser did not kick the waiting process";
    EXPECT_GE(stat_total(Stat::bells_rung) - rung0, 1u) << "no doorbell was rung";
}

TEST(LockProtocolAsThreads, WordsReturnToZeroAfterEveryKindOfLock) {
    run_ranks(2, [&](Engine& eng, std::unique_ptr<Bootstrap> bs, int r) {
        std::unique_ptr<Window> w;
        void* base = nullptr;
        Bootstrap* b = bs.get();
        ASSERT_EQ(Window::allocate(eng, std::move(bs), 8, 1, &base, &w), MPI_SUCCESS);
        for (int k = 0; k < 50; ++k) {
            ASSERT_EQ(w->lock(k % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, 1 - r, 0), MPI_SUCCESS);
            std::int64_t v = k;
            ASSERT_EQ(w->post(rma(RmaKind::put, &v, nullptr, 1 - r, 0, MPI_INT64_T)), MPI_SUCCESS);
            ASSERT_EQ(w->unlock(1 - r), MPI_SUCCESS);
            ASSERT_EQ(w->lock_all(0), MPI_SUCCESS);
            ASSERT_EQ(w->unlock_all(), MPI_SUCCESS);
        }
        b->barrier();
        for (int q = 0; q < 2; ++q) {
            const std::uint64_t* state = w->state_words(q);
            EXPECT_EQ(state[kLockLocal], 0u) << "rank " << q;
            EXPECT_EQ(state[kLockGlobal], 0u) << "rank " << q;
        }
        b->barrier();
        EXPECT_EQ(w->free_collective(), MPI_SUCCESS);
    });
}

TEST(LockProtocol, TryFunctionsFollowTheTwoLevelRules) {
    std::vector<std::uint64_t> master(kStateBytes / 8, 0), target(kStateBytes / 8, 0);
    PeerRegion m, t;
    m.state = master.data();
    t.state = target.data();
    ShmTransport tp;
    ASSERT_TRUE(lockproto::try_shared(tp, t));
    ASSERT_TRUE(lockproto::try_shared(tp, t));
    EXPECT_FALSE(lockproto::try_exclusive(tp, m, tp, t)) << "shared holders present";
    EXPECT_EQ(master[kLockGlobal], 0u) << "failed exclusive attempt undone";
    EXPECT_TRUE(lockproto::try_lock_all(tp, m)) << "lock_all coexists with shared";
    EXPECT_FALSE(lockproto::try_exclusive(tp, m, tp, t)) << "lock_all holder present";
    lockproto::unlock_all(tp, m);
    lockproto::unlock_shared(tp, t);
    lockproto::unlock_shared(tp, t);
    ASSERT_TRUE(lockproto::try_exclusive(tp, m, tp, t));
    EXPECT_FALSE(lockproto::try_shared(tp, t));
    EXPECT_FALSE(lockproto::try_lock_all(tp, m));
    EXPECT_EQ(target[kLockLocal], kLocalExclusive) << "failed shared attempt undone";
    lockproto::unlock_exclusive(tp, m, tp, t);
    EXPECT_EQ(master[kLockGlobal], 0u);
    EXPECT_EQ(target[kLockLocal], 0u);
}

}  // namespace

namespace {
TEST(Config, EveryParameterIsDocumented) {
    FILE* f = std::fopen(FASTRMA_SOURCE_DIR "/docs/configuration.md", "r");
    ASSERT_NE(f, nullptr);
    std::string doc;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) doc.append(buf, n);
    std::fclose(f);
    for (const auto& p : config_params())
        EXPECT_NE(doc.find(std::string("`") + p.name + "`"), std::string::npos) << p.name;
}
}  // namespace
