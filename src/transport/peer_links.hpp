// peer_links.hpp — whether a process on another host is still there: a TCP connection to
// it, made at window creation, that its kernel closes when it dies. Each process listens on
// one port (any address, never accepting: a connection waiting in the listener's queue is
// reset when the listener exits); every process of a window connects once to each process
// of it on another host. A connection that reads as closed or failed means the process has
// gone. One registry per process, for every window (docs/guarantees.md, *Dead peers*); it
// lives until the process exits, past MPI_Finalize: a listener closed at finalize would read
// as this process's death to a peer not yet out of the last window's closing barrier.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fastrma::detail {

// Where a process listens: up to four IPv4 addresses of its host (network order) and a port;
// n == 0: it does not listen (no address but the loopback, or no socket).
struct LinkAddress {
    std::uint32_t ipv4[4];
    std::uint16_t port;
    std::uint8_t n;
    std::uint8_t pad;
};

class PeerLinks {
public:
    PeerLinks() = default;
    PeerLinks(const PeerLinks&) = delete;
    PeerLinks& operator=(const PeerLinks&) = delete;
    ~PeerLinks();

    // This process's listening address (it listens from the first call on).
    LinkAddress local();
    // A connection to the process (host_key, pid) listening at a, made once for the process
    // (later calls return the same link): a link index, or -1 if no address of a answered
    // within timeout_ms each (it is then not watched). Addresses this host has are skipped (a
    // bridge address several hosts share would lead back here).
    int connect(unsigned long long host_key, std::int64_t pid, const LinkAddress& a, int timeout_ms = 300);
    // Whether the process behind link i has gone: its connection reads as closed or failed.
    bool gone(int i);

private:
    std::mutex mu_;
    int listen_fd_ = -1;
    bool listened_ = false;
    LinkAddress local_{};
    std::vector<int> fds_;
    std::vector<char> gone_;
    std::unordered_map<unsigned long long, int> by_peer_;  // (host_key ^ pid mix) -> link
};

// The process's registry: never destroyed (the kernel closes its sockets at exit).
PeerLinks& process_links();

}  // namespace fastrma::detail
