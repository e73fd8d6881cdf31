// transport.cpp — the default fence_sync and close_sync of Transport.
#include "transport/transport.hpp"

#include <mpi.h>

#include "base/bootstrap.hpp"

namespace fastrma::detail {

int Transport::fence_sync(Bootstrap& group) {
    flush_all();
    return group.fence_barrier();
}

int Transport::close_sync(Bootstrap& group) {
    flush_all();
    group.barrier();
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
