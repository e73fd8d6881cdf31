// queue.cpp — operations through the epochs: which epoch lets an op go, issuing it now or
// queueing it on its Target, draining the queues of granted targets, and the pools with
// their garbage collection (see epochs.hpp; docs/epochs.md).
#include <cstring>

#include "base/errors.hpp"
#include "base/stats.hpp"
#include "epochs/epochs.hpp"
#include "ops/layout.hpp"
#include "ops/reduce.hpp"

namespace fastrma::detail {

void Epochs::count_op(RmaKind k) {
    static constexpr Stat by_kind[] = {Stat::puts, Stat::gets, Stat::accs, Stat::accs, Stat::fops, Stat::cases};
    bump(by_kind[int(k)]);
}

int Epochs::drain(Target* t) {
    int rc = MPI_SUCCESS;
    while ((t->state == AccessState::lock_granted || t->state == AccessState::open) && t->head) {
        Op* op = t->pop();
        int r = h_.issue(t->rank, *op);
        if (r == kIssueRetry) {  // the transport is full: it stays first in line
            t->push_front(op);
            return rc ? rc : kIssueRetry;
        }
        if (op->done) {
            if (!r) r = h_.track_request(t->rank, op->done);
            if (r) op->done->signal(r);
        }
        if (r && !rc) rc = r;
        if (r && !t->error) t->error = r;  // reported by the flush or unlock that completes it
        ++t->issued;
        Pool<Op>::put(op);
        queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    return rc;
}

int Epochs::drain_open(int rank, const char* call) {
    if (open_targets_.load(std::memory_order_acquire) == 0) return MPI_SUCCESS;  // (every flush asks)
    Slot& s = slots_.slot_of(rank);
    for (WaitPace pace;;) {
        std::unique_lock<SpinLock> sl;
        if (int e = take_slot(s, pace, sl)) return e;
        Target* t = slots_.find(rank);
        if (!t || t->state != AccessState::open) return MPI_SUCCESS;
        const int d = drain(t);
        if (d == kIssueRetry) {
            sl.unlock();
            if (int e = backoff(pace)) return e;  // helps progress: the transport's answers make room
            continue;
        }
        int rc = MPI_SUCCESS;
        if (t->error) {
            rc = raise(t->error, "%s: an operation queued for rank %d failed when it was issued", call, rank);
            t->error = 0;
        }
        if (!t->head) {  // nothing left to queue behind: the Target goes
            slots_.remove(t);
            Pool<Target>::put(t);
            open_targets_.fetch_sub(1, std::memory_order_relaxed);
        }
        return rc;
    }
}

int Epochs::drain_open_all(const char* call) {
    // Every open Target, also one the progress thread emptied: it goes here (lock() must not
    // find it, and an error of its ops is reported here).
    if (open_targets_.load(std::memory_order_acquire) == 0) return MPI_SUCCESS;
    std::vector<int> ranks;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::lock_guard sl(s.mu);
        for (Target* t = s.head; t; t = t->next)
            if (t->state == AccessState::open) ranks.push_back(t->rank);
    }
    int rc = MPI_SUCCESS;
    for (int r : ranks)
        if (int e = drain_open(r, call); e && !rc) rc = e;
    return rc;
}

void Epochs::hold_origin(Op& op, std::size_t inline_max) {
    // Only puts and accumulates without a result: what inline_max promises (a fetching op's
    // operand may be read until the op completes, after the Op went back to its pool).
    if (!inline_max || !op.origin || !op.olay || (op.kind != RmaKind::put && op.kind != RmaKind::acc)) return;
    const auto [lo, hi] = footprint(*op.olay, op.ocount);
    const std::size_t bytes = std::size_t(hi - lo);
    if (bytes == 0 || bytes > inline_max) return;
    op.held.assign(static_cast<const unsigned char*>(op.origin) + lo,
                   static_cast<const unsigned char*>(op.origin) + hi);
    op.origin = op.held.data() - lo;
}

bool Epochs::queued_for(int rank) {
    Slot& s = slots_.slot_of(rank);
    std::lock_guard sl(s.mu);
    const Target* t = slots_.find(rank);
    return t && t->head;
}

bool Epochs::direct_slow(int rank, AccessMode m) {
    if (m == AccessMode::lock_all_granted || m == AccessMode::fence_active) return !queued_for(rank);
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_)) return false;
    if (m == AccessMode::pscw)
        return in_start_group(rank) && (queued_.load(std::memory_order_relaxed) == 0 || !queued_for(rank));
    if (m != AccessMode::per_target) return false;
    Slot& s = slots_.slot_of(rank);
    std::lock_guard sl(s.mu);
    Target* t = slots_.find(rank);
    if (!t || t->head || t->state != AccessState::lock_granted) return false;
    ++t->issued;
    return true;
}

// (Reached only when a transport of a mapped window refuses an op: the shared-memory
// transport completes every op at issue and refuses none today; the unit test
// EpochsFake.DirectLocksQueueOnATargetWhenTheTransportRefuses drives it with a fake one.)
Target* Epochs::materialize(int rank) {
    std::uint32_t v = held_[rank].load(std::memory_order_acquire);
    if (v < kHeldDirect) return nullptr;
    Target* t = target_pool_.get();
    if (!t) return nullptr;
    t->rank = rank;
    t->lock_type = (v & kHeldShared) ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE;
    t->assert_ = (v & kHeldNocheck) ? MPI_MODE_NOCHECK : 0;
    t->acquired = !(v & kHeldNocheck);
    t->state = AccessState::lock_granted;
    // direct -> queued: from now on direct() and unlock find the Target (an unlock that
    // took the word to busy first wins: the lock is gone).
    if (!held_[rank].compare_exchange_strong(v, kHeldQueued, std::memory_order_acq_rel, std::memory_order_acquire)) {
        Pool<Target>::put(t);
        return nullptr;
    }
    slots_.insert(t);
    return t;
}

int Epochs::issue_now(const char* call, int r, const Op& desc, Completion* done) {
    const int rc = h_.issue(r, desc);
    if (rc == kIssueRetry) return rc;
    if (rc) return raise(rc, "%s: %s", call, last_error_message().c_str());
    if (done)
        if (int e = h_.track_request(r, done)) return raise(e, "%s: %s", call, last_error_message().c_str());
    return MPI_SUCCESS;
}

Op* Epochs::alloc_op() {
    while (true) {
        if (Op* op = op_pool_.get()) return op;
        // Both pools are exhausted: force out the queued ops of the fullest target.
        bump(Stat::gc_runs);
        if (!collect_garbage()) {
            WaitPace pace;
            backoff(pace);  // another thread's ops hold the pool; they drain soon (one pass)
        }
    }
}

bool Epochs::collect_garbage() {
    int victim = -1;
    std::size_t most = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::lock_guard sl(s.mu);
        for (Target* t = s.head; t; t = t->next)
            if (t->npending > most) {
                most = t->npending;
                victim = t->rank;
            }
    }
    if (victim < 0) return false;
    // A local flush of the victim: wait for its lock or its transport (helping progress)
    // and issue its queue. Errors stay in the Target for its flush or unlock to report.
    WaitPace pace;
    Slot& s = slots_.slot_of(victim);
    while (true) {
        std::unique_lock<SpinLock> sl;
        take_slot(s, pace, sl);  // (a dead peer: its flush or unlock reports it)
        if (!sl.owns_lock()) continue;
        Target* t = slots_.find(victim);
        if (!t || !t->head) return true;
        if (try_acquire(t) && drain(t) != kIssueRetry) return true;
        const int lr = t->state == AccessState::lock_called ? t->rank : -1;
        const bool excl = t->lock_type != MPI_LOCK_SHARED;
        sl.unlock();
        backoff(pace, lr, excl);
    }
}

// Which epoch lets this op go to rank? Completes a pending lock_all and turns a fresh
// fence epoch into an active one. On success *m is the mode to issue under.
int Epochs::check_epoch_for_op(const char* call, int r, AccessMode* m) {
    *m = mode_.load(std::memory_order_acquire);
    if (*m == AccessMode::lock_all_called) {
        if (const int e = ensure_lock_all(); e == MPI_SUCCESS)
            *m = AccessMode::lock_all_granted;
        else if (e != MPI_ERR_RMA_SYNC)
            return e;  // a peer died while we waited for the lock (EpochHost::peer_failure)
        else
            *m = mode_.load(std::memory_order_acquire);
    }
    if (*m == AccessMode::fence_called) {
        AccessMode expected = AccessMode::fence_called;
        mode_.compare_exchange_strong(expected, AccessMode::fence_active);
        *m = mode_.load(std::memory_order_acquire);
    }
    switch (*m) {
    case AccessMode::lock_all_granted:
    case AccessMode::fence_active:
    case AccessMode::per_target:
        return MPI_SUCCESS;
    case AccessMode::pscw:
        if (in_start_group(r)) return MPI_SUCCESS;
        return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not in the group of this process's FRMA_Win_start", call, r);
    default:
        return sync_error(SyncCall::op, call, *m, exposed_);
    }
}

int Epochs::issue_waiting(const char* call, int r, const Op& desc, Completion* done) {
    for (WaitPace pace;;) {
        const int rc = issue_now(call, r, desc, done);
        if (rc != kIssueRetry) return rc;
        if (int e = backoff(pace)) return e;  // helps progress: the transport's answers make room
    }
}

int Epochs::submit(const char* call, int r, const Op& desc, Completion* done) {
    AccessMode m;
    if (int rc = check_epoch_for_op(call, r, &m)) return rc;
    const bool window_wide = m != AccessMode::per_target;
    if (done && window_wide && m != AccessMode::lock_all_granted)
        return raise(MPI_ERR_RMA_SYNC, "%s: request-based operations need a passive-target epoch (lock or lock_all)",
                     call);
    bool counted = false, refused = false;  // refused: the transport would not take it now
    if (window_wide && queued_.load(std::memory_order_acquire) == 0) {
        // Straight to the transport: no op of this window waits in a queue.
        count_op(desc.kind);
        counted = true;
        if (desc.bytes == 0) {
            if (done) done->signal(MPI_SUCCESS);
            return MPI_SUCCESS;
        }
        bump(Stat::direct);
        const int rc = issue_now(call, r, desc, done);
        if (rc != kIssueRetry) return rc;
        refused = true;
    }

    Slot& s = slots_.slot_of(r);
    Op* spare = nullptr;
    auto finish = [&](int rc) {
        if (spare) Pool<Op>::put(spare);
        return rc;
    };
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(r);
        // A direct lock (mapped words, no Target): like a granted Target with nothing queued.
        const bool direct_lock = !t && !window_wide && lock_direct(r);
        if (!t && !window_wide && !direct_lock)
            return finish(raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, r));
        if (!counted) {
            count_op(desc.kind);
            counted = true;
        }
        if (desc.bytes == 0) {
            if (done) done->signal(MPI_SUCCESS);
            return finish(MPI_SUCCESS);
        }
        // Nothing queued before it and the target granted (or no lock of its own): issue it
        // from this thread.
        if (!refused && (!t || (!t->head && (t->state != AccessState::lock_called || try_acquire(t))))) {
            if (t) ++t->issued;
            sl.unlock();
            bump(Stat::direct);
            const int rc = issue_now(call, r, desc, done);
            if (rc != kIssueRetry) return finish(rc);
            refused = true;
            continue;
        }
        if (done && !h_.completes_later(*done)) {
            // A request must be complete when we hand it out: issue the queue ahead of it
            // now (waiting for the lock and the transport), then the op itself, waiting.
            sl.unlock();
            const int rc = window_wide ? drain_open(r, call) : wait_target(r, SyncFlag::flush_local, false);
            if (rc) return finish(rc);
            return finish(issue_waiting(call, r, desc, done));
        }
        if (!spare) {
            // Queue it; allocation may have to collect garbage, never under a slot mutex.
            sl.unlock();
            spare = alloc_op();
            continue;
        }
        if (direct_lock) {  // the lock becomes a granted Target that ops queue on
            t = materialize(r);
            if (!t) {  // unlocked meanwhile, or every Target in use: ask again
                sl.unlock();
                if (!lock_direct(r))
                    return finish(raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, r));
                return finish(issue_waiting(call, r, desc, done));
            }
        } else if (!t) {  // a window-wide epoch's queue for r
            t = target_pool_.get();
            if (!t) {  // every Target in use: wait here for the transport instead
                sl.unlock();
                return finish(issue_waiting(call, r, desc, done));
            }
            t->rank = r;
            t->state = AccessState::open;
            slots_.insert(t);
            open_targets_.fetch_add(1, std::memory_order_relaxed);
        }
        void* home = spare->home;
        *spare = desc;
        spare->home = home;
        spare->done = done;  // signalled once drain() issued it and it completed
        hold_origin(*spare, tp(r).caps(peer(r)).inline_max);
        t->push(spare);
        spare = nullptr;
        queued_.fetch_add(1, std::memory_order_relaxed);
        bump(Stat::queued);
        sl.unlock();
        progress_.wake();
        return MPI_SUCCESS;
    }
}

}  // namespace fastrma::detail
