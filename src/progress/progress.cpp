// progress.cpp — see progress.hpp.
#include "progress/progress.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <algorithm>
#include <chrono>

namespace fastrma::detail {

namespace {
// Process-shared futex operations: node-local peers ring the same word through their
// own mapping of the bell page.
void futex_wait(std::atomic<std::uint32_t>* w, std::uint32_t expected, long timeout_ns) {
    timespec ts{timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(w), FUTEX_WAIT, expected, timeout_ns > 0 ? &ts : nullptr,
            nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>* w) {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(w), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
}  // namespace

void BellPage::ring_it(BellPage* b) {
    b->ring.fetch_add(1, std::memory_order_seq_cst);
    if (b->sleepers.load(std::memory_order_seq_cst)) futex_wake_all(&b->ring);
}

void BellPage::wait(BellPage* b, std::uint32_t seen, long timeout_ns) {
    b->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (b->ring.load(std::memory_order_seq_cst) == seen) futex_wait(&b->ring, seen, timeout_ns);
    b->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

ProgressEngine::ProgressEngine(const Config& cfg, int local_index, int local_size, BellPage* shared_bell)
    : cfg_(cfg), local_index_(local_index), local_size_(std::max(1, local_size)) {
    bell_ = shared_bell ? shared_bell : &bell_local_;
}

ProgressEngine::~ProgressEngine() {
    stop();
    if (stat_fd_ >= 0) close(stat_fd_);
}

void ProgressEngine::start() {
    if (thread_.joinable()) return;
    stop_.store(false);
    {
        std::lock_guard lk(fd_mu_);
        fd_stop_ = false;  // (stop() ended the waker; watch_fd makes a new one)
    }
    set_up_.store(false);
    thread_ = std::thread([this] { loop(); });
    // The thread's set-up (hwloc's topology, ~1 ms of CPU) runs before the caller goes on,
    // not beside the application's first operations on the same cores.
    set_up_.wait(false);
}

void ProgressEngine::stop() {
    stop_waker();
    if (!thread_.joinable()) return;
    stop_.store(true);
    wake();
    thread_.join();
    has_tid_.store(false);
    // Drain from this thread what the loop left (it drains too; this covers a late post).
    for (int i = 0; i < 1000000 && progress_once() != Poll::idle; ++i) {}
}

void ProgressEngine::watch_fd(const void* key, int fd) {
    if (fd < 0 || !running()) return;
    {
        std::lock_guard lk(fd_mu_);
        if (fd_stop_) return;
        if (!waker_.joinable()) {
            fd_ctl_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            if (fd_ctl_ < 0) return;
            waker_ = std::thread([this] { waker_loop(); });
        }
        fds_.emplace_back(key, fd);
        ++fd_gen_;
        has_fds_.store(true, std::memory_order_relaxed);
    }
    fd_cv_.notify_all();
    const std::uint64_t one = 1;
    (void)!::write(fd_ctl_, &one, sizeof one);
}

void ProgressEngine::unwatch_fd(const void* key) {
    std::unique_lock lk(fd_mu_);
    const auto it = std::find_if(fds_.begin(), fds_.end(), [key](const auto& e) { return e.first == key; });
    if (it == fds_.end()) return;
    fds_.erase(it);
    has_fds_.store(!fds_.empty(), std::memory_order_relaxed);
    const std::uint64_t gen = ++fd_gen_;
    const std::uint64_t one = 1;
    (void)!::write(fd_ctl_, &one, sizeof one);
    fd_cv_.notify_all();
    // Until the waker polls the new set (or has stopped): then the fd may be closed.
    fd_cv_.wait(lk, [&] { return fd_polled_gen_ >= gen || fd_stop_; });
}

void ProgressEngine::stop_waker() {
    {
        std::lock_guard lk(fd_mu_);
        fd_stop_ = true;
    }
    fd_cv_.notify_all();
    if (!waker_.joinable()) return;
    const std::uint64_t one = 1;
    (void)!::write(fd_ctl_, &one, sizeof one);
    waker_.join();
    ::close(fd_ctl_);
    fd_ctl_ = -1;
}

void ProgressEngine::deep_sleep(bool on) {
    {
        std::lock_guard lk(fd_mu_);
        deep_ = on;
        if (!on) ++deep_exits_;
    }
    fd_cv_.notify_all();
}

void ProgressEngine::waker_loop() {
    std::vector<pollfd> p;
    for (;;) {
        {
            std::unique_lock lk(fd_mu_);
            // Parked until the thread sleeps long (or the set changes: unwatch_fd waits).
            fd_cv_.wait(lk, [&] { return fd_stop_ || fd_gen_ != fd_polled_gen_ || (deep_ && !fds_.empty()); });
            if (fd_stop_) break;
            p.assign(1, pollfd{fd_ctl_, POLLIN, 0});
            for (const auto& e : fds_) p.push_back(pollfd{e.second, POLLIN, 0});
            fd_polled_gen_ = fd_gen_;
            if (!deep_) p.resize(1);  // (only acknowledging the new set)
        }
        fd_cv_.notify_all();
        if (p.size() == 1) continue;
        if (::poll(p.data(), nfds_t(p.size()), -1) <= 0) continue;  // (EINTR)
        if (p[0].revents) {  // the set changed, or stop
            std::uint64_t x;
            (void)!::read(fd_ctl_, &x, sizeof x);
            continue;
        }
        bool any = false;
        for (std::size_t i = 1; i < p.size(); ++i) {
            if (p[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {  // broken: not polled again
                std::lock_guard lk(fd_mu_);
                const int fd = p[i].fd;
                fds_.erase(std::remove_if(fds_.begin(), fds_.end(), [fd](const auto& e) { return e.second == fd; }),
                           fds_.end());
                has_fds_.store(!fds_.empty(), std::memory_order_relaxed);
                ++fd_gen_;
            } else if (p[i].revents) {
                any = true;
            }
        }
        if (!any) continue;
        // Ring, then wait until the thread is out of its long sleep (it reads the provider's
        // queue, which re-arms the fd) before arming again.
        std::unique_lock lk(fd_mu_);
        const std::uint64_t exits = deep_exits_;
        lk.unlock();
        wake();
        lk.lock();
        fd_cv_.wait_for(lk, std::chrono::milliseconds(2), [&] { return deep_exits_ != exits || fd_stop_; });
    }
}

int ProgressEngine::add_poller(Poller p) {
    int id;
    {
        std::lock_guard lk(mu_);
        id = next_id_++;
        pollers_.emplace_back(id, std::move(p));
    }
    wake();  // a sleeping thread must learn of it: the poller may need polling at once
    return id;
}

void ProgressEngine::remove_poller(int id) {
    std::lock_guard lk(mu_);
    pollers_.erase(std::remove_if(pollers_.begin(), pollers_.end(), [id](auto& e) { return e.first == id; }),
                   pollers_.end());
}

void ProgressEngine::wake() { BellPage::ring_it(bell_); }

void ProgressEngine::doze(unsigned us) {
    BellPage::wait(bell_, bell_->ring.load(std::memory_order_acquire), long(us) * 1000);
}

namespace {
[[gnu::tls_model("initial-exec")]] thread_local bool t_progress_thread = false;  // (waiters read it every pass)
}

// A flag, not a timestamp: waiters call this on every pass, where a clock read per pass
// is costly (docs/progress.md). Written only when clear, so that
// helpers do not take the cache line from each other while the thread dozes.
void ProgressEngine::mark_helped() {
    if (!t_progress_thread && !helped_.load(std::memory_order_relaxed)) helped_.store(true, std::memory_order_relaxed);
}

bool ProgressEngine::on_progress_thread() { return t_progress_thread; }

void ProgressEngine::mark_hook_helped() {
    // A plain load and store, not a read-modify-write: two threads in MPI at once may lose a
    // count, which only the rate estimate sees; the line stays in the caller's cache.
    if (!t_progress_thread)
        hook_calls_.store(hook_calls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::optional<Poll> ProgressEngine::help() {
    // Only a thread that gets the pollers stands the progress thread down: the progress
    // thread itself, waiting inside one of its pollers, holds mu_ and never does.
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return std::nullopt;
    mark_helped();  // (never the progress thread: it holds mu_ in its passes)
    Poll worst = Poll::idle;
    for (auto& [id, p] : pollers_) worst = std::max(worst, p());
    return worst;
}

Poll ProgressEngine::progress_once() {
    std::lock_guard lk(mu_);
    Poll worst = Poll::idle;
    for (auto& [id, p] : pollers_) worst = std::max(worst, p());
    return worst;
}

std::uint64_t ProgressEngine::thread_cpu_ns() const {
    if (!has_tid_.load()) return 0;
    clockid_t cid;
    if (pthread_getcpuclockid(tid_.load(), &cid) != 0) return 0;
    timespec ts;
    clock_gettime(cid, &ts);
    return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

Placement ProgressEngine::placement(int configured, int cpuset_pus, int machine_pus, int local_index, int local_size) {
    if (configured >= 0) return {Placement::pu, cpuset_pus > 0 ? configured % cpuset_pus : 0};
    if (configured == -2) return {Placement::unpinned, 0};
    if (cpuset_pus <= 1) return {Placement::pu, 0};
    if (configured == -3) return {Placement::follow, 0};
    // Ranks sharing this cpuset, if the node's ranks are spread evenly over the machine
    // (mpirun binds all to the same set, each to a socket, each to a core, ...).
    const long sharing = (long(local_size) * cpuset_pus + std::max(machine_pus, 1) - 1) / std::max(machine_pus, 1);
    // No PU to spare: a PU of its own would be some other rank's, and every request the
    // thread serves would be taken from that rank's computation (docs/progress.md).
    if (sharing >= cpuset_pus) return {Placement::follow, 0};
    return Placement::per_rank(cpuset_pus, local_index);
}

int ProgressEngine::pin() {
    // Returns the number of PUs in the cpuset (0: unknown).
    int n = 0;
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return 0;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return 0;
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(set))
        n = hwloc_bitmap_weight(set);
    const int machine = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    Placement where = placement(cfg_.progress_core, n, machine, local_index_, local_size_);
    if (n > 0 && where.kind == Placement::follow) {
        // The main thread's own stat (its task file: the process's would sum every thread).
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", int(getpid()));
        if (sched_getaffinity(0, sizeof cpuset_, &cpuset_) == 0) stat_fd_ = open(path, O_RDONLY | O_CLOEXEC);
        if (stat_fd_ < 0) where = Placement::per_rank(n, local_index_);  // no /proc
    }
    if (n > 0 && where.kind == Placement::pu) {
        int pu = -1, i = 0;
        for (int id = hwloc_bitmap_first(set); id != -1; id = hwloc_bitmap_next(set, id), ++i)
            if (i == where.index) {
                pu = id;
                break;
            }
        if (pu >= 0) {
            hwloc_bitmap_t one = hwloc_bitmap_alloc();
            hwloc_bitmap_only(one, unsigned(pu));
            if (hwloc_set_cpubind(topo, one, HWLOC_CPUBIND_THREAD) == 0) bound_pu_.store(pu, std::memory_order_relaxed);
            hwloc_bitmap_free(one);
        }
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    if (stat_fd_ >= 0) {
        follow_.store(true, std::memory_order_relaxed);
        follow(now_ns());
    }
    return n;
}

namespace {
// The PU the main thread last ran on: field 39 of its stat file (after the command name,
// which may contain spaces, in parentheses). -1 if unreadable.
int main_thread_cpu(int fd) {
    char buf[1024];
    const ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    if (k <= 0) return -1;
    buf[k] = 0;
    const char* p = std::strrchr(buf, ')');
    if (!p) return -1;
    int field = 2;
    for (++p; *p; ++p)
        if (*p == ' ' && ++field == 39) return std::atoi(p + 1);
    return -1;
}
}  // namespace

void ProgressEngine::follow(std::uint64_t now) {
    if (now < follow_next_ns_) return;
    follow_next_ns_ = now + kFollowPeriodNs;
    const int cpu = main_thread_cpu(stat_fd_);
    if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == bound_pu_.load(std::memory_order_relaxed) || !CPU_ISSET(cpu, &cpuset_))
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) bound_pu_.store(cpu, std::memory_order_relaxed);
}

int ProgressEngine::effective_spin_us(int configured, int cpuset_pus) {
    if (configured >= 0) return configured;
    // A rank bound to one PU: the thread shares it with the application, and a spin takes
    // the computation's time (docs/progress.md).
    return cpuset_pus == 1 ? 0 : 20;
}

// What the loop keeps between passes (loop() and its steps below).
struct ProgressEngine::LoopState {
    int spin_us = 0;
    bool may_net_spin = false;
    std::uint32_t first_backoff_us = 1, backoff_us = 1;
    std::uint64_t last_busy = 0;
    // Stand-down: a help since the last look (the previous pass, or the doze just ended)
    // means a thread is serving: doze first_doze_ns, doubling up to FASTRMA_STAND_DOWN_US for
    // as long as every doze saw a help. Each wake-up of a dozing thread takes a core from a
    // spinning waiter for a context switch or two (docs/progress.md); a single short help
    // keeps the thread away for first_doze_ns only.
    std::uint64_t max_doze_ns = 0, first_doze_ns = 0;
    std::uint64_t doze_ns = 0;  // 0: not standing down
    std::uint64_t hook_calls_seen = 0, hook_look_ns = 0;  // the hook's count at the last look, and when
    // The quiet after a burst that answered an origin (FASTRMA_POLL_PREDICT): a stream with
    // regular pauses (an origin that computes between epochs) needs no 1, 2, 4 ... us
    // wake-ups at the start of each pause, each costing a VM CPU time.
    QuietPredictor predictor;
    std::uint64_t answers_seen = 0;
    bool burst_answered = false;  // the current burst of work answered an origin
    bool in_quiet = false;  // a quiet period began (waiting since the last busy pass)
    bool quiet_after_answer = false;
    std::uint64_t predicted_ns = 0;  // the first sleep of this quiet, when predicted
    bool after_prediction = false;  // the last sleep was a predicted one
    std::uint64_t spin_ns = 0;  // polling after work, this quiet
};

void ProgressEngine::loop() {
    LoopState st;
    start_loop(st);
    while (true) {
        const std::uint32_t bell = bell_->ring.load(std::memory_order_acquire);
        // An application thread is waiting and serving (help()): leave the cores to it.
        if (st.max_doze_ns && !stop_.load(std::memory_order_acquire)) stand_down_if_helped(st, bell);
        const Poll p = progress_once();
        if (p == Poll::busy) {
            after_busy(st);
            continue;
        }
        if (stop_.load(std::memory_order_acquire) && p == Poll::idle) break;
        if (p == Poll::waiting)
            wait_for_work(st, bell);
        else
            wait_idle(st, bell);
    }
}

void ProgressEngine::start_loop(LoopState& st) {
    tid_.store(pthread_self());
    has_tid_.store(true);
    t_progress_thread = true;
    const int cpuset_pus = pin();
    st.spin_us = effective_spin_us(cfg_.spin_us, cpuset_pus);
    spin_us_.store(st.spin_us, std::memory_order_relaxed);
    // With a network window open: the longer spin after work, where the thread has a PU's
    // share to poll with (not a one-PU cpuset, not more ranks than PUs).
    st.may_net_spin = st.spin_us > 0 && cfg_.net_spin_us > st.spin_us && cpuset_pus > 0 && local_size_ <= cpuset_pus;
    // Short back-off sleeps must be short: the default timer slack would stretch every
    // short sleep to it and set the latency of an am request (docs/progress.md); a slack
    // of 1 us still lets the kernel batch the longer sleeps.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    // FASTRMA_PROGRESS_NICE: a thread that shares its PU with the computation (follow, or a
    // rank bound to one PU) waits, once woken, until the scheduler preempts that computation;
    // a lower nice value shortens the wait (docs/progress.md, Priority). setpriority on a
    // thread id sets that thread only (Linux).
    const id_t tid = id_t(syscall(SYS_gettid));
    if (cfg_.progress_nice) setpriority(PRIO_PROCESS, tid, cfg_.progress_nice);  // refused: stays as it is
    errno = 0;
    const int nice_now = getpriority(PRIO_PROCESS, tid);
    nice_.store(errno ? 0 : nice_now, std::memory_order_relaxed);
    st.first_backoff_us = std::uint32_t(std::max(1, std::min(cfg_.poll_min_us, cfg_.poll_max_us)));
    st.backoff_us = st.first_backoff_us;
    st.last_busy = now_ns();
    st.max_doze_ns = std::uint64_t(cfg_.stand_down_us) * 1000;
    st.first_doze_ns = std::min<std::uint64_t>(50000, st.max_doze_ns);
    st.hook_look_ns = now_ns();
    st.answers_seen = g_answers_sent.load(std::memory_order_relaxed);
    st.spin_ns = std::uint64_t(st.spin_us) * 1000;
    set_up_.store(true);
    set_up_.notify_all();
}

void ProgressEngine::stand_down_if_helped(LoopState& st, std::uint32_t bell) {
    // A waiter in a synchronization call or a flush helps without pause: stand down at
    // once. The host-progress hook runs in any MPI call of any thread: its calls stand us
    // down only while they come at least every kHookGapNs on average since the last look.
    // One that enters MPI now and then (an MPI_Test in a compute loop) serves only then, and
    // standing down for it would make every am request wait for its next MPI call. A count
    // and a clock read per look, no wake-up (the variants tried: docs/progress.md).
    bool helping = helped_.load(std::memory_order_relaxed) && helped_.exchange(false, std::memory_order_relaxed);
    const std::uint64_t calls = hook_calls_.load(std::memory_order_relaxed);
    if (calls != st.hook_calls_seen) {
        const std::uint64_t now = now_ns();
        // (signed: racing callers' lost counts may even step it back)
        const std::int64_t n = std::int64_t(calls - st.hook_calls_seen);
        helping = helping || (n >= 2 && std::uint64_t(n) * kHookGapNs >= now - st.hook_look_ns);
        st.hook_calls_seen = calls;
        st.hook_look_ns = now;
    }
    if (!helping) {
        st.doze_ns = 0;
        return;
    }
    st.doze_ns = st.doze_ns ? std::min(2 * st.doze_ns, st.max_doze_ns) : st.first_doze_ns;
    stand_downs_.fetch_add(1, std::memory_order_relaxed);
    sleeping_.store(true, std::memory_order_release);
    BellPage::wait(bell_, bell, long(st.doze_ns));
    sleeping_.store(false, std::memory_order_release);
    // Then one pass over every poller (the caller): what the waiters do not serve (other
    // windows, lock retries, aged batches) moves at least once a doze.
}

void ProgressEngine::after_busy(LoopState& st) {
    const std::uint64_t now = now_ns();
    // Every quiet after an answer counts, short ones too (a conversation: they turn the
    // prediction off). Work already there when a predicted sleep ended means the quiet may
    // have been shorter than the sleep: a misprediction, recorded as 0.
    if (st.in_quiet && st.quiet_after_answer) st.predictor.record(st.after_prediction ? 0 : now - st.last_busy);
    if (st.in_quiet) st.burst_answered = false;  // a new burst
    st.in_quiet = st.after_prediction = false;
    st.predicted_ns = 0;
    const std::uint64_t a = g_answers_sent.load(std::memory_order_relaxed);
    if (a != st.answers_seen) st.burst_answered = true;
    st.answers_seen = a;
    st.backoff_us = st.first_backoff_us;
    st.last_busy = now;
}

void ProgressEngine::wait_for_work(LoopState& st, std::uint32_t bell) {
    st.after_prediction = false;
    if (!st.in_quiet) {
        st.in_quiet = true;
        const std::uint64_t a = g_answers_sent.load(std::memory_order_relaxed);
        st.quiet_after_answer = st.burst_answered || a != st.answers_seen;  // (a helper's answers count)
        st.answers_seen = a;
        st.predicted_ns = cfg_.poll_predict && st.quiet_after_answer ? st.predictor.first_sleep_ns() : 0;
        const int s =
            st.may_net_spin && net_windows_.load(std::memory_order_relaxed) > 0 ? cfg_.net_spin_us : st.spin_us;
        st.spin_ns = std::uint64_t(s) * 1000;
        if (work_spin_us_.load(std::memory_order_relaxed) != s) work_spin_us_.store(s, std::memory_order_relaxed);
    }
    // Right after work, poll without sleeping for spin_us (net_spin_us with a network window
    // open): the next request of a conversation (an am origin's next op) usually comes
    // within microseconds.
    if (now_ns() - st.last_busy < st.spin_ns) {
        __builtin_ia32_pause();
        return;
    }
    // Work that no doorbell announces (a lock held elsewhere, an am peer): poll with
    // exponential back-off, bounded by poll_max_us.
    // Following the main thread: only while there is work (where an idle thread polls from
    // does not matter, and each look is a /proc read).
    if (follow_.load(std::memory_order_relaxed)) {
        const std::uint64_t now = now_ns();
        if (now - st.last_busy <= std::uint64_t(cfg_.poll_quiet_ms) * 1000000) follow(now);
    }
    // A predicted first sleep: half the shortest recent quiet; the back-off then goes on
    // from an eighth of it.
    const std::uint64_t sleep_ns = st.predicted_ns ? st.predicted_ns : std::uint64_t(st.backoff_us) * 1000;
    // (Not while standing down: a thread in MPI serves what arrives.)
    const bool deep = sleep_ns > std::uint64_t(cfg_.poll_max_us) * 1000 && st.doze_ns == 0 &&
                      has_fds_.load(std::memory_order_relaxed);
    if (deep) deep_sleep(true);
    sleeping_.store(true, std::memory_order_release);
    BellPage::wait(bell_, bell, long(sleep_ns));
    sleeping_.store(false, std::memory_order_release);
    if (deep) deep_sleep(false);
    // Two tiers: poll_max_us while work was seen recently; after quiet_ms without any,
    // poll_idle_us (an am peer's first request then waits up to that long).
    const bool quiet = now_ns() - st.last_busy > std::uint64_t(cfg_.poll_quiet_ms) * 1000000;
    const std::uint32_t cap = std::uint32_t(quiet ? cfg_.poll_idle_us : cfg_.poll_max_us);
    if (st.predicted_ns) {
        predictions_.fetch_add(1, std::memory_order_relaxed);
        st.after_prediction = true;
        st.backoff_us = std::uint32_t(std::clamp<std::uint64_t>(st.predicted_ns / 8000, st.first_backoff_us, cap));
        st.predicted_ns = 0;
    } else {
        st.backoff_us = std::min<std::uint32_t>(st.backoff_us * 2, cap);
    }
}

void ProgressEngine::wait_idle(LoopState& st, std::uint32_t bell) {
    st.backoff_us = st.first_backoff_us;
    // Idle: spin briefly for a doorbell, then sleep until one rings.
    const std::uint64_t until = now_ns() + std::uint64_t(st.spin_us) * 1000;
    while (now_ns() < until) {
        if (bell_->ring.load(std::memory_order_acquire) != bell) return;
        __builtin_ia32_pause();
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    if (bell_->ring.load(std::memory_order_seq_cst) == bell && !stop_.load()) {
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        BellPage::wait(bell_, bell, 0);
        wakeups_.fetch_add(1, std::memory_order_relaxed);
        if (follow_.load(std::memory_order_relaxed)) follow(now_ns());
    }
    sleeping_.store(false, std::memory_order_release);
}

}  // namespace fastrma::detail
