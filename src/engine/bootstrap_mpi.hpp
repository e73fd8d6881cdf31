// bootstrap_mpi.hpp — Bootstrap over a private duplicate of an MPI communicator.
// The duplicate keeps fastrma's collectives from matching the application's traffic.
#pragma once

#include <mpi.h>

#include "engine/bootstrap.hpp"

namespace fastrma::detail {

class MpiBootstrap final : public Bootstrap {
public:
    // Duplicates comm (collective). Check ok() / error() afterwards.
    explicit MpiBootstrap(MPI_Comm comm);
    ~MpiBootstrap() override;
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void allgather(const void* in, std::size_t bytes, void* out) override;
    void barrier() override;
    const char* kind() const override { return "MPI communicator"; }
    MPI_Comm comm() const { return comm_; }
    MPI_Comm mpi_comm() const override { return comm_; }
    int error() const { return err_; }

private:
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 0, err_ = MPI_SUCCESS;
};

}  // namespace fastrma::detail
