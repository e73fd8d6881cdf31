// fence.cpp — MPI_Win_fence (see epochs.hpp): complete what this process issued, then the
// group's synchronization (Transport::fence_sync: by default flush_all and a barrier; a
// message transport exchanges request counts instead, one collective for both).
// MPI_MODE_NOPRECEDE: nothing may have been issued since the last fence; NOSUCCEED ends
// the epochs; NOSTORE and NOPUT are hints.
#include "base/errors.hpp"
#include "epochs/epochs.hpp"

namespace fastrma::detail {

int Epochs::fence(int assert_) {
    constexpr int kAllowed = MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED;
    if (assert_ & ~kAllowed)
        return raise(MPI_ERR_ASSERT,
                     "FRMA_Win_fence: assert %#x has bits other than NOSTORE, NOPUT, NOPRECEDE, NOSUCCEED", assert_);
    {
        std::lock_guard lk(epoch_mu_);
        const AccessMode m = mode_.load();
        if (int rc = sync_error(SyncCall::fence, "FRMA_Win_fence", m, exposed_)) return rc;
        if (m == AccessMode::fence_active && (assert_ & MPI_MODE_NOPRECEDE))
            return raise(MPI_ERR_RMA_SYNC,
                         "FRMA_Win_fence: MPI_MODE_NOPRECEDE, but this process issued operations since the last fence");
    }
    // Complete what this process left in flight beside the transports, then the group's
    // fence_sync: when it returns, every process's operations of the closing epoch are
    // complete at their targets, and local stores before the fence are visible to all.
    int off_rc = drain_open_all("FRMA_Win_fence");  // ops a full transport refused
    Transport& group_tp = h_.group_tp();
    if (int rc = h_.fence_sync(); rc && !off_rc) {
        const int dead = h_.peer_failure();  // a member died: name it
        off_rc = dead ? dead : raise(rc, "FRMA_Win_fence: the group's completion exchange failed");
    }
    if (int e = h_.completion_error("FRMA_Win_fence", 0, nprocs_); e && !off_rc) off_rc = e;
    if (group_tp.has_waiting()) progress_.wake();  // next-epoch requests that waited
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    std::lock_guard lk(epoch_mu_);
    mode_.store((assert_ & MPI_MODE_NOSUCCEED) ? AccessMode::none : AccessMode::fence_called,
                std::memory_order_release);
    return off_rc;
}

}  // namespace fastrma::detail
