// cma_batch.cpp — see cma_batch.hpp.
#include "ops/cma_batch.hpp"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <mutex>

#include "engine/stats.hpp"
#include "ops/issue.hpp"
#include "ops/reduce.hpp"
#include "transport/shm.hpp"

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

bool CmaBatch::full(const Lane& l, std::size_t stage_bytes, std::size_t scratch_bytes) {
    return l.count() == kMaxItems || l.staged + stage_bytes > kStageBytes || l.scratched + scratch_bytes > kStageBytes;
}

unsigned char* CmaBatch::stage(Lane& l, const void* src, std::size_t len) {
    if (!l.stage) l.stage = std::make_unique<unsigned char[]>(kStageBytes);
    unsigned char* at = l.stage.get() + l.staged;
    std::memcpy(at, src, len);
    l.staged += len;
    return at;
}

bool CmaBatch::overlaps_acc(const Lane& l, std::uint64_t off, std::size_t len, std::size_t* exact) const {
    // Every queued accumulate that overlaps another covers exactly its bytes (anything else
    // drained first), so the newest overlapping one decides. Outside the span of them all
    // (the common case: a run of accumulates to increasing offsets) nothing to look at.
    if (l.accs.empty() || !overlap(l.acc_lo, std::size_t(l.acc_hi - l.acc_lo), off, len)) return false;
    for (std::size_t i = l.accs.size(); i-- > 0;) {
        const Acc& a = l.accs[i];
        if (!overlap(a.off, a.len, off, len)) continue;
        if (exact) *exact = a.off == off && a.len == len ? i : l.accs.size();
        return true;
    }
    return false;
}

void CmaBatch::put(std::uint64_t off, const void* src, std::size_t len) {
    Lane& l = my_lane();
    std::lock_guard lk(l.mu);
    // A put after an accumulate of the same bytes must land after it (puts move first).
    if (overlaps_acc(l, off, len, nullptr) || full(l, len, 0)) drain_locked(l);
    unsigned char* at = stage(l, src, len);
    if (!l.put_l) {
        l.put_l = std::make_unique<iovec[]>(kMaxItems);
        l.put_r = std::make_unique<iovec[]>(kMaxItems);
    }
    add(l.put_l.get(), l.put_r.get(), l.nput, off, at, len);
    list(l);
}

void CmaBatch::get(std::uint64_t off, void* dst, std::size_t len) {
    Lane& l = my_lane();
    std::lock_guard lk(l.mu);
    if (full(l, 0, 0)) drain_locked(l);
    if (!l.get_l) {
        l.get_l = std::make_unique<iovec[]>(kMaxItems);
        l.get_r = std::make_unique<iovec[]>(kMaxItems);
    }
    add(l.get_l.get(), l.get_r.get(), l.nget, off, static_cast<unsigned char*>(dst), len);
    list(l);
}

void CmaBatch::acc(std::uint64_t off, MPI_Op op, const TypeInfo& ti, std::size_t n, const void* origin,
                   void* result) {
    const std::size_t len = n * ti.size;
    Lane& l = my_lane();
    // Accumulates other threads queued before this one apply first: their lanes drain now
    // (before ours is locked: no lane lock is held while another is taken). One issued
    // concurrently, unordered with this one, may land on either side of it.
    const std::uint32_t mine = 1u << l.index;
    for (std::uint32_t others = acc_lanes_.load(std::memory_order_acquire) & ~mine; others; others &= others - 1)
        if (Lane* o = lanes_[__builtin_ctz(others)].load(std::memory_order_acquire)) {
            const int e = drain_lane(*o);
            if (e) {  // kept for this lane's next drain (the completion point reports it)
                std::lock_guard lk(l.mu);
                if (!l.err) l.err = e;
                list(l);
            }
        }
    std::lock_guard lk(l.mu);
    std::size_t same = l.accs.size();
    bool drain_first = full(l, origin ? len : 0, len);
    if (!drain_first && overlaps_acc(l, off, len, &same)) drain_first = same == l.accs.size();
    // An accumulate after a get of the same bytes must not change what the get reads (gets
    // move last).
    for (std::uint32_t i = 0; i < l.nget && !drain_first; ++i)
        drain_first = overlap(reinterpret_cast<std::uint64_t>(l.get_r[i].iov_base) - base_, l.get_r[i].iov_len, off, len);
    if (drain_first) {
        drain_locked(l);
        same = 0;  // (l.accs is empty now)
    }
    Acc a{off, std::uint32_t(len), 0, kNoSrc, op, &ti, n, result};
    if (origin) a.src = std::uint32_t(stage(l, origin, len) - l.stage.get());
    if (same < l.accs.size()) {
        a.scratch = l.accs[same].scratch;  // the same bytes: applied to the same copy, after it
    } else {
        if (!l.scratch) {
            l.scratch = std::make_unique<unsigned char[]>(kStageBytes);
            l.acc_l = std::make_unique<iovec[]>(kMaxItems);
            l.acc_r = std::make_unique<iovec[]>(kMaxItems);
        }
        a.scratch = std::uint32_t(l.scratched);
        add(l.acc_l.get(), l.acc_r.get(), l.nacc_iov, off, l.scratch.get() + l.scratched, len);
        l.scratched += len;
        l.acc_mask |= acc_stripe_mask(stripes_, off, len);
    }
    if (l.accs.empty()) {
        l.acc_lo = off;
        l.acc_hi = off + len;
        acc_lanes_.fetch_or(mine, std::memory_order_release);
    } else {
        l.acc_lo = std::min(l.acc_lo, off);
        l.acc_hi = std::max<std::uint64_t>(l.acc_hi, off + len);
    }
    l.accs.push_back(a);
    list(l);
}

void CmaBatch::add(iovec* l, iovec* r, std::uint32_t& k, std::uint64_t off, unsigned char* local,
                   std::size_t len) {
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

void CmaBatch::list(Lane& l) {
    if (l.listed) return;
    l.listed = true;
    due_.fetch_or(1u << l.index, std::memory_order_release);
    pending_->fetch_add(1, std::memory_order_release);
}

void CmaBatch::apply_accs(Lane& l) {
    // Under the stripes of every queued accumulate: read the target bytes, apply in issue
    // order, write them back — atomic against every other origin's and the owner's
    // accumulates (they take the same stripes), as the one-at-a-time path is.
    acc_stripes_lock(state_, l.acc_mask);
    bool ok = ShmTransport::cma_vec(pid_, false, l.acc_l.get(), l.acc_r.get(), l.nacc_iov);
    bool writes = false;
    if (ok) {
        for (const Acc& a : l.accs) {
            reduce(a.op, *a.ti, l.scratch.get() + a.scratch, a.src == kNoSrc ? nullptr : l.stage.get() + a.src, a.n,
                   a.result);
            writes = writes || a.op != MPI_NO_OP;
        }
        if (writes) ok = ShmTransport::cma_vec(pid_, true, l.acc_l.get(), l.acc_r.get(), l.nacc_iov);
    }
    const int e = errno;
    acc_stripes_unlock(state_, l.acc_mask);
    if (!ok && !l.err) l.err = e ? e : EFAULT;
    bump(Stat::cma_drains, 1 + writes);
}

namespace {
// A drain of several lanes gathers their iovec lists into one syscall a side.
thread_local std::unique_ptr<iovec[]> t_gather;  // 4 lists of kLanes * kMaxItems
}  // namespace

void CmaBatch::move(Lane* const* ls, unsigned n) {
    // Puts, accumulates, gets: of two conflicting accesses to the same bytes in one epoch
    // MPI defines the outcome only for accumulates (in issue order, kept above); a put after
    // an accumulate or an accumulate after a get of the same bytes drained first.
    const iovec *pl = ls[0]->put_l.get(), *pr = ls[0]->put_r.get(), *gl = ls[0]->get_l.get(), *gr = ls[0]->get_r.get();
    std::size_t np = ls[0]->nput, ng = ls[0]->nget;
    if (n > 1) {  // (cma_vec splits lists longer than a syscall takes)
        constexpr std::size_t kAll = kLanes * kMaxItems;
        if (!t_gather) t_gather = std::make_unique<iovec[]>(4 * kAll);
        iovec* const g = t_gather.get();
        np = ng = 0;
        for (unsigned i = 0; i < n; ++i) {
            const Lane& l = *ls[i];
            std::copy_n(l.put_l.get(), l.nput, g + np);
            std::copy_n(l.put_r.get(), l.nput, g + kAll + np);
            np += l.nput;
            std::copy_n(l.get_l.get(), l.nget, g + 2 * kAll + ng);
            std::copy_n(l.get_r.get(), l.nget, g + 3 * kAll + ng);
            ng += l.nget;
        }
        pl = g, pr = g + kAll, gl = g + 2 * kAll, gr = g + 3 * kAll;
    }
    int err = 0;
    if (np && !ShmTransport::cma_vec(pid_, true, pl, pr, np)) err = errno ? errno : EFAULT;
    for (unsigned i = 0; i < n; ++i)
        if (!ls[i]->accs.empty()) {
            apply_accs(*ls[i]);
            acc_lanes_.fetch_and(~(1u << ls[i]->index), std::memory_order_release);
        }
    if (ng && !ShmTransport::cma_vec(pid_, false, gl, gr, ng) && !err) err = errno ? errno : EFAULT;
    bump(Stat::cma_drains, (np != 0) + (ng != 0));
    for (unsigned i = 0; i < n; ++i) {
        Lane& l = *ls[i];
        if (err && !l.err) l.err = err;
        l.nput = l.nget = l.nacc_iov = 0;
        l.staged = l.scratched = 0;
        l.accs.clear();
        l.acc_mask = 0;
    }
}

void CmaBatch::drain_locked(Lane& l) {
    if (l.count() == 0) return;
    Lane* one = &l;
    move(&one, 1);
}

int CmaBatch::unlist(Lane& l) {
    if (l.listed) {
        l.listed = false;
        due_.fetch_and(~(1u << l.index), std::memory_order_release);
        pending_->fetch_sub(1, std::memory_order_release);
    }
    const int e = l.err;
    l.err = 0;
    return e;
}

int CmaBatch::drain_lane(Lane& l) {
    std::lock_guard lk(l.mu);
    drain_locked(l);
    return unlist(l);
}

std::size_t CmaBatch::bytes() {
    std::size_t b = sizeof *this;
    for (auto& slot : lanes_) {
        Lane* l = slot.load(std::memory_order_acquire);
        if (!l) continue;
        std::lock_guard lk(l->mu);
        b += sizeof *l + l->accs.capacity() * sizeof(Acc);
        for (const auto* v : {&l->put_l, &l->put_r, &l->get_l, &l->get_r, &l->acc_l, &l->acc_r})
            if (*v) b += kMaxItems * sizeof(iovec);
        if (l->stage) b += kStageBytes;
        if (l->scratch) b += kStageBytes;
    }
    return b;
}

int CmaBatch::drain() {
    // Every lane that holds something, locked in index order (no other path holds two lane
    // locks), moved together: one syscall a side however many threads queued.
    Lane* held[kLanes];
    unsigned n = 0;
    for (std::uint32_t m = due_.load(std::memory_order_acquire); m; m &= m - 1)
        if (Lane* l = lanes_[__builtin_ctz(m)].load(std::memory_order_acquire)) {
            l->mu.lock();
            if (l->listed) held[n++] = l;
            else l->mu.unlock();  // drained meanwhile
        }
    Lane* busy[kLanes];
    unsigned nb = 0;
    for (unsigned i = 0; i < n; ++i)
        if (held[i]->count()) busy[nb++] = held[i];
    if (nb) move(busy, nb);
    int rc = 0;
    for (unsigned i = 0; i < n; ++i) {
        if (const int e = unlist(*held[i]); e && !rc) rc = e;
        held[i]->mu.unlock();
    }
    return rc;
}

}  // namespace fastrma::detail
