// cma_batch.cpp — see cma_batch.hpp.
#include "transport/shm/cma_batch.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/errors.hpp"
#include "base/stats.hpp"
#include "ops/copy.hpp"
#include "ops/layout.hpp"
#include "ops/op.hpp"
#include "ops/reduce.hpp"
#include "transport/shm/acc_domain.hpp"
#include "transport/shm/cma.hpp"
#include "transport/shm/served.hpp"

namespace fastrma::detail {

namespace {
bool overlap(std::uint64_t a, std::size_t alen, std::uint64_t b, std::size_t blen) {
    return a < b + blen && b < a + alen;
}
}  // namespace

CmaBatch::CmaBatch(pid_t pid, std::uint64_t remote_base, std::uint64_t* state, int acc_stripes,
                   std::atomic<int>* pending)
    : pid_(pid), base_(remote_base), state_(state), stripes_(acc_stripes), pending_(pending) {}

CmaBatch::~CmaBatch() {
    for (auto& l : lanes_) delete l.load(std::memory_order_relaxed);
}

namespace {
// Threads take lanes in turn, on their first batched transfer (to any peer, any window).
std::atomic<unsigned> g_next_lane{0};
[[gnu::tls_model("initial-exec")]] thread_local unsigned t_lane = ~0u;  // (one load: see stats.hpp)
}  // namespace

CmaBatch::Lane& CmaBatch::my_lane() {
    if (t_lane == ~0u) t_lane = g_next_lane.fetch_add(1, std::memory_order_relaxed) % kLanes;
    if (Lane* l = lanes_[t_lane].load(std::memory_order_acquire)) return *l;
    std::lock_guard lk(make_mu_);
    Lane* l = lanes_[t_lane].load(std::memory_order_relaxed);
    if (!l) {
        l = new Lane;
        l->index = t_lane;
        lanes_[t_lane].store(l, std::memory_order_release);
    }
    return *l;
}

bool CmaBatch::full(const Buf& b, std::size_t stage_bytes, std::size_t scratch_bytes) {
    return b.count() == kMaxItems || b.staged + stage_bytes > kStageBytes || b.scratched + scratch_bytes > kStageBytes;
}

unsigned char* CmaBatch::stage(Buf& b, const void* src, std::size_t len) {
    if (!b.stage) b.stage = std::make_unique<unsigned char[]>(kStageBytes);
    unsigned char* at = b.stage.get() + b.staged;
    std::memcpy(at, src, len);
    b.staged += len;
    return at;
}

bool CmaBatch::overlaps_acc(const Buf& b, std::uint64_t off, std::size_t len, std::size_t* exact) const {
    // Every queued accumulate that overlaps another covers exactly its bytes (anything else
    // drained first), so the newest overlapping one decides. Outside the span of them all
    // (the common case: a run of accumulates to increasing offsets) nothing to look at.
    if (b.accs.empty() || !overlap(b.acc_lo, std::size_t(b.acc_hi - b.acc_lo), off, len)) return false;
    for (std::size_t i = b.accs.size(); i-- > 0;) {
        const Acc& x = b.accs[i];
        if (!overlap(x.off, x.len, off, len)) continue;
        if (exact) *exact = x.off == off && x.len == len ? i : b.accs.size();
        return true;
    }
    return false;
}

void CmaBatch::put(std::uint64_t off, const void* src, std::size_t len) {
    Lane& l = my_lane();
    l.mu.lock();
    // A put after an accumulate of the same bytes must land after it (puts move first).
    while (overlaps_acc(*l.cur, off, len, nullptr) || full(*l.cur, len, 0)) {
        l.mu.unlock();
        Lane* one = &l;
        drain_lanes(&one, 1);
        l.mu.lock();
    }
    Buf& b = *l.cur;
    unsigned char* at = stage(b, src, len);
    if (!b.put_l) {
        b.put_l = std::make_unique<iovec[]>(kMaxItems);
        b.put_r = std::make_unique<iovec[]>(kMaxItems);
    }
    add(b.put_l.get(), b.put_r.get(), b.nput, off, at, len);
    relist(l);
    l.mu.unlock();
}

void CmaBatch::get(std::uint64_t off, void* dst, std::size_t len) {
    Lane& l = my_lane();
    l.mu.lock();
    while (full(*l.cur, 0, 0)) {
        l.mu.unlock();
        Lane* one = &l;
        drain_lanes(&one, 1);
        l.mu.lock();
    }
    Buf& b = *l.cur;
    if (!b.get_l) {
        b.get_l = std::make_unique<iovec[]>(kMaxItems);
        b.get_r = std::make_unique<iovec[]>(kMaxItems);
    }
    add(b.get_l.get(), b.get_r.get(), b.nget, off, static_cast<unsigned char*>(dst), len);
    relist(l);
    l.mu.unlock();
}

void CmaBatch::acc(std::uint64_t off, MPI_Op op, const TypeInfo& ti, std::size_t n, const void* origin, void* result) {
    const std::size_t len = n * ti.size;
    Lane& l = my_lane();
    // Accumulates other threads queued before this one apply first: their lanes drain now
    // (with ours unlocked). One issued concurrently, unordered with this one, may land on
    // either side of it.
    const std::uint32_t mine = 1u << l.index;
    if (std::uint32_t others = acc_lanes_.load(std::memory_order_acquire) & ~mine) {
        Lane* ls[kLanes];
        unsigned k = 0;
        for (; others; others &= others - 1)
            if (Lane* o = lanes_[__builtin_ctz(others)].load(std::memory_order_acquire)) ls[k++] = o;
        drain_lanes(ls, k);
    }
    l.mu.lock();
    std::size_t same;
    for (;;) {
        const Buf& b = *l.cur;
        same = b.accs.size();
        bool drain_first = full(b, origin ? len : 0, len);
        if (!drain_first && overlaps_acc(b, off, len, &same)) drain_first = same == b.accs.size();
        // An accumulate after a get of the same bytes must not change what the get reads
        // (gets move last).
        for (std::uint32_t i = 0; i < b.nget && !drain_first; ++i)
            drain_first =
                overlap(reinterpret_cast<std::uint64_t>(b.get_r[i].iov_base) - base_, b.get_r[i].iov_len, off, len);
        if (!drain_first) break;
        l.mu.unlock();
        Lane* one = &l;
        drain_lanes(&one, 1);
        l.mu.lock();
    }
    Buf& b = *l.cur;
    Acc x{off, std::uint32_t(len), 0, kNoSrc, op, &ti, n, result};
    if (origin) x.src = std::uint32_t(stage(b, origin, len) - b.stage.get());
    if (same < b.accs.size()) {
        x.scratch = b.accs[same].scratch;  // the same bytes: applied to the same copy, after it
    } else {
        if (!b.scratch) {
            b.scratch = std::make_unique<unsigned char[]>(kStageBytes);
            b.acc_l = std::make_unique<iovec[]>(kMaxItems);
            b.acc_r = std::make_unique<iovec[]>(kMaxItems);
        }
        x.scratch = std::uint32_t(b.scratched);
        add(b.acc_l.get(), b.acc_r.get(), b.nacc_iov, off, b.scratch.get() + b.scratched, len);
        b.scratched += len;
        b.acc_mask |= acc_stripe_mask(stripes_, off, len);
    }
    if (b.accs.empty()) {
        b.acc_lo = off;
        b.acc_hi = off + len;
    } else {
        b.acc_lo = std::min(b.acc_lo, off);
        b.acc_hi = std::max<std::uint64_t>(b.acc_hi, off + len);
    }
    b.accs.push_back(x);
    relist(l);
    l.mu.unlock();
}

void CmaBatch::add(iovec* l, iovec* r, std::uint32_t& k, std::uint64_t off, unsigned char* local, std::size_t len) {
    bump(Stat::cma_batched);
    const std::uint64_t remote = base_ + off;
    if (k && reinterpret_cast<std::uint64_t>(r[k - 1].iov_base) + r[k - 1].iov_len == remote &&
        static_cast<unsigned char*>(l[k - 1].iov_base) + l[k - 1].iov_len == local) {
        r[k - 1].iov_len += len;
        l[k - 1].iov_len += len;
        return;
    }
    l[k] = {local, len};
    r[k] = {reinterpret_cast<void*>(remote), len};
    ++k;
}

void CmaBatch::relist(Lane& l) {
    const std::uint32_t bit = 1u << l.index;
    // The shared words change only when the lane's state does (mirrored in the lane: no
    // load of a line other threads write, per queued operation).
    const bool accs = !l.cur->accs.empty() || (l.moving && l.moving_accs);
    if (accs != l.acc_listed) {
        l.acc_listed = accs;
        if (accs)
            acc_lanes_.fetch_or(bit, std::memory_order_release);
        else
            acc_lanes_.fetch_and(~bit, std::memory_order_release);
    }
    const bool want = l.cur->count() || l.moving || l.err;
    if (want == l.listed) return;
    l.listed = want;
    if (want) {
        due_.fetch_or(bit, std::memory_order_release);
        pending_->fetch_add(1, std::memory_order_release);
    } else {
        due_.fetch_and(~bit, std::memory_order_release);
        pending_->fetch_sub(1, std::memory_order_release);
    }
}

void CmaBatch::apply_accs(Buf& b, int* err) {
    // Under the stripes of every queued accumulate: read the target bytes, apply in issue
    // order, write them back — atomic against every other origin's and the owner's
    // accumulates (they take the same stripes), as the one-at-a-time path is.
    acc_stripes_lock(state_, b.acc_mask);
    bool ok = cma_vec(pid_, false, b.acc_l.get(), b.acc_r.get(), b.nacc_iov);
    bool writes = false;
    if (ok) {
        for (const Acc& x : b.accs) {
            reduce(x.op, *x.ti, b.scratch.get() + x.scratch, x.src == kNoSrc ? nullptr : b.stage.get() + x.src, x.n,
                   x.result);
            writes = writes || x.op != MPI_NO_OP;
        }
        if (writes) ok = cma_vec(pid_, true, b.acc_l.get(), b.acc_r.get(), b.nacc_iov);
    }
    const int e = errno;
    acc_stripes_unlock(state_, b.acc_mask);
    if (!ok && !*err) *err = e ? e : EFAULT;
    bump(Stat::cma_drains, 1 + writes);
}

void CmaBatch::Buf::reset() {
    nput = nget = nacc_iov = 0;
    staged = scratched = 0;
    accs.clear();
    acc_mask = 0;
}

namespace {
// A drain of several lanes gathers their iovec lists into one syscall a side.
thread_local std::unique_ptr<iovec[]> t_gather;  // 4 lists of kLanes * kMaxItems
}  // namespace

void CmaBatch::move(Buf* const* bs, unsigned n, int* err) {
    // Puts, accumulates, gets: of two conflicting accesses to the same bytes in one epoch
    // MPI defines the outcome only for accumulates (in issue order, kept above); a put after
    // an accumulate or an accumulate after a get of the same bytes drained first.
    const iovec *pl = bs[0]->put_l.get(), *pr = bs[0]->put_r.get(), *gl = bs[0]->get_l.get(), *gr = bs[0]->get_r.get();
    std::size_t np = bs[0]->nput, ng = bs[0]->nget;
    if (n > 1) {  // (cma_vec splits lists longer than a syscall takes)
        constexpr std::size_t kAll = kLanes * kMaxItems;
        if (!t_gather) t_gather = std::make_unique<iovec[]>(4 * kAll);
        iovec* const g = t_gather.get();
        np = ng = 0;
        for (unsigned i = 0; i < n; ++i) {
            const Buf& b = *bs[i];
            std::copy_n(b.put_l.get(), b.nput, g + np);
            std::copy_n(b.put_r.get(), b.nput, g + kAll + np);
            np += b.nput;
            std::copy_n(b.get_l.get(), b.nget, g + 2 * kAll + ng);
            std::copy_n(b.get_r.get(), b.nget, g + 3 * kAll + ng);
            ng += b.nget;
        }
        pl = g, pr = g + kAll, gl = g + 2 * kAll, gr = g + 3 * kAll;
    }
    bool accs = false;
    for (unsigned i = 0; i < n; ++i) accs = accs || !bs[i]->accs.empty();
    if (!accs && move_served(pl, pr, np, gl, gr, ng, err)) return;
    if (np && !cma_vec(pid_, true, pl, pr, np) && !*err) *err = errno ? errno : EFAULT;
    for (unsigned i = 0; i < n; ++i)
        if (!bs[i]->accs.empty()) apply_accs(*bs[i], err);
    if (ng && !cma_vec(pid_, false, gl, gr, ng) && !*err) *err = errno ? errno : EFAULT;
    bump(Stat::cma_drains, (np != 0) + (ng != 0));
}

bool CmaBatch::move_served(const iovec* pl, const iovec* pr, std::size_t np, const iovec* gl, const iovec* gr,
                           std::size_t ng, int* err) {
    // Pieces that fit the slots in chunks of at most served::kMaxBytes (a piece may take
    // several), no get of bytes a put of this drain writes (the peer serves its slots in no
    // particular order), and a thread of the peer waiting in MPI.
    if (!state_ || np + ng > kServedSlots) return false;
    // One piece above a slot (a lone put or get before its flush): one round of the peer's
    // bulk area instead of a round per chunk.
    if (np + ng == 1 && (np ? pr[0] : gr[0]).iov_len > served::kMaxBytes &&
        move_bulk(np == 1, np ? pl[0] : gl[0], np ? pr[0] : gr[0], err))
        return true;
    auto chunks = [](std::size_t len) { return (len + served::kMaxBytes - 1) / served::kMaxBytes; };
    std::size_t nchunks = 0;
    for (std::size_t i = 0; i < np; ++i) nchunks += chunks(pr[i].iov_len);
    for (std::size_t j = 0; j < ng; ++j) nchunks += chunks(gr[j].iov_len);
    if (nchunks > kServedSlots) return false;
    for (std::size_t j = 0; j < ng; ++j) {
        for (std::size_t i = 0; i < np; ++i)
            if (overlap(reinterpret_cast<std::uint64_t>(pr[i].iov_base), pr[i].iov_len,
                        reinterpret_cast<std::uint64_t>(gr[j].iov_base), gr[j].iov_len))
                return false;
    }
    if (!served::fresh(state_)) return false;
    // Every piece posted first, then each answer awaited: the peer serves them in one pass.
    // A piece that found no free slot, or was withdrawn or refused, moves by cross-memory
    // attach below (a withdrawn one was never applied: exactly one side applies it).
    struct Piece {
        bool put;
        iovec l, r;
        served::Posted p;
    };
    Piece posted[kServedSlots];
    iovec left[4][kServedSlots];  // put local, put remote, get local, get remote
    std::size_t k = 0, lp = 0, lg = 0;
    auto leave = [&](bool put, const iovec& l, const iovec& r) {
        std::size_t& at = put ? lp : lg;
        left[put ? 0 : 2][at] = l;
        left[put ? 1 : 3][at++] = r;
    };
    auto post = [&](bool put, const iovec& l, const iovec& r) {
        const served::Request rq{put ? int(RmaKind::put) : int(RmaKind::get),
                                 0,
                                 0,
                                 reinterpret_cast<std::uint64_t>(r.iov_base) - base_,
                                 r.iov_len,
                                 put ? l.iov_base : nullptr,
                                 nullptr};
        Piece& x = posted[k];
        if (!served::post(state_, rq, &x.p)) return leave(put, l, r);
        x.put = put, x.l = l, x.r = r;
        ++k;
    };
    auto post_chunks = [&](bool put, const iovec& l, const iovec& r) {  // (l and r: the same length)
        for (std::size_t off = 0; off < r.iov_len; off += served::kMaxBytes) {
            const std::size_t len = std::min(served::kMaxBytes, r.iov_len - off);
            post(put, iovec{static_cast<char*>(l.iov_base) + off, len},
                 iovec{static_cast<char*>(r.iov_base) + off, len});
        }
    };
    for (std::size_t i = 0; i < np; ++i) post_chunks(true, pl[i], pr[i]);
    for (std::size_t j = 0; j < ng; ++j) post_chunks(false, gl[j], gr[j]);
    for (std::size_t i = 0; i < k; ++i) {
        Piece& x = posted[i];
        int rc = MPI_SUCCESS;
        const served::Outcome o = served::finish(x.p, x.put ? nullptr : x.l.iov_base, &rc);
        if (o == served::Outcome::answered && rc == MPI_SUCCESS) {
            bump(Stat::transfers_served);
            continue;
        }
        if (o == served::Outcome::withdrawn) bump(Stat::transfers_withdrawn);
        leave(x.put, x.l, x.r);
    }
    if (lp && !cma_vec(pid_, true, left[0], left[1], lp) && !*err) *err = errno ? errno : EFAULT;
    if (lg && !cma_vec(pid_, false, left[2], left[3], lg) && !*err) *err = errno ? errno : EFAULT;
    bump(Stat::cma_drains, (lp != 0) + (lg != 0));
    return true;
}

bool CmaBatch::move_bulk(bool put, const iovec& l, const iovec& r, int* err) {
    served::BulkChannel ch;
    if (!ch.claim(state_) || r.iov_len > ch.part_bytes()) return false;
    const std::uint64_t len = r.iov_len;
    const served::BulkRun run{put ? int(RmaKind::put) : int(RmaKind::get),
                              0,
                              0,
                              reinterpret_cast<std::uint64_t>(r.iov_base) - base_,
                              std::int64_t(len),
                              len,
                              1,
                              put};
    const int rc = ch.run(
        run, [&](std::uint64_t, std::uint64_t, unsigned char* dst) { std::memcpy(dst, l.iov_base, len); },
        [&](std::uint64_t, std::uint64_t, const unsigned char* src) {
            if (!put) std::memcpy(l.iov_base, src, len);
        },
        [&](std::uint64_t, std::uint64_t) {  // not taken: by cross-memory attach
            bump(Stat::cma_drains);
            if (cma_vec(pid_, put, &l, &r, 1)) return MPI_SUCCESS;
            if (!*err) *err = errno ? errno : EFAULT;
            return MPI_ERR_OTHER;
        });
    if (rc && !*err) *err = EFAULT;  // (the peer refused it: an offset the origin checked)
    return true;
}

void CmaBatch::drain_lanes(Lane* const* ls, unsigned n) {
    // 1. Each lane locked, in index order, once nothing of it is moving (waiting with its
    //    lock released: the mover needs it to finish). A lane's lock is never held while
    //    waiting for a lane of lower index, so two drains cannot wait for each other.
    for (unsigned i = 0; i < n; ++i) {
        Lane& l = *ls[i];
        for (unsigned spins = 0;; ++spins) {
            l.mu.lock();
            if (!l.moving) break;
            l.mu.unlock();
            if (spins > 64)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
    // 2. Swap the filled buffers out; the owners queue into the other ones meanwhile.
    Buf* bs[kLanes];
    Lane* moved[kLanes];
    unsigned k = 0;
    for (unsigned i = 0; i < n; ++i) {
        Lane& l = *ls[i];
        Buf* b = l.cur;
        if (b->count()) {
            l.cur = b == &l.bufs[0] ? &l.bufs[1] : &l.bufs[0];
            l.moving = true;
            l.moving_accs = !b->accs.empty();
            bs[k] = b;
            moved[k++] = &l;
        }
        l.mu.unlock();
    }
    if (!k) return;
    // 3. Move them (no lock held), then hand the buffers back.
    int err = 0;
    move(bs, k, &err);
    for (unsigned i = 0; i < k; ++i) {
        Lane& l = *moved[i];
        std::lock_guard lk(l.mu);
        bs[i]->reset();
        l.moving = l.moving_accs = false;
        if (err && !l.err) l.err = err;
        relist(l);
    }
}

std::size_t CmaBatch::Buf::bytes() const {
    std::size_t b = accs.capacity() * sizeof(Acc);
    for (const auto* v : {&put_l, &put_r, &get_l, &get_r, &acc_l, &acc_r})
        if (*v) b += kMaxItems * sizeof(iovec);
    if (stage) b += kStageBytes;
    if (scratch) b += kStageBytes;
    return b;
}

std::size_t CmaBatch::bytes() {
    std::size_t b = sizeof *this;
    for (auto& slot : lanes_) {
        Lane* l = slot.load(std::memory_order_acquire);
        if (!l) continue;
        std::lock_guard lk(l->mu);
        b += sizeof *l + l->bufs[0].bytes() + l->bufs[1].bytes();  // (a moving one: its mover only reads it)
    }
    return b;
}

int CmaBatch::drain() {
    // Every lane that holds something, moved together: one syscall a side however many
    // threads queued. Then the lanes' errors (this drain's, and any of a drain made when a
    // lane was full) are reported once.
    Lane* ls[kLanes];
    unsigned n = 0;
    for (std::uint32_t m = due_.load(std::memory_order_acquire); m; m &= m - 1)
        if (Lane* l = lanes_[__builtin_ctz(m)].load(std::memory_order_acquire)) ls[n++] = l;
    if (!n) return 0;
    drain_lanes(ls, n);
    int rc = 0;
    for (unsigned i = 0; i < n; ++i) {
        Lane& l = *ls[i];
        std::lock_guard lk(l.mu);
        if (l.err && !rc) rc = l.err;
        l.err = 0;
        relist(l);
    }
    return rc;
}

// ---- CmaPieces -----------------------------------------------------------------------------

namespace {
constexpr std::size_t kPiecesPerCall = 512;  // iovec pairs a cma_vec call moves in one syscall

std::uint64_t magnitude(std::int64_t v) { return v < 0 ? 0 - std::uint64_t(v) : std::uint64_t(v); }
}  // namespace

CmaPieces::CmaPieces(pid_t pid, std::uint64_t remote_base, bool write) : pid_(pid), base_(remote_base), write_(write) {}

void CmaPieces::add(const StridedChunk& c) {
    Piece p{static_cast<unsigned char*>(c.local), c.offset, c.len, c.n, c.lstride, c.rstride};
    if (write_ || p.n == 0 || p.len >= kSpanMax) {
        direct(p);
        return;
    }
    // A long strided run goes in parts whose span fits the buffer.
    const std::uint64_t step = std::max<std::uint64_t>(magnitude(p.rstride), p.len);
    const std::uint64_t per = p.n == 1 ? 1 : std::max<std::uint64_t>(1, (kSpanMax - p.len) / step + 1);
    while (p.n > per) {
        Piece part = p;
        part.n = per;
        add_piece(part);
        p.local += std::int64_t(per) * p.lstride;
        p.offset += std::uint64_t(std::int64_t(per) * p.rstride);
        p.n -= per;
    }
    add_piece(p);
}

void CmaPieces::add_piece(const Piece& p) {
    const std::uint64_t last = p.offset + std::uint64_t(std::int64_t(p.n - 1) * p.rstride);
    const std::uint64_t lo = std::min(p.offset, last), hi = std::max(p.offset, last) + p.len;
    const std::uint64_t data = p.n * p.len;
    if (!group_.empty()) {
        const std::uint64_t glo = std::min(lo_, lo), ghi = std::max(hi_, hi);
        if (cma_span_dense(ghi - glo, data_ + data, pieces_ + p.n)) {
            group_.push_back(p);
            lo_ = glo, hi_ = ghi, data_ += data, pieces_ += p.n;
            return;
        }
        flush_group();
    }
    // A large piece (its iovec costs little beside its bytes), or sparse pieces: an iovec each.
    if ((p.n == 1 && p.len >= 4096) || !cma_span_dense(hi - lo, data, p.n)) {
        direct(p);
        return;
    }
    group_.push_back(p);
    lo_ = lo, hi_ = hi, data_ = data, pieces_ = p.n;
}

void CmaPieces::direct(const Piece& p) {
    unsigned char* local = p.local;
    std::uint64_t off = p.offset;
    for (std::uint64_t i = 0; i < p.n; ++i, local += p.lstride, off += std::uint64_t(p.rstride)) {
        l_.push_back({local, p.len});
        r_.push_back({reinterpret_cast<void*>(base_ + off), p.len});
        if (l_.size() == kPiecesPerCall) move_direct();
    }
}

void CmaPieces::move_direct() {
    if (l_.empty()) return;
    if (!cma_vec(pid_, write_, l_.data(), r_.data(), l_.size()) && !err_) err_ = errno ? errno : EFAULT;
    l_.clear();
    r_.clear();
    if (serve_) serve_(serve_arg_);
}

void CmaPieces::flush_group() {
    if (group_.empty()) return;
    if (group_.size() == 1 && group_[0].n == 1) {
        direct(group_[0]);
        group_.clear();
        return;
    }
    // The span, into a buffer at the remote page offset (the kernel's copy at distance 0).
    thread_local PageOffsetBuffer span(kSpanMax, 0);
    const std::uint64_t remote = base_ + lo_;
    span.place(remote & 4095);
    if (cma_copy(pid_, false, span.data(), remote, hi_ - lo_)) {
        for (const Piece& p : group_)
            copy_strided(p.local, p.lstride, span.data() + (p.offset - lo_), p.rstride, p.len, p.n);
    } else {
        for (const Piece& p : group_) direct(p);  // a gap that cannot be read: piece by piece
    }
    group_.clear();
}

int CmaPieces::finish() {
    flush_group();
    move_direct();
    return err_;
}

int drain_batch(CmaBatch* batch, int rank) {
    if (!batch || !batch->due()) return MPI_SUCCESS;
    if (int e = batch->drain())
        return raise(MPI_ERR_OTHER, "a put or get to rank %d by cross-memory attach failed: %s (did the process exit?)",
                     rank, std::strerror(e));
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
