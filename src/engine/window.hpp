// window.hpp — a window: its memory and its peers', its epochs, its 3D queue and pools.
//
// Flavors: allocate (each part in a shared segment that every node peer maps: load/store,
// CPU atomics) and create (user memory: peers use cross-memory attach; accumulates take
// the target's striped accumulate lock). Every process also has a state segment (one page,
// always shared) holding the lock words and accumulate stripes.
//
// A window keeps its creation, its peers (how each is reached: one transport per peer,
// decided in one place, transport/select.hpp), its memory and dynamic regions, and the
// validation of operations. Its synchronization — epochs, the queue of operations that
// cannot go yet, fence, PSCW, locks, flush — is its Epochs (src/epochs/), to which it is
// the EpochHost.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/bootstrap.hpp"
#include "base/stats.hpp"
#include "engine/engine.hpp"
#include "epochs/completion.hpp"
#include "epochs/epochs.hpp"
#include "epochs/issue.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "progress/progress.hpp"
#include "transport/select.hpp"
#include "transport/shm/arena.hpp"
#include "transport/shm/node.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/served.hpp"

namespace fastrma::detail {

// One posted operation as the API layer describes it, before validation.
struct OpRequest {
    RmaKind kind;
    const char* call;  // "FRMA_Put", ... for messages
    const void* origin;
    int origin_count;
    MPI_Datatype origin_type;
    void* result;
    int result_count;
    MPI_Datatype result_type;
    const void* compare;
    int target_rank;
    MPI_Aint target_disp;
    int target_count;
    MPI_Datatype target_type;
    MPI_Op op;

    // Every operation is this form with some fields unused (MPI_DATATYPE_NULL, 0, null).
    static OpRequest make(RmaKind kind, const char* call, const void* origin, int origin_count,
                          MPI_Datatype origin_type, void* result, int result_count, MPI_Datatype result_type,
                          int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_type,
                          MPI_Op op = MPI_OP_NULL, const void* compare = nullptr) {
        return OpRequest{kind,        call,    origin,      origin_count, origin_type,  result,      result_count,
                         result_type, compare, target_rank, target_disp,  target_count, target_type, op};
    }
};

class Window final : private EpochHost {
public:
    ~Window();

    // Collective over bs. On failure every member returns the same error and *out is null.
    static int allocate(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit, void** baseptr,
                        std::unique_ptr<Window>* out);
    static int create(Engine& eng, std::unique_ptr<Bootstrap> bs, void* base, MPI_Aint size, int disp_unit,
                      std::unique_ptr<Window>* out);
    // noncontig: alloc_shared_noncontig (each part its own segment); otherwise the parts
    // are consecutive in one segment of the node.
    static int allocate_shared(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit, bool noncontig,
                               void** baseptr, std::unique_ptr<Window>* out);
    static int create_dynamic(Engine& eng, std::unique_ptr<Bootstrap> bs, std::unique_ptr<Window>* out);
    int free_collective();  // MPI_Win_free: checks no epoch is open, barrier, release

    int shared_query(int rank, MPI_Aint* size, int* disp_unit, void** base) const;
    int attach(void* base, MPI_Aint size);
    int detach(const void* base);

    // Synchronization: the epochs' (groups as window ranks).
    int fence(int assert_) { return epochs_.fence(assert_); }
    int expose(const std::vector<int>& group, int assert_) { return epochs_.post(group, assert_); }
    int start(const std::vector<int>& group, int assert_) { return epochs_.start(group, assert_); }
    int complete() { return epochs_.complete(); }
    int wait_exposure() { return epochs_.wait(); }
    int test_exposure(bool* done) { return epochs_.test(done); }
    int lock(int lock_type, int rank, int assert_) { return epochs_.lock(lock_type, rank, assert_); }
    int unlock(int rank) { return epochs_.unlock(rank); }
    int lock_all(int assert_) { return epochs_.lock_all(assert_); }
    int unlock_all() { return epochs_.unlock_all(); }
    int flush(int rank, bool local) { return epochs_.flush(rank, local); }
    int flush_all(bool local) { return epochs_.flush_all(local); }
    int sync();

    // MPI-defined info keys and their effect.
    struct Info {
        bool no_locks = false;
        std::string accumulate_ordering = "rar,raw,war,waw";
        std::string accumulate_ops = "same_op_no_op";
        bool same_size = false;
        bool same_disp_unit = false;
        bool alloc_shared_noncontig = false;
    };
    Info info;
    void info_changed() { epochs_.set_no_locks(info.no_locks); }  // after info was set
    std::string name;

    // Communication. done (request-based operations): signalled once the op is complete at
    // the origin — at once when it completes at post, else by poll_requests() (the progress
    // thread, or a thread in the host MPI's progress loop) — when someone polls and
    // done->any_thread(); otherwise the op is completed before this returns. On an error
    // return done was not signalled; on success it is, exactly once.
    int post(const OpRequest& rq, Completion* done = nullptr);

    // Fast paths (window_fast.hpp): the common case of an epoch that lets the op go now, a
    // predefined type and an in-range displacement, in a few dozen instructions.
    // They return kSlowPath whenever anything is unusual; post() then decides (and
    // raises the error, if there is one). They never fail on their own.
    static constexpr int kSlowPath = -1;
    inline int fast_put(const void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp, int tcount,
                        MPI_Datatype ttype);
    inline int fast_get(void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp, int tcount,
                        MPI_Datatype ttype);
    inline int fast_fetch_and_op(const void* origin, void* result, MPI_Datatype type, int rank, MPI_Aint disp,
                                 MPI_Op op);
    inline int fast_compare_and_swap(const void* origin, const void* compare, void* result, MPI_Datatype type, int rank,
                                     MPI_Aint disp);
    inline int fast_accumulate(const void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp, int tcount,
                               MPI_Datatype ttype, MPI_Op op);
    // fetch_and_op / compare_and_swap on a node peer this process cannot map (create and
    // dynamic windows), applied by the peer's CPU while it waits in MPI (transport/shm/served.hpp).
    inline int fast_served_atomic(RmaKind kind, const TypeInfo& ti, OpKind k, const void* origin, const void* compare,
                                  void* result, int rank, MPI_Aint disp);
    inline bool unmapped_offset(int rank, MPI_Aint disp, std::uint64_t bytes, std::uint64_t* off);
    inline int fast_flush(int rank);
    inline int fast_flush_all();
    inline int fast_flush_node();  // a flush whose targets are node peers in a granted epoch
    inline int fast_get_accumulate(const void* origin, int ocount, MPI_Datatype otype, void* result, int rcount,
                                   MPI_Datatype rtype, int rank, MPI_Aint disp, int tcount, MPI_Datatype ttype,
                                   MPI_Op op);
    // Peers reached by messages: the target offset of a small contiguous op that the fast
    // paths may take (not self, in range, within the transport's inline_max), else false.
    inline bool remote_fast_offset(int rank, MPI_Aint disp, std::uint64_t bytes, std::uint64_t* off);
    inline int fast_remote_transfer(bool is_put, void* origin, int rank, MPI_Aint disp, std::uint64_t bytes);
    inline int fast_remote_accumulate(const void* origin, const TypeInfo& ti, int rank, MPI_Aint disp, std::size_t n,
                                      MPI_Op op);
    inline int fast_transfer(bool is_put, void* origin, int ocount, MPI_Datatype otype, int rank, MPI_Aint disp,
                             int tcount, MPI_Datatype ttype);

    // Attributes.
    int rank() const { return rank_; }
    int size() const { return nprocs_; }
    int flavor() const { return flavor_; }
    void* base() const { return base_; }
    MPI_Aint local_size() const { return local_size_; }
    int disp_unit() const { return disp_unit_; }
    Bootstrap& bootstrap() { return *bs_; }
    Engine& engine() { return eng_; }
    AccessMode mode() const { return epochs_.mode(); }
    // For the attribute interface: stable storage of the values MPI returns pointers to.
    MPI_Aint attr_size_ = 0;
    int attr_disp_unit_ = 0, attr_flavor_ = 0, attr_model_ = MPI_WIN_UNIFIED;

    MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;

    // Bytes of per-window bookkeeping held by this process (not the window memory itself,
    // not the kernel's mappings): what grows with the number of ranks.
    std::size_t metadata_bytes() const;

    // How peers are reached (tests, statistics).
    bool peer_mapped(int r) const { return peer(r).mapped != nullptr; }
    unsigned char* peer_address(int r) const { return peer(r).mapped; }  // nullptr: not mapped here
    bool cpu_atomics() const { return cpu_atomics_; }
    bool uses_am() const { return remote_ != nullptr; }  // a remote transport: am or ofi
    bool peer_remote(int r) const { return remote_peer(r); }  // r is reached by it
    int lock_master_of(int r) const { return lock_master(r); }  // (EpochHost::lock_master)
    // Processes sharing my node segment (reached by shared memory), myself included.
    const std::vector<int>& node_ranks() const { return node_ranks_; }
    bool uses_network() const { return net_; }  // ... ofi
    // The transport serving this window's remote peers ("shm" when all are on the node):
    // the info key fastrma_transport.
    const char* transport_name() const { return remote_ ? remote_->name() : "shm"; }
    bool offloads() const { return off_min_ != 0; }  // FASTRMA_OFFLOAD decided yes
    // Rank r's state words when they are in my node segment, else null.
    const std::uint64_t* state_words(int r) const { return remote_peer(r) ? nullptr : state_of(r); }

    // Pools (for tests and statistics).
    Pool<Op>& op_pool() { return epochs_.op_pool(); }
    std::size_t queued_ops() const { return epochs_.queued_ops(); }

private:
    Window(Engine& eng, std::unique_ptr<Bootstrap> bs);
    static int build(Engine& eng, std::unique_ptr<Bootstrap> bs, int flavor, void* user_base, MPI_Aint size,
                     int disp_unit, bool noncontig, std::unique_ptr<Window>* out);
    // build()'s steps, in order (window.cpp): the first exchange, the media, the node
    // segment, my part published, the node peers, what the window does with its media.
    struct BuildPlan;
    int build_exchange(BuildPlan& p);
    void build_media(BuildPlan& p);
    int build_segment(BuildPlan& p);
    int build_publish(BuildPlan& p);
    int build_node_peers(BuildPlan& p);
    int build_finish(BuildPlan& p);
    // build()'s last collective step where peers are off the node segment: the remote
    // transport (network or messages), the table of which peer takes it, its hooks.
    int connect_remote(bool net, void* user_base, MPI_Aint size);
    LocalTarget local_target();  // my part, as transports' target sides apply requests to it
    int apply_local(int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count, const void* src,
                    const void* cmp, void* res);
    // ... and `pieces` runs of count elements, run i at toff + i * stride, origin data and old
    // values packed run after run (LocalTarget::accumulate_strided; checked by the caller).
    int apply_local_strided(int kind, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                            std::uint64_t count, std::uint64_t pieces, const void* src, void* res);
    int dynamic_offset(const char* call, int rank, std::uint64_t addr, std::uint64_t bytes);
    // Is [addr, addr + bytes) inside a region rank has attached (its table as of now)?
    bool dynamic_contains(int rank, std::uint64_t addr, std::uint64_t bytes);
    // A peer reached by the remote transport (off my node segment; on a network window
    // myself too: its atomics are the window's domain). Any rank, in range or not.
    bool remote_peer(int r) const {
        return remote_ && static_cast<unsigned>(r) < static_cast<unsigned>(nprocs_) &&
               (node_tp_->layout.idx[std::size_t(r)] < 0 || (net_ && r == rank_));
    }
    // Whether [addr, addr + bytes) lies in a region attached here now (my own table; the
    // served requests' check, LocalTarget::attached).
    bool attached_here(std::uint64_t addr, std::uint64_t bytes) const;
    // IssueContext::serve: the node transport's serve() from a thread waiting in an op (the
    // beat, unless it is the progress thread).
    static bool serve_hook(void* node);

    IssueContext ctx(int r) const {
        return with_acc_domain(
            IssueContext{tp(r), peer(r), cpu_atomics_, eng_.config().acc_stripes, cma_batch(r), node_tp_->batch_max(),
                         flavor_ == MPI_WIN_FLAVOR_ALLOCATE || flavor_ == MPI_WIN_FLAVOR_SHARED, bulk_max_,
                         node_tp_->serving() ? &Window::serve_hook : nullptr, node_tp_.get()});
    }
    int validate(const OpRequest& rq, Op* op) const;

    // EpochHost.
    int host_rank() const override { return rank_; }
    int host_size() const override { return nprocs_; }
    Transport& tp(int r) const override { return tp_all_ ? *tp_all_ : *tp_[std::size_t(r)]; }
    PeerRegion peer(int r) const override;
    std::uint64_t* my_word(std::size_t w) const override { return my_state_ + w; }
    Transport& group_tp() const override { return *tps_.back(); }
    Bootstrap& group() override { return *bs_; }
    Transport* serving_tp() const override { return remote_.get(); }
    int issue(int rank, const Op& op) override;
    int track_request(int rank, Completion* done) override;
    bool completes_later(const Completion& done) const override { return requests_polled_ && done.any_thread(); }
    void flush_every_target() override;
    int fence_sync() override;
    int lock_master(int r) const override { return lock_master_.empty() ? 0 : lock_master_[std::size_t(r)]; }
    const std::vector<int>* lock_masters() const override { return lock_masters_.empty() ? nullptr : &lock_masters_; }
    // Dynamic windows: requests a target refused since the last look (its region was
    // detached after our cached copy of its table said yes), for ranks [lo, hi): an
    // MPI_ERR_RMA_RANGE naming the first such rank, or MPI_SUCCESS.
    int completion_error(const char* call, int lo, int hi) override;
    void register_lock_wait(int rank) override;  // my bit in rank's lock-waiter bitmap
    void ring_lock_waiters(int rank) override;  // after releasing a lock word of rank's
    int peer_failure() override;  // a peer's process on this host has exited (Engine::exited)
    int rank_gone(int rank);  // the same for one rank (Transport::set_peer_gone)
    // (the progress thread serves without a beat: it dozes between passes)
    bool serve_while_waiting() override { return node_tp_->serve(); }
    // A barrier of my node segment's members on its shared state (a fence's: on one node
    // Bootstrap::fence_barrier; beside a message transport, after its fence_sync).
    int node_barrier();

    void leave_node();  // ~Window: node_ to the next window (node_key_)
    Poll poll();

    Engine& eng_;
    std::unique_ptr<Bootstrap> bs_;
    int rank_ = 0, nprocs_ = 0, flavor_ = 0;
    void* base_ = nullptr;
    MPI_Aint local_size_ = 0;
    int disp_unit_ = 1;
    bool cpu_atomics_ = false;
    int acc_stripes_ = 16;  // Config::acc_stripes, read once (the fast paths' stripe masks)
    // The CPU domain's discipline (transport/shm/acc_domain.hpp; cpu_atomics_ only): the node members'
    // reader words, and the smallest accumulate of a CPU-domain type applied as a plain run.
    AccReaders acc_readers_{};
    std::size_t acc_run_min_ = ~std::size_t(0);
    std::uint64_t* acc_mine() const { return my_state_ + kAccReaders; }
    // The stripes of [off, off + bytes) (> 0 bytes), inline for a range inside one stripe unit.
    std::uint64_t atomics_mask(std::uint64_t off, std::uint64_t bytes) const {
        if ((off ^ (off + bytes - 1)) < kStripeUnit) [[likely]]
            return 1ull << acc_stripe_of(acc_stripes_, off);
        return acc_stripe_mask(acc_stripes_, off, bytes);
    }
    // IssueContext's fields for the CPU domain's discipline.
    IssueContext with_acc_domain(IssueContext c) const {
        if (cpu_atomics_) {
            c.acc_mine = acc_mine();
            c.acc_readers = acc_readers_;
            c.acc_run_min = acc_run_min_;
        }
        return c;
    }

    // Peers, in O(1) memory: one node segment holds every member's state area (and, for
    // allocate and shared windows, the data after all of them); the node transport holds it,
    // its layout and the peers' FRMA_Alloc_mem mappings, and serves the members.
    std::unique_ptr<NodeTransport> node_tp_;
    // Allocate windows: the layout of node_ (flavor, ranks, state bytes, total, each rank's
    // size and disp unit); the next window of the group with the same key takes node_ over
    // (Window::build), left for it when a collective free succeeded (leave_node_).
    std::vector<std::uint64_t> node_key_;
    bool leave_node_ = false;
    bool watch_peers_ = false;  // peers in other processes, watched for exit (pidfd here, a link elsewhere)
    std::vector<pid_t> host_pid_;  // per rank: its pid when on this host (same pid namespace) and not me, else 0
    std::vector<int> link_;  // per rank on another host: its PeerLinks link, -1 if none
    std::uint64_t fences_ = 0;  // node_barrier calls so far
    Transport* tp_all_ = nullptr;  // the transport of every peer, when they agree
    std::vector<Transport*> tp_;  // else one per peer
    std::vector<Transport*> tps_;  // each transport in use once (window-wide operations;
        // the last one synchronizes the group)
    std::uint64_t* my_state_ = nullptr;
    // The transport serving the peers off my node segment (null: every peer on it), and what
    // every peer published (O(p): no shared page holds it for those off the node).
    std::unique_ptr<Transport> remote_;
    std::unique_ptr<Transport> split_;  // node peers of a network window (make_split_transport)
    // remote_ is a network transport: it serves this process too (its atomics on my state
    // words: one atomicity domain with the peers'), so my PeerRegion maps no state.
    bool net_ = false;
    bool net_counted_ = false;  // counted in the progress engine's network windows (net_window)
    bool host_hooked_ = false;  // remote_ is served from the host's progress loop too
    // Create and dynamic windows on shared memory whose part peers cannot map: the node
    // transport serves their requests (transport/shm/served.hpp), also from the host's
    // progress loop (served_hooked_).
    bool served_hooked_ = false;
    void stop_serving();
    std::vector<std::uint64_t> remote_size_, remote_du_;
    std::vector<int> node_ranks_;  // the members, sorted
    // A window that spans nodes with node segments per node: each rank's lock master (the
    // first rank of its node) and the masters, sorted; empty: rank 0 for every rank.
    std::vector<int> lock_master_, lock_masters_;
    std::size_t remote_inline_max_ = 0;  // remote_'s Caps::inline_max

    // Rank r's state words in the node segment: r must be a member (not remote_peer(r)).
    std::uint64_t* state_of(int r) const { return node_tp_->state(r); }

    std::uint64_t disp_unit_of(int r) const { return remote_ ? remote_du_[std::size_t(r)] : node_tp_->disp_unit(r); }
    // The address of [disp, disp + bytes) of rank's part when it is in the node segment
    // (and its offset in the part, when asked), else nullptr.
    inline unsigned char* fast_target(int rank, MPI_Aint disp, std::uint64_t bytes,
                                      std::uint64_t* offset = nullptr) const;
    inline int fast_locked(int rank, std::uint64_t off, unsigned char* dst, const TypeInfo& ti, OpKind op,
                           const void* origin, std::size_t n, void* result);
    inline bool fast_cma(int rank, MPI_Aint disp, void* local, std::uint64_t bytes, bool write);

    // Copies offloaded to the progress thread (src/transport/shm/offload.hpp): the largest
    // sequence this window queued, and the first error of a queued transfer.
    std::size_t off_min_ = 0;  // 0: this window never offloads
    static std::size_t offload_threshold(Engine& eng, const NodeTopology& topo);
    static void set_wait_spin(Engine& eng, const NodeTopology& topo);
    std::size_t off_wake_min_ = 0;
    bool offload_now(std::uint64_t bytes) const {
        return off_min_ && bytes >= off_min_ && (bytes >= off_wake_min_ || eng_.progress().awake());
    }
    // Small cross-memory-attach puts and gets to unmapped peers wait in the node transport's
    // batch of the peer (transport/shm/cma_batch.hpp): r's, made on first use.
    CmaBatch* cma_batch(int r) const {
        return node_tp_->batch(r, [this](int p) { return peer(p); });
    }
    std::size_t bulk_max_ = 0;  // largest contiguous transfer through a peer's served bulk area (0: none)
    int complete_request(int r);  // a request-based op to r: complete before it is handed out
    // Request-based operations in flight: each waits for its transport's completion token.
    struct PendingRequest {
        Completion* done;
        int rank;
        std::uint64_t token;
    };
    SpinLock req_mu_;
    std::vector<PendingRequest> requests_;  // (req_mu_)
    std::atomic<int> n_requests_{0};
    bool requests_polled_ = false;  // a progress thread or the host hook runs poll_requests
    void finish_requests();  // every op complete (free): signal what is still tracked
public:
    // Signals the tracked requests whose operations completed; true if any. Never blocks.
    bool poll_requests();

private:
    void acc_order() { node_tp_->order_accumulates(); }

    // Dynamic windows: my attached regions live in my state segment (seqlock); an origin on
    // the node reads a peer's table there on every access, an am origin keeps a copy of it
    // (re-read on a miss; the target checks again).
    struct Region {
        std::uint64_t base, size;
    };
    struct RegionCache {
        std::uint64_t version = ~0ull;
        std::vector<Region> regions;
    };
    SpinLock dyn_mu_;  // am peers' cached tables (a node peer's is read in place, unlocked)
    std::unordered_map<int, RegionCache> dyn_cache_;  // only peers actually accessed
    std::size_t dyn_capacity_ = 0;
    std::size_t dyn_word0_ = 0;

    SpinLock dyn_table_mu_;  // attach / detach of my regions, one at a time
    Epochs epochs_;
    int poller_id_ = 0;
};

}  // namespace fastrma::detail

#include "engine/window_fast.hpp"
