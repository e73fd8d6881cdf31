// config.hpp — every FASTRMA_* tunable, read once at engine start.
// The table in config.cpp is the single source of truth; docs/configuration.md lists it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fastrma::detail {

enum class ShmMethod { automatic, pidfd, shm_open };

struct Config {
    bool progress_thread = true;  // FASTRMA_PROGRESS
    int progress_core = -1;  // FASTRMA_PROGRESS_CORE (-1: auto, -2: none, -3: follow)
    int spin_us = -1;  // FASTRMA_SPIN_US (-1: auto, ProgressEngine::spin_us())
    int net_spin_us = 100;  // FASTRMA_NET_SPIN_US (0: as spin_us)
    int wait_spin_us = -1;  // FASTRMA_WAIT_SPIN_US (-1: auto, see spin_wait.hpp)
    int progress_nice = 0;  // FASTRMA_PROGRESS_NICE (0: as the process)
    int stand_down_us = 1000;  // FASTRMA_STAND_DOWN_US: longest doze (0: never stands down)
    int poll_min_us = 1;  // FASTRMA_POLL_MIN_US
    bool poll_predict = true;  // FASTRMA_POLL_PREDICT
    int poll_max_us = 100;  // FASTRMA_POLL_MAX_US
    int poll_idle_us = 10000;  // FASTRMA_POLL_IDLE_US
    int poll_quiet_ms = 20;  // FASTRMA_POLL_QUIET_MS
    bool host_progress = true;  // FASTRMA_HOST_PROGRESS
    std::string offload = "auto";  // FASTRMA_OFFLOAD: auto | on | off
    std::size_t offload_min = 65536;  // FASTRMA_OFFLOAD_MIN (0: never offload copies)
    std::size_t offload_piece = 65536;  // FASTRMA_OFFLOAD_PIECE
    std::size_t offload_wake_min = 262144;  // FASTRMA_OFFLOAD_WAKE_MIN
    std::size_t cma_batch = 1024;  // FASTRMA_CMA_BATCH (0: no batching)
    std::size_t served_bulk = 65536;  // FASTRMA_SERVED_BULK: bytes of the served bulk area (0: none)
    std::size_t served_bulk_max = 16384;  // FASTRMA_SERVED_BULK_MAX: largest contiguous put/get served in bulk
    bool am_strided = true;  // FASTRMA_AM_STRIDED: derived puts over am as strided requests (0: gathered)
    int am_window = 256;  // FASTRMA_AM_WINDOW: am requests beyond the newest answer before posts retry
    int am_payload_ms = 5000;  // FASTRMA_AM_PAYLOAD_MS: an am target's wait for a payload behind its header
    std::size_t op_pool = 4096;  // FASTRMA_OP_POOL (process-global)
    std::size_t win_op_pool = 256;  // FASTRMA_WIN_OP_POOL (per window)
    std::size_t target_pool = 1024;  // FASTRMA_TARGET_POOL (process-global)
    std::size_t win_target_pool = 64;  // FASTRMA_WIN_TARGET_POOL (per window)
    std::size_t slots = 64;  // FASTRMA_SLOTS
    int acc_stripes = 16;  // FASTRMA_ACC_STRIPES
    // FASTRMA_ACC_RUN_MIN: on CPU-domain windows, an accumulate of a CPU-domain type covering
    // this many bytes or more is a plain run under the stripes instead of CPU atomics.
    std::size_t acc_run_min = 64;
    std::size_t dyn_regions = 4096;  // FASTRMA_DYN_REGIONS
    std::size_t layout_cache = std::size_t{16} << 20;  // FASTRMA_LAYOUT_CACHE (bytes)
    ShmMethod shm_method = ShmMethod::automatic;  // FASTRMA_SHM_METHOD
    bool ptracer = true;  // FASTRMA_PTRACER
    std::string transport = "auto";  // FASTRMA_TRANSPORT
    std::string ofi_provider = "tcp;ofi_rxm";  // FASTRMA_OFI_PROVIDER
    bool ofi_mr_local = false;  // FASTRMA_OFI_MR_LOCAL
    int ofi_window = 256;  // FASTRMA_OFI_WINDOW: ofi messages in flight to one peer before posts retry
    bool ofi_ordered = true;  // FASTRMA_OFI_ORDERED=0: the provider's atomic ordering ignored (tests)
    bool stats = false;  // FASTRMA_STATS
    std::string fault;  // FASTRMA_FAULT (fault injection for tests)

    static Config from_env();
};

struct ConfigParam {
    const char* name;
    const char* default_value;
    const char* doc;
};
// The documented table (name, default, meaning), in the order of docs/configuration.md.
const std::vector<ConfigParam>& config_params();

}  // namespace fastrma::detail
