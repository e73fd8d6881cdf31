// cma.hpp — cross-memory attach (process_vm_readv / process_vm_writev): one copy between
// this process and another's address space, no mapping. The shared-memory transport moves
// unmapped peers' data with it; the batches of small transfers (shm/cma_batch) and the
// offloaded copies (shm/offload) call it directly.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

// Moves len bytes between local and remote (pid's address space), resuming partial
// transfers; through a bounce buffer when the kernel's copy would run at a slow page-offset
// distance (copy.hpp). True when all moved (else errno).
bool cma_copy(pid_t pid, bool write, void* local, std::uintptr_t remote, std::size_t len);
// Moves n pieces (l[i] <-> r[i], equal lengths) with as few syscalls as the kernel allows,
// resuming partial transfers; a piece that fails is skipped, the rest still move. True when
// all moved (else errno of the first failure).
bool cma_vec(pid_t pid, bool write, const iovec* l, const iovec* r, std::size_t n);
// Can this process use cross-memory attach on pid at addr? (0 = yes, else errno)
int cma_probe(pid_t pid, std::uint64_t addr);

}  // namespace fastrma::detail
