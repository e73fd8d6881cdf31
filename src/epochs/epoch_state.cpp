// epoch_state.cpp — see epoch_state.hpp.
#include "epochs/epoch_state.hpp"

#include <mpi.h>

#include "engine/errors.hpp"

namespace fastrma::detail {

const char* mode_name(AccessMode m) {
    switch (m) {
    case AccessMode::none: return "no epoch";
    case AccessMode::per_target: return "a lock epoch";
    case AccessMode::lock_all_called:
    case AccessMode::lock_all_granted: return "a lock_all epoch";
    case AccessMode::fence_called:
    case AccessMode::fence_active: return "a fence epoch";
    case AccessMode::pscw: return "a start (PSCW) epoch";
    }
    return "?";
}

namespace {

// Per call: the access modes it is legal in (a bit per AccessMode), and what it needs of
// the exposure side.
enum class Exposure : std::uint8_t { any, closed, open };
struct Rule {
    unsigned modes;
    Exposure exposure;
    const char* wrong_mode;      // printf-free text naming what is wrong
    const char* wrong_exposure;
};
constexpr unsigned bit(AccessMode m) { return 1u << unsigned(m); }
constexpr unsigned kNone = bit(AccessMode::none), kPerTarget = bit(AccessMode::per_target),
                   kLockAllCalled = bit(AccessMode::lock_all_called), kLockAllGranted = bit(AccessMode::lock_all_granted),
                   kFenceCalled = bit(AccessMode::fence_called), kFenceActive = bit(AccessMode::fence_active),
                   kPscw = bit(AccessMode::pscw);

constexpr Rule kRules[] = {
    // fence
    {kNone | kFenceCalled | kFenceActive, Exposure::closed, "another kind of epoch is open on this window",
     "a PSCW exposure epoch (FRMA_Win_post) is open; call FRMA_Win_wait first"},
    // post
    {kNone | kFenceCalled | kPerTarget | kLockAllCalled | kLockAllGranted | kPscw, Exposure::closed,
     "a fence epoch with operations is open", "an exposure epoch is already open (FRMA_Win_wait/test first)"},
    // start
    {kNone | kFenceCalled, Exposure::any, "another access epoch is open on this window", nullptr},
    // complete
    {kPscw, Exposure::any, "no FRMA_Win_start epoch is open", nullptr},
    // wait / test
    {kNone | kPerTarget | kLockAllCalled | kLockAllGranted | kFenceCalled | kFenceActive | kPscw, Exposure::open,
     nullptr, "no FRMA_Win_post epoch is open"},
    // lock
    {kNone | kPerTarget | kFenceCalled, Exposure::any, "another kind of epoch is open on this window", nullptr},
    // unlock
    {kPerTarget, Exposure::any, "no lock epoch is open on this window", nullptr},
    // lock_all
    {kNone | kFenceCalled, Exposure::any, "another epoch is already open on this window", nullptr},
    // unlock_all
    {kLockAllCalled | kLockAllGranted, Exposure::any, "no lock_all epoch is open", nullptr},
    // flush (and flush_local, flush_all, flush_local_all)
    {kPerTarget | kLockAllCalled | kLockAllGranted, Exposure::any, "no passive-target epoch is open", nullptr},
    // op (put, get, accumulates): fence_called and lock_all_called move on at the op
    {kPerTarget | kLockAllCalled | kLockAllGranted | kFenceCalled | kFenceActive | kPscw, Exposure::any,
     "no access epoch is open (lock, lock_all, fence or start first)", nullptr},
    // free
    {kNone | kFenceCalled, Exposure::closed, "an access epoch is still open on this window",
     "a PSCW exposure epoch is still open"},
};
static_assert(sizeof kRules / sizeof kRules[0] == unsigned(SyncCall::free) + 1);

}  // namespace

const char* illegal(SyncCall call, AccessMode m, bool exposed) {
    const Rule& r = kRules[unsigned(call)];
    if (!(r.modes & bit(m))) return r.wrong_mode;
    if (r.exposure == Exposure::closed && exposed) return r.wrong_exposure;
    if (r.exposure == Exposure::open && !exposed) return r.wrong_exposure;
    return nullptr;
}

int check_target_rank(const char* call, int rank, int nprocs) {
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (rank < 0 || rank >= nprocs)
        return raise(MPI_ERR_RANK, "%s: rank %d is outside the window's group of %d", call, rank, nprocs);
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
