// peer_links.cpp — see peer_links.hpp.
#include "transport/peer_links.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fastrma::detail {

namespace {
// This host's IPv4 addresses that are up and not the loopback (network order), at most max.
std::vector<std::uint32_t> host_addresses(std::size_t max) {
    std::vector<std::uint32_t> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs* i = list; i && out.size() < max; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
        out.push_back(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    }
    freeifaddrs(list);
    return out;
}

// A non-blocking connect to addr:port, waited for up to timeout_ms: the descriptor, or -1.
int connect_one(std::uint32_t addr, std::uint16_t port, int timeout_ms) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = port;
    sa.sin_addr.s_addr = addr;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return -1;
        }
        pollfd p{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}
}  // namespace

PeerLinks& process_links() {
    static auto* links = new PeerLinks;
    return *links;
}

PeerLinks::~PeerLinks() {
    for (int fd : fds_)
        if (fd >= 0) close(fd);
    if (listen_fd_ >= 0) close(listen_fd_);
}

LinkAddress PeerLinks::local() {
    std::lock_guard lk(mu_);
    if (listened_) return local_;
    listened_ = true;
    const std::vector<std::uint32_t> addrs = host_addresses(4);
    if (addrs.empty()) return local_;  // (a single host: nobody to link with)
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return local_;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof sa;
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        close(fd);
        return local_;
    }
    listen_fd_ = fd;
    local_.port = sa.sin_port;
    for (std::size_t i = 0; i < addrs.size(); ++i) local_.ipv4[i] = addrs[i];
    local_.n = std::uint8_t(addrs.size());
    return local_;
}

int PeerLinks::connect(unsigned long long host_key, std::int64_t pid, const LinkAddress& a, int timeout_ms) {
    if (a.n == 0 || a.n > 4) return -1;
    const unsigned long long id = host_key ^ (std::uint64_t(pid) * 0x9E3779B97F4A7C15ull);
    {
        std::lock_guard lk(mu_);
        if (auto it = by_peer_.find(id); it != by_peer_.end()) return it->second;
    }
    const std::vector<std::uint32_t> mine = host_addresses(64);
    int fd = -1;
    for (int i = 0; i < a.n && fd < 0; ++i) {
        bool own = false;
        for (std::uint32_t m : mine) own = own || m == a.ipv4[i];
        if (!own) fd = connect_one(a.ipv4[i], a.port, timeout_ms);
    }
    std::lock_guard lk(mu_);
    if (auto it = by_peer_.find(id); it != by_peer_.end()) {  // (another thread made it meanwhile)
        if (fd >= 0) close(fd);
        return it->second;
    }
    if (fd < 0) return -1;
    fds_.push_back(fd);
    gone_.push_back(0);
    const int link = int(fds_.size()) - 1;
    by_peer_[id] = link;
    return link;
}

bool PeerLinks::gone(int i) {
    std::lock_guard lk(mu_);
    if (i < 0 || std::size_t(i) >= fds_.size()) return false;
    if (gone_[std::size_t(i)]) return true;
    // The listener never accepts, so nothing ever arrives: readable means closed or reset.
    pollfd p{fds_[std::size_t(i)], POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) != 1) return false;
    gone_[std::size_t(i)] = 1;
    return true;
}

}  // namespace fastrma::detail
