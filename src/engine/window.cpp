// window.cpp — see window.hpp. Order inside each sync call (STYLE.md §7): check the state,
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

#include "engine/errors.hpp"
#include "epochs/lock_protocol.hpp"
#include "ops/layout.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "progress/host_progress.hpp"
#include "transport/am.hpp"
#include "transport/shm.hpp"
#include "engine/bootstrap_mpi.hpp"
#include "transport/shm_arena.hpp"

namespace fastrma::detail {

namespace {

constexpr std::size_t kAmDataOffset = 2048;  // build_am(): an allocate window's page offset

const char* mode_name(AccessMode m) {
    switch (m) {
    case AccessMode::none: return "no epoch";
    case AccessMode::per_target: return "a lock epoch";
    case AccessMode::lock_all_called:
    case AccessMode::lock_all_granted: return "a lock_all epoch";
    case AccessMode::fence_called:
    case AccessMode::fence_active: return "a fence epoch";
    case AccessMode::pscw: return "a start (PSCW) epoch";
    }
    return "?";
}
}  // namespace

Window::Window(Engine& eng, std::unique_ptr<Bootstrap> bs)
    : eng_(eng),
      bs_(std::move(bs)),
      slots_(eng.config().slots),
      op_pool_(eng.config().win_op_pool, &eng.op_pool()),
      target_pool_(eng.config().win_target_pool, &eng.target_pool()) {
    off_wake_min_ = eng.config().offload_wake_min;
}

int Window::complete_deferred() {
    const int rc = drain_cma();
    const int rc2 = wait_offloads();
    const int rc3 = take_late_error();
    return rc ? rc : rc2 ? rc2 : rc3;
}

void Window::note_late_error(int rc) {
    std::lock_guard lk(late_mu_);
    if (late_err_) return;  // the first one is reported
    late_err_ = rc;
    late_msg_ = last_error_message();
    late_any_.store(true, std::memory_order_release);
}

int Window::take_late_error() {
    if (!late_any_.load(std::memory_order_acquire)) return MPI_SUCCESS;  // one load
    int rc;
    std::string msg;
    {
        std::lock_guard lk(late_mu_);
        rc = late_err_;
        msg.swap(late_msg_);
        late_err_ = 0;
        late_any_.store(false, std::memory_order_relaxed);
    }
    if (!rc) return MPI_SUCCESS;
    return raise(rc, "an operation issued later (queued behind a lock) failed: %s", msg.c_str());
}

int Window::wait_offloads() {
    const std::uint64_t seq = off_seq_.load(std::memory_order_acquire);
    if (seq == 0) return MPI_SUCCESS;  // never offloaded (the common case: one load)
    eng_.offload()->wait(seq);
    if (int e = off_err_.exchange(0, std::memory_order_acq_rel))
        return raise(e, "an offloaded transfer failed (cross-memory attach to a peer that exited?)");
    return MPI_SUCCESS;
}

namespace {
CmaBatch* const kNoBatch = reinterpret_cast<CmaBatch*>(std::uintptr_t(1));  // a mapped peer's slot
}  // namespace

CmaBatch* Window::cma_batch_if_any(int r) const {
    std::atomic<CmaBatch*>* slots = cma_.load(std::memory_order_acquire);
    CmaBatch* b = slots ? slots[std::size_t(r)].load(std::memory_order_acquire) : nullptr;
    return b == kNoBatch ? nullptr : b;
}

CmaBatch* Window::cma_batch(int r) const {
    if (!cma_max_) return nullptr;
    if (std::atomic<CmaBatch*>* slots = cma_.load(std::memory_order_acquire))
        if (CmaBatch* b = slots[std::size_t(r)].load(std::memory_order_acquire)) return b == kNoBatch ? nullptr : b;
    std::lock_guard lk(cma_mu_);
    if (!cma_slots_) {
        cma_slots_ = std::make_unique<std::atomic<CmaBatch*>[]>(std::size_t(nprocs_));
        cma_.store(cma_slots_.get(), std::memory_order_release);
    }
    std::atomic<CmaBatch*>& slot = cma_slots_[std::size_t(r)];
    CmaBatch* b = slot.load(std::memory_order_relaxed);
    if (!b) {
        const PeerRegion p = peer(r);
        b = kNoBatch;
        if (!p.mapped && p.pid > 0) {
            cma_owned_.push_back(std::make_unique<CmaBatch>(p.pid, p.remote_addr, p.state, eng_.config().acc_stripes,
                                                            &cma_pending_));
            b = cma_owned_.back().get();
        }
        slot.store(b, std::memory_order_release);
    }
    return b == kNoBatch ? nullptr : b;
}

int Window::drain_cma() {
    if (cma_pending_.load(std::memory_order_acquire) == 0) return MPI_SUCCESS;  // one load
    int rc = MPI_SUCCESS;
    for (int r = 0; r < nprocs_; ++r)
        if (int e = drain_batch(cma_batch_if_any(r), r); e && !rc) rc = e;
    return rc;
}

int Window::complete_request(int r) {
    // A request is complete when handed out; over am a get's data or a put's buffer is in
    // flight until the transport's flush, a batched transfer until its batch drains.
    if (am_mode_) {
        tp(r).flush(peer(r));
        return MPI_SUCCESS;
    }
    return drain_batch(cma_batch_if_any(r), r);
}

namespace {
int cpuset_pus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}
}  // namespace

// FASTRMA_OFFLOAD: a progress thread without a processing unit of its own can only take
// time from the computation it is meant to overlap (docs/progress.md, measured there).
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
    if (us >= 0) g_wait_spin_ns.store(std::uint64_t(us) * 1000, std::memory_order_relaxed);
    else if (int(topo.local_ranks.size()) > cpuset_pus())
        g_wait_spin_ns.store(kWaitSpinOversubscribedNs, std::memory_order_relaxed);
}

Window::~Window() {
    // Nothing may copy into or out of memory about to be unmapped. (Batched transfers are
    // dropped: free drained them before its barrier; after it, peers' memory may be gone.)
    wait_offloads();
    if (host_hooked_) host_progress_remove(endpoint_.get());
    if (poller_id_) eng_.progress().remove_poller(poller_id_);
}

int Window::allocate(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size, int disp_unit,
                     void** baseptr, std::unique_ptr<Window>* out) {
    int rc = build(eng, std::move(bs), MPI_WIN_FLAVOR_ALLOCATE, nullptr, size, disp_unit, false, out);
    if (rc == MPI_SUCCESS && baseptr) *baseptr = (*out)->base_;
    return rc;
}

int Window::create(Engine& eng, std::unique_ptr<Bootstrap> bs, void* base, MPI_Aint size,
                   int disp_unit, std::unique_ptr<Window>* out) {
    return build(eng, std::move(bs), MPI_WIN_FLAVOR_CREATE, base, size, disp_unit, false, out);
}

int Window::allocate_shared(Engine& eng, std::unique_ptr<Bootstrap> bs, MPI_Aint size,
                            int disp_unit, bool noncontig, void** baseptr,
                            std::unique_ptr<Window>* out) {
    int rc = build(eng, std::move(bs), MPI_WIN_FLAVOR_SHARED, nullptr, size, disp_unit, noncontig, out);
    if (rc == MPI_SUCCESS && baseptr) *baseptr = (*out)->base_;
    return rc;
}

int Window::create_dynamic(Engine& eng, std::unique_ptr<Bootstrap> bs, std::unique_ptr<Window>* out) {
    return build(eng, std::move(bs), MPI_WIN_FLAVOR_DYNAMIC, nullptr, 0, 1, false, out);
}

namespace {
const char* create_call(int flavor) {
    switch (flavor) {
    case MPI_WIN_FLAVOR_ALLOCATE: return "FRMA_Win_allocate";
    case MPI_WIN_FLAVOR_SHARED: return "FRMA_Win_allocate_shared";
    case MPI_WIN_FLAVOR_DYNAMIC: return "FRMA_Win_create_dynamic";
    default: return "FRMA_Win_create";
    }
}
std::size_t page_round(std::size_t n) {
    const std::size_t pg = std::size_t(sysconf(_SC_PAGESIZE));
    return (n + pg - 1) / pg * pg;
}

// Every member learns every other's verdict; a failure anywhere fails the call everywhere
// (with the local message where the failure was local), so nobody is left waiting.
int agree(Bootstrap& b, int err, const std::string& msg, const char* call) {
    std::vector<int> errs(std::size_t(b.size()));
    b.allgather(&err, sizeof err, errs.data());
    if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
    for (int r = 0; r < b.size(); ++r)
        if (errs[std::size_t(r)])
            return raise(errs[std::size_t(r)], "%s: window creation failed at rank %d", call, r);
    return MPI_SUCCESS;
}
}  // namespace

int Window::build(Engine& eng, std::unique_ptr<Bootstrap> bs, int flavor, void* user_base,
                  MPI_Aint size, int disp_unit, bool noncontig, std::unique_ptr<Window>* out) {
    out->reset();
    const char* call = create_call(flavor);
    std::unique_ptr<Window> w(new Window(eng, std::move(bs)));
    Bootstrap& b = *w->bs_;
    const int n = b.size(), me = b.rank();
    w->rank_ = me;
    w->nprocs_ = n;
    w->flavor_ = flavor;
    const bool is_alloc = flavor == MPI_WIN_FLAVOR_ALLOCATE;
    const bool is_shared = flavor == MPI_WIN_FLAVOR_SHARED;
    const bool is_dynamic = flavor == MPI_WIN_FLAVOR_DYNAMIC;
    const bool is_create = flavor == MPI_WIN_FLAVOR_CREATE;
    const std::size_t pg = std::size_t(sysconf(_SC_PAGESIZE));

    // 1. Local checks and the transports; the verdict travels with the sizes, so that a
    // bad argument on one rank fails the call everywhere instead of hanging the others.
    // (The arrays of this function are temporaries: the window keeps O(1) per peer.)
    int err = MPI_SUCCESS;
    NodeTopology topo = discover_topology(b);
    w->off_min_ = offload_threshold(eng, topo);
    set_wait_spin(eng, topo);
    if (size < 0) err = raise(MPI_ERR_SIZE, "%s: size %ld is negative", call, long(size));
    else if (disp_unit <= 0)
        err = raise(MPI_ERR_DISP, "%s: disp_unit %d must be positive", call, disp_unit);
    else if (is_create && size > 0 && !user_base)
        err = raise(MPI_ERR_ARG, "%s: base is NULL but size is %ld", call, long(size));
    else if (is_shared && !topo.all_local())
        err = raise(MPI_ERR_RMA_SHARED, "%s: the communicator spans several nodes; shared windows need one", call);
    bool wants_am = false;
    for (int r = 0; r < n && !err; ++r) {
        Transport* t = eng.select_transport(topo, r, is_shared);
        if (!t) err = last_error_message().find("MPI_ERR_RMA_SHARED") == 0 ? MPI_ERR_RMA_SHARED : MPI_ERR_UNSUPPORTED_OPERATION;
        wants_am = wants_am || t == &am_transport();
    }
    std::string msg = err ? last_error_message() : std::string();
    // The settings that shape the shared state layout travel too: every process must agree.
    struct Sizes { int err; int disp_unit; std::uint64_t size; int am; int acc_stripes; std::uint64_t dyn_regions; };
    Sizes mine_sz{err, disp_unit, std::uint64_t(size < 0 ? 0 : size), wants_am, eng.config().acc_stripes,
                  is_dynamic ? std::uint64_t(eng.config().dyn_regions) : 0};
    std::vector<Sizes> sizes(static_cast<std::size_t>(n));
    b.allgather(&mine_sz, sizeof mine_sz, sizes.data());
    for (int r = 0; r < n; ++r)
        if (sizes[std::size_t(r)].err) {
            if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
            return raise(sizes[std::size_t(r)].err, "%s: window creation failed at rank %d", call, r);
        }
    for (int r = 0; r < n; ++r) {
        const Sizes& z = sizes[std::size_t(r)];
        if (z.acc_stripes != mine_sz.acc_stripes)
            return raise(MPI_ERR_OTHER, "%s: FASTRMA_ACC_STRIPES is %d here (rank %d) and %d at rank %d; every process of a window needs the same value",
                         call, mine_sz.acc_stripes, me, z.acc_stripes, r);
        if (z.dyn_regions != mine_sz.dyn_regions)
            return raise(MPI_ERR_OTHER, "%s: FASTRMA_DYN_REGIONS is %llu here (rank %d) and %llu at rank %d; every process of a window needs the same value",
                         call, static_cast<unsigned long long>(mine_sz.dyn_regions), me,
                         static_cast<unsigned long long>(z.dyn_regions), r);
    }
    // One place decided per peer (Engine::select_transport); a window uses am for every
    // remote peer as soon as any process needs it, so all agree on the protocol.
    bool am_mode = false;
    for (const Sizes& z : sizes) am_mode = am_mode || z.am;
    if (am_mode) {
        w->am_mode_ = true;
        w->tp_.assign(std::size_t(n), &am_transport());
        w->tp_[std::size_t(me)] = &shm_transport();
        std::vector<std::pair<std::uint64_t, int>> sz;
        for (const Sizes& z : sizes) sz.emplace_back(z.size, z.disp_unit);
        return build_am(std::move(w), flavor, user_base, size, disp_unit, std::move(sz), out);
    }
    w->tp_all_ = &shm_transport();

    // 2. The node segment: n state areas, then (allocate, shared) the data parts —
    // consecutive for a contiguous shared window, page-aligned otherwise.
    w->dyn_capacity_ = is_dynamic ? eng.config().dyn_regions : 0;
    w->dyn_word0_ = dyn_table_word0(n);
    w->state_bytes_ = page_round(8 * (dyn_table_word0(n) + (is_dynamic ? kDynHeaderWords + 2 * w->dyn_capacity_ : 0)));
    const bool has_data = is_alloc || is_shared;
    const bool padded = !(is_shared && !noncontig);
    std::vector<std::uint64_t> doff(static_cast<std::size_t>(n), kNoData);
    std::uint64_t total = std::uint64_t(n) * w->state_bytes_;
    bool uniform = true;
    for (int r = 0; r < n; ++r) {
        const Sizes& z = sizes[std::size_t(r)];
        uniform = uniform && z.size == sizes[0].size && z.disp_unit == sizes[0].disp_unit;
        if (!has_data) continue;
        doff[std::size_t(r)] = total;
        total += padded ? page_round(z.size) : z.size;
    }
    total = page_round(total);
    const std::uint64_t my_off = std::uint64_t(me) * w->state_bytes_;
    const std::uint64_t my_data_len = has_data ? (padded ? page_round(sizes[std::size_t(me)].size) : sizes[std::size_t(me)].size) : 0;
    if (me == 0) {
        // Pages are reserved by their owners (first touch on the owner's NUMA node).
        err = w->node_.create(total, eng.config().shm_method, false);
        if (!err) err = w->node_.reserve_range(my_off, w->state_bytes_);
        if (!err && my_data_len) err = w->node_.reserve_range(doff[0], my_data_len);
    }
    if (err) msg = last_error_message();
    struct Hello { int err; SegmentExport seg; };
    Hello hello{err, me == 0 && !err ? w->node_.export_info() : SegmentExport{}};
    std::vector<Hello> hellos(static_cast<std::size_t>(n));
    b.allgather(&hello, sizeof hello, hellos.data());
    if (hellos[0].err) {
        if (err) return raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));
        return raise(hellos[0].err, "%s: window creation failed at rank 0", call);
    }
    if (me != 0) {
        err = w->node_.map_peer(hellos[0].seg, my_off, w->state_bytes_);
        if (!err && my_data_len) err = w->node_.map_peer(hellos[0].seg, std::size_t(doff[std::size_t(me)]), my_data_len);
    }
    if (!err && eng.config().fault == "kill_after_segment" && me == n - 1 && n > 1)
        kill(getpid(), SIGKILL);  // fault injection: die while the segment is still named
    w->node_base_ = w->node_.data();

    // 3. Publish what peers need to know about my part, in my state page.
    if (!err) {
        std::uint64_t* info = w->state_of(me);
        w->base_ = is_create ? user_base : has_data ? w->node_base_ + doff[std::size_t(me)] : nullptr;
        info[kInfoPid] = std::uint64_t(getpid());
        info[kInfoBase] = reinterpret_cast<std::uint64_t>(w->base_);
        info[kInfoSize] = is_dynamic ? ~0ull : std::uint64_t(size);
        info[kInfoDispUnit] = std::uint64_t(disp_unit);
        info[kInfoDataOff] = doff[std::size_t(me)];
        ArenaHit hit;
        if (is_create && size > 0 && arena_lookup(user_base, std::size_t(size), &hit)) {
            static_assert(sizeof(SegmentExport) <= kArenaSegWords * 8);
            info[kInfoArena] = 1;
            info[kInfoArenaOff] = hit.offset;
            std::memcpy(&info[kInfoArenaSeg], &hit.seg, sizeof hit.seg);
        }
        const SegmentExport bell = eng.progress().bell_export();
        std::memcpy(&info[kInfoBell], &bell, sizeof bell);
    }
    if (err) msg = last_error_message();
    if ((err = agree(b, err, msg, call))) return err;  // also: everyone has published

    // 4. Create windows: map peers' FRMA_Alloc_mem parts; probe cross-memory attach.
    w->node_.seal();  // everyone has mapped: the name (shm_open method) can go
    if (is_create) {
        for (int r = 0; r < n && !err; ++r) {
            const std::uint64_t* info = w->state_of(r);
            if (r == me || info[kInfoSize] == 0) continue;
            if (info[kInfoArena]) {
                SegmentExport ex;
                std::memcpy(static_cast<void*>(&ex), &info[kInfoArenaSeg], sizeof ex);
                err = w->arena_maps_[r].map_peer(ex);
            } else if (pid_t(info[kInfoPid]) != getpid()) {
                if (int e = ShmTransport::probe_cma(pid_t(info[kInfoPid]), info[kInfoBase]); e != 0)
                    err = raise(MPI_ERR_UNSUPPORTED_OPERATION,
                                "%s: cross-memory attach to rank %d (pid %d) refused: %s; create "
                                "windows need ptrace access between the ranks",
                                call, r, int(info[kInfoPid]), std::strerror(e));
            }
        }
        if (err) msg = last_error_message();
        if ((err = agree(b, err, msg, call))) return err;
    }

    // Symmetric allocation: rank r's data is at data0_ + r * dstride_ (no lookups).
    w->uniform_ = uniform && has_data;
    if (w->uniform_) {
        w->uni_size_ = sizes[0].size;
        w->uni_du_ = std::uint64_t(sizes[0].disp_unit);
        w->data0_ = doff[0];
        w->dstride_ = n > 1 ? doff[1] - doff[0] : 0;
    }
    w->my_state_ = w->state_of(me);
    // CPU atomics are the window's atomicity domain only when every part is mapped here
    // (allocate, shared, and create windows whose every part is FRMA_Alloc_mem memory).
    // The choice is per window, so every origin takes the same path for an element.
    w->cpu_atomics_ = has_data;
    if (is_create) {
        bool every = true;
        for (int r = 0; r < n; ++r) every = every && (sizes[std::size_t(r)].size == 0 || w->peer(r).mapped);
        w->cpu_atomics_ = every;
    }
    // Small puts and gets to parts not mapped here wait in a batch per peer: one syscall
    // at the next completion point instead of one each (ops/cma_batch.hpp).
    if (is_create || is_dynamic) w->cma_max_ = eng.config().cma_batch;
    (void)pg;
    w->info.alloc_shared_noncontig = is_shared && noncontig;
    w->local_size_ = is_dynamic ? 0 : size;
    w->disp_unit_ = disp_unit;
    w->attr_size_ = w->local_size_;
    w->attr_disp_unit_ = disp_unit;
    w->attr_flavor_ = flavor;
    Window* self = w.get();
    w->poller_id_ = eng.progress().add_poller([self] { return self->poll(); });
    eng.live_windows().fetch_add(1);
    bump(Stat::windows_created);
    *out = std::move(w);
    return MPI_SUCCESS;
}

PeerRegion Window::peer(int r) const {
    PeerRegion p;
    p.rank = r;
    if (am_mode_) {
        p.size = am_size_[std::size_t(r)];
        if (r != rank_) {
            p.am = endpoint_.get();
            return p;
        }
        p.state = my_state_;
        if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) p.pid = getpid();  // my attached memory, by address
        else p.mapped = static_cast<unsigned char*>(base_);
        return p;
    }
    p.state = state_of(r);
    if (uniform_) {
        p.mapped = node_base_ + data0_ + std::uint64_t(r) * dstride_;
        p.size = uni_size_;
        return p;
    }
    const std::uint64_t* info = p.state;
    p.pid = pid_t(info[kInfoPid]);
    p.size = info[kInfoSize];
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC) return p;  // displacement = address, remote_addr 0
    p.remote_addr = info[kInfoBase];
    if (info[kInfoDataOff] != kNoData) {
        p.mapped = node_base_ + info[kInfoDataOff];
    } else if (r == rank_) {
        p.mapped = static_cast<unsigned char*>(base_);  // my own memory of a create window
    } else if (info[kInfoArena]) {
        auto it = arena_maps_.find(r);
        if (it != arena_maps_.end()) p.mapped = it->second.data() + info[kInfoArenaOff];
    }
    return p;
}

// Windows whose peers are reached by active messages: every process keeps its part (state
// area + data) in a private segment; peers reach it only through the window's AmEndpoint,
// served by this process's progress thread. Sizes and disp units of peers are kept here
// (O(p): a message transport has no shared page to read them from).
int Window::build_am(std::unique_ptr<Window> w, int flavor, void* user_base, MPI_Aint size,
                     int disp_unit, std::vector<std::pair<std::uint64_t, int>> sizes,
                     std::unique_ptr<Window>* out) {
    Engine& eng = w->eng_;
    Bootstrap& b = *w->bs_;
    const char* call = create_call(flavor);
    const int n = w->nprocs_;
    const bool is_dynamic = flavor == MPI_WIN_FLAVOR_DYNAMIC;
    int err = MPI_SUCCESS;
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    auto* mb = dynamic_cast<MpiBootstrap*>(&b);
    if (level < MPI_THREAD_MULTIPLE)
        err = raise(MPI_ERR_UNSUPPORTED_OPERATION,
                    "%s: the am transport (FASTRMA_TRANSPORT=am or peers on other nodes) needs the host MPI at MPI_THREAD_MULTIPLE (initialised at level %d)",
                    call, level);
    else if (!mb)
        err = raise(MPI_ERR_UNSUPPORTED_OPERATION, "%s: the am transport needs an MPI communicator", call);
    w->dyn_capacity_ = is_dynamic ? eng.config().dyn_regions : 0;
    w->dyn_word0_ = dyn_table_word0(n);
    w->state_bytes_ = page_round(8 * (dyn_table_word0(n) + (is_dynamic ? kDynHeaderWords + 2 * w->dyn_capacity_ : 0)));
    const std::size_t data = flavor == MPI_WIN_FLAVOR_ALLOCATE ? std::size_t(size) : 0;
    // The data starts half a page in: the host MPI copies between it and user buffers with
    // rep movsb (CMA, single-copy receives), 5-8x slower at a distance of 1..31 bytes past a
    // page multiple (transport/copy.hpp). Page-aligned buffers and large malloc'ed ones
    // (page offset 16) are then far from that distance both ways, and no bounce is needed;
    // a page-aligned window was at distance 16 from every malloc'ed get destination.
    if (!err) err = w->node_.create(w->state_bytes_ + (data ? data + kAmDataOffset : 0), eng.config().shm_method);
    std::string msg = err ? last_error_message() : std::string();
    if ((err = agree(b, err, msg, call))) return err;
    w->node_.seal();  // no peer maps it: the name (shm_open method) goes at once
    w->node_base_ = w->node_.data();
    w->my_state_ = reinterpret_cast<std::uint64_t*>(w->node_base_);
    w->base_ = flavor == MPI_WIN_FLAVOR_CREATE ? user_base : data ? w->node_base_ + w->state_bytes_ + kAmDataOffset : nullptr;
    w->am_size_.resize(std::size_t(n));
    w->am_du_.resize(std::size_t(n));
    for (int r = 0; r < n; ++r) {
        w->am_size_[std::size_t(r)] = is_dynamic ? ~0ull : sizes[std::size_t(r)].first;
        w->am_du_[std::size_t(r)] = std::uint64_t(sizes[std::size_t(r)].second);
    }
    Window* self = w.get();
    AmLocal local;
    local.base = static_cast<unsigned char*>(is_dynamic ? nullptr : w->base_);
    local.size = is_dynamic ? 0 : std::uint64_t(size);
    local.state = w->my_state_;
    local.state_words = w->state_bytes_ / 8;
    local.accumulate = [self](int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count,
                              std::uint64_t elem_bytes, const void* src, const void* cmp, void* res) {
        // A request from a peer: kind, op and type as the origin's checks leave them.
        const TypeInfo* ti = type_id >= 0 && type_id <= 255 ? type_by_id(std::uint8_t(type_id)) : nullptr;
        if (!ti || elem_bytes != ti->extent) return MPI_ERR_TYPE;
        if (op_id < 0 || op_id >= int(OpKind::invalid) || !op_defined_on(OpKind(op_id), *ti)) return MPI_ERR_OP;
        const bool is_cas = kind == int(RmaKind::cas);
        const bool is_acc = kind == int(RmaKind::acc) || kind == int(RmaKind::get_acc) || kind == int(RmaKind::fop);
        if ((!is_cas && !is_acc) || (is_cas && (!src || !cmp || !res || count != 1)) ||
            (is_acc && !src && OpKind(op_id) != OpKind::no_op))
            return MPI_ERR_ARG;
        return self->apply_local(kind, op_id, type_id, toff, count, src, cmp, res);
    };
    local.grant_lock = [self](Transport::LockRequest what) {
        return lockproto::grant(shm_transport(), self->peer(self->rank_), what);
    };
    if (is_dynamic)
        local.attached = [self](std::uint64_t addr, std::uint64_t bytes) { return self->attached_here(addr, bytes); };
    w->endpoint_ = std::make_unique<AmEndpoint>(mb->comm(), std::move(local));  // collective
    if ((err = agree(b, w->endpoint_->error(), "am: cannot duplicate the communicator", call))) return err;
    if (eng.config().host_progress) {
        AmEndpoint* ep = w->endpoint_.get();
        // A thread inside the host's progress loop, or waiting here for answers, serves every
        // am endpoint of the process (the hook runs in each of its MPI calls): the progress
        // thread stands down meanwhile instead of competing for the cores (lock_all + 8-byte
        // op + flush over am, target in MPI_Barrier: p99 17-27 us -> 1-3.6 us, mean -30 %).
        // Without the hook a waiter serves only its own endpoint: the thread keeps polling.
        ProgressEngine* pe = &eng.progress();
        w->host_hooked_ = host_progress_add(ep, [ep, pe] { pe->mark_hook_helped(); return ep->poll(); });
        if (w->host_hooked_) w->endpoint_->set_on_wait([pe] { pe->mark_helped(); });
    }
    // Who else serves while an application thread sits in one of our host collectives
    // (fence's count exchange, free's barrier): if nobody, those wait serving themselves.
    w->endpoint_->set_served_elsewhere(w->host_hooked_ || eng.progress().running());
    // Every accumulate on my memory runs in this process (mine directly, others' through
    // the endpoint) with the same code, so one atomicity domain of our own choosing: the
    // striped accumulate lock in my state words, with plain (vectorised) kernels under it.
    // Per-element CPU atomics would cost a compare-and-swap loop per element for types
    // without a native atomic (a 1 MiB SUM of doubles: 0.9 ms, against 0.1 ms locked).
    w->cpu_atomics_ = false;
    w->local_size_ = is_dynamic ? 0 : size;
    w->disp_unit_ = disp_unit;
    w->attr_size_ = w->local_size_;
    w->attr_disp_unit_ = disp_unit;
    w->attr_flavor_ = flavor;
    w->poller_id_ = eng.progress().add_poller([self] { return self->poll(); });
    eng.live_windows().fetch_add(1);
    bump(Stat::windows_created);
    *out = std::move(w);
    return MPI_SUCCESS;
}

// A request from a peer's origin, served by the endpoint: the same accumulate path as a
// local origin's, on my own memory.
int Window::apply_local(int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t count,
                        const void* src, const void* cmp, void* res) {
    const TypeInfo* ti = type_by_id(std::uint8_t(type_id));
    if (!ti) return MPI_ERR_TYPE;
    const bool dynamic = flavor_ == MPI_WIN_FLAVOR_DYNAMIC;
    if (!cpu_atomics_ && (base_ || dynamic)) {
        // One contiguous run in my mapped memory, lock domain (am windows): what issue_op
        // would do, without building an op (a batch of small accumulates is served at
        // ~1/3 of the cost). Dynamic windows: toff is the address in this process (the
        // server checked it is attached), not a cross-memory attach to ourselves (two
        // syscalls an accumulate or compare_and_swap).
        const IssueContext ctx{shm_transport(), peer(rank_), false, eng_.config().acc_stripes};
        unsigned char* at = dynamic ? reinterpret_cast<unsigned char*>(toff) : nullptr;
        if (kind == int(RmaKind::cas)) compare_and_swap_locked_in_place(ctx, *ti, toff, src, cmp, res, at);
        else accumulate_locked_in_place(ctx, op_handle(OpKind(op_id)), *ti, toff, src, count, res, at);
        return MPI_SUCCESS;
    }
    Op op;
    op.kind = RmaKind(kind);
    op.op = op_handle(OpKind(op_id));
    op.type = ti;
    std::shared_ptr<const Layout> el(std::shared_ptr<const Layout>(), &predefined_layout(*ti));
    op.olay = op.rlay = op.tlay = el;
    op.ocount = op.rcount = op.tcount = count;
    op.bytes = count * ti->size;
    op.lo = 0;
    op.hi = std::int64_t(count * ti->extent);
    op.origin = src;
    op.result = res;
    op.compare = cmp;
    op.offset = toff;
    return issue_op(IssueContext{shm_transport(), peer(rank_), cpu_atomics_, eng_.config().acc_stripes}, op);
}

std::size_t Window::metadata_bytes() const {
    std::size_t b = sizeof(Window);
    b += tp_.capacity() * sizeof(Transport*) + start_group_.capacity() * sizeof(int);
    b += arena_maps_.size() * (sizeof(ShmSegment) + 32) + dyn_cache_.size() * (sizeof(RegionCache) + 32);
    for (auto& [r, c] : dyn_cache_) b += c.regions.capacity() * sizeof(Region);
    {
        std::lock_guard lk(cma_mu_);
        if (cma_slots_) b += std::size_t(nprocs_) * sizeof(std::atomic<CmaBatch*>);
        for (const auto& cb : cma_owned_) b += cb->bytes();
    }
    b += slots_.size() * sizeof(Slot);
    return b;
}

int Window::free_collective() {
    {
        std::lock_guard lk(epoch_mu_);
        AccessMode m = mode_.load();
        if (m != AccessMode::none && m != AccessMode::fence_called)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_free: %s is still open on this window", mode_name(m));
        if (exposed_)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_free: a PSCW exposure epoch is still open");
    }
    // Every member has closed its epochs; after the barrier nobody touches our memory.
    complete_deferred();
    if (endpoint_) {
        endpoint_->quiesce();  // one-way messages of ours applied, too
        if (endpoint_->barrier() != MPI_SUCCESS)
            return raise(MPI_ERR_INTERN, "FRMA_Win_free: the closing barrier over the am communicator failed");
    } else {
        bs_->barrier();
    }
    eng_.progress().remove_poller(poller_id_);
    poller_id_ = 0;
    if (host_hooked_) host_progress_remove(endpoint_.get());
    host_hooked_ = false;
    eng_.live_windows().fetch_sub(1);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Targets and locks

void Window::backoff(WaitPace& pace, int lock_rank, bool lock_excl) {
    // While we wait, help: one pass of the progress engine (cheap when there is nothing).
    // Spin first (SpinWait: what we wait for is usually microseconds away), then yield for
    // a while before sleeping: any sleep costs tens of microseconds of timer slack, far
    // more than a post, a complete or a lock release takes to arrive. After kYieldSteps
    // yields, sleep with exponential back-off up to poll_max_us.
    constexpr unsigned kYieldSteps = 2000;
    unsigned& step = pace.step;
    if (!eng_.progress().running()) eng_.progress().progress_once();
    // Over am what we wait for (a post, a complete, a lock grant, a peer's request that
    // must be answered before it can send ours) arrives as a message: serve it here rather
    // than leave it to the progress thread, which may be in a back-off sleep of up to
    // FASTRMA_POLL_IDLE_US (measured: a PSCW epoch took 400 us this way, 5 us served here),
    // and let the progress thread stand down meanwhile (ProgressEngine::help).
    else if (endpoint_) {
        const std::optional<Poll> h = eng_.progress().help();
        if (h ? *h == Poll::busy : endpoint_->poll()) {
            step = 0;
            pace.spin.progressed();
        }
    }
    if (!pace.spin.yielding()) {
        pace.spin.idle();  // a pause, or the first yield once the spin budget is spent
        return;
    }
    if (step < kYieldSteps) {
        ++step;
        sched_yield();
        return;
    }
    const unsigned us = std::min<unsigned>(1u << std::min(step - kYieldSteps, 16u), unsigned(eng_.config().poll_max_us));
    ++step;
    if (lock_rank >= 0 && !am_mode_ && us >= 16) {  // a long wait for a lock: the releaser rings us
        register_lock_wait(lock_rank);
        if (lock_excl && lock_rank != 0) register_lock_wait(0);
    }
    eng_.progress().doze(us);  // a peer's release or post rings us awake
}

bool Window::try_lock(Target* t) {
    if (t->lock_type == MPI_LOCK_SHARED) return lockproto::try_shared(tp(t->rank), peer(t->rank));
    return lockproto::try_exclusive(tp(0), peer(0), tp(t->rank), peer(t->rank));
}

// Doorbells for lock waits on shared memory. A waiter about to sleep (a sync call past
// its yield phase, the progress thread backing off 16 us or more) sets its bit in the
// waiter bitmap of the processes whose lock words it needs (the target; for exclusive
// locks and lock_all also the master, rank 0). A releaser takes the bitmap after releasing
// and, for each waiter, bumps the waiter's kick word and rings its process's doorbell: the
// progress thread retries at once instead of after its back-off, a dozing thread wakes.
// Waiters that only spin or yield do not register: ringing them would cost a futex call
// and buy nothing (measured: contended hand-off 0.95 -> 2.4 us with every waiter rung).
// A release between a waiter's failed try and its bit costs that waiter one back-off.
void Window::register_lock_wait(int rank) {
    if (am_mode_) return;
    std::uint64_t* state = state_of(rank);
    __atomic_fetch_or(&state[lock_waiters_word0(nprocs_) + std::size_t(rank_) / 64], 1ull << (rank_ % 64),
                      __ATOMIC_SEQ_CST);
}

void Window::ring_lock_waiters(int rank) {
    if (am_mode_) return;  // (shm windows: every state area is mapped)
    std::uint64_t* const state = state_of(rank);
    // One waiter per release, the one after the releaser in rank order (round robin, so no
    // rank starves): one process can take what was released, and waking every sleeper on
    // a node with fewer cores than ranks only takes the cores from the next holder
    // (measured at 4 ranks on 2 cores: 3.8 us per hand-off polling, 4.7-14.6 waking all).
    const std::size_t nw = post_bitmap_words(nprocs_);
    std::uint64_t* words = &state[lock_waiters_word0(nprocs_)];
    for (std::size_t k = 0; k <= nw; ++k) {
        const std::size_t w = (std::size_t(rank_ + 1) / 64 + k) % nw;
        std::uint64_t bits = __atomic_load_n(&words[w], __ATOMIC_SEQ_CST);
        if (k == 0) bits &= ~0ull << ((rank_ + 1) % 64);  // ranks after me in my own word
        if (!bits) continue;
        const int r = int(w * 64) + __builtin_ctzll(bits);
        if (!(__atomic_fetch_and(&words[w], ~(1ull << (r % 64)), __ATOMIC_SEQ_CST) & (1ull << (r % 64))))
            continue;  // another releaser took it
        std::uint64_t* info = state_of(r);
        if (!info) return;
        __atomic_fetch_add(&info[kLockKick], 1, __ATOMIC_SEQ_CST);
        SegmentExport bell;
        std::memcpy(static_cast<void*>(&bell), &info[kInfoBell], sizeof bell);
        if (eng_.ring_peer(bell)) bump(Stat::bells_rung);
        return;
    }
}

// Remote completion at every target. Over am all flush requests leave first, then the
// answers are awaited (AmEndpoint::flush_all): one round trip, not one per target.
void Window::flush_every_target() {
    if (endpoint_) {
        endpoint_->flush_all();
        tp(rank_).flush(peer(rank_));
        return;
    }
    for (int r = 0; r < nprocs_; ++r) tp(r).flush(peer(r));
}

bool Window::try_lock_all_once() { return lockproto::try_lock_all(tp(0), peer(0)); }

bool Window::try_acquire(Target* t) {
    if (t->state == AccessState::lock_granted) return true;
    const bool ok = (t->assert_ & MPI_MODE_NOCHECK) || try_lock(t);
    if (!ok) {
        bump(Stat::lock_retries);
        return false;
    }
    t->acquired = !(t->assert_ & MPI_MODE_NOCHECK);
    if (t->state != AccessState::lock_granted) waiting_targets_.fetch_sub(1);
    t->state = AccessState::lock_granted;
    return true;
}

void Window::release(Target* t) {
    if (!t->acquired) return;
    Transport& tp = this->tp(t->rank);
    if (t->lock_type == MPI_LOCK_SHARED) lockproto::unlock_shared(tp, peer(t->rank));
    else lockproto::unlock_exclusive(this->tp(0), peer(0), tp, peer(t->rank));
    t->acquired = false;
    // An am origin's lock request parked here may take it now: my progress thread retries.
    if (t->rank == rank_ && endpoint_ && endpoint_->has_parked()) eng_.progress().wake();
    ring_lock_waiters(t->rank);
    if (t->lock_type != MPI_LOCK_SHARED && t->rank != 0) ring_lock_waiters(0);
}

int Window::drain(Target* t) {
    int rc = MPI_SUCCESS;
    while (t->state == AccessState::lock_granted && t->head) {
        Op* op = t->pop();
        int r = issue(t->rank, *op);
        if (r && !rc) rc = r;
        ++t->issued;
        ++t->completed;
        Pool<Op>::put(op);
        queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    return rc;
}

int Window::lock(int lock_type, int rank, int assert_) {
    if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
        return raise(MPI_ERR_LOCKTYPE, "FRMA_Win_lock: lock_type %d is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE", lock_type);
    if (int rc = check_target_rank("FRMA_Win_lock", rank)) return rc;
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    Target* t = nullptr;
    {
        std::lock_guard lk(epoch_mu_);
        AccessMode m = mode_.load();
        if (m != AccessMode::none && m != AccessMode::per_target && m != AccessMode::fence_called)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d: %s is open on this window", rank, mode_name(m));
        if (info.no_locks)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: the window was created with info no_locks=true");
        Slot& s = slots_.slot_of(rank);
        std::lock_guard sl(s.mu);
        if (slots_.find(rank))
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock: rank %d is already locked by this process", rank);
        t = target_pool_.get();
        if (!t)
            return raise(MPI_ERR_NO_MEM, "FRMA_Win_lock: rank %d: all %zu+%zu targets are in use by open lock epochs (raise FASTRMA_WIN_TARGET_POOL / FASTRMA_TARGET_POOL)",
                         rank, eng_.config().win_target_pool, eng_.config().target_pool);
        t->rank = rank;
        t->lock_type = lock_type;
        t->assert_ = assert_;
        t->state = AccessState::lock_called;
        waiting_targets_.fetch_add(1);
        slots_.insert(t);
        ++n_locks_;
        mode_.store(AccessMode::per_target, std::memory_order_release);
        // One attempt now; most locks are free.
        if (try_acquire(t)) return MPI_SUCCESS;
    }
    // A lock on ourselves must be granted on return: MPI lets us load and store under it.
    if (rank == rank_) {
        WaitPace pace;
        while (true) {
            {
                Slot& s = slots_.slot_of(rank);
                std::lock_guard sl(s.mu);
                if (try_acquire(t)) return MPI_SUCCESS;
            }
            backoff(pace, rank, lock_type != MPI_LOCK_SHARED);
        }
    }
    // Remote: return LOCK_CALLED; the progress thread retries and issues queued ops.
    eng_.progress().wake();
    return MPI_SUCCESS;
}

int Window::wait_target(int rank, SyncFlag flag, bool remove) {
    const char* call = remove ? "FRMA_Win_unlock" : "FRMA_Win_flush";
    WaitPace pace;
    Slot& s = slots_.slot_of(rank);
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(rank);
        if (!t) return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", call, rank);
        t->raise_sync(flag);
        // Nothing was ever queued or issued and the lock is not ours yet: an unlock can
        // simply withdraw the request (no one can observe the difference).
        if (remove && t->state != AccessState::lock_granted && !t->head && t->issued == 0) {
            waiting_targets_.fetch_sub(1);
            slots_.remove(t);
            Pool<Target>::put(t);
            return MPI_SUCCESS;
        }
        if (t->state != AccessState::lock_granted && !try_acquire(t)) {
            const bool excl = t->lock_type != MPI_LOCK_SHARED;
            sl.unlock();
            backoff(pace, rank, excl);
            continue;
        }
        int rc = drain(t);
        // Over an ordered transport the lock release completes the epoch itself
        // (Transport::release): it leaves with the last ops, and its answer, if it needs
        // one, comes after all of them were applied (lock + put + unlock: one message each
        // way). MPI_Win_flush_local asks only for local completion.
        const bool release_covers = remove && t->acquired && tp(rank).caps(peer(rank)).ordered;
        if (flag == SyncFlag::flush_local) tp(rank).flush_local(peer(rank));
        else if (!release_covers) tp(rank).flush(peer(rank));
        if (int e = complete_deferred(); e && !rc) rc = e;  // direct ops of the epoch
        if (remove) {
            release(t);
            slots_.remove(t);
            Pool<Target>::put(t);
        } else {
            t->sync = SyncFlag::none;
        }
        if (int e = refused_by_targets(call, rank, rank + 1); e && !rc) rc = e;
        return rc;
    }
}

int Window::unlock(int rank) {
    if (int rc = check_target_rank("FRMA_Win_unlock", rank)) return rc;
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (mode_.load() != AccessMode::per_target)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_unlock: rank %d is not locked (%s is open)", rank, mode_name(mode_.load()));
    int rc = wait_target(rank, SyncFlag::unlock, true);
    if (rc == MPI_ERR_RMA_SYNC) return rc;
    std::lock_guard lk(epoch_mu_);
    if (--n_locks_ == 0) mode_.store(AccessMode::none, std::memory_order_release);
    return rc;
}

int Window::lock_all(int assert_) {
    if (assert_ & ~MPI_MODE_NOCHECK)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_lock_all: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    std::lock_guard lk(epoch_mu_);
    AccessMode m = mode_.load();
    if (m != AccessMode::none && m != AccessMode::fence_called)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock_all: %s is already open on this window", mode_name(m));
    if (info.no_locks)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_lock_all: the window was created with info no_locks=true");
    lock_all_assert_ = assert_;
    if (assert_ & MPI_MODE_NOCHECK) {
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else if (try_lock_all_once()) {
        lock_all_acquired_ = true;
        mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
    } else {
        // Not granted yet: return (MPI allows it); the first op or sync call, or the
        // progress thread, completes the acquisition.
        lock_all_acquired_ = false;
        mode_.store(AccessMode::lock_all_called, std::memory_order_release);
        eng_.progress().wake();
    }
    return MPI_SUCCESS;
}

int Window::ensure_lock_all() {
    WaitPace pace;
    while (true) {
        {
            std::lock_guard lk(epoch_mu_);
            AccessMode m = mode_.load();
            if (m == AccessMode::lock_all_granted) return MPI_SUCCESS;
            if (m != AccessMode::lock_all_called) return MPI_ERR_RMA_SYNC;
            if (try_lock_all_once()) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                return MPI_SUCCESS;
            }
            bump(Stat::lock_retries);
        }
        backoff(pace, 0, false);
    }
}

int Window::unlock_all() {
    AccessMode m = mode_.load();
    if (m != AccessMode::lock_all_called && m != AccessMode::lock_all_granted)
        return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_unlock_all: no lock_all epoch is open (%s)", mode_name(m));
    std::lock_guard lk(epoch_mu_);
    m = mode_.load();
    int rc = MPI_SUCCESS;
    if (m == AccessMode::lock_all_granted) {
        rc = complete_deferred();  // before the lock goes: the copies belong to the epoch
        flush_every_target();
        if (int e = refused_by_targets("FRMA_Win_unlock_all", 0, nprocs_); e && !rc) rc = e;
        if (lock_all_acquired_) {
            lockproto::unlock_all(tp(0), peer(0));
            if (rank_ == 0 && endpoint_ && endpoint_->has_parked()) eng_.progress().wake();  // as in release()
            ring_lock_waiters(0);
        }
    }
    // lock_all_called: no op was ever issued (an op would have completed the acquisition).
    lock_all_acquired_ = false;
    mode_.store(AccessMode::none, std::memory_order_release);
    return rc;
}

int Window::flush(int rank, bool local) {
    const char* call = local ? "FRMA_Win_flush_local" : "FRMA_Win_flush";
    if (int rc = check_target_rank(call, rank)) return rc;
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    switch (mode_.load(std::memory_order_acquire)) {
    case AccessMode::lock_all_granted: {
        tp(rank).flush(peer(rank));
        const int rc = complete_deferred();
        const int refused = refused_by_targets(call, rank, rank + 1);
        return rc ? rc : refused;
    }
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target:
        return wait_target(rank, local ? SyncFlag::flush_local : SyncFlag::flush, false);
    default: break;
    }
    return raise(MPI_ERR_RMA_SYNC, "%s: rank %d: no passive-target epoch is open", call, rank);
}

int Window::flush_all(bool local) {
    const char* call = local ? "FRMA_Win_flush_local_all" : "FRMA_Win_flush_all";
    switch (mode_.load(std::memory_order_acquire)) {
    case AccessMode::lock_all_granted: {
        if (am_mode_)  // messages in flight: remote completion needs each target's answer
            flush_every_target();
        int rc = complete_deferred();
        __atomic_thread_fence(__ATOMIC_SEQ_CST);  // shm: every other op completed at issue
        if (int e = refused_by_targets(call, 0, nprocs_); e && !rc) rc = e;
        return rc;
    }
    case AccessMode::lock_all_called:
        return ensure_lock_all();
    case AccessMode::per_target: {
        // Flush only the targets that are locked (active targets), not all ranks.
        std::vector<int> ranks;
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            Slot& s = slots_.slot_at(i);
            std::lock_guard sl(s.mu);
            for (Target* t = s.head; t; t = t->next) ranks.push_back(t->rank);
        }
        int rc = MPI_SUCCESS;
        for (int r : ranks) {
            int e = wait_target(r, local ? SyncFlag::flush_local : SyncFlag::flush, false);
            if (e && e != MPI_ERR_RMA_SYNC && !rc) rc = e;  // unlocked meanwhile: fine
        }
        return rc;
    }
    default: break;
    }
    return raise(MPI_ERR_RMA_SYNC, "%s: no passive-target epoch is open", call);
}

int Window::sync() {
    // Over am, requests from remote origins are applied by the progress thread (or any
    // thread inside MPI): its writes are ordered before our later loads through the
    // server's mutex (a fence alone says nothing to the thread that wrote).
    if (endpoint_) endpoint_->sync_with_server();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Operations

int Window::check_target_rank(const char* call, int rank) const {
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (rank < 0 || rank >= nprocs_)
        return raise(MPI_ERR_RANK, "%s: rank %d is outside the window's group of %d", call, rank, nprocs_);
    return MPI_SUCCESS;
}

namespace {
int layout_of(const char* call, const char* what, MPI_Datatype t, std::shared_ptr<const Layout>* out) {
    std::string why;
    if (get_layout(t, out, &why) != MPI_SUCCESS)
        return raise(MPI_ERR_TYPE, "%s: %s datatype: %s", call, what, why.c_str());
    return MPI_SUCCESS;
}
}  // namespace

int Window::validate(const OpRequest& rq, Op* op) const {
    const char* call = rq.call;
    if (rq.origin_count < 0 || rq.target_count < 0 || rq.result_count < 0)
        return raise(MPI_ERR_COUNT, "%s: negative count (origin %d, target %d, result %d)", call,
                     rq.origin_count, rq.target_count, rq.result_count);
    op->kind = rq.kind;
    op->op = rq.op;
    op->origin = rq.origin;
    op->result = rq.result;
    op->compare = rq.compare;
    op->ocount = std::uint64_t(rq.origin_count);
    op->rcount = std::uint64_t(rq.result_count);
    op->tcount = std::uint64_t(rq.target_count);
    if (int rc = layout_of(call, "target", rq.target_type, &op->tlay)) return rc;
    const Layout& tl = *op->tlay;
    std::string why;

    switch (rq.kind) {
    case RmaKind::put:
    case RmaKind::get:
        if (int rc = layout_of(call, "origin", rq.origin_type, &op->olay)) return rc;
        if (check_signature(*op->olay, op->ocount, tl, op->tcount, &why) != MPI_SUCCESS)
            return raise(MPI_ERR_TYPE, "%s: %s", call, why.c_str());
        // Where each side is built from one basic type, the types must be the same (type
        // signatures match); MPI_BYTE is accepted against anything, as codes rely on it.
        if (const TypeInfo *ob = op->olay->basic(), *tb = tl.basic();
            ob && tb && ob != tb && ob->type != MPI_BYTE && tb->type != MPI_BYTE)
            return raise(MPI_ERR_TYPE, "%s: origin (%s) and target (%s) type signatures differ",
                         call, ob->name, tb->name);
        if (rq.kind == RmaKind::get) op->result = const_cast<void*>(rq.origin);
        break;
    case RmaKind::acc:
    case RmaKind::get_acc:
    case RmaKind::fop: {
        const bool noop = rq.op == MPI_NO_OP && rq.kind != RmaKind::acc;
        if (rq.kind != RmaKind::acc) {
            if (int rc = layout_of(call, "result", rq.result_type, &op->rlay)) return rc;
            // (The reason is spelled out only on failure: on success it would be a string
            // built and dropped on every accumulate.)
            if (int rc = check_accumulate_layouts(rq.op, *op->rlay, op->rcount, tl, op->tcount, nullptr)) {
                check_accumulate_layouts(rq.op, *op->rlay, op->rcount, tl, op->tcount, &why);
                return raise(rc, "%s: result and target: %s", call, why.c_str());
            }
        }
        if (noop) {  // MPI ignores the origin arguments of MPI_NO_OP
            op->olay = op->rlay;
            op->ocount = op->rcount;
            op->origin = nullptr;
        } else {
            if (int rc = layout_of(call, "origin", rq.origin_type, &op->olay)) return rc;
            if (int rc = check_accumulate_layouts(rq.op, *op->olay, op->ocount, tl, op->tcount, nullptr)) {
                check_accumulate_layouts(rq.op, *op->olay, op->ocount, tl, op->tcount, &why);
                return raise(rc, "%s: %s", call, why.c_str());
            }
        }
        op->type = tl.basic();
        break;
    }
    case RmaKind::cas: {
        const TypeInfo* ti = lookup_type(rq.target_type);
        if (!ti || check_compare_and_swap(rq.target_type, nullptr) != MPI_SUCCESS) {
            check_compare_and_swap(rq.target_type, &why);
            return raise(MPI_ERR_TYPE, "%s: %s", call, why.c_str());
        }
        op->type = ti;
        op->olay = op->rlay = op->tlay;
        break;
    }
    }
    op->bytes = tl.size() * op->tcount;
    if (op->bytes > 0) {
        // A NULL buffer is MPI_BOTTOM: legal when the datatype holds absolute addresses
        // (its data starts above address 0), refused when it would touch the first page.
        auto null_buffer = [](const void* buf, const std::shared_ptr<const Layout>& l) {
            return !buf && (!l || l->true_lb() < 4096);
        };
        const bool origin_ignored = op->op == MPI_NO_OP && rq.kind != RmaKind::acc;
        if (rq.kind != RmaKind::get && !origin_ignored && null_buffer(op->origin, op->olay))
            return raise(MPI_ERR_ARG, "%s: origin buffer is NULL for %d elements", call, rq.origin_count);
        if (rq.kind == RmaKind::get && null_buffer(op->result, op->olay))
            return raise(MPI_ERR_ARG, "%s: origin buffer is NULL for %d elements", call, rq.origin_count);
        if (rq.kind != RmaKind::put && rq.kind != RmaKind::acc && rq.kind != RmaKind::get &&
            null_buffer(op->result, op->rlay))
            return raise(MPI_ERR_ARG, "%s: result buffer is NULL", call);
        if (rq.kind == RmaKind::cas && !rq.compare)
            return raise(MPI_ERR_ARG, "%s: compare buffer is NULL", call);
    }

    // Displacement: nothing may be written outside the target's part of the window.
    const PeerRegion pr = peer(rq.target_rank);
    const int du = int(disp_unit_of(rq.target_rank));
    if (rq.target_disp < 0 && flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_RMA_RANGE, "%s: target_disp %ld is negative", call, long(rq.target_disp));
    auto [lo, hi] = footprint(tl, op->tcount);
    op->lo = lo;
    op->hi = hi;
    const __int128 off = __int128(rq.target_disp) * du;
    if (op->bytes > 0 && (off + lo < 0 || off + hi > __int128(pr.size)))
        return raise(MPI_ERR_RMA_RANGE,
                     "%s: target_disp %ld x disp_unit %d + %llu x %s touches bytes [%lld, %lld), outside rank %d's window of %llu bytes",
                     call, long(rq.target_disp), du, static_cast<unsigned long long>(op->tcount),
                     tl.description(), static_cast<long long>(off + lo), static_cast<long long>(off + hi),
                     rq.target_rank, static_cast<unsigned long long>(pr.size));
    op->offset = std::uint64_t(off);
    return MPI_SUCCESS;
}

void Window::count_op(RmaKind k) {
    static constexpr Stat by_kind[] = {Stat::puts, Stat::gets, Stat::accs, Stat::accs, Stat::fops, Stat::cases};
    bump(by_kind[int(k)]);
}

int Window::issue(int rank, const Op& op) {
    return issue_op(ctx(rank), op);
}

Op* Window::alloc_op() {
    while (true) {
        if (Op* op = op_pool_.get()) return op;
        // Both pools are exhausted: force out the queued ops of the fullest target.
        bump(Stat::gc_runs);
        if (!collect_garbage()) {
            WaitPace pace;
            backoff(pace);  // another thread's ops hold the pool; they drain soon
        }
    }
}

bool Window::collect_garbage() {
    int victim = -1;
    std::size_t most = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::lock_guard sl(s.mu);
        for (Target* t = s.head; t; t = t->next)
            if (t->npending > most) { most = t->npending; victim = t->rank; }
    }
    if (victim < 0) return false;
    // A local flush of the victim: wait for its lock (helping progress) and issue its queue.
    WaitPace pace;
    Slot& s = slots_.slot_of(victim);
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(victim);
        if (!t || !t->head) return true;
        if (try_acquire(t)) {
            if (int e = drain(t)) note_late_error(e);
            return true;
        }
        const int lr = t->rank;
        const bool excl = t->lock_type != MPI_LOCK_SHARED;
        sl.unlock();
        backoff(pace, lr, excl);
    }
}

// Which epoch lets this op go to rank? Completes a pending lock_all and turns a fresh
// fence epoch into an active one. On success *m is the mode to issue under.
int Window::check_epoch_for_op(const char* call, int r, AccessMode* m) {
    *m = mode_.load(std::memory_order_acquire);
    if (*m == AccessMode::lock_all_called) {
        if (ensure_lock_all() == MPI_SUCCESS) *m = AccessMode::lock_all_granted;
        else *m = mode_.load(std::memory_order_acquire);
    }
    if (*m == AccessMode::fence_called) {
        AccessMode expected = AccessMode::fence_called;
        mode_.compare_exchange_strong(expected, AccessMode::fence_active);
        *m = mode_.load(std::memory_order_acquire);
    }
    switch (*m) {
    case AccessMode::lock_all_granted:
    case AccessMode::fence_active:
    case AccessMode::per_target:
        return MPI_SUCCESS;
    case AccessMode::pscw:
        if (in_start_group(r)) return MPI_SUCCESS;
        return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not in the group of this process's FRMA_Win_start", call, r);
    default:
        return raise(MPI_ERR_RMA_SYNC, "%s: no access epoch is open to rank %d (lock, lock_all, fence or start first)", call, r);
    }
}

void Window::read_words(int r, std::size_t word, std::size_t count, std::uint64_t* out) const {
    if (am_peer(r)) {
        endpoint_->read_state(r, word, count, out);
        return;
    }
    const std::uint64_t* w = (r == rank_ ? my_state_ : state_of(r)) + word;
    for (std::size_t i = 0; i < count; ++i) out[i] = __atomic_load_n(w + i, __ATOMIC_ACQUIRE);
}

// Dynamic windows: the displacement is an address that must lie in one region the target
// has attached. The peer's table is re-read whenever its version moved, so a region that
// was detached (and whose memory may be reused) is never written.
int Window::dynamic_offset(const char* call, int r, std::uint64_t addr, std::uint64_t bytes) {
    if (bytes == 0 || dynamic_contains(r, addr, bytes)) return MPI_SUCCESS;
    return raise(MPI_ERR_RMA_RANGE, "%s: address %#llx + %llu bytes is not inside a region rank %d has attached",
                 call, static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes), r);
}

namespace {
// Whether the regions region(0..count) cover [addr, addr + bytes) together: one region, or
// adjacent ones (attached back to back; every byte is attached, so MPI allows the access).
// Regions never overlap, so the next piece starts exactly where the last one ended. No
// wrap-around: an access whose end overflows is never covered.
template <class Region>
bool regions_cover(std::uint64_t count, Region region, std::uint64_t addr, std::uint64_t bytes) {
    if (addr + bytes < addr) return false;
    const std::uint64_t end = addr + bytes;
    for (std::uint64_t cur = addr;;) {
        bool advanced = false;
        for (std::uint64_t i = 0; i < count; ++i) {
            const auto [base, size] = region(i);
            if (cur >= base && cur - base < size) {  // cur inside [base, base + size)
                if (end - base <= size) return true;
                cur = base + size;
                advanced = true;
                break;
            }
        }
        if (!advanced) return false;
    }
}

// Whether [addr, addr + bytes) lies in the regions of a dynamic-window table mapped here (the
// owner's words: version, count, then base/size pairs; the version is odd while the owner
// changes it). A seqlock read: no lock, nothing written.
bool table_covers(const std::uint64_t* table, std::size_t capacity, std::uint64_t addr, std::uint64_t bytes) {
    for (unsigned spins = 0;; ++spins) {
        const std::uint64_t v1 = __atomic_load_n(&table[0], __ATOMIC_ACQUIRE);
        if (v1 & 1) {  // attach/detach under way (the owner may be descheduled in it)
            if (spins > 64) sched_yield(); else __builtin_ia32_pause();
            continue;
        }
        const std::uint64_t count = std::min<std::uint64_t>(__atomic_load_n(&table[1], __ATOMIC_ACQUIRE), capacity);
        const bool found = regions_cover(count, [&](std::uint64_t i) {
            return std::pair<std::uint64_t, std::uint64_t>{__atomic_load_n(&table[kDynHeaderWords + 2 * i], __ATOMIC_RELAXED),
                                                           __atomic_load_n(&table[kDynHeaderWords + 2 * i + 1], __ATOMIC_RELAXED)};
        }, addr, bytes);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&table[0], __ATOMIC_RELAXED) == v1) return found;
    }
}
}  // namespace

bool Window::dynamic_contains(int r, std::uint64_t addr, std::uint64_t bytes) {
    // A peer of this node: its table is mapped here, read in place (no cache, no lock:
    // threads posting to a dynamic window do not serialize here).
    if (!am_peer(r)) return table_covers((r == rank_ ? my_state_ : state_of(r)) + dyn_word0_, dyn_capacity_, addr, bytes);
    std::lock_guard lk(dyn_mu_);
    RegionCache& c = dyn_cache_[r];
    auto inside = [&] {
        return regions_cover(c.regions.size(), [&](std::uint64_t i) {
            return std::pair<std::uint64_t, std::uint64_t>{c.regions[i].base, c.regions[i].size};
        }, addr, bytes);
    };
    // Over am, reading the version is a round trip: a hit in the cached table goes, and the
    // target checks again when the request arrives (AmLocal::attached; a refusal is
    // reported at the next completion point: refused_by_targets). A miss re-reads the table.
    if (inside()) return true;
    for (;;) {
        std::uint64_t hdr[kDynHeaderWords];
        read_words(r, dyn_word0_, kDynHeaderWords, hdr);
        const std::uint64_t v1 = hdr[0];
        if (v1 == c.version) break;
        if (v1 & 1) { sched_yield(); continue; }  // the owner is changing it
        const std::uint64_t count = std::min<std::uint64_t>(hdr[1], dyn_capacity_);
        std::vector<std::uint64_t> words(2 * count);
        if (count) read_words(r, dyn_word0_ + kDynHeaderWords, 2 * count, words.data());
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        std::uint64_t v2;
        read_words(r, dyn_word0_, 1, &v2);
        if (v2 != v1) continue;
        c.regions.resize(count);
        for (std::uint64_t i = 0; i < count; ++i) c.regions[i] = {words[2 * i], words[2 * i + 1]};
        c.version = v1;
    }
    return inside();
}

bool Window::attached_here(std::uint64_t addr, std::uint64_t bytes) const {
    return table_covers(my_state_ + dyn_word0_, dyn_capacity_, addr, bytes);
}

int Window::refused_by_targets(const char* call, int lo, int hi) {
    if (!endpoint_ || flavor_ != MPI_WIN_FLAVOR_DYNAMIC) return MPI_SUCCESS;
    endpoint_->serve_arrived();
    int first = -1;
    std::uint64_t total = 0;
    for (int r = lo; r < hi; ++r) {
        if (r == rank_) continue;
        if (const std::uint64_t n = endpoint_->take_rejected(r)) {
            if (first < 0) first = r;
            total += n;
        }
    }
    if (!total) return MPI_SUCCESS;
    return raise(MPI_ERR_RMA_RANGE,
                 "%s: %llu request(s) to rank %d%s were not applied: their addresses were no longer inside a "
                 "region the target had attached when they arrived (detached after this process last read its regions)",
                 call, static_cast<unsigned long long>(total), first, total > 1 && hi - lo > 1 ? " and others" : "");
}

int Window::post(const OpRequest& rq, bool complete_now) {
    if (int rc = check_target_rank(rq.call, rq.target_rank)) return rc;
    if (rq.target_rank == MPI_PROC_NULL) return MPI_SUCCESS;
    Op desc;
    if (int rc = validate(rq, &desc)) return rc;
    const int r = rq.target_rank;
    if (flavor_ == MPI_WIN_FLAVOR_DYNAMIC)
        if (desc.bytes > 0)
            if (int rc = dynamic_offset(rq.call, r, desc.offset + std::uint64_t(desc.lo), std::uint64_t(desc.hi - desc.lo))) return rc;
    AccessMode m;
    if (int rc = check_epoch_for_op(rq.call, r, &m)) return rc;
    if (complete_now && m != AccessMode::per_target && m != AccessMode::lock_all_granted)
        return raise(MPI_ERR_RMA_SYNC, "%s: request-based operations need a passive-target epoch (lock or lock_all)", rq.call);
    if (desc.kind != RmaKind::put && desc.kind != RmaKind::get) acc_order();
    if (m != AccessMode::per_target) {
        count_op(desc.kind);
        if (desc.bytes == 0) return MPI_SUCCESS;
        bump(Stat::direct);
        if (int rc = issue(r, desc)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
        if (complete_now)
            if (int rc = complete_request(r)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
        return MPI_SUCCESS;
    }

    Slot& s = slots_.slot_of(r);
    Op* spare = nullptr;
    while (true) {
        std::unique_lock sl(s.mu);
        Target* t = slots_.find(r);
        if (!t) {
            if (spare) Pool<Op>::put(spare);
            return raise(MPI_ERR_RMA_SYNC, "%s: rank %d is not locked by this process", rq.call, r);
        }
        if (desc.bytes == 0) {
            count_op(desc.kind);
            if (spare) Pool<Op>::put(spare);
            return MPI_SUCCESS;
        }
        if (!t->head && (t->state == AccessState::lock_granted || try_acquire(t))) {
            // Fast path: granted, nothing queued before us: issue from this thread.
            count_op(desc.kind);
            ++t->issued;
            ++t->completed;
            sl.unlock();
            if (spare) Pool<Op>::put(spare);
            bump(Stat::direct);
            if (int rc = issue(r, desc)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
            if (complete_now)
                if (int rc = complete_request(r)) return raise(rc, "%s: %s", rq.call, last_error_message().c_str());
            return MPI_SUCCESS;
        }
        if (complete_now) {
            // A request must be complete when we hand it out: get the lock and issue
            // the queue ahead of us now, then come back to the fast path above.
            sl.unlock();
            if (int rc = wait_target(r, SyncFlag::flush_local, false)) {
                if (spare) Pool<Op>::put(spare);
                return rc;
            }
            continue;
        }
        if (!spare) {
            // Queue it; allocation may have to collect garbage, never under a slot mutex.
            sl.unlock();
            spare = alloc_op();
            continue;
        }
        count_op(desc.kind);
        void* home = spare->home;
        *spare = desc;
        spare->home = home;
        t->push(spare);
        queued_.fetch_add(1, std::memory_order_relaxed);
        bump(Stat::queued);
        sl.unlock();
        eng_.progress().wake();
        return MPI_SUCCESS;
    }
}

// ---------------------------------------------------------------------------------------
// Active target: fence and post/start/complete/wait.

int Window::fence(int assert_) {
    constexpr int kAllowed = MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED;
    if (assert_ & ~kAllowed)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_fence: assert %#x has bits other than NOSTORE, NOPUT, NOPRECEDE, NOSUCCEED", assert_);
    {
        std::lock_guard lk(epoch_mu_);
        AccessMode m = mode_.load();
        if (m != AccessMode::none && m != AccessMode::fence_called && m != AccessMode::fence_active)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_fence: %s is open on this window", mode_name(m));
        if (exposed_)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_fence: a PSCW exposure epoch (FRMA_Win_post) is open; call FRMA_Win_wait first");
        if (m == AccessMode::fence_active && (assert_ & MPI_MODE_NOPRECEDE))
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_fence: MPI_MODE_NOPRECEDE, but this process issued operations since the last fence");
    }
    // Complete what this process issued (on shared memory: complete already; order it),
    // then the barrier: after it, every process's operations of the closing epoch are
    // complete at their targets, and local stores before the fence are visible to all.
    int off_rc = complete_deferred();
    if (endpoint_) {
        // Over am: one count exchange instead of a round trip per target and a barrier.
        if (int rc = endpoint_->fence(); rc && !off_rc)
            off_rc = raise(rc, "FRMA_Win_fence: the request count exchange failed");
        if (int e = refused_by_targets("FRMA_Win_fence", 0, nprocs_); e && !off_rc) off_rc = e;
        if (endpoint_->has_parked()) eng_.progress().wake();  // next-epoch requests that waited
    } else {
        flush_every_target();
        bs_->barrier();
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    std::lock_guard lk(epoch_mu_);
    mode_.store((assert_ & MPI_MODE_NOSUCCEED) ? AccessMode::none : AccessMode::fence_called,
                std::memory_order_release);
    return off_rc;
}

namespace {
int check_group(const char* call, const std::vector<int>& group, int nprocs) {
    for (int g : group)
        if (g < 0 || g >= nprocs)
            return raise(MPI_ERR_GROUP, "%s: the group holds a process (%d) that is not in the window's group", call, g);
    return MPI_SUCCESS;
}
}  // namespace

int Window::expose(const std::vector<int>& group, int assert_) {
    constexpr int kAllowed = MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT;
    if (assert_ & ~kAllowed)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_post: assert %#x has bits other than NOCHECK, NOSTORE, NOPUT", assert_);
    if (int rc = check_group("FRMA_Win_post", group, nprocs_)) return rc;
    {
        std::lock_guard lk(epoch_mu_);
        if (exposed_)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_post: an exposure epoch is already open (FRMA_Win_wait/test first)");
        if (mode_.load() == AccessMode::fence_active)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_post: a fence epoch with operations is open");
        exposed_ = true;
        expose_expected_ = group.size();
        if (mode_.load() == AccessMode::fence_called) mode_.store(AccessMode::none);
    }
    // Local stores before the post must be visible to the origins that start after it.
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!(assert_ & MPI_MODE_NOCHECK))
        for (int g : group) {
            if (am_peer(g)) endpoint_->post_to(g);  // counted (AmEndpoint::post_to)
            else tp(g).notify8(peer(g), kPostBitmap0 + std::size_t(rank_) / 64, AtomicOp::fetch_or, 1ull << (rank_ % 64));
        }
    return MPI_SUCCESS;
}

int Window::start(const std::vector<int>& group, int assert_) {
    constexpr int kAllowed = MPI_MODE_NOCHECK;
    if (assert_ & ~kAllowed)
        return raise(MPI_ERR_ASSERT, "FRMA_Win_start: assert %#x has bits other than MPI_MODE_NOCHECK", assert_);
    if (int rc = check_group("FRMA_Win_start", group, nprocs_)) return rc;
    {
        std::lock_guard lk(epoch_mu_);
        AccessMode m = mode_.load();
        if (m != AccessMode::none && m != AccessMode::fence_called)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_start: %s is open on this window", mode_name(m));
        start_group_ = group;
        std::sort(start_group_.begin(), start_group_.end());
        mode_.store(AccessMode::pscw, std::memory_order_release);
    }
    if (assert_ & MPI_MODE_NOCHECK) return MPI_SUCCESS;
    // Wait until every target of the group has posted; consume exactly one post of each,
    // so an early post for a later epoch stays for that epoch. Over am, only until the post
    // of the previous epoch with it has arrived: the target itself holds this epoch's
    // requests until its post (AmEndpoint::post_to).
    for (int g : group) {
        if (am_peer(g)) {
            WaitPace pace;
            while (!endpoint_->may_start(g)) backoff(pace);
            endpoint_->begin_access(g);
            continue;
        }
        const std::size_t w = kPostBitmap0 + std::size_t(g) / 64;
        const std::uint64_t bit = 1ull << (g % 64);
        WaitPace pace;
        while (!(__atomic_load_n(my_word(w), __ATOMIC_ACQUIRE) & bit)) backoff(pace);
        __atomic_fetch_and(my_word(w), ~bit, __ATOMIC_ACQ_REL);
    }
    return MPI_SUCCESS;
}

int Window::complete() {
    const int off_rc = complete_deferred();  // direct ops of this epoch, before the signal
    std::vector<int> group;
    {
        std::lock_guard lk(epoch_mu_);
        if (mode_.load() != AccessMode::pscw)
            return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_complete: no FRMA_Win_start epoch is open");
        group.swap(start_group_);
        mode_.store(AccessMode::none, std::memory_order_release);
    }
    // The ops complete at the target before it counts the signal (its wait is where MPI
    // wants them complete there); at the origin, local completion is all complete owes.
    for (int g : group) {
        tp(g).complete_notify8(peer(g), kPscwComplete, AtomicOp::fetch_add, 1);
        if (am_peer(g)) endpoint_->end_access(g);  // (after a NOCHECK start: a no-op)
    }
    // (No answer comes back: refusals of this epoch's requests that arrive later are
    // reported at the next completion point.)
    if (int e = refused_by_targets("FRMA_Win_complete", 0, nprocs_); e && !off_rc) return e;
    return off_rc;
}

int Window::test_exposure(bool* done) {
    std::lock_guard lk(epoch_mu_);
    if (!exposed_) return raise(MPI_ERR_RMA_SYNC, "FRMA_Win_wait/test: no FRMA_Win_post epoch is open");
    // Completes are counted, never matched by rank: an origin can complete epoch k+1
    // only after our post k+1, which comes after this wait, so counts cannot mix.
    std::uint64_t got = __atomic_load_n(my_word(kPscwComplete), __ATOMIC_ACQUIRE);
    *done = got - completes_seen_ >= expose_expected_;
    if (*done) {
        completes_seen_ += expose_expected_;
        exposed_ = false;
    }
    return MPI_SUCCESS;
}

int Window::wait_exposure() {
    WaitPace pace;
    for (;;) {
        bool done = false;
        if (int rc = test_exposure(&done)) return rc;
        if (done) return MPI_SUCCESS;
        backoff(pace);
    }
}

// ---------------------------------------------------------------------------------------
// Shared and dynamic windows.

int Window::shared_query(int rank, MPI_Aint* size, int* disp_unit, void** base) const {
    if (flavor_ != MPI_WIN_FLAVOR_SHARED)
        return raise(MPI_ERR_RMA_FLAVOR, "FRMA_Win_shared_query: the window is not of flavor shared");
    if (rank == MPI_PROC_NULL) {  // the first process with a non-empty part
        rank = -1;
        for (int r = 0; r < nprocs_ && rank < 0; ++r)
            if (peer(r).size) rank = r;
        if (rank < 0) {  // every part empty: size 0, base NULL (MPI-3.1 §11.2.3; Open MPI's answer)
            *size = 0;
            *disp_unit = int(disp_unit_of(0));
            *base = nullptr;
            return MPI_SUCCESS;
        }
    } else if (rank < 0 || rank >= nprocs_) {
        return raise(MPI_ERR_RANK, "FRMA_Win_shared_query: rank %d is outside the window's group of %d", rank, nprocs_);
    }
    *size = MPI_Aint(peer(rank).size);
    *disp_unit = int(disp_unit_of(rank));
    *base = peer(rank).mapped;
    return MPI_SUCCESS;
}

int Window::attach(void* base, MPI_Aint size) {
    if (flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_RMA_FLAVOR, "FRMA_Win_attach: the window was not created with FRMA_Win_create_dynamic");
    if (size < 0) return raise(MPI_ERR_SIZE, "FRMA_Win_attach: size %ld is negative", long(size));
    if (!base && size > 0) return raise(MPI_ERR_ARG, "FRMA_Win_attach: base is NULL");
    std::lock_guard lk(epoch_mu_);
    std::uint64_t* table = my_word(dyn_word0_);
    std::uint64_t count = table[1];
    const std::uint64_t b = reinterpret_cast<std::uint64_t>(base), e = b + std::uint64_t(size);
    for (std::uint64_t i = 0; i < count; ++i) {
        std::uint64_t rb = table[kDynHeaderWords + 2 * i], re = rb + table[kDynHeaderWords + 2 * i + 1];
        if (b < re && rb < e)
            return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_attach: [%#llx, +%ld) overlaps an attached region",
                         static_cast<unsigned long long>(b), long(size));
    }
    if (count >= dyn_capacity_)
        return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_attach: %zu regions are attached already (FASTRMA_DYN_REGIONS)", dyn_capacity_);
    __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);  // odd: changing
    __atomic_store_n(&table[kDynHeaderWords + 2 * count], b, __ATOMIC_RELAXED);
    __atomic_store_n(&table[kDynHeaderWords + 2 * count + 1], std::uint64_t(size), __ATOMIC_RELAXED);
    __atomic_store_n(&table[1], count + 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);  // even: stable
    return MPI_SUCCESS;
}

int Window::detach(const void* base) {
    if (flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_RMA_FLAVOR, "FRMA_Win_detach: the window was not created with FRMA_Win_create_dynamic");
    bool found = false;
    {
        std::lock_guard lk(epoch_mu_);
        std::uint64_t* table = my_word(dyn_word0_);
        std::uint64_t count = table[1];
        const std::uint64_t b = reinterpret_cast<std::uint64_t>(base);
        for (std::uint64_t i = 0; i < count && !found; ++i) {
            if (table[kDynHeaderWords + 2 * i] != b) continue;
            __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);
            __atomic_store_n(&table[kDynHeaderWords + 2 * i], table[kDynHeaderWords + 2 * (count - 1)], __ATOMIC_RELAXED);
            __atomic_store_n(&table[kDynHeaderWords + 2 * i + 1], table[kDynHeaderWords + 2 * (count - 1) + 1], __ATOMIC_RELAXED);
            __atomic_store_n(&table[1], count - 1, __ATOMIC_RELEASE);
            __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);
            found = true;
        }
    }
    if (!found) return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_detach: %p is not the base of an attached region", base);
    // Over am the server checked requests against the table it saw: once this returns,
    // none of them touches the region any more (the caller may free it).
    if (endpoint_) endpoint_->settle();
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Progress: retry lock acquisitions whose time has come, issue queues of granted targets.

Poll Window::poll() {
    // Active messages: serve what peers asked of us. MPI has no wake-up for an incoming
    // message, so while an am window exists the thread polls with bounded back-off.
    bool served = endpoint_ && endpoint_->poll();
    // ... and send the batches of small puts/accumulates that have waited long enough.
    if (endpoint_ && endpoint_->send_old_batches()) served = true;
    Poll p = poll_targets();
    if (served) return Poll::busy;
    return endpoint_ && p == Poll::idle ? Poll::waiting : p;
}

Poll Window::poll_targets() {
    const bool lock_all_pending = mode_.load(std::memory_order_acquire) == AccessMode::lock_all_called;
    if (!lock_all_pending && waiting_targets_.load(std::memory_order_acquire) == 0 &&
        queued_.load(std::memory_order_acquire) == 0)
        return Poll::idle;
    bool did = false;
    if (lock_all_pending) {
        std::unique_lock lk(epoch_mu_, std::try_to_lock);
        if (lk.owns_lock() && mode_.load() == AccessMode::lock_all_called) {
            if (try_lock_all_once()) {
                lock_all_acquired_ = true;
                mode_.store(AccessMode::lock_all_granted, std::memory_order_release);
                did = true;
            } else {
                register_lock_wait(0);  // this thread sleeps between passes: ring it
            }
        }
    }
    const std::uint64_t now = now_ns();
    // A releaser kicked us (docs/progress.md, doorbells): retry every wait now.
    bool kicked = false;
    if (!am_mode_) {
        const std::uint64_t k = __atomic_load_n(my_word(kLockKick), __ATOMIC_ACQUIRE);
        kicked = kick_seen_.exchange(k, std::memory_order_relaxed) != k;
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_.slot_at(i);
        std::unique_lock sl(s.mu, std::try_to_lock);
        if (!sl.owns_lock()) continue;  // an application thread is working on it
        for (Target* t = s.head; t; t = t->next) {
            if (t->state != AccessState::lock_granted) {
                if (now < t->next_try_ns && !kicked) continue;
                if (!try_acquire(t)) {
                    t->backoff_us = std::min<std::uint32_t>(t->backoff_us ? t->backoff_us * 2 : 1,
                                                            std::uint32_t(eng_.config().poll_max_us));
                    t->next_try_ns = now + std::uint64_t(t->backoff_us) * 1000;
                    if (t->backoff_us >= 16) {  // about to sleep on it: have the releaser ring
                        register_lock_wait(t->rank);
                        if (t->lock_type != MPI_LOCK_SHARED && t->rank != 0) register_lock_wait(0);
                    }
                    continue;
                }
                did = true;
            }
            if (t->head) {
                if (int e = drain(t)) note_late_error(e);
                did = true;
            }
        }
    }
    if (did) return Poll::busy;
    return (waiting_targets_.load() || queued_.load() ||
            mode_.load() == AccessMode::lock_all_called) ? Poll::waiting : Poll::idle;
}

}  // namespace fastrma::detail
