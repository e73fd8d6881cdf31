// window_fast.hpp — the inline fast paths of Window (included at the end of window.hpp).
//
// Taken only when: the epoch lets an op to the target go now with nothing queued before it
// (Epochs::direct: a granted lock_all or lock, a fence or PSCW epoch), the types are one
// predefined type without holes, and the displacement is in range; the target is then
// reached through the capabilities of its transport (the node transport's mapped range,
// batch or copier, or a remote transport's put/get/accumulate for a small contiguous op).
// Everything else — errors included — goes to post().
// The checks here are a subset of validate()'s, so a fast path never accepts what the
// slow path would reject.
#pragma once

#include <atomic>
#include <cstring>

#include "ops/copy.hpp"

namespace fastrma::detail {

// lookup_type with the last hit kept: the fast paths ask once per call, mostly for the same
// type. The table's entries are immutable and live as long as the process, and a hit is
// checked against the handle, so a stale or racing entry is at worst a miss.
inline const TypeInfo* fast_lookup_type(MPI_Datatype t) {
    static std::atomic<const TypeInfo*> last{nullptr};
    const TypeInfo* ti = last.load(std::memory_order_relaxed);
    if (ti && ti->type == t) [[likely]]
        return ti;
    ti = lookup_type(t);
    if (ti) last.store(ti, std::memory_order_relaxed);
    return ti;
}

inline unsigned char* Window::fast_target(int rank, MPI_Aint disp, std::uint64_t bytes, std::uint64_t* offset) const {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_)) return nullptr;
    if (remote_peer(rank)) return nullptr;  // not in my node segment
    if (std::uint64_t(disp) >> 32) return nullptr;  // negative or huge: let validate() speak
    const std::uint64_t off = std::uint64_t(disp) * node_tp_->disp_unit(rank);  // < 2^63: no overflow
    if (offset) *offset = off;
    return node_tp_->map(rank, off, bytes);
}

// Where bytes at disp lie on a node peer reached by cross-memory attach (create: the offset
// in its part, not FRMA_Alloc_mem memory; dynamic: the address, inside a region it has
// attached): false when the range is not inside what the peer published (the slow path
// decides, and raises).
inline bool Window::unmapped_offset(int rank, MPI_Aint disp, std::uint64_t bytes, std::uint64_t* off) {
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) {
        *off = std::uint64_t(disp);
        return disp > 0 && dynamic_contains(rank, *off, bytes);
    }
    if (flavor_ != MPI_WIN_FLAVOR_CREATE || (std::uint64_t(disp) >> 32)) return false;
    const std::uint64_t* info = state_of(rank);
    *off = std::uint64_t(disp) * info[kInfoDispUnit];
    return !info[kInfoArena] && *off + bytes <= info[kInfoSize];
}

// Cross-memory attach for an unmapped peer (create and dynamic windows): one contiguous
// piece, into the peer's batch when it is small, else (create) in one syscall, or queued for
// the progress thread when it is large. Anything partial or failed goes to the slow path,
// which resumes or raises.
inline bool Window::fast_cma(int rank, MPI_Aint disp, void* local, std::uint64_t bytes, bool write) {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_) || remote_peer(rank)) return false;
    std::uint64_t off;
    if (!unmapped_offset(rank, disp, bytes, &off)) return false;
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) {
        // Small transfers join the peer's batch, everything else takes the slow path.
        CmaBatch* const b = bytes <= node_tp_->batch_max() ? cma_batch(rank) : nullptr;
        if (!b) return false;
        b->transfer(write, off, local, bytes);
        return true;
    }
    if (rank == rank_) return false;
    const std::uint64_t* info = state_of(rank);
    const pid_t pid = pid_t(info[kInfoPid]);
    if (CmaBatch* b = bytes <= node_tp_->batch_max() ? cma_batch(rank) : nullptr) {  // small: moved at completion
        b->transfer(write, off, local, bytes);
        return true;
    }
    if (CmaBatch* b = node_tp_->batch_if_any(rank); b && b->due()) return false;  // the slow path moves it first
    // A peer waiting in MPI takes a mid-size transfer through its served bulk area (issue.cpp).
    if (bytes <= bulk_max_ && info[kServedBulkWord] && served::fresh(info)) return false;
    if (offload_now(bytes)) {
        if (node_tp_->queued(node_tp_->offload()->submit_cma(pid, write, local, info[kInfoBase] + off, bytes,
                                                             node_tp_->offload_error())))
            return true;
    }
    if (bytes > (1u << 20)) return false;
    const PeerRegion p = peer(rank);
    const Chunk c{local, off, std::size_t(bytes)};
    return accepted(write ? tp(rank).put(p, &c, 1) : tp(rank).get(p, &c, 1));
}

inline int Window::fast_transfer(bool is_put, void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp,
                                 int tcount, MPI_Datatype ttype) {
    if (otype != ttype || ocount != tcount || ocount <= 0 || !origin) return kSlowPath;
    const TypeInfo* ti = fast_lookup_type(ttype);
    if (!ti || ti->size != ti->extent) return kSlowPath;
    const std::uint64_t bytes = std::uint64_t(ocount) * ti->extent;
    if (remote_peer(rank)) return fast_remote_transfer(is_put, origin, rank, disp, bytes);
    // A node peer of a network window with an accumulate of ours still on the network: the
    // slow path's put/get completes it first (SplitTransport).
    if (split_) {
        PeerRegion who;  // (the split transport asks only the rank)
        who.rank = rank;
        if (split_->data_must_wait(who)) return kSlowPath;
    }
    unsigned char* remote = fast_target(rank, disp, bytes);
    if ((!remote && flavor_ != MPI_WIN_FLAVOR_CREATE && flavor_ != MPI_WIN_FLAVOR_DYNAMIC) || !epochs_.direct(rank))
        return kSlowPath;
    if (remote) {
        std::uint64_t seq = 0;
        if (offload_now(bytes)) [[unlikely]] {
            // Large: the progress thread copies while the caller returns to its work.
            CopyOffload& copier = *node_tp_->offload();
            seq = is_put ? copier.submit(remote, origin, bytes, node_tp_->offload_error())
                         : copier.submit(origin, remote, bytes, node_tp_->offload_error());
        }
        if (!node_tp_->queued(seq)) {
            if (is_put)
                copy_bytes(remote, origin, bytes);
            else
                copy_bytes(origin, remote, bytes);
        }
    } else if (!fast_cma(rank, disp, origin, bytes, is_put)) {
        return kSlowPath;
    }
    bump(is_put ? Stat::puts : Stat::gets);
    return MPI_SUCCESS;
}

// Peers reached by messages: a small contiguous put or get goes to the transport straight
// from here (a put within the transport's inline_max is copied at once: a batch record of
// the am transport; a get's answer lands at the next completion). The checks of
// validate() that apply: rank, displacement and extent against what the peer published;
// the rest was checked by the caller.
inline bool Window::remote_fast_offset(int rank, MPI_Aint disp, std::uint64_t bytes, std::uint64_t* off) {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_) || rank == rank_ || bytes > remote_inline_max_)
        return false;
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) {  // the address, if our copy of the target's table has it
        *off = std::uint64_t(disp);
        return disp > 0 && dynamic_contains(rank, std::uint64_t(disp), bytes);
    }
    if (std::uint64_t(disp) >> 32) return false;
    *off = std::uint64_t(disp) * remote_du_[std::size_t(rank)];
    return *off + bytes <= remote_size_[std::size_t(rank)];
}

inline int Window::fast_remote_transfer(bool is_put, void* origin, int rank, MPI_Aint disp, std::uint64_t bytes) {
    std::uint64_t off;
    if (!remote_fast_offset(rank, disp, bytes, &off) || !epochs_.direct(rank)) return kSlowPath;
    const Chunk c{origin, off, std::size_t(bytes)};
    const PeerRegion p = peer(rank);
    const Post done = is_put ? remote_->put(p, &c, 1) : remote_->get(p, &c, 1);
    if (!accepted(done)) return kSlowPath;
    bump(is_put ? Stat::puts : Stat::gets);
    return MPI_SUCCESS;
}

// ... and a small accumulate without result too (applied at the target by its own
// accumulate path, in order behind this origin's earlier requests).
inline int Window::fast_remote_accumulate(const void* origin, const TypeInfo& ti, int rank, MPI_Aint disp,
                                          std::size_t n, MPI_Op op) {
    std::uint64_t off;
    if (!remote_fast_offset(rank, disp, std::uint64_t(n) * ti.extent, &off) || !op_defined_fast(op_kind_fast(op), ti) ||
        !epochs_.direct(rank))
        return kSlowPath;
    if (!accepted(remote_->accumulate(peer(rank), int(RmaKind::acc), int(op_kind(op)), ti.id, off, n, ti.extent, origin,
                                      nullptr, nullptr)))
        return kSlowPath;
    bump(Stat::accs);
    return MPI_SUCCESS;
}

inline int Window::fast_put(const void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp, int tcount,
                            MPI_Datatype ttype) {
    return fast_transfer(true, const_cast<void*>(origin), ocount, otype, rank, disp, tcount, ttype);
}

inline int Window::fast_get(void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp, int tcount,
                            MPI_Datatype ttype) {
    return fast_transfer(false, origin, ocount, otype, rank, disp, tcount, ttype);
}

inline int Window::fast_fetch_and_op(const void* origin, void* result, MPI_Datatype type, int rank, MPI_Aint disp,
                                     MPI_Op op) {
    if (!result || (!origin && op != MPI_NO_OP)) return kSlowPath;
    const TypeInfo* ti = fast_lookup_type(type);
    if (!ti) return kSlowPath;
    std::uint64_t off;
    unsigned char* dst = fast_target(rank, disp, ti->extent, &off);
    const OpKind k = op_kind_fast(op);
    if (!op_defined_fast(k, *ti)) return kSlowPath;
    if (!dst)
        return fast_served_atomic(RmaKind::fop, *ti, k, op == MPI_NO_OP ? nullptr : origin, nullptr, result, rank,
                                  disp);
    if (!epochs_.direct(rank)) return kSlowPath;
    if (!cpu_atomics_ || !ti->cpu_domain) return fast_locked(rank, off, dst, *ti, k, origin, 1, result);
    // The most common atomic of PGAS codes: a fetch-add on an aligned 8-byte integer.
    const bool int_add = k == OpKind::sum && ti->extent == 8 &&
                         (ti->cls == TypeClass::c_integer || ti->cls == TypeClass::fortran_integer) &&
                         !(reinterpret_cast<std::uintptr_t>(dst) & 7);
    acc_order();
    AccAtomicsGuard atomics(acc_mine(), state_of(rank), atomics_mask(off, 1));
    if (int_add) {
        std::uint64_t v;
        std::memcpy(&v, origin, 8);
        v = __atomic_fetch_add(reinterpret_cast<std::uint64_t*>(dst), v, __ATOMIC_SEQ_CST);
        std::memcpy(result, &v, 8);
        bump(Stat::fops);
        return MPI_SUCCESS;
    }
    if (!reduce_atomic(k, *ti, dst, origin, 1, result)) return kSlowPath;  // (never, for native types)
    bump(Stat::fops);
    return MPI_SUCCESS;
}

inline int Window::fast_compare_and_swap(const void* origin, const void* compare, void* result, MPI_Datatype type,
                                         int rank, MPI_Aint disp) {
    if (!origin || !compare || !result) return kSlowPath;
    const TypeInfo* ti = fast_lookup_type(type);
    if (!ti || check_compare_and_swap(type, nullptr) != MPI_SUCCESS) return kSlowPath;
    std::uint64_t off;
    unsigned char* dst = fast_target(rank, disp, ti->extent, &off);
    if (!dst) return fast_served_atomic(RmaKind::cas, *ti, OpKind::replace, origin, compare, result, rank, disp);
    if (!cpu_atomics_ || !ti->cpu_domain || !epochs_.direct(rank)) return kSlowPath;
    acc_order();
    AccAtomicsGuard atomics(acc_mine(), state_of(rank), atomics_mask(off, 1));
    if (!compare_and_swap_atomic(*ti, dst, origin, compare, result)) return kSlowPath;
    bump(Stat::cases);
    return MPI_SUCCESS;
}

inline int Window::fast_served_atomic(RmaKind kind, const TypeInfo& ti, OpKind k, const void* origin,
                                      const void* compare, void* result, int rank, MPI_Aint disp) {
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_) || rank == rank_ || remote_peer(rank) || net_ ||
        ti.size != ti.extent || ti.extent > 8)
        return kSlowPath;
    std::uint64_t off;
    if (!unmapped_offset(rank, disp, ti.extent, &off)) return kSlowPath;
    // Behind what this origin batched or offloaded for the peer: the slow path drains it.
    if (!epochs_.direct(rank)) return kSlowPath;
    if (CmaBatch* b = node_tp_->batch_if_any(rank); b && b->due()) return kSlowPath;
    acc_order();
    const served::Request rq{int(kind), int(k), int(ti.id), off, ti.size, origin, compare};
    int rc = MPI_SUCCESS;
    // Not taken, or refused with an error: the slow path applies it or raises.
    if (!served::try_remote(state_of(rank), rq, result, &rc) || rc != MPI_SUCCESS) return kSlowPath;
    bump(kind == RmaKind::fop ? Stat::fops : Stat::cases);
    return MPI_SUCCESS;
}

inline int Window::fast_accumulate(const void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp,
                                   int tcount, MPI_Datatype ttype, MPI_Op op) {
    if (otype != ttype || ocount != tcount || ocount <= 0 || !origin) return kSlowPath;
    const TypeInfo* ti = fast_lookup_type(ttype);
    if (!ti) return kSlowPath;
    if (remote_peer(rank)) return fast_remote_accumulate(origin, *ti, rank, disp, std::size_t(ocount), op);
    const std::uint64_t bytes = std::uint64_t(ocount) * ti->extent;
    std::uint64_t off;
    unsigned char* dst = fast_target(rank, disp, bytes, &off);
    const OpKind k = op_kind_fast(op);
    if (!dst || !op_defined_fast(k, *ti) || !epochs_.direct(rank)) return kSlowPath;
    // Lock-domain types, and large runs of CPU-domain ones: the plain kernel under the stripes.
    if (!cpu_atomics_ || !ti->cpu_domain || bytes >= acc_run_min_)
        return fast_locked(rank, off, dst, *ti, k, origin, std::size_t(ocount), nullptr);
    acc_order();
    AccAtomicsGuard atomics(acc_mine(), state_of(rank), atomics_mask(off, bytes));
    if (!reduce_atomic(k, *ti, dst, origin, std::size_t(ocount), nullptr)) return kSlowPath;
    bump(Stat::accs);
    return MPI_SUCCESS;
}

inline int Window::fast_get_accumulate(const void* origin, int ocount, MPI_Datatype otype, void* result, int rcount,
                                       MPI_Datatype rtype, int rank, MPI_Aint disp, int tcount, MPI_Datatype ttype,
                                       MPI_Op op) {
    if (!result || rtype != ttype || rcount != tcount || tcount <= 0) return kSlowPath;
    if (op != MPI_NO_OP && (otype != ttype || ocount != tcount || !origin)) return kSlowPath;
    const TypeInfo* ti = fast_lookup_type(ttype);
    if (!ti) return kSlowPath;
    std::uint64_t off;
    const std::uint64_t bytes = std::uint64_t(tcount) * ti->extent;
    unsigned char* dst = fast_target(rank, disp, bytes, &off);
    const OpKind k = op_kind_fast(op);
    if (!dst || !op_defined_fast(k, *ti) || !epochs_.direct(rank)) return kSlowPath;
    const void* src = k == OpKind::no_op ? nullptr : origin;
    if (!cpu_atomics_ || !ti->cpu_domain || bytes >= acc_run_min_)
        return fast_locked(rank, off, dst, *ti, k, src, std::size_t(tcount), result);
    acc_order();
    AccAtomicsGuard atomics(acc_mine(), state_of(rank), atomics_mask(off, bytes));
    if (!reduce_atomic(k, *ti, dst, src, std::size_t(tcount), result)) return kSlowPath;
    bump(Stat::accs);
    return MPI_SUCCESS;
}

// The locked fast path (types whose domain is the accumulate lock, windows whose domain it
// is for every type, and large runs of CPU-domain types): the stripes covering the target
// range, the plain kernel, in place. The caller checked what the atomic fast paths check;
// dst is the peer's part (mapped: fast_target found it in the node segment) at offset off,
// and the stripes are the peer's state words, as accumulate_locked_in_place takes them
// (same mask, same words: origins on either path exclude each other). A CPU-domain type's
// run also excludes the CPU-atomic ops on its stripes (acc_run_lock).
inline int Window::fast_locked(int rank, std::uint64_t off, unsigned char* dst, const TypeInfo& ti, OpKind op,
                               const void* origin, std::size_t n, void* result) {
    if (net_) return kSlowPath;  // the stripes are the network's (SplitTransport)
    acc_order();
    std::uint64_t* const state = state_of(rank);
    const std::uint64_t mask = acc_stripe_mask(acc_stripes_, off, std::uint64_t(n) * ti.extent);
    if (cpu_atomics_ && ti.cpu_domain)
        acc_run_lock(state, mask, acc_readers_);
    else
        acc_stripes_lock(state, mask);
    reduce(op, ti, dst, origin, n, result);
    acc_stripes_unlock(state, mask);
    bump(result && n == 1 ? Stat::fops : Stat::accs);
    return MPI_SUCCESS;
}

inline int Window::fast_flush(int rank) {
    // Under a granted lock_all, or a lock on rank without a Target (Epochs::lock_direct:
    // mapped words, nothing queued), every op to a node peer completed when it was issued
    // or waits in the node transport (its flush); the fence orders it before whatever
    // the caller does next (also loads: a flush followed by a get of another location must
    // not pass the put, as on TSO it could).
    if (static_cast<unsigned>(rank) >= static_cast<unsigned>(nprocs_)) return kSlowPath;  // an error
    if (epochs_.mode() == AccessMode::per_target && epochs_.lock_direct(rank)) return fast_flush_node();
    if (remote_peer(rank) || net_ || epochs_.mode() != AccessMode::lock_all_granted) return kSlowPath;
    return fast_flush_node();
}

inline int Window::fast_flush_all() {
    // The same for every target at once (ARMCI-MPI waits for each non-blocking call with
    // MPI_Win_flush_local_all): on shared memory the transports' flush_all is this fence.
    if (remote_ || epochs_.mode() != AccessMode::lock_all_granted) return kSlowPath;
    return fast_flush_node();
}

inline int Window::fast_flush_node() {
    // Anything queued on a Target (and its error, to report) takes the general path.
    if (epochs_.mode() != AccessMode::per_target && !epochs_.no_open_targets()) return kSlowPath;
    if (!node_tp_->idle()) [[unlikely]] {
        node_tp_->flush_all();
        return node_tp_->failed(PeerRegion{}, "FRMA_Win_flush");
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
