// engine.hpp — the process-wide runtime: configuration, transports, the global op and
// target pools, the progress engine and the statistics counters.
//
// One per process in production (created at the first FRMA call after MPI_Init, torn
// down inside MPI_Finalize); unit tests create one per rank-thread. Windows hold a
// reference; the engine outlives them.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <sys/types.h>

#include "base/bootstrap.hpp"
#include "base/config.hpp"
#include "base/pool.hpp"
#include "base/stats.hpp"
#include "epochs/target.hpp"
#include "ops/op.hpp"
#include "progress/progress.hpp"
#include "transport/peer_links.hpp"
#include "transport/shm/liveness.hpp"
#include "transport/shm/offload.hpp"
#include "transport/shm/segment.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

class Engine {
public:
    Engine(const Config& cfg, int local_index, int local_size = 1);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const Config& config() const { return cfg_; }
    ProgressEngine& progress() { return progress_; }
    // Copies handed to the progress thread; null when it does not run (nobody would copy
    // in the background, so offloading would only add a queue).
    CopyOffload* offload() { return offload_poller_ ? &offload_ : nullptr; }
    Pool<Op>& op_pool() { return op_pool_; }
    Pool<Target>& target_pool() { return target_pool_; }

    std::atomic<int>& live_windows() { return live_windows_; }
    // Rings a node-local peer's doorbell (its progress thread and dozing threads wake),
    // mapping its bell page on first use. False if it cannot be reached (no shared bell).
    bool ring_peer(const SegmentExport& bell);
    // What a node-local peer maps to ring this process (pid == 0: not shared; peers cannot).
    SegmentExport bell_export() const { return bell_ ? bell_seg_.export_info() : SegmentExport{}; }
    // Node peers' liveness (transport/shm/liveness.hpp): a pidfd per peer process, opened
    // while it is known alive (window creation: watch). exited(pid): the process is gone.
    void watch(pid_t pid) { watch_pid(pid); }
    bool exited(pid_t pid) { return pid_exited(pid); }
    // Peers on other hosts: a connection each, closed by their kernel when they die
    // (transport/peer_links.hpp). The process's one registry, which outlives the engine.
    PeerLinks& links() { return process_links(); }
    std::string stats_report() const;

private:
    Config cfg_;
    Pool<Op> op_pool_;
    Pool<Target> target_pool_;
    CopyOffload offload_;
    ShmSegment bell_seg_;  // the progress engine's shared doorbell page (pidfd method: never sealed)
    BellPage* bell_ = nullptr;  // in bell_seg_; null without one
    ProgressEngine progress_;
    int offload_poller_ = 0;
    std::atomic<int> live_windows_{0};
    struct PeerBell;
    std::mutex bells_mu_;
    std::map<std::pair<int, int>, std::unique_ptr<PeerBell>> bells_;  // (pid, fd) -> mapping
};

}  // namespace fastrma::detail
