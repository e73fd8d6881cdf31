// shm.hpp — the node-local data movement that NodeTransport (node.hpp) builds on. Mapped
// peers (allocate windows): put/get are memcpy and atomics CPU atomics. Unmapped peers
// (create windows: user memory): cross-memory attach, process_vm_writev/readv, which moves
// data in one copy but has no atomics; the synchronization words are still in a shared
// mapping, so atomic8() is a CPU atomic. Every operation completes before it returns
// (Post::done): flush is a memory fence (NodeTransport's also completes what it holds).
#pragma once

#include <sys/uio.h>

#include "transport/shm/cma.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

class ShmTransport : public Transport {
public:
    const char* name() const override { return "shm"; }
    Caps caps(const PeerRegion& peer) const override { return {peer.mapped != nullptr, peer.mapped != nullptr, false}; }
    Post put(const PeerRegion& peer, const Chunk* chunks, std::size_t n) override;
    Post get(const PeerRegion& peer, const Chunk* chunks, std::size_t n) override;
    std::uint64_t atomic8(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override;
    void flush(const PeerRegion&) override { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
};

}  // namespace fastrma::detail
