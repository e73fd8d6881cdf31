// kvstore_cxx — the distributed key/value store of examples/kvstore written against
// fastrma's C++ API (fastrma.hpp): the showcase of that API. Same table, same phases, same
// check and the same RESULT line as the MPI version (kv_common.hpp); only the RMA differs:
//   - the table is a fastrma::Window<std::uint64_t> (disp_unit = 8, so indexes are words);
//   - one LockAllEpoch object spans the run and ends at scope exit;
//   - insert: w.compare_and_swap(rank, index, 0, key) returns the old key (it flushes);
//     w.put(rank, index + 1, value) claims nothing and is completed by epoch.flush();
//   - lookup: w.get(rank, index, slot).flush();
//   - errors are exceptions (fastrma::Error with the MPI error class).
// Linked with libfastrma itself, not through the drop-in: this program always runs on
// fastrma. Threads share the window as a `const Window&`.
#include <mpi.h>
#include <fastrma/fastrma.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <vector>

#include "../kvstore/kv_common.hpp"

namespace {

class CxxTable {
public:
    CxxTable(const kv::Config& cfg, int nranks)
        : cfg_(cfg),
          nranks_(nranks),
          window_(fastrma::Window<std::uint64_t>::allocate(MPI_COMM_WORLD, std::size_t(cfg.slots * cfg.slot_words()))) {
        std::ranges::fill(window_.local(), 0);
        MPI_Barrier(MPI_COMM_WORLD);  // every part is empty before anyone inserts
        epoch_.emplace(window_.lock_all());
    }
    // The epoch ends before the window is freed (collectively, in window_'s destructor).
    ~CxxTable() { epoch_.reset(); }

    long insert(std::uint64_t key, const std::uint64_t* value) const {
        const kv::Place home = kv::place(cfg_, nranks_, key);
        for (long probe = 0; probe < cfg_.slots; ++probe) {
            const std::size_t at = index(home.slot + probe);
            if (window_.compare_and_swap(home.rank, at, 0, key) == 0) {  // the slot was empty: ours
                window_.put(home.rank, at + 1, std::span<const std::uint64_t>(value, std::size_t(cfg_.value_words)));
                return probe + 1;
            }
        }
        return -1;
    }

    bool lookup(std::uint64_t key, std::uint64_t* value_out) const {
        const kv::Place home = kv::place(cfg_, nranks_, key);
        thread_local std::vector<std::uint64_t> slot;
        slot.resize(std::size_t(cfg_.slot_words()));
        for (long probe = 0; probe < cfg_.slots; ++probe) {
            window_.get(home.rank, index(home.slot + probe), std::span<std::uint64_t>(slot)).flush();
            if (slot[0] == key) {
                std::copy_n(slot.begin() + 1, cfg_.value_words, value_out);
                return true;
            }
            if (slot[0] == 0) return false;
        }
        return false;
    }

    void flush_all() const { epoch_->flush(); }

    // Local loads and stores inside the epoch, ordered with the peers' RMA by sync().
    void clear() const {
        epoch_->sync();
        std::ranges::fill(window_.local(), 0);
        epoch_->sync();
    }
    long count_local() const {
        epoch_->sync();
        const std::span<const std::uint64_t> part = window_.local();
        long n = 0;
        for (long s = 0; s < cfg_.slots; ++s) n += part[std::size_t(s * cfg_.slot_words())] != 0;
        return n;
    }

private:
    std::size_t index(long slot) const { return std::size_t((slot % cfg_.slots) * cfg_.slot_words()); }

    const kv::Config& cfg_;
    int nranks_;
    fastrma::Window<std::uint64_t> window_;
    std::optional<fastrma::LockAllEpoch> epoch_;
};

[[noreturn]] void abort_job() {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    try {
        if (std::current_exception()) std::rethrow_exception(std::current_exception());
        std::fprintf(stderr, "kvstore_cxx: rank %d: std::terminate\n", rank);
    } catch (const fastrma::Error& e) {
        std::fprintf(stderr, "kvstore_cxx: rank %d: %s (MPI error class %d)\n", rank, e.what(), e.error_class());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvstore_cxx: rank %d: %s\n", rank, e.what());
    } catch (...) {
        std::fprintf(stderr, "kvstore_cxx: rank %d: unknown exception\n", rank);
    }
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

}  // namespace

int main(int argc, char** argv) {
    kv::Config cfg;
    if (int rc = kv::parse_flags(cfg, "kvstore_cxx",
                                 "The distributed key/value store of kvstore, written with fastrma's C++ API\n"
                                 "(fastrma::Window<std::uint64_t>: compare_and_swap, put, get in one lock_all epoch).",
                                 argc, argv, false);
        rc >= 0)
        return rc;
    if (!examples::init_mpi(&argc, &argv, cfg.threads, "kvstore_cxx")) {
        MPI_Finalize();
        return 2;
    }
    int rank = 0, p = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (const std::string err = kv::check_config(cfg, p); !err.empty()) {
        if (rank == 0) std::fprintf(stderr, "kvstore_cxx: %s\n", err.c_str());
        MPI_Finalize();
        return 2;
    }
    const std::string impl = "fastrma-cxx";
    if (rank == 0) kv::print_header(cfg, p, "kvstore_cxx", impl);
    // A failed window call throws fastrma::Error. Nothing catches it: unwinding would run the
    // window's collective free on this rank alone while the others wait elsewhere. Uncaught,
    // it ends in std::terminate (no unwinding, also from a worker thread), which reports it
    // and aborts the job.
    std::set_terminate(abort_job);
    bool ok = false;
    {
        CxxTable table(cfg, p);
        const kv::Report rep = kv::run(table, cfg, rank, p, "kvstore_cxx");
        ok = kv::report(rep, cfg, rank, p, "kvstore_cxx", impl);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
