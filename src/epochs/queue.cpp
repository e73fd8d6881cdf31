// queue.cpp — operations through the epochs: which epoch lets an op go, issuing it now or
// queueing it on its Target, draining the queues of granted targets, and the pools with
// their garbage collection (see epochs.hpp; DESIGN.md §2).
#include "engine/errors.hpp"
#include "engine/stats.hpp"
#include "epochs/epochs.hpp"

namespace fastrma::detail {

void Epochs::count_op(RmaKind k) {
    static constexpr Stat by_kind[] = {Stat::puts, Stat::gets, Stat::accs, Stat::accs, Stat::fops, Stat::cases};
    bump(by_kind[int(k)]);
}

int Epochs::drain(Target* t) {
    int rc = MPI_SUCCESS;
    while (t->state == AccessState::lock_granted && t->head) {
        Op* op = t->pop();
        int r = h_.issue(t->rank, *op);
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
    // A local flush of the victim: wait for its lock (helping progress) and issue its queue.
    WaitPace pace;
    Slot& s = slots_.slot_of(victim);
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(victim);
        if (!t || !t->head) return true;
        if (try_acquire(t)) {
            drain(t);
            return true;
        }
        const int lr = t->rank;
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

int Epochs::submit(const char* call, int r, const Op& desc, Completion* done) {
    AccessMode m;
    if (int rc = check_epoch_for_op(call, r, &m)) return rc;
    if (done && m != AccessMode::per_target && m != AccessMode::lock_all_granted)
        return raise(MPI_ERR_RMA_SYNC, "%s: request-based operations need a passive-target epoch (lock or lock_all)",
                     call);
    if (m != AccessMode::per_target) {
        count_op(desc.kind);
        if (desc.bytes == 0) {
            if (done) done->signal(MPI_SUCCESS);
            return MPI_SUCCESS;
        }
        bump(Stat::direct);
        if (int rc = h_.issue(r, desc)) return raise(rc, "%s: %s", call, last_error_message().c_str());
        if (done)
            if (int rc = h_.track_request(r, done)) return raise(rc, "%s: %s", call, last_error_message().c_str());
        return MPI_SUCCESS;
    }

    Slot& s = slots_.slot_of(r);
    Op* spare = nullptr;
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(r);
        if (!t) {
            if (spare) Pool<Op>::put(spare);
            return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, r);
        }
        if (desc.bytes == 0) {
            count_op(desc.kind);
            if (spare) Pool<Op>::put(spare);
            if (done) done->signal(MPI_SUCCESS);
            return MPI_SUCCESS;
        }
        if (!t->head && (t->state == AccessState::lock_granted || try_acquire(t))) {
            // Fast path: granted, nothing queued before us: issue from this thread.
            count_op(desc.kind);
            ++t->issued;
            sl.unlock();
            if (spare) Pool<Op>::put(spare);
            bump(Stat::direct);
            if (int rc = h_.issue(r, desc)) return raise(rc, "%s: %s", call, last_error_message().c_str());
            if (done)
                if (int rc = h_.track_request(r, done)) return raise(rc, "%s: %s", call, last_error_message().c_str());
            return MPI_SUCCESS;
        }
        if (done && !h_.completes_later(*done)) {
            // A request must be complete when we hand it out: get the lock and issue
            // the queue ahead of us now, then come back to the fast path above.
            sl.unlock();
            if (int rc = wait_target(r, SyncFlag::flush_local, false)) {
                if (spare) Pool<Op>::put(spare);
                return rc;
            }
            continue;
        }
        if (!spare) {
            // Queue it; allocation may have to collect garbage, never under a slot mutex.
            sl.unlock();
            spare = alloc_op();
            continue;
        }
        count_op(desc.kind);
        void* home = spare->home;
        *spare = desc;
        spare->home = home;
        spare->done = done;  // signalled once drain() issued it and it completed
        t->push(spare);
        queued_.fetch_add(1, std::memory_order_relaxed);
        bump(Stat::queued);
        sl.unlock();
        progress_.wake();
        return MPI_SUCCESS;
    }
}

}  // namespace fastrma::detail
