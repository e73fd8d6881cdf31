// lock.cpp — passive target: lock / unlock and lock_all / unlock_all (see epochs.hpp).
//
// The words and their rules are lockproto's (lock_protocol.hpp): the two-level protocol on
// transport atomics, or on windows on shared memory only (mapped_state) its one-word
// variant on the mapped words. A lock on a remote target may return before it is granted
// (LOCK_CALLED): its ops queue until the progress thread, or the next sync call, takes the
// words. A lock on the caller itself is granted on return: MPI lets the caller load and
// store under it at once.
#include "engine/errors.hpp"
#include "engine/stats.hpp"
#include "epochs/epochs.hpp"
#include "epochs/lock_protocol.hpp"

namespace fastrma::detail {

bool Epochs::try_lock(Target* t) {
    // Words mapped here: the shared-memory variant, on them directly (no transport call).
    if (std::uint64_t* tw = mapped_state(t->rank)) {
        if (t->lock_type == MPI_LOCK_SHARED) return lockproto::try_shared_mapped(tw);
        return lockproto::try_exclusive_mapped(mapped_state(0), tw);
    }
    if (t->lock_type == MPI_LOCK_SHARED) return lockproto::try_shared(tp(t->rank), peer(t->rank));
    return lockproto::try_exclusive(tp(0), peer(0), tp(t->rank), peer(t->rank));
}

bool Epochs::try_lock_all_once() {
    if (std::uint64_t* mw = mapped_state(0))
        return lockproto::try_lock_all_mapped(mw, nprocs_, [this](int r) { return mapped_state(r); });
    return lockproto::try_lock_all(tp(0), peer(0));
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
    forget_direct(t->rank);
    if (!t->acquired) return;
    const bool excl = t->lock_type != MPI_LOCK_SHARED;
    if (std::uint64_t* tw = mapped_state(t->rank)) {
        if (excl)
            lockproto::unlock_exclusive_mapped(tw);
        else
            lockproto::unlock_shared_mapped(tw);
        t->acquired = false;
        // Waiters for this target's word, and (exclusive) lock_all waiters, who wait on the
        // master's bitmap; each bitmap read here first, rung only when someone registered.
        ring_lock_waiters_mapped(t->rank, tw);
        if (excl && t->rank != 0) ring_lock_waiters_mapped(0, mapped_state(0));
        return;
    }
    Transport& tp = this->tp(t->rank);
    if (!excl)
        lockproto::unlock_shared(tp, peer(t->rank));
    else
        lockproto::unlock_exclusive(this->tp(0), peer(0), tp, peer(t->rank));
    t->acquired = false;
    // A request parked at my target side for this lock may take it now: progress retries.
    if (t->rank == rank_ && h_.serving_tp() && h_.serving_tp()->has_waiting()) progress_.wake();
    h_.ring_lock_waiters(t->rank);
    if (excl && t->rank != 0) h_.ring_lock_waiters(0);
}

void Epochs::ring_lock_waiters_mapped(int rank, const std::uint64_t* state) {
    const std::uint64_t* words = state + lock_waiters_word0(nprocs_);
    const std::size_t nw = post_bitmap_words(nprocs_);
    for (std::size_t i = 0; i < nw; ++i)
        if (__atomic_load_n(&words[i], __ATOMIC_RELAXED)) {
            h_.ring_lock_waiters(rank);
            return;
        }
}

int Epochs::lock(int lock_type, int rank, int assert_) {
    if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
        return raise(MPI_ERR_LOCKTYPE, "FRMA_Win_lock: lock_type %d is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE",
                     lock_type);
    const bool in_group = static_cast<unsigned>(rank) < static_cast<unsigned>(nprocs_);
    if (!in_group)
        if (int rc = check_target_rank("FRMA_Win_lock", rank, nprocs_)) return rc;
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    if (!in_group) return MPI_SUCCESS;  // MPI_PROC_NULL
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
            // unlock_mapped left it unlinked, released, with nothing queued and no error;
            // the fields it may have changed are reset here (not `*t = Target{}`: a
            // rep stos that cost a fifth of this function).
            spare_target_ = nullptr;
            t->issued = 0;
            t->backoff_us = 0;
            t->next_try_ns = 0;
        } else {
            t = target_pool_.get();
        }
        if (!t)
            return raise(MPI_ERR_NO_MEM,
                         "FRMA_Win_lock: rank %d: all %zu+%zu targets are in use by open lock epochs (raise "
                         "FASTRMA_WIN_TARGET_POOL / FASTRMA_TARGET_POOL)",
                         rank, cfg_.win_target_pool, cfg_.target_pool);
        t->rank = rank;
        t->lock_type = lock_type;
        t->assert_ = assert_;
        t->state = AccessState::lock_called;
        slots_.insert(t);
        ++n_locks_;
        mode_.store(AccessMode::per_target, std::memory_order_release);
        // One attempt now; most locks are free. Only a lock that must wait is counted for
        // the progress thread (before the slot mutex goes: poll() then sees both).
        const bool nocheck = assert_ & MPI_MODE_NOCHECK;
        if (nocheck || try_lock(t)) {
            t->acquired = !nocheck;
            t->state = AccessState::lock_granted;
            if (mapped_state(rank)) note_direct(rank);
            return MPI_SUCCESS;
        }
        bump(Stat::lock_retries);
        waiting_targets_.fetch_add(1);
    }
    // A lock on ourselves must be granted on return: MPI lets us load and store under it.
    if (rank == rank_) {
        Slot& s = slots_.slot_of(rank);
        return wait_until(
            [&] {
                std::lock_guard sl(s.mu);
                return try_acquire(t);
            },
            rank, lock_type != MPI_LOCK_SHARED);
    }
    // Remote: return LOCK_CALLED; the progress thread retries and issues queued ops.
    progress_.wake();
    return MPI_SUCCESS;
}

namespace {
constexpr int kNotMapped = -1;
}

// The fast path of unlock: a granted lock whose words are mapped here, nothing queued,
// nothing failed behind it — what wait_target(rank, unlock) does in that case, in one pass
// under the slot mutex: the epoch's ops completed at issue (shared memory: the transport's
// flush would only be a fence) but for what the window left beside the transport
// (complete_deferred), and the release of the lock word (a release store or a locked
// read-modify-write) orders them before the next holder's acquisition. (Mapped words mean
// no message transport, so no target refuses requests: refused_by_targets has nothing to
// say.)
int Epochs::unlock_mapped(int rank, Target** freed) {
    if (!mapped_state(rank)) return kNotMapped;
    Slot& s = slots_.slot_of(rank);
    std::lock_guard sl(s.mu);
    Target* t = slots_.find(rank);
    if (!t || t->state != AccessState::lock_granted || t->head || t->error) return kNotMapped;
    const int rc = h_.complete_deferred();
    release(t);
    slots_.remove(t);
    *freed = t;  // recycled under epoch_mu_ by the caller
    return rc;
}

int Epochs::unlock(int rank) {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_))
        return check_target_rank("FRMA_Win_unlock", rank, nprocs_);  // MPI_PROC_NULL: success
    if (int rc = sync_error(SyncCall::unlock, "FRMA_Win_unlock", mode_.load(), false)) return rc;
    Target* freed = nullptr;
    int rc = unlock_mapped(rank, &freed);
    if (rc == kNotMapped) rc = wait_target(rank, SyncFlag::unlock, true);
    if (rc == MPI_ERR_RMA_SYNC) return rc;
    std::lock_guard lk(epoch_mu_);
    if (--n_locks_ == 0) mode_.store(AccessMode::none, std::memory_order_release);
    if (freed) {  // the next lock takes it without a trip through the pool
        if (spare_target_) Pool<Target>::put(spare_target_);
        spare_target_ = freed;
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
    if (assert_ & MPI_MODE_NOCHECK) {
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else if (try_lock_all_once()) {
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
    const int dead = wait_until(
        [&] {
            std::lock_guard lk(epoch_mu_);
            const AccessMode m = mode_.load();
            if (m == AccessMode::lock_all_granted) return true;
            if (m != AccessMode::lock_all_called) {
                rc = MPI_ERR_RMA_SYNC;
                return true;
            }
            if (try_lock_all_once()) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                return true;
            }
            bump(Stat::lock_retries);
            return false;
        },
        0, false);
    return dead ? dead : rc;
}

int Epochs::unlock_all() {
    if (int rc = sync_error(SyncCall::unlock_all, "FRMA_Win_unlock_all", mode_.load(), false)) return rc;
    std::lock_guard lk(epoch_mu_);
    const AccessMode m = mode_.load();
    int rc = MPI_SUCCESS;
    if (m == AccessMode::lock_all_granted) {
        rc = drain_open_all("FRMA_Win_unlock_all");  // ops a full transport refused
        if (int e = h_.complete_deferred(); e && !rc) rc = e;  // before the lock goes: the copies belong to the epoch
        h_.flush_every_target();
        if (int e = h_.refused_by_targets("FRMA_Win_unlock_all", 0, nprocs_); e && !rc) rc = e;
        if (lock_all_acquired_) {
            if (std::uint64_t* mw = mapped_state(0))
                lockproto::unlock_all_mapped(mw);
            else
                lockproto::unlock_all(tp(0), peer(0));
            if (rank_ == 0 && h_.serving_tp() && h_.serving_tp()->has_waiting()) progress_.wake();  // as in release()
            h_.ring_lock_waiters(0);
        }
    }
    // lock_all_called: no op was ever issued (an op would have completed the acquisition).
    lock_all_acquired_ = false;
    mode_.store(AccessMode::none, std::memory_order_release);
    return rc;
}

}  // namespace fastrma::detail
