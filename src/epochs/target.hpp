// target.hpp — per-target state of an access epoch (the middle of the 3D queue).
//
// Created at the first lock of a rank, or at the first op to it that must queue in a
// window-wide epoch; returned to its pool when the epoch to it ends (an open one when its
// queue drained at a completion point). Guarded by its slot's mutex. Concurrent flushes and an unlock
// of one target each wait on their own; the slot mutex orders their issue and release.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/op.hpp"

namespace fastrma::detail {

// lock_called / lock_granted: a lock epoch to the target (MPI_Win_lock). open: no lock of
// its own — a window-wide epoch (fence, PSCW, lock_all) admits ops to it, and the Target
// exists only to queue ops its transport refused (Post::retry) until it takes them.
enum class AccessState : std::uint8_t { none, lock_called, lock_granted, open };
// What a wait on a target completes: local completion, remote completion, or the epoch.
enum class SyncFlag : std::uint8_t { flush_local, flush, unlock };

struct Target {
    int rank = -1;
    AccessState state = AccessState::none;
    int lock_type = 0;  // MPI_LOCK_SHARED / MPI_LOCK_EXCLUSIVE
    int assert_ = 0;
    bool acquired = false;  // lock words really taken (false under MPI_MODE_NOCHECK)
    Op* head = nullptr;
    Op* tail = nullptr;
    std::size_t npending = 0;
    std::uint64_t issued = 0;  // ops issued to it in this epoch (or about to be, by the posting thread)
    int error = 0;  // the first error of an op another thread issued (MPI class)
    std::uint32_t backoff_us = 0;
    std::uint64_t next_try_ns = 0;
    Target* next = nullptr;  // in its slot's list
    void* home = nullptr;

    void push(Op* op) {
        op->next = nullptr;
        if (tail)
            tail->next = op;
        else
            head = op;
        tail = op;
        ++npending;
    }
    void push_front(Op* op) {
        op->next = head;
        head = op;
        if (!tail) tail = op;
        ++npending;
    }
    Op* pop() {
        Op* op = head;
        if (op) {
            head = op->next;
            if (!head) tail = nullptr;
            --npending;
        }
        return op;
    }
};

}  // namespace fastrma::detail
