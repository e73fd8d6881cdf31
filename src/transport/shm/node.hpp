// node.hpp — the node transport of one window: the peers that share this process's node
// segment (every peer of a window on one node; the node's members on a window that spans
// nodes). What it moves completes inside its own flush(peer) / flush_all(), as on every
// other transport:
//   - mapped peers (allocate windows, FRMA_Alloc_mem memory): memcpy and CPU atomics at
//     issue (ShmTransport);
//   - unmapped peers (create and dynamic windows): cross-memory attach at issue, or small
//     transfers held in the peer's batch (cma_batch.hpp) until a flush moves them;
//   - large copies and accumulates handed to the progress thread (offload.hpp): a flush
//     waits for the last one this window queued;
//   - accumulate stripes taken over from a dead holder (acc_domain.hpp): a flush reports the
//     dead peer.
// Its target side serves what node peers that cannot map my part post to my state page
// (served.hpp: the slots and the bulk area), applied through the window's LocalTarget, from
// serve() (the progress thread, the host's progress loop, this process's waits).
// flush() and flush_all() record the first error of what they completed; failed() hands it
// to the completion point that asks, once.
//
// The window's direct paths ask it for capabilities: map() the address of a mapped range,
// state() a member's state words, batch() a peer's batch, queue_offload() a copy for the
// progress thread; what they start there completes at the same flushes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/spin_lock.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/acc_domain.hpp"
#include "transport/shm/arena.hpp"
#include "transport/shm/cma_batch.hpp"
#include "transport/shm/offload.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/served.hpp"
#include "transport/shm/shm.hpp"

namespace fastrma::detail {

class NodeTransport final : public ShmTransport {
public:
    // Where the members' parts are in the node segment: state areas at base + i *
    // state_bytes for member i (idx maps a rank to its member index; empty: rank r is
    // member r), data at what each member published, or, when every part has the same
    // size and disp unit (uniform), at base + data0 + r * dstride.
    struct Layout {
        unsigned char* base = nullptr;
        std::size_t state_bytes = 0;
        std::vector<int> idx;
        bool uniform = false;
        std::uint64_t uni_size = 0, uni_du = 1, data0 = 0, dstride = 0;
    };

    // offload: the engine's copier (null: none); wake: wakes its worker after a submit;
    // batch_max: the largest transfer a batch takes (0: this window never batches);
    // acc_stripes: the accumulate stripes of a state area.
    NodeTransport(CopyOffload* offload, std::function<void()> wake, int nprocs, std::size_t batch_max, int acc_stripes);
    ~NodeTransport() override;
    NodeTransport(const NodeTransport&) = delete;
    NodeTransport& operator=(const NodeTransport&) = delete;

    ShmSegment segment;  // the node segment (this process's mapping of it)
    Layout layout;
    std::unordered_map<int, ArenaPeerMap> arena_maps;  // members' FRMA_Alloc_mem chunks (create)
    // Run at a completion point after an accumulate stripe was taken over from a dead
    // holder: an MPI error class (raised) naming the dead node peer, or MPI_SUCCESS.
    std::function<int()> peer_failure;

    // Rings a peer's doorbell (its futex page, Engine::ring_peer); true if it was rung.
    std::function<bool(const SegmentExport&)> ring;

    // Lock-wait doorbells on member rank's state words: me registers as a waiter for a lock
    // word of rank's; after releasing one, me wakes one registered waiter (the next after
    // me in rank order: round robin, no rank starves).
    void register_lock_wait(int rank, int me);
    void ring_lock_waiters(int rank, int me);

    // Completion (Transport).
    void flush(const PeerRegion& peer) override;
    void flush_local(const PeerRegion& peer) override { flush(peer); }
    void flush_all() override;
    int failed(const PeerRegion& peer, const char* call) override;

    // Nothing batched, nothing offloaded, no stripe taken over: a flush has nothing to do
    // but its fence (three loads).
    bool idle() const {
        return !(pending_.load(std::memory_order_acquire) | off_seq_.load(std::memory_order_acquire)) &&
               g_stripes_taken_over.load(std::memory_order_relaxed) == stripes_seen_ &&
               !err_.load(std::memory_order_relaxed);
    }

    // Member r's state words (r must be a member).
    std::uint64_t* state(int r) const {
        const std::size_t i = layout.idx.empty() ? std::size_t(r) : std::size_t(layout.idx[std::size_t(r)]);
        return reinterpret_cast<std::uint64_t*>(layout.base + i * layout.state_bytes);
    }
    // Member r's state words, or null when r is not a member of the node segment.
    std::uint64_t* member_state(int r) const {
        if (!layout.idx.empty() && layout.idx[std::size_t(r)] < 0) return nullptr;
        return state(r);
    }
    // The address of bytes at byte offset off of member r's part when it is mapped here
    // and the range lies inside it, else nullptr.
    unsigned char* map(int r, std::uint64_t off, std::uint64_t bytes) const {
        if (layout.uniform) {
            if (off + bytes > layout.uni_size) return nullptr;
            return layout.base + layout.data0 + std::uint64_t(r) * layout.dstride + off;
        }
        const std::uint64_t* info = state(r);
        if (info[kInfoDataOff] == kNoData || off + bytes > info[kInfoSize]) return nullptr;
        return layout.base + info[kInfoDataOff] + off;
    }
    std::uint64_t disp_unit(int r) const { return layout.uniform ? layout.uni_du : state(r)[kInfoDispUnit]; }

    // Small transfers to unmapped peers: r's batch, made on first use from peer_of(r) (null:
    // r is mapped, or this window does not batch), or only if it exists.
    template <class PeerOf>
    CmaBatch* batch(int r, const PeerOf& peer_of) const {
        if (!batch_max_) return nullptr;
        if (std::atomic<CmaBatch*>* s = slots_.load(std::memory_order_acquire))
            if (CmaBatch* b = s[std::size_t(r)].load(std::memory_order_acquire)) return b == kNoBatch ? nullptr : b;
        return make_batch(peer_of(r));
    }
    CmaBatch* batch_if_any(int r) const {
        std::atomic<CmaBatch*>* s = slots_.load(std::memory_order_acquire);
        CmaBatch* b = s ? s[std::size_t(r)].load(std::memory_order_acquire) : nullptr;
        return b == kNoBatch ? nullptr : b;
    }
    std::size_t batch_max() const { return batch_max_; }
    void set_batch_max(std::size_t n) { batch_max_ = n; }  // (at creation, before any op)
    std::size_t metadata_bytes() const;  // the batches' bookkeeping

    // The copier, when this window offloads at all.
    CopyOffload* offload() const { return offload_; }
    std::atomic<int>* offload_error() { return &off_err_; }
    // After a submit: remember its sequence and wake the copier. False when nothing was
    // queued (seq 0: the ring was full), and the caller does the work itself.
    bool queued(std::uint64_t seq) {
        if (!seq) return false;
        std::uint64_t cur = off_seq_.load(std::memory_order_relaxed);
        while (cur < seq && !off_seq_.compare_exchange_weak(cur, seq, std::memory_order_release)) {}
        wake_();
        return true;
    }
    // Accumulates from one origin apply in program order: one still running on the copier
    // finishes before the next acts (one load when nothing was ever offloaded).
    void order_accumulates() {
        const std::uint64_t seq = off_seq_.load(std::memory_order_acquire);
        if (seq && !offload_->done(seq)) [[unlikely]]
            offload_->wait(seq);
    }
    // Waits for every offloaded copy of this window (before its memory goes); the error of
    // one that failed is kept for failed().
    void wait_offloads();

    // The served bulk areas as this window laid them out (each member's state area has one at
    // word `word`, `bytes` long; every member's alike): origins use these, never what a
    // peer's page says, and my server keeps mine. Before serve_for, after the layout is set.
    void set_served_bulk(std::size_t word, std::size_t bytes, std::size_t members);
    // Target side. serve_for: from now on, node peers' requests are served on my part
    // (target: my data, my state words, the window's accumulate paths); stop_serving: no
    // longer (and my page no longer says a server is there).
    void serve_for(LocalTarget target);
    void stop_serving();
    bool serving() const { return server_ != nullptr; }
    // Serves what is posted; beat: advertise this thread as a prompt server (not the
    // progress thread, which may doze). True if anything was served.
    bool serve_requests(bool beat);
    bool serve() override;

private:
    static inline CmaBatch* const kNoBatch = reinterpret_cast<CmaBatch*>(std::uintptr_t(1));  // a mapped peer
    CmaBatch* make_batch(const PeerRegion& p) const;
    int complete(int rank);  // rank's batch (-1: every batch), the offloads, the stripes
    void keep(int e) {
        int none = MPI_SUCCESS;
        if (e) err_.compare_exchange_strong(none, e, std::memory_order_acq_rel);
    }

    CopyOffload* offload_;
    std::function<void()> wake_;
    int nprocs_;
    std::size_t batch_max_;
    int acc_stripes_;
    std::atomic<std::uint64_t> off_seq_{0};
    std::atomic<int> off_err_{0};
    std::uint64_t stripes_seen_ = 0;  // g_stripes_taken_over when last looked
    std::atomic<int> err_{0};  // first error of a completion, for failed()
    // Batches: the array of slots is made when the first batch is (a window that never
    // batches keeps nothing per peer).
    mutable std::atomic<std::atomic<CmaBatch*>*> slots_{nullptr};
    mutable std::unique_ptr<std::atomic<CmaBatch*>[]> slot_store_;  // (mu_)
    mutable std::vector<std::unique_ptr<CmaBatch>> owned_;  // (mu_)
    mutable SpinLock mu_;
    mutable std::atomic<int> pending_{0};  // batches with something to drain
    std::unique_ptr<served::Server> server_;
    LocalTarget target_;
    std::size_t bulk_word_ = 0, bulk_bytes_ = 0;  // my served bulk area (set_served_bulk)
    std::uint64_t* bulk_registered_ = nullptr;  // the first state page registered (served::register_bulk_areas)
};

}  // namespace fastrma::detail
