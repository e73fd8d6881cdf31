// engine.cpp — see engine.hpp.
#include "engine/engine.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "base/errors.hpp"
#include "epochs/issue.hpp"
#include "ops/layout.hpp"
#include "progress/spin_wait.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/served.hpp"

namespace fastrma::detail {

namespace {
// The doorbell's page: a memfd segment that peers fetch with pidfd_getfd (never sealed: the
// descriptor stays open for the engine's lifetime). None (null) without memfd, or where
// peers may not take our descriptors (FASTRMA_SHM_METHOD=shm_open): peers' events are then
// polled.
BellPage* make_bell(ShmSegment& seg, const Config& cfg) {
    if (cfg.shm_method == ShmMethod::shm_open) return nullptr;
    if (seg.create(sizeof(BellPage), ShmMethod::pidfd) != 0) return nullptr;  // (raise()d)
    return new (seg.data()) BellPage;
}
}  // namespace

Engine::Engine(const Config& cfg, int local_index, int local_size)
    : cfg_(cfg),
      op_pool_(cfg.op_pool),
      target_pool_(cfg.target_pool),
      offload_(cfg.offload_piece, 1024),
      bell_(make_bell(bell_seg_, cfg)),
      progress_(cfg, local_index, local_size, bell_) {
    set_layout_cache_bytes(cfg_.layout_cache);
    sweep_stale_segments();  // names left by ranks that died mid-creation (shm_open method)
    if (cfg_.ptracer) allow_peer_attach();
    if (cfg_.fault == "nondumpable") prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // peers' attach is refused
    if (cfg_.fault == "kill_holding_stripe") g_fault_kill_holding_stripe.store(true);
    if (cfg_.fault == "kill_serving") served::g_fault_kill_serving.store(true);
    if (cfg_.progress_thread) {
        progress_.start();
        if (cfg_.offload_min) offload_poller_ = progress_.add_poller([this] { return offload_.poll(); });
    }
}

struct Engine::PeerBell {
    ShmSegment seg;
    BellPage* page = nullptr;  // null: could not map (never retried)
};

bool Engine::ring_peer(const SegmentExport& bell) {
    if (bell.pid <= 0 || bell.fd < 0) return false;
    BellPage* page;
    {
        std::lock_guard lk(bells_mu_);
        auto& slot = bells_[{bell.pid, bell.fd}];
        if (!slot) {
            slot = std::make_unique<PeerBell>();
            if (slot->seg.map_peer(bell) == MPI_SUCCESS) slot->page = reinterpret_cast<BellPage*>(slot->seg.data());
            // (else: not fatal, that peer's waits fall back to polling; the message raise()d
            // by map_peer stays in this thread's last-error buffer only)
        }
        page = slot->page;
    }
    if (!page) return false;
    BellPage::ring_it(page);
    return true;
}

Engine::~Engine() {
    // The report reads the progress thread's CPU clock, so it comes before the join.
    if (cfg_.stats) std::fprintf(stderr, "%s", stats_report().c_str());
    progress_.stop();  // drains the pollers: every queued copy has run
    unwatch_all_pids();
}

namespace {
std::mutex g_shard_mu;
std::vector<std::unique_ptr<StatShard>>& shards() {
    static auto* v = new std::vector<std::unique_ptr<StatShard>>;  // never destroyed: threads may count late
    return *v;
}
}  // namespace

StatShard* register_stat_shard() {
    std::lock_guard lk(g_shard_mu);
    shards().push_back(std::make_unique<StatShard>());
    return shards().back().get();
}

std::uint64_t stat_total(Stat s) {
    std::lock_guard lk(g_shard_mu);
    std::uint64_t sum = 0;
    for (auto& sh : shards()) sum += sh->v[int(s)].load(std::memory_order_relaxed);
    return sum;
}

std::string Engine::stats_report() const {
    char buf[1280];
    std::snprintf(
        buf, sizeof buf,
        "fastrma stats: windows=%llu windows_am=%llu windows_ofi=%llu puts=%llu gets=%llu accs=%llu fops=%llu cas=%llu "
        "direct=%llu queued=%llu retries=%llu gc_runs=%llu lock_retries=%llu locks_parked=%llu bells_rung=%llu "
        "cma_batched=%llu cma_drains=%llu atomics_served=%llu atomics_withdrawn=%llu transfers_served=%llu "
        "transfers_withdrawn=%llu bulk_served=%llu bulk_withdrawn=%llu bulk_declined=%llu op_pool_peak=%zu "
        "progress_cpu_ms=%.3f progress_pu=%d progress_follow=%d progress_spin_us=%d progress_nice=%d "
        "progress_sleeps=%llu progress_predicted_sleeps=%llu progress_work_spin_us=%d wait_spin_us=%llu\n",
        (unsigned long long)stat_total(Stat::windows_created), (unsigned long long)stat_total(Stat::windows_am),
        (unsigned long long)stat_total(Stat::windows_ofi), (unsigned long long)stat_total(Stat::puts),
        (unsigned long long)stat_total(Stat::gets), (unsigned long long)stat_total(Stat::accs),
        (unsigned long long)stat_total(Stat::fops), (unsigned long long)stat_total(Stat::cases),
        (unsigned long long)stat_total(Stat::direct), (unsigned long long)stat_total(Stat::queued),
        (unsigned long long)stat_total(Stat::retries), (unsigned long long)stat_total(Stat::gc_runs),
        (unsigned long long)stat_total(Stat::lock_retries), (unsigned long long)stat_total(Stat::locks_parked),
        (unsigned long long)stat_total(Stat::bells_rung), (unsigned long long)stat_total(Stat::cma_batched),
        (unsigned long long)stat_total(Stat::cma_drains), (unsigned long long)stat_total(Stat::atomics_served),
        (unsigned long long)stat_total(Stat::atomics_withdrawn), (unsigned long long)stat_total(Stat::transfers_served),
        (unsigned long long)stat_total(Stat::transfers_withdrawn), (unsigned long long)stat_total(Stat::bulk_served),
        (unsigned long long)stat_total(Stat::bulk_withdrawn), (unsigned long long)stat_total(Stat::bulk_declined),
        op_pool_.peak(), double(progress_.thread_cpu_ns()) / 1e6, progress_.bound_pu(), int(progress_.following()),
        progress_.spin_us(), progress_.nice(), (unsigned long long)progress_.sleeps(),
        (unsigned long long)progress_.predictions(), progress_.work_spin_us(),
        (unsigned long long)(g_wait_spin_ns.load(std::memory_order_relaxed) / 1000));
    return buf;
}

}  // namespace fastrma::detail
