// segment.hpp — shared-memory segments that node-local peers map.
//
// Default: an anonymous memfd; a peer takes a duplicate of the owner's descriptor with
// pidfd_getfd() and maps it. Such a segment has no name, so nothing can outlive the
// processes that map it, whatever way they die. Where ptrace rules forbid pidfd_getfd
// (another user, a strict Yama scope), the fallback is shm_open() with an unguessable
// name (uid, pid, 64 random bits), mode 0600, unlinked as soon as every peer has mapped it;
// if a rank dies between creation and unlink, the next engine start on the node removes
// names whose creating process no longer exists (sweep_stale_segments()).
//
// Pages are reserved with posix_fallocate so that a full tmpfs gives MPI_ERR_NO_MEM at
// creation instead of SIGBUS on first touch.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/config.hpp"

namespace fastrma::detail {

// What a peer needs to map my segment; travels through Bootstrap::allgather.
struct SegmentExport {
    pid_t pid = 0;
    int fd = -1;  // pidfd method
    std::uint64_t size = 0;
    char name[64] = {};  // shm_open method ("" for pidfd)
    std::uint64_t id = 0;  // arena chunks: unique in the job (peers cache their mapping)
};

class ShmSegment {
public:
    ShmSegment() = default;
    ShmSegment(const ShmSegment&) = delete;
    ShmSegment& operator=(const ShmSegment&) = delete;
    ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
    ShmSegment& operator=(ShmSegment&& o) noexcept;
    ~ShmSegment() { reset(); }

    // Creates and maps my own segment. Returns an MPI error class (raise()d on failure).
    // reserve: allocate all pages now (posix_fallocate); false leaves that to the owners of
    // each range (reserve_range), so that first touch puts pages on their owner's NUMA node.
    int create(std::size_t size, ShmMethod method, bool reserve = true);
    // Maps a peer's segment and reserves [off, off + len) of it (len 0: nothing).
    int map_peer(const SegmentExport& ex, std::size_t reserve_off = 0, std::size_t reserve_len = 0);
    // Reserves [off, off + len) of my own segment.
    int reserve_range(std::size_t off, std::size_t len);
    // Once every peer has mapped: close the descriptor (pidfd) / unlink the name (shm_open).
    void seal();
    void reset();

    SegmentExport export_info() const { return ex_; }
    void set_export_id(std::uint64_t id) { ex_.id = id; }
    unsigned char* data() const { return static_cast<unsigned char*>(addr_); }
    std::size_t size() const { return len_; }

private:
    void* addr_ = nullptr;
    std::size_t len_ = 0;
    int fd_ = -1;
    bool owner_ = false;
    SegmentExport ex_{};
};

// Removes /dev/shm/fastrma-<uid>-<pid>-* names whose creator is gone. Returns how many.
int sweep_stale_segments();

// Attach between node peers: pidfd_getfd and cross-memory attach both need the kernel's
// ptrace-attach permission on the peer, which a process always has on itself but may lack
// on a sibling (Yama ptrace_scope 1, no CAP_SYS_PTRACE with a non-dumpable peer, seccomp).
// What a peer needs to probe me: my pid, a descriptor it may duplicate, a byte it may read.
struct AttachProbe {
    pid_t pid = 0;
    int fd = -1;
    std::uint64_t addr = 0;
};
AttachProbe attach_probe_self();
// Duplicates the peer's descriptor and reads its byte: 0 when both work, else the errno.
int attach_probe(const AttachProbe& peer);
// Lets any process of this user attach to this one where Yama restricts attach to
// descendants (prctl PR_SET_PTRACER_ANY, as Open MPI's vader does); a no-op elsewhere.
void allow_peer_attach();

}  // namespace fastrma::detail
