// lock.cpp — passive target: lock / unlock and lock_all / unlock_all (see epochs.hpp).
//
// The words and their rules are lockproto's (lock_protocol.hpp): the two-level protocol on
// transport atomics, or on windows on shared memory only (mapped_state) its one-word
// variant on the mapped words. A lock on a remote target may return before it is granted
// (LOCK_CALLED): its ops queue until the progress thread, or the next sync call, takes the
// words. A lock on the caller itself is granted on return: MPI lets the caller load and
// store under it at once.
//
// On windows on shared memory only (held_: every word mapped here), a lock epoch keeps no
// window-wide state: lock_mapped claims held_[rank] with a CAS, takes the word, and marks
// the lock direct (no Target); unlock_held takes it back with a CAS and releases the word.
// Neither takes epoch_mu_ or a slot mutex; epoch_mu_ is taken only to enter per_target
// from another mode (the mode stays per_target after the last unlock: sync_error leaves it
// when another kind of epoch asks, epochs.hpp). A lock that must wait, or an op that must
// queue behind a direct lock, makes a Target (the general path below).
#include "base/errors.hpp"
#include "base/stats.hpp"
#include "epochs/epochs.hpp"
#include "epochs/lock_protocol.hpp"

namespace fastrma::detail {

bool Epochs::try_lock(Target* t) {
    // Every word mapped here: the shared-memory variant, on them directly (no transport call).
    if (std::uint64_t* tw = one_word_state(t->rank)) {
        if (t->lock_type == MPI_LOCK_SHARED) return lockproto::try_shared_mapped(tw);
        return lockproto::try_exclusive_mapped(mapped_state(0), tw);
    }
    if (t->lock_type == MPI_LOCK_SHARED) return lockproto::try_shared(tp(t->rank), peer(t->rank));
    const int m = h_.lock_master(t->rank);
    return lockproto::try_exclusive(tp(m), peer(m), tp(t->rank), peer(t->rank), h_.lock_masters() != nullptr);
}

bool Epochs::try_lock_all_once() {
    if (std::uint64_t* mw = one_word_state(0))
        return lockproto::try_lock_all_mapped(mw, nprocs_, [this](int r) { return mapped_state(r); });
    const std::vector<int>* ms = h_.lock_masters();
    if (!ms) return lockproto::try_lock_all(tp(0), peer(0));
    // One master per node: the ones mapped here first (a read shows a holder without a round
    // trip), then the others; exclusive holders at any: the ones taken are undone.
    std::vector<int> taken;
    taken.reserve(ms->size());
    for (int pass = 0; pass < 2; ++pass)
        for (int m : *ms) {
            if (tp(m).caps(peer(m)).load_store != (pass == 0)) continue;
            if (!lockproto::try_lock_all(tp(m), peer(m))) {
                for (int u : taken) lockproto::unlock_all(tp(u), peer(u));
                return false;
            }
            taken.push_back(m);
        }
    return true;
}

bool Epochs::retry_lock_all(std::uint64_t now, bool kicked) {
    if (now < lock_all_next_try_ns_ && !kicked) return false;
    if (try_lock_all_once()) {
        lock_all_backoff_us_ = 0;
        lock_all_next_try_ns_ = 0;
        return true;
    }
    bump(Stat::lock_retries);
    lock_all_backoff_us_ = std::min<std::uint32_t>(lock_all_backoff_us_ ? 2 * lock_all_backoff_us_ : 1,
                                                   std::uint32_t(std::max(1, cfg_.poll_max_us)));
    lock_all_jitter_ ^= lock_all_jitter_ << 13;
    lock_all_jitter_ ^= lock_all_jitter_ >> 7;
    lock_all_jitter_ ^= lock_all_jitter_ << 17;
    const std::uint64_t ns = std::uint64_t(lock_all_backoff_us_) * 1000;
    lock_all_next_try_ns_ = now + ns / 2 + lock_all_jitter_ % (ns + 1);
    return false;
}

bool Epochs::try_acquire(Target* t) {
    if (t->state == AccessState::lock_granted || t->state == AccessState::open) return true;
    const bool ok = (t->assert_ & MPI_MODE_NOCHECK) || try_lock(t);
    if (!ok) {
        bump(Stat::lock_retries);
        return false;
    }
    t->acquired = !(t->assert_ & MPI_MODE_NOCHECK);
    if (t->state != AccessState::lock_granted) waiting_targets_.fetch_sub(1);
    t->state = AccessState::lock_granted;
    return true;
}

void Epochs::release(Target* t) {
    if (!t->acquired) return;
    const bool excl = t->lock_type != MPI_LOCK_SHARED;
    if (one_word_state(t->rank)) {
        release_mapped(t->rank, !excl);
        t->acquired = false;
        return;
    }
    Transport& tp = this->tp(t->rank);
    const int m = h_.lock_master(t->rank);
    if (!excl)
        lockproto::unlock_shared(tp, peer(t->rank));
    else
        lockproto::unlock_exclusive(this->tp(m), peer(m), tp, peer(t->rank));
    t->acquired = false;
    if (t->rank == rank_) wake_parked_lock_requests();
    h_.ring_lock_waiters(t->rank);
    if (excl && t->rank != m) h_.ring_lock_waiters(m);
}

int Epochs::lock_general(int lock_type, int rank, int assert_) {
    if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
        return raise(MPI_ERR_LOCKTYPE, "FRMA_Win_lock: lock_type %d is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE",
                     lock_type);
    const bool in_group = static_cast<unsigned>(rank) < static_cast<unsigned>(nprocs_);
    if (!in_group)
        if (int rc = check_target_rank("FRMA_Win_lock", rank, nprocs_)) return rc;
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    if (!in_group) return MPI_SUCCESS;  // MPI_PROC_NULL
    if (held_) {
        // Mapped words: no window-wide state while the mode is per_target already.
        if (fast_locks_.load(std::memory_order_acquire))
            if (int rc = lock_mapped(lock_type, rank, assert_); rc != kSlowLock) return rc;
        while (true) {
            {
                std::lock_guard lk(epoch_mu_);
                if (int rc = sync_error(SyncCall::lock, "FRMA_Win_lock", mode_.load(), exposed_)) return rc;
                if (no_locks_)
                    return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: the window was created with info no_locks=true");
                mode_.store(AccessMode::per_target, std::memory_order_release);
                fast_locks_.store(true, std::memory_order_seq_cst);
            }
            // (Not under epoch_mu_: a lock on self may wait. Another kind of epoch may
            // have left the idle mode meanwhile: then ask again.)
            if (int rc = lock_mapped(lock_type, rank, assert_); rc != kSlowLock) return rc;
        }
    }
    Target* t = nullptr;
    {
        std::lock_guard lk(epoch_mu_);
        if (int rc = sync_error(SyncCall::lock, "FRMA_Win_lock", mode_.load(), exposed_)) return rc;
        if (no_locks_) return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: the window was created with info no_locks=true");
        Slot& s = slots_.slot_of(rank);
        std::lock_guard sl(s.mu);
        if (slots_.find(rank))
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d is already locked by this process", rank);
        if ((t = spare_target_)) {
            // unlock left it unlinked, released, with nothing queued and no error; the
            // fields it may have changed are reset here (not `*t = Target{}`: a rep stos
            // that cost a fifth of this function).
            spare_target_ = nullptr;
            t->issued = 0;
            t->backoff_us = 0;
            t->next_try_ns = 0;
        } else {
            t = target_pool_.get();
        }
        if (!t) return no_lock_target(rank);
        set_lock_target(t, lock_type, rank, assert_);
        slots_.insert(t);
        ++n_locks_;
        mode_.store(AccessMode::per_target, std::memory_order_release);
        // One attempt now; most locks are free. Only a lock that must wait is counted for
        // the progress thread (before the slot mutex goes: poll() then sees both).
        if (try_acquire_new(t)) return MPI_SUCCESS;
        bump(Stat::lock_retries);
        waiting_targets_.fetch_add(1);
    }
    return finish_pending_lock(t, lock_type, rank);
}

bool Epochs::try_acquire_new(Target* t) {
    const bool nocheck = t->assert_ & MPI_MODE_NOCHECK;
    if (!nocheck && !try_lock(t)) return false;
    t->acquired = !nocheck;
    t->state = AccessState::lock_granted;
    return true;
}

void Epochs::set_lock_target(Target* t, int lock_type, int rank, int assert_) {
    t->rank = rank;
    t->lock_type = lock_type;
    t->assert_ = assert_;
    t->state = AccessState::lock_called;
}

int Epochs::already_locked(int rank, bool busy) {
    return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d is already locked by this process%s", rank,
                 busy ? " (or another thread is locking or unlocking it now)" : "");
}

int Epochs::no_lock_target(int rank) {
    return raise(MPI_ERR_NO_MEM,
                 "FRMA_Win_lock: rank %d: all %zu+%zu targets are in use by open lock epochs (raise "
                 "FASTRMA_WIN_TARGET_POOL / FASTRMA_TARGET_POOL)",
                 rank, cfg_.win_target_pool, cfg_.target_pool);
}

int Epochs::finish_pending_lock(Target* t, int lock_type, int rank) {
    if (rank == rank_) {
        Slot& s = slots_.slot_of(rank);
        // A slot the progress thread holds (retrying this lock: a round trip over a network
        // transport) is not waited for here: the wait goes on, asking about dead peers.
        return wait_until(
            [&] {
                std::unique_lock sl(s.mu, std::try_to_lock);
                return sl.owns_lock() && try_acquire(t);
            },
            rank, lock_type != MPI_LOCK_SHARED);
    }
    progress_.wake();  // remote: return LOCK_CALLED; the progress thread retries, issues queued ops
    return MPI_SUCCESS;
}

void Epochs::wake_parked_lock_requests() {
    // A request parked at my target side for my words may take them now: progress retries.
    if (h_.serving_tp() && h_.serving_tp()->has_waiting()) progress_.wake();
}

int Epochs::lock_queued(int lock_type, int rank, int assert_, bool attempt) {
    // held_[rank] is busy (ours): the lock becomes a Target, granted by the attempt (if
    // asked) or lock_called, which the progress thread (or the next sync call) retries, and
    // ops to rank queue on it meanwhile.
    Target* t = target_pool_.get();
    if (!t) {
        held_[rank].store(kHeldFree, std::memory_order_release);
        return no_lock_target(rank);
    }
    set_lock_target(t, lock_type, rank, assert_);
    {
        std::lock_guard sl(slots_.slot_of(rank).mu);
        slots_.insert(t);
        held_[rank].store(kHeldQueued, std::memory_order_release);
        if (attempt && try_acquire_new(t)) return MPI_SUCCESS;
        bump(Stat::lock_retries);
        waiting_targets_.fetch_add(1);
    }
    return finish_pending_lock(t, lock_type, rank);
}

bool Epochs::leave_idle_lock_mode() {
    // epoch_mu_ held, mode per_target: close the gate, then read every claim (the lock
    // side writes its claim, then reads the gate: one of the two sees the other).
    fast_locks_.store(false, std::memory_order_seq_cst);
    for (int r = 0; r < nprocs_; ++r)
        if (held_[r].load(std::memory_order_seq_cst) != kHeldFree) {
            fast_locks_.store(true, std::memory_order_seq_cst);
            return false;
        }
    mode_.store(AccessMode::none, std::memory_order_release);
    return true;
}

bool Epochs::any_lock_held() const {
    for (int r = 0; r < nprocs_; ++r)
        if (held_[r].load(std::memory_order_acquire) != kHeldFree) return true;
    return false;
}

int Epochs::unlock_held(int rank) {
    std::atomic<std::uint32_t>& h = held_[rank];
    for (std::uint32_t v = h.load(std::memory_order_relaxed);;) {
        if (v >= kHeldDirect) {
            // Ours to release (of two racing unlocks, one gets here; the other sees busy).
            if (!h.compare_exchange_weak(v, kHeldBusy, std::memory_order_acquire, std::memory_order_relaxed)) continue;
            // The epoch's ops completed at issue but for what waits in the node transport
            // (mapped words: every peer is a node peer), which its flush completes; the
            // release of the word (a release store, or a locked read-modify-write) orders
            // them before the next holder's acquisition.
            const int rc = unlock_direct_complete(rank);
            if (!(v & kHeldNocheck)) release_mapped(rank, v & kHeldShared);
            h.store(kHeldFree, std::memory_order_release);
            return rc;
        }
        if (v == kHeldQueued) {
            if (!h.compare_exchange_weak(v, kHeldBusy, std::memory_order_acquire, std::memory_order_relaxed)) continue;
            const int rc = wait_target(rank, SyncFlag::unlock, true);
            // A wait that failed (a peer died) leaves the Target, and the lock with it.
            bool left;
            {
                Slot& s = slots_.slot_of(rank);
                std::lock_guard sl(s.mu);
                left = slots_.find(rank) != nullptr;
            }
            h.store(left ? kHeldQueued : kHeldFree, std::memory_order_release);
            return rc;
        }
        if (const AccessMode m = mode_.load(std::memory_order_acquire); m != AccessMode::per_target)
            return sync_failure(SyncCall::unlock, "FRMA_Win_unlock", m, false);
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_unlock: rank %d is not locked by this process%s", rank,
                     v == kHeldBusy ? " (or another thread is locking or unlocking it now)" : "");
    }
}

int Epochs::unlock_general(int rank) {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_))
        return check_target_rank("FRMA_Win_unlock", rank, nprocs_);  // MPI_PROC_NULL: success
    if (held_) return unlock_held(rank);
    if (int rc = sync_error(SyncCall::unlock, "FRMA_Win_unlock", mode_.load(), false)) return rc;
    Target* freed = nullptr;
    const int rc = wait_target(rank, SyncFlag::unlock, true, &freed);
    if (rc == MPI_ERR_RMA_SYNC && !freed) return rc;
    std::lock_guard lk(epoch_mu_);
    if (freed) {  // the next lock takes it without a trip through the pool
        if (--n_locks_ == 0) mode_.store(AccessMode::none, std::memory_order_release);
        if (freed->error || freed->head) {
            Pool<Target>::put(freed);
        } else {
            if (spare_target_) Pool<Target>::put(spare_target_);
            spare_target_ = freed;
        }
    }
    return rc;
}

int Epochs::lock_all(int assert_) {
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock_all: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    std::lock_guard lk(epoch_mu_);
    if (int rc = sync_error(SyncCall::lock_all, "FRMA_Win_lock_all", mode_.load(), false)) return rc;
    if (no_locks_) return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock_all: the window was created with info no_locks=true");
    lock_all_assert_ = assert_;
    lock_all_backoff_us_ = 0;  // a new lock_all's back-off starts over
    if (assert_ & MPI_MODE_NOCHECK) {
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else if (retry_lock_all(now_ns(), true)) {
        lock_all_acquired_ = true;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else {
        // Not granted yet: return (MPI allows it); the first op or sync call, or the
        // progress thread, completes the acquisition.
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_called, std::memory_order_release);
        progress_.wake();
    }
    return MPI_SUCCESS;
}

int Epochs::ensure_lock_all() {
    int rc = MPI_SUCCESS;
    // As finish_pending_lock: epoch_mu_ held by the progress thread's retry is not waited for
    // (it would keep the wait from asking about dead peers for as long as the retries last).
    const int dead = wait_until(
        [&] {
            std::unique_lock lk(epoch_mu_, std::try_to_lock);
            if (!lk.owns_lock()) return false;
            const AccessMode m = mode_.load();
            if (m == AccessMode::lock_all_granted) return true;
            if (m != AccessMode::lock_all_called) {
                rc = MPI_ERR_RMA_SYNC;
                return true;
            }
            if (retry_lock_all(now_ns(), false)) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                return true;
            }
            return false;
        },
        0, false);
    return dead ? dead : rc;
}

int Epochs::unlock_all() {
    std::lock_guard lk(epoch_mu_);
    if (int rc = sync_error(SyncCall::unlock_all, "FRMA_Win_unlock_all", mode_.load(), false)) return rc;
    const AccessMode m = mode_.load();
    int rc = MPI_SUCCESS;
    if (m == AccessMode::lock_all_granted) {
        rc = drain_open_all("FRMA_Win_unlock_all");  // ops a full transport refused
        h_.flush_every_target();
        if (int e = h_.completion_error("FRMA_Win_unlock_all", 0, nprocs_); e && !rc) rc = e;
        if (lock_all_acquired_) {
            const std::vector<int>* ms = h_.lock_masters();
            if (std::uint64_t* mw = one_word_state(0))
                lockproto::unlock_all_mapped(mw);
            else if (!ms)
                lockproto::unlock_all(tp(0), peer(0));
            else
                for (int m : *ms) lockproto::unlock_all(tp(m), peer(m));
            wake_parked_lock_requests();
            if (!ms)
                h_.ring_lock_waiters(0);
            else
                for (int m : *ms) h_.ring_lock_waiters(m);
        }
    }
    // lock_all_called: no op was ever issued (an op would have completed the acquisition).
    lock_all_acquired_ = false;
    mode_.store(AccessMode::none, std::memory_order_release);
    return rc;
}

}  // namespace fastrma::detail
