// bootstrap.hpp — the floor every layer may use: how a window's process group exchanges
// small amounts of data while the window is created and freed.
//
// The engine core never touches an MPI communicator; it talks to its group through this
// interface. MpiBootstrap implements it over a duplicated communicator (production);
// ThreadBootstrap over threads of one process (unit tests run ranks as threads). That is
// what makes fastrma embeddable in another MPI runtime: implement these five calls.
//
// Invariant: every call is collective over the group except rank()/size()/node_key().
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fastrma::detail {

class Bootstrap {
public:
    virtual ~Bootstrap() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // out receives size() * bytes, rank i's contribution at i * bytes.
    virtual void allgather(const void* in, std::size_t bytes, void* out) = 0;
    virtual void barrier() = 0;
    // The barrier of a fence (Transport::fence_sync): barrier(), or the one a window whose
    // processes share memory sets here (over its state words: a member that died fails it
    // instead of holding it for ever). MPI_SUCCESS or an MPI error class (raised).
    int fence_barrier() {
        if (fence_barrier_) return fence_barrier_();
        barrier();
        return MPI_SUCCESS;
    }
    void set_fence_barrier(std::function<int()> f) { fence_barrier_ = std::move(f); }
    // Identifies the node this process runs on; equal keys share memory.
    virtual std::string node_key() const;
    // A short description for error messages ("MPI communicator", "threads").
    virtual const char* kind() const = 0;
    // The MPI communicator of the group, for a transport that moves data with MPI messages
    // (am); MPI_COMM_NULL when the group is not one (threads).
    virtual MPI_Comm mpi_comm() const { return MPI_COMM_NULL; }
    // Where discover_topology may keep its answer for later windows of the same group
    // (nullptr: compute it every time).
    virtual struct NodeTopology* topology_cache() { return nullptr; }
    // What a freed window leaves for the next window of the same group (its node segment),
    // opaque here; nullptr: nothing is kept.
    virtual struct Leftover* leftover() { return nullptr; }

private:
    std::function<int()> fence_barrier_;
};

struct Leftover {
    std::shared_ptr<void> what;
    std::size_t bytes = 0;  // memory it holds
};

// Which ranks of the group share this process's node (by node_key), in rank order.
struct NodeTopology {
    std::vector<int> node_of;  // node index of each rank
    std::vector<int> local_ranks;  // ranks on my node, ascending
    int my_local_index = 0;  // my position in local_ranks
    bool known = false;  // filled in (topology caches)
    int attach = 0;  // may this process attach to its node peers: 0 not probed, 1 yes, 2 refused
    bool all_local() const { return local_ranks.size() == node_of.size(); }
};
NodeTopology discover_topology(Bootstrap& bs);

// Default node key: hostname + kernel boot id (two containers with the same hostname on
// different hosts must not be taken for one node).
std::string default_node_key();

}  // namespace fastrma::detail
