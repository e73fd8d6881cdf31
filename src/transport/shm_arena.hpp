// shm_arena.hpp — memory from FRMA_Alloc_mem (and MPI_Alloc_mem through the drop-in):
// each allocation is its own memfd segment, so that a create or dynamic window over it can
// be mapped by node peers and reached by load/store and CPU atomics — the allocate-window
// path — instead of cross-memory copies. This is the pattern of ARMCI-MPI and most PGAS
// layers: MPI_Alloc_mem, then MPI_Win_create on the result.
//
// Only with the pidfd method (a peer takes the descriptor when a window is created, at any
// later time); where pidfd_getfd is refused, FRMA_Alloc_mem returns ordinary memory and
// windows over it use cross-memory attach. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/shm_segment.hpp"

namespace fastrma::detail {

struct ArenaHit {
    SegmentExport seg;     // the allocation's segment, for peers to map
    std::uint64_t offset;  // where the queried range starts inside it
};

// nullptr and an MPI error class in *err on failure (raise()d).
void* arena_alloc(std::size_t size, int* err);
// MPI_SUCCESS, or MPI_ERR_ARG for a pointer that did not come from arena_alloc (nothing freed).
int arena_free(void* base);
// Is [base, base + size) inside one arena allocation? (ordinary memory: false)
bool arena_lookup(const void* base, std::size_t size, ArenaHit* hit);
// Bytes currently allocated (for tests).
std::size_t arena_bytes();

}  // namespace fastrma::detail
