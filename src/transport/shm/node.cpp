// node.cpp — see node.hpp.
#include "transport/shm/node.hpp"

#include <cstring>

#include "base/errors.hpp"
#include "base/stats.hpp"
#include "ops/copy.hpp"
#include "ops/layout.hpp"
#include "ops/op.hpp"
#include "ops/reduce.hpp"
#include "progress/progress.hpp"

namespace fastrma::detail {

NodeTransport::NodeTransport(CopyOffload* offload, std::function<void()> wake, int nprocs, std::size_t batch_max,
                             int acc_stripes)
    : offload_(offload), wake_(std::move(wake)), nprocs_(nprocs), batch_max_(batch_max), acc_stripes_(acc_stripes) {}

NodeTransport::~NodeTransport() {
    // Nothing may copy into or out of memory about to be unmapped. (Batched transfers are
    // dropped: the window's free drained them before its barrier.)
    wait_offloads();
    if (bulk_registered_) served::unregister_bulk_areas(bulk_registered_);
}

void NodeTransport::set_served_bulk(std::size_t word, std::size_t bytes, std::size_t members) {
    auto* first = reinterpret_cast<std::uint64_t*>(layout.base);
    if (!first || !served::register_bulk_areas(first, layout.state_bytes / 8, members, word, bytes)) return;
    bulk_registered_ = first;
    bulk_word_ = word, bulk_bytes_ = bytes;
}

CmaBatch* NodeTransport::make_batch(const PeerRegion& p) const {
    std::lock_guard lk(mu_);
    if (!slot_store_) {
        slot_store_ = std::make_unique<std::atomic<CmaBatch*>[]>(std::size_t(nprocs_));
        slots_.store(slot_store_.get(), std::memory_order_release);
    }
    std::atomic<CmaBatch*>& slot = slot_store_[std::size_t(p.rank)];
    CmaBatch* b = slot.load(std::memory_order_relaxed);
    if (!b) {
        b = kNoBatch;
        if (!p.mapped && p.pid > 0) {
            owned_.push_back(std::make_unique<CmaBatch>(p.pid, p.remote_addr, p.state, acc_stripes_, &pending_));
            b = owned_.back().get();
        }
        slot.store(b, std::memory_order_release);
    }
    return b == kNoBatch ? nullptr : b;
}

std::size_t NodeTransport::metadata_bytes() const {
    std::lock_guard lk(mu_);
    std::size_t b = slot_store_ ? std::size_t(nprocs_) * sizeof(std::atomic<CmaBatch*>) : 0;
    for (const auto& cb : owned_) b += cb->bytes();
    return b;
}

void NodeTransport::wait_offloads() {
    const std::uint64_t seq = off_seq_.load(std::memory_order_acquire);
    if (seq == 0) return;  // never offloaded (the common case: one load)
    offload_->wait(seq);
    if (int e = off_err_.exchange(0, std::memory_order_acq_rel))
        keep(raise(e, "an offloaded transfer failed (cross-memory attach to a peer that exited?)"));
}

int NodeTransport::complete(int rank) {
    int rc = MPI_SUCCESS;
    if (pending_.load(std::memory_order_acquire)) {
        if (rank >= 0) {
            rc = drain_batch(batch_if_any(rank), rank);
        } else {
            for (int r = 0; r < nprocs_; ++r)
                if (int e = drain_batch(batch_if_any(r), r); e && !rc) rc = e;
        }
    }
    keep(rc);
    wait_offloads();
    // An accumulate of ours took over a stripe whose holder had died (issue.cpp): if the
    // holder was one of ours, this completion reports it.
    if (const std::uint64_t t = g_stripes_taken_over.load(std::memory_order_relaxed); t != stripes_seen_) {
        const int e = peer_failure ? peer_failure() : MPI_SUCCESS;
        keep(e);
        if (!e) stripes_seen_ = t;
    }
    return rc;
}

void NodeTransport::flush(const PeerRegion& peer) {
    if (!idle()) complete(peer.rank);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void NodeTransport::flush_all() {
    if (!idle()) complete(-1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int NodeTransport::failed(const PeerRegion& /*peer*/, const char* /*call*/) {
    if (!err_.load(std::memory_order_relaxed)) return MPI_SUCCESS;
    return err_.exchange(MPI_SUCCESS, std::memory_order_acq_rel);
}

void NodeTransport::register_lock_wait(int rank, int me) {
    std::uint64_t* state = this->state(rank);
    __atomic_fetch_or(&state[lock_waiters_word0(nprocs_) + std::size_t(me) / 64], 1ull << (me % 64), __ATOMIC_SEQ_CST);
}

void NodeTransport::ring_lock_waiters(int rank, int me) {
    std::uint64_t* const state = this->state(rank);
    // One waiter per release: one process can take what was released, and waking every
    // sleeper on a node with fewer cores than ranks only takes the cores from the next holder.
    const std::size_t nw = post_bitmap_words(nprocs_);
    std::uint64_t* words = &state[lock_waiters_word0(nprocs_)];
    std::size_t start = std::size_t(me + 1) / 64;  // my successor's word (no division below:
    if (start >= nw) start = 0;  // this runs at every unlock)
    for (std::size_t k = 0; k <= nw; ++k) {
        std::size_t w = start + k;
        while (w >= nw) w -= nw;
        std::uint64_t bits = __atomic_load_n(&words[w], __ATOMIC_SEQ_CST);
        if (k == 0) bits &= ~0ull << ((me + 1) % 64);  // ranks after me in my own word
        if (!bits) continue;
        const int r = int(w * 64) + __builtin_ctzll(bits);
        if (!(__atomic_fetch_and(&words[w], ~(1ull << (r % 64)), __ATOMIC_SEQ_CST) & (1ull << (r % 64))))
            continue;  // another releaser took it
        std::uint64_t* info = this->state(r);
        __atomic_fetch_add(&info[kLockKick], 1, __ATOMIC_SEQ_CST);
        SegmentExport bell;
        std::memcpy(static_cast<void*>(&bell), &info[kInfoBell], sizeof bell);
        if (ring && ring(bell)) bump(Stat::bells_rung);
        return;
    }
}

void NodeTransport::serve_for(LocalTarget target) {
    target_ = std::move(target);
    server_ = std::make_unique<served::Server>(bulk_word_, bulk_bytes_);
}

void NodeTransport::stop_serving() {
    if (server_) __atomic_store_n(target_.state + kServedBeat, 0, __ATOMIC_RELEASE);
}

bool NodeTransport::serve() { return server_ && serve_requests(!ProgressEngine::on_progress_thread()); }

bool NodeTransport::serve_requests(bool beat) {
    std::uint64_t* const mine = target_.state;
    if (server_->nothing_posted(mine, beat)) return false;
    const bool dynamic = target_.attached != nullptr;
    // bytes at toff of my part (dynamic: the address, inside one attached region), or null.
    const auto at = [this, dynamic](std::uint64_t toff, std::uint64_t bytes) -> unsigned char* {
        if (dynamic) return target_.attached(toff, bytes) ? reinterpret_cast<unsigned char*>(toff) : nullptr;
        if (!target_.base || toff > target_.size || bytes > target_.size - toff) return nullptr;
        return target_.base + toff;
    };
    // A bulk part: count pieces of `piece` bytes from toff at stride, its whole footprint
    // inside my part, checked once; puts and gets by copy_strided, accumulates by the
    // strided accumulate path.
    const auto bulk = [this, &at](int kind, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                                  std::uint64_t piece, std::uint64_t count, const void* src, void* res) {
        std::uint64_t lo = 0, span = 0;
        if (!strided_footprint(toff, stride, piece, count, &lo, &span) || !at(lo, span))
            return served::kRefused;  // the origin moves it, and reports a failure
        unsigned char* p = target_.base ? target_.base + toff : reinterpret_cast<unsigned char*>(toff);
        if (kind == int(RmaKind::put)) {
            copy_strided(p, stride, src, std::int64_t(piece), piece, count);
            return int(MPI_SUCCESS);
        }
        if (kind == int(RmaKind::get)) {
            copy_strided(res, std::int64_t(piece), p, stride, piece, count);
            return int(MPI_SUCCESS);
        }
        const TypeInfo* ti = type_by_id(std::uint8_t(type_id));
        if (!ti || piece % ti->extent != 0) return int(MPI_ERR_TYPE);
        return target_.accumulate_strided(kind, op_id, type_id, toff, stride, piece / ti->extent, count, ti->extent,
                                          src, res);
    };
    const auto one = [this, &at](int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count,
                                 const void* src, const void* cmp, void* res) {
        if (kind == int(RmaKind::put) || kind == int(RmaKind::get)) {  // count bytes
            unsigned char* p = at(toff, count);
            if (!p) return served::kRefused;  // the origin moves it, and reports a failure
            if (kind == int(RmaKind::put))
                std::memcpy(p, src, count);
            else
                std::memcpy(res, p, count);
            return int(MPI_SUCCESS);
        }
        // Accumulates: count is bytes, whole elements of the type (fetch_and_op and
        // compare_and_swap: one), inside my part.
        const TypeInfo* ti = type_by_id(std::uint8_t(type_id));
        if (!ti || count == 0 || count % ti->extent != 0) return int(MPI_ERR_TYPE);
        if ((kind == int(RmaKind::fop) || kind == int(RmaKind::cas)) && count != ti->extent) return int(MPI_ERR_TYPE);
        if (!at(toff, count)) return served::kRefused;  // the origin applies it, and reports a failure
        return target_.accumulate(kind, op_id, type_id, toff, count / ti->extent, ti->extent, src, cmp, res);
    };
    return server_->serve(mine, one, bulk);
}

}  // namespace fastrma::detail
