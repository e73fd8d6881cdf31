// node.cpp — see node.hpp.
#include "transport/shm/node.hpp"

#include "engine/errors.hpp"

namespace fastrma::detail {

NodeTransport::NodeTransport(CopyOffload* offload, std::function<void()> wake, int nprocs, std::size_t batch_max,
                             int acc_stripes)
    : offload_(offload), wake_(std::move(wake)), nprocs_(nprocs), batch_max_(batch_max), acc_stripes_(acc_stripes) {}

NodeTransport::~NodeTransport() {
    // Nothing may copy into or out of memory about to be unmapped. (Batched transfers are
    // dropped: the window's free drained them before its barrier.)
    wait_offloads();
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

}  // namespace fastrma::detail
