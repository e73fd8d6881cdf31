// epoch_state.hpp — a window's synchronization states and the one table of which call is
// legal in which of them (MPI-3.1 §11.5; STYLE.md §7: every entry checks the state first).
//
// Access side: at most one kind of access epoch is open at a time. fence_called: a fence
// opened a possible epoch and no op has been issued since (a lock or start may still
// follow); fence_active: ops were issued, the next sync must be a fence. per_target: one
// or more MPI_Win_lock epochs (per-target state in the slot table); lock_all_called: the
// lock_all is not granted yet (MPI lets it return early).
// Exposure side: a PSCW exposure epoch (MPI_Win_post ... MPI_Win_wait) is open or not; a
// fence's exposure is implied by its access state.
#pragma once

#include <cstdint>

namespace fastrma::detail {

enum class AccessMode : int {
    none, per_target, lock_all_called, lock_all_granted, fence_called, fence_active, pscw
};
constexpr int kAccessModes = 7;

// The synchronization calls (and "op": any communication call) that the table rules.
enum class SyncCall : std::uint8_t {
    fence, post, start, complete, wait, lock, unlock, lock_all, unlock_all, flush, op, free
};

// "a lock epoch", "a fence epoch", ... for messages.
const char* mode_name(AccessMode m);

// nullptr when call is legal with access mode m and the exposure open or not; else why it
// is not, for an MPI_ERR_RMA_SYNC message ("a fence epoch is open on this window").
// The op row is the state test only: which target an op may reach (a PSCW access epoch's
// group, a locked rank) is checked by the epochs themselves.
const char* illegal(SyncCall call, AccessMode m, bool exposed);

// MPI_ERR_RANK (raised) unless rank is MPI_PROC_NULL or in [0, nprocs).
int check_target_rank(const char* call, int rank, int nprocs);

}  // namespace fastrma::detail
