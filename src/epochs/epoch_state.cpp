// epoch_state.cpp — see epoch_state.hpp.
#include "epochs/epoch_state.hpp"

#include <mpi.h>

#include "base/errors.hpp"

namespace fastrma::detail {

const char* mode_name(AccessMode m) {
    switch (m) {
    case AccessMode::none:
        return "no epoch";
    case AccessMode::per_target:
        return "a lock epoch";
    case AccessMode::lock_all_called:
    case AccessMode::lock_all_granted:
        return "a lock_all epoch";
    case AccessMode::fence_called:
    case AccessMode::fence_active:
        return "a fence epoch";
    case AccessMode::pscw:
        return "a start (PSCW) epoch";
    }
    return "?";
}

namespace {
// Per call: what is wrong when its access mode is not in the table, and when its exposure
// side is (kSyncRules' order).
struct Why {
    const char* wrong_mode;
    const char* wrong_exposure;
};
constexpr Why kWhy[] = {
    {"another kind of epoch is open on this window",
     "a PSCW exposure epoch (FRMA_Win_post) is open; call FRMA_Win_wait first"},
    {"a fence epoch with operations is open", "an exposure epoch is already open (FRMA_Win_wait/test first)"},
    {"another access epoch is open on this window", nullptr},
    {"no FRMA_Win_start epoch is open", nullptr},
    {nullptr, "no FRMA_Win_post epoch is open"},
    {"another kind of epoch is open on this window", nullptr},
    {"no lock epoch is open on this window", nullptr},
    {"another epoch is already open on this window", nullptr},
    {"no lock_all epoch is open", nullptr},
    {"no passive-target epoch is open", nullptr},
    {"no access epoch is open (lock, lock_all, fence or start first)", nullptr},
    {"an access epoch is still open on this window", "a PSCW exposure epoch is still open"},
};
static_assert(sizeof kWhy / sizeof kWhy[0] == sizeof kSyncRules / sizeof kSyncRules[0]);
}  // namespace

const char* illegal(SyncCall call, AccessMode m, bool exposed) {
    if (legal(call, m, exposed)) return nullptr;
    const Why& w = kWhy[unsigned(call)];
    return (kSyncRules[unsigned(call)].modes & mode_bit(m)) ? w.wrong_exposure : w.wrong_mode;
}

int check_target_rank(const char* call, int rank, int nprocs) {
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (rank < 0 || rank >= nprocs)
        return raise(MPI_ERR_RANK, "%s: rank %d is outside the window's group of %d", call, rank, nprocs);
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
