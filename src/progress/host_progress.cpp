// host_progress.cpp — see host_progress.hpp.
#include "progress/host_progress.hpp"

#include <dlfcn.h>
#include <mpi.h>

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "base/spin_lock.hpp"

// MPICH's ABI (MPICH, and the derivatives that define MPICH_VERSION): the ucp_worker_progress
// hook below is compiled in; Open MPI builds must not define that symbol (its pml ucx calls it).
#if defined(MPICH_VERSION) && !defined(OMPI_MAJOR_VERSION)
#define FASTRMA_UCP_HOOK 1
#endif

namespace fastrma::detail {

namespace {
using HostCallback = int (*)(void);
using RegisterFn = int (*)(HostCallback);

enum class Hook { unknown, opal, ucp, none };

// Guards g_entries and g_hook; the callback only try-locks it (a spin lock: the callback
// runs on every pass of the host's progress loop, where glibc's try-lock and unlock cost
// more than the pass: docs/performance.md).
SpinLock g_mu;
std::vector<std::pair<const void*, std::function<bool()>>> g_entries;
Hook g_hook = Hook::unknown;
std::atomic<bool> g_any{false};  // g_entries is not empty (one load per MPICH progress pass)
[[gnu::tls_model("initial-exec")]] thread_local bool t_inside = false;

int trampoline() {
    if (t_inside) return 0;  // a served request called MPI, which progressed again
    std::unique_lock lk(g_mu, std::try_to_lock);
    if (!lk.owns_lock() || g_entries.empty()) return 0;
    t_inside = true;
    int events = 0;
    for (auto& e : g_entries) events += e.second() ? 1 : 0;
    t_inside = false;
    return events;
}

#ifdef FASTRMA_UCP_HOOK
using UcpProgress = unsigned (*)(void*);
std::atomic<UcpProgress> g_ucp_real{nullptr};

UcpProgress ucp_real() {
    UcpProgress fn = g_ucp_real.load(std::memory_order_acquire);
    if (!fn) {
        fn = reinterpret_cast<UcpProgress>(dlsym(RTLD_NEXT, "ucp_worker_progress"));
        g_ucp_real.store(fn, std::memory_order_release);
    }
    return fn;
}

// True when MPICH's calls of ucp_worker_progress reach the definition below: UCX is loaded
// (ch4:ucx) and the dynamic linker's first ucp_worker_progress is in this module.
bool ucp_hook_bound() {
    if (!ucp_real()) return false;
    void* first = dlsym(RTLD_DEFAULT, "ucp_worker_progress");
    Dl_info mine{}, theirs{};
    if (!first || !dladdr(reinterpret_cast<void*>(&trampoline), &mine) || !dladdr(first, &theirs)) return false;
    return mine.dli_fbase == theirs.dli_fbase;
}
#endif

// Picks the host's hook once (under g_mu).
Hook find_hook() {
    if (g_hook != Hook::unknown) return g_hook;
    g_hook = Hook::none;
    // Registered once per process and left in place (an empty list costs one try-lock);
    // unregistering while the host may be iterating its callbacks is not worth the risk.
    if (auto reg = reinterpret_cast<RegisterFn>(dlsym(RTLD_DEFAULT, "opal_progress_register"))) {
        if (reg(&trampoline) == 0) g_hook = Hook::opal;
    }
#ifdef FASTRMA_UCP_HOOK
    else if (ucp_hook_bound()) {
        g_hook = Hook::ucp;
    }
#endif
    return g_hook;
}
}  // namespace

bool host_progress_add(const void* key, std::function<bool()> fn, HookCalls calls) {
    std::lock_guard lk(g_mu);
    const Hook h = find_hook();
    if (h == Hook::none || (h == Hook::ucp && calls == HookCalls::mpi)) return false;
    g_entries.emplace_back(key, std::move(fn));
    g_any.store(true, std::memory_order_release);
    return true;
}

void host_progress_remove(const void* key) {
    std::lock_guard lk(g_mu);  // waits for a running callback
    for (auto it = g_entries.begin(); it != g_entries.end(); ++it)
        if (it->first == key) {
            g_entries.erase(it);
            break;
        }
    g_any.store(!g_entries.empty(), std::memory_order_release);
}

bool in_host_progress() { return t_inside; }

bool host_progress_run() { return g_any.load(std::memory_order_acquire) && trampoline() > 0; }

const char* host_progress_kind() {
    std::lock_guard lk(g_mu);
    switch (g_hook) {
    case Hook::opal:
        return "opal_progress";
    case Hook::ucp:
        return "ucp_worker_progress";
    default:
        return "none";
    }
}

HostProgressGuard::HostProgressGuard() : prev_(t_inside) { t_inside = true; }
HostProgressGuard::~HostProgressGuard() { t_inside = prev_; }

}  // namespace fastrma::detail

#ifdef FASTRMA_UCP_HOOK
// MPICH ch4:ucx calls this once per progress pass (every iteration of a blocking call's wait
// loop, every MPI_Test), with its own lock held. UCX's progress first, then our entries
// (MPI-free ones only: host_progress_add). Also reached by UCX-internal calls and by our
// progress thread's MPI calls; t_inside stops re-entry.
extern "C" __attribute__((visibility("default"))) unsigned ucp_worker_progress(void* worker) {
    const auto real = fastrma::detail::ucp_real();
    const unsigned events = real ? real(worker) : 0;
    if (fastrma::detail::g_any.load(std::memory_order_relaxed)) fastrma::detail::trampoline();
    return events;
}
#endif
