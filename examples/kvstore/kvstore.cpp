// kvstore — a distributed key/value store (open-addressing hash table) over MPI RMA, the
// foMPI paper's hashtable motif, with several threads per rank (MPI_THREAD_MULTIPLE).
//
// The table lives in one window; see kv_common.hpp for the layout, the phases and the check.
// This file is the RMA part, plain MPI-3 (<mpi.h> only), all inside one MPI_Win_lock_all
// epoch for the whole run:
//   insert  MPI_Compare_and_swap(key, expected 0) on the slot's key word + MPI_Win_flush;
//           the slot is ours when it was empty: MPI_Put of the value words (completed by
//           the thread's MPI_Win_flush_all at the end of the phase); otherwise the next slot;
//   lookup  MPI_Get of the whole slot + MPI_Win_flush; key equal: found; key 0: absent;
//           otherwise the next slot.
// The same binary measures the host MPI's RMA or, with libfastrma-mpi.so preloaded, fastrma.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kv_common.hpp"

namespace {

class MpiTable {
public:
    MpiTable(const kv::Config& cfg, int nranks) : cfg_(cfg), nranks_(nranks) {
        const MPI_Aint bytes = MPI_Aint(cfg.slots * cfg.slot_words() * 8);
        if (cfg.win == "create") {
            owned_.resize(std::size_t(cfg.slots * cfg.slot_words()));
            base_ = owned_.data();
            MPI_Win_create(base_, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win_);
        } else {
            MPI_Win_allocate(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base_, &win_);
        }
        std::fill_n(base_, cfg.slots * cfg.slot_words(), 0);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock_all(0, win_);
    }
    ~MpiTable() {
        MPI_Win_unlock_all(win_);
        MPI_Win_free(&win_);
    }

    long insert(std::uint64_t key, const std::uint64_t* value) {
        const kv::Place home = kv::place(cfg_, nranks_, key);
        const std::uint64_t empty = 0;
        for (long probe = 0; probe < cfg_.slots; ++probe) {
            const MPI_Aint at = disp(home.slot + probe);
            std::uint64_t old = ~0ULL;
            MPI_Compare_and_swap(&key, &empty, &old, MPI_UINT64_T, home.rank, at, win_);
            MPI_Win_flush(home.rank, win_);  // old is valid from here
            if (old == 0) {
                MPI_Put(value, cfg_.value_words, MPI_UINT64_T, home.rank, at + 1, cfg_.value_words, MPI_UINT64_T, win_);
                return probe + 1;
            }
        }
        return -1;
    }

    bool lookup(std::uint64_t key, std::uint64_t* value_out) {
        const kv::Place home = kv::place(cfg_, nranks_, key);
        thread_local std::vector<std::uint64_t> slot;
        slot.resize(std::size_t(cfg_.slot_words()));
        for (long probe = 0; probe < cfg_.slots; ++probe) {
            MPI_Get(slot.data(), int(cfg_.slot_words()), MPI_UINT64_T, home.rank, disp(home.slot + probe),
                    int(cfg_.slot_words()), MPI_UINT64_T, win_);
            MPI_Win_flush(home.rank, win_);
            if (slot[0] == key) {
                std::copy_n(slot.begin() + 1, cfg_.value_words, value_out);
                return true;
            }
            if (slot[0] == 0) return false;
        }
        return false;
    }

    void flush_all() { MPI_Win_flush_all(win_); }

    // Local stores and loads inside the lock_all epoch: MPI_Win_sync orders them with the
    // RMA of the peers (unified model), the callers' barriers do the rest.
    void clear() {
        MPI_Win_sync(win_);
        std::fill_n(base_, cfg_.slots * cfg_.slot_words(), 0);
        MPI_Win_sync(win_);
    }
    long count_local() {
        MPI_Win_sync(win_);
        long n = 0;
        for (long s = 0; s < cfg_.slots; ++s) n += base_[s * cfg_.slot_words()] != 0;
        return n;
    }

private:
    MPI_Aint disp(long slot) const { return MPI_Aint((slot % cfg_.slots) * cfg_.slot_words()); }

    const kv::Config& cfg_;
    int nranks_;
    std::uint64_t* base_ = nullptr;
    std::vector<std::uint64_t> owned_;
    MPI_Win win_ = MPI_WIN_NULL;
};

}  // namespace

int main(int argc, char** argv) {
    kv::Config cfg;
    if (int rc =
            kv::parse_flags(cfg, "kvstore",
                            "Distributed key/value store: open addressing over every rank's window; insert =\n"
                            "MPI_Compare_and_swap on the key word + MPI_Put of the value, lookup = MPI_Get;\n"
                            "several threads per rank in one MPI_Win_lock_all epoch. Every inserted key is read back.",
                            argc, argv, true);
        rc >= 0)
        return rc;
    if (!examples::init_mpi(&argc, &argv, cfg.threads, "kvstore")) {
        MPI_Finalize();
        return 2;
    }
    int rank = 0, p = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (const std::string err = kv::check_config(cfg, p); !err.empty()) {
        if (rank == 0) std::fprintf(stderr, "kvstore: %s\n", err.c_str());
        MPI_Finalize();
        return 2;
    }
    const std::string impl = examples::rma_implementation();
    if (rank == 0) kv::print_header(cfg, p, "kvstore", impl);
    bool ok = false;
    {
        MpiTable table(cfg, p);
        const kv::Report rep = kv::run(table, cfg, rank, p, "kvstore");
        ok = kv::report(rep, cfg, rank, p, "kvstore", impl);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
