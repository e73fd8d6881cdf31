// liveness.cpp — see liveness.hpp.
#include "transport/shm/liveness.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

namespace fastrma::detail {

namespace {
constexpr int kGone = -1, kUnwatched = -2;  // table values besides descriptors
std::mutex g_mu;
std::map<pid_t, int>& table() {
    static auto* t = new std::map<pid_t, int>;  // never destroyed: waits may run during exit
    return *t;
}
}  // namespace

void watch_pid(pid_t pid) {
    if (pid <= 0) return;
    std::lock_guard lk(g_mu);
    if (table().count(pid)) return;
    const int fd = int(syscall(SYS_pidfd_open, pid, 0));
    table()[pid] = fd >= 0 ? fd : errno == ESRCH ? kGone : kUnwatched;  // (no pidfd: a kernel before 5.3)
}

bool pid_exited(pid_t pid) {
    if (pid <= 0) return false;  // (no process to watch: not known to have exited)
    int fd = kUnwatched;
    {
        std::lock_guard lk(g_mu);
        if (auto it = table().find(pid); it != table().end()) fd = it->second;
    }
    if (fd == kGone) return true;
    if (fd == kUnwatched) return kill(pid, 0) != 0 && errno == ESRCH;
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

unsigned long long pid_namespace_key() {
    static const unsigned long long key = [] {
        unsigned long long h = 1469598103934665603ull;  // FNV-1a of the boot id and the namespace
        auto mix = [&h](const char* s, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 1099511628211ull;
        };
        char buf[128] = {};
        if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
            const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
            std::fclose(f);
            mix(buf, n);
        }
        const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
        if (n > 0) mix(buf, std::size_t(n));
        // And the host name: hosts that share a kernel (containers, the test's namespace
        // hosts) watch each other as other hosts do (transport/peer_links.hpp).
        char host[256] = {};
        if (gethostname(host, sizeof host - 1) == 0) mix(host, std::strlen(host));
        return h;
    }();
    return key;
}

void unwatch_all_pids() {
    std::lock_guard lk(g_mu);
    for (auto& [pid, fd] : table())
        if (fd >= 0) close(fd);
    table().clear();
}

}  // namespace fastrma::detail
