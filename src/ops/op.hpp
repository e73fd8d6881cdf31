// op.hpp — one posted RMA operation while it waits to be issued.
//
// An Op exists only while pending (its target not granted yet, its transport full, or ops
// queued before it); once issued it returns to its pool, and what completes later is the
// transport's to count. Buffers are the user's (MPI forbids touching them before the
// epoch's completion), except small origin data of a queued put or accumulate whose
// transport promised the buffer free at post: the Op holds a copy (held).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fastrma::detail {

struct TypeInfo;
class Layout;
class Completion;

enum class RmaKind : std::uint8_t { put, get, acc, get_acc, fop, cas };

// Layouts are shared_ptrs: MPI lets the user free a datatype while the op is in flight.
// For MPI_NO_OP the origin layout is the result's (get_accumulate, fetch_and_op).
struct Op {
    RmaKind kind = RmaKind::put;
    const TypeInfo* type = nullptr;  // the basic element type (accumulates), else may be null
    MPI_Op op = MPI_OP_NULL;
    std::shared_ptr<const Layout> olay, rlay, tlay;  // origin, result, target
    std::uint64_t ocount = 0, rcount = 0, tcount = 0;
    std::uint64_t bytes = 0;  // data bytes at the target
    std::int64_t lo = 0, hi = 0;  // footprint at the target, relative to offset
    const void* origin = nullptr;
    void* result = nullptr;
    const void* compare = nullptr;
    std::uint64_t offset = 0;  // byte offset in the target's window part
    Completion* done = nullptr;  // request-based operations: signalled once complete
    // A queued put's or accumulate's own copy of small origin data: the transport promised
    // that buffer free at post (Caps::inline_max), so the queue keeps the promise.
    std::vector<unsigned char> held;
    Op* next = nullptr;
    void* home = nullptr;  // the pool it came from
};

const char* rma_kind_name(RmaKind k);

// What issuing an op returns, besides an MPI error class, when its transport took nothing
// of it (full: Post::retry): queue it and issue it again later.
constexpr int kIssueRetry = -1;

}  // namespace fastrma::detail
