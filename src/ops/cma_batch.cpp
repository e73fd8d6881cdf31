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

bool CmaBatch::full(std::size_t stage_bytes, std::size_t scratch_bytes) const {
    return count() == kMaxItems || staged_ + stage_bytes > kStageBytes || scratched_ + scratch_bytes > kStageBytes;
}

unsigned char* CmaBatch::stage(const void* src, std::size_t len) {
    if (!stage_) stage_ = std::make_unique<unsigned char[]>(kStageBytes);
    unsigned char* at = stage_.get() + staged_;
    std::memcpy(at, src, len);
    staged_ += len;
    return at;
}

bool CmaBatch::overlaps_acc(std::uint64_t off, std::size_t len, std::size_t* exact) const {
    // Every queued accumulate that overlaps another covers exactly its bytes (anything else
    // drained first), so the newest overlapping one decides. Outside the span of them all
    // (the common case: a run of accumulates to increasing offsets) nothing to look at.
    if (accs_.empty() || !overlap(acc_lo_, std::size_t(acc_hi_ - acc_lo_), off, len)) return false;
    for (std::size_t i = accs_.size(); i-- > 0;) {
        const Acc& a = accs_[i];
        if (!overlap(a.off, a.len, off, len)) continue;
        if (exact) *exact = a.off == off && a.len == len ? i : accs_.size();
        return true;
    }
    return false;
}

void CmaBatch::put(std::uint64_t off, const void* src, std::size_t len) {
    std::lock_guard lk(mu_);
    // A put after an accumulate of the same bytes must land after it (puts move first).
    if (overlaps_acc(off, len, nullptr) || full(len, 0)) drain_locked();
    unsigned char* at = stage(src, len);
    if (!put_l_) {
        put_l_ = std::make_unique<iovec[]>(kMaxItems);
        put_r_ = std::make_unique<iovec[]>(kMaxItems);
    }
    add(put_l_.get(), put_r_.get(), nput_, off, at, len);
    list();
}

void CmaBatch::get(std::uint64_t off, void* dst, std::size_t len) {
    std::lock_guard lk(mu_);
    if (full(0, 0)) drain_locked();
    if (!get_l_) {
        get_l_ = std::make_unique<iovec[]>(kMaxItems);
        get_r_ = std::make_unique<iovec[]>(kMaxItems);
    }
    add(get_l_.get(), get_r_.get(), nget_, off, static_cast<unsigned char*>(dst), len);
    list();
}

void CmaBatch::acc(std::uint64_t off, MPI_Op op, const TypeInfo& ti, std::size_t n, const void* origin,
                   void* result) {
    const std::size_t len = n * ti.size;
    std::lock_guard lk(mu_);
    std::size_t same = accs_.size();
    bool drain_first = full(origin ? len : 0, len);
    if (!drain_first && overlaps_acc(off, len, &same)) drain_first = same == accs_.size();
    // An accumulate after a get of the same bytes must not change what the get reads (gets
    // move last).
    for (std::uint32_t i = 0; i < nget_ && !drain_first; ++i)
        drain_first = overlap(reinterpret_cast<std::uint64_t>(get_r_[i].iov_base) - base_, get_r_[i].iov_len, off, len);
    if (drain_first) {
        drain_locked();
        same = 0;  // (accs_ is empty now)
    }
    Acc a{off, std::uint32_t(len), 0, kNoSrc, op, &ti, n, result};
    if (origin) a.src = std::uint32_t(stage(origin, len) - stage_.get());
    if (same < accs_.size()) {
        a.scratch = accs_[same].scratch;  // the same bytes: applied to the same copy, after it
    } else {
        if (!scratch_) {
            scratch_ = std::make_unique<unsigned char[]>(kStageBytes);
            acc_l_ = std::make_unique<iovec[]>(kMaxItems);
            acc_r_ = std::make_unique<iovec[]>(kMaxItems);
        }
        a.scratch = std::uint32_t(scratched_);
        add(acc_l_.get(), acc_r_.get(), nacc_iov_, off, scratch_.get() + scratched_, len);
        scratched_ += len;
        acc_mask_ |= acc_stripe_mask(stripes_, off, len);
    }
    if (accs_.empty()) {
        acc_lo_ = off;
        acc_hi_ = off + len;
    } else {
        acc_lo_ = std::min(acc_lo_, off);
        acc_hi_ = std::max<std::uint64_t>(acc_hi_, off + len);
    }
    accs_.push_back(a);
    list();
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

void CmaBatch::list() {
    if (listed_.load(std::memory_order_relaxed)) return;
    listed_.store(true, std::memory_order_relaxed);
    pending_->fetch_add(1, std::memory_order_release);
}

void CmaBatch::apply_accs() {
    // Under the stripes of every queued accumulate: read the target bytes, apply in issue
    // order, write them back — atomic against every other origin's and the owner's
    // accumulates (they take the same stripes), as the one-at-a-time path is.
    acc_stripes_lock(state_, acc_mask_);
    bool ok = ShmTransport::cma_vec(pid_, false, acc_l_.get(), acc_r_.get(), nacc_iov_);
    bool writes = false;
    if (ok) {
        for (const Acc& a : accs_) {
            reduce(a.op, *a.ti, scratch_.get() + a.scratch, a.src == kNoSrc ? nullptr : stage_.get() + a.src, a.n, a.result);
            writes = writes || a.op != MPI_NO_OP;
        }
        if (writes) ok = ShmTransport::cma_vec(pid_, true, acc_l_.get(), acc_r_.get(), nacc_iov_);
    }
    const int e = errno;
    acc_stripes_unlock(state_, acc_mask_);
    if (!ok && !err_) err_ = e ? e : EFAULT;
    bump(Stat::cma_drains, 1 + writes);
}

void CmaBatch::drain_locked() {
    if (count() == 0) return;
    // Puts, accumulates, gets: of two conflicting accesses to the same bytes in one epoch
    // MPI defines the outcome only for accumulates (in issue order, kept above); a put after
    // an accumulate or an accumulate after a get of the same bytes drained first.
    if (nput_ && !ShmTransport::cma_vec(pid_, true, put_l_.get(), put_r_.get(), nput_) && !err_)
        err_ = errno ? errno : EFAULT;
    if (!accs_.empty()) apply_accs();
    if (nget_ && !ShmTransport::cma_vec(pid_, false, get_l_.get(), get_r_.get(), nget_) && !err_)
        err_ = errno ? errno : EFAULT;
    bump(Stat::cma_drains, (nput_ != 0) + (nget_ != 0));
    nput_ = nget_ = nacc_iov_ = 0;
    staged_ = scratched_ = 0;
    accs_.clear();
    acc_mask_ = 0;
}

std::size_t CmaBatch::bytes() {
    std::lock_guard lk(mu_);
    std::size_t b = sizeof *this + accs_.capacity() * sizeof(Acc);
    for (const auto* v : {&put_l_, &put_r_, &get_l_, &get_r_, &acc_l_, &acc_r_})
        if (*v) b += kMaxItems * sizeof(iovec);
    if (stage_) b += kStageBytes;
    if (scratch_) b += kStageBytes;
    return b;
}

int CmaBatch::drain() {
    std::lock_guard lk(mu_);
    drain_locked();
    if (listed_.load(std::memory_order_relaxed)) {
        listed_.store(false, std::memory_order_relaxed);
        pending_->fetch_sub(1, std::memory_order_release);
    }
    const int e = err_;
    err_ = 0;
    return e;
}

}  // namespace fastrma::detail
