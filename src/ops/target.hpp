// target.hpp — per-target state of an access epoch (the middle of the 3D queue).
//
// Created at the first lock of a rank (or op, when ops must queue), returned to its pool
// when the epoch to it ends with nothing outstanding. Guarded by its slot's mutex.
// The sync flag is monotone (NONE < FLUSH_LOCAL < FLUSH < UNLOCK): callers only raise it,
// so concurrent flush and unlock requests merge into the strongest.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/op.hpp"

namespace fastrma::detail {

enum class AccessState : std::uint8_t { none, lock_called, lock_issued, lock_granted };
enum class SyncFlag : std::uint8_t { none, flush_local, flush, unlock };

struct Target {
    int rank = -1;
    AccessState state = AccessState::none;
    int lock_type = 0;       // MPI_LOCK_SHARED / MPI_LOCK_EXCLUSIVE
    int assert_ = 0;
    bool acquired = false;   // lock words really taken (false under MPI_MODE_NOCHECK)
    SyncFlag sync = SyncFlag::none;
    Op* head = nullptr;
    Op* tail = nullptr;
    std::size_t npending = 0;
    std::uint64_t issued = 0, completed = 0;
    std::uint32_t backoff_us = 0;
    std::uint64_t next_try_ns = 0;
    Target* next = nullptr;  // in its slot's list
    void* home = nullptr;

    void raise_sync(SyncFlag f) { if (f > sync) sync = f; }
    void push(Op* op) {
        op->next = nullptr;
        if (tail) tail->next = op; else head = op;
        tail = op;
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
