// op.hpp — one posted RMA operation while it waits to be issued.
//
// An Op exists only while pending (its target not granted yet, or ops queued before it);
// once issued it returns to its pool. On the shared-memory transport every issue
// completes at once, so no completion record outlives the issue. Buffers are the user's:
// MPI forbids touching them before the epoch's completion, so no copy is made.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

struct TypeInfo;

enum class RmaKind : std::uint8_t { put, get, acc, get_acc, fop, cas };

struct Op {
    RmaKind kind = RmaKind::put;
    const TypeInfo* type = nullptr;  // element type (predefined)
    MPI_Op op = MPI_OP_NULL;
    std::size_t count = 0;           // elements
    const void* origin = nullptr;
    void* result = nullptr;
    const void* compare = nullptr;
    std::uint64_t offset = 0;        // byte offset in the target's window part
    Op* next = nullptr;
    void* home = nullptr;            // the pool it came from
};

const char* rma_kind_name(RmaKind k);

}  // namespace fastrma::detail
