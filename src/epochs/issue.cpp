// issue.cpp — see issue.hpp.
#include "epochs/issue.hpp"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/errors.hpp"
#include "base/stats.hpp"
#include "ops/copy.hpp"
#include "ops/layout.hpp"
#include "ops/path_costs.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/acc_domain.hpp"
#include "transport/shm/served.hpp"

namespace fastrma::detail {

namespace {

// A large or strided op through the peer's served bulk area (served_bulk below), or
// kNotServed: the op goes its usual way.
constexpr int kNotServed = -2;
struct PathTiming;
int served_bulk(const IssueContext& ctx, const Op& op, PathTiming* timing = nullptr);

// Served bulk area or cross-memory attach for a contiguous transfer: ops/path_costs.hpp.
PathCosts g_path_costs;

// What served_bulk decided for a contiguous transfer: cma (the caller times its usual way).
struct PathTiming {
    bool cma = false;
    std::uint64_t t0 = 0;
};

// One post of an op through f (a transport call). The op's first post may be refused
// (*first is then left true and Post::retry returned: nothing of the op was taken); a
// later one is retried until taken — the op has started and goes whole — driving the
// transport's progress meanwhile (an am origin reaps its answers in the retried post).
template <class F>
Post post_piece(const IssueContext& ctx, bool* first, F f) {
    Post p = f();
    if (p == Post::retry && *first) return p;
    for (unsigned spins = 0; p == Post::retry; ++spins) {
        ctx.tp.progress();
        if (spins > 16)
            sched_yield();
        else
            __builtin_ia32_pause();
        p = f();
    }
    *first = false;
    return p;
}

// A post that must be taken (a stripe is held, or the op has started): retried until it is.
template <class F>
Post post_waiting(const IssueContext& ctx, F f) {
    bool first = false;
    return post_piece(ctx, &first, f);
}

// A derived-type put/get (some side not contiguous) as StridedChunks, in O(1) per run of
// equal pieces at fixed steps (layout.hpp):
//  - mapped peer (load/store): copy_strided loops straight into / out of the mapping;
//  - a peer reached by cross-memory attach (it has a CmaBatch), for ops of many pieces: gets
//    read dense spans and scatter here, puts write an iovec a piece (CmaPieces), at once;
//    what the batch holds for the peer moves first;
//  - a peer whose transport takes strided requests (am), a put, or a get of many pieces
//    that the dense span below does not take: transfer_runs;
//  - a peer served by its CPU (am), a get of many pieces whose footprint is dense (data at
//    least a quarter of it, as LockedRuns reads, up to kAmSpanMax) and readable throughout
//    (ctx.gaps_readable: the target's server would fault on a page the user made
//    unreadable inside a create or dynamic window): one contiguous get of
//    the footprint into a buffer, completed here (a flush of the peer), then scattered
//    as from a mapping — one request and one answer instead of one per 256 pieces.
// False when none applies (the op goes the chunk way below).
constexpr std::uint64_t kManyPieces = 64;
constexpr std::uint64_t kAmSpanMax = 4 << 20;

bool many_pieces(const Layout& l, std::uint64_t count) {
    const std::size_t b = l.blocks().size();
    return !l.contiguous() && b != 0 && (b >= kManyPieces || count >= kManyPieces / b);
}

// Moves the op's pieces between local and the target bytes at address base + offset.
void copy_at(const Op& op, bool is_put, void* local, std::uintptr_t base) {
    zip_strided(*op.olay, op.ocount, local, *op.tlay, op.tcount, op.offset, [&](const StridedChunk* c, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            auto* r = reinterpret_cast<unsigned char*>(base + c[i].offset);
            if (c[i].n == 1)
                is_put ? copy_bytes(r, c[i].local, c[i].len) : copy_bytes(c[i].local, r, c[i].len);
            else if (is_put)
                copy_strided(r, c[i].rstride, c[i].local, c[i].lstride, c[i].len, c[i].n);
            else
                copy_strided(c[i].local, c[i].lstride, r, c[i].rstride, c[i].len, c[i].n);
        }
        return true;
    });
}

// A derived put or get to a peer whose transport takes strided requests (am): each run of
// equal pieces at fixed steps (a StridedChunk of n > 1 pieces of at most piece_max bytes) is
// one put_strided / get_strided; the other pieces go as chunks, up to kMaxBatch to a
// put() / get(), in walk order.
int transfer_runs(const IssueContext& ctx, const Op& op, bool is_put, void* local, std::size_t piece_max) {
    Chunk plain[kMaxBatch];
    std::size_t np = 0;
    bool first = true, refused = false;
    auto post = [&](auto f) {
        const Post p = post_piece(ctx, &first, f);
        refused = p == Post::retry;
        return accepted(p);
    };
    auto post_plain = [&] {
        if (np == 0) return true;
        const bool ok =
            post([&] { return is_put ? ctx.tp.put(ctx.peer, plain, np) : ctx.tp.get(ctx.peer, plain, np); });
        np = 0;
        return ok;
    };
    const bool ok = zip_strided(*op.olay, op.ocount, local, *op.tlay, op.tcount, op.offset,
                                [&](const StridedChunk* c, std::size_t n) {
                                    for (std::size_t i = 0; i < n; ++i) {
                                        const StridedChunk& s = c[i];
                                        if (s.n > 1 && s.len <= piece_max) {
                                            if (!post_plain()) return false;
                                            if (!post([&] {
                                                    return is_put ? ctx.tp.put_strided(ctx.peer, s.local, s.lstride,
                                                                                       s.offset, s.rstride, s.len, s.n)
                                                                  : ctx.tp.get_strided(ctx.peer, s.local, s.lstride,
                                                                                       s.offset, s.rstride, s.len, s.n);
                                                }))
                                                return false;
                                            continue;
                                        }
                                        for (std::uint64_t k = 0; k < s.n; ++k) {
                                            if (np == kMaxBatch && !post_plain()) return false;
                                            plain[np++] = Chunk{byte_address(s.local, std::int64_t(k) * s.lstride),
                                                                s.offset + k * std::uint64_t(s.rstride), s.len};
                                        }
                                    }
                                    return true;
                                }) &&
                    post_plain();
    if (refused) return kIssueRetry;
    return ok ? MPI_SUCCESS : MPI_ERR_OTHER;
}

bool transfer_strided(const IssueContext& ctx, const Op& op, bool is_put, void* local, int* rc) {
    if (op.olay->contiguous() && op.tlay->contiguous()) return false;
    const Transport::Caps caps = ctx.tp.caps(ctx.peer);
    if (ctx.peer.mapped && caps.load_store && !ctx.tp.data_must_wait(ctx.peer)) {
        copy_at(op, is_put, local, reinterpret_cast<std::uintptr_t>(ctx.peer.mapped));
        *rc = MPI_SUCCESS;
        return true;
    }
    if (is_put && caps.needs_target_cpu && caps.strided_piece_max && !ctx.batch) {
        *rc = transfer_runs(ctx, op, true, local, caps.strided_piece_max);
        return true;
    }
    const bool many = many_pieces(*op.tlay, op.tcount) || many_pieces(*op.olay, op.ocount);
    if (!many) return false;
    if (caps.needs_target_cpu) {
        const std::uint64_t span = std::uint64_t(op.hi - op.lo);
        if (is_put || !ctx.gaps_readable || op.hi <= op.lo || span > kAmSpanMax || span > 4 * op.bytes) {
            if (is_put || !caps.strided_piece_max || ctx.batch) return false;
            *rc = transfer_runs(ctx, op, false, local, caps.strided_piece_max);  // strided gets, answered packed
            return true;
        }
        // This thread's buffer (kept: a fresh one costs a page fault a page), or, should the
        // flush below ever issue another such get on this thread, one of its own.
        thread_local std::vector<unsigned char> kept;
        thread_local bool kept_busy = false;
        std::vector<unsigned char> own;
        const bool use_kept = !kept_busy;
        std::vector<unsigned char>& buf = use_kept ? kept : own;
        struct Busy {
            bool on;
            ~Busy() {
                if (on) kept_busy = false;
            }
        } busy{use_kept};
        kept_busy = true;
        buf.resize(span);
        const Chunk c{buf.data(), op.offset + std::uint64_t(op.lo), span};
        bool first = true;
        const Post p = post_piece(ctx, &first, [&] { return ctx.tp.get(ctx.peer, &c, 1); });
        if (p == Post::retry) {
            *rc = kIssueRetry;
            return true;
        }
        if (!accepted(p)) {
            *rc = MPI_ERR_OTHER;
            return true;
        }
        if (p == Post::posted) ctx.tp.flush(ctx.peer);  // the span in buf now
        copy_at(op, false, local, reinterpret_cast<std::uintptr_t>(buf.data()) - c.offset);
        if (use_kept && buf.size() > kSpanMax) std::vector<unsigned char>().swap(buf);
        *rc = MPI_SUCCESS;
        return true;
    }
    if (!ctx.batch || ctx.peer.pid <= 0) return false;
    if ((*rc = drain_batch(ctx.batch, ctx.peer.rank))) return true;
    CmaPieces pieces(ctx.peer.pid, ctx.peer.remote_addr, is_put);
    pieces.serve_while_moving(ctx.serve, ctx.serve_arg);
    zip_strided(*op.olay, op.ocount, local, *op.tlay, op.tcount, op.offset, [&](const StridedChunk* c, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) pieces.add(c[i]);
        return true;
    });
    if (int e = pieces.finish())
        *rc = raise(MPI_ERR_OTHER, "a %s to rank %d by cross-memory attach failed: %s (did the process exit?)",
                    is_put ? "put" : "get", ctx.peer.rank, std::strerror(e));
    else
        *rc = MPI_SUCCESS;
    return true;
}

// put/get: chunks contiguous on both sides, in bounded batches (no copy of the data, no
// allocation proportional to it: large derived-type transfers are pipelined).
int transfer_usual(const IssueContext& ctx, const Op& op, bool is_put);
int transfer(const IssueContext& ctx, const Op& op, bool is_put) {
    PathTiming timing;
    if (int rc = served_bulk(ctx, op, &timing); rc != kNotServed) return rc;
    const int rc = transfer_usual(ctx, op, is_put);
    if (timing.cma && rc == MPI_SUCCESS) g_path_costs.record(is_put, op.bytes, false, PathCosts::ticks() - timing.t0);
    return rc;
}

int transfer_usual(const IssueContext& ctx, const Op& op, bool is_put) {
    void* local = is_put ? const_cast<void*>(op.origin) : op.result;
    if (int rc; transfer_strided(ctx, op, is_put, local, &rc)) return rc;
    int rc = MPI_SUCCESS;
    bool first = true, refused = false;
    bool ok =
        zip_chunks(*op.olay, op.ocount, local, *op.tlay, op.tcount, op.offset, [&](const Chunk* c, std::size_t n) {
            if (ctx.batch) {
                bool small = true;
                for (std::size_t i = 0; i < n && small; ++i) small = c[i].len <= ctx.batch_max;
                if (small) {
                    for (std::size_t i = 0; i < n; ++i) ctx.batch->transfer(is_put, c[i].offset, c[i].local, c[i].len);
                    first = false;
                    return true;
                }
                if ((rc = drain_batch(ctx.batch, ctx.peer.rank))) return false;  // in order behind them
            }
            const Post p = post_piece(ctx, &first,
                                      [&] { return is_put ? ctx.tp.put(ctx.peer, c, n) : ctx.tp.get(ctx.peer, c, n); });
            refused = p == Post::retry;
            return accepted(p);
        });
    if (rc) return rc;
    if (refused) return kIssueRetry;
    return ok ? MPI_SUCCESS : MPI_ERR_OTHER;
}

// A small accumulate-class op (no compare) on one contiguous run of a type without holes,
// to an unmapped peer: into its batch, applied at the next completion point (cma_batch.hpp).
bool batch_accumulate(const IssueContext& ctx, const Op& op) {
    if (!ctx.batch || op.bytes == 0 || op.bytes > ctx.batch_max) return false;
    const TypeInfo& ti = *op.type;
    auto plain = [&](const std::shared_ptr<const Layout>& l) { return l && l->contiguous() && l->basic() == &ti; };
    if (ti.size != ti.extent || !plain(op.tlay) || op.lo != 0) return false;
    const bool reads = op.op != MPI_NO_OP, fetches = op.kind != RmaKind::acc;
    if ((reads && !plain(op.olay)) || (fetches && !plain(op.rlay))) return false;
    ctx.batch->acc(op.offset, op.op, ti, op.bytes / ti.size, reads ? op.origin : nullptr,
                   fetches ? op.result : nullptr);
    return true;
}

// ---- acc_locked: the target's striped accumulate lock (transport/shm/acc_domain.hpp) ----

class StripeGuard {
public:
    // run: a plain run of a CPU-domain type on a CPU-domain window, which also excludes the
    // CPU-atomic ops on the stripes (acc_run_lock).
    StripeGuard(const IssueContext& ctx, std::uint64_t offset, std::uint64_t bytes, bool run = false)
        : ctx_(ctx), mask_(acc_stripe_mask(ctx.acc_stripes, offset, bytes)) {
        if (ctx.peer.state) {  // mapped state words: CPU atomics
            if (run)
                acc_run_lock(ctx.peer.state, mask_, ctx.acc_readers);
            else
                acc_stripes_lock(ctx.peer.state, mask_);
            return;
        }
        for (std::uint64_t m = mask_; m; m &= m - 1) {  // ascending order: no deadlock between origins
            const std::size_t w = stripe_word(__builtin_ctzll(m));
            take_stripe([&] { return ctx_.tp.atomic8(ctx_.peer, w, AtomicOp::compare_swap, 1, 0) == 0; },
                        [] { return false; });  // (a holder on another node: no pid to watch)
        }
    }
    ~StripeGuard() {
        if (ctx_.peer.state) {
            acc_stripes_unlock(ctx_.peer.state, mask_);
            return;
        }
        // What was written under the stripes is complete at the target before they go (a
        // transport whose puts complete at a flush: ofi).
        ctx_.tp.flush(ctx_.peer);
        for (std::uint64_t m = mask_; m; m &= m - 1)
            ctx_.tp.atomic8(ctx_.peer, stripe_word(__builtin_ctzll(m)), AtomicOp::swap, 0);
    }

private:
    const IssueContext& ctx_;
    const std::uint64_t mask_;
};

// The locked path to an unmapped peer (cross-memory attach, or a network without this
// type's atomics): the runs of one op are gathered, under the stripes of the whole op, and
// moved in groups — one transport get of a group's bytes, the kernels applied here, one put
// of its runs back — instead of a get and a put per run (a vector of 65,530 ints was
// 131,060 syscalls). A group whose runs lie densely in the target is read as one span
// (gap bytes are read, never written: another origin may put there meanwhile).
class LockedRuns {
public:
    LockedRuns(const IssueContext& ctx, const Op& op, const TypeInfo& ti)
        : ctx_(ctx), op_(op), ti_(ti), el_(predefined_layout(ti)) {}
    // One run of n basic elements at target offset toff: origin elements at src (null for
    // MPI_NO_OP), old values to res (may be null).
    int add(const void* src, void* res, std::uint64_t toff, std::uint64_t n) {
        runs_.push_back({src, res, toff, n});
        bytes_ += n * ti_.extent;
        if (runs_.size() < kGroupRuns && bytes_ < kGroupBytes) return MPI_SUCCESS;
        return flush();
    }
    int flush() {
        if (runs_.empty()) return MPI_SUCCESS;
        std::uint64_t lo = runs_[0].toff, hi = lo;
        for (const Run& r : runs_) {
            lo = std::min(lo, r.toff);
            hi = std::max(hi, r.toff + r.n * ti_.extent);
        }
        const bool span = hi - lo <= std::max<std::uint64_t>(4 * bytes_, 4096) && hi - lo <= kSpanMax;
        std::size_t at = 0;
        for (Run& r : runs_) {  // where each run sits in buf_
            r.at = span ? std::size_t(r.toff - lo) : at;
            at += r.n * ti_.extent;
        }
        buf_.resize(span ? std::size_t(hi - lo) : at);
        int rc = span ? move_span(lo) : move_runs(false);
        if (!rc) {
            for (const Run& r : runs_) reduce(op_.op, ti_, buf_.data() + r.at, r.src, r.n, r.res);
            // (the put completes before the stripes go: ~StripeGuard)
            if (op_.op != MPI_NO_OP) rc = move_runs(true);
        }
        runs_.clear();
        bytes_ = 0;
        return rc;
    }

private:
    struct Run {
        const void* src;
        void* res;
        std::uint64_t toff, n;
        std::size_t at = 0;
    };
    static constexpr std::size_t kGroupRuns = 8192, kGroupBytes = 256 * 1024, kSpanMax = 4 << 20;
    static constexpr std::size_t kChunksPerCall = 1024;  // IOV_MAX

    int move_span(std::uint64_t lo) {
        chunks_.assign(1, Chunk{buf_.data(), lo, buf_.size()});
        return send_chunks(false);
    }
    // Only data bytes move (pair types keep their holes: the chunk list of a pair run skips them).
    int move_runs(bool put) {
        chunks_.clear();
        for (const Run& r : runs_)
            zip_chunks(el_, r.n, buf_.data() + r.at, el_, r.n, r.toff, [&](const Chunk* c, std::size_t k) {
                chunks_.insert(chunks_.end(), c, c + k);
                return true;
            });
        return send_chunks(put);
    }
    int send_chunks(bool put) {
        bool posted = false;
        for (std::size_t i = 0; i < chunks_.size(); i += kChunksPerCall) {
            const std::size_t k = std::min(kChunksPerCall, chunks_.size() - i);
            const Post p = post_waiting(ctx_, [&] {  // under the stripes: a retry is waited out
                return put ? ctx_.tp.put(ctx_.peer, chunks_.data() + i, k)
                           : ctx_.tp.get(ctx_.peer, chunks_.data() + i, k);
            });
            if (!accepted(p)) return MPI_ERR_OTHER;
            posted = posted || p == Post::posted;
        }
        if (posted && !put) ctx_.tp.flush(ctx_.peer);  // the old values in buf_ now
        return MPI_SUCCESS;
    }

    const IssueContext& ctx_;
    const Op& op_;
    const TypeInfo& ti_;
    const Layout& el_;
    std::vector<Run> runs_;
    std::size_t bytes_ = 0;
    std::vector<unsigned char> buf_;
    std::vector<Chunk> chunks_;
};

// Gathers the element zipper's runs into groups of equal runs at fixed steps on every side
// (origin, result, target), so that one kernel call applies a group: a vector of 65,530
// single ints is one group, not 65,530 dispatches. add() extends the open group or hands it
// to apply (then starts a new one); flush() hands the last. Runs keep their order.
class StridedRuns {
public:
    struct Group {
        const void* src;
        void* res;
        std::uint64_t toff, n, pieces;
        RunStrides st;  // st.dst: the target step
    };
    template <class Apply>
    void add(const void* src, void* res, std::uint64_t toff, std::uint64_t n, Apply&& apply) {
        Group& g = g_;
        if (g.pieces != 0 && n == g.n) {
            const std::int64_t ds = diff(src, g.src), dr = diff(res, g.res), dt = std::int64_t(toff - g.toff);
            if (g.pieces == 1) {
                g.st = RunStrides{dt, ds, dr};
                g.pieces = 2;
                return;
            }
            const std::int64_t k = std::int64_t(g.pieces);
            if (dt == k * g.st.dst && ds == k * g.st.src && dr == k * g.st.old_out) {
                ++g.pieces;
                return;
            }
        }
        flush(apply);
        g = Group{src, res, toff, n, 1, RunStrides{}};
    }
    template <class Apply>
    void flush(Apply&& apply) {
        if (g_.pieces != 0) apply(static_cast<const Group&>(g_));
        g_.pieces = 0;
    }

private:
    static std::int64_t diff(const void* a, const void* b) {
        return std::int64_t(reinterpret_cast<std::uintptr_t>(a) - reinterpret_cast<std::uintptr_t>(b));
    }
    Group g_{nullptr, nullptr, 0, 0, 0, RunStrides{}};
};

// The target's CPU (acc_am) or the network (acc_native) applies each run: the op goes as
// runs (or strided pieces) to the transport.
int accumulate_remote(const IssueContext& ctx, const Op& op) {
    const TypeInfo& ti = *op.type;
    // acc_am: the target runs each run through its own accumulate path (one atomicity
    // domain with its local origins). acc_native: the network applies each run with its
    // own element atomics (every op on this type goes there, the window's own too).
    const int kind = int(op.kind), opid = int(op_kind(op.op)), tid = ti.id;
    // Runs up to 256 KiB: a large run travels as a header plus the origin data straight
    // from the caller's buffer (the am transport's accumulate), its old values as one answer,
    // and consecutive runs pipeline (the target applies one while the next arrives;
    // the run size that did best: docs/performance.md).
    const std::uint64_t max_run = std::max<std::uint64_t>(1, (256 * 1024) / ti.extent);
    bool failed = false, first = true, refused = false;
    auto send = [&](const void* src, void* res, std::uint64_t toff, std::uint64_t n) {
        const Post p = post_piece(ctx, &first, [&] {
            return ctx.tp.accumulate(ctx.peer, kind, opid, tid, toff, n, ti.extent, src, nullptr, res);
        });
        refused = p == Post::retry;
        failed = !accepted(p);
        return !failed;
    };
    // A plain accumulate of a type without holes whose transport takes strided
    // accumulates (am): the layout walk as StridedChunks; a run of equal pieces (n > 1,
    // at most strided_piece_max bytes each) is one accumulate_strided, other pieces go
    // as runs as below.
    const std::size_t piece_max = ctx.tp.caps(ctx.peer).strided_piece_max;
    auto plain = [&](const std::shared_ptr<const Layout>& l) { return l && l->basic() == &ti; };
    if (piece_max && op.kind == RmaKind::acc && op.op != MPI_NO_OP && ti.size == ti.extent && plain(op.olay) &&
        plain(op.tlay) && !ctx.tp.native_type(ti.id)) {
        zip_strided(*op.olay, op.ocount, const_cast<void*>(op.origin), *op.tlay, op.tcount, op.offset,
                    [&](const StridedChunk* c, std::size_t n) {
                        for (std::size_t i = 0; i < n; ++i) {
                            const StridedChunk& s = c[i];
                            const std::uint64_t elems = s.len / ti.extent;
                            if (s.n > 1 && s.len <= piece_max) {
                                const Post p = post_piece(ctx, &first, [&] {
                                    return ctx.tp.accumulate_strided(ctx.peer, kind, opid, tid, s.offset, s.rstride,
                                                                     elems, ti.extent, s.local, s.lstride, s.n);
                                });
                                refused = p == Post::retry;
                                failed = !accepted(p);
                                if (failed) return false;
                                continue;
                            }
                            for (std::uint64_t k = 0; k < s.n; ++k)
                                for (std::uint64_t e = 0; e < elems; e += max_run) {
                                    const void* src = byte_address(
                                        s.local, std::int64_t(k) * s.lstride + std::int64_t(e * ti.extent));
                                    if (!send(src, nullptr, s.offset + k * std::uint64_t(s.rstride) + e * ti.extent,
                                              std::min(max_run, elems - e)))
                                        return false;
                                }
                        }
                        return true;
                    });
    } else if (piece_max && op.kind == RmaKind::get_acc && ti.size == ti.extent && plain(op.tlay) && plain(op.rlay) &&
               (op.op == MPI_NO_OP || plain(op.olay)) && !ctx.tp.native_type(ti.id)) {
        // A get_accumulate (MPI_NO_OP too) of such a type: the sides (origin unless
        // NO_OP, result, target) walked as byte pieces, as the mapped path below walks
        // them; equal pieces at fixed steps on every side (k > 1, at most piece_max bytes
        // each) are one get_accumulate_strided, other pieces go as runs.
        const bool reads = op.op != MPI_NO_OP;
        ByteCursor o, r(*op.rlay, op.rcount), t(*op.tlay, op.tcount);
        if (reads) o = ByteCursor(*op.olay, op.ocount);
        while (!failed && !t.done() && !r.done() && !(reads && o.done())) {
            std::uint64_t len = std::min(t.avail(), r.avail());
            if (reads) len = std::min(len, o.avail());
            std::int64_t os = 0, rs = 0, ts = 0;
            std::uint64_t k = std::min(t.regular(len, &ts), r.regular(len, &rs));
            if (reads) k = std::min(k, o.regular(len, &os));
            const void* src = reads ? byte_address(op.origin, o.offset()) : nullptr;
            void* res = byte_address(op.result, r.offset());
            const std::uint64_t toff = op.offset + std::uint64_t(t.offset());
            const std::uint64_t elems = len / ti.extent;
            if (k > 1 && len <= piece_max) {
                const Post p = post_piece(ctx, &first, [&] {
                    return ctx.tp.get_accumulate_strided(ctx.peer, kind, opid, tid, toff, ts, elems, ti.extent, src, os,
                                                         res, rs, k);
                });
                refused = p == Post::retry;
                failed = !accepted(p);
            } else {
                for (std::uint64_t j = 0; j < k && !failed; ++j)
                    for (std::uint64_t e = 0; e < elems && !failed; e += max_run) {
                        const std::int64_t at = std::int64_t(e * ti.extent);
                        send(reads ? byte_address(src, std::int64_t(j) * os + at) : nullptr,
                             byte_address(res, std::int64_t(j) * rs + at), toff + j * std::uint64_t(ts) + e * ti.extent,
                             std::min(max_run, elems - e));
                    }
            }
            t.skip(k, len);
            r.skip(k, len);
            if (reads) o.skip(k, len);
        }
    } else if (op.op == MPI_NO_OP) {
        zip_elements(
            *op.rlay, op.rcount, op.result, *op.tlay, op.tcount, op.offset,
            [&](const void* res, std::uint64_t toff, std::uint64_t n) {
                return send(nullptr, const_cast<void*>(res), toff, n);
            },
            max_run);
    } else if (op.kind != RmaKind::acc) {
        zip_elements(*op.olay, op.ocount, op.origin, *op.rlay, op.rcount, op.result, *op.tlay, op.tcount, op.offset,
                     send, max_run);
    } else {
        zip_elements(
            *op.olay, op.ocount, op.origin, *op.tlay, op.tcount, op.offset,
            [&](const void* src, std::uint64_t toff, std::uint64_t n) { return send(src, nullptr, toff, n); }, max_run);
    }
    if (refused) return kIssueRetry;
    return failed ? raise(MPI_ERR_OTHER, "accumulate: the target did not take the request") : MPI_SUCCESS;
}

// The runs applied here: on a mapped peer by CPU atomics or plain runs under the stripes
// (the CPU domain), else under the target's stripes held for the whole op (the lock domain).
int accumulate_here(const IssueContext& ctx, const Op& op) {
    const TypeInfo& ti = *op.type;
    const bool native = ctx.cpu_atomics && ctx.peer.mapped && ti.cpu_domain;
    const OpKind opk = op_kind(op.op);
    // Runs are bounded so that the locked path's bounce buffer stays small.
    const std::uint64_t max_run = std::max<std::uint64_t>(1, (64 * 1024) / ti.extent);
    LockedRuns gathered(ctx, op, ti);
    int rc = MPI_SUCCESS;
    // A mapped peer: the runs come in StridedRuns groups (equal runs at fixed steps on every
    // side: a vector's or an indexed type's blocks), each applied by one kernel call.
    auto apply = [&](const StridedRuns::Group& g) {
        unsigned char* dst = ctx.peer.mapped + g.toff;
        std::uint64_t lo = 0, hi = 0;
        if (native) {
            const std::int64_t last = std::int64_t(g.pieces - 1) * g.st.dst;
            lo = g.toff + std::uint64_t(std::min<std::int64_t>(0, last));
            hi = g.toff + std::uint64_t(std::max<std::int64_t>(0, last)) + g.n * ti.extent;
        }
        if (native && ctx.acc_mine && g.n * g.pieces * ti.extent < ctx.acc_run_min) {
            AccAtomicsGuard atomics(ctx.acc_mine, ctx.peer.state, acc_stripe_mask(ctx.acc_stripes, lo, hi - lo));
            if (reduce_atomic_strided(opk, ti, dst, g.src, g.n, g.pieces, g.st, g.res)) return;
        }
        // A plain run of a CPU-domain type (large, or not natively atomic here: a misaligned
        // address, the same for every origin), under the stripes of the group's footprint that
        // also exclude CPU-atomic ops; a lock-domain type: the whole op's stripes are held.
        std::unique_ptr<StripeGuard> guard;
        if (native) guard = std::make_unique<StripeGuard>(ctx, lo, hi - lo, true);
        reduce_strided(opk, ti, dst, g.src, g.n, g.pieces, g.st, g.res);
    };
    StridedRuns groups;
    auto run = [&](const void* src, void* res, std::uint64_t toff, std::uint64_t n) {
        if (!ctx.peer.mapped) {
            rc = gathered.add(src, res, toff, n);
            return rc == MPI_SUCCESS;
        }
        groups.add(src, res, toff, n, apply);
        return true;
    };
    // The locked path holds the stripes of the whole footprint for the whole op, so a
    // multi-element accumulate is not interleaved element by element with another.
    std::unique_ptr<StripeGuard> whole;
    if (!native)
        whole = std::make_unique<StripeGuard>(ctx, op.offset + std::uint64_t(op.lo), std::uint64_t(op.hi - op.lo));
    const bool has_result = op.kind != RmaKind::acc;
    bool ok;
    // A type without holes on a mapped peer: the sides (origin unless NO_OP, result when
    // fetching, target) are walked as byte pieces, and equal pieces at fixed steps on every
    // side come out in O(1) a run (ByteCursor::regular / skip, as ChunkZipper::next_strided;
    // pieces are whole elements, as blocks are), one kernel call each.
    if (ctx.peer.mapped && ti.size == ti.extent) {
        const bool reads = op.op != MPI_NO_OP;
        ok = (!reads || op.olay->basic() == &ti) && (!has_result || op.rlay->basic() == &ti) && op.tlay->basic() == &ti;
        ByteCursor o, r, t(*op.tlay, op.tcount);
        if (reads) o = ByteCursor(*op.olay, op.ocount);
        if (has_result) r = ByteCursor(*op.rlay, op.rcount);
        while (ok && !t.done() && !(reads && o.done()) && !(has_result && r.done())) {
            std::uint64_t len = t.avail();
            if (reads) len = std::min(len, o.avail());
            if (has_result) len = std::min(len, r.avail());
            std::int64_t os = 0, rs = 0, ts = 0;
            std::uint64_t k = t.regular(len, &ts);
            if (reads) k = std::min(k, o.regular(len, &os));
            if (has_result) k = std::min(k, r.regular(len, &rs));
            apply(StridedRuns::Group{reads ? byte_address(op.origin, o.offset()) : nullptr,
                                     has_result ? byte_address(op.result, r.offset()) : nullptr,
                                     op.offset + std::uint64_t(t.offset()), len / ti.extent, k,
                                     RunStrides{ts, os, rs}});
            t.skip(k, len);
            if (reads) o.skip(k, len);
            if (has_result) r.skip(k, len);
        }
    } else if (op.op == MPI_NO_OP) {  // read only: (result, target)
        ok = zip_elements(
            *op.rlay, op.rcount, op.result, *op.tlay, op.tcount, op.offset,
            [&](const void* res, std::uint64_t toff, std::uint64_t n) {
                return run(nullptr, const_cast<void*>(res), toff, n);
            },
            max_run);
    } else if (has_result) {
        ok = zip_elements(
            *op.olay, op.ocount, op.origin, *op.rlay, op.rcount, op.result, *op.tlay, op.tcount, op.offset,
            [&](const void* src, void* res, std::uint64_t toff, std::uint64_t n) { return run(src, res, toff, n); },
            max_run);
    } else {
        ok = zip_elements(
            *op.olay, op.ocount, op.origin, *op.tlay, op.tcount, op.offset,
            [&](const void* src, std::uint64_t toff, std::uint64_t n) { return run(src, nullptr, toff, n); }, max_run);
    }
    if (!rc && ok) groups.flush(apply);
    if (!rc && ok) rc = gathered.flush();
    if (rc) return rc;
    return ok ? MPI_SUCCESS : raise(MPI_ERR_INTERN, "accumulate: layouts do not share a basic type");
}

// Accumulate, get_accumulate, fetch_and_op: element-wise atomic per basic element.
int accumulate(const IssueContext& ctx, const Op& op) {
    if (ctx.tp.caps(ctx.peer).needs_target_cpu || ctx.tp.native_type(op.type->id)) return accumulate_remote(ctx, op);
    return accumulate_here(ctx, op);
}

// ---- served bulk: large and strided ops moved by the target's CPU (served.hpp) ----

// One run of the op's walk: n pieces of `piece` bytes at target offset toff, tstride apart;
// origin data at src, sstride apart (null: none), results at res, rstride apart (null: none).
struct BulkPiece {
    std::uint64_t toff;
    std::int64_t tstride;
    std::uint64_t piece, n;
    const unsigned char* src;
    std::int64_t sstride;
    unsigned char* res;
    std::int64_t rstride;
};
// An op whose walk has more runs than this (a non-uniform layout) stays on cross-memory attach.
constexpr std::size_t kBulkRuns = 8;
// Strided pieces above this go by cross-memory attach: an iovec each costs little beside
// their bytes there, and the target's CPU would copy them twice.
constexpr std::uint64_t kBulkPieceMax = 1024;
// An op of at least kBulkWaitPieces pieces waits for the peer's beat up to kBulkWaitNsPerPiece
// a piece (a few percent of what cross-memory attach costs it), at most kBulkWaitMaxNs.
constexpr std::uint64_t kBulkWaitPieces = 1024, kBulkWaitNsPerPiece = 64, kBulkWaitMaxNs = 5'000'000;

// The op's walk as at most kBulkRuns runs (put, get, accumulate: zip_strided; get_accumulate:
// the three sides as byte pieces, as the am path walks them). False: more runs, or layouts
// the accumulate kernels do not take as plain elements.
bool bulk_walk(const Op& op, BulkPiece* runs, std::size_t* nruns) {
    *nruns = 0;
    const bool get = op.kind == RmaKind::get;
    const TypeInfo* ti = op.type;
    auto plain = [&](const std::shared_ptr<const Layout>& l) { return l && ti && l->basic() == ti; };
    if (op.kind == RmaKind::acc || op.kind == RmaKind::get_acc) {
        if (!ti || ti->size != ti->extent || !plain(op.tlay)) return false;
        if (op.op != MPI_NO_OP && !plain(op.olay)) return false;
        if (op.kind == RmaKind::acc && op.op == MPI_NO_OP) return false;  // (nothing to do: the usual way)
    }
    if (op.kind != RmaKind::get_acc) {
        void* local = get ? op.result : const_cast<void*>(op.origin);
        return zip_strided(
            *op.olay, op.ocount, local, *op.tlay, op.tcount, op.offset, [&](const StridedChunk* c, std::size_t n) {
                for (std::size_t i = 0; i < n; ++i) {
                    if (*nruns == kBulkRuns) return false;
                    auto* l = static_cast<unsigned char*>(c[i].local);
                    runs[(*nruns)++] = BulkPiece{c[i].offset,       c[i].rstride, c[i].len,          c[i].n,
                                                 get ? nullptr : l, c[i].lstride, get ? l : nullptr, c[i].lstride};
                }
                return true;
            });
    }
    if (!plain(op.rlay)) return false;
    const bool reads = op.op != MPI_NO_OP;
    ByteCursor o, r(*op.rlay, op.rcount), t(*op.tlay, op.tcount);
    if (reads) o = ByteCursor(*op.olay, op.ocount);
    while (!t.done() && !r.done() && !(reads && o.done())) {
        if (*nruns == kBulkRuns) return false;
        std::uint64_t len = std::min(t.avail(), r.avail());
        if (reads) len = std::min(len, o.avail());
        std::int64_t os = 0, rs = 0, ts = 0;
        std::uint64_t k = std::min(t.regular(len, &ts), r.regular(len, &rs));
        if (reads) k = std::min(k, o.regular(len, &os));
        runs[(*nruns)++] =
            BulkPiece{op.offset + std::uint64_t(t.offset()),
                      ts,
                      len,
                      k,
                      reads ? static_cast<const unsigned char*>(byte_address(op.origin, o.offset())) : nullptr,
                      os,
                      static_cast<unsigned char*>(byte_address(op.result, r.offset())),
                      rs};
        t.skip(k, len);
        r.skip(k, len);
        if (reads) o.skip(k, len);
    }
    return true;
}

// What the peer did not take, moved here: puts and gets by cross-memory attach (CmaPieces),
// accumulates under the stripes of the pieces' footprint, read-reduce-written (LockedRuns).
int bulk_fallback(const IssueContext& ctx, const Op& op, const BulkPiece& b) {
    if (op.kind == RmaKind::put || op.kind == RmaKind::get) {
        const bool put = op.kind == RmaKind::put;
        CmaPieces pieces(ctx.peer.pid, ctx.peer.remote_addr, put);
        pieces.serve_while_moving(ctx.serve, ctx.serve_arg);
        pieces.add(StridedChunk{put ? const_cast<unsigned char*>(b.src) : b.res, b.toff, b.piece, b.n,
                                put ? b.sstride : b.rstride, b.tstride});
        if (int e = pieces.finish())
            return raise(MPI_ERR_OTHER, "a %s to rank %d by cross-memory attach failed: %s (did the process exit?)",
                         put ? "put" : "get", ctx.peer.rank, std::strerror(e));
        return MPI_SUCCESS;
    }
    const TypeInfo& ti = *op.type;
    std::uint64_t lo = 0, span = 0;
    if (!strided_footprint(b.toff, b.tstride, b.piece, b.n, &lo, &span))
        return raise(MPI_ERR_RMA_RANGE, "%s at rank %d: bad target footprint", rma_kind_name(op.kind), ctx.peer.rank);
    StripeGuard g(ctx, lo, span);
    LockedRuns runs(ctx, op, ti);
    for (std::uint64_t j = 0; j < b.n; ++j) {
        const std::int64_t k = std::int64_t(j);
        if (int rc = runs.add(b.src ? b.src + k * b.sstride : nullptr, b.res ? b.res + k * b.rstride : nullptr,
                              b.toff + std::uint64_t(k * b.tstride), b.piece / ti.extent))
            return rc;
    }
    return runs.flush();
}

// A put, get, accumulate or get_accumulate to an unmapped node peer whose thread waits in
// MPI, moved through its served bulk area when that wins over cross-memory attach: a
// contiguous op above what the batch (or the slots) takes, puts and gets up to ctx.bulk_max; an op
// of at least kManyPieces pieces of at most kBulkPieceMax bytes in at most kBulkRuns runs of
// equal pieces at fixed steps (a vector, a uniform indexed type, a subarray row). The area
// streams each run in parts (BulkChannel::run); what the peer does not take moves here
// (bulk_fallback). kNotServed: nothing moved, the op goes its usual way.
int served_bulk(const IssueContext& ctx, const Op& op, PathTiming* timing) {
    if (!ctx.bulk_max || ctx.peer.mapped || !ctx.peer.state || ctx.peer.pid <= 0 || op.bytes == 0) return kNotServed;
    if (op.kind != RmaKind::put && op.kind != RmaKind::get && op.kind != RmaKind::acc && op.kind != RmaKind::get_acc)
        return kNotServed;
    const bool contiguous = (!op.olay || op.olay->contiguous()) && op.tlay && op.tlay->contiguous() &&
                            (op.kind != RmaKind::get_acc || (op.rlay && op.rlay->contiguous()));
    // Contiguous puts and gets above what the batch takes (its drain moves a lone piece by
    // this area too: CmaBatch::move_served) up to ctx.bulk_max (one cross-memory-attach
    // iovec is cheaper beyond); accumulates above what one served slot holds (one round of
    // the area beats a round per slot chunk), of any size (cross-memory attach reads and
    // writes them back under the stripes: twice the syscalls; figures in docs/performance.md).
    const bool transfer = op.kind == RmaKind::put || op.kind == RmaKind::get;
    const std::uint64_t small =
        transfer ? std::max<std::uint64_t>(ctx.batch_max, kServedSlots * served::kMaxBytes) : served::kMaxBytes;
    const std::uint64_t cap = transfer ? ctx.bulk_max : ~0ull;
    if (contiguous && (op.bytes <= small || op.bytes > cap)) return kNotServed;
    if (!contiguous && op.bytes < kManyPieces) return kNotServed;
    if (!__atomic_load_n(ctx.peer.state + kServedBulkWord, __ATOMIC_ACQUIRE)) return kNotServed;
    if (contiguous && !served::fresh(ctx.peer.state)) return kNotServed;
    BulkPiece runs[kBulkRuns];
    std::size_t nruns = 0;
    if (!bulk_walk(op, runs, &nruns) || nruns == 0) return kNotServed;
    std::uint64_t pieces = 0;
    for (std::size_t i = 0; i < nruns; ++i) {
        const BulkPiece& b = runs[i];
        if (b.n == 1 ? b.piece > cap : b.piece > kBulkPieceMax) return kNotServed;
        // A get of dense pieces: cross-memory attach reads their span whole (CmaPieces), faster.
        const std::uint64_t step = b.tstride < 0 ? 0 - std::uint64_t(b.tstride) : std::uint64_t(b.tstride);
        if (op.kind == RmaKind::get && b.n > 1 && step <= b.piece + kSpanGapPerPiece) return kNotServed;
        pieces += b.n;
    }
    if (!contiguous && pieces < kManyPieces) return kNotServed;
    const bool timed = contiguous && transfer && timing;
    if (timed && !g_path_costs.serve(op.kind == RmaKind::put, op.bytes)) {
        timing->cma = true;
        timing->t0 = PathCosts::ticks();
        bump(Stat::bulk_declined);
        return kNotServed;
    }
    const std::uint64_t t0 = timed ? PathCosts::ticks() : 0;
    // Behind what this origin batched for the peer (its ops apply in order).
    if (int rc = drain_batch(ctx.batch, ctx.peer.rank)) return rc;
    // An op of many pieces (milliseconds by cross-memory attach, an iovec each) waits a
    // little for the peer's beat, serving its own peers meanwhile: two processes streaming
    // to each other both wait in MPI, and meet here.
    served::BulkChannel ch;
    ch.serve_while_waiting(ctx.serve, ctx.serve_arg);
    const std::uint64_t patience =
        pieces >= kBulkWaitPieces ? std::min(kBulkWaitMaxNs, pieces * kBulkWaitNsPerPiece) : 0;
    if (!ch.claim(ctx.peer.state, patience, patience)) return kNotServed;
    const std::uint64_t unit = transfer ? 1 : op.type->extent;
    const std::uint64_t part = ch.part_bytes() - ch.part_bytes() % unit;
    const bool has_origin =
        op.kind == RmaKind::put || ((op.kind == RmaKind::acc || op.kind == RmaKind::get_acc) && op.op != MPI_NO_OP);
    const bool answers = op.kind == RmaKind::get || op.kind == RmaKind::get_acc;
    int err = MPI_SUCCESS, moved_err = MPI_SUCCESS;  // (the second: a fallback's, already raised)
    auto send = [&](const BulkPiece& b) {
        const served::BulkRun r{int(op.kind),
                                op.type ? int(op_kind(op.op)) : 0,
                                op.type ? int(op.type->id) : 0,
                                b.toff,
                                b.tstride,
                                b.piece,
                                b.n,
                                has_origin};
        const int rc = ch.run(
            r,
            [&](std::uint64_t first, std::uint64_t n, unsigned char* dst) {
                copy_strided(dst, std::int64_t(b.piece), b.src + std::int64_t(first) * b.sstride, b.sstride, b.piece,
                             n);
            },
            [&](std::uint64_t first, std::uint64_t n, const unsigned char* src) {
                if (answers)
                    copy_strided(b.res + std::int64_t(first) * b.rstride, b.rstride, src, std::int64_t(b.piece),
                                 b.piece, n);
            },
            [&](std::uint64_t first, std::uint64_t n) {
                const std::int64_t f = std::int64_t(first);
                BulkPiece rest = b;
                rest.toff = b.toff + std::uint64_t(f * b.tstride);
                rest.n = n;
                if (rest.src) rest.src += f * b.sstride;
                if (rest.res) rest.res += f * b.rstride;
                const int e = bulk_fallback(ctx, op, rest);
                if (e && !moved_err) moved_err = e;
                return e;
            });
        if (rc && !err)
            err = rc == moved_err
                      ? rc
                      : raise(rc, "%s at rank %d: refused by the target", rma_kind_name(op.kind), ctx.peer.rank);
    };
    for (std::size_t i = 0; i < nruns; ++i) {
        const BulkPiece& b = runs[i];
        if (b.n > 1 || b.piece <= part) {
            BulkPiece one = b;
            if (b.n == 1) one.tstride = one.sstride = one.rstride = std::int64_t(b.piece);
            send(one);
            continue;
        }
        // One large contiguous piece: parts of `part` bytes at stride part on every side, then the rest.
        const std::uint64_t k = b.piece / part, rest = b.piece % part;
        const std::int64_t p = std::int64_t(part);
        send(BulkPiece{b.toff, p, part, k, b.src, p, b.res, p});
        if (rest)
            send(BulkPiece{b.toff + k * part, std::int64_t(rest), rest, 1,
                           b.src ? b.src + std::int64_t(k) * p : nullptr, std::int64_t(rest),
                           b.res ? b.res + std::int64_t(k) * p : nullptr, std::int64_t(rest)});
    }
    if (timed && err == MPI_SUCCESS)
        g_path_costs.record(op.kind == RmaKind::put, op.bytes, true, PathCosts::ticks() - t0);
    return err;
}

int compare_and_swap_op(const IssueContext& ctx, const Op& op) {
    const TypeInfo& ti = *op.type;
    if (ctx.tp.caps(ctx.peer).needs_target_cpu || ctx.tp.native_type(ti.id)) {
        const Post p = ctx.tp.accumulate(ctx.peer, int(RmaKind::cas), int(OpKind::replace), ti.id, op.offset, 1,
                                         ti.extent, op.origin, op.compare, op.result);
        if (p == Post::retry) return kIssueRetry;
        return accepted(p) ? MPI_SUCCESS : MPI_ERR_OTHER;
    }
    unsigned char* dst = ctx.peer.mapped ? ctx.peer.mapped + op.offset : nullptr;
    if (ctx.cpu_atomics && dst && ti.cpu_domain && ctx.acc_mine) {
        AccAtomicsGuard atomics(ctx.acc_mine, ctx.peer.state, 1ull << acc_stripe_of(ctx.acc_stripes, op.offset));
        if (compare_and_swap_atomic(ti, dst, op.origin, op.compare, op.result)) return MPI_SUCCESS;
    }
    if (dst) {
        compare_and_swap_locked_in_place(ctx, ti, op.offset, op.origin, op.compare, op.result);
        return MPI_SUCCESS;
    }
    StripeGuard g(ctx, op.offset, ti.extent);
    unsigned char tmp[kMaxTypeExtent];
    Chunk c{tmp, op.offset, ti.size};
    // Under the stripe: a retry is waited out.
    const Post got = post_waiting(ctx, [&] { return ctx.tp.get(ctx.peer, &c, 1); });
    if (!accepted(got)) return MPI_ERR_OTHER;
    if (got == Post::posted) ctx.tp.flush(ctx.peer);
    unsigned char before[kMaxTypeExtent];
    std::memcpy(before, tmp, ti.size);
    compare_and_swap(ti, tmp, op.origin, op.compare, op.result);
    if (std::memcmp(before, tmp, ti.size) != 0 &&
        !accepted(post_waiting(ctx, [&] { return ctx.tp.put(ctx.peer, &c, 1); })))
        return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

}  // namespace

void accumulate_locked_in_place(const IssueContext& ctx, MPI_Op op, const TypeInfo& ti, std::uint64_t toff,
                                const void* src, std::size_t n, void* result, unsigned char* at) {
    StripeGuard g(ctx, toff, std::uint64_t(n) * ti.extent);
    reduce(op, ti, at ? at : ctx.peer.mapped + toff, src, n, result);
}

void accumulate_strided_locked_in_place(const IssueContext& ctx, OpKind op, const TypeInfo& ti, std::uint64_t toff,
                                        std::int64_t stride, std::uint64_t n, std::uint64_t pieces, const void* src,
                                        void* result, bool at_address) {
    if (pieces == 0 || n == 0) return;
    const std::int64_t last = std::int64_t(pieces - 1) * stride;
    const std::uint64_t lo = toff + std::uint64_t(std::min<std::int64_t>(0, last));
    const std::uint64_t hi = toff + std::uint64_t(std::max<std::int64_t>(0, last)) + n * ti.extent;
    StripeGuard g(ctx, lo, hi - lo);
    const std::int64_t run = std::int64_t(n * ti.extent);
    unsigned char* dst = at_address ? reinterpret_cast<unsigned char*>(toff) : ctx.peer.mapped + toff;
    reduce_strided(op, ti, dst, src, n, pieces, RunStrides{stride, src ? run : 0, result ? run : 0}, result);
}

void compare_and_swap_locked_in_place(const IssueContext& ctx, const TypeInfo& ti, std::uint64_t toff,
                                      const void* origin, const void* compare, void* result, unsigned char* at) {
    StripeGuard g(ctx, toff, ti.extent);
    compare_and_swap(ti, at ? at : ctx.peer.mapped + toff, origin, compare, result);
}

// Does op go to the peer's served slots? fetch_and_op / compare_and_swap of one basic
// element; accumulate / get_accumulate of at most the slots' bytes (kServedSlots chunks of
// served::kMaxBytes), one contiguous run of a basic type on every side, while a thread of
// the peer waits in MPI (its beat fresh; a computing peer's accumulates stay batched for
// the drain).
static bool served_here(const IssueContext& ctx, const Op& op) {
    if (ctx.peer.mapped || !ctx.peer.state || !op.type || op.type->size != op.type->extent || op.type->extent > 8)
        return false;
    if (op.kind == RmaKind::fop || op.kind == RmaKind::cas) return true;
    if ((op.kind != RmaKind::acc && op.kind != RmaKind::get_acc) || op.bytes == 0 ||
        op.bytes > kServedSlots * served::kMaxBytes || op.lo != 0)
        return false;
    const TypeInfo& ti = *op.type;
    // More than one chunk: the layouts are the basic type itself, so that a chunk not served
    // is an op of whole layout elements (served_accumulate).
    const bool one = op.bytes <= served::kMaxBytes;
    auto plain = [&](const std::shared_ptr<const Layout>& l) {
        return l && l->contiguous() && l->basic() == &ti && (one || l->size() == ti.size);
    };
    if (!plain(op.tlay) || (op.op != MPI_NO_OP && !plain(op.olay)) || (op.kind == RmaKind::get_acc && !plain(op.rlay)))
        return false;
    return served::fresh(ctx.peer.state);
}

// A contiguous (get_)accumulate through the served slots, in chunks of at most
// served::kMaxBytes (whole elements: 96 is a multiple of every basic extent), all posted,
// then each answer awaited; the peer applies each chunk under its stripes (element-wise
// atomic, as MPI asks; the chunks are disjoint, so their order does not matter). Chunks
// not taken (no free slot, withdrawn, refused) are applied here by cross-memory attach.
static int served_accumulate(const IssueContext& ctx, const Op& op) {
    struct Chunk {
        std::uint64_t off, len;
        served::Posted p;
        bool posted;
    };
    Chunk ch[kServedSlots];
    std::size_t nch = 0;
    const auto* origin = static_cast<const unsigned char*>(op.op == MPI_NO_OP ? nullptr : op.origin);
    for (std::uint64_t off = 0; off < op.bytes; off += served::kMaxBytes) {
        Chunk& c = ch[nch++];
        c.off = off;
        c.len = std::min<std::uint64_t>(served::kMaxBytes, op.bytes - off);
        const served::Request rq{int(op.kind),
                                 int(op_kind(op.op)),
                                 int(op.type->id),
                                 op.offset + off,
                                 c.len,
                                 origin ? origin + off : nullptr,
                                 nullptr};
        c.posted = served::post(ctx.peer.state, rq, &c.p);
    }
    int err = MPI_SUCCESS;
    for (std::size_t i = 0; i < nch; ++i) {
        Chunk& c = ch[i];
        if (nch == 1 && !c.posted) return kNotServed;
        if (c.posted) {
            int rc = MPI_SUCCESS;
            void* res = op.kind == RmaKind::get_acc ? static_cast<unsigned char*>(op.result) + c.off : nullptr;
            const served::Outcome o = served::finish(c.p, res, &rc);
            if (o == served::Outcome::answered) {
                bump(Stat::atomics_served);
                if (rc && !err)
                    err = raise(rc, "%s at rank %d: refused by the target", rma_kind_name(op.kind), ctx.peer.rank);
                continue;
            }
            if (o == served::Outcome::withdrawn) bump(Stat::atomics_withdrawn);
            if (nch == 1) return kNotServed;
        }
        // Not served: this chunk as an op of its own on the cross-memory path.
        Op sub;
        sub.kind = op.kind;
        sub.type = op.type;
        sub.op = op.op;
        sub.olay = op.olay, sub.rlay = op.rlay, sub.tlay = op.tlay;
        sub.ocount = sub.rcount = sub.tcount = c.len / op.type->extent;
        sub.bytes = c.len;
        sub.lo = 0, sub.hi = std::int64_t(c.len);
        sub.origin = origin ? origin + c.off : nullptr;
        sub.result = op.result ? static_cast<unsigned char*>(op.result) + c.off : nullptr;
        sub.offset = op.offset + c.off;
        if (int rc = accumulate(ctx, sub); rc && !err) err = rc;
    }
    return err;
}

int issue_op(const IssueContext& ctx, const Op& op) {
    switch (op.kind) {
    case RmaKind::put:
        return transfer(ctx, op, true);
    case RmaKind::get:
        return transfer(ctx, op, false);
    default:
        break;
    }
    // An accumulate above one slot, or of many pieces, through the peer's bulk area first.
    if (op.kind == RmaKind::acc || op.kind == RmaKind::get_acc)
        if (int rc = served_bulk(ctx, op); rc != kNotServed) return rc;
    // A fetch_and_op, compare_and_swap or small contiguous (get_)accumulate on a node peer
    // reached by cross-memory attach: the peer applies it itself when one of its threads
    // waits in MPI (transport/shm/served.hpp), behind what this origin batched for it (drained first:
    // accumulates from one origin apply in order).
    if (served_here(ctx, op)) {
        if (int rc = drain_batch(ctx.batch, ctx.peer.rank)) return rc;
        if (op.kind == RmaKind::acc || op.kind == RmaKind::get_acc) {
            if (int rc = served_accumulate(ctx, op); rc != kNotServed) return rc;
        } else {
            const served::Request rq{int(op.kind), int(op_kind(op.op)), int(op.type->id),
                                     op.offset,    op.type->size,       op.op == MPI_NO_OP ? nullptr : op.origin,
                                     op.compare};
            int rc = MPI_SUCCESS;
            if (served::try_remote(ctx.peer.state, rq, op.result, &rc))
                return rc ? raise(rc, "%s at rank %d: refused by the target", rma_kind_name(op.kind), ctx.peer.rank)
                          : MPI_SUCCESS;
        }
    }
    if (op.kind != RmaKind::cas && batch_accumulate(ctx, op)) return MPI_SUCCESS;
    // An accumulate that reads and writes the target now: what this origin batched goes first.
    if (int rc = drain_batch(ctx.batch, ctx.peer.rank)) return rc;
    return op.kind == RmaKind::cas ? compare_and_swap_op(ctx, op) : accumulate(ctx, op);
}

}  // namespace fastrma::detail
