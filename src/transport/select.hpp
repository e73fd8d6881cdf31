// select.hpp — the one place that decides which transport serves a peer, and where the
// transport objects are made. Nothing above src/transport/ names a transport class: a
// window asks select_medium() per peer, takes its node transport (transport/shm/node.hpp,
// one per window: it holds the node segment's layout and what the window's direct paths
// leave in flight) for the peers on its node and make_message_transport() or
// make_network_transport() for the others, and from then on sees only Transport (and the
// node transport's capabilities: mapped ranges, batches, the copier).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/bootstrap.hpp"
#include "base/config.hpp"
#include "transport/ofi.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

enum class Medium : std::uint8_t {
    node,  // shared memory: mappings, cross-memory attach, CPU atomics on shared state
    message,  // MPI active messages, served by the target's CPU
    network,  // libfabric RMA and atomics (ofi), no target CPU (but progress, see ofi.hpp)
};

// want: FASTRMA_TRANSPORT (auto, shm, am, ofi, shm+am, shm+ofi); provider: FASTRMA_OFI_PROVIDER; load_store:
// the window's contract is load/store (allocate_shared), which only shared memory gives;
// dynamic: a dynamic window, which goes over the network only where the provider lets an
// origin name an attached region's registration (ofi_dynamic_supported), else messages.
// auto takes the network for peers on other nodes only when libfabric has a hardware
// provider (ofi_hardware_present), else messages; shm+am and shm+ofi name the medium of
// peers on other nodes; am and ofi make each rank its own node. MPI_SUCCESS and *out, or an MPI error
// class (raised) when nothing can reach the peer.
int select_medium(const std::string& want, const std::string& provider, const NodeTopology& topo, int rank,
                  bool load_store, bool dynamic, Medium* out);

// Node peers of a window whose other peers are on the network: data by the node transport,
// synchronization words and accumulates by network (split.hpp), one atomicity domain.
std::unique_ptr<Transport> make_split_transport(Transport& node, Transport& network, int nprocs);

// Whether a message transport can serve this group (an MPI communicator:
// group.mpi_comm(); the host at MPI_THREAD_MULTIPLE): MPI_SUCCESS or an MPI error class
// (raised). Local: the caller agrees on it with the group before making one.
int message_transport_usable(Bootstrap& group, const char* call);
// A message transport serving one window's peers, collective over group. Requests from
// peers are executed through local. On failure: null, *err an MPI error class (raised).
std::unique_ptr<Transport> make_message_transport(Bootstrap& group, LocalTarget local, const Config& cfg,
                                                  const char* call, int* err);
// A network transport serving one window's peers — this process too, so that every atomic
// on a state word of the window goes through the network's atomicity domain — collective
// over group. On failure: null, *err an MPI error class (raised).
std::unique_ptr<Transport> make_network_transport(Bootstrap& group, const NetworkPart& mine, const Config& cfg,
                                                  const char* call, int* err);

}  // namespace fastrma::detail
