// bootstrap_mpi.cpp — see bootstrap_mpi.hpp.
#include "engine/bootstrap_mpi.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>

namespace fastrma::detail {

std::string default_node_key() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::string key = host;
    // FASTRMA_NODE_NAME stands in for the host name: ranks with different values are on
    // different nodes (tests of windows that span nodes, on one machine).
    if (const char* name = std::getenv("FASTRMA_NODE_NAME"); name && *name) key = std::string("fastrma-node:") + name;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (boot && std::getline(boot, id)) key += "/" + id;
    return key;
}

std::string Bootstrap::node_key() const { return default_node_key(); }

NodeTopology discover_topology(Bootstrap& bs) {
    NodeTopology* cache = bs.topology_cache();
    if (cache && cache->known) return *cache;
    // Fixed-size keys so that one allgather suffices; a 64-bit hash plus the first bytes
    // of the key makes accidental collisions practically impossible.
    struct Key {
        std::uint64_t hash;
        char prefix[56];
    };
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
            if (nodes[n].hash == all[r].hash && std::string(nodes[n].prefix) == std::string(all[r].prefix))
                idx = int(n);
        if (idx < 0) {
            idx = int(nodes.size());
            nodes.push_back(all[r]);
        }
        t.node_of[r] = idx;
    }
    for (int r = 0; r < bs.size(); ++r)
        if (t.node_of[r] == t.node_of[bs.rank()]) {
            if (r == bs.rank()) t.my_local_index = int(t.local_ranks.size());
            t.local_ranks.push_back(r);
        }
    t.known = true;
    if (cache) *cache = t;
    return t;
}

// Duplicates of one parent communicator that freed windows gave back, with their node
// topology. Every member creates and frees its windows on the parent in the same order
// (both are collective and synchronising), so every member's pool holds the same duplicates
// in the same order and takes the same one: reusing it needs no communication. A duplicate
// is idle when it comes back (the window's free ended with a barrier on it).
struct DupPool {
    struct Idle {
        MPI_Comm comm;
        NodeTopology topo;
        Leftover leftover;
    };
    std::mutex mu;
    std::vector<Idle> idle;  // last given back on top
    std::size_t leftover_bytes = 0;
    bool parent_alive = true;
};

namespace {
int g_pool_keyval = MPI_KEYVAL_INVALID;
std::once_flag g_pool_once;

// The parent is being freed: its idle duplicates go too. (MPI_COMM_WORLD and MPI_COMM_SELF
// are deleted inside MPI_Finalize, where freeing communicators is not safe: they are left.)
int delete_pool(MPI_Comm parent, int, void* value, void*) {
    auto* holder = static_cast<std::shared_ptr<DupPool>*>(value);
    {
        std::lock_guard lk((*holder)->mu);
        (*holder)->parent_alive = false;
        if (parent != MPI_COMM_WORLD && parent != MPI_COMM_SELF)
            for (auto& i : (*holder)->idle) PMPI_Comm_free(&i.comm);
        (*holder)->idle.clear();
    }
    delete holder;
    return MPI_SUCCESS;
}

std::shared_ptr<DupPool> pool_of(MPI_Comm parent) {
    std::call_once(g_pool_once,
                   [] { PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_pool, &g_pool_keyval, nullptr); });
    if (g_pool_keyval == MPI_KEYVAL_INVALID) return nullptr;
    void* value = nullptr;
    int flag = 0;
    if (PMPI_Comm_get_attr(parent, g_pool_keyval, &value, &flag) == MPI_SUCCESS && flag)
        return *static_cast<std::shared_ptr<DupPool>*>(value);
    auto* holder = new std::shared_ptr<DupPool>(std::make_shared<DupPool>());
    if (PMPI_Comm_set_attr(parent, g_pool_keyval, holder) != MPI_SUCCESS) {
        delete holder;
        return nullptr;
    }
    return *holder;
}
}  // namespace

MpiBootstrap::MpiBootstrap(MPI_Comm comm) {
    // An intercommunicator's collectives gather the remote group: refused (MPI_ERR_COMM).
    int inter = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
        err_ = MPI_ERR_COMM;
        return;
    }
    pool_ = pool_of(comm);
    if (pool_) {
        std::lock_guard lk(pool_->mu);
        if (!pool_->idle.empty()) {
            DupPool::Idle& i = pool_->idle.back();
            comm_ = i.comm;
            topo_ = i.topo;
            leftover_ = std::move(i.leftover);
            pool_->leftover_bytes -= leftover_.bytes;
            pool_->idle.pop_back();
        }
    }
    if (comm_ == MPI_COMM_NULL) {
        err_ = PMPI_Comm_dup(comm, &comm_);
        if (err_ != MPI_SUCCESS) {
            comm_ = MPI_COMM_NULL;
            return;
        }
        PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    }
    PMPI_Comm_rank(comm_, &rank_);
    PMPI_Comm_size(comm_, &size_);
}

MpiBootstrap::~MpiBootstrap() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (comm_ == MPI_COMM_NULL || finalized) return;
    if (pool_) {
        std::lock_guard lk(pool_->mu);
        if (pool_->parent_alive) {
            // Every member holds the same leftovers in the same order: the same choice.
            if (pool_->leftover_bytes + leftover_.bytes > kLeftoverBytes) leftover_ = Leftover{};
            pool_->leftover_bytes += leftover_.bytes;
            pool_->idle.push_back({comm_, topo_, std::move(leftover_)});
            return;
        }
    }
    PMPI_Comm_free(&comm_);
}

void MpiBootstrap::allgather(const void* in, std::size_t bytes, void* out) {
    PMPI_Allgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_);
}

void MpiBootstrap::barrier() { PMPI_Barrier(comm_); }

}  // namespace fastrma::detail
