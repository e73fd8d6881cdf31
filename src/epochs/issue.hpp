// issue.hpp — turning one operation into transport primitives.
//
// The choice between a native operation and its fallback lives here, one level above the
// transports:
//   put/get        -> transport put/get of chunks contiguous on both sides, zipped from the
//                     origin and target layouts (derived types, and pair types whose holes
//                     MPI does not let us write), in bounded batches; small chunks to an
//                     unmapped peer join its CmaBatch (moved at the next completion point);
//   accumulates    -> CPU atomics on mapped memory when the window's atomicity domain is
//                     the CPU and the type has lock-free native atomics (acc_native), a
//                     plain run under the target's stripes for large ones (acc_domain.hpp
//                     keeps the two apart), else lock-get-op-put under the target's striped
//                     accumulate lock (acc_locked). Per window and type the domain is the
//                     same for every origin.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ops/op.hpp"
#include "ops/reduce.hpp"
#include "transport/shm/acc_domain.hpp"
#include "transport/shm/cma_batch.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

struct IssueContext {
    Transport& tp;
    PeerRegion peer;
    bool cpu_atomics;  // the window's atomicity domain is the CPU (all peers mapped)
    int acc_stripes;
    CmaBatch* batch = nullptr;  // the peer's batch of small transfers (unmapped peers)
    std::size_t batch_max = 0;  // largest chunk that joins it
    // Every byte of the peer's part may be read, between the op's pieces too (the window's
    // own memory: allocate); a user's create or dynamic memory may hold pages no one may read.
    bool gaps_readable = false;
    // Largest contiguous transfer through the peer's served bulk area (0: the window has none).
    std::size_t bulk_max = 0;
    // Serves what node peers posted to this process (its served slots and bulk area) while
    // an op waits for the peer's CPU (null: nothing to serve).
    bool (*serve)(void*) = nullptr;
    void* serve_arg = nullptr;
    // The CPU domain's discipline (cpu_atomics; transport/shm/acc_domain.hpp): this process's reader
    // word, the node members' reader words, and the smallest accumulate (bytes of target
    // footprint) applied as a plain run under the stripes rather than by CPU atomics.
    std::uint64_t* acc_mine = nullptr;
    AccReaders acc_readers{};
    std::size_t acc_run_min = ~std::size_t(0);
};

// Performs op at its target. Returns an MPI error class, or kIssueRetry when the transport
// took nothing of it (Post::retry on its first post: full); once an op has started, a
// retry of a later piece is waited out here (the transport's progress, then a yield), so
// an op is posted whole or not at all. On shared memory the op has completed remotely when
// this returns, except the puts and gets left in ctx.batch (every other op drains the
// batch first, so this origin's ops to the peer stay in order).
int issue_op(const IssueContext& ctx, const Op& op);

// The locked accumulate domain on mapped memory, for the fast paths: n contiguous elements
// of ti at target offset toff, under the target's accumulate-lock stripes that cover them,
// with the plain kernel; old values to result (may be null). The elements are at
// ctx.peer.mapped + toff, or at `at` when given (a dynamic window's own memory: toff is the
// address, and the stripes follow it as for every other origin).
void accumulate_locked_in_place(const IssueContext& ctx, MPI_Op op, const TypeInfo& ti, std::uint64_t toff,
                                const void* src, std::size_t n, void* result, unsigned char* at = nullptr);
// ... and `pieces` runs of n elements, run i at toff + i * stride (bytes, may be negative),
// origin data at src + i * n * ti.extent (null: MPI_NO_OP), old values likewise at result
// (may be null), under the stripes of the runs' whole footprint, one kernel call
// (reduce_strided), runs in order. at_address: toff is the address of run 0 (a dynamic
// window's own memory), else an offset from ctx.peer.mapped.
void accumulate_strided_locked_in_place(const IssueContext& ctx, OpKind op, const TypeInfo& ti, std::uint64_t toff,
                                        std::int64_t stride, std::uint64_t n, std::uint64_t pieces, const void* src,
                                        void* result, bool at_address);
// ... and compare_and_swap of one element the same way (origin, compare, result: one each).
void compare_and_swap_locked_in_place(const IssueContext& ctx, const TypeInfo& ti, std::uint64_t toff,
                                      const void* origin, const void* compare, void* result,
                                      unsigned char* at = nullptr);

}  // namespace fastrma::detail
