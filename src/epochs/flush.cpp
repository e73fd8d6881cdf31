// flush.cpp — the flush family and unlock's completion core (see epochs.hpp).
//
// flush(r): every op issued to r complete at r — the queued ones issued first (waiting for
// the lock grant and for the transport to take them), then the transport's flush(r) (its
// own count of what it has outstanding to r: on shared memory the node transport's batches
// and offloaded copies, then a fence; over messages the answers up to the last request);
// and the first error any of them met (completion_error).
// flush_local(r): the same with local completion only. flush_all: every active target.
#include "base/errors.hpp"
#include "epochs/epochs.hpp"

namespace fastrma::detail {

int Epochs::flush_direct(int rank, SyncFlag flag) {
    // A direct lock (no Target, mapped words): nothing queued, no error kept here; the ops
    // completed at issue but for what waits in the node transport, which its flush completes.
    if (flag == SyncFlag::flush_local)
        tp(rank).flush_local(peer(rank));
    else
        tp(rank).flush(peer(rank));
    return h_.completion_error(flag == SyncFlag::flush_local ? "FRMA_Win_flush_local" : "FRMA_Win_flush", rank,
                               rank + 1);
}

int Epochs::wait_target(int rank, SyncFlag flag, bool remove, Target** freed) {
    const char* call = remove ? "FRMA_Win_unlock" : "FRMA_Win_flush";
    WaitPace pace;
    Slot& s = slots_.slot_of(rank);
    auto recycle = [&](Target* t) {
        if (freed)
            *freed = t;  // the caller keeps it for the next lock
        else
            Pool<Target>::put(t);
    };
    while (true) {
        std::unique_lock<SpinLock> sl;
        if (int e = take_slot(s, pace, sl)) return e;
        Target* t = slots_.find(rank);
        if (!t) {
            if (!remove && lock_direct(rank)) {
                sl.unlock();
                return flush_direct(rank, flag);
            }
            return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, rank);
        }
        // Nothing was ever queued or issued and the lock is not ours yet: an unlock can
        // simply withdraw the request (no one can observe the difference).
        if (remove && t->state != AccessState::lock_granted && !t->head && t->issued == 0) {
            waiting_targets_.fetch_sub(1);
            slots_.remove(t);
            recycle(t);
            return MPI_SUCCESS;
        }
        if (t->state != AccessState::lock_granted && !try_acquire(t)) {
            const bool excl = t->lock_type != MPI_LOCK_SHARED;
            sl.unlock();
            if (int e = backoff(pace, rank, excl)) return e;
            continue;
        }
        int rc = drain(t);
        if (rc == kIssueRetry) {  // the transport is full: wait for room, then issue the rest
            sl.unlock();
            if (int e = backoff(pace)) return e;
            continue;
        }
        if (t->error) {  // an op the progress thread issued behind the lock failed
            if (!rc) rc = raise(t->error, "%s: an operation queued for rank %d failed when it was issued", call, rank);
            t->error = 0;
        }
        // Over an ordered transport the lock release completes the epoch itself
        // (Transport::release): it leaves with the last ops, and its answer, if it needs
        // one, comes after all of them were applied (lock + put + unlock: one message each
        // way). MPI_Win_flush_local asks only for local completion.
        const bool release_covers = remove && t->acquired && tp(rank).caps(peer(rank)).ordered;
        if (flag == SyncFlag::flush_local)
            tp(rank).flush_local(peer(rank));
        else if (!release_covers)
            tp(rank).flush(peer(rank));
        if (remove) {
            release(t);
            slots_.remove(t);
            recycle(t);
        }
        if (int e = h_.completion_error(call, rank, rank + 1); e && !rc) rc = e;
        return rc;
    }
}

int Epochs::flush(int rank, bool local) {
    const char* call = local ? "FRMA_Win_flush_local" : "FRMA_Win_flush";
    if (int rc = check_target_rank(call, rank, nprocs_)) return rc;
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    const AccessMode m = mode_.load(std::memory_order_acquire);
    switch (m) {
    case AccessMode::lock_all_granted: {
        int rc = drain_open(rank, call);  // what its transport refused goes first
        tp(rank).flush(peer(rank));
        if (int e = h_.completion_error(call, rank, rank + 1); e && !rc) rc = e;
        return rc;
    }
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target: {
        const SyncFlag flag = local ? SyncFlag::flush_local : SyncFlag::flush;
        if (lock_direct(rank)) return flush_direct(rank, flag);
        if (held_ && !any_lock_held()) break;  // the lock epochs are over: an error below
        return wait_target(rank, flag, false);
    }
    default:
        break;
    }
    // (per_target here: a mapped window whose lock epochs are over.)
    return sync_failure(SyncCall::flush, call, m == AccessMode::per_target ? AccessMode::none : m, false);
}

int Epochs::flush_all(bool local) {
    const char* call = local ? "FRMA_Win_flush_local_all" : "FRMA_Win_flush_all";
    const AccessMode m = mode_.load(std::memory_order_acquire);
    switch (m) {
    case AccessMode::lock_all_granted: {
        int rc = drain_open_all(call);
        h_.flush_every_target();  // messages in flight need each target's answer
        __atomic_thread_fence(__ATOMIC_SEQ_CST);  // shm: every other op completed at issue
        if (int e = h_.completion_error(call, 0, nprocs_); e && !rc) rc = e;
        return rc;
    }
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target: {
        if (held_ && !any_lock_held()) break;  // the lock epochs are over: an error below
        // Flush only the targets that are locked (active targets), not all ranks: direct
        // locks first (no Target), then the Targets.
        const SyncFlag flag = local ? SyncFlag::flush_local : SyncFlag::flush;
        int rc = MPI_SUCCESS;
        if (held_)
            for (int r = 0; r < nprocs_; ++r)
                if (lock_direct(r))
                    if (int e = flush_direct(r, flag); e && !rc) rc = e;
        std::vector<int> ranks;
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            Slot& s = slots_.slot_at(i);
            std::lock_guard sl(s.mu);
            for (Target* t = s.head; t; t = t->next) ranks.push_back(t->rank);
        }
        for (int r : ranks) {
            int e = wait_target(r, flag, false);
            if (e && e != MPI_ERR_RMA_SYNC && !rc) rc = e;  // unlocked meanwhile: fine
        }
        return rc;
    }
    default:
        break;
    }
    return sync_failure(SyncCall::flush, call, m == AccessMode::per_target ? AccessMode::none : m, false);
}

}  // namespace fastrma::detail
