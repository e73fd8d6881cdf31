// host_progress.cpp — see host_progress.hpp.
#include "progress/host_progress.hpp"

#include <dlfcn.h>

#include <mutex>
#include <utility>
#include <vector>

namespace fastrma::detail {

namespace {
using HostCallback = int (*)(void);
using RegisterFn = int (*)(HostCallback);

std::mutex g_mu;  // guards g_entries; the callback only try-locks it
std::vector<std::pair<const void*, std::function<bool()>>> g_entries;
bool g_registered = false;
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
}  // namespace

bool host_progress_add(const void* key, std::function<bool()> fn) {
    std::lock_guard lk(g_mu);
    if (!g_registered) {
        // Registered once per process and left in place (an empty list costs one try-lock);
        // unregistering while the host may be iterating its callbacks is not worth the risk.
        auto reg = reinterpret_cast<RegisterFn>(dlsym(RTLD_DEFAULT, "opal_progress_register"));
        if (!reg || reg(&trampoline) != 0) return false;
        g_registered = true;
    }
    g_entries.emplace_back(key, std::move(fn));
    return true;
}

void host_progress_remove(const void* key) {
    std::lock_guard lk(g_mu);  // waits for a running callback
    for (auto it = g_entries.begin(); it != g_entries.end(); ++it)
        if (it->first == key) {
            g_entries.erase(it);
            return;
        }
}

bool in_host_progress() { return t_inside; }

HostProgressGuard::HostProgressGuard() : prev_(t_inside) { t_inside = true; }
HostProgressGuard::~HostProgressGuard() { t_inside = prev_; }

}  // namespace fastrma::detail
