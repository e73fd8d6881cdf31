// progress.hpp — the progress engine: one loop shape.
//
// Transports and windows register pollers: a function that advances its work and says
// whether it did any (Poll::busy), has work that only time will advance, such as a lock
// to retry (Poll::waiting), or has nothing (Poll::idle). The engine knows nothing above it.
//
// The thread runs every poller; while any is busy it loops; while any is waiting it
// sleeps with exponential back-off up to poll_max_us; when all are idle it spins for
// spin_us and then sleeps on a futex until wake() rings the doorbell (a post that queues
// work, a new lock request). Idle, it costs nothing: no timer, no polling.
// The doorbell lives in a shared-memory page (BellPage) that the engine places in a memfd
// segment node-local peers map, so they can ring it too (Engine::ring_peer: a lock released
// that we wait for); without one it is private to the process.
// Application threads waiting in a sync call doze on the same futex (doze()).
// It is pinned inside the process's cpuset (placement()): to a PU of its own when the
// cpuset has one to spare, else to the PU the process's main thread runs on (follow),
// so that its work is taken from its own rank's computation and not from another
// rank's. stop() drains: it runs the pollers until every one reports idle.
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/clock.hpp"
#include "base/config.hpp"

namespace fastrma::detail {

enum class Poll : std::uint8_t { idle, waiting, busy };

// The shared doorbell: a futex word and the number of threads asleep on it. Whoever rings
// adds to `ring` and wakes the sleepers, if any (process-shared futex operations).
struct BellPage {
    std::atomic<std::uint32_t> ring{0};
    std::atomic<std::uint32_t> sleepers{0};
    static void ring_it(BellPage* b);
    // Sleeps while ring == seen, at most timeout_ns (0: no limit).
    static void wait(BellPage* b, std::uint32_t seen, long timeout_ns);
};

// Answers this process's am servers have sent: each released an origin that waited for it
// (a flush, a get, a fetch). The progress loop learns how long the quiet after such a burst
// lasts (FASTRMA_POLL_PREDICT).
inline std::atomic<std::uint64_t> g_answers_sent{0};
inline void note_answer_sent() { g_answers_sent.fetch_add(1, std::memory_order_relaxed); }

// The first back-off sleep of a quiet period, from the last quiet periods that followed a
// burst which answered an origin (a ring of QuietPredictor::kDepth): half the shortest, when
// there are kDepth of them and all lasted at least kMinNs; else 0 (no prediction: start at
// FASTRMA_POLL_MIN_US).
class QuietPredictor {
public:
    static constexpr unsigned kDepth = 8;
    static constexpr std::uint64_t kMinNs = 50000;  // shorter pauses: the plain back-off wakes little
    void record(std::uint64_t quiet_ns) {
        ring_[next_] = quiet_ns;
        next_ = (next_ + 1) % kDepth;
        if (n_ < kDepth) ++n_;
    }
    std::uint64_t first_sleep_ns() const {
        if (n_ < kDepth) return 0;
        std::uint64_t shortest = ring_[0];
        for (unsigned i = 1; i < kDepth; ++i) shortest = std::min(shortest, ring_[i]);
        return shortest >= kMinNs ? shortest / 2 : 0;
    }

private:
    std::uint64_t ring_[kDepth] = {};
    unsigned next_ = 0, n_ = 0;
};

// Where the progress thread runs (FASTRMA_PROGRESS_CORE).
struct Placement {
    enum Kind : std::uint8_t { pu, follow, unpinned } kind = pu;
    int index = 0;  // kind == pu: logical index into the process's cpuset
    // One PU per local rank, counted from the end of a cpuset of n PUs (where application
    // threads are placed last).
    static Placement per_rank(int n, int local_index) { return {pu, n - 1 - (local_index % n)}; }
};

class ProgressEngine {
public:
    // Hook calls stand the thread down while their mean gap is at most this (loop()).
    static constexpr std::uint64_t kHookGapNs = 50000;
    using Poller = std::function<Poll()>;

    // local_index, local_size: this process's position among the ranks of its node, and
    // their number (from the launcher's environment; placement() estimates from them how
    // many ranks share this process's cpuset).
    // shared_bell: the doorbell's page, placed by the owner where node peers map it (null:
    // a private one).
    ProgressEngine(const Config& cfg, int local_index, int local_size = 1, BellPage* shared_bell = nullptr);
    ~ProgressEngine();

    void start();
    void stop();  // drains, then joins
    bool running() const { return thread_.joinable(); }

    int add_poller(Poller p);
    void remove_poller(int id);  // on return the poller is not running and will not run
    // While the thread sleeps long (a back-off sleep above FASTRMA_POLL_MAX_US, not standing
    // down), rings the doorbell when fd becomes readable (Transport::wait_fd: traffic from a
    // peer that cannot ring it, a network peer), from a thread of its own that sleeps in
    // poll(); in shorter sleeps the thread polls soon enough itself, and a waker armed at
    // every message would take the cores from the threads serving it. key identifies the
    // fd; once unwatch_fd returns, fd is no longer polled (it may be closed). A no-op
    // without a running progress thread.
    void watch_fd(const void* key, int fd);
    void unwatch_fd(const void* key);
    void wake();  // ring the doorbell
    // An application thread waiting for something a peer will signal: sleep up to us
    // microseconds or until the doorbell rings (a peer released a lock, a local post).
    void doze(unsigned us);
    // The thread is running or spinning (not asleep on its futex): work handed to it now
    // starts within microseconds, without paying a wake-up.
    bool awake() const { return running() && !sleeping_.load(std::memory_order_relaxed); }

    // One pass over all pollers from the calling thread (sync calls that wait help).
    Poll progress_once();
    // The same from an application thread waiting in a sync call while the progress thread
    // runs: the waiter serves (a try-lock on the pollers), and
    // the progress thread stands down for a while after each help, dozing instead of
    // polling. On 2 cores shared by 2 ranks, a waiter and a progress thread polling the
    // same host MPI would take turns at each core (docs/progress.md).
    // Returns nullopt when another thread is inside the pollers (the caller may be that
    // thread, re-entered from a poller that waits: it must then serve what it waits for
    // itself, or two processes waiting on each other would stop serving).
    // A thread other than the progress thread is serving without pause (an am flush waiter
    // serving its endpoints): stand down as after a help. A no-op on the progress thread itself.
    void mark_helped();
    // The same from the host-progress hook, which runs in every MPI call of any thread: a
    // thread blocked in MPI calls it without pause, one that tests now and then (an
    // MPI_Test in a compute loop) only then. So it counts its calls, and they stand the
    // thread down only while they come on average at least every kHookGapNs (loop()).
    void mark_hook_helped();
    std::optional<Poll> help();  // stands the progress thread down (loop(): dozes up to FASTRMA_STAND_DOWN_US)
    // True on the progress thread (of any engine): it may doze, so what it serves from the
    // host-progress hook does not advertise prompt service (served.hpp's beat).
    static bool on_progress_thread();

    // CPU time consumed by the progress thread so far (ns), and the PU it is bound to.
    std::uint64_t thread_cpu_ns() const;
    int bound_pu() const { return bound_pu_.load(std::memory_order_relaxed); }
    int spin_us() const { return spin_us_.load(std::memory_order_relaxed); }  // in use (-1: thread not started)
    // A window over a network transport opens / closes: while one is open, the thread polls
    // for FASTRMA_NET_SPIN_US after work instead of spin_us (a software provider's passive
    // traffic needs this process's CPU, and a computing target answers only while its
    // thread polls), unless the rank's cpuset is one PU or is shared by more ranks than it
    // has PUs.
    void net_window(bool open) { net_windows_.fetch_add(open ? 1 : -1, std::memory_order_relaxed); }
    // The spin after work in use now (us), for the stats report.
    int work_spin_us() const { return work_spin_us_.load(std::memory_order_relaxed); }
    // The thread's nice value, read back after FASTRMA_PROGRESS_NICE (INT_MIN: not started).
    int nice() const { return nice_.load(std::memory_order_relaxed); }
    // FASTRMA_SPIN_US as the thread applies it: configured (>= 0) as is; auto (-1) 20 us, or
    // 0 when the process's cpuset has a single PU (the thread shares it with the application).
    static int effective_spin_us(int configured, int cpuset_pus);
    // FASTRMA_PROGRESS_CORE as the thread applies it, for a cpuset of cpuset_pus PUs out of
    // the machine's machine_pus: an index (>= 0) as is; -2 unpinned; -3 follow; auto (-1):
    // the only PU of a one-PU cpuset; else follow when the ranks that share the cpuset
    // (local_size spread evenly over the machine) leave no PU to spare; else one PU per
    // local rank, counted from the end of the cpuset.
    static Placement placement(int configured, int cpuset_pus, int machine_pus, int local_index, int local_size);
    bool following() const { return follow_.load(std::memory_order_relaxed); }
    std::uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
    std::uint64_t stand_downs() const { return stand_downs_.load(std::memory_order_relaxed); }
    std::uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
    // Back-off sleeps whose length was predicted (FASTRMA_POLL_PREDICT).
    std::uint64_t predictions() const { return predictions_.load(std::memory_order_relaxed); }

private:
    void loop();
    // loop()'s steps (progress.cpp): the thread's setup, the stand-down while a helper
    // serves, the bookkeeping after a busy pass, the back-off while work waits, the sleep
    // while idle.
    struct LoopState;
    void start_loop(LoopState& st);
    void stand_down_if_helped(LoopState& st, std::uint32_t bell);
    void after_busy(LoopState& st);
    void wait_for_work(LoopState& st, std::uint32_t bell);
    void wait_idle(LoopState& st, std::uint32_t bell);
    void waker_loop();  // watch_fd's thread
    void stop_waker();
    void deep_sleep(bool on);  // (the thread, around a long sleep, when fds are watched)
    int pin();  // binds the thread; returns the PUs of the process's cpuset (0: unknown)
    // Follow mode: re-pins the thread to the PU the main thread was last seen on, at most
    // once per kFollowPeriodNs while there is work (a pread of its /proc stat file).
    void follow(std::uint64_t now);
    static constexpr std::uint64_t kFollowPeriodNs = 10000000;

    Config cfg_;
    int local_index_;
    int local_size_;
    std::atomic<bool> follow_{false};  // set by the thread in pin()
    cpu_set_t cpuset_{};  // the process's cpuset (follow: where it may go)
    int stat_fd_ = -1;  // the main thread's /proc stat file, kept open (follow)
    std::uint64_t follow_next_ns_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    BellPage* bell_ = nullptr;  // the shared page, or bell_local_ without one
    BellPage bell_local_;
    std::atomic<bool> sleeping_{false};
    // watch_fd: the watched fds, their generation and the one the waker polls (fd_mu_).
    std::mutex fd_mu_;
    std::condition_variable fd_cv_;
    std::vector<std::pair<const void*, int>> fds_;
    std::uint64_t fd_gen_ = 0, fd_polled_gen_ = 0;
    bool fd_stop_ = false;
    bool deep_ = false;  // the thread sleeps long: the waker polls the fds
    std::uint64_t deep_exits_ = 0;  // long sleeps ended (the waker waits for one after ringing)
    std::atomic<bool> has_fds_{false};
    int fd_ctl_ = -1;  // eventfd: the set changed, or stop
    std::thread waker_;
    std::mutex mu_;  // guards pollers_ and serializes passes
    std::vector<std::pair<int, Poller>> pollers_;
    int next_id_ = 1;
    std::atomic<pthread_t> tid_{};
    std::atomic<bool> has_tid_{false};
    std::atomic<bool> set_up_{false};  // start_loop done (start() waits for it)
    std::atomic<int> bound_pu_{-1};  // set by the thread in pin(); read by stats at any time
    std::atomic<int> spin_us_{-1};  // set by the thread at start
    std::atomic<int> net_windows_{0};  // open windows over a network transport
    std::atomic<int> work_spin_us_{-1};  // the last quiet's spin after work
    std::atomic<int> nice_{INT_MIN};  // set by the thread at start
    std::atomic<std::uint64_t> wakeups_{0}, sleeps_{0};
    std::atomic<std::uint64_t> stand_downs_{0};
    std::atomic<std::uint64_t> predictions_{0};
    std::atomic<bool> helped_{false};  // a thread served for us since the loop last looked
    // Calls of the host-progress hook (mark_hook_helped; a count, not exact): written in every
    // MPI call of a thread inside MPI, so on a cache line of its own (the last member: the
    // rest of its line is the class's tail padding).
    alignas(64) std::atomic<std::uint64_t> hook_calls_{0};
};

}  // namespace fastrma::detail
