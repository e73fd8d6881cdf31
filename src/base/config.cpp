// config.cpp — parse FASTRMA_* once. Bad values fall back to the default with a warning
// on stderr rather than aborting: a typo in an environment variable must not kill a job.
#include "base/config.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastrma::detail {

const std::vector<ConfigParam>& config_params() {
    static const std::vector<ConfigParam> table = {
        {"FASTRMA_PROGRESS", "1", "Run the asynchronous progress thread (0: sync calls make progress)."},
        {"FASTRMA_PROGRESS_CORE", "auto",
         "Where the progress thread runs, inside the rank's cpuset: a logical index of a PU; follow (the PU the "
         "process's main thread runs on, checked every 10 ms while the thread works); none (unpinned: the scheduler "
         "places it); auto (-1): the only PU of a one-PU cpuset, follow when the ranks sharing the cpuset leave no PU "
         "to spare, else one PU per local rank from the end of the cpuset."},
        {"FASTRMA_SPIN_US", "auto",
         "How long the progress thread polls without sleeping after work, and spins for its doorbell before it sleeps "
         "(microseconds). auto: 20, or 0 when the rank's cpuset has a single PU (mpirun bound the rank to one core): "
         "the thread then shares that PU with the application, and every microsecond it spins is taken from the "
         "computation."},
        {"FASTRMA_WAIT_SPIN_US", "auto",
         "How long an application thread waiting in a sync call (flush, complete, wait, fence, a lock) spins before it "
         "yields its processor each pass (microseconds). auto: 20, or 2 once a window has more ranks on this node than "
         "the rank's cpuset has processing units."},
        {"FASTRMA_PROGRESS_NICE", "0",
         "Nice value of the progress thread, -20..19 (0: the process's own). A lower one lets the thread preempt the "
         "computation it shares a PU with as soon as it wakes (am requests wait less for it: more overlap), and gives "
         "it a larger share of that PU under a flood of requests. Below the process's own value it needs CAP_SYS_NICE "
         "(root); refused, the thread keeps the process's value (FASTRMA_STATS shows progress_nice)."},
        {"FASTRMA_STAND_DOWN_US", "1000",
         "Longest doze of the progress thread while other threads serve for it (a waiter in a sync call, the host "
         "MPI's progress loop); the doze starts at 50 us and doubles while the serving goes on (0: never stand down)."},
        {"FASTRMA_POLL_PREDICT", "1",
         "1: after a burst of work that answered an origin (a flush, a get, a fetch), the first back-off sleep is half "
         "the shortest of the last 8 quiet periods that followed such a burst (when all were 50 us or longer), then "
         "the back-off doubles from an eighth of it: a stream of requests with regular pauses costs fewer wake-ups. 0: "
         "always start at FASTRMA_POLL_MIN_US."},
        {"FASTRMA_POLL_MIN_US", "1",
         "First sleep of the back-off after work (doubling up to FASTRMA_POLL_MAX_US). Longer: fewer wake-ups, each "
         "costing CPU (7-50 us on a VM), against a slower answer to a request that comes soon after the last."},
        {"FASTRMA_POLL_MAX_US", "100",
         "Upper bound of the exponential back-off while work is pending that no doorbell announces (lock retries)."},
        {"FASTRMA_POLL_IDLE_US", "10000",
         "Back-off bound after FASTRMA_POLL_QUIET_MS without work: what an idle am window costs (polling the host MPI) "
         "against the latency of the first request after a quiet spell."},
        {"FASTRMA_POLL_QUIET_MS", "20",
         "How long without work before the progress thread switches to FASTRMA_POLL_IDLE_US."},
        {"FASTRMA_HOST_PROGRESS", "1",
         "Serve am requests also inside the host MPI's own progress loop (Open MPI's opal_progress_register, found at "
         "run time), so a target waiting inside MPI answers at once; 0: only the progress thread serves."},
        {"FASTRMA_OFFLOAD", "auto",
         "Hand large transfers to the progress thread: on, off, or auto (on only when the process may run on more "
         "processing units than the window has ranks on this node: a progress thread without a core of its own only "
         "takes time from the computation)."},
        {"FASTRMA_OFFLOAD_MIN", "65536",
         "Contiguous put/get of at least this many bytes in a lock_all or fence epoch is copied by the progress thread "
         "while the caller goes on (overlap); completion points wait and help. 0 disables (the caller always copies)."},
        {"FASTRMA_OFFLOAD_WAKE_MIN", "262144",
         "Below this size a transfer is offloaded only while the progress thread is awake; waking a sleeping thread "
         "costs more than copying a small transfer (tens of microseconds on a VM)."},
        {"FASTRMA_OFFLOAD_PIECE", "65536",
         "Piece size of offloaded copies: the unit the progress thread and a waiting flush share."},
        {"FASTRMA_CMA_BATCH", "1024",
         "Puts, gets and accumulates of up to this many bytes to a create or dynamic window's part that is not mapped "
         "here wait in a batch per peer and move in one cross-memory-attach syscall at the next completion point (or "
         "when 128 are queued). 0: one syscall per transfer."},
        {"FASTRMA_SERVED_BULK", "65536",
         "Bytes of each process's served bulk area on create and dynamic windows: node peers that cannot map its "
         "memory post large and strided puts, gets and accumulates there, applied by its CPU while it waits in MPI. "
         "0: no area (they go by cross-memory attach). Must be the same in every process of a window."},
        {"FASTRMA_SERVED_BULK_MAX", "16384",
         "Largest contiguous put or get sent through a peer's served bulk area; larger ones go by one "
         "cross-memory-attach syscall (contiguous accumulates go there whatever their size)."},
        {"FASTRMA_AM_PAYLOAD_MS", "5000",
         "How long an am target waits for the payload of a request whose header arrived (a large put or "
         "accumulate); past it the request is dropped, its origin told, and the target's next completion point "
         "reports MPI_ERR_OTHER."},
        {"FASTRMA_OP_POOL", "4096", "Ops in the process-global pool (beyond the per-window pools)."},
        {"FASTRMA_WIN_OP_POOL", "256", "Ops in each window's own pool."},
        {"FASTRMA_TARGET_POOL", "1024", "Targets in the process-global pool."},
        {"FASTRMA_WIN_TARGET_POOL", "64", "Targets in each window's own pool."},
        {"FASTRMA_SLOTS", "64", "Slots of each window's slot table (rank r lives in slot r % n)."},
        {"FASTRMA_ACC_STRIPES", "16", "Accumulate-lock stripes per window part (create windows, non-native types)."},
        {"FASTRMA_DYN_REGIONS", "4096",
         "Regions one process can attach to one dynamic window (16 bytes each in its state segment)."},
        {"FASTRMA_LAYOUT_CACHE", "16777216",
         "Bytes of flattened derived datatypes kept by construction (combiner and arguments) beyond the types' own "
         "lives, so that a type built again after MPI_Type_free is not flattened again; least recently used out "
         "first; an entry above 64 KiB goes when its last type is freed. 0: none kept."},
        {"FASTRMA_SHM_METHOD", "auto",
         "How node peers map a segment: pidfd (memfd + pidfd_getfd), shm_open (named, 0600, unlinked once mapped), "
         "auto (pidfd, else shm_open)."},
        {"FASTRMA_PTRACER", "1",
         "1: let node peers attach to this process where Yama restricts attach to descendants (prctl "
         "PR_SET_PTRACER_ANY, as Open MPI's vader does). 0: leave the process's ptracer setting alone; where peers "
         "may then not attach, windows use named shared memory and active messages."},
        {"FASTRMA_TRANSPORT", "auto",
         "auto (shared memory on the node; other nodes over ofi when libfabric has a provider with hardware RMA, i.e. "
         "not tcp, sockets, udp or shm, else by active messages), shm, am (every peer but oneself by active messages: "
         "each rank as its own node), ofi (every peer by libfabric, oneself included for atomics: each rank as its "
         "own node; dynamic windows use am, allocate_shared windows shared memory); shm+am (shared memory on the node, "
         "active messages to other nodes), or shm+ofi (shared memory on the node for data, libfabric to other nodes "
         "and "
         "for every synchronization word and accumulate)."},
        {"FASTRMA_OFI_PROVIDER", "tcp;ofi_rxm",
         "The libfabric provider of FASTRMA_TRANSPORT=ofi (a fi_info -p name: tcp;ofi_rxm, sockets, verbs;ofi_rxm, "
         "cxi, efa, ...). With auto, peers on other nodes use the first hardware provider libfabric offers. Bind tcp "
         "and sockets to an interface with FI_TCP_IFACE / FI_SOCKETS_IFACE."},
        {"FASTRMA_OFI_MR_LOCAL", "0",
         "1: register every origin buffer of an ofi put or get (as FI_MR_LOCAL providers require) even when the "
         "provider does not ask for it (tests that path on providers without FI_MR_LOCAL)."},
        {"FASTRMA_OFI_ORDERED", "1",
         "0: treat the ofi provider as ordering no atomics among themselves, whatever it says (tests the waits an "
         "unordered provider needs: tcp;ofi_rxm and sockets order the atomics after atomics that locks rely on)."},
        {"FASTRMA_OFI_WINDOW", "256",
         "ofi flow control: with this many messages to one peer not yet completed, a new put, get or accumulate to it "
         "is refused by the transport (as when the provider answers -FI_EAGAIN) and queues until completions come; "
         "an operation already started may take the count to twice this before it waits in place."},
        {"FASTRMA_NODE_NAME", "",
         "Stands in for the host name when ranks find their node peers: ranks with different values are on different "
         "nodes (tests of windows that span nodes on one machine; empty: the host name and boot id)."},
        {"FASTRMA_STATS", "0", "Print the engine's counters to stderr at finalize."},
        {"FASTRMA_FAULT", "",
         "Fault injection for tests: kill_after_segment kills the rank right after its segment exists; nondumpable "
         "makes the process non-dumpable at engine start, so that peers without CAP_SYS_PTRACE may not attach to it; "
         "kill_holding_stripe kills the process right after it took an accumulate stripe on shared state words; "
         "kill_serving kills it right after it took a node peer's served request or bulk part, before it answers; "
         "osc_version_mismatch makes mca_osc_fastrma.so see another Open MPI version at open (it refuses to load)."},
    };
    return table;
}

namespace {
const char* env(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}
long env_long(const char* name, long dflt, long lo, long hi) {
    const char* v = env(name);
    if (!v) return dflt;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi) {
        std::fprintf(stderr, "fastrma: ignoring %s=%s (expected an integer in [%ld, %ld])\n", name, v, lo, hi);
        return dflt;
    }
    return x;
}
}  // namespace

Config Config::from_env() {
    Config c;
    c.progress_thread = env_long("FASTRMA_PROGRESS", 1, 0, 1) != 0;
    if (const char* v = env("FASTRMA_PROGRESS_CORE"); v && !std::strcmp(v, "auto"))
        c.progress_core = -1;
    else if (v && !std::strcmp(v, "none"))
        c.progress_core = -2;
    else if (v && !std::strcmp(v, "follow"))
        c.progress_core = -3;
    else
        c.progress_core = int(env_long("FASTRMA_PROGRESS_CORE", -1, -3, 1 << 20));
    if (const char* v = env("FASTRMA_SPIN_US"); v && !std::strcmp(v, "auto"))
        c.spin_us = -1;
    else
        c.spin_us = int(env_long("FASTRMA_SPIN_US", -1, -1, 1000000));
    c.net_spin_us = int(env_long("FASTRMA_NET_SPIN_US", 100, 0, 1000000));
    if (const char* v = env("FASTRMA_WAIT_SPIN_US"); v && !std::strcmp(v, "auto"))
        c.wait_spin_us = -1;
    else
        c.wait_spin_us = int(env_long("FASTRMA_WAIT_SPIN_US", -1, -1, 1000000));
    c.progress_nice = int(env_long("FASTRMA_PROGRESS_NICE", 0, -20, 19));
    c.poll_min_us = int(env_long("FASTRMA_POLL_MIN_US", 1, 1, 1000000));
    c.poll_predict = env_long("FASTRMA_POLL_PREDICT", 1, 0, 1) != 0;
    c.poll_max_us = int(env_long("FASTRMA_POLL_MAX_US", 100, 1, 1000000));
    c.stand_down_us = int(env_long("FASTRMA_STAND_DOWN_US", 1000, 0, 1000000));
    c.poll_idle_us = int(env_long("FASTRMA_POLL_IDLE_US", 10000, 1, 1000000));
    c.poll_quiet_ms = int(env_long("FASTRMA_POLL_QUIET_MS", 20, 0, 1000000));
    c.host_progress = env_long("FASTRMA_HOST_PROGRESS", 1, 0, 1) != 0;
    if (const char* o = env("FASTRMA_OFFLOAD")) {
        if (!std::strcmp(o, "on") || !std::strcmp(o, "off") || !std::strcmp(o, "auto"))
            c.offload = o;
        else
            std::fprintf(stderr, "fastrma: ignoring FASTRMA_OFFLOAD=%s (auto, on, off)\n", o);
    }
    c.offload_min = std::size_t(env_long("FASTRMA_OFFLOAD_MIN", 65536, 0, 1L << 40));
    c.offload_wake_min = std::size_t(env_long("FASTRMA_OFFLOAD_WAKE_MIN", 262144, 0, 1L << 40));
    c.offload_piece = std::size_t(env_long("FASTRMA_OFFLOAD_PIECE", 65536, 4096, 1L << 30));
    c.cma_batch = std::size_t(env_long("FASTRMA_CMA_BATCH", 1024, 0, 4096));
    c.served_bulk = std::size_t(env_long("FASTRMA_SERVED_BULK", 65536, 0, 64L << 20));
    c.served_bulk_max = std::size_t(env_long("FASTRMA_SERVED_BULK_MAX", 16384, 0, 1L << 40));
    c.am_window = int(env_long("FASTRMA_AM_WINDOW", 256, 1, 65536));
    c.am_strided = env_long("FASTRMA_AM_STRIDED", 1, 0, 1) != 0;
    c.am_payload_ms = int(env_long("FASTRMA_AM_PAYLOAD_MS", 5000, 1, 3600000));
    c.op_pool = std::size_t(env_long("FASTRMA_OP_POOL", 4096, 0, 1L << 30));
    c.win_op_pool = std::size_t(env_long("FASTRMA_WIN_OP_POOL", 256, 1, 1L << 30));
    c.target_pool = std::size_t(env_long("FASTRMA_TARGET_POOL", 1024, 0, 1L << 30));
    c.win_target_pool = std::size_t(env_long("FASTRMA_WIN_TARGET_POOL", 64, 1, 1L << 30));
    c.slots = std::size_t(env_long("FASTRMA_SLOTS", 64, 1, 1L << 20));
    c.acc_stripes = int(env_long("FASTRMA_ACC_STRIPES", 16, 1, 32));
    c.acc_run_min = std::size_t(env_long("FASTRMA_ACC_RUN_MIN", 64, 1, 1L << 40));
    c.dyn_regions = std::size_t(env_long("FASTRMA_DYN_REGIONS", 4096, 1, 1L << 24));
    c.layout_cache = std::size_t(env_long("FASTRMA_LAYOUT_CACHE", 16L << 20, 0, 1L << 40));
    if (const char* m = env("FASTRMA_SHM_METHOD")) {
        if (!std::strcmp(m, "pidfd"))
            c.shm_method = ShmMethod::pidfd;
        else if (!std::strcmp(m, "shm_open"))
            c.shm_method = ShmMethod::shm_open;
        else if (std::strcmp(m, "auto"))
            std::fprintf(stderr, "fastrma: ignoring FASTRMA_SHM_METHOD=%s\n", m);
    }
    c.ptracer = env_long("FASTRMA_PTRACER", 1, 0, 1) != 0;
    if (const char* t = env("FASTRMA_TRANSPORT")) c.transport = t;
    if (const char* p = env("FASTRMA_OFI_PROVIDER")) c.ofi_provider = p;
    c.ofi_mr_local = env_long("FASTRMA_OFI_MR_LOCAL", 0, 0, 1) != 0;
    c.ofi_window = int(env_long("FASTRMA_OFI_WINDOW", 256, 1, 65536));
    c.ofi_ordered = env_long("FASTRMA_OFI_ORDERED", 1, 0, 1) != 0;
    c.stats = env_long("FASTRMA_STATS", 0, 0, 1) != 0;
    if (const char* f = env("FASTRMA_FAULT")) c.fault = f;
    return c;
}

}  // namespace fastrma::detail
