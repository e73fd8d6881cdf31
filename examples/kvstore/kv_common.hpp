// kv_common.hpp — the part of the distributed key/value store that does not depend on how
// RMA is called: flags, keys and values, where a key lives, the multithreaded insert and
// lookup phases with their timing, the check and the report. kvstore.cpp plugs in a table
// written against MPI RMA (<mpi.h>), kvstore_cxx.cpp one written against fastrma's C++ API;
// both therefore do the same work and print comparable numbers.
//
// The table: every rank's window holds `slots` slots of (1 + value_words) 64-bit words,
// [key | value...]; key 0 means empty. Key k lives on rank h(k) % P, from slot
// (h(k) / P) % slots on, with linear probing inside that rank's part. Keys are unique by
// construction (rank, thread, index) and never 0; a value is a hash of its key, so any rank
// can check any lookup.
//
// Phases (each rank, `threads` threads, all inside one lock_all epoch of the whole run):
//   clear    each rank zeroes its part, then a barrier;
//   insert   each thread inserts its keys (compare-and-swap on the key word, then a put of
//            the value), then flushes; barrier;
//   lookup   each thread looks up the keys that the same thread of the next rank inserted,
//            plus `miss` keys that nobody inserted; a found key's value must be the
//            expected one, a missing key must not be found; barrier;
//   count    each rank counts its occupied slots: the sum over ranks must be the number of
//            keys inserted (no key lost, none stored twice).
// Lookups run after all inserts (the barrier between): a lookup racing an insert could see
// the key before its value, which a store serving both at once would close with a ready
// flag or a version word.
#ifndef FASTRMA_EXAMPLES_KV_COMMON_HPP
#define FASTRMA_EXAMPLES_KV_COMMON_HPP

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/example_support.hpp"

namespace kv {

struct Config {
    long slots = 1L << 15;  // per rank
    double load = 0.5;  // keys inserted / slots, over the whole table
    int threads = 2;  // per rank
    int value_words = 3;  // 64-bit words of value per slot (slot = 1 + value_words words)
    double miss = 0.1;  // lookups of absent keys, as a fraction of the present ones
    int iters = 3;  // clear / insert / lookup / count cycles
    std::string win = "allocate";
    long seed = 7;

    long slot_words() const { return 1 + value_words; }
    long keys_per_thread() const { return long(load * double(slots)) / threads; }
};

// Registers the flags common to both variants; returns the parse status (-1: go on).
inline int parse_flags(Config& cfg, const char* app, const char* summary, int argc, char** argv, bool with_win) {
    examples::Flags flags(app, summary);
    flags.add("slots", &cfg.slots, "slots per rank (K/M suffixes)");
    flags.add("load", &cfg.load, "fraction of the table's slots that get a key (0 < load < 1)");
    flags.add("threads", &cfg.threads, "threads per rank issuing inserts and lookups (MPI_THREAD_MULTIPLE)");
    flags.add("value-words", &cfg.value_words, "64-bit words of value per key");
    flags.add("miss", &cfg.miss, "lookups of absent keys per lookup of a present key");
    flags.add("iters", &cfg.iters, "clear/insert/lookup cycles (the median is reported)");
    if (with_win) flags.add("win", &cfg.win, "window flavor: allocate (MPI_Win_allocate) or create (MPI_Win_create)");
    flags.add("seed", &cfg.seed, "seed of the key placement");
    flags.epilog(
        "Output: a summary, then one line 'RESULT app=... inserts_per_s=... lookups_per_s=... check=PASS|FAIL'.\n"
        "Exit status 0 only when every lookup returned the right answer and no key was lost.");
    return flags.parse(argc, argv);
}

inline std::string check_config(const Config& cfg, int nranks) {
    if (cfg.slots < 1 || cfg.threads < 1 || cfg.value_words < 1 || cfg.iters < 1)
        return "bad --slots/--threads/--value-words/--iters";
    if (!(cfg.load > 0 && cfg.load < 1)) return "--load must be in (0, 1)";
    if (cfg.keys_per_thread() < 1) return "no keys: raise --slots or --load";
    if (cfg.miss < 0) return "--miss must be >= 0";
    if (cfg.win != "allocate" && cfg.win != "create") return "--win is allocate or create";
    if (double(cfg.slots) * double(cfg.slot_words()) * 8 > 1e11) return "table too large";
    (void)nranks;
    return {};
}

// Key `index` of thread `tid` of `rank`: unique, never 0 (the empty marker). Indexes past
// keys_per_thread() make keys that are never inserted (the misses).
inline std::uint64_t make_key(const Config& cfg, int rank, int tid, long index) {
    return ((std::uint64_t(rank) * std::uint64_t(cfg.threads) + std::uint64_t(tid)) << 32 | std::uint64_t(index)) + 1;
}

inline void make_value(const Config& cfg, std::uint64_t key, std::uint64_t* out) {
    for (int j = 0; j < cfg.value_words; ++j) out[j] = examples::splitmix64(key * 31 + std::uint64_t(j));
}

// Home rank and first slot of a key.
struct Place {
    int rank;
    long slot;
};
inline Place place(const Config& cfg, int nranks, std::uint64_t key) {
    const std::uint64_t h = examples::splitmix64(key ^ (std::uint64_t(cfg.seed) * 0x9e3779b97f4a7c15ULL));
    return {int(h % std::uint64_t(nranks)), long((h / std::uint64_t(nranks)) % std::uint64_t(cfg.slots))};
}

// What a table backend offers (kvstore.cpp: MPI RMA; kvstore_cxx.cpp: fastrma::Window):
//   long insert(key, const uint64_t* value)  probes used (>= 1), or -1 when the home part is
//                                            full; value must stay valid until flush_all();
//                                            thread-safe
//   bool lookup(key, uint64_t* value_out)    thread-safe
//   void flush_all()                         completes the calling process's operations
//   void clear()                             zero this rank's part (one thread, between phases)
//   long count_local()                       occupied slots of this rank's part (same)

struct Report {
    std::vector<double> insert_s, lookup_s;  // per cycle, max over ranks
    long inserted = 0, lookups = 0;  // per cycle, over all ranks
    long errors = 0, probes = 0;  // summed over cycles and ranks
    long occupied_mismatch = 0;
};

template <class F>
void run_threads(int n, F&& body) {
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t) pool.emplace_back(body, t);
    body(0);
    for (auto& th : pool) th.join();
}

inline double max_over_ranks(double v) {
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}
inline long sum_over_ranks(long v) {
    long s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

// The cycles. Collective; the table's epoch is open.
template <class Table>
Report run(Table& table, const Config& cfg, int rank, int nranks, const char* app) {
    Report rep;
    const long per_thread = cfg.keys_per_thread();
    const long misses = long(cfg.miss * double(per_thread));
    const int next = (rank + 1) % nranks;
    // Values live here until the insert phase's flush: one slot's worth per key.
    std::vector<std::vector<std::uint64_t>> values(std::size_t(cfg.threads));
    for (auto& v : values) v.resize(std::size_t(per_thread * cfg.value_words));
    examples::Progress progress(app, rank == 0);

    for (int it = 0; it < cfg.iters; ++it) {
        table.clear();
        examples::yield_barrier(MPI_COMM_WORLD);

        std::atomic<long> probes{0}, errors{0};
        double t0 = examples::now_s();
        run_threads(cfg.threads, [&](int tid) {
            long my_probes = 0, my_errors = 0;
            std::uint64_t* vals = values[std::size_t(tid)].data();
            for (long i = 0; i < per_thread; ++i) {
                const std::uint64_t key = make_key(cfg, rank, tid, i);
                std::uint64_t* value = vals + i * cfg.value_words;
                make_value(cfg, key, value);
                const long p = table.insert(key, value);
                if (p < 0)
                    ++my_errors;  // home part full
                else
                    my_probes += p;
            }
            table.flush_all();
            probes += my_probes;
            errors += my_errors;
        });
        MPI_Barrier(MPI_COMM_WORLD);
        rep.insert_s.push_back(max_over_ranks(examples::now_s() - t0));

        examples::yield_barrier(MPI_COMM_WORLD);
        t0 = examples::now_s();
        run_threads(cfg.threads, [&](int tid) {
            long my_errors = 0;
            std::vector<std::uint64_t> got(std::size_t(cfg.value_words)), want(std::size_t(cfg.value_words));
            for (long i = 0; i < per_thread + misses; ++i) {
                const std::uint64_t key = make_key(cfg, next, tid, i);
                const bool found = table.lookup(key, got.data());
                if (i < per_thread) {
                    make_value(cfg, key, want.data());
                    if (!found || got != want) ++my_errors;
                } else if (found) {
                    ++my_errors;
                }
            }
            errors += my_errors;
        });
        MPI_Barrier(MPI_COMM_WORLD);
        rep.lookup_s.push_back(max_over_ranks(examples::now_s() - t0));

        const long occupied = sum_over_ranks(table.count_local());
        rep.inserted = long(nranks) * cfg.threads * per_thread;
        rep.lookups = long(nranks) * cfg.threads * (per_thread + misses);
        if (occupied != rep.inserted) ++rep.occupied_mismatch;
        rep.errors += sum_over_ranks(errors.load());
        rep.probes += sum_over_ranks(probes.load());
        progress.tick("cycle", it + 1, cfg.iters);
    }
    return rep;
}

// Summary and RESULT line (rank 0); returns whether the check passed (on every rank).
inline bool report(const Report& rep, const Config& cfg, int rank, int nranks, const char* app,
                   const std::string& impl) {
    const bool ok = rep.errors == 0 && rep.occupied_mismatch == 0;
    if (rank != 0) return ok;
    const double ti = examples::median(rep.insert_s), tl = examples::median(rep.lookup_s);
    const double ins = double(rep.inserted) / ti, lks = double(rep.lookups) / tl;
    std::printf("  inserts: %ld in %.4f s (median of %d) = %.3g /s, %.2f probes per insert\n", rep.inserted, ti,
                cfg.iters, ins, double(rep.probes) / double(rep.inserted * cfg.iters));
    std::printf("  lookups: %ld in %.4f s (median of %d) = %.3g /s\n", rep.lookups, tl, cfg.iters, lks);
    std::printf("  check: %ld wrong lookups or full parts, %ld cycles with a lost or doubled key\n", rep.errors,
                rep.occupied_mismatch);
    examples::Result r(app);
    r.add("size", std::to_string(cfg.slots) + "slots")
        .add("ranks", nranks)
        .add("threads", cfg.threads)
        .add("win", cfg.win)
        .add("rma", impl)
        .add("time_s", ti + tl)
        .add("insert_s", ti)
        .add("lookup_s", tl)
        .add("inserts_per_s", ins)
        .add("lookups_per_s", lks)
        .add("errors", rep.errors)
        .add("check", ok ? "PASS" : "FAIL");
    r.print();
    return ok;
}

inline void print_header(const Config& cfg, int nranks, const char* app, const std::string& impl) {
    std::printf(
        "%s: %ld slots x %ld B per rank, load %.2f, %d ranks x %d threads, %ld keys per thread, win=%s, rma=%s\n", app,
        cfg.slots, cfg.slot_words() * 8, cfg.load, nranks, cfg.threads, cfg.keys_per_thread(), cfg.win.c_str(),
        impl.c_str());
}

}  // namespace kv

#endif  // FASTRMA_EXAMPLES_KV_COMMON_HPP
