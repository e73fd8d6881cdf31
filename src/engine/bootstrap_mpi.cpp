// bootstrap_mpi.cpp — see bootstrap_mpi.hpp.
#include "engine/bootstrap_mpi.hpp"

#include <fstream>
#include <unistd.h>

namespace fastrma::detail {

std::string default_node_key() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::string key = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (boot && std::getline(boot, id)) key += "/" + id;
    return key;
}

std::string Bootstrap::node_key() const { return default_node_key(); }

NodeTopology discover_topology(Bootstrap& bs) {
    // Fixed-size keys so that one allgather suffices; a 64-bit hash plus the first bytes
    // of the key makes accidental collisions practically impossible.
    struct Key { std::uint64_t hash; char prefix[56]; };
    std::string k = bs.node_key();
    Key mine{};
    mine.hash = std::hash<std::string>{}(k);
    k.copy(mine.prefix, sizeof mine.prefix - 1);
    std::vector<Key> all(bs.size());
    bs.allgather(&mine, sizeof mine, all.data());
    NodeTopology t;
    t.node_of.resize(bs.size());
    std::vector<Key> nodes;
    for (int r = 0; r < bs.size(); ++r) {
        int idx = -1;
        for (std::size_t n = 0; n < nodes.size(); ++n)
            if (nodes[n].hash == all[r].hash &&
                std::string(nodes[n].prefix) == std::string(all[r].prefix)) idx = int(n);
        if (idx < 0) { idx = int(nodes.size()); nodes.push_back(all[r]); }
        t.node_of[r] = idx;
    }
    for (int r = 0; r < bs.size(); ++r)
        if (t.node_of[r] == t.node_of[bs.rank()]) {
            if (r == bs.rank()) t.my_local_index = int(t.local_ranks.size());
            t.local_ranks.push_back(r);
        }
    return t;
}

MpiBootstrap::MpiBootstrap(MPI_Comm comm) {
    // An intercommunicator's collectives gather the remote group: refused (MPI_ERR_COMM).
    int inter = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
        err_ = MPI_ERR_COMM;
        return;
    }
    err_ = PMPI_Comm_dup(comm, &comm_);
    if (err_ != MPI_SUCCESS) { comm_ = MPI_COMM_NULL; return; }
    PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(comm_, &rank_);
    PMPI_Comm_size(comm_, &size_);
}

MpiBootstrap::~MpiBootstrap() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) PMPI_Comm_free(&comm_);
}

void MpiBootstrap::allgather(const void* in, std::size_t bytes, void* out) {
    PMPI_Allgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_);
}

void MpiBootstrap::barrier() { PMPI_Barrier(comm_); }

}  // namespace fastrma::detail
