// arena.hpp — memory from FRMA_Alloc_mem (and MPI_Alloc_mem through the drop-in), in
// shared memory, so that a create or dynamic window over it can be mapped by node peers and
// reached by load/store and CPU atomics — the allocate-window path — instead of cross-memory
// copies. This is the pattern of ARMCI-MPI and most PGAS layers: MPI_Alloc_mem, then
// MPI_Win_create on the result; they also take their local scratch buffers from it, so
// allocation and free are frequent and must be cheap.
//
// Layout: a few large memfd segments ("chunks", kChunkBytes of address space each, sparse)
// are carved into blocks by a best-fit allocator with coalescing; a block of at least a page
// starts on a page, smaller ones on 64 bytes. A chunk's pages are reserved (posix_fallocate)
// once, when a block first reaches them, and stay reserved: a freed block goes back to the
// free lists, its pages to the next allocation. Chunks live as long as the process. Requests
// above kDedicatedBytes get a segment of their own, unmapped and closed at free. So the
// number of descriptors stays bounded by the memory in use (one per kChunkBytes, plus one per
// huge block), not by the number of allocations.
//
// Peers see a chunk only when a window exposes memory in it: window creation publishes the
// chunk's SegmentExport (arena_lookup) and peers map it with ArenaPeerMap. A chunk's id is
// unique for the life of the job, so a peer maps each chunk once and keeps the mapping (its
// page tables stay filled) for every later window on the same chunk.
//
// Only with the pidfd method (a peer takes the descriptor when a window is created, at any
// later time); where pidfd_getfd is refused, FRMA_Alloc_mem returns ordinary memory and
// windows over it use cross-memory attach. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/shm/segment.hpp"

namespace fastrma::detail {

constexpr std::size_t kChunkBytes = std::size_t(256) << 20;  // address space per chunk
constexpr std::size_t kDedicatedBytes = std::size_t(64) << 20;  // larger: a segment of its own
constexpr std::size_t kCommitStep = std::size_t(1) << 20;  // reserve at least this much at once

struct ArenaHit {
    SegmentExport seg;  // the segment holding the range, for peers to map
    std::uint64_t offset;  // where the queried range starts inside it
};

struct ArenaStats {
    std::size_t live_allocs = 0;  // allocations not yet freed
    std::size_t live_bytes = 0;  // their requested sizes
    std::size_t segments = 0;  // memfd segments open (chunks + dedicated)
    std::size_t reserved_bytes = 0;  // pages reserved in them
    bool shared = false;  // false: malloc fallback (no pidfd here)
};

// One arena. The process has one (arena_alloc and friends, below); tests make their own,
// with small chunks. Destroying an arena unmaps everything it holds.
class ShmArena {
public:
    explicit ShmArena(std::size_t chunk_bytes = kChunkBytes, std::size_t dedicated_bytes = kDedicatedBytes);
    ~ShmArena();
    ShmArena(const ShmArena&) = delete;
    ShmArena& operator=(const ShmArena&) = delete;

    // nullptr and an MPI error class in *err on failure (raise()d). Size 0 gives a valid
    // unique pointer.
    void* alloc(std::size_t size, int* err);
    // MPI_SUCCESS, or MPI_ERR_ARG for a pointer that alloc did not return or that is already
    // free (nothing freed).
    int free(void* base);
    // Is [base, base + size) inside one live allocation? (malloc fallback: false)
    bool lookup(const void* base, std::size_t size, ArenaHit* hit);
    ArenaStats stats();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The process's arena (FRMA_Alloc_mem / FRMA_Free_mem, window creation).
void* arena_alloc(std::size_t size, int* err);
int arena_free(void* base);
bool arena_lookup(const void* base, std::size_t size, ArenaHit* hit);
ArenaStats arena_stats();
std::size_t arena_bytes();  // arena_stats().live_bytes

// A peer's arena segment mapped here. Chunks (SegmentExport::id != 0) are mapped once per
// process and shared by every ArenaPeerMap of them; dedicated segments (id 0) are mapped by
// each ArenaPeerMap and unmapped with it.
class ArenaPeerMap {
public:
    ArenaPeerMap() = default;
    ArenaPeerMap(const ArenaPeerMap&) = delete;
    ArenaPeerMap& operator=(const ArenaPeerMap&) = delete;
    ArenaPeerMap(ArenaPeerMap&&) noexcept = default;
    ArenaPeerMap& operator=(ArenaPeerMap&&) noexcept = default;
    // Returns an MPI error class (raise()d on failure).
    int map_peer(const SegmentExport& ex);
    unsigned char* data() const { return data_; }

private:
    unsigned char* data_ = nullptr;
    ShmSegment own_;  // dedicated segments only
};

}  // namespace fastrma::detail
