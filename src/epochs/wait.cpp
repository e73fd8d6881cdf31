// wait.cpp — the epochs' wait primitive, the progress thread's pass over the queue, and
// the state checks shared by every call (see epochs.hpp).
#include <sched.h>

#include <optional>

#include "base/errors.hpp"
#include "epochs/epochs.hpp"
#include "ops/state_words.hpp"

namespace fastrma::detail {

Epochs::Epochs(EpochHost& host, ProgressEngine& progress, const Config& cfg, Pool<Op>* global_ops,
               Pool<Target>* global_targets)
    : h_(host),
      progress_(progress),
      cfg_(cfg),
      rank_(host.host_rank()),
      nprocs_(host.host_size()),
      slots_(cfg.slots),
      op_pool_(cfg.win_op_pool, global_ops),
      target_pool_(cfg.win_target_pool, global_targets) {}

Epochs::~Epochs() {
    if (spare_target_) Pool<Target>::put(spare_target_);  // it may be the global pool's
}

int Epochs::sync_failure(SyncCall call, const char* name, AccessMode m, bool exposed) const {
    return raise(MPI_ERR_RMA_SYNC, "%s: %s (%s is open)", name, illegal(call, m, exposed), mode_name(m));
}

int Epochs::check_free() {
    std::lock_guard lk(epoch_mu_);
    return sync_error(SyncCall::free, "FRMA_Win_free", mode_.load(), exposed_);
}

std::size_t Epochs::metadata_bytes() const {
    return sizeof(Epochs) + start_group_.capacity() * sizeof(int) + slots_.size() * sizeof(Slot);
}

int Epochs::backoff(WaitPace& pace, int lock_rank, bool lock_excl) {
    // While we wait, help: one pass of the progress engine (cheap when there is nothing).
    // Spin first (SpinWait: what we wait for is usually microseconds away), then yield for
    // a while before sleeping: any sleep costs tens of microseconds of timer slack, far
    // more than a post, a complete or a lock release takes to arrive. After kYieldSteps
    // yields, sleep with exponential back-off up to poll_max_us.
    constexpr unsigned kYieldSteps = 2000;
    unsigned& step = pace.step;
    if (pace.alive.due())
        if (int e = h_.peer_failure()) return e;
    // Peers' served requests (small transfers and atomics to my part of a create or dynamic
    // window): a thread waiting here answers them, and its beat tells origins it will.
    if (h_.serve_while_waiting()) {
        step = 0;
        pace.spin.progressed();
    }
    if (!progress_.running()) progress_.progress_once();
    // Where requests arrive as messages, what we wait for (a post, a complete, a lock
    // grant, a peer's request that must be answered before it can send ours) is served here
    // rather than left to the progress thread, which may be in a back-off sleep; the thread
    // stands down meanwhile (ProgressEngine::help; docs/progress.md).
    else if (Transport* served = h_.serving_tp()) {
        const std::optional<Poll> hp = progress_.help();
        if (hp ? *hp == Poll::busy : served->serve()) {
            step = 0;
            pace.spin.progressed();
        }
    }
    if (!pace.spin.yielding()) {
        pace.spin.idle();  // a pause, or the first yield once the spin budget is spent
        return MPI_SUCCESS;
    }
    if (step < kYieldSteps) {
        ++step;
        sched_yield();
        return MPI_SUCCESS;
    }
    const unsigned us = std::min<unsigned>(1u << std::min(step - kYieldSteps, 16u), unsigned(cfg_.poll_max_us));
    ++step;
    if (lock_rank >= 0 && us >= 16) {  // a long wait for a lock: the releaser rings us
        h_.register_lock_wait(lock_rank);
        if (lock_excl && lock_rank != h_.lock_master(lock_rank)) h_.register_lock_wait(h_.lock_master(lock_rank));
    }
    progress_.doze(us);  // a peer's release or post rings us awake
    return MPI_SUCCESS;
}

Poll Epochs::poll() {
    const bool lock_all_pending = mode_.load(std::memory_order_acquire) == AccessMode::lock_all_called;
    if (!lock_all_pending && waiting_targets_.load(std::memory_order_acquire) == 0 &&
        queued_.load(std::memory_order_acquire) == 0)
        return Poll::idle;
    const std::uint64_t now = now_ns();
    // A releaser kicked us (docs/progress.md, doorbells): retry every wait now.
    bool kicked = false;
    {
        const std::uint64_t k = __atomic_load_n(my_word(kLockKick), __ATOMIC_ACQUIRE);
        kicked = kick_seen_.exchange(k, std::memory_order_relaxed) != k;
    }
    bool did = false;
    if (lock_all_pending) {
        std::unique_lock lk(epoch_mu_, std::try_to_lock);
        if (lk.owns_lock() && mode_.load() == AccessMode::lock_all_called) {
            if (retry_lock_all(now, kicked)) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                did = true;
            } else {
                // This thread sleeps between passes: ring it (at every lock master).
                if (const std::vector<int>* ms = h_.lock_masters())
                    for (int m : *ms) h_.register_lock_wait(m);
                else
                    h_.register_lock_wait(0);
            }
        }
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::unique_lock sl(s.mu, std::try_to_lock);
        if (!sl.owns_lock()) continue;  // an application thread is working on it
        for (Target* t = s.head; t; t = t->next) {
            if (t->state == AccessState::lock_called) {
                if (now < t->next_try_ns && !kicked) continue;
                if (!try_acquire(t)) {
                    t->backoff_us =
                        std::min<std::uint32_t>(t->backoff_us ? t->backoff_us * 2 : 1, std::uint32_t(cfg_.poll_max_us));
                    t->next_try_ns = now + std::uint64_t(t->backoff_us) * 1000;
                    if (t->backoff_us >= 16) {  // about to sleep on it: have the releaser ring
                        h_.register_lock_wait(t->rank);
                        const int m = h_.lock_master(t->rank);
                        if (t->lock_type != MPI_LOCK_SHARED && t->rank != m) h_.register_lock_wait(m);
                    }
                    continue;
                }
                did = true;
            }
            if (t->head) {
                const std::size_t before = t->npending;
                drain(t);  // errors stay in t for its flush or unlock; a refusal leaves the rest queued
                did = did || t->npending != before;
            }
        }
    }
    if (did) return Poll::busy;
    return (waiting_targets_.load() || queued_.load() || mode_.load() == AccessMode::lock_all_called) ? Poll::waiting
                                                                                                      : Poll::idle;
}

}  // namespace fastrma::detail
