// shm.hpp — the node-local transport. Mapped peers (allocate windows): put/get are memcpy
// and atomics CPU atomics. Unmapped peers (create windows: user memory): cross-memory
// attach, process_vm_writev/readv, which moves data in one copy but has no atomics; the
// synchronization words are still in a shared mapping, so atomic8() is a CPU atomic.
// Every operation completes before it returns (Post::done): flush is a memory fence.
#pragma once

#include <sys/uio.h>

#include "transport/transport.hpp"

namespace fastrma::detail {

class ShmTransport final : public Transport {
public:
    const char* name() const override { return "shm"; }
    Caps caps(const PeerRegion& peer) const override {
        return {peer.mapped != nullptr, peer.mapped != nullptr, false};
    }
    Post put(const PeerRegion& peer, const Chunk* chunks, std::size_t n) override;
    Post get(const PeerRegion& peer, const Chunk* chunks, std::size_t n) override;
    std::uint64_t atomic8(const PeerRegion& peer, std::size_t word, AtomicOp op,
                          std::uint64_t operand, std::uint64_t compare) override;
    void flush(const PeerRegion&) override { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

    // Moves len bytes between local and remote (pid's address space) by cross-memory
    // attach, resuming partial transfers; through a bounce buffer when the kernel's copy
    // would run at a slow page-offset distance (copy.hpp). True when all moved (else errno).
    static bool cma_copy(pid_t pid, bool write, void* local, std::uintptr_t remote, std::size_t len);
    // Moves n pieces (l[i] <-> r[i], equal lengths) with as few syscalls as the kernel
    // allows, resuming partial transfers; a piece that fails is skipped, the rest still
    // move. True when all moved (else errno of the first failure).
    static bool cma_vec(pid_t pid, bool write, const iovec* l, const iovec* r, std::size_t n);
    // Can this process use cross-memory attach on pid at addr? (0 = yes, else errno)
    static int probe_cma(pid_t pid, std::uint64_t addr);
};

ShmTransport& shm_transport();

}  // namespace fastrma::detail
