// bootstrap_mpi.hpp — Bootstrap over a private duplicate of an MPI communicator.
// The duplicate keeps fastrma's collectives from matching the application's traffic.
// Duplicates are recycled: a freed window gives its duplicate back to a pool attached to
// the parent communicator (an attribute), and the next window on that parent takes it
// instead of calling MPI_Comm_dup (a collective agreement on a context id) again. With the
// duplicate travel its node topology and what the freed window left (Bootstrap::leftover),
// up to kLeftoverBytes of memory per parent.
#pragma once

#include <mpi.h>

#include <memory>

#include "base/bootstrap.hpp"

namespace fastrma::detail {

struct DupPool;
constexpr std::size_t kLeftoverBytes = std::size_t(64) << 20;

class MpiBootstrap final : public Bootstrap {
public:
    // Duplicates comm, or takes an idle duplicate of it (collective). Check error() afterwards.
    explicit MpiBootstrap(MPI_Comm comm);
    ~MpiBootstrap() override;
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void allgather(const void* in, std::size_t bytes, void* out) override;
    void barrier() override;
    const char* kind() const override { return "MPI communicator"; }
    NodeTopology* topology_cache() override { return &topo_; }
    Leftover* leftover() override { return &leftover_; }
    MPI_Comm comm() const { return comm_; }
    MPI_Comm mpi_comm() const override { return comm_; }
    int error() const { return err_; }

private:
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 0, err_ = MPI_SUCCESS;
    std::shared_ptr<DupPool> pool_;  // the parent's pool (nullptr: intercommunicator)
    NodeTopology topo_;  // travels with the duplicate
    Leftover leftover_;  // so does this
};

}  // namespace fastrma::detail
