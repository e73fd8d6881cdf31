// window_ops.cpp — a window's operations: validation against its peers and types, the
// post path (validate, then the epochs decide), issue to a peer's transport, the completion
// of request-based operations, and the requests it serves as a target (apply_local).
#include <cstring>

#include "base/errors.hpp"
#include "engine/window.hpp"
#include "ops/layout.hpp"
#include "ops/reduce.hpp"
#include "transport/select.hpp"

namespace fastrma::detail {

int Window::track_request(int r, Completion* done) {
    if (!completes_later(*done)) {
        if (int rc = complete_request(r)) return rc;
        done->signal(MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    if (int rc = drain_batch(node_tp_->batch_if_any(r), r)) return rc;
    const PeerRegion p = peer(r);
    Transport& t = tp(r);
    const std::uint64_t token = t.mark(p);
    if (token == 0) {
        done->signal(MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    {
        std::lock_guard lk(req_mu_);
        requests_.push_back({done, r, token});
        n_requests_.store(int(requests_.size()), std::memory_order_release);
    }
    eng_.progress().wake();
    return MPI_SUCCESS;
}

bool Window::poll_requests() {
    if (n_requests_.load(std::memory_order_acquire) == 0) return false;
    Completion* ready[16];
    std::size_t n = 0;
    {
        std::unique_lock lk(req_mu_, std::try_to_lock);
        if (!lk.owns_lock()) return false;
        for (std::size_t i = 0; i < requests_.size() && n < std::size(ready);) {
            const PendingRequest& q = requests_[i];
            if (!tp(q.rank).reached(peer(q.rank), q.token)) {
                ++i;
                continue;
            }
            ready[n++] = q.done;
            requests_[i] = requests_.back();
            requests_.pop_back();
        }
        n_requests_.store(int(requests_.size()), std::memory_order_release);
    }
    for (std::size_t i = 0; i < n; ++i) ready[i]->signal(MPI_SUCCESS);
    return n != 0;
}

void Window::finish_requests() {
    std::vector<PendingRequest> left;
    {
        std::lock_guard lk(req_mu_);
        left.swap(requests_);
        n_requests_.store(0, std::memory_order_release);
    }
    for (const PendingRequest& q : left) q.done->signal(MPI_SUCCESS);
}

int Window::complete_request(int r) {
    // A batched transfer is in flight until its batch drains; a message transport's get
    // data or put buffer until its local completion.
    if (int rc = drain_batch(node_tp_->batch_if_any(r), r)) return rc;
    tp(r).flush_local(peer(r));
    return MPI_SUCCESS;
}

int Window::apply_local(int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count, const void* src,
                        const void* cmp, void* res) {
    const TypeInfo* ti = type_by_id(std::uint8_t(type_id));
    if (!ti) return MPI_ERR_TYPE;
    const bool dynamic = flavor_ == MPI_WIN_FLAVOR_DYNAMIC;
    if (!cpu_atomics_ && (base_ || dynamic)) {
        // One contiguous run in my mapped memory, lock domain (am windows): what issue_op
        // would do, without building an op (a batch of small accumulates is served at
        // ~1/3 of the cost). Dynamic windows: toff is the address in this process (the
        // server checked it is attached), not a cross-memory attach to ourselves (two
        // syscalls an accumulate or compare_and_swap).
        const IssueContext ctx{*node_tp_, peer(rank_), false, eng_.config().acc_stripes};
        unsigned char* at = dynamic ? reinterpret_cast<unsigned char*>(toff) : nullptr;
        if (kind == int(RmaKind::cas))
            compare_and_swap_locked_in_place(ctx, *ti, toff, src, cmp, res, at);
        else
            accumulate_locked_in_place(ctx, op_handle(OpKind(op_id)), *ti, toff, src, count, res, at);
        return MPI_SUCCESS;
    }
    Op op;
    op.kind = RmaKind(kind);
    op.op = op_handle(OpKind(op_id));
    op.type = ti;
    std::shared_ptr<const Layout> el(std::shared_ptr<const Layout>(), &predefined_layout(*ti));
    op.olay = op.rlay = op.tlay = el;
    op.ocount = op.rcount = op.tcount = count;
    op.bytes = count * ti->size;
    op.lo = 0;
    op.hi = std::int64_t(count * ti->extent);
    op.origin = src;
    op.result = res;
    op.compare = cmp;
    op.offset = toff;
    return issue_op(with_acc_domain(IssueContext{*node_tp_, peer(rank_), cpu_atomics_, eng_.config().acc_stripes}), op);
}

int Window::apply_local_strided(int kind, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                                std::uint64_t count, std::uint64_t pieces, const void* src, void* res) {
    const TypeInfo* ti = type_by_id(std::uint8_t(type_id));
    if (!ti) return MPI_ERR_TYPE;
    const bool dynamic = flavor_ == MPI_WIN_FLAVOR_DYNAMIC;
    if (!cpu_atomics_ && (base_ || dynamic)) {
        // Lock domain in my mapped memory (am windows): the runs under the stripes of their
        // whole footprint, one kernel call (dynamic windows: toff is the address).
        const IssueContext ctx{*node_tp_, peer(rank_), false, eng_.config().acc_stripes};
        accumulate_strided_locked_in_place(ctx, OpKind(op_id), *ti, toff, stride, count, pieces, src, res, dynamic);
        return MPI_SUCCESS;
    }
    const std::uint64_t run = count * ti->extent;
    for (std::uint64_t i = 0; i < pieces; ++i) {
        const void* s = src ? static_cast<const unsigned char*>(src) + i * run : nullptr;
        void* r = res ? static_cast<unsigned char*>(res) + i * run : nullptr;
        if (int rc = apply_local(kind, op_id, type_id, toff + i * std::uint64_t(stride), count, s, nullptr, r))
            return rc;
    }
    return MPI_SUCCESS;
}

namespace {
// A target type whose bytes leave the 64-bit range touches bytes outside any window:
// MPI_ERR_RMA_RANGE (as Open MPI answers); on the origin side such a type is MPI_ERR_TYPE.
int layout_of(const char* call, const char* what, MPI_Datatype t, std::shared_ptr<const Layout>* out) {
    std::string why;
    if (const int rc = get_layout(t, out, &why)) {
        const bool target = std::strcmp(what, "target") == 0;
        return raise(rc == MPI_ERR_RMA_RANGE && target ? MPI_ERR_RMA_RANGE : MPI_ERR_TYPE, "%s: %s datatype: %s", call,
                     what, why.c_str());
    }
    return MPI_SUCCESS;
}
}  // namespace

int Window::validate(const OpRequest& rq, Op* op) const {
    const char* call = rq.call;
    if (rq.origin_count < 0 || rq.target_count < 0 || rq.result_count < 0)
        return raise(MPI_ERR_COUNT, "%s: negative count (origin %d, target %d, result %d)", call, rq.origin_count,
                     rq.target_count, rq.result_count);
    op->kind = rq.kind;
    op->op = rq.op;
    op->origin = rq.origin;
    op->result = rq.result;
    op->compare = rq.compare;
    op->ocount = std::uint64_t(rq.origin_count);
    op->rcount = std::uint64_t(rq.result_count);
    op->tcount = std::uint64_t(rq.target_count);
    if (int rc = layout_of(call, "target", rq.target_type, &op->tlay)) return rc;
    const Layout& tl = *op->tlay;
    std::string why;

    switch (rq.kind) {
    case RmaKind::put:
    case RmaKind::get:
        if (int rc = layout_of(call, "origin", rq.origin_type, &op->olay)) return rc;
        if (check_signature(*op->olay, op->ocount, tl, op->tcount, &why) != MPI_SUCCESS)
            return raise(MPI_ERR_TYPE, "%s: %s", call, why.c_str());
        // Where each side is built from one basic type, the types must be the same (type
        // signatures match); MPI_BYTE is accepted against anything, as codes rely on it.
        if (const TypeInfo* ob = op->olay->basic(), *tb = tl.basic();
            ob && tb && ob != tb && ob->type != MPI_BYTE && tb->type != MPI_BYTE)
            return raise(MPI_ERR_TYPE, "%s: origin (%s) and target (%s) type signatures differ", call, ob->name,
                         tb->name);
        if (rq.kind == RmaKind::get) op->result = const_cast<void*>(rq.origin);
        break;
    case RmaKind::acc:
    case RmaKind::get_acc:
    case RmaKind::fop: {
        const bool noop = rq.op == MPI_NO_OP && rq.kind != RmaKind::acc;
        if (rq.kind != RmaKind::acc) {
            if (int rc = layout_of(call, "result", rq.result_type, &op->rlay)) return rc;
            // (The reason is spelled out only on failure: on success it would be a string
            // built and dropped on every accumulate.)
            if (int rc = check_accumulate_layouts(rq.op, *op->rlay, op->rcount, tl, op->tcount, nullptr)) {
                check_accumulate_layouts(rq.op, *op->rlay, op->rcount, tl, op->tcount, &why);
                return raise(rc, "%s: result and target: %s", call, why.c_str());
            }
        }
        if (noop) {  // MPI ignores the origin arguments of MPI_NO_OP
            op->olay = op->rlay;
            op->ocount = op->rcount;
            op->origin = nullptr;
        } else {
            if (int rc = layout_of(call, "origin", rq.origin_type, &op->olay)) return rc;
            if (int rc = check_accumulate_layouts(rq.op, *op->olay, op->ocount, tl, op->tcount, nullptr)) {
                check_accumulate_layouts(rq.op, *op->olay, op->ocount, tl, op->tcount, &why);
                return raise(rc, "%s: %s", call, why.c_str());
            }
        }
        op->type = tl.basic();
        break;
    }
    case RmaKind::cas: {
        const TypeInfo* ti = lookup_type(rq.target_type);
        if (!ti || check_compare_and_swap(rq.target_type, nullptr) != MPI_SUCCESS) {
            check_compare_and_swap(rq.target_type, &why);
            return raise(MPI_ERR_TYPE, "%s: %s", call, why.c_str());
        }
        op->type = ti;
        op->olay = op->rlay = op->tlay;
        break;
    }
    }
    op->bytes = tl.size() * op->tcount;
    if (op->bytes > 0) {
        // A NULL buffer is MPI_BOTTOM: legal when the datatype holds absolute addresses
        // (its data starts above address 0), refused when it would touch the first page.
        auto null_buffer = [](const void* buf, const std::shared_ptr<const Layout>& l) {
            return !buf && (!l || l->true_lb() < 4096);
        };
        const bool origin_ignored = op->op == MPI_NO_OP && rq.kind != RmaKind::acc;
        if (rq.kind != RmaKind::get && !origin_ignored && null_buffer(op->origin, op->olay))
            return raise(MPI_ERR_ARG, "%s: origin buffer is NULL for %d elements", call, rq.origin_count);
        if (rq.kind == RmaKind::get && null_buffer(op->result, op->olay))
            return raise(MPI_ERR_ARG, "%s: origin buffer is NULL for %d elements", call, rq.origin_count);
        if (rq.kind != RmaKind::put && rq.kind != RmaKind::acc && rq.kind != RmaKind::get &&
            null_buffer(op->result, op->rlay))
            return raise(MPI_ERR_ARG, "%s: result buffer is NULL", call);
        if (rq.kind == RmaKind::cas && !rq.compare) return raise(MPI_ERR_ARG, "%s: compare buffer is NULL", call);
    }

    // Displacement: nothing may be written outside the target's part of the window. A
    // negative one is an invalid argument (MPI_ERR_DISP, as MPICH answers); a valid one
    // past the end is out of range. (Dynamic windows take addresses: any value may be one.)
    const PeerRegion pr = peer(rq.target_rank);
    const int du = int(disp_unit_of(rq.target_rank));
    if (rq.target_disp < 0 && flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_DISP, "%s: target_disp %ld is negative", call, long(rq.target_disp));
    auto [lo, hi] = footprint(tl, op->tcount);
    op->lo = lo;
    op->hi = hi;
    const __int128 off = __int128(rq.target_disp) * du;
    if (op->bytes > 0 && (off + lo < 0 || off + hi > __int128(pr.size)))
        return raise(MPI_ERR_RMA_RANGE,
                     "%s: target_disp %ld x disp_unit %d + %llu x %s touches bytes [%lld, %lld), outside rank %d's "
                     "window of %llu bytes",
                     call, long(rq.target_disp), du, static_cast<unsigned long long>(op->tcount), tl.description(),
                     static_cast<long long>(off + lo), static_cast<long long>(off + hi), rq.target_rank,
                     static_cast<unsigned long long>(pr.size));
    op->offset = std::uint64_t(off);
    return MPI_SUCCESS;
}

int Window::issue(int rank, const Op& op) { return issue_op(ctx(rank), op); }

int Window::post(const OpRequest& rq, Completion* done) {
    if (int rc = check_target_rank(rq.call, rq.target_rank, nprocs_)) return rc;
    if (rq.target_rank == MPI_PROC_NULL) {
        if (done) done->signal(MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    Op desc;
    if (int rc = validate(rq, &desc)) return rc;
    const int r = rq.target_rank;
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC)
        if (desc.bytes > 0)
            if (int rc =
                    dynamic_offset(rq.call, r, desc.offset + std::uint64_t(desc.lo), std::uint64_t(desc.hi - desc.lo)))
                return rc;
    if (desc.kind != RmaKind::put && desc.kind != RmaKind::get) acc_order();
    return epochs_.submit(rq.call, r, desc, done);
}

}  // namespace fastrma::detail
