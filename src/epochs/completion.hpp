// completion.hpp — what happens when an operation completes.
//
// An operation that carries a Completion is signalled exactly once, with MPI_SUCCESS or
// the MPI error class the operation met, once it is complete at the origin: its origin
// buffer reusable and the data it fetches (get, get_accumulate, the old values) in place.
// signal() may run on any thread: the poster's, the progress thread, or a thread inside
// the host MPI's progress loop; it must not block.
#pragma once

namespace fastrma::detail {

class Completion {
public:
    virtual void signal(int err) = 0;
    // Whether signal() may run on a thread other than the poster's (a completion that calls
    // the host MPI needs MPI_THREAD_MULTIPLE); if not, the op completes before post returns.
    virtual bool any_thread() const { return true; }

protected:
    ~Completion() = default;
};

}  // namespace fastrma::detail
