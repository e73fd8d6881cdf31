// select.cpp — see select.hpp.
#include "transport/select.hpp"

#include <mpi.h>

#include "base/errors.hpp"
#include "transport/am.hpp"
#include "transport/split.hpp"

namespace fastrma::detail {

int select_medium(const std::string& want, const std::string& provider, const NodeTopology& topo, int rank,
                  bool load_store, bool dynamic, Medium* out) {
    const int me = topo.local_ranks[std::size_t(topo.my_local_index)];
    const bool same_node = topo.node_of[std::size_t(rank)] == topo.node_of[std::size_t(me)];
    if (want != "auto" && want != "shm" && want != "am" && want != "ofi" && want != "shm+am" && want != "shm+ofi")
        return raise(MPI_ERR_UNSUPPORTED_OPERATION,
                     "FASTRMA_TRANSPORT=%s is not a transport (auto, shm, am, ofi, shm+am, shm+ofi)", want.c_str());
    *out = Medium::node;
    if (rank == me) return MPI_SUCCESS;  // my own memory: always direct
    const bool own_node = want == "am" || want == "ofi";  // each rank as its own node
    if (same_node && (!own_node || load_store)) return MPI_SUCCESS;
    if (load_store)
        return raise(MPI_ERR_RMA_SHARED, "rank %d is on another node: a shared window needs load/store", rank);
    if (want == "shm")
        return raise(MPI_ERR_UNSUPPORTED_OPERATION, "rank %d is on another node and FASTRMA_TRANSPORT=shm", rank);
    const bool network = want == "ofi" || want == "shm+ofi" || (want == "auto" && ofi_hardware_present());
    const bool reachable = network && (!dynamic || ofi_dynamic_supported(want == "auto" ? std::string() : provider));
    *out = reachable ? Medium::network : Medium::message;
    return MPI_SUCCESS;
}

std::unique_ptr<Transport> make_split_transport(Transport& node, Transport& network, int nprocs) {
    return std::make_unique<SplitTransport>(node, network, nprocs);
}

int message_transport_usable(Bootstrap& group, const char* call) {
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return raise(MPI_ERR_UNSUPPORTED_OPERATION,
                     "%s: the am transport (FASTRMA_TRANSPORT=am or peers on other nodes) needs the host MPI at "
                     "MPI_THREAD_MULTIPLE (initialised at level %d)",
                     call, level);
    if (group.mpi_comm() == MPI_COMM_NULL)
        return raise(MPI_ERR_UNSUPPORTED_OPERATION, "%s: the am transport needs an MPI communicator", call);
    return MPI_SUCCESS;
}

std::unique_ptr<Transport> make_message_transport(Bootstrap& group, LocalTarget local, const Config& cfg,
                                                  const char* call, int* err) {
    auto ep = std::make_unique<AmEndpoint>(group.mpi_comm(), std::move(local), cfg.am_window);  // collective
    ep->set_payload_wait(std::chrono::milliseconds(cfg.am_payload_ms));
    *err = MPI_SUCCESS;
    if (ep->error() != MPI_SUCCESS) {
        *err = raise(MPI_ERR_INTERN, "%s: am: cannot duplicate the communicator", call);
        return nullptr;
    }
    return std::make_unique<AmTransport>(std::move(ep), cfg.am_strided);
}

std::unique_ptr<Transport> make_network_transport(Bootstrap& group, const NetworkPart& mine, const Config& cfg,
                                                  const char* call, int* err) {
    OfiOptions opt;
    // auto: the first hardware provider libfabric offers (select_medium chose the network
    // only if there is one); ofi: the one named.
    opt.provider = cfg.transport == "auto" ? std::string() : cfg.ofi_provider;
    opt.force_mr_local = cfg.ofi_mr_local;
    opt.window = cfg.ofi_window;
    opt.trust_order = cfg.ofi_ordered;
    return make_ofi_transport(group, mine, opt, call, err);
}

}  // namespace fastrma::detail
