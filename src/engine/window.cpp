// window.cpp — see window.hpp. Order inside each sync call: check the state,
// complete what must complete, transition.
#include "engine/window.hpp"

#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "base/errors.hpp"
#include "epochs/lock_protocol.hpp"
#include "ops/layout.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "progress/host_progress.hpp"
#include "transport/select.hpp"
#include "transport/shm/arena.hpp"
#include "transport/shm/cma.hpp"

namespace fastrma::detail {

namespace {
// A process alone in its node segment (every peer remote): its allocate part starts half a
// page in. The host MPI copies between it and user buffers with rep movsb (CMA, single-copy
// receives), which is slow at a distance of 1..31 bytes past a page multiple
// (ops/copy.hpp); page-aligned buffers and large malloc'ed ones (page offset 16) are
// then far from that distance both ways.
constexpr std::size_t kAmDataOffset = 2048;
// The class of a call that fails because a peer died: MPICH's process-failure class, where
// the host has one; Open MPI 4.1 (without ULFM) has none, so MPI_ERR_OTHER.
#ifdef MPIX_ERR_PROC_FAILED
constexpr int kPeerDied = MPIX_ERR_PROC_FAILED;
#else
constexpr int kPeerDied = MPI_ERR_OTHER;
#endif

ElemKind elem_kind(Repr r) {
    switch (r) {
    case Repr::i8:
        return ElemKind::i8;
    case Repr::i16:
        return ElemKind::i16;
    case Repr::i32:
        return ElemKind::i32;
    case Repr::i64:
        return ElemKind::i64;
    case Repr::u8:
        return ElemKind::u8;
    case Repr::u16:
        return ElemKind::u16;
    case Repr::u32:
        return ElemKind::u32;
    case Repr::u64:
        return ElemKind::u64;
    case Repr::f32:
        return ElemKind::f32;
    case Repr::f64:
        return ElemKind::f64;
    case Repr::f_long:
        return ElemKind::f_long;
    case Repr::c32:
        return ElemKind::c32;
    case Repr::c64:
        return ElemKind::c64;
    case Repr::c_long:
        return ElemKind::c_long;
    default:
        return ElemKind::none;  // pair and opaque types: the accumulate lock
    }
}

// Network windows: the basic types whose every accumulate-family operation the network
// applies atomically by itself, agreed by every process (a type is native everywhere or
// nowhere). The rest take the target's accumulate-lock stripes through the same network's
// atomics, so each location has one atomicity domain.
void declare_native_types(Transport& t, Bootstrap& b) {
    constexpr std::size_t kWords = 4;  // type ids are 8 bits
    std::uint64_t can[kWords] = {};
    for (std::size_t id = 0; id < type_count() && id < 64 * kWords; ++id) {
        const TypeInfo* ti = type_by_id(std::uint8_t(id));
        if (!ti) continue;
        std::uint32_t ops = 0;
        for (int k = 0; k < int(OpKind::invalid); ++k)
            if (check_accumulate(op_handle(OpKind(k)), ti->type, nullptr) == MPI_SUCCESS) ops |= 1u << k;
        const bool cas = check_compare_and_swap(ti->type, nullptr) == MPI_SUCCESS;
        if (ops && t.declare_native_type(int(id), elem_kind(ti->repr), ops, cas)) can[id / 64] |= 1ull << (id % 64);
    }
    std::vector<std::uint64_t> all(kWords * std::size_t(b.size()));
    b.allgather(can, sizeof can, all.data());
    for (int r = 0; r < b.size(); ++r)
        for (std::size_t w = 0; w < kWords; ++w) can[w] &= all[std::size_t(r) * kWords + w];
    for (std::size_t id = 0; id < 64 * kWords; ++id)
        if (can[id / 64] >> (id % 64) & 1) t.enable_native_type(int(id));
}
}  // namespace

Window::Window(Engine& eng, std::unique_ptr<Bootstrap> bs)
    : eng_(eng),
      bs_(std::move(bs)),
      rank_(bs_->rank()),
      nprocs_(bs_->size()),
      epochs_(*this, eng.progress(), eng.config(), &eng.op_pool(), &eng.target_pool()) {
    node_tp_ = std::make_unique<NodeTransport>(
        eng.offload(), [&eng] { eng.progress().wake(); }, nprocs_, 0, eng.config().acc_stripes);
    node_tp_->peer_failure = [this] { return peer_failure(); };
    node_tp_->ring = [&eng](const SegmentExport& bell) { return eng.ring_peer(bell); };
    off_wake_min_ = eng.config().offload_wake_min;
    acc_stripes_ = eng.config().acc_stripes;
}

// A barrier of the node segment's members: every member adds one to the first member's
// kFenceArrive, then waits until it counts one arrival per member per barrier so far
// (stores before it are visible after it: acquire/release on the word). Spins, then
// yields; a member that died fails it.
int Window::node_barrier() {
    const std::uint64_t want = std::uint64_t(node_ranks_.size()) * ++fences_;
    std::uint64_t* word = state_of(node_ranks_[0]) + kFenceArrive;
    __atomic_fetch_add(word, 1, __ATOMIC_ACQ_REL);
    SpinWait spin;
    ProgressEngine& pe = eng_.progress();
    for (unsigned i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) < want; ++i) {
        if (!pe.running() && i % 64 == 0) pe.progress_once();  // other windows' requests
        if (node_tp_->serving() && node_tp_->serve_requests(true)) spin.progressed();  // peers draining to my part
        if (!spin.yielding()) {
            spin.idle();
            continue;
        }
        sched_yield();
        if (i % 4096 == 0)
            if (int e = peer_failure()) return e;
    }
    return MPI_SUCCESS;
}

int Window::peer_failure() {
    if (!watch_peers_) return MPI_SUCCESS;
    for (int r = 0; r < nprocs_; ++r)
        if (int e = rank_gone(r)) return e;
    return MPI_SUCCESS;
}

int Window::rank_gone(int r) {
    if (!watch_peers_ || r < 0 || std::size_t(r) >= host_pid_.size()) return MPI_SUCCESS;
    const pid_t pid = host_pid_[std::size_t(r)];
    const int link = link_[std::size_t(r)];
    if (pid ? !eng_.exited(pid) : link < 0 || !eng_.links().gone(link)) return MPI_SUCCESS;
    return raise(kPeerDied,
                 "rank %d of the window (%s) has died: the locks, accumulate stripes and epochs it took part in "
                 "cannot complete, and the window is unusable",
                 r, pid ? ("pid " + std::to_string(pid)).c_str() : "on another host: its connection closed");
}

namespace {
int cpuset_pus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}
}  // namespace

// FASTRMA_OFFLOAD: a progress thread without a processing unit of its own can only take
// time from the computation it is meant to overlap (docs/progress.md).
std::size_t Window::offload_threshold(Engine& eng, const NodeTopology& topo) {
    const std::string& mode = eng.config().offload;
    if (!eng.offload() || mode == "off") return 0;
    if (mode == "auto" && cpuset_pus() <= int(topo.local_ranks.size())) return 0;
    return eng.config().offload_min;
}

// FASTRMA_WAIT_SPIN_US (spin_wait.hpp): auto lowers the process's budget for good once a
// window has more ranks on this node than we have processing units.
void Window::set_wait_spin(Engine& eng, const NodeTopology& topo) {
    const int us = eng.config().wait_spin_us;
    if (us >= 0)
        g_wait_spin_ns.store(std::uint64_t(us) * 1000, std::memory_order_relaxed);
    else if (int(topo.local_ranks.size()) > cpuset_pus())
        g_wait_spin_ns.store(kWaitSpinOversubscribedNs, std::memory_order_relaxed);
}

Window::~Window() {
    // Nothing may copy into or out of memory about to be unmapped. (Batched transfers are
    // dropped: free drained them before its barrier; after it, peers' memory may be gone.)
    node_tp_->wait_offloads();
    bs_->set_fence_barrier(nullptr);
    if (host_hooked_) host_progress_remove(remote_.get());
    if (remote_) eng_.progress().unwatch_fd(remote_.get());
    if (net_counted_) eng_.progress().net_window(false);
    net_counted_ = false;
    stop_serving();
    finish_requests();
    if (poller_id_) eng_.progress().remove_poller(poller_id_);
    if (leave_node_) leave_node();
}

struct NodeLeftover {
    ShmSegment node;
    std::vector<std::uint64_t> key;
};

// What every process of a new window sends the others first (Window::build_exchange): its
// verdict on the call, its part, and the settings that shape the shared state layout.
struct BuildSizes {
    int err;
    int disp_unit;
    std::uint64_t size;
    int am;  // the farthest medium it needs: 0 node, 1 network, 2 messages
    int acc_stripes;
    std::uint64_t dyn_regions;
    int attach;
    std::uint64_t served_bulk;
    std::int64_t pid;
    unsigned long long pid_ns;  // pid_namespace_key(): pids comparable with mine when equal
    LinkAddress link;  // where it listens for peers on other hosts (PeerLinks)
};

// After a collective free nobody touches this window's memory any more: clear my sync words
// (locks, PSCW counters, stripes, bitmaps; the info words stay, they describe the same
// layout) and leave the segment, mapped, to the next window of the group with the same key.
// Every member clears its words before it enters that window's first exchange.
void Window::leave_node() {
    Leftover* slot = bs_->leftover();
    if (!slot || !node_tp_->segment.data()) return;
    std::uint64_t* mine = state_of(rank_);
    std::memset(mine, 0, kInfoPid * 8);
    std::memset(mine + kLockKick, 0, node_tp_->layout.state_bytes - kLockKick * 8);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto lo = std::make_shared<NodeLeftover>();
    lo->node = std::move(node_tp_->segment);
    lo->key = std::move(node_key_);
    slot->bytes = lo->node.size();
    slot->what = std::move(lo);
}

int Window::allocate(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit, void** baseptr,
                     std::unique_ptr<Window>* out) {
    int rc = build(eng, std::move(bs), MPI_WIN_FLAVOR_ALLOCATE, nullptr, size, disp_unit, false, out);
    if (rc == MPI_SUCCESS && baseptr) *baseptr = (*out)->base_;
    return rc;
}

int Window::create(Engine& eng, std::unique_ptr<Bootstrap> bs, void* base, MPI_Aint size, int disp_unit,
                   std::unique_ptr<Window>* out) {
    return build(eng, std::move(bs), MPI_WIN_FLAVOR_CREATE, base, size, disp_unit, false, out);
}

int Window::allocate_shared(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit, bool noncontig,
                            void** baseptr, std::unique_ptr<Window>* out) {
    int rc = build(eng, std::move(bs), MPI_WIN_FLAVOR_SHARED, nullptr, size, disp_unit, noncontig, out);
    // A part of size 0 has no base (as MPICH answers; shared_query says the same).
    if (rc == MPI_SUCCESS && baseptr) *baseptr = size > 0 ? (*out)->base_ : nullptr;
    return rc;
}

int Window::create_dynamic(Engine& eng, std::unique_ptr<Bootstrap> bs, std::unique_ptr<Window>* out) {
    return build(eng, std::move(bs), MPI_WIN_FLAVOR_DYNAMIC, nullptr, 0, 1, false, out);
}

namespace {
const char* create_call(int flavor) {
    switch (flavor) {
    case MPI_WIN_FLAVOR_ALLOCATE:
        return "FRMA_Win_allocate";
    case MPI_WIN_FLAVOR_SHARED:
        return "FRMA_Win_allocate_shared";
    case MPI_WIN_FLAVOR_DYNAMIC:
        return "FRMA_Win_create_dynamic";
    default:
        return "FRMA_Win_create";
    }
}
std::size_t page_round(std::size_t n) {
    const std::size_t pg = std::size_t(sysconf(_SC_PAGESIZE));
    return (n + pg - 1) / pg * pg;
}

// Whether this process may attach to each node peer of the group (pidfd_getfd and
// cross-memory attach): 1 yes, 2 refused somewhere. Probed on the peers themselves (a probe
// on oneself always passes), collectively the first time a group asks — every member asks
// then, since they share the group's topology — and kept with the group's topology.
int node_attach(Bootstrap& b, NodeTopology& topo) {
    if (topo.attach) return topo.attach;
    bool shared_node = false;
    for (std::size_t r = 0; r < topo.node_of.size() && !shared_node; ++r)
        for (std::size_t q = r + 1; q < topo.node_of.size() && !shared_node; ++q)
            shared_node = topo.node_of[r] == topo.node_of[q];
    int verdict = 1;
    if (shared_node) {
        const AttachProbe mine = attach_probe_self();
        std::vector<AttachProbe> all(std::size_t(b.size()));
        b.allgather(&mine, sizeof mine, all.data());
        for (int r : topo.local_ranks)
            if (r != b.rank() && attach_probe(all[std::size_t(r)]) != 0) verdict = 2;
    }
    topo.attach = verdict;
    if (NodeTopology* cache = b.topology_cache()) cache->attach = verdict;
    return verdict;
}

// Every member learns every other's verdict; a failure anywhere fails the call everywhere
// (with the local message where the failure was local), so nobody is left waiting.
int agree(Bootstrap& b, int err, const std::string& msg, const char* call) {
    std::vector<int> errs(std::size_t(b.size()));
    b.allgather(&err, sizeof err, errs.data());
    if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
    for (int r = 0; r < b.size(); ++r)
        if (errs[std::size_t(r)]) return raise(errs[std::size_t(r)], "%s: window creation failed at rank %d", call, r);
    return MPI_SUCCESS;
}
}  // namespace

// What the steps of build() decide and exchange, in the order they decide it.
struct Window::BuildPlan {
    // The call's arguments.
    int flavor;
    void* user_base;
    MPI_Aint size;
    int disp_unit;
    bool noncontig;
    const char* call;
    bool is_alloc, is_shared, is_dynamic, is_create;
    // 1. (exchange)
    NodeTopology topo{};
    int err = MPI_SUCCESS;  // a local failure, agreed at the next collective step
    std::string msg{};  // its message
    BuildSizes mine{};
    std::vector<BuildSizes> sizes{};
    std::shared_ptr<NodeLeftover> left{};
    // 2. (media)
    bool remote = false, net = false, own_nodes = false, alone = false;
    ShmMethod method = ShmMethod::automatic;
    std::vector<int> members{};
    // 3. (segment)
    std::size_t bulk_word0 = 0;
    bool has_data = false, reused = false, uniform = false;
    std::vector<std::uint64_t> doff{};

    void keep_message() {
        if (err) msg = last_error_message();
    }
    // The agreed failure after an exchange: mine (its message) or rank r's.
    int failed(int their_err, int r) const {
        if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
        return raise(their_err, "%s: window creation failed at rank %d", call, r);
    }
};

int Window::build(Engine& eng, std::unique_ptr<Bootstrap> bs, int flavor, void* user_base, MPI_Aint size, int disp_unit,
                  bool noncontig, std::unique_ptr<Window>* out) {
    out->reset();
    std::unique_ptr<Window> w(new Window(eng, std::move(bs)));
    w->rank_ = w->bs_->rank();
    w->nprocs_ = w->bs_->size();
    w->flavor_ = flavor;
    BuildPlan p{flavor,
                user_base,
                size,
                disp_unit,
                noncontig,
                create_call(flavor),
                flavor == MPI_WIN_FLAVOR_ALLOCATE,
                flavor == MPI_WIN_FLAVOR_SHARED,
                flavor == MPI_WIN_FLAVOR_DYNAMIC,
                flavor == MPI_WIN_FLAVOR_CREATE};
    // Each step returns non-zero only where every process returns alike (after an exchange).
    if (int rc = w->build_exchange(p)) return rc;
    w->build_media(p);
    if (int rc = w->build_segment(p)) return rc;
    if (int rc = w->build_publish(p)) return rc;
    if (int rc = w->build_node_peers(p)) return rc;
    if (int rc = w->build_finish(p)) return rc;
    *out = std::move(w);
    return MPI_SUCCESS;
}

// 1. Local checks and each peer's medium; the verdict travels with the sizes, so that a bad
// argument on one rank fails the call everywhere instead of hanging the others. (The arrays
// of build() are temporaries: the window keeps O(1) per peer on windows of one node, O(p)
// words where peers are off the node.)
int Window::build_exchange(BuildPlan& p) {
    Engine& eng = eng_;
    Bootstrap& b = *bs_;
    const int n = nprocs_, me = rank_;
    const char* call = p.call;
    p.topo = discover_topology(b);
    const int attach = node_attach(b, p.topo);
    off_min_ = offload_threshold(eng, p.topo);
    set_wait_spin(eng, p.topo);
    if (p.size < 0)
        p.err = raise(MPI_ERR_SIZE, "%s: size %ld is negative", call, long(p.size));
    else if (p.disp_unit <= 0)
        p.err = raise(MPI_ERR_DISP, "%s: disp_unit %d must be positive", call, p.disp_unit);
    else if (p.is_create && p.size > 0 && !p.user_base)
        p.err = raise(MPI_ERR_ARG, "%s: base is NULL but size is %ld", call, long(p.size));
    else if (p.is_shared && !p.topo.all_local())
        p.err = raise(MPI_ERR_RMA_SHARED, "%s: the communicator spans several nodes; shared windows need one", call);
    int wants_am = 0;  // the farthest medium this process needs (0 node, 1 network, 2 messages)
    for (int r = 0; r < n && !p.err; ++r) {
        Medium m = Medium::node;
        p.err =
            select_medium(eng.config().transport, eng.config().ofi_provider, p.topo, r, p.is_shared, p.is_dynamic, &m);
        wants_am = std::max(wants_am, m == Medium::message ? 2 : m == Medium::network ? 1 : 0);
    }
    p.keep_message();
    // The settings that shape the shared state layout travel too: every process must agree.
    p.mine = BuildSizes{p.err,
                        p.disp_unit,
                        std::uint64_t(p.size < 0 ? 0 : p.size),
                        wants_am,
                        eng.config().acc_stripes,
                        p.is_dynamic ? std::uint64_t(eng.config().dyn_regions) : 0,
                        attach,
                        p.is_create || p.is_dynamic ? std::uint64_t(eng.config().served_bulk) : 0,
                        std::int64_t(getpid()),
                        pid_namespace_key(),
                        eng.links().local()};
    p.sizes.resize(std::size_t(n));
    b.allgather(&p.mine, sizeof p.mine, p.sizes.data());
    for (int r = 0; r < n; ++r)
        if (p.sizes[std::size_t(r)].err) return p.failed(p.sizes[std::size_t(r)].err, r);
    // Parameters every process of a window must share (its state words' layout).
    auto same = [&](const char* var, unsigned long long mine, unsigned long long theirs, int r) {
        if (mine == theirs) return int(MPI_SUCCESS);
        return raise(
            MPI_ERR_OTHER,
            "%s: %s is %llu here (rank %d) and %llu at rank %d; every process of a window needs the same value", call,
            var, mine, me, theirs, r);
    };
    for (int r = 0; r < n; ++r) {
        const BuildSizes& z = p.sizes[std::size_t(r)];
        if (int e = same("FASTRMA_ACC_STRIPES", unsigned(p.mine.acc_stripes), unsigned(z.acc_stripes), r)) return e;
        if (int e = same("FASTRMA_DYN_REGIONS", p.mine.dyn_regions, z.dyn_regions, r)) return e;
        if (int e = same("FASTRMA_SERVED_BULK", p.mine.served_bulk, z.served_bulk, r)) return e;
    }
    // The window's processes on this host (node members or not: am and ofi peers too) are
    // watched for exit from now on (alive: they just sent), so that waits for them fail
    // instead of hanging once one dies.
    // Those on other hosts, through a connection their kernel closes when they die.
    host_pid_.assign(std::size_t(n), 0);
    link_.assign(std::size_t(n), -1);
    for (int r = 0; r < n; ++r) {
        const BuildSizes& z = p.sizes[std::size_t(r)];
        if (r == me || z.pid == p.mine.pid) continue;
        if (z.pid_ns != p.mine.pid_ns) {
            link_[std::size_t(r)] = eng.links().connect(z.pid_ns, z.pid, z.link);
            watch_peers_ = watch_peers_ || link_[std::size_t(r)] >= 0;
            continue;
        }
        host_pid_[std::size_t(r)] = pid_t(z.pid);
        eng.watch(pid_t(z.pid));
        watch_peers_ = true;
    }
    // What the last window freed on this group left (leave_node): taken below or dropped.
    if (Leftover* slot = b.leftover(); slot && slot->what) {
        p.left = std::static_pointer_cast<NodeLeftover>(std::move(slot->what));
        *slot = Leftover{};
    }
    return MPI_SUCCESS;
}

// 2. The window's media, agreed by all: shared memory among the processes of a node; for
// peers off the node one message or network transport, messages if any process needs them
// (they reach everything), else the network. Where some process may not attach to a node
// peer (docs/guarantees.md), nobody attaches: segments are named (shm_open), and windows on
// user memory, which only attach reaches, use messages for every peer (unless
// FASTRMA_TRANSPORT=shm, which then fails below).
void Window::build_media(BuildPlan& p) {
    const int n = nprocs_, me = rank_;
    int farthest = 0;
    bool attach_ok = true;
    for (const BuildSizes& z : p.sizes) {
        farthest = std::max(farthest, z.am);
        attach_ok = attach_ok && z.attach == 1;
    }
    const std::string& want = eng_.config().transport;
    const bool no_attach = !attach_ok && (p.is_create || p.is_dynamic) && want != "shm";
    if (no_attach) farthest = 2;
    p.method = eng_.config().shm_method;
    if (!attach_ok && p.method == ShmMethod::automatic) p.method = ShmMethod::shm_open;
    p.remote = farthest != 0;
    p.net = farthest == 1;
    // My node segment's members (sorted): my node's processes, or only me where every peer
    // is reached by the remote transport (FASTRMA_TRANSPORT=am/ofi; no attach; a dynamic
    // window on the network, whose regions only the network names for atomics).
    p.members = p.topo.local_ranks;
    p.own_nodes = no_attach || want == "am" || want == "ofi" || (p.net && p.is_dynamic);
    if (p.remote && p.own_nodes) p.members = {me};
    // Nodes whose ranks share memory, on a window that spans nodes: a lock master per node
    // (the first rank of each; EpochHost::lock_master), so that a lock on a node peer takes
    // only words on that node. Every process decides alike (agreed media, one topology).
    if (p.remote && !p.own_nodes) {
        std::vector<int> first(std::size_t(n), -1);  // by node index (< n)
        for (int r = 0; r < n; ++r) {
            int& f = first[std::size_t(p.topo.node_of[std::size_t(r)])];
            if (f < 0) {
                f = r;
                lock_masters_.push_back(r);
            }
            lock_master_.push_back(f);
        }
    }
    p.alone = p.remote && p.members.size() == 1;
    if (p.remote) {
        node_tp_->layout.idx.assign(std::size_t(n), -1);
        for (std::size_t i = 0; i < p.members.size(); ++i) node_tp_->layout.idx[std::size_t(p.members[i])] = int(i);
        if (!p.net && (p.err = message_transport_usable(*bs_, p.call))) p.keep_message();
    }
}

// 3. The node segment: the members' state areas, then (allocate, shared) their data parts —
// consecutive for a contiguous shared window, page-aligned otherwise (a process alone in its
// segment: half a page in, see kAmDataOffset).
int Window::build_segment(BuildPlan& p) {
    Bootstrap& b = *bs_;
    const int n = nprocs_, me = rank_;
    NodeTransport::Layout& lay = node_tp_->layout;
    const int leader = p.members[0];
    const std::uint64_t my_index = std::uint64_t(lay.idx.empty() ? me : lay.idx[std::size_t(me)]);
    dyn_capacity_ = p.is_dynamic ? eng_.config().dyn_regions : 0;
    dyn_word0_ = dyn_table_word0(n);
    lay.state_bytes = page_round(8 * (dyn_table_word0(n) + (p.is_dynamic ? kDynHeaderWords + 2 * dyn_capacity_ : 0)));
    // Create and dynamic windows with node peers: the served bulk area after that,
    // page-aligned (served.hpp).
    if (const std::size_t bw = served::bulk_words(std::size_t(p.mine.served_bulk)); bw && !p.alone) {
        p.bulk_word0 = lay.state_bytes / 8;
        lay.state_bytes = page_round(lay.state_bytes + 8 * bw);
    }
    p.has_data = p.is_alloc || p.is_shared;
    const bool padded = !(p.is_shared && !p.noncontig);
    p.doff.assign(std::size_t(n), kNoData);
    std::uint64_t total = std::uint64_t(p.members.size()) * lay.state_bytes;
    p.uniform = !p.remote;
    for (int r : p.members) {
        const BuildSizes& z = p.sizes[std::size_t(r)];
        p.uniform = p.uniform && z.size == p.sizes[0].size && z.disp_unit == p.sizes[0].disp_unit;
        if (!p.has_data) continue;
        if (p.alone) total += kAmDataOffset;
        p.doff[std::size_t(r)] = total;
        total += padded ? page_round(z.size) : z.size;
    }
    total = page_round(total);
    const std::uint64_t my_off = my_index * lay.state_bytes;
    const std::uint64_t my_data_len =
        p.has_data ? (padded ? page_round(p.sizes[std::size_t(me)].size) : p.sizes[std::size_t(me)].size) : 0;
    // Allocate windows on one node take the segment of the last window freed on this group
    // when its layout is the same (GA creates and frees arrays of one shape again and
    // again): its pages are reserved and mapped everywhere, its owners cleared their sync
    // words before the exchange above, and its info words already say what build_publish
    // would write. Every member decides alike (same leftover, same sizes), so nothing more
    // is exchanged.
    if (p.is_alloc && !p.remote) {
        node_key_ = {std::uint64_t(p.flavor), std::uint64_t(n), lay.state_bytes, total};
        for (const BuildSizes& z : p.sizes) {
            node_key_.push_back(z.size);
            node_key_.push_back(std::uint64_t(z.disp_unit));
        }
    }
    p.reused = p.left && p.is_alloc && !p.remote && p.left->key == node_key_;
    if (p.reused) node_tp_->segment = std::move(p.left->node);
    p.left.reset();
    if (!p.reused && !p.err && me == leader) {
        // Pages are reserved by their owners (first touch on the owner's NUMA node).
        p.err = node_tp_->segment.create(total, p.method, false);
        if (!p.err) p.err = node_tp_->segment.reserve_range(my_off, lay.state_bytes);
        if (!p.err && my_data_len) p.err = node_tp_->segment.reserve_range(p.doff[std::size_t(me)], my_data_len);
        p.keep_message();
    }
    struct Hello {
        int err;
        SegmentExport seg;
    };
    Hello hello{p.err, me == leader && !p.err ? node_tp_->segment.export_info() : SegmentExport{}};
    std::vector<Hello> hellos(static_cast<std::size_t>(n));
    if (!p.reused) {
        b.allgather(&hello, sizeof hello, hellos.data());
        for (int r = 0; r < n; ++r)
            if (hellos[std::size_t(r)].err) return p.failed(hellos[std::size_t(r)].err, r);
    }
    if (!p.reused && me != leader) {
        const SegmentExport& seg = hellos[std::size_t(leader)].seg;
        p.err = node_tp_->segment.map_peer(seg, my_off, lay.state_bytes);
        if (!p.err && my_data_len)
            p.err = node_tp_->segment.map_peer(seg, std::size_t(p.doff[std::size_t(me)]), my_data_len);
    }
    if (!p.err && eng_.config().fault == "kill_after_segment" && me == n - 1 && n > 1)
        kill(getpid(), SIGKILL);  // fault injection: die while the segment is still named
    lay.base = node_tp_->segment.data();
    if (p.bulk_word0 && !p.err)
        node_tp_->set_served_bulk(p.bulk_word0, std::size_t(p.mine.served_bulk), p.members.size());
    return MPI_SUCCESS;
}

// 4. Publish what node peers need to know about my part, in my state page.
int Window::build_publish(BuildPlan& p) {
    const int me = rank_;
    if (!p.err)
        base_ = p.is_create ? p.user_base : p.has_data ? node_tp_->layout.base + p.doff[std::size_t(me)] : nullptr;
    if (!p.err && !p.reused) {
        std::uint64_t* info = state_of(me);
        info[kInfoPid] = std::uint64_t(getpid());
        info[kInfoBase] = reinterpret_cast<std::uint64_t>(base_);
        info[kInfoSize] = p.is_dynamic ? ~0ull : std::uint64_t(p.size);
        info[kInfoDispUnit] = std::uint64_t(p.disp_unit);
        info[kInfoDataOff] = p.doff[std::size_t(me)];
        ArenaHit hit;
        if (p.is_create && p.size > 0 && arena_lookup(p.user_base, std::size_t(p.size), &hit)) {
            static_assert(sizeof(SegmentExport) <= kArenaSegWords * 8);
            info[kInfoArena] = 1;
            info[kInfoArenaOff] = hit.offset;
            std::memcpy(&info[kInfoArenaSeg], &hit.seg, sizeof hit.seg);
        }
        const SegmentExport bell = eng_.bell_export();
        std::memcpy(&info[kInfoBell], &bell, sizeof bell);
        info[kServedBulkBytes] = p.bulk_word0 ? p.mine.served_bulk : 0;
        __atomic_store_n(&info[kServedBulkWord], std::uint64_t(p.bulk_word0), __ATOMIC_RELEASE);
    }
    p.keep_message();
    if (!p.reused) return agree(*bs_, p.err, p.msg, p.call);  // also: everyone has published
    return MPI_SUCCESS;
}

// 5. Node peers: create windows map their FRMA_Alloc_mem parts and probe cross-memory
// attach (the window's processes on this host are watched since build_exchange).
int Window::build_node_peers(BuildPlan& p) {
    const int me = rank_;
    int err = MPI_SUCCESS;
    node_tp_->segment.seal();  // everyone has mapped: the name (shm_open method) can go
    node_ranks_ = p.members;
    Window* const self = this;
    if (!p.remote) bs_->set_fence_barrier([self] { return self->node_barrier(); });
    if (!p.is_create) return MPI_SUCCESS;
    // (collective: every member of the window agrees)
    for (int r : p.members) {
        if (err) break;
        const std::uint64_t* info = state_of(r);
        if (r == me || info[kInfoSize] == 0) continue;
        if (info[kInfoArena]) {
            SegmentExport ex;
            std::memcpy(static_cast<void*>(&ex), &info[kInfoArenaSeg], sizeof ex);
            err = node_tp_->arena_maps[r].map_peer(ex);
        } else if (pid_t(info[kInfoPid]) != getpid()) {
            if (int e = cma_probe(pid_t(info[kInfoPid]), info[kInfoBase]); e != 0)
                err = raise(MPI_ERR_UNSUPPORTED_OPERATION,
                            "%s: cross-memory attach to rank %d (pid %d) refused: %s; create "
                            "windows need ptrace access between the ranks",
                            p.call, r, int(info[kInfoPid]), std::strerror(e));
        }
    }
    return agree(*bs_, err, err ? last_error_message() : std::string(), p.call);
}

// 6. What the window does with its media: lock words, atomicity domain, node helpers,
// attributes, the remote transport, the poller.
int Window::build_finish(BuildPlan& p) {
    Engine& eng = eng_;
    const int n = nprocs_;
    // Symmetric allocation on one node: rank r's data is at data0 + r * dstride (no lookups).
    NodeTransport::Layout& lay = node_tp_->layout;
    lay.uniform = p.uniform && p.has_data;
    if (lay.uniform) {
        lay.uni_size = p.sizes[0].size;
        lay.uni_du = std::uint64_t(p.sizes[0].disp_unit);
        lay.data0 = p.doff[0];
        lay.dstride = n > 1 ? p.doff[1] - p.doff[0] : 0;
    }
    my_state_ = state_of(rank_);
    // Every peer on shared memory, or node peers beside off-node peers whose agents take
    // their own words with CPU atomics too (am, not the network's atomics): the locks on
    // node peers take the mapped words directly (epochs.hpp).
    if (!p.remote)
        epochs_.map_states(node_tp_.get(), false);
    else if (!p.own_nodes && !p.net && !p.alone)
        epochs_.map_states(node_tp_.get(), true);
    // The atomicity domain of my part, the same at every node member (they see the same
    // parts): CPU atomics when every node part is mapped here (allocate, shared, and create
    // windows whose every part is FRMA_Alloc_mem memory), else the striped accumulate lock.
    // Accumulates from off-node origins are applied here by my CPU with the same rule
    // (apply_local), so node and off-node origins meet in one domain. A process alone in its
    // segment takes the lock for every type (its transport applies every peer's accumulate
    // here, vectorised under the stripes); on the network nothing is applied by CPU atomics.
    cpu_atomics_ = p.has_data;
    if (p.is_create) {
        bool every = true;
        for (int r : p.members) every = every && (p.sizes[std::size_t(r)].size == 0 || peer(r).mapped);
        cpu_atomics_ = every;
    }
    if (p.alone || p.net) cpu_atomics_ = false;
    if (cpu_atomics_) {
        // Every member's state area lies in the node segment, member i's at base + i * state_bytes.
        acc_readers_ = AccReaders{node_tp_->layout.base, node_tp_->layout.state_bytes, int(p.members.size())};
        acc_run_min_ = eng.config().acc_run_min;
    }
    // What the node's CPUs do for each other beside the transports (batched cross-memory
    // transfers with their accumulates, served requests) needs node peers, and on a network
    // window would apply accumulates outside the network's domain.
    const bool node_helpers = (p.is_create || p.is_dynamic) && !p.alone && !p.net;
    // Small puts and gets to parts not mapped here wait in a batch per peer: one syscall
    // at the next completion point instead of one each (transport/shm/cma_batch.hpp).
    if (node_helpers) node_tp_->set_batch_max(eng.config().cma_batch);
    // Large and strided transfers to a peer waiting in MPI: through its served bulk area.
    if (node_helpers && eng.config().served_bulk) bulk_max_ = eng.config().served_bulk_max;
    // Node peers reach my part by cross-memory attach: their fetch_and_op, compare_and_swap
    // and small puts and gets are served here while a thread of mine is inside MPI
    // (transport/shm/served.hpp).
    info.alloc_shared_noncontig = p.is_shared && p.noncontig;
    local_size_ = p.is_dynamic ? 0 : p.size;
    if (node_helpers && !cpu_atomics_) {
        NodeTransport* const node = node_tp_.get();
        node->serve_for(local_target());
        if (eng.config().host_progress)
            served_hooked_ = host_progress_add(
                node, [node] { return node->serve(); }, HookCalls::no_mpi);
    }
    disp_unit_ = p.disp_unit;
    attr_size_ = local_size_;
    attr_disp_unit_ = p.disp_unit;
    attr_flavor_ = p.flavor;
    if (p.remote) {
        for (const BuildSizes& z : p.sizes) {
            remote_size_.push_back(p.is_dynamic ? ~0ull : z.size);
            remote_du_.push_back(std::uint64_t(z.disp_unit));
        }
        if (int err = connect_remote(p.net, p.user_base, p.size)) return err;  // collective
    } else {
        tp_all_ = node_tp_.get();
        tps_ = {tp_all_};
    }
    Window* const self = this;
    requests_polled_ = host_hooked_ || eng.progress().running();
    poller_id_ = eng.progress().add_poller([self] { return self->poll(); });
    eng.live_windows().fetch_add(1);
    bump(Stat::windows_created);
    if (p.remote) bump(p.net ? Stat::windows_ofi : Stat::windows_am);
    return MPI_SUCCESS;
}

PeerRegion Window::peer(int r) const {
    PeerRegion p;
    p.rank = r;
    if (remote_peer(r)) {
        p.size = remote_size_[std::size_t(r)];
        if (r != rank_) return p;
        // Myself on a network window: my words only by its atomics (no state here).
        if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC)
            p.pid = getpid();  // my attached memory, by address
        else
            p.mapped = static_cast<unsigned char*>(base_);
        return p;
    }
    const std::uint64_t* info = state_of(r);
    // (A network window: the peer's words only by the network's atomics, SplitTransport.)
    p.state = net_ ? nullptr : state_of(r);
    const NodeTransport::Layout& lay = node_tp_->layout;
    if (lay.uniform) {
        p.mapped = lay.base + lay.data0 + std::uint64_t(r) * lay.dstride;
        p.size = lay.uni_size;
        return p;
    }
    p.pid = pid_t(info[kInfoPid]);
    p.size = info[kInfoSize];
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) return p;  // displacement = address, remote_addr 0
    p.remote_addr = info[kInfoBase];
    if (info[kInfoDataOff] != kNoData) {
        p.mapped = lay.base + info[kInfoDataOff];
    } else if (r == rank_) {
        p.mapped = static_cast<unsigned char*>(base_);  // my own memory of a create window
    } else if (info[kInfoArena]) {
        auto it = node_tp_->arena_maps.find(r);
        if (it != node_tp_->arena_maps.end()) p.mapped = it->second.data() + info[kInfoArenaOff];
    }
    return p;
}

// My part as the transports' target sides apply requests to it (LocalTarget): the node
// transport's served requests, a message transport's agent, a network transport's lock
// grants. After build() set base_, local_size_ and my state.
LocalTarget Window::local_target() {
    const bool is_dynamic = flavor_ == MPI_WIN_FLAVOR_DYNAMIC;
    Window* const self = this;
    LocalTarget local;
    local.base = static_cast<unsigned char*>(is_dynamic ? nullptr : base_);
    local.size = is_dynamic ? 0 : std::uint64_t(local_size_);
    local.state = my_state_;
    local.state_words = node_tp_->layout.state_bytes / 8;
    // A request from a peer: kind, op and type as the origin's checks leave them.
    auto served_check = [](int kind, int op_id, int type_id, std::uint64_t count, std::uint64_t elem_bytes,
                           const void* src, const void* cmp, const void* res) {
        const TypeInfo* ti = type_id >= 0 && type_id <= 255 ? type_by_id(std::uint8_t(type_id)) : nullptr;
        if (!ti || elem_bytes != ti->extent) return MPI_ERR_TYPE;
        const bool is_cas = kind == int(RmaKind::cas);  // (its op is not a reduction: not checked)
        if (!is_cas && (op_id < 0 || op_id >= int(OpKind::invalid) || !op_defined_on(OpKind(op_id), *ti)))
            return MPI_ERR_OP;
        const bool is_acc = kind == int(RmaKind::acc) || kind == int(RmaKind::get_acc) || kind == int(RmaKind::fop);
        if ((!is_cas && !is_acc) || (is_cas && (!src || !cmp || !res || count != 1)) ||
            (is_acc && !src && OpKind(op_id) != OpKind::no_op))
            return MPI_ERR_ARG;
        return MPI_SUCCESS;
    };
    local.accumulate = [self, served_check](int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count,
                                            std::uint64_t elem_bytes, const void* src, const void* cmp, void* res) {
        if (int rc = served_check(kind, op_id, type_id, count, elem_bytes, src, cmp, res)) return rc;
        return self->apply_local(kind, op_id, type_id, toff, count, src, cmp, res);
    };
    local.accumulate_strided = [self, served_check](int kind, int op_id, int type_id, std::uint64_t toff,
                                                    std::int64_t stride, std::uint64_t count, std::uint64_t pieces,
                                                    std::uint64_t elem_bytes, const void* src, void* res) {
        if (kind == int(RmaKind::cas)) return MPI_ERR_ARG;
        if (int rc = served_check(kind, op_id, type_id, count, elem_bytes, src, nullptr, res)) return rc;
        return self->apply_local_strided(kind, op_id, type_id, toff, stride, count, pieces, src, res);
    };
    local.grant_lock = [self](Transport::LockRequest what) {
        return lockproto::grant(*self->node_tp_, self->peer(self->rank_), self->peer(self->lock_master(self->rank_)),
                                what);
    };
    if (is_dynamic)
        local.attached = [self](std::uint64_t addr, std::uint64_t bytes) { return self->attached_here(addr, bytes); };
    return local;
}

// The transport of the peers off my node segment, collective: a message transport, whose
// target side (this process's progress thread, or a thread inside MPI) executes their
// requests on my part through a LocalTarget, or a network transport, which registers my
// part with the NIC and serves this process's own sync atomics too.
int Window::connect_remote(bool net, void* user_base, MPI_Aint size) {
    Engine& eng = eng_;
    Bootstrap& b = *bs_;
    const char* call = create_call(flavor_);
    const bool is_dynamic = flavor_ == MPI_WIN_FLAVOR_DYNAMIC;
    const bool has_data = flavor_ == MPI_WIN_FLAVOR_ALLOCATE;
    int err = MPI_SUCCESS;
    Window* const self = this;
    LocalTarget local = local_target();
    if (net) {
        NetworkPart part;
        part.data = flavor_ == MPI_WIN_FLAVOR_CREATE ? user_base : has_data ? base_ : nullptr;
        part.data_size = flavor_ == MPI_WIN_FLAVOR_CREATE || has_data ? std::uint64_t(size) : 0;
        part.state = my_state_;
        part.state_bytes = node_tp_->layout.state_bytes;
        part.dynamic = is_dynamic;
        remote_ = make_network_transport(b, part, eng.config(), call, &err);  // collective
    } else {
        remote_ = make_message_transport(b, std::move(local), eng.config(), call, &err);  // collective
    }
    const std::string msg = err ? last_error_message() : std::string();
    if ((err = agree(b, err, msg, call))) return err;
    Transport* remote = remote_.get();
    if (net) declare_native_types(*remote, b);  // collective
    net_ = net;
    // Node peers of a network window: data by shared memory, words by the network.
    if (net && node_ranks_.size() > 1) split_ = make_split_transport(*node_tp_, *remote, nprocs_);
    tp_.assign(std::size_t(nprocs_), split_ ? split_.get() : node_tp_.get());
    for (int r = 0; r < nprocs_; ++r)
        if (remote_peer(r)) tp_[std::size_t(r)] = remote;
    tps_ = {node_tp_.get(), remote};  // group_tp(): the last
    if (net && !split_) tps_ = {remote};
    remote_inline_max_ = remote->caps(PeerRegion{}).inline_max;
    if (eng.config().host_progress) {
        // A thread inside the host's progress loop, or waiting here for answers, serves every
        // message transport of the process (the hook runs in each of its MPI calls): the
        // progress thread stands down meanwhile instead of competing for the cores. Without
        // the hook a waiter serves only its own window: the thread keeps polling.
        ProgressEngine* pe = &eng.progress();
        host_hooked_ = host_progress_add(remote, [remote, pe, self] {
            pe->mark_hook_helped();
            const bool served = remote->serve();
            return self->poll_requests() || served;
        });
        // A waiter stands the progress thread down. One that waits on a network CQ calls no
        // MPI, so the host's hook does not run on it: it runs the hook's entries itself now
        // and then, serving the process's other windows as an am waiter's MPI calls do.
        if (host_hooked_)
            remote->set_on_wait([pe, net] {
                pe->mark_helped();
                static thread_local unsigned passes = 0;
                if (net && (++passes & 255) == 0) host_progress_run();
            });
    }
    // Who else serves while an application thread sits in one of our group collectives
    // (fence_sync, close_sync): if nobody, those wait serving themselves.
    remote->set_served_elsewhere(host_hooked_ || eng.progress().running());
    // Its waits end with an error once a peer on this host has died: the one waited for, or
    // another that holds up its answer (a lock the dead process held at the target).
    if (watch_peers_)
        remote->set_peer_gone([self](int r) { return r >= 0 ? self->rank_gone(r) : self->peer_failure(); });
    // Traffic from a network peer rings no doorbell: the progress thread also wakes when the
    // provider's wait fd does (a target computing outside MPI answers at once, not after
    // the back-off's FASTRMA_POLL_IDLE_US).
    eng.progress().watch_fd(remote, remote->wait_fd());
    if (net) eng.progress().net_window(true);
    net_counted_ = net;
    return MPI_SUCCESS;
}

std::size_t Window::metadata_bytes() const {
    std::size_t b = sizeof(Window);
    b += tp_.capacity() * sizeof(Transport*) + epochs_.metadata_bytes() - sizeof(Epochs);
    b += node_tp_->layout.idx.capacity() * sizeof(int) + node_ranks_.capacity() * sizeof(int);
    b += (remote_size_.capacity() + remote_du_.capacity()) * sizeof(std::uint64_t);
    b += node_tp_->arena_maps.size() * (sizeof(ArenaPeerMap) + 32) + dyn_cache_.size() * (sizeof(RegionCache) + 32);
    for (auto& [r, c] : dyn_cache_) b += c.regions.capacity() * sizeof(Region);
    return b + node_tp_->metadata_bytes();
}

int Window::free_collective() {
    if (int rc = epochs_.check_free()) return rc;
    // Every member has closed its epochs; after the barrier nobody touches our memory.
    node_tp_->flush_all();
    if (group_tp().close_sync(*bs_) != MPI_SUCCESS)
        return raise(MPI_ERR_INTERN, "FRMA_Win_free: the closing synchronization of the window's group failed");
    leave_node_ = !remote_ && !node_key_.empty();
    eng_.progress().remove_poller(poller_id_);
    poller_id_ = 0;
    if (host_hooked_) host_progress_remove(remote_.get());
    host_hooked_ = false;
    if (remote_) eng_.progress().unwatch_fd(remote_.get());
    if (net_counted_) eng_.progress().net_window(false);
    net_counted_ = false;
    stop_serving();
    finish_requests();  // every op completed before the barrier
    eng_.live_windows().fetch_sub(1);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// The EpochHost side: doorbells, completion, issue.

// Doorbells for lock waits on shared memory. A waiter about to sleep (a sync call past
// its yield phase, the progress thread backing off 16 us or more) sets its bit in the
// waiter bitmap of the processes whose lock words it needs (the target; for exclusive
// locks and lock_all also the master, rank 0). A releaser takes the bitmap after releasing
// and, for each waiter, bumps the waiter's kick word and rings its process's doorbell: the
// progress thread retries at once instead of after its back-off, a dozing thread wakes.
// Waiters that only spin or yield do not register: ringing them would cost a futex call
// and buy nothing (docs/progress.md, doorbells).
// A release between a waiter's failed try and its bit costs that waiter one back-off.
void Window::register_lock_wait(int rank) {
    if (!remote_peer(rank)) node_tp_->register_lock_wait(rank, rank_);  // (mapped words only)
}

void Window::ring_lock_waiters(int rank) {
    if (!remote_peer(rank)) node_tp_->ring_lock_waiters(rank, rank_);
}

// Remote completion at every target: each transport's flush_all (a message transport sends
// every flush request before it waits for any answer: one round trip, not one per target).
void Window::flush_every_target() {
    for (Transport* t : tps_) t->flush_all();
}

int Window::fence_sync() {
    // The group's transport completes its own at its fence_sync; the others first.
    for (Transport* t : tps_)
        if (t != &group_tp()) t->flush_all();
    const int rc = group_tp().fence_sync(*bs_);
    // A message transport's fence waits for the requests sent to each process there, not
    // for the others': node peers that read each other by load/store also wait for each
    // other, so that what an off-node origin wrote before the fence is in place.
    if (rc || !remote_ || net_ || node_ranks_.size() < 2) return rc;
    return node_barrier();
}

int Window::sync() {
    // Over am, requests from remote origins are applied by the progress thread (or any
    // thread inside MPI): its writes are ordered before our later loads through the
    // server's mutex (a fence alone says nothing to the thread that wrote).
    for (Transport* t : tps_) t->sync_served();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Progress: retry lock acquisitions whose time has come, issue queues of granted targets.

bool Window::serve_hook(void* node) { return static_cast<NodeTransport*>(node)->serve(); }

void Window::stop_serving() {
    if (served_hooked_) host_progress_remove(node_tp_.get());
    served_hooked_ = false;
    // No origin posts here any more (a recycled segment must not look served).
    node_tp_->stop_serving();
}

Poll Window::poll() {
    // A message transport: serve what peers asked of us, send what waited to leave. MPI has
    // no wake-up for an incoming message, so while such a window exists the thread polls
    // with bounded back-off (Poll::waiting).
    bool served = remote_ && remote_->progress();
    if (node_tp_->serving() && node_tp_->serve_requests(false)) served = true;
    Poll p = epochs_.poll();
    if (poll_requests()) served = true;
    if (served) return Poll::busy;
    // Requests still in flight, like a message transport, need polling to complete.
    if (p == Poll::idle && (remote_ || n_requests_.load(std::memory_order_relaxed))) return Poll::waiting;
    return p;
}

}  // namespace fastrma::detail
