/*
 * rma_suite — the benchmark suite's one binary: every RMA measurement of
 * scripts/bench_suite.sh, written once as templates over an implementation struct and
 * compiled against each MPI compared (docs/performance.md).
 *
 * Implementations: FastrmaImpl (FRMA_Win, FRMA_*) and MpiImpl (MPI_Win, MPI_*: the host
 * MPI's own RMA). The Open MPI build has both; the MPICH build (-DRMA_SUITE_NO_FASTRMA,
 * compiled with mpicxx.mpich) has MpiImpl only, since fastrma itself is built against
 * Open MPI. Open MPI picks its osc component per process, so the runner
 * (bench/suite_run.py) launches this binary once per component, naming the run with
 * --mpi-label (ompi-sm, ompi-rdma, ...).
 *
 * Two modes.
 *   --mode p2p (2 ranks: 0 origin, 1 target), per implementation and window flavor
 *   (allocate, create over malloc'd memory, dynamic with one attached region), on one
 *   8 MiB window: put/get region [0, 4 MiB), accumulate region [4, 8 MiB) of doubles:
 *     lat.<sync>.<op>  latency of put, get, accumulate (SUM, double), get_accumulate,
 *                      fetch_and_op (SUM, int64), compare_and_swap (int64), 8 B .. 1 MiB,
 *                      under sync = flush (op + flush in one lock_all epoch), lock (lock
 *                      exclusive + op + unlock), fence (op + fence, both ranks) and pscw
 *                      (start + op + complete against post + wait);
 *     bw.<op>          put / get / accumulate bandwidth, 8 B .. 4 MiB: n ops + one flush;
 *     bibw.<op>        both ranks put (get) to each other at once: aggregate bandwidth;
 *     rate.t<T>        message rate with T = 1, 2, 4 threads per rank (8 B puts, 64 + flush;
 *                      sync "flush-asleep" in the rows when run with --target-wait poll);
 *     overlap          put / get / accumulate, 8 B .. 1 MiB, fetch_and_op 8 B: origin: op,
 *                      compute, flush;
 *                      target computes without calling MPI.
 *   The target is idle in MPI_Barrier during the passive sections (so a host MPI that needs
 *   target progress gets it; with --target-wait poll it sleeps instead, calling MPI_Test
 *   every 200 us: a target that computes, whose core the origin's threads may use),
 *   computes during overlap, and takes part in fence, PSCW and bidirectional sections. A
 *   get of the target's pattern at the start, a final put and the
 *   fetch_and_op counter checked by the target in its own memory at the end keep an engine
 *   that does not move data from posting numbers (status "invalid").
 *   --mode scale (any number of ranks): window creation and free time, RSS / VmSize / mapping
 *   deltas per window for each flavor (allocate, create, dynamic, shared), then the cost of
 *   each synchronization call: fence, PSCW with the ring neighbours, lock/unlock exclusive and
 *   shared of the right neighbour, lock_all/unlock_all, flush, flush_all, sync.
 *
 * Timing: a warm-up that also sizes the batches, then B batches (11, or 5 with --quick) of
 * about budget/B each; the value is the median over batches of the time per repetition, with
 * the fastest and slowest batch beside it (columns lo, hi). Sections in which several ranks
 * act ("collective") size the batches on rank 0, broadcast the size, start every batch with a
 * barrier and take, per batch, the slowest rank.
 *
 * Output: rows run,impl,flavor,transport,section,sync,op,size,ranks,threads,
 * metric,value,lo,hi,n in --csv; rows run,impl,flavor,transport,status,detail in --status-csv;
 * "impl flavor phase [size]" lines in --progress before each phase and size, flushed, so the
 * runner knows which phase a crash or hang interrupted and reruns with --skip-file for it and
 * for everything that finished.
 */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <unistd.h>
#ifndef RMA_SUITE_NO_FASTRMA
#include <fastrma/fastrma.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// ---------------------------------------------------------------- options and output

struct Options {
    std::string mode = "p2p";  // p2p | scale
    bool quick = false;
    bool run_mpi = true;
    bool run_fastrma = true;
    std::vector<std::string> flavors;  // empty = the mode's default
    std::vector<std::string> sections;  // empty = all
    std::string run_label = "run";
    std::string mpi_label = "mpi";
    std::string csv_path, status_path, progress_path, skip_file;
    std::vector<std::string> skips;  // impl:flavor:phase, "*" fields, phase may end in '*'
    int thread_level = MPI_THREAD_MULTIPLE;
    double budget_scale = 1.0;
    int windows = 0;  // scale mode: windows per flavor (0 = default)
    std::string overlap_sizes;  // "quick" | "full" | "" (as --quick)
    std::string fastrma_label = "fastrma";  // a run of fastrma in a non-default configuration
    bool target_polls = false;  // --target-wait poll: the idle target sleeps between MPI_Tests
};

Options g_opt;
FILE* g_csv = nullptr;
FILE* g_status = nullptr;
FILE* g_progress = nullptr;
int g_rank = 0, g_nranks = 0, g_provided = 0;

constexpr MPI_Aint kHalf = MPI_Aint(4) << 20;  // put/get region; largest transfer 4 MiB
constexpr MPI_Aint kAccOff = kHalf;  // accumulate region (doubles)
constexpr MPI_Aint kCounterOff = 2 * kHalf;  // int64 fetch_and_op counter
constexpr MPI_Aint kCasOff = kCounterOff + 8;  // int64 compare_and_swap word
constexpr MPI_Aint kFlagOff = kCounterOff + 64;  // overlap: stop flag, heartbeat (+8), gave-up (+16)
constexpr MPI_Aint kWinBytes = kCounterOff + 128;
constexpr size_t kCheckBytes = 64 * 1024;
constexpr int64_t kFlagMagic = 0x5eed5eed;
constexpr MPI_Aint kScaleWinBytes = 4096;

bool matches(const std::string& pat, const std::string& s) {
    if (pat == "*") return true;
    if (!pat.empty() && pat.back() == '*') return s.compare(0, pat.size() - 1, pat, 0, pat.size() - 1) == 0;
    return pat == s;
}

// True if a skip spec names (impl, flavor, phase); phase "*" asks whether the whole pair is
// skipped, which only a spec whose phase field is "*" answers.
bool skipped(const std::string& impl, const std::string& flavor, const std::string& phase) {
    for (const std::string& spec : g_opt.skips) {
        size_t a = spec.find(':');
        size_t b = a == std::string::npos ? a : spec.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string f0 = spec.substr(0, a), f1 = spec.substr(a + 1, b - a - 1), f2 = spec.substr(b + 1);
        if (!matches(f0, impl) || !matches(f1, flavor)) continue;
        if (phase == "*" ? f2 == "*" : matches(f2, phase)) return true;
    }
    return false;
}

bool section_on(const std::string& s) {
    if (g_opt.sections.empty()) return true;
    return std::find(g_opt.sections.begin(), g_opt.sections.end(), s) != g_opt.sections.end();
}

// "impl flavor phase size @seconds": the last field (time since start) tells where a run
// spends its time.
void progress(const std::string& impl, const std::string& flavor, const std::string& phase, size_t size = 0) {
    static const auto t0 = std::chrono::steady_clock::now();
    if (!g_progress) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(g_progress, "%s %s %s %zu @%.2f\n", impl.c_str(), flavor.c_str(), phase.c_str(), size, t);
    std::fflush(g_progress);
}

std::string csv_field(std::string s) {
    for (char& c : s)
        if (c == ',' || c == '\n' || c == '\r') c = (c == ',') ? ';' : ' ';
    return s;
}

std::string transport_of(const std::string& impl) {
    if (impl != g_opt.fastrma_label) return "-";
    const char* t = std::getenv("FASTRMA_TRANSPORT");
    return t && *t ? t : "auto";
}

struct Row {
    std::string impl, flavor, section, sync, op;
    size_t size = 0;
    int ranks = 2, threads = 1;
    std::string metric;
    double value = 0, lo = 0, hi = 0;
    int n = 0;
};

void emit(const Row& r) {
    std::printf("%-10s %-8s %-8s %-6s %-9s %8zu B r%-2d t%d  %12.4g %s  [%.4g .. %.4g]\n", r.impl.c_str(),
                r.flavor.c_str(), r.section.c_str(), r.sync.c_str(), r.op.c_str(), r.size, r.ranks, r.threads, r.value,
                r.metric.c_str(), r.lo, r.hi);
    std::fflush(stdout);
    if (!g_csv) return;
    std::fprintf(g_csv, "%s,%s,%s,%s,%s,%s,%s,%zu,%d,%d,%s,%.6g,%.6g,%.6g,%d\n", g_opt.run_label.c_str(),
                 r.impl.c_str(), r.flavor.c_str(), transport_of(r.impl).c_str(), r.section.c_str(), r.sync.c_str(),
                 r.op.c_str(), r.size, r.ranks, r.threads, r.metric.c_str(), r.value, r.lo, r.hi, r.n);
    std::fflush(g_csv);
}

void emit_status(const std::string& impl, const std::string& flavor, const std::string& status,
                 const std::string& detail) {
    std::printf("STATUS impl=%s flavor=%s status=%s%s%s\n", impl.c_str(), flavor.c_str(), status.c_str(),
                detail.empty() ? "" : " detail=", detail.c_str());
    std::fflush(stdout);
    if (g_status) {
        std::fprintf(g_status, "%s,%s,%s,%s,%s,%s\n", g_opt.run_label.c_str(), impl.c_str(), flavor.c_str(),
                     transport_of(impl).c_str(), status.c_str(), csv_field(detail).c_str());
        std::fflush(g_status);
    }
}

std::string mpi_error_string(int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) return "error " + std::to_string(rc);
    return std::string(msg, size_t(len));
}

void append(std::string& list, const std::string& item) {
    if (item.empty()) return;
    if (!list.empty()) list += "; ";
    list += item;
}

// ---------------------------------------------------------------- the implementations

// Both structs have the same static members; the templates below use nothing else.
// Sizes are in bytes; accumulates take a count of doubles.
struct MpiImpl {
    using Win = MPI_Win;
    static std::string name() { return g_opt.mpi_label; }
    static Win null_win() { return MPI_WIN_NULL; }
    static int win_allocate(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* w) {
        return MPI_Win_allocate(size, 1, MPI_INFO_NULL, comm, baseptr, w);
    }
    static int win_allocate_shared(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* w) {
        return MPI_Win_allocate_shared(size, 1, MPI_INFO_NULL, comm, baseptr, w);
    }
    static int win_create(void* base, MPI_Aint size, MPI_Comm comm, Win* w) {
        return MPI_Win_create(base, size, 1, MPI_INFO_NULL, comm, w);
    }
    static int win_create_dynamic(MPI_Comm comm, Win* w) { return MPI_Win_create_dynamic(MPI_INFO_NULL, comm, w); }
    static int win_attach(Win w, void* base, MPI_Aint size) { return MPI_Win_attach(w, base, size); }
    static int win_detach(Win w, void* base) { return MPI_Win_detach(w, base); }
    static int win_free(Win* w) { return MPI_Win_free(w); }
    static int set_errhandler(Win w, MPI_Errhandler eh) { return MPI_Win_set_errhandler(w, eh); }
    static int lock(int type, int rank, Win w) { return MPI_Win_lock(type, rank, 0, w); }
    static int unlock(int rank, Win w) { return MPI_Win_unlock(rank, w); }
    static int lock_all(Win w) { return MPI_Win_lock_all(0, w); }
    static int unlock_all(Win w) { return MPI_Win_unlock_all(w); }
    static int flush(int rank, Win w) { return MPI_Win_flush(rank, w); }
    static int flush_all(Win w) { return MPI_Win_flush_all(w); }
    static int sync(Win w) { return MPI_Win_sync(w); }
    static int fence(int a, Win w) { return MPI_Win_fence(a, w); }
    static int post(MPI_Group g, Win w) { return MPI_Win_post(g, 0, w); }
    static int start(MPI_Group g, Win w) { return MPI_Win_start(g, 0, w); }
    static int complete(Win w) { return MPI_Win_complete(w); }
    static int wait(Win w) { return MPI_Win_wait(w); }
    static int put(const void* b, int n, int r, MPI_Aint d, Win w) {
        return MPI_Put(b, n, MPI_BYTE, r, d, n, MPI_BYTE, w);
    }
    static int get(void* b, int n, int r, MPI_Aint d, Win w) { return MPI_Get(b, n, MPI_BYTE, r, d, n, MPI_BYTE, w); }
    static int acc(const double* b, int n, int r, MPI_Aint d, Win w) {
        return MPI_Accumulate(b, n, MPI_DOUBLE, r, d, n, MPI_DOUBLE, MPI_SUM, w);
    }
    static int get_acc(const double* b, double* res, int n, int r, MPI_Aint d, Win w) {
        return MPI_Get_accumulate(b, n, MPI_DOUBLE, res, n, MPI_DOUBLE, r, d, n, MPI_DOUBLE, MPI_SUM, w);
    }
    static int fetch_and_op(const int64_t* in, int64_t* out, int r, MPI_Aint d, MPI_Op op, Win w) {
        return MPI_Fetch_and_op(in, out, MPI_INT64_T, r, d, op, w);
    }
    static int cas(const int64_t* in, const int64_t* cmp, int64_t* out, int r, MPI_Aint d, Win w) {
        return MPI_Compare_and_swap(in, cmp, out, MPI_INT64_T, r, d, w);
    }
    static std::string error_string(int rc) { return mpi_error_string(rc); }
};

#ifndef RMA_SUITE_NO_FASTRMA
struct FastrmaImpl {
    using Win = FRMA_Win;
    static std::string name() { return g_opt.fastrma_label; }
    static Win null_win() { return FRMA_WIN_NULL; }
    static int win_allocate(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* w) {
        return FRMA_Win_allocate(size, 1, MPI_INFO_NULL, comm, baseptr, w);
    }
    static int win_allocate_shared(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* w) {
        return FRMA_Win_allocate_shared(size, 1, MPI_INFO_NULL, comm, baseptr, w);
    }
    static int win_create(void* base, MPI_Aint size, MPI_Comm comm, Win* w) {
        return FRMA_Win_create(base, size, 1, MPI_INFO_NULL, comm, w);
    }
    static int win_create_dynamic(MPI_Comm comm, Win* w) { return FRMA_Win_create_dynamic(MPI_INFO_NULL, comm, w); }
    static int win_attach(Win w, void* base, MPI_Aint size) { return FRMA_Win_attach(w, base, size); }
    static int win_detach(Win w, void* base) { return FRMA_Win_detach(w, base); }
    static int win_free(Win* w) { return FRMA_Win_free(w); }
    static int set_errhandler(Win w, MPI_Errhandler eh) { return FRMA_Win_set_errhandler(w, eh); }
    static int lock(int type, int rank, Win w) { return FRMA_Win_lock(type, rank, 0, w); }
    static int unlock(int rank, Win w) { return FRMA_Win_unlock(rank, w); }
    static int lock_all(Win w) { return FRMA_Win_lock_all(0, w); }
    static int unlock_all(Win w) { return FRMA_Win_unlock_all(w); }
    static int flush(int rank, Win w) { return FRMA_Win_flush(rank, w); }
    static int flush_all(Win w) { return FRMA_Win_flush_all(w); }
    static int sync(Win w) { return FRMA_Win_sync(w); }
    static int fence(int a, Win w) { return FRMA_Win_fence(a, w); }
    static int post(MPI_Group g, Win w) { return FRMA_Win_post(g, 0, w); }
    static int start(MPI_Group g, Win w) { return FRMA_Win_start(g, 0, w); }
    static int complete(Win w) { return FRMA_Win_complete(w); }
    static int wait(Win w) { return FRMA_Win_wait(w); }
    static int put(const void* b, int n, int r, MPI_Aint d, Win w) {
        return FRMA_Put(b, n, MPI_BYTE, r, d, n, MPI_BYTE, w);
    }
    static int get(void* b, int n, int r, MPI_Aint d, Win w) { return FRMA_Get(b, n, MPI_BYTE, r, d, n, MPI_BYTE, w); }
    static int acc(const double* b, int n, int r, MPI_Aint d, Win w) {
        return FRMA_Accumulate(b, n, MPI_DOUBLE, r, d, n, MPI_DOUBLE, MPI_SUM, w);
    }
    static int get_acc(const double* b, double* res, int n, int r, MPI_Aint d, Win w) {
        return FRMA_Get_accumulate(b, n, MPI_DOUBLE, res, n, MPI_DOUBLE, r, d, n, MPI_DOUBLE, MPI_SUM, w);
    }
    static int fetch_and_op(const int64_t* in, int64_t* out, int r, MPI_Aint d, MPI_Op op, Win w) {
        return FRMA_Fetch_and_op(in, out, MPI_INT64_T, r, d, op, w);
    }
    static int cas(const int64_t* in, const int64_t* cmp, int64_t* out, int r, MPI_Aint d, Win w) {
        return FRMA_Compare_and_swap(in, cmp, out, MPI_INT64_T, r, d, w);
    }
    static std::string error_string(int rc) {
        std::string s = mpi_error_string(rc);
        const char* last = FRMA_Last_error_message();
        if (last && *last) s += std::string(" (") + last + ")";
        return s;
    }
};
#endif

// ---------------------------------------------------------------- timing

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Stat {
    int rc = MPI_SUCCESS;
    double med = 0, lo = 0, hi = 0;  // seconds per repetition
    int n = 0;
};

int batches() { return g_opt.quick ? 5 : 11; }
// Budget per measurement (seconds); `weight` scales it for sections that need longer batches.
double budget(double weight = 1.0) { return (g_opt.quick ? 0.003 : 0.010) * weight * g_opt.budget_scale; }

Stat summarize(std::vector<double> v) {
    Stat st;
    std::sort(v.begin(), v.end());
    st.med = v[v.size() / 2];
    st.lo = v.front();
    st.hi = v.back();
    st.n = int(v.size());
    return st;
}

// How many batches a measurement gets: batches(), fewer (at least 3) when single reps are so
// slow that batches() of them would take more than twice the budget — an operation that
// takes milliseconds (a host MPI waiting for target progress) must not eat the suite's time.
int batches_for(double per_rep_s, double budget_s) {
    const int want = batches();
    if (per_rep_s * want <= 2 * budget_s) return want;
    return std::clamp(int(2 * budget_s / per_rep_s), 3, want);
}

// One rank alone: a warm-up of a tenth of the budget (3 reps or 30 % of the budget, whichever
// comes first, at least 1) sizes the batches.
template <class Rep>
Stat measure_local(Rep&& rep, double budget_s) {
    Stat st;
    long warm = 0;
    double fastest = 1e30;  // the fastest single rep, for reps so slow that there are few
    auto t0 = Clock::now();
    for (;;) {
        auto t1 = Clock::now();
        if ((st.rc = rep()) != MPI_SUCCESS) return st;
        fastest = std::min(fastest, since(t1));
        ++warm;
        const double t = since(t0);
        if (t >= budget_s * 0.1 && (warm >= 3 || t >= budget_s * 0.3)) break;
        if (warm >= 1000000) break;
    }
    const double per = warm <= 3 ? fastest : since(t0) / double(warm);
    // One rep longer than half the budget: the batches would be 3 single reps; the warm-up rep
    // is the first of them (the median of 3 leaves a cold first one out), so that an operation
    // of a second costs 3 seconds, not 4.
    if (warm == 1 && per >= budget_s * 0.5) {
        std::vector<double> v{per};
        for (int b = 1; b < 3; ++b) {
            auto tb = Clock::now();
            if ((st.rc = rep()) != MPI_SUCCESS) return st;
            v.push_back(since(tb));
        }
        Stat s = summarize(v);
        s.rc = MPI_SUCCESS;
        return s;
    }
    const int nb = batches_for(per, budget_s);
    const long reps = std::clamp(long(budget_s / nb / std::max(per, 1e-9)), 1L, 2000000L);
    std::vector<double> v;
    for (int b = 0; b < nb; ++b) {
        auto tb = Clock::now();
        for (long i = 0; i < reps; ++i)
            if ((st.rc = rep()) != MPI_SUCCESS) return st;
        v.push_back(since(tb) / double(reps));
    }
    Stat s = summarize(v);
    s.rc = MPI_SUCCESS;
    return s;
}

// Every rank of `comm` runs rep(). Rank 0 sizes the batches and broadcasts the size; each
// batch starts with a barrier, and its time is that of the slowest rank. A rep that fails is
// remembered, not acted on, so that every rank makes the same number of calls (collective
// syncs must match); the error is shared at the end. Result valid on rank 0.
template <class Rep>
Stat measure_coll(MPI_Comm comm, Rep&& rep, double budget_s) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    int err = MPI_SUCCESS;
    auto run = [&](long n) {
        for (long i = 0; i < n; ++i) {
            int rc = rep();
            if (rc != MPI_SUCCESS && err == MPI_SUCCESS) err = rc;
        }
    };
    // Single reps first: up to 3 while they are slow, the fastest one sizing the warm-up, so
    // that one slow first rep (a cold path, a scheduler slice) does not cut the batches. Each
    // one's time is that of the slowest rank, as a batch's.
    double per = 1e30;
    std::vector<double> singles;
    for (int i = 0; i < 3; ++i) {
        MPI_Barrier(comm);
        auto t1 = Clock::now();
        run(1);
        double one = since(t1), slowest = 0;
        MPI_Allreduce(&one, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
        singles.push_back(slowest);
        per = std::min(per, slowest);
        if (per < budget_s * 0.1) break;
    }
    // Three single reps each longer than half the budget: the batches would be 3 of one rep
    // each, the same measurement again. Those three are the batches (an oversubscribed
    // synchronization of ~100 ms must not cost the suite twice its time).
    if (singles.size() == 3 && per >= budget_s * 0.5) {
        int any = err != MPI_SUCCESS, any_all = 0;
        MPI_Allreduce(&any, &any_all, 1, MPI_INT, MPI_MAX, comm);
        Stat st = summarize(singles);
        st.rc = err != MPI_SUCCESS ? err : (any_all ? MPI_ERR_OTHER : MPI_SUCCESS);
        return st;
    }
    auto t0 = Clock::now();
    long k = std::clamp(long(budget_s * 0.1 / std::max(per, 1e-9)), 0L, 1000000L);
    if (k == 0 && per < budget_s * 0.1) k = 2;
    MPI_Bcast(&k, 1, MPI_LONG, 0, comm);
    if (k > 0) {
        MPI_Barrier(comm);
        t0 = Clock::now();
        run(k);
        per = since(t0) / double(k);
    }
    long plan[2] = {batches_for(per, budget_s), 0};
    plan[1] = std::clamp(long(budget_s / double(plan[0]) / std::max(per, 1e-9)), 1L, 2000000L);
    MPI_Bcast(plan, 2, MPI_LONG, 0, comm);
    const int nb = int(plan[0]);
    const long reps = plan[1];
    std::vector<double> v(static_cast<size_t>(nb)), vmax(static_cast<size_t>(nb));
    for (int b = 0; b < nb; ++b) {
        MPI_Barrier(comm);
        auto tb = Clock::now();
        run(reps);
        v[size_t(b)] = since(tb) / double(reps);
    }
    MPI_Reduce(v.data(), vmax.data(), nb, MPI_DOUBLE, MPI_MAX, 0, comm);
    int any = err != MPI_SUCCESS, any_all = 0;
    MPI_Allreduce(&any, &any_all, 1, MPI_INT, MPI_MAX, comm);
    Stat st = rank == 0 ? summarize(vmax) : Stat{};
    st.rc = err != MPI_SUCCESS ? err : (any_all ? MPI_ERR_OTHER : MPI_SUCCESS);
    return st;
}

// Fixed work for the overlap test: a dependent chain of multiply-adds (no memory traffic, no
// MPI). Returns the result so the compiler keeps the loop.
double compute(long iters, double x = 1.0) {
    for (long i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
    return x;
}
volatile double g_sink;

double compute_ns_per_iter() {
    std::vector<double> v;
    for (int i = 0; i < 7; ++i) {
        auto t0 = Clock::now();
        g_sink = compute(200000);
        v.push_back(since(t0) * 1e9 / 200000);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// lo, lo * 2^step, ... up to hi, plus hi, plus 64 KiB and 1 MiB (the sizes the report's
// headline compares) when they are in range.
std::vector<size_t> pow2_sizes(size_t lo, size_t hi, int step_log2) {
    std::vector<size_t> s;
    for (size_t x = lo; x <= hi; x <<= step_log2) s.push_back(x);
    for (size_t x : {hi, size_t(65536), size_t(1) << 20})
        if (x >= lo && x <= hi) s.push_back(x);
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    return s;
}
// Latency sizes: powers of 2 under lock_all + flush (the detailed curves), powers of 4 under
// lock, fence and PSCW, whose cost is mostly the synchronization (the suite's time budget).
// --quick: powers of 8 under lock_all + flush, and only the points the report compares
// (8 B, 64 KiB, 1 MiB) under the others.
std::vector<size_t> latency_sizes(const std::string& sync) {
    if (g_opt.quick && sync != "flush") return {8, 65536, size_t(1) << 20};
    return pow2_sizes(8, size_t(1) << 20, g_opt.quick ? 3 : sync == "flush" ? 1 : 2);
}
// Overlap sizes: 8 B .. 1 MiB in powers of 4 (powers of 8 with --quick), plus 64 KiB and 1 MiB.
// (--overlap-sizes quick|full picks the grid apart from --quick: the runner's fastrma-am run
// has quick batches and latency sizes but the full run's overlap sizes, row for row.)
std::vector<size_t> overlap_sizes() {
    const bool quick = g_opt.overlap_sizes.empty() ? g_opt.quick : g_opt.overlap_sizes == "quick";
    return pow2_sizes(8, size_t(1) << 20, quick ? 3 : 2);
}
std::vector<size_t> bandwidth_sizes() { return pow2_sizes(8, size_t(kHalf), g_opt.quick ? 3 : 1); }
// Ops per bandwidth rep: 64, fewer for large sizes so that one rep moves about 16 MiB.
// With --quick, 4 MiB (at least one op): slow accumulates must not cost seconds per size.
int ops_per_rep(size_t size) {
    if (g_opt.quick) return int(std::clamp<size_t>((size_t(4) << 20) / size, 1, 64));
    return int(std::clamp<size_t>((size_t(16) << 20) / size, 4, 64));
}

uint8_t pattern_byte(size_t i, unsigned seed) { return uint8_t((i * 131u + seed * 7u + 1u) & 0xff); }

// ---------------------------------------------------------------- p2p: one window, all sections

const char* kLatOps[] = {"put", "get", "acc", "get_acc", "fetch_and_op", "cas"};

template <class Impl>
struct P2P {
    using Win = typename Impl::Win;
    Win win;
    std::string impl, flavor;
    MPI_Comm comm;
    MPI_Aint disp0[2] = {0, 0};  // per rank: displacement of the window's byte 0 (dynamic: address)
    uint8_t* base;  // this rank's window memory
    std::vector<uint8_t>& src;  // origin buffer (bytes), 4 MiB
    std::vector<uint8_t>& dst;  // result buffer, 4 MiB
    std::vector<double>& dsrc;  // accumulate origin (1.0), 512 Ki doubles
    MPI_Group peer_group = MPI_GROUP_NULL;
    std::string failures;  // errors: status op_failed
    std::string notes;  // what was not measured and why: status stays ran
    int64_t counter_expected = 0;

    int peer() const { return 1 - g_rank; }
    MPI_Aint at(int rank, MPI_Aint off) const { return disp0[rank] + off; }

    bool note(const std::string& what, int rc) {
        if (rc == MPI_SUCCESS) return false;
        std::string msg = what + ": " + Impl::error_string(rc);
        std::printf("%-10s %-8s FAILED %s\n", impl.c_str(), flavor.c_str(), msg.c_str());
        std::fflush(stdout);
        append(failures, msg);
        return true;
    }

    void emit_time(const char* section, const char* sync, const char* op, size_t size, const Stat& st,
                   int threads = 1) {
        Row r{impl, flavor, section, sync, op, size, 2, threads, "ns", st.med * 1e9, st.lo * 1e9, st.hi * 1e9, st.n};
        emit(r);
    }
    void emit_bw(const char* section, const char* op, size_t size, double bytes, const Stat& st) {
        Row r{impl,
              flavor,
              section,
              "flush",
              op,
              size,
              2,
              1,
              "MB/s",
              bytes / st.med / 1e6,
              bytes / st.hi / 1e6,
              bytes / st.lo / 1e6,
              st.n};
        emit(r);
    }

    // One op of `size` bytes to rank `t` (no synchronization). fetch_and_op counts its +1s.
    int op(const std::string& o, size_t size, int t) {
        if (o == "put") return Impl::put(src.data(), int(size), t, at(t, 0), win);
        if (o == "get") return Impl::get(dst.data(), int(size), t, at(t, 0), win);
        if (o == "acc") return Impl::acc(dsrc.data(), int(size / 8), t, at(t, kAccOff), win);
        if (o == "get_acc")
            return Impl::get_acc(dsrc.data(), reinterpret_cast<double*>(dst.data()), int(size / 8), t, at(t, kAccOff),
                                 win);
        if (o == "fetch_and_op") {
            static int64_t one = 1, out = 0;
            int rc = Impl::fetch_and_op(&one, &out, t, at(t, kCounterOff), MPI_SUM, win);
            if (rc == MPI_SUCCESS) ++counter_expected;
            return rc;
        }
        if (o == "cas") {  // compares equal, swaps 0 for 0: the full path, the word stays 0
            static int64_t zero = 0, out = -1;
            return Impl::cas(&zero, &zero, &out, t, at(t, kCasOff), win);
        }
        return MPI_ERR_OTHER;
    }
    static std::vector<size_t> sizes_of(const std::string& o, const std::string& sync) {
        if (o == "fetch_and_op" || o == "cas") return {8};
        return latency_sizes(sync);
    }

    // ---- passive sections (rank 0 only; the target idles in MPI_Barrier)

    bool check_initial_pattern() {
        std::memset(dst.data(), 0, kCheckBytes);
        int rc = Impl::get(dst.data(), int(kCheckBytes), 1, at(1, 0), win);
        if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
        if (note("check-get", rc)) return false;
        for (size_t i = 0; i < kCheckBytes; ++i)
            if (dst[i] != pattern_byte(i, 1)) {
                append(failures, "check-get: get returned wrong bytes from offset " + std::to_string(i));
                return false;
            }
        return true;
    }

    void lat_passive(const std::string& sync) {
        for (const char* o : kLatOps) {
            const std::string phase = "lat." + sync + "." + o;
            if (skipped(impl, flavor, phase)) continue;
            for (size_t s : sizes_of(o, sync)) {
                progress(impl, flavor, phase, s);
                Stat st = measure_local(
                    [&] {
                        if (sync == "flush") {
                            int rc = op(o, s, 1);
                            return rc != MPI_SUCCESS ? rc : Impl::flush(1, win);
                        }
                        int rc = Impl::lock(MPI_LOCK_EXCLUSIVE, 1, win);
                        if (rc == MPI_SUCCESS) rc = op(o, s, 1);
                        int rc2 = Impl::unlock(1, win);
                        return rc != MPI_SUCCESS ? rc : rc2;
                    },
                    budget());
                if (note(phase + " " + std::to_string(s), st.rc)) break;
                emit_time("lat", sync.c_str(), o, s, st);
            }
        }
    }

    void bandwidth() {
        for (const char* o : {"put", "get", "acc"}) {
            const std::string phase = std::string("bw.") + o;
            if (skipped(impl, flavor, phase)) continue;
            for (size_t s : bandwidth_sizes()) {
                progress(impl, flavor, phase, s);
                const int n = ops_per_rep(s);
                const std::string so = o;
                Stat st = measure_local(
                    [&] {
                        for (int i = 0; i < n; ++i) {
                            const MPI_Aint off = MPI_Aint((size_t(i) * s) % size_t(kHalf));
                            int rc = so == "put"   ? Impl::put(src.data(), int(s), 1, at(1, off), win)
                                     : so == "get" ? Impl::get(dst.data() + off, int(s), 1, at(1, off), win)
                                                   : Impl::acc(dsrc.data(), int(s / 8), 1, at(1, kAccOff + off), win);
                            if (rc != MPI_SUCCESS) return rc;
                        }
                        return Impl::flush(1, win);
                    },
                    budget());
                if (note(phase + " " + std::to_string(s), st.rc)) break;
                emit_bw("bw", o, s, double(n) * double(s), st);
            }
        }
    }

    // T threads of rank 0 each put 64 x 8 B to their own part of the target, then flush(1),
    // over and over; the rate is all threads' messages per second.
    //
    // The threads run without a pause for the whole measurement and thread 0 samples their
    // rep counters at interval boundaries: each interval is a batch. Batches separated by
    // barriers measured something else where threads outnumber cores (4 threads and the
    // target's thread on 2 here): every batch started by waking 3 sleeping threads, and a
    // thread preempted on that crowded machine waits out a scheduler slice (~1 ms, measured:
    // a flush taking 1 ms of wall time for 10-20 us of CPU and one involuntary switch). Once
    // the warm-up (sized from one rep) met such a slice, batches shrank to one rep each and
    // timed little but the wake-ups: 0.05-0.3 M msg/s, against 5-10 for the same code
    // measured continuously.
    void message_rate() {
        for (int T : {1, 2, 4}) {
            const std::string phase = "rate.t" + std::to_string(T);
            if (skipped(impl, flavor, phase)) continue;
            if (T > 1 && g_provided < MPI_THREAD_MULTIPLE) {
                append(notes, phase + ": not run (thread level below MPI_THREAD_MULTIPLE)");
                continue;
            }
            progress(impl, flavor, phase, 8);
            constexpr int kPuts = 64;
            struct alignas(64) Count {
                std::atomic<long> reps{0};
            };
            std::vector<Count> done(static_cast<size_t>(T));
            std::atomic<int> err{MPI_SUCCESS};
            std::atomic<bool> stop{false};
            auto one_rep = [&](int t) {
                const uint8_t* b = src.data() + t * 64;
                for (int i = 0; i < kPuts; ++i) {
                    int rc = Impl::put(b, 8, 1, at(1, MPI_Aint(t) * 65536 + i * 8), win);
                    if (rc != MPI_SUCCESS) {
                        int z = MPI_SUCCESS;
                        err.compare_exchange_strong(z, rc);
                    }
                }
                int rc = Impl::flush(1, win);
                if (rc != MPI_SUCCESS) {
                    int z = MPI_SUCCESS;
                    err.compare_exchange_strong(z, rc);
                }
                done[size_t(t)].reps.fetch_add(1, std::memory_order_release);
            };
            std::vector<std::thread> th;
            for (int t = 1; t < T; ++t)
                th.emplace_back([&, t] {
                    while (!stop.load(std::memory_order_acquire) && err.load() == MPI_SUCCESS) one_rep(t);
                });
            auto total = [&] {
                long n = 0;
                for (const Count& c : done) n += c.reps.load(std::memory_order_acquire);
                return n;
            };
            // Interval length: budget(5) / batches() as before (at least one rep of thread 0).
            // The first interval warms up and is not kept; when it ran long (an implementation
            // that needs target progress can take milliseconds a put), fewer intervals follow.
            const double interval = budget(5) / batches();
            int nb = batches();
            std::vector<double> per_msg;  // seconds per message, all threads together
            auto t0 = Clock::now();
            long n0 = total();
            for (int b = -1; b < nb && err.load() == MPI_SUCCESS;) {
                one_rep(0);
                const auto now = Clock::now();
                const double dt = std::chrono::duration<double>(now - t0).count();
                if (dt < interval) continue;
                const long n1 = total();
                if (b >= 0)
                    per_msg.push_back(dt / double((n1 - n0) * kPuts));
                else
                    nb = batches_for(dt, budget(5));
                t0 = now;
                n0 = n1;
                ++b;
            }
            stop.store(true, std::memory_order_release);
            for (auto& x : th) x.join();
            if (note(phase, err.load())) continue;
            Stat st = summarize(per_msg);
            // With the target asleep (--target-wait poll) the rows say so: another regime.
            Row r{impl,
                  flavor,
                  "rate",
                  g_opt.target_polls ? "flush-asleep" : "flush",
                  "put",
                  8,
                  2,
                  T,
                  "Mmsg/s",
                  1e-6 / st.med,
                  1e-6 / st.hi,
                  1e-6 / st.lo,
                  st.n};
            emit(r);
        }
    }

    // ---- collective sections (both ranks)

    void lat_active(const std::string& sync) {
        const bool fence = sync == "fence";
        bool open = false;
        for (const char* o : kLatOps) {
            const std::string phase = "lat." + sync + "." + o;
            if (skipped(impl, flavor, phase)) continue;
            if (fence && !open) {
                if (note("fence open", Impl::fence(0, win))) return;
                open = true;
            }
            for (size_t s : sizes_of(o, sync)) {
                if (g_rank == 0) progress(impl, flavor, phase, s);
                Stat st = measure_coll(
                    MPI_COMM_WORLD,
                    [&] {
                        int rc = MPI_SUCCESS;
                        if (fence) {
                            if (g_rank == 0) rc = op(o, s, 1);
                            int rc2 = Impl::fence(0, win);
                            return rc != MPI_SUCCESS ? rc : rc2;
                        }
                        if (g_rank == 0) {
                            rc = Impl::start(peer_group, win);
                            if (rc == MPI_SUCCESS) rc = op(o, s, 1);
                            int rc2 = Impl::complete(win);
                            return rc != MPI_SUCCESS ? rc : rc2;
                        }
                        rc = Impl::post(peer_group, win);
                        int rc2 = Impl::wait(win);
                        return rc != MPI_SUCCESS ? rc : rc2;
                    },
                    budget());
                if (note(phase + " " + std::to_string(s), st.rc)) break;
                if (g_rank == 0) emit_time("lat", sync.c_str(), o, s, st);
            }
        }
        if (open) note("fence close", Impl::fence(MPI_MODE_NOSUCCEED, win));
    }

    // Both ranks put (get) to each other inside their own lock_all epochs.
    void bidirectional() {
        if (note("bibw lock_all", Impl::lock_all(win))) return;
        for (const char* o : {"put", "get"}) {
            const std::string phase = std::string("bibw.") + o;
            if (skipped(impl, flavor, phase)) continue;
            const bool is_put = std::string(o) == "put";
            for (size_t s : bandwidth_sizes()) {
                if (g_rank == 0) progress(impl, flavor, phase, s);
                const int n = ops_per_rep(s);
                const int t = peer();
                Stat st = measure_coll(
                    MPI_COMM_WORLD,
                    [&] {
                        for (int i = 0; i < n; ++i) {
                            const MPI_Aint off = MPI_Aint((size_t(i) * s) % size_t(kHalf));
                            int rc = is_put ? Impl::put(src.data(), int(s), t, at(t, off), win)
                                            : Impl::get(dst.data() + off, int(s), t, at(t, off), win);
                            if (rc != MPI_SUCCESS) return rc;
                        }
                        return Impl::flush(t, win);
                    },
                    budget());
                if (note(phase + " " + std::to_string(s), st.rc)) break;
                if (g_rank == 0) emit_bw("bibw", o, s, 2.0 * n * double(s), st);
            }
        }
        note("bibw unlock_all", Impl::unlock_all(win));
    }

    // Origin: op, then compute for as long as op + flush takes alone, then flush. Target:
    // computes without calling MPI, reading two words of its own window memory between slices
    // of work: a heartbeat the origin puts after each batch, and a stop flag it puts at the
    // end. overlap = (t_comm + t_comp - t_total) / t_comm over the medians of the three parts
    // (timed back to back in every batch), clamped to [0, 1]: 1 means the transfer was
    // entirely hidden behind the work (lo, hi: the extreme per-batch values). An
    // implementation whose ops need the target to call MPI never gets a heartbeat through:
    // after `timeout_s` without one the target gives
    // up, says so in a third word (the origin then stops measuring) and enters MPI; the rows
    // are dropped.
    void overlap() {
        const std::string phase = "overlap";
        if (skipped(impl, flavor, phase)) return;
        const double timeout_s = g_opt.quick ? 1.0 : 2.0;
        int timed_out = 0;
        std::vector<Row> rows;
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 1) {
            volatile int64_t* flag = reinterpret_cast<volatile int64_t*>(base + kFlagOff);
            volatile int64_t* heartbeat = flag + 1;
            volatile int64_t* gave_up = flag + 2;
            auto t_beat = Clock::now();
            int64_t last = *heartbeat;
            double x = 1.0;
            while (*flag != kFlagMagic) {
                x = compute(2000, x);
                if (*heartbeat != last) {
                    last = *heartbeat;
                    t_beat = Clock::now();
                } else if (since(t_beat) > timeout_s) {
                    timed_out = 1;
                    *gave_up = kFlagMagic;  // the origin reads it and stops measuring
                    break;
                }
            }
            g_sink = x;
        } else {
            progress(impl, flavor, phase);
            const double ns_iter = compute_ns_per_iter();
            int64_t beat = 0;
            auto heartbeat = [&] {
                ++beat;
                int rc = Impl::put(&beat, 8, 1, at(1, kFlagOff + 8), win);
                return rc != MPI_SUCCESS ? rc : Impl::flush(1, win);
            };
            // Whether the target gave up waiting for a heartbeat (then every op completes only
            // because it sits in MPI: nothing left to measure).
            auto target_gave_up = [&] {
                int64_t word = 0;
                int rc = Impl::get(&word, 8, 1, at(1, kFlagOff + 16), win);
                if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
                return rc != MPI_SUCCESS || word == kFlagMagic;
            };
            if (!note("overlap lock_all", Impl::lock_all(win)) && !note("overlap heartbeat", heartbeat())) {
                bool stop = false;
                for (const char* o : {"put", "get", "acc", "fetch_and_op"}) {
                    const std::string os = o;
                    for (size_t s : os == "fetch_and_op" ? std::vector<size_t>{8} : overlap_sizes()) {
                        if ((stop = target_gave_up())) break;
                        progress(impl, flavor, phase, s);
                        // Calibration: op + flush alone sizes the work and the batches.
                        Stat cal = measure_local(
                            [&] {
                                int rc = op(o, s, 1);
                                return rc != MPI_SUCCESS ? rc : Impl::flush(1, win);
                            },
                            budget(0.3));
                        if (note(std::string("overlap ") + o, cal.rc)) break;
                        // The heartbeat after every batch: the target's patience must outlast one batch (a
                        // 1 MiB get over am takes tens of milliseconds a rep), not the whole size.
                        note("overlap heartbeat", heartbeat());
                        // The work must last as long as op + flush (it can hide no more than itself): the
                        // iteration count from the start-up calibration, corrected by timing it here (the
                        // cost of an iteration moves with the load on the other core).
                        long iters = std::max(1L, long(cal.med * 1e9 / ns_iter));
                        const Stat wcal = measure_local(
                            [&] {
                                g_sink = compute(iters);
                                return MPI_SUCCESS;
                            },
                            budget(0.2));
                        iters = std::max(1L, long(double(iters) * cal.med / std::max(wcal.med, 1e-12)));
                        // Each batch times k reps of op + flush (t_comm), k reps of the work alone (t_comp)
                        // and k reps of op, work, flush (t_total), back to back: the three parts see the
                        // same machine load, which three measurements one after the other (seconds of
                        // load changes apart on a shared machine) do not.
                        const int nb = batches_for(3 * cal.med, 1.5 * budget());
                        const long k =
                            std::clamp(long(1.5 * budget() / nb / (3 * std::max(cal.med, 1e-9))), 1L, 1000000L);
                        std::vector<double> vc, vp, vt, vo;
                        int rc = MPI_SUCCESS;
                        for (int b = 0; b < nb && rc == MPI_SUCCESS; ++b) {
                            auto t0 = Clock::now();
                            for (long i = 0; i < k && rc == MPI_SUCCESS; ++i) {
                                rc = op(o, s, 1);
                                if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
                            }
                            const double c = since(t0) / double(k);
                            t0 = Clock::now();
                            for (long i = 0; i < k; ++i) g_sink = compute(iters);
                            const double w = since(t0) / double(k);
                            t0 = Clock::now();
                            for (long i = 0; i < k && rc == MPI_SUCCESS; ++i) {
                                rc = op(o, s, 1);
                                g_sink = compute(iters);
                                if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
                            }
                            const double t = since(t0) / double(k);
                            vc.push_back(c);
                            vp.push_back(w);
                            vt.push_back(t);
                            vo.push_back(std::clamp((c + w - t) / c, 0.0, 1.0));
                            note("overlap heartbeat", heartbeat());
                        }
                        if (note(std::string("overlap ") + o, rc)) break;
                        // The overlap from the medians of the three parts, not the median of the per-batch
                        // overlaps: a preemption (milliseconds, on a shared machine) that lands in t_comm
                        // or t_comp pushes a batch's overlap toward 1 and one in t_total toward 0, so two
                        // thirds of the disturbed batches err upward; the median of each part ignores
                        // them alike. lo, hi: the extreme per-batch overlaps.
                        const Stat ov = summarize(vo), comm = summarize(vc), total = summarize(vt),
                                   comp = summarize(vp);
                        const double overlap = std::clamp((comm.med + comp.med - total.med) / comm.med, 0.0, 1.0);
                        rows.push_back(
                            {impl, flavor, "overlap", "flush", o, s, 2, 1, "overlap", overlap, ov.lo, ov.hi, ov.n});
                        rows.push_back({impl, flavor, "overlap", "flush", o, s, 2, 1, "comm_ns", comm.med * 1e9,
                                        comm.lo * 1e9, comm.hi * 1e9, comm.n});
                        rows.push_back({impl, flavor, "overlap", "flush", o, s, 2, 1, "comp_ns", comp.med * 1e9,
                                        comp.lo * 1e9, comp.hi * 1e9, comp.n});
                        rows.push_back({impl, flavor, "overlap", "flush", o, s, 2, 1, "total_ns", total.med * 1e9,
                                        total.lo * 1e9, total.hi * 1e9, total.n});
                    }
                    if (stop) break;
                }
                const int64_t magic = kFlagMagic;
                int rc = Impl::put(&magic, 8, 1, at(1, kFlagOff), win);
                if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
                note("overlap flag", rc);
                note("overlap unlock_all", Impl::unlock_all(win));
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Bcast(&timed_out, 1, MPI_INT, 1, MPI_COMM_WORLD);
        if (g_rank != 0) return;
        if (timed_out) {
            append(notes,
                   "overlap: not reported, the origin's ops did not complete while the target computed "
                   "without calling MPI (they need target progress)");
            return;
        }
        for (const Row& r : rows) emit(r);
    }

    // Final state for the target to check in its own memory: a put pattern and the counter.
    int64_t leave_final_state() {
        for (size_t i = 0; i < kCheckBytes; ++i) src[i] = pattern_byte(i, 2);
        int64_t counter = -1, dummy = 0;
        int rc = Impl::lock_all(win);
        if (rc == MPI_SUCCESS) rc = Impl::put(src.data(), int(kCheckBytes), 1, at(1, 0), win);
        // A fetch_and_op that crashed in an earlier attempt would crash here too: then only the
        // put is checked.
        bool read_counter = true;
        for (const std::string& spec : g_opt.skips)
            if (spec.find("fetch_and_op") != std::string::npos) read_counter = false;
        if (rc == MPI_SUCCESS && read_counter)
            rc = Impl::fetch_and_op(&dummy, &counter, 1, at(1, kCounterOff), MPI_NO_OP, win);
        if (rc == MPI_SUCCESS) rc = Impl::flush(1, win);
        int rc2 = Impl::unlock_all(win);
        if (note("final", rc != MPI_SUCCESS ? rc : rc2)) return -2;
        for (size_t i = 0; i < kCheckBytes; ++i) src[i] = uint8_t(i * 7 + 3);
        return read_counter ? counter : -1;
    }
};

// Runs every p2p section for one (implementation, flavor) pair. Collective over both ranks;
// both take the same branches (same command line, same skip list).
template <class Impl>
void run_p2p(MPI_Comm comm, const std::string& flavor, std::vector<uint8_t>& src, std::vector<uint8_t>& dst,
             std::vector<double>& dsrc) {
    using Win = typename Impl::Win;
    const std::string impl = Impl::name();
    if (skipped(impl, flavor, "*")) return;
    if (g_rank == 0) progress(impl, flavor, "setup");

    Win win = Impl::null_win();
    uint8_t* base = nullptr;
    void* user_mem = nullptr;
    int rc;
    if (flavor == "allocate") {
        rc = Impl::win_allocate(kWinBytes, comm, &base, &win);
    } else if (flavor == "create") {
        user_mem = std::malloc(static_cast<size_t>(kWinBytes));
        base = static_cast<uint8_t*>(user_mem);
        rc = Impl::win_create(user_mem, kWinBytes, comm, &win);
    } else {
        user_mem = std::malloc(static_cast<size_t>(kWinBytes));
        base = static_cast<uint8_t*>(user_mem);
        rc = Impl::win_create_dynamic(comm, &win);
        if (rc == MPI_SUCCESS) {
            rc = Impl::win_attach(win, user_mem, kWinBytes);
            if (rc != MPI_SUCCESS) std::printf("# attach failed: %s\n", Impl::error_string(rc).c_str());
        }
    }
    // Both ranks must agree before anything else is collective. On a one-sided failure the
    // window that did come up is leaked (freeing it would be collective).
    int ok = rc == MPI_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        std::string mine = rc == MPI_SUCCESS ? "succeeded here" : Impl::error_string(rc);
        char other[1024] = {0};
        if (g_rank == 1) {
            MPI_Send(mine.c_str(), int(std::min<size_t>(mine.size() + 1, sizeof other)), MPI_CHAR, 0, 7,
                     MPI_COMM_WORLD);
        } else {
            MPI_Recv(other, int(sizeof other) - 1, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            std::string detail = mine == other ? mine : "rank 0: " + mine + " | rank 1: " + other;
            emit_status(impl, flavor, "refused", detail);
        }
        if (!ok) std::free(user_mem);
        return;
    }
    Impl::set_errhandler(win, MPI_ERRORS_RETURN);

    P2P<Impl> s{win, impl, flavor, comm, {0, 0}, base, src, dst, dsrc, MPI_GROUP_NULL, {}, {}, 0};
    if (flavor == "dynamic") {
        MPI_Aint mine;
        MPI_Get_address(base, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, s.disp0, 1, MPI_AINT, MPI_COMM_WORLD);
    }
    MPI_Group world_group;
    MPI_Comm_group(comm, &world_group);
    const int other = s.peer();
    MPI_Group_incl(world_group, 1, &other, &s.peer_group);
    MPI_Group_free(&world_group);

    // Target memory: the check pattern, zeroed accumulate region and atomics.
    if (g_rank == 1) {
        for (size_t i = 0; i < kCheckBytes; ++i) base[i] = pattern_byte(i, 1);
        std::memset(base + kAccOff, 0, size_t(kHalf));
        std::memset(base + kCounterOff, 0, size_t(kWinBytes - kCounterOff));
    } else {
        std::memset(base, 0, size_t(kWinBytes));  // it is a target in the bidirectional section
    }
    MPI_Barrier(MPI_COMM_WORLD);

    // Passive sections: rank 0 measures, rank 1 idles in MPI_Barrier.
    int pattern_ok = 1;
    if (g_rank == 0) {
        progress(impl, flavor, "check");
        if (!s.note("lock_all", Impl::lock_all(win))) {
            pattern_ok = s.check_initial_pattern();
            if (pattern_ok) {
                if (section_on("lat")) s.lat_passive("flush");
                if (section_on("bw")) s.bandwidth();
                if (section_on("rate")) s.message_rate();
            }
            s.note("unlock_all", Impl::unlock_all(win));
            if (pattern_ok && section_on("lat")) s.lat_passive("lock");
        }
    }
    if (g_opt.target_polls) {
        // The target sleeps while the origin measures (a blocking MPI call spins on a core).
        MPI_Request rq;
        MPI_Ibcast(&pattern_ok, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
        for (int done = 0; !done;) {
            MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
            if (!done && g_rank != 0) usleep(200);
        }
    } else {
        MPI_Bcast(&pattern_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    // Collective sections.
    if (pattern_ok) {
        if (section_on("lat")) {
            s.lat_active("fence");
            s.lat_active("pscw");
        }
        if (section_on("bibw")) s.bidirectional();
        if (section_on("overlap")) s.overlap();
    }

    // Final check: the target looks at its own memory.
    int64_t counter = -1;
    if (g_rank == 0) {
        progress(impl, flavor, "final");
        counter = s.leave_final_state();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t seen = counter;
    MPI_Bcast(&seen, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int target_ok = 1;
    if (g_rank == 1 && seen != -2) {
        for (size_t i = 0; i < kCheckBytes && target_ok; ++i)
            if (base[i] != pattern_byte(i, 2)) target_ok = 0;
        int64_t mine;
        std::memcpy(&mine, base + kCounterOff, 8);
        if (seen >= 0 && mine != seen) target_ok = 0;
    }
    MPI_Bcast(&target_ok, 1, MPI_INT, 1, MPI_COMM_WORLD);

    if (g_rank == 0) {
        std::string detail = s.failures;
        std::string status = detail.empty() ? "ran" : "op_failed";
        append(detail, s.notes);
        if (!pattern_ok) status = "invalid";
        if (counter >= 0 && counter != s.counter_expected) {
            status = "invalid";
            append(detail, "fetch_and_op counter is " + std::to_string(counter) + ", expected " +
                               std::to_string(s.counter_expected));
        }
        if (!target_ok) {
            status = "invalid";
            append(detail, "target memory does not hold the final put/counter");
        }
        emit_status(impl, flavor, status, detail);
        progress(impl, flavor, "free");
    }
    MPI_Group_free(&s.peer_group);
    if (flavor == "dynamic") Impl::win_detach(win, user_mem);
    rc = Impl::win_free(&win);
    if (rc != MPI_SUCCESS && g_rank == 0)
        std::printf("# %s %s: Win_free failed: %s\n", impl.c_str(), flavor.c_str(), Impl::error_string(rc).c_str());
    std::free(user_mem);
}

// ---------------------------------------------------------------- scale: windows and syncs

struct ProcMem {
    long vm_kib = 0, rss_kib = 0, vmas = 0;
};
ProcMem proc_mem() {
    ProcMem m;
    std::ifstream f("/proc/self/statm");
    long size = 0, rss = 0;
    f >> size >> rss;
    const long page_kib = 4;
    m.vm_kib = size * page_kib;
    m.rss_kib = rss * page_kib;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) ++m.vmas;
    return m;
}

template <class Impl>
int create_window(const std::string& flavor, MPI_Comm comm, typename Impl::Win* win, void** user_mem) {
    void* base = nullptr;
    if (flavor == "allocate") return Impl::win_allocate(kScaleWinBytes, comm, &base, win);
    if (flavor == "shared") return Impl::win_allocate_shared(kScaleWinBytes, comm, &base, win);
    if (flavor == "create") {
        *user_mem = std::calloc(1, size_t(kScaleWinBytes));
        return Impl::win_create(*user_mem, kScaleWinBytes, comm, win);
    }
    *user_mem = std::calloc(1, size_t(kScaleWinBytes));
    int rc = Impl::win_create_dynamic(comm, win);
    if (rc == MPI_SUCCESS) rc = Impl::win_attach(*win, *user_mem, kScaleWinBytes);
    return rc;
}

template <class Impl>
void free_window(const std::string& flavor, typename Impl::Win* win, void* user_mem) {
    if (flavor == "dynamic") Impl::win_detach(*win, user_mem);
    Impl::win_free(win);
    std::free(user_mem);
}

// Creation and free time (slowest rank, median over K windows) and what K live windows add
// to each process (mean over ranks of the VmSize / RSS / mapping deltas, per window).
template <class Impl>
void scale_windows(MPI_Comm comm, const std::string& flavor) {
    using Win = typename Impl::Win;
    const std::string impl = Impl::name();
    const std::string phase = "win." + flavor;
    if (skipped(impl, flavor, phase)) return;
    if (g_rank == 0) progress(impl, flavor, phase);
    // K windows, fewer (at least 3) when creating them takes longer than `limit_s`: MPICH
    // oversubscribed 8-fold needs about a second per window.
    const int kmax = g_opt.windows > 0 ? g_opt.windows : (g_opt.quick ? 4 : 10);
    const double limit_s = g_opt.quick ? 0.3 : 1.0;
    int K = kmax;
    // A first window pays one-time costs (component or engine start-up): not counted.
    Win w0 = Impl::null_win();
    void* m0 = nullptr;
    int rc = create_window<Impl>(flavor, comm, &w0, &m0);
    int ok = rc == MPI_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (g_rank == 0)
            emit_status(impl, flavor, "refused",
                        "Win " + flavor + ": " + (ok ? "refused on another rank" : Impl::error_string(rc)));
        return;
    }
    free_window<Impl>(flavor, &w0, m0);

    std::vector<Win> wins(size_t(kmax), Impl::null_win());
    std::vector<void*> mem(size_t(kmax), nullptr);
    std::vector<double> tc(static_cast<size_t>(kmax)), tf(static_cast<size_t>(kmax));
    MPI_Barrier(MPI_COMM_WORLD);
    const ProcMem before = proc_mem();
    int err = MPI_SUCCESS;
    const auto t_start = Clock::now();
    for (int k = 0; k < kmax; ++k) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = Clock::now();
        rc = create_window<Impl>(flavor, comm, &wins[size_t(k)], &mem[size_t(k)]);
        tc[size_t(k)] = since(t0);
        if (rc != MPI_SUCCESS && err == MPI_SUCCESS) err = rc;
        int more = k + 1 < 3 || since(t_start) < limit_s;  // rank 0 decides for all
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) {
            K = k + 1;
            break;
        }
    }
    tc.resize(size_t(K));
    tf.resize(size_t(K));
    MPI_Barrier(MPI_COMM_WORLD);
    const ProcMem after = proc_mem();
    for (int k = 0; k < K; ++k) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = Clock::now();
        free_window<Impl>(flavor, &wins[size_t(k)], mem[size_t(k)]);
        tf[size_t(k)] = since(t0);
    }
    std::vector<double> tcmax(static_cast<size_t>(K)), tfmax(static_cast<size_t>(K));
    MPI_Reduce(tc.data(), tcmax.data(), K, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(tf.data(), tfmax.data(), K, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double d[3] = {double(after.vm_kib - before.vm_kib) / K, double(after.rss_kib - before.rss_kib) / K,
                   double(after.vmas - before.vmas) / K};
    double dsum[3], dmax[3];
    MPI_Reduce(d, dsum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(d, dmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (g_rank != 0) return;
    if (err != MPI_SUCCESS) {
        emit_status(impl, flavor, "op_failed", "window creation: " + Impl::error_string(err));
        return;
    }
    Stat c = summarize(tcmax), f = summarize(tfmax);
    const int p = g_nranks;
    emit({impl, flavor, "win", "-", "create", size_t(kScaleWinBytes), p, 1, "us", c.med * 1e6, c.lo * 1e6, c.hi * 1e6,
          c.n});
    emit({impl, flavor, "win", "-", "free", size_t(kScaleWinBytes), p, 1, "us", f.med * 1e6, f.lo * 1e6, f.hi * 1e6,
          f.n});
    const char* names[3] = {"vmsize_kib", "rss_kib", "mappings"};
    for (int i = 0; i < 3; ++i)
        emit({impl, flavor, "win", "-", "memory", size_t(kScaleWinBytes), p, 1, names[i], dsum[i] / p, dsum[i] / p,
              dmax[i], K});
    emit_status(impl, flavor, "ran", "");
}

// Cost of each synchronization call with every rank calling it at once; passive ones target
// the right neighbour (each target is locked by one origin: no contention).
template <class Impl>
void scale_syncs(MPI_Comm comm, const std::string& flavor) {
    using Win = typename Impl::Win;
    const std::string impl = Impl::name();
    if (skipped(impl, flavor, "sync.setup")) return;
    if (g_rank == 0) progress(impl, flavor, "sync.setup");
    Win win = Impl::null_win();
    void* mem = nullptr;
    int rc = create_window<Impl>(flavor, comm, &win, &mem);
    int ok = rc == MPI_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) return;  // reported by scale_windows
    Impl::set_errhandler(win, MPI_ERRORS_RETURN);
    const int p = g_nranks, right = (g_rank + 1) % p, left = (g_rank + p - 1) % p;
    MPI_Group wg, ring;
    MPI_Comm_group(comm, &wg);
    int nb[2] = {left, right};
    MPI_Group_incl(wg, left == right ? 1 : 2, nb, &ring);
    MPI_Group_free(&wg);
    std::string failures;

    struct SyncCase {
        const char* name;
        bool in_lock_all;
        std::function<int()> rep;
    };
    const std::vector<SyncCase> cases = {
        {"fence", false, [&] { return Impl::fence(0, win); }},
        {"pscw", false,
         [&] {
             int r1 = Impl::post(ring, win), r2 = Impl::start(ring, win), r3 = Impl::complete(win),
                 r4 = Impl::wait(win);
             return r1 ? r1 : r2 ? r2 : r3 ? r3 : r4;
         }},
        {"lock_excl", false,
         [&] {
             int r1 = Impl::lock(MPI_LOCK_EXCLUSIVE, right, win), r2 = Impl::unlock(right, win);
             return r1 ? r1 : r2;
         }},
        // Every rank takes rank 0's exclusive lock, puts 8 B, unlocks: lock hand-off under
        // contention (waiters wake on the releaser's doorbell, or poll). Not on dynamic
        // windows (the put would need rank 0's attached address).
        {"lock_contended", false,
         [&] {
             const int64_t v = g_rank;
             int r1 = Impl::lock(MPI_LOCK_EXCLUSIVE, 0, win);
             int r2 = r1 ? r1 : Impl::put(&v, 8, 0, MPI_Aint(8 * g_rank), win);
             int r3 = Impl::unlock(0, win);
             return r1 ? r1 : r2 ? r2 : r3;
         }},
        {"lock_shared", false,
         [&] {
             int r1 = Impl::lock(MPI_LOCK_SHARED, right, win), r2 = Impl::unlock(right, win);
             return r1 ? r1 : r2;
         }},
        {"lock_all", false,
         [&] {
             int r1 = Impl::lock_all(win), r2 = Impl::unlock_all(win);
             return r1 ? r1 : r2;
         }},
        {"flush", true, [&] { return Impl::flush(right, win); }},
        {"flush_all", true, [&] { return Impl::flush_all(win); }},
        {"sync", true, [&] { return Impl::sync(win); }},
    };
    for (const SyncCase& c : cases) {
        const std::string phase = std::string("sync.") + c.name;
        if (skipped(impl, flavor, phase)) continue;
        if (flavor == "dynamic" && std::string(c.name) == "lock_contended") continue;
        if (g_rank == 0) progress(impl, flavor, phase);
        const bool fence = std::string(c.name) == "fence";
        if (c.in_lock_all) Impl::lock_all(win);
        Stat st = measure_coll(MPI_COMM_WORLD, c.rep, budget(2));
        if (c.in_lock_all) Impl::unlock_all(win);
        if (fence) Impl::fence(MPI_MODE_NOSUCCEED, win);
        if (st.rc != MPI_SUCCESS) {
            append(failures, phase + ": " + Impl::error_string(st.rc));
            continue;
        }
        if (g_rank == 0)
            emit({impl, flavor, "sync", c.name, c.name, 0, p, 1, "ns", st.med * 1e9, st.lo * 1e9, st.hi * 1e9, st.n});
    }
    if (g_rank == 0 && !failures.empty()) emit_status(impl, flavor, "op_failed", failures);
    MPI_Group_free(&ring);
    free_window<Impl>(flavor, &win, mem);
}

template <class Impl>
void run_impl(MPI_Comm comm, std::vector<uint8_t>& src, std::vector<uint8_t>& dst, std::vector<double>& dsrc) {
    std::vector<std::string> flavors = g_opt.flavors;
    if (g_opt.mode == "p2p") {
        if (flavors.empty()) flavors = {"allocate", "create", "dynamic"};
        for (const std::string& f : flavors) run_p2p<Impl>(comm, f, src, dst, dsrc);
        return;
    }
    if (flavors.empty()) flavors = {"allocate", "create", "dynamic", "shared"};
    if (section_on("win"))
        for (const std::string& f : flavors) scale_windows<Impl>(comm, f);
    if (section_on("sync"))
        for (const std::string& f : flavors)
            if (f != "shared" && (f == "allocate" || !g_opt.quick)) scale_syncs<Impl>(comm, f);
}

// ---------------------------------------------------------------- main

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t a = 0;
    while (a <= s.size()) {
        size_t b = s.find(sep, a);
        if (b == std::string::npos) b = s.size();
        if (b > a) out.push_back(s.substr(a, b - a));
        a = b + 1;
    }
    return out;
}

void usage() {
    std::printf(
        "usage: mpiexec -n P rma_suite [--mode p2p|scale] [--quick] [--impl all|mpi|fastrma]\n"
        "         [--flavors allocate,create,dynamic,shared] [--sections lat,bw,rate,bibw,overlap|win,sync]\n"
        "         [--run LABEL] [--mpi-label LABEL] [--csv F] [--status-csv F] [--progress F]\n"
        "         [--skip IMPL:FLAVOR:PHASE]... [--skip-file F] [--thread multiple|serialized]\n"
        "         [--budget-scale X] [--windows K] [--overlap-sizes quick|full] [--fastrma-label NAME]\n"
        "         [--target-wait mpi|poll]\n"
        "  p2p needs 2 ranks; PHASE as in the progress file (lat.flush.put, bw.get, ...), '*' wildcards.\n");
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i], v;
        auto value = [&]() {
            if (i + 1 >= argc) return false;
            v = argv[++i];
            return true;
        };
        if (a == "--quick")
            o.quick = true;
        else if (a == "--mode" && value())
            o.mode = v;
        else if (a == "--impl" && value()) {
            o.run_mpi = v == "all" || v == "mpi";
            o.run_fastrma = v == "all" || v == "fastrma";
        } else if (a == "--flavors" && value())
            o.flavors = split(v, ',');
        else if (a == "--sections" && value())
            o.sections = split(v, ',');
        else if (a == "--run" && value())
            o.run_label = v;
        else if (a == "--mpi-label" && value())
            o.mpi_label = v;
        else if (a == "--csv" && value())
            o.csv_path = v;
        else if (a == "--status-csv" && value())
            o.status_path = v;
        else if (a == "--progress" && value())
            o.progress_path = v;
        else if (a == "--skip" && value())
            o.skips.push_back(v);
        else if (a == "--skip-file" && value()) {
            std::ifstream f(v);
            std::string line;
            while (std::getline(f, line))
                if (!line.empty()) o.skips.push_back(line);
        } else if (a == "--budget-scale" && value())
            o.budget_scale = std::atof(v.c_str());
        else if (a == "--windows" && value())
            o.windows = std::atoi(v.c_str());
        else if (a == "--overlap-sizes" && value() && (v == "quick" || v == "full"))
            o.overlap_sizes = v;
        else if (a == "--fastrma-label" && value())
            o.fastrma_label = v;
        else if (a == "--target-wait" && value() && (v == "mpi" || v == "poll"))
            o.target_polls = v == "poll";
        else if (a == "--thread" && value()) {
            if (v == "multiple")
                o.thread_level = MPI_THREAD_MULTIPLE;
            else if (v == "serialized")
                o.thread_level = MPI_THREAD_SERIALIZED;
            else if (v == "funneled")
                o.thread_level = MPI_THREAD_FUNNELED;
            else
                return false;
        } else
            return false;
    }
    return o.mode == "p2p" || o.mode == "scale";
}

}  // namespace

int main(int argc, char** argv) {
    const bool args_ok = parse(argc, argv, g_opt);
    MPI_Init_thread(&argc, &argv, g_opt.thread_level, &g_provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
#ifdef RMA_SUITE_NO_FASTRMA
    g_opt.run_fastrma = false;
#endif
    if (!args_ok || (g_opt.mode == "p2p" && g_nranks != 2)) {
        if (g_rank == 0) {
            if (args_ok) std::printf("--mode p2p needs exactly 2 ranks (got %d)\n", g_nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    // Window creation reports its errors on the communicator: return them, never abort.
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    if (g_rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        if (char* nl = std::strchr(lib, '\n')) *nl = '\0';
        std::printf("# rma_suite: %s; mode=%s%s; ranks=%d; run=%s; mpi=%s; thread level provided %d (requested %d)\n",
                    lib, g_opt.mode.c_str(), g_opt.quick ? " quick" : "", g_nranks, g_opt.run_label.c_str(),
                    g_opt.mpi_label.c_str(), g_provided, g_opt.thread_level);
        std::fflush(stdout);
        if (!g_opt.csv_path.empty() && (g_csv = std::fopen(g_opt.csv_path.c_str(), "w")))
            std::fprintf(g_csv, "run,impl,flavor,transport,section,sync,op,size,ranks,threads,metric,value,lo,hi,n\n");
        if (!g_opt.status_path.empty() && (g_status = std::fopen(g_opt.status_path.c_str(), "w")))
            std::fprintf(g_status, "run,impl,flavor,transport,status,detail\n");
        if (!g_opt.progress_path.empty()) g_progress = std::fopen(g_opt.progress_path.c_str(), "w");
    }

    std::vector<uint8_t> src(static_cast<size_t>(kHalf)), dst(static_cast<size_t>(kHalf));
    std::vector<double> dsrc(size_t(kHalf) / 8, 1.0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 3);

#ifndef RMA_SUITE_NO_FASTRMA
    if (g_opt.run_fastrma) run_impl<FastrmaImpl>(comm, src, dst, dsrc);
#endif
    if (g_opt.run_mpi) run_impl<MpiImpl>(comm, src, dst, dsrc);

    if (g_rank == 0) {
        progress("-", "-", "done");
        for (FILE* f : {g_csv, g_status, g_progress})
            if (f) std::fclose(f);
        std::printf("# done\n");
        std::fflush(stdout);
    }
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
