// host_progress.hpp — run fastrma's am service inside the host MPI's own progress loop.
//
// MPI has no wake-up for an incoming message, so an am target's requests are served by its
// progress thread polling with back-off. When the target's application thread sits inside
// an MPI call (a barrier, a wait), the host spins its progress engine on that thread while
// our progress thread competes with it for a core (docs/progress.md). Open MPI lets components register a
// callback in that loop (opal_progress_register, found with dlsym: nothing links against
// Open MPI internals); fastrma registers one trampoline that serves the am endpoints from
// whatever thread is progressing MPI — as osc pt2pt's handlers are run. Other MPIs (no
// such symbol) keep the progress thread alone. FASTRMA_HOST_PROGRESS=0 turns it off.
//
// Rules that keep it safe inside someone else's MPI call: the callback never blocks on a
// lock (try-locks only), never re-enters itself on a thread (a served request may call MPI,
// which calls the host's progress again), and only serves am requests — it never touches
// epoch or target state an application thread may hold.
#pragma once

#include <functional>

namespace fastrma::detail {

// key identifies the entry (a window's message transport); fn serves and says whether it did anything.
// Returns false when the host offers no hook (fn is then not registered).
bool host_progress_add(const void* key, std::function<bool()> fn);
// On return fn is not running and will not run again.
void host_progress_remove(const void* key);
// True while the calling thread runs a host-progress callback (for tests and asserts).
bool in_host_progress();
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
