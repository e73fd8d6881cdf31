// liveness.hpp — whether a node peer's process is still there, by a pidfd opened while the
// peer was known alive (window creation), so that a pid reused by another process after the
// peer died still reads as exited. One table per process, for every window and path that
// waits on a node peer: the epochs' waits, the served slots and bulk area, the accumulate
// stripes' takeover.
#pragma once

#include <sys/types.h>

namespace fastrma::detail {

// From now on pid is watched (a pidfd is opened now; a pid already gone is recorded as exited).
void watch_pid(pid_t pid);
// Has pid exited? A watched pid: its pidfd is readable. A pid never watched (or a kernel
// without pidfd_open): the kernel has no such process (kill(pid, 0) fails with ESRCH). A pid
// of 0 or below names no process: false.
bool pid_exited(pid_t pid);
// The kernel boot, pid namespace and host name this process's pids mean something in: two
// processes with the same key watch each other's pids (others: transport/peer_links.hpp).
unsigned long long pid_namespace_key();
// Closes the descriptors (at the engine's end; pids watched again reopen them).
void unwatch_all_pids();

}  // namespace fastrma::detail
