// host_progress.hpp — run fastrma's serving inside the host MPI's own progress loop.
//
// MPI has no wake-up for an incoming message, so an am target's requests are served by its
// progress thread polling with back-off. When the target's application thread sits inside
// an MPI call (a barrier, a wait), the host spins its progress engine on that thread while
// our progress thread competes with it for a core (docs/progress.md). Each host offers a
// different place to run a callback in that loop, found at run time (nothing links against
// a host's internals):
// - Open MPI: opal_progress_register (dlsym). The callback runs outside Open MPI's locks, so
//   it may call MPI: every entry is accepted (the am service, as osc pt2pt's handlers run).
// - MPICH ch4:ucx: MPICH's own hook registry (MPIR_Progress_hook_register) is not exported,
//   so fastrma defines ucp_worker_progress, which MPICH calls once per progress pass, and
//   forwards it to UCX's before running the callback. That runs under MPICH's lock, which
//   is not recursive (an MPI call there aborts in MPICH's thread check): only entries that
//   make no MPI call are accepted (the served requests' beat, transport/shm/served.hpp); the am
//   service stays with the progress thread. Active only when UCX is loaded and our
//   definition is the one the dynamic linker binds (ch4:ofi, Intel MPI: no hook).
// FASTRMA_HOST_PROGRESS=0 turns it off (the caller does not register).
//
// Rules that keep it safe inside someone else's MPI call: the callback never blocks on a
// lock (try-locks only), never re-enters itself on a thread (a served request may call MPI,
// which calls the host's progress again), and only serves — it never touches epoch or
// target state an application thread may hold.
#pragma once

#include <functional>

namespace fastrma::detail {

// Whether an entry calls the host MPI (MPICH's hook cannot run those).
enum class HookCalls { mpi, no_mpi };

// key identifies the entry (a window's message transport); fn serves and says whether it did anything.
// Returns false when the host offers no hook for this kind of entry (fn is then not registered).
bool host_progress_add(const void* key, std::function<bool()> fn, HookCalls calls = HookCalls::mpi);
// On return fn is not running and will not run again.
void host_progress_remove(const void* key);
// Runs the registered entries once on the calling thread, as the host's hook would (try-lock,
// no re-entry): a thread that waits without calling MPI (an ofi flush) serves the other
// windows' transports meanwhile. True if an entry did something.
bool host_progress_run();
// True while the calling thread runs a host-progress callback (for tests and asserts).
bool in_host_progress();
// Which hook this process uses: "opal_progress", "ucp_worker_progress" or "none" (none yet:
// nothing registered so far, or the host has none). For tests and the stats report.
const char* host_progress_kind();
// While one lives on a thread, the callback does nothing there: code that holds a lock the
// callback would try-lock (an endpoint serving) and then calls MPI uses it.
class HostProgressGuard {
public:
    HostProgressGuard();
    ~HostProgressGuard();
    HostProgressGuard(const HostProgressGuard&) = delete;
    HostProgressGuard& operator=(const HostProgressGuard&) = delete;

private:
    bool prev_;
};

}  // namespace fastrma::detail
