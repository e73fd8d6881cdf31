// epoch_state.hpp — a window's synchronization states and the one table of which call is
// legal in which of them (MPI-3.1 §11.5; every entry checks the state first).
//
// Access side: at most one kind of access epoch is open at a time. fence_called: a fence
// opened a possible epoch and no op has been issued since (a lock or start may still
// follow); fence_active: ops were issued, the next sync must be a fence. per_target: one
// or more MPI_Win_lock epochs (per-target state in the slot table, or on windows on shared
// memory only in Epochs::held_, where the mode also stays after the last unlock until
// another kind of epoch asks: Epochs::sync_error); lock_all_called: the
// lock_all is not granted yet (MPI lets it return early).
// Exposure side: a PSCW exposure epoch (MPI_Win_post ... MPI_Win_wait) is open or not; a
// fence's exposure is implied by its access state.
#pragma once

#include <cstdint>

namespace fastrma::detail {

enum class AccessMode : int { none, per_target, lock_all_called, lock_all_granted, fence_called, fence_active, pscw };
constexpr int kAccessModes = 7;

// The synchronization calls (and "op": any communication call) that the table rules.
enum class SyncCall : std::uint8_t {
    fence,
    post,
    start,
    complete,
    wait,
    lock,
    unlock,
    lock_all,
    unlock_all,
    flush,
    op,
    free
};

// "a lock epoch", "a fence epoch", ... for messages.
const char* mode_name(AccessMode m);

// The table: per call, the access modes it is legal in (a bit per AccessMode) and what it
// needs of the exposure side. The op row is the state test only: which target an op may
// reach (a PSCW access epoch's group, a locked rank) is checked by the epochs themselves.
enum class ExposureNeed : std::uint8_t { any, closed, open };
struct SyncRule {
    unsigned modes;
    ExposureNeed exposure;
};
constexpr unsigned mode_bit(AccessMode m) { return 1u << unsigned(m); }
inline constexpr SyncRule kSyncRules[] = {
    // fence
    {mode_bit(AccessMode::none) | mode_bit(AccessMode::fence_called) | mode_bit(AccessMode::fence_active),
     ExposureNeed::closed},
    // post: beside any access epoch but a fence epoch with operations
    {~mode_bit(AccessMode::fence_active), ExposureNeed::closed},
    // start
    {mode_bit(AccessMode::none) | mode_bit(AccessMode::fence_called), ExposureNeed::any},
    // complete
    {mode_bit(AccessMode::pscw), ExposureNeed::any},
    // wait / test
    {~0u, ExposureNeed::open},
    // lock: several targets may be locked at once
    {mode_bit(AccessMode::none) | mode_bit(AccessMode::per_target) | mode_bit(AccessMode::fence_called),
     ExposureNeed::any},
    // unlock
    {mode_bit(AccessMode::per_target), ExposureNeed::any},
    // lock_all
    {mode_bit(AccessMode::none) | mode_bit(AccessMode::fence_called), ExposureNeed::any},
    // unlock_all
    {mode_bit(AccessMode::lock_all_called) | mode_bit(AccessMode::lock_all_granted), ExposureNeed::any},
    // flush (flush_local, flush_all, flush_local_all)
    {mode_bit(AccessMode::per_target) | mode_bit(AccessMode::lock_all_called) | mode_bit(AccessMode::lock_all_granted),
     ExposureNeed::any},
    // op (put, get, accumulates): fence_called and lock_all_called move on at the op
    {~mode_bit(AccessMode::none), ExposureNeed::any},
    // free
    {mode_bit(AccessMode::none) | mode_bit(AccessMode::fence_called), ExposureNeed::closed},
};
static_assert(sizeof kSyncRules / sizeof kSyncRules[0] == unsigned(SyncCall::free) + 1);

inline bool legal(SyncCall call, AccessMode m, bool exposed) {
    const SyncRule& r = kSyncRules[unsigned(call)];
    if (!(r.modes & mode_bit(m))) return false;
    return r.exposure == ExposureNeed::any || (r.exposure == ExposureNeed::open) == exposed;
}

// nullptr when legal(call, m, exposed); else why not, for an MPI_ERR_RMA_SYNC message ("a
// fence epoch with operations is open").
const char* illegal(SyncCall call, AccessMode m, bool exposed);

// MPI_ERR_RANK (raised) unless rank is MPI_PROC_NULL or in [0, nprocs).
int check_target_rank(const char* call, int rank, int nprocs);

}  // namespace fastrma::detail
