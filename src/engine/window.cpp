// window.cpp — see window.hpp. Order inside each sync call (STYLE.md §7): check the state,
// complete what must complete, transition.
#include "engine/window.hpp"

#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "engine/errors.hpp"
#include "epochs/lock_protocol.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "transport/shm.hpp"

namespace fastrma::detail {

namespace {

// What every member tells the others at creation.
struct PeerInfo {
    int err;
    int disp_unit;
    std::uint64_t size;
    std::uint64_t base;  // the data's address in the owner's address space
    SegmentExport seg;
};

const char* mode_name(AccessMode m) {
    switch (m) {
    case AccessMode::none: return "no epoch";
    case AccessMode::per_target: return "a lock epoch";
    case AccessMode::lock_all_called:
    case AccessMode::lock_all_granted: return "a lock_all epoch";
    }
    return "?";
}
}  // namespace

Window::Window(Engine& eng, std::unique_ptr<Bootstrap> bs)
    : eng_(eng),
      bs_(std::move(bs)),
      slots_(eng.config().slots),
      op_pool_(eng.config().win_op_pool, &eng.op_pool()),
      target_pool_(eng.config().win_target_pool, &eng.target_pool()) {}

Window::~Window() {
    if (poller_id_) eng_.progress().remove_poller(poller_id_);
}

int Window::allocate(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit,
                     void** baseptr, std::unique_ptr<Window>* out) {
    int rc = build(eng, std::move(bs), MPI_WIN_FLAVOR_ALLOCATE, nullptr, size, disp_unit, out);
    if (rc == MPI_SUCCESS && baseptr) *baseptr = (*out)->base_;
    return rc;
}

int Window::create(Engine& eng, std::unique_ptr<Bootstrap> bs, void* base, MPI_Aint size,
                   int disp_unit, std::unique_ptr<Window>* out) {
    return build(eng, std::move(bs), MPI_WIN_FLAVOR_CREATE, base, size, disp_unit, out);
}

int Window::build(Engine& eng, std::unique_ptr<Bootstrap> bs, int flavor, void* user_base,
                  MPI_Aint size, int disp_unit, std::unique_ptr<Window>* out) {
    out->reset();
    const char* call = flavor == MPI_WIN_FLAVOR_ALLOCATE ? "FRMA_Win_allocate" : "FRMA_Win_create";
    std::unique_ptr<Window> w(new Window(eng, std::move(bs)));
    Bootstrap& b = *w->bs_;
    w->rank_ = b.rank();
    w->nprocs_ = b.size();
    w->flavor_ = flavor;
    w->topo_ = discover_topology(b);

    // Local checks first; their verdict travels with the first exchange so that a bad
    // argument on one rank fails the call on every rank instead of hanging the others.
    int err = MPI_SUCCESS;
    std::string msg;
    if (size < 0) err = raise(MPI_ERR_SIZE, "%s: size %ld is negative", call, long(size));
    else if (disp_unit <= 0)
        err = raise(MPI_ERR_DISP, "%s: disp_unit %d must be positive", call, disp_unit);
    else if (flavor == MPI_WIN_FLAVOR_CREATE && size > 0 && !user_base)
        err = raise(MPI_ERR_ARG, "%s: base is NULL but size is %ld", call, long(size));
    w->tp_.resize(std::size_t(w->nprocs_));
    if (!err)
        for (int r = 0; r < w->nprocs_ && !err; ++r)
            if (!(w->tp_[std::size_t(r)] = eng.select_transport(w->topo_, r)))
                err = MPI_ERR_UNSUPPORTED_OPERATION;
    if (!err) {
        std::size_t seg = kStateBytes + (flavor == MPI_WIN_FLAVOR_ALLOCATE ? std::size_t(size) : 0);
        err = w->own_.create(seg, eng.config().shm_method);
    }
    if (!err && eng.config().fault == "kill_after_segment" && w->rank_ == w->nprocs_ - 1 &&
        w->nprocs_ > 1)
        kill(getpid(), SIGKILL);  // fault injection: die while the segment is still named
    if (err) msg = last_error_message();

    PeerInfo mine{};
    mine.err = err;
    mine.disp_unit = disp_unit;
    mine.size = std::uint64_t(size < 0 ? 0 : size);
    if (!err) {
        w->base_ = flavor == MPI_WIN_FLAVOR_ALLOCATE ? w->own_.data() + kStateBytes : user_base;
        if (size == 0 && flavor == MPI_WIN_FLAVOR_CREATE) w->base_ = user_base;
        mine.base = reinterpret_cast<std::uint64_t>(w->base_);
        mine.seg = w->own_.export_info();
    }
    std::vector<PeerInfo> all(std::size_t(w->nprocs_));
    b.allgather(&mine, sizeof mine, all.data());
    int first_bad = -1;
    for (int r = 0; r < w->nprocs_; ++r)
        if (all[std::size_t(r)].err && first_bad < 0) first_bad = r;
    if (first_bad >= 0) {
        if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
        return raise(all[std::size_t(first_bad)].err, "%s: window creation failed at rank %d",
                     call, first_bad);
    }

    // Map every node peer's segment; probe cross-memory attach for create windows.
    w->mapped_.resize(std::size_t(w->nprocs_));
    w->peers_.resize(std::size_t(w->nprocs_));
    w->disp_units_.resize(std::size_t(w->nprocs_));
    for (int r = 0; r < w->nprocs_ && !err; ++r) {
        const PeerInfo& pi = all[std::size_t(r)];
        PeerRegion& pr = w->peers_[std::size_t(r)];
        w->disp_units_[std::size_t(r)] = pi.disp_unit;
        pr.size = pi.size;
        pr.pid = pi.seg.pid;
        pr.remote_addr = pi.base;
        unsigned char* seg = nullptr;
        if (r == w->rank_) {
            seg = w->own_.data();
        } else {
            err = w->mapped_[std::size_t(r)].map_peer(pi.seg);
            if (err) break;
            seg = w->mapped_[std::size_t(r)].data();
        }
        pr.state = reinterpret_cast<std::uint64_t*>(seg);
        if (flavor == MPI_WIN_FLAVOR_ALLOCATE) pr.mapped = seg + kStateBytes;
        else if (r == w->rank_) pr.mapped = static_cast<unsigned char*>(user_base);
        else if (pi.size > 0) {
            if (int e = ShmTransport::probe_cma(pi.seg.pid, pi.base); e != 0)
                err = raise(MPI_ERR_UNSUPPORTED_OPERATION,
                            "%s: cross-memory attach to rank %d (pid %d) refused: %s; create "
                            "windows need ptrace access between the ranks",
                            call, r, int(pi.seg.pid), std::strerror(e));
        }
    }
    if (err) msg = last_error_message();
    // Second exchange: everyone has mapped (so the names can go) and agrees on success.
    std::vector<int> errs(std::size_t(w->nprocs_));
    b.allgather(&err, sizeof err, errs.data());
    w->own_.seal();
    for (int r = 0; r < w->nprocs_; ++r)
        if (errs[std::size_t(r)]) {
            if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
            return raise(errs[std::size_t(r)], "%s: window creation failed at rank %d", call, r);
        }

    // CPU atomics are the window's atomicity domain only when every part is mapped here
    // (allocate windows: all peers are node-local and mapped). The choice is per window,
    // so every origin takes the same path for a given element.
    w->cpu_atomics_ = flavor == MPI_WIN_FLAVOR_ALLOCATE;
    w->fast_.resize(std::size_t(w->nprocs_));
    for (int r = 0; r < w->nprocs_; ++r)
        w->fast_[std::size_t(r)] = {w->peers_[std::size_t(r)].mapped, w->peers_[std::size_t(r)].size,
                                    std::uint64_t(w->disp_units_[std::size_t(r)]),
                                    w->peers_[std::size_t(r)].remote_addr, w->peers_[std::size_t(r)].pid};
    w->local_size_ = size;
    w->disp_unit_ = disp_unit;
    w->attr_size_ = size;
    w->attr_disp_unit_ = disp_unit;
    w->attr_flavor_ = flavor;
    Window* self = w.get();
    w->poller_id_ = eng.progress().add_poller([self] { return self->poll(); });
    eng.live_windows().fetch_add(1);
    bump(Stat::windows_created);
    *out = std::move(w);
    return MPI_SUCCESS;
}

int Window::free_collective() {
    {
        std::lock_guard lk(epoch_mu_);
        if (mode_.load() != AccessMode::none)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_free: %s is still open on this window",
                         mode_name(mode_.load()));
    }
    // Every member has closed its epochs; after the barrier nobody touches our memory.
    bs_->barrier();
    eng_.progress().remove_poller(poller_id_);
    poller_id_ = 0;
    eng_.live_windows().fetch_sub(1);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Targets and locks

void Window::backoff(unsigned& us) {
    // While we wait, help: one pass of the progress engine (cheap when there is nothing),
    // then sleep a little; exponential up to the configured bound.
    if (!eng_.progress().running()) eng_.progress().progress_once();
    if (us == 0) {
        sched_yield();
        us = 1;
        return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(us));
    us = std::min<unsigned>(us * 2, unsigned(eng_.config().poll_max_us));
}

bool Window::try_acquire(Target* t) {
    if (t->state == AccessState::lock_granted) return true;
    Transport& tp = *tp_[std::size_t(t->rank)];
    bool ok;
    if (t->assert_ & MPI_MODE_NOCHECK) ok = true;
    else if (t->lock_type == MPI_LOCK_SHARED) ok = lockproto::try_shared(tp, peer(t->rank));
    else ok = lockproto::try_exclusive(tp, peer(0), peer(t->rank));
    if (!ok) {
        bump(Stat::lock_retries);
        return false;
    }
    t->acquired = !(t->assert_ & MPI_MODE_NOCHECK);
    if (t->state != AccessState::lock_granted) waiting_targets_.fetch_sub(1);
    t->state = AccessState::lock_granted;
    return true;
}

void Window::release(Target* t) {
    if (!t->acquired) return;
    Transport& tp = *tp_[std::size_t(t->rank)];
    if (t->lock_type == MPI_LOCK_SHARED) lockproto::unlock_shared(tp, peer(t->rank));
    else lockproto::unlock_exclusive(tp, peer(0), peer(t->rank));
    t->acquired = false;
}

int Window::drain(Target* t) {
    int rc = MPI_SUCCESS;
    while (t->state == AccessState::lock_granted && t->head) {
        Op* op = t->pop();
        int r = issue(t->rank, *op);
        if (r && !rc) rc = r;
        ++t->issued;
        ++t->completed;
        Pool<Op>::put(op);
        queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    return rc;
}

int Window::lock(int lock_type, int rank, int assert_) {
    if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
        return raise(MPI_ERR_LOCKTYPE, "FRMA_Win_lock: lock_type %d is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE", lock_type);
    if (int rc = check_target_rank("FRMA_Win_lock", rank)) return rc;
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    Target* t = nullptr;
    {
        std::lock_guard lk(epoch_mu_);
        AccessMode m = mode_.load();
        if (m != AccessMode::none && m != AccessMode::per_target)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d: %s is open on this window", rank, mode_name(m));
        Slot& s = slots_.slot_of(rank);
        std::lock_guard sl(s.mu);
        if (slots_.find(rank))
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d is already locked by this process", rank);
        t = target_pool_.get();
        if (!t)
            return raise(MPI_ERR_NO_MEM, "FRMA_Win_lock: rank %d: all %zu+%zu targets are in use by open lock epochs (raise FASTRMA_WIN_TARGET_POOL / FASTRMA_TARGET_POOL)",
                         rank, eng_.config().win_target_pool, eng_.config().target_pool);
        t->rank = rank;
        t->lock_type = lock_type;
        t->assert_ = assert_;
        t->state = AccessState::lock_called;
        waiting_targets_.fetch_add(1);
        slots_.insert(t);
        ++n_locks_;
        mode_.store(AccessMode::per_target, std::memory_order_release);
        // One attempt now; most locks are free.
        if (try_acquire(t)) return MPI_SUCCESS;
    }
    // A lock on ourselves must be granted on return: MPI lets us load and store under it.
    if (rank == rank_) {
        unsigned us = 0;
        while (true) {
            {
                Slot& s = slots_.slot_of(rank);
                std::lock_guard sl(s.mu);
                if (try_acquire(t)) return MPI_SUCCESS;
            }
            backoff(us);
        }
    }
    // Remote: return LOCK_CALLED; the progress thread retries and issues queued ops.
    eng_.progress().wake();
    return MPI_SUCCESS;
}

int Window::wait_target(int rank, SyncFlag flag, bool remove) {
    const char* call = remove ? "FRMA_Win_unlock" : "FRMA_Win_flush";
    unsigned us = 0;
    Slot& s = slots_.slot_of(rank);
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(rank);
        if (!t) return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, rank);
        t->raise_sync(flag);
        // Nothing was ever queued or issued and the lock is not ours yet: an unlock can
        // simply withdraw the request (no one can observe the difference).
        if (remove && t->state != AccessState::lock_granted && !t->head && t->issued == 0) {
            waiting_targets_.fetch_sub(1);
            slots_.remove(t);
            Pool<Target>::put(t);
            return MPI_SUCCESS;
        }
        if (t->state != AccessState::lock_granted && !try_acquire(t)) {
            sl.unlock();
            backoff(us);
            continue;
        }
        int rc = drain(t);
        tp_[std::size_t(rank)]->flush(peer(rank));
        if (remove) {
            release(t);
            slots_.remove(t);
            Pool<Target>::put(t);
        } else {
            t->sync = SyncFlag::none;
        }
        return rc;
    }
}

int Window::unlock(int rank) {
    if (int rc = check_target_rank("FRMA_Win_unlock", rank)) return rc;
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (mode_.load() != AccessMode::per_target)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_unlock: rank %d is not locked (%s is open)", rank, mode_name(mode_.load()));
    int rc = wait_target(rank, SyncFlag::unlock, true);
    if (rc == MPI_ERR_RMA_SYNC) return rc;
    std::lock_guard lk(epoch_mu_);
    if (--n_locks_ == 0) mode_.store(AccessMode::none, std::memory_order_release);
    return rc;
}

int Window::lock_all(int assert_) {
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock_all: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    std::lock_guard lk(epoch_mu_);
    AccessMode m = mode_.load();
    if (m != AccessMode::none)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock_all: %s is already open on this window", mode_name(m));
    lock_all_assert_ = assert_;
    if (assert_ & MPI_MODE_NOCHECK) {
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else if (lockproto::try_lock_all(*tp_[0], peer(0))) {
        lock_all_acquired_ = true;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else {
        // Not granted yet: return (MPI allows it); the first op or sync call, or the
        // progress thread, completes the acquisition.
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_called, std::memory_order_release);
        eng_.progress().wake();
    }
    return MPI_SUCCESS;
}

int Window::ensure_lock_all() {
    unsigned us = 0;
    while (true) {
        {
            std::lock_guard lk(epoch_mu_);
            AccessMode m = mode_.load();
            if (m == AccessMode::lock_all_granted) return MPI_SUCCESS;
            if (m != AccessMode::lock_all_called) return MPI_ERR_RMA_SYNC;
            if (lockproto::try_lock_all(*tp_[0], peer(0))) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                return MPI_SUCCESS;
            }
            bump(Stat::lock_retries);
        }
        backoff(us);
    }
}

int Window::unlock_all() {
    AccessMode m = mode_.load();
    if (m != AccessMode::lock_all_called && m != AccessMode::lock_all_granted)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_unlock_all: no lock_all epoch is open (%s)", mode_name(m));
    std::lock_guard lk(epoch_mu_);
    m = mode_.load();
    if (m == AccessMode::lock_all_granted) {
        for (int r = 0; r < nprocs_; ++r) tp_[std::size_t(r)]->flush(peer(r));
        if (lock_all_acquired_) lockproto::unlock_all(*tp_[0], peer(0));
    }
    // lock_all_called: no op was ever issued (an op would have completed the acquisition).
    lock_all_acquired_ = false;
    mode_.store(AccessMode::none, std::memory_order_release);
    return MPI_SUCCESS;
}

int Window::flush(int rank, bool local) {
    const char* call = local ? "FRMA_Win_flush_local" : "FRMA_Win_flush";
    if (int rc = check_target_rank(call, rank)) return rc;
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    switch (mode_.load(std::memory_order_acquire)) {
    case AccessMode::lock_all_granted:
        tp_[std::size_t(rank)]->flush(peer(rank));
        return MPI_SUCCESS;
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target:
        return wait_target(rank, local ? SyncFlag::flush_local : SyncFlag::flush, false);
    case AccessMode::none: break;
    }
    return raise(MPI_ERR_RMA_SYNC, "%s: rank %d: no passive-target epoch is open", call, rank);
}

int Window::flush_all(bool local) {
    const char* call = local ? "FRMA_Win_flush_local_all" : "FRMA_Win_flush_all";
    switch (mode_.load(std::memory_order_acquire)) {
    case AccessMode::lock_all_granted:
        __atomic_thread_fence(__ATOMIC_SEQ_CST);  // shm: every op completed at issue
        return MPI_SUCCESS;
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target: {
        // Flush only the targets that are locked (active targets), not all ranks.
        std::vector<int> ranks;
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            Slot& s = slots_.slot_at(i);
            std::lock_guard sl(s.mu);
            for (Target* t = s.head; t; t = t->next) ranks.push_back(t->rank);
        }
        int rc = MPI_SUCCESS;
        for (int r : ranks) {
            int e = wait_target(r, local ? SyncFlag::flush_local : SyncFlag::flush, false);
            if (e && e != MPI_ERR_RMA_SYNC && !rc) rc = e;  // unlocked meanwhile: fine
        }
        return rc;
    }
    case AccessMode::none: break;
    }
    return raise(MPI_ERR_RMA_SYNC, "%s: no passive-target epoch is open", call);
}

int Window::sync() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Operations

int Window::check_target_rank(const char* call, int rank) const {
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (rank < 0 || rank >= nprocs_)
        return raise(MPI_ERR_RANK, "%s: rank %d is outside the window's group of %d", call, rank, nprocs_);
    return MPI_SUCCESS;
}

namespace {
int type_of(const char* call, const char* what, MPI_Datatype t, const TypeInfo** out) {
    *out = lookup_type(t);
    if (!*out) {
        if (t == MPI_DATATYPE_NULL)
            return raise(MPI_ERR_TYPE, "%s: %s datatype is MPI_DATATYPE_NULL", call, what);
        return raise(MPI_ERR_TYPE, "%s: %s datatype is not a predefined type (derived datatypes arrive with the semantics issue)", call, what);
    }
    return MPI_SUCCESS;
}
}  // namespace

int Window::validate(const OpRequest& rq, Op* op) const {
    const char* call = rq.call;
    if (rq.origin_count < 0 || rq.target_count < 0 || rq.result_count < 0)
        return raise(MPI_ERR_COUNT, "%s: negative count (origin %d, target %d, result %d)", call,
                     rq.origin_count, rq.target_count, rq.result_count);
    const TypeInfo* tt = nullptr;
    if (int rc = type_of(call, "target", rq.target_type, &tt)) return rc;
    op->kind = rq.kind;
    op->type = tt;
    op->op = rq.op;
    op->count = std::size_t(rq.target_count);
    op->origin = rq.origin;
    op->result = rq.result;
    op->compare = rq.compare;

    // MPI ignores the origin buffer of MPI_NO_OP (get_accumulate and fetch_and_op).
    const bool has_origin = !(rq.kind == RmaKind::get ||
                              ((rq.kind == RmaKind::get_acc || rq.kind == RmaKind::fop) &&
                               rq.op == MPI_NO_OP));
    const bool has_result = rq.kind == RmaKind::get || rq.kind == RmaKind::get_acc ||
                            rq.kind == RmaKind::fop || rq.kind == RmaKind::cas;
    if (rq.kind == RmaKind::get) {
        const TypeInfo* ot = nullptr;
        if (int rc = type_of(call, "origin", rq.origin_type, &ot)) return rc;
        if (ot != tt || rq.origin_count != rq.target_count)
            return raise(MPI_ERR_TYPE, "%s: origin (%d x %s) and target (%d x %s) type signatures differ",
                         call, rq.origin_count, ot->name, rq.target_count, tt->name);
        op->result = const_cast<void*>(rq.origin);
    } else if (has_origin) {
        const TypeInfo* ot = nullptr;
        if (int rc = type_of(call, "origin", rq.origin_type, &ot)) return rc;
        if (ot != tt || rq.origin_count != rq.target_count)
            return raise(MPI_ERR_TYPE, "%s: origin (%d x %s) and target (%d x %s) type signatures differ",
                         call, rq.origin_count, ot->name, rq.target_count, tt->name);
    }
    if (has_result && rq.kind == RmaKind::get_acc) {
        const TypeInfo* rt = nullptr;
        if (int rc = type_of(call, "result", rq.result_type, &rt)) return rc;
        if (rt != tt || rq.result_count != rq.target_count)
            return raise(MPI_ERR_TYPE, "%s: result (%d x %s) and target (%d x %s) type signatures differ",
                         call, rq.result_count, rt->name, rq.target_count, tt->name);
    }
    if (rq.kind == RmaKind::acc || rq.kind == RmaKind::get_acc || rq.kind == RmaKind::fop) {
        if (check_accumulate(rq.op, rq.target_type, nullptr) != MPI_SUCCESS) {
            std::string why;
            return raise(check_accumulate(rq.op, rq.target_type, &why), "%s: %s", call, why.c_str());
        }
    } else if (rq.kind == RmaKind::cas) {
        if (check_compare_and_swap(rq.target_type, nullptr) != MPI_SUCCESS) {
            std::string why;
            return raise(check_compare_and_swap(rq.target_type, &why), "%s: %s", call, why.c_str());
        }
    }
    if (op->count > 0) {
        if (has_origin && !rq.origin && rq.kind != RmaKind::get)
            return raise(MPI_ERR_ARG, "%s: origin buffer is NULL for %d elements", call, rq.origin_count);
        if (has_result && !op->result)
            return raise(MPI_ERR_ARG, "%s: result buffer is NULL", call);
        if (rq.kind == RmaKind::cas && !rq.compare)
            return raise(MPI_ERR_ARG, "%s: compare buffer is NULL", call);
    }

    // Displacement: nothing may be written outside the target's part of the window.
    const PeerRegion& pr = peer(rq.target_rank);
    const int du = disp_units_[std::size_t(rq.target_rank)];
    if (rq.target_disp < 0)
        return raise(MPI_ERR_RMA_RANGE, "%s: target_disp %ld is negative", call, long(rq.target_disp));
    __int128 off = __int128(rq.target_disp) * du;
    __int128 end = off + __int128(span_bytes(*tt, op->count));
    if (op->count > 0 && end > __int128(pr.size))
        return raise(MPI_ERR_RMA_RANGE,
                     "%s: target_disp %ld x disp_unit %d + %zu x %s (%llu bytes) exceeds rank %d's window of %llu bytes",
                     call, long(rq.target_disp), du, op->count, tt->name,
                     static_cast<unsigned long long>(span_bytes(*tt, op->count)), rq.target_rank,
                     static_cast<unsigned long long>(pr.size));
    op->offset = std::uint64_t(off);
    return MPI_SUCCESS;
}

void Window::count_op(RmaKind k) {
    static constexpr Stat by_kind[] = {Stat::puts, Stat::gets, Stat::accs, Stat::accs, Stat::fops, Stat::cases};
    bump(by_kind[int(k)]);
}

int Window::issue(int rank, const Op& op) {
    return issue_op(ctx(rank), op);
}

Op* Window::alloc_op() {
    while (true) {
        if (Op* op = op_pool_.get()) return op;
        // Both pools are exhausted: force out the queued ops of the fullest target.
        bump(Stat::gc_runs);
        if (!collect_garbage()) {
            unsigned us = 1;
            backoff(us);  // another thread's ops hold the pool; they drain soon
        }
    }
}

bool Window::collect_garbage() {
    int victim = -1;
    std::size_t most = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::lock_guard sl(s.mu);
        for (Target* t = s.head; t; t = t->next)
            if (t->npending > most) { most = t->npending; victim = t->rank; }
    }
    if (victim < 0) return false;
    // A local flush of the victim: wait for its lock (helping progress) and issue its queue.
    unsigned us = 0;
    Slot& s = slots_.slot_of(victim);
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(victim);
        if (!t || !t->head) return true;
        if (try_acquire(t)) {
            drain(t);
            return true;
        }
        sl.unlock();
        backoff(us);
    }
}

int Window::post(const OpRequest& rq) {
    if (int rc = check_target_rank(rq.call, rq.target_rank)) return rc;
    if (rq.target_rank == MPI_PROC_NULL) return MPI_SUCCESS;
    Op desc;
    if (int rc = validate(rq, &desc)) return rc;
    const int r = rq.target_rank;
    AccessMode m = mode_.load(std::memory_order_acquire);
    if (m == AccessMode::lock_all_called) {
        if (ensure_lock_all() == MPI_SUCCESS) m = AccessMode::lock_all_granted;
        else m = mode_.load(std::memory_order_acquire);
    }
    if (m == AccessMode::lock_all_granted) {
        count_op(desc.kind);
        if (desc.count == 0) return MPI_SUCCESS;
        bump(Stat::direct);
        if (int rc = issue(r, desc)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
        return MPI_SUCCESS;
    }
    if (m != AccessMode::per_target)
        return raise(MPI_ERR_RMA_SYNC, "%s: no access epoch is open to rank %d (lock it or lock_all first)", rq.call, r);

    Slot& s = slots_.slot_of(r);
    Op* spare = nullptr;
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(r);
        if (!t) {
            if (spare) Pool<Op>::put(spare);
            return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", rq.call, r);
        }
        count_op(desc.kind);
        if (desc.count == 0) {
            if (spare) Pool<Op>::put(spare);
            return MPI_SUCCESS;
        }
        if (!t->head && (t->state == AccessState::lock_granted || try_acquire(t))) {
            // Fast path: granted, nothing queued before us: issue from this thread.
            ++t->issued;
            ++t->completed;
            sl.unlock();
            if (spare) Pool<Op>::put(spare);
            bump(Stat::direct);
            if (int rc = issue(r, desc)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
            return MPI_SUCCESS;
        }
        if (!spare) {
            // Queue it; allocation may have to collect garbage, never under a slot mutex.
            sl.unlock();
            spare = alloc_op();
            continue;
        }
        void* home = spare->home;
        *spare = desc;
        spare->home = home;
        t->push(spare);
        queued_.fetch_add(1, std::memory_order_relaxed);
        bump(Stat::queued);
        sl.unlock();
        eng_.progress().wake();
        return MPI_SUCCESS;
    }
}

// ---------------------------------------------------------------------------------------
// Progress: retry lock acquisitions whose time has come, issue queues of granted targets.

Poll Window::poll() {
    const bool lock_all_pending = mode_.load(std::memory_order_acquire) == AccessMode::lock_all_called;
    if (!lock_all_pending && waiting_targets_.load(std::memory_order_acquire) == 0 &&
        queued_.load(std::memory_order_acquire) == 0)
        return Poll::idle;
    bool did = false;
    if (lock_all_pending) {
        std::unique_lock lk(epoch_mu_, std::try_to_lock);
        if (lk.owns_lock() && mode_.load() == AccessMode::lock_all_called &&
            lockproto::try_lock_all(*tp_[0], peer(0))) {
            lock_all_acquired_ = true;
            mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
            did = true;
        }
    }
    const std::uint64_t now = now_ns();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::unique_lock sl(s.mu, std::try_to_lock);
        if (!sl.owns_lock()) continue;  // an application thread is working on it
        for (Target* t = s.head; t; t = t->next) {
            if (t->state != AccessState::lock_granted) {
                if (now < t->next_try_ns) continue;
                if (!try_acquire(t)) {
                    t->backoff_us = std::min<std::uint32_t>(t->backoff_us ? t->backoff_us * 2 : 1,
                                                            std::uint32_t(eng_.config().poll_max_us));
                    t->next_try_ns = now + std::uint64_t(t->backoff_us) * 1000;
                    continue;
                }
                did = true;
            }
            if (t->head) {
                drain(t);
                did = true;
            }
        }
    }
    if (did) return Poll::busy;
    return (waiting_targets_.load() || queued_.load() ||
            mode_.load() == AccessMode::lock_all_called) ? Poll::waiting : Poll::idle;
}

}  // namespace fastrma::detail
