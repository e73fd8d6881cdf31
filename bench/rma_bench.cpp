/*
 * rma_bench — passive-target RMA micro-benchmarks, fastrma against the host MPI's own RMA.
 *
 * The benchmark logic is written once, as templates over an implementation struct
 * (FastrmaImpl: FRMA_Win / FRMA_*, MpiImpl: MPI_Win / MPI_*), and both are measured in the
 * same process, with the same buffers, sizes and timing rules. Open MPI picks its osc
 * component per process, so the script bench/run_bench.sh runs this binary once per
 * component (--mca osc <c>); the component name is only a label here (--component, or the
 * OMPI_MCA_osc variable mpiexec exports).
 *
 * Shape of one (implementation, window flavor) run, 2 ranks:
 *   both    create the window (allocate or create over malloc'd memory), errors returned;
 *   rank 1  fills its window with a known pattern, then idles in MPI_Barrier (which keeps the
 *           host MPI's progress engine turning, as passive target needs for osc pt2pt/rdma;
 *           --target-wait yield|sleep polls an MPI_Ibarrier instead, see idle_in_barrier);
 *   rank 0  MPI_Win_lock_all, checks a get of that pattern, measures, puts a final pattern,
 *           unlock_all, barrier;
 *   both    rank 1 checks the final pattern and the atomic counter in its own memory, the
 *           verdict is shared, the window is freed.
 * The checks keep an engine that returns early without moving data from posting fine numbers.
 *
 * Timing: per measurement a warm-up (which also calibrates), then a number of batches each of
 * about budget/batches; the value reported is the median over batches (ns per op, or MB/s),
 * with the minimum beside it (metric ns_min). "One rep" is op+flush for latency, and n puts +
 * one flush for bandwidth (n = 64 for small sizes, fewer above 256 KiB so a rep moves 16 MiB).
 *
 * Output: human lines on stdout; rows impl,component,flavor,op,size,metric,value in --csv;
 * rows impl,component,flavor,status,served_by,detail in --status-csv (status: started, ran,
 * refused, op_failed, invalid); "impl flavor phase" lines in --progress before each phase.
 * All three are flushed line by line, so a run that crashes or is killed still leaves what it
 * measured, and the last progress line names the phase that did not finish: run_bench.sh then
 * reruns with --skip for what finished and for that phase.
 */
// The MPI C API only: Open MPI's and MPICH's deprecated C++ bindings need their own library.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <fastrma/fastrma.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sched.h>
#include <time.h>

namespace {

// ---------------------------------------------------------------- options and output

struct Options {
    bool quick = false;
    bool run_mpi = true;
    bool run_fastrma = true;
    bool run_allocate = true;
    bool run_create = true;
    std::string component;  // label only
    std::string csv_path;
    std::string status_path;
    std::string progress_path;
    std::vector<std::string> skips;  // "impl:flavor:op", any field may be "*"
    int thread_level = MPI_THREAD_MULTIPLE;
    double budget_ms = 0;  // per measurement; 0 = default for the mode
    std::string target_wait = "barrier";  // barrier | yield | sleep
};

// The measured operations, in the order they run for each (implementation, flavor).
constexpr const char* kOps[] = {"put", "get", "fetch_and_op", "compare_and_swap", "put_bw"};

constexpr MPI_Aint kDataBytes = MPI_Aint(4) << 20;  // largest put/get: 4 MiB
constexpr MPI_Aint kCounterDisp = kDataBytes;  // int64 for fetch_and_op
constexpr MPI_Aint kCasDisp = kDataBytes + 8;  // int64 for compare_and_swap
constexpr MPI_Aint kWinBytes = kDataBytes + 64;
constexpr int kTarget = 1;
constexpr size_t kCheckBytes = 64 * 1024;  // pattern checked by get at start and by target at end

FILE* g_csv = nullptr;
FILE* g_status = nullptr;
FILE* g_progress = nullptr;
Options g_opt;

// True if a --skip spec names this (impl, flavor, op); op "*" asks whether the whole pair is
// skipped, which only a spec whose op field is "*" answers.
bool skipped(const std::string& impl, const std::string& flavor, const std::string& op) {
    for (const std::string& spec : g_opt.skips) {
        size_t a = spec.find(':'), b = spec.find(':', a == std::string::npos ? a : a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string f[3] = {spec.substr(0, a), spec.substr(a + 1, b - a - 1), spec.substr(b + 1)};
        if ((f[0] == "*" || f[0] == impl) && (f[1] == "*" || f[1] == flavor) &&
            (f[2] == "*" || (op != "*" && f[2] == op)))
            return true;
    }
    return false;
}

// "impl flavor phase" before each phase, flushed: after a crash or a hang the last line names
// the phase that did not finish (run_bench.sh reads it to skip that phase on the next attempt).
void progress(const char* impl, const char* flavor, const char* phase) {
    if (!g_progress) return;
    std::fprintf(g_progress, "%s %s %s\n", impl, flavor, phase);
    std::fflush(g_progress);
}

std::string csv_field(std::string s) {
    for (char& c : s)
        if (c == ',' || c == '\n' || c == '\r') c = (c == ',') ? ';' : ' ';
    return s;
}

void emit_result(const char* impl, const char* flavor, const char* op, size_t size, const char* metric, double value) {
    if (g_csv) {
        std::fprintf(g_csv, "%s,%s,%s,%s,%zu,%s,%.6g\n", impl, g_opt.component.c_str(), flavor, op, size, metric,
                     value);
        std::fflush(g_csv);
    }
}

void emit_status(const char* impl, const char* flavor, const char* status, const std::string& served_by,
                 const std::string& detail) {
    std::printf("STATUS impl=%s component=%s flavor=%s status=%s served_by=%s%s%s\n", impl, g_opt.component.c_str(),
                flavor, status, served_by.c_str(), detail.empty() ? "" : " detail=", detail.c_str());
    std::fflush(stdout);
    if (g_status) {
        std::fprintf(g_status, "%s,%s,%s,%s,%s,%s\n", impl, g_opt.component.c_str(), flavor, status,
                     csv_field(served_by).c_str(), csv_field(detail).c_str());
        std::fflush(g_status);
    }
}

std::string mpi_error_string(int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) return "error " + std::to_string(rc);
    return std::string(msg, size_t(len));
}

std::string size_label(size_t s) {
    char buf[32];
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        std::snprintf(buf, sizeof buf, "%zu MiB", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        std::snprintf(buf, sizeof buf, "%zu KiB", s >> 10);
    else
        std::snprintf(buf, sizeof buf, "%zu B", s);
    return buf;
}

// ---------------------------------------------------------------- the two implementations

// Both structs have the same static members; the templates below use nothing else.
struct MpiImpl {
    using Win = MPI_Win;
    static constexpr const char* name = "mpi";
    static Win null_win() { return MPI_WIN_NULL; }
    static int win_allocate(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* win) {
        return MPI_Win_allocate(size, 1, MPI_INFO_NULL, comm, baseptr, win);
    }
    static int win_create(void* base, MPI_Aint size, MPI_Comm comm, Win* win) {
        return MPI_Win_create(base, size, 1, MPI_INFO_NULL, comm, win);
    }
    static int win_free(Win* win) { return MPI_Win_free(win); }
    static int set_errhandler(Win win, MPI_Errhandler eh) { return MPI_Win_set_errhandler(win, eh); }
    static int get_attr(Win win, int keyval, void* val, int* flag) { return MPI_Win_get_attr(win, keyval, val, flag); }
    static int lock_all(Win win) { return MPI_Win_lock_all(0, win); }
    static int unlock_all(Win win) { return MPI_Win_unlock_all(win); }
    static int flush(int rank, Win win) { return MPI_Win_flush(rank, win); }
    static int put(const void* buf, int count, int rank, MPI_Aint disp, Win win) {
        return MPI_Put(buf, count, MPI_BYTE, rank, disp, count, MPI_BYTE, win);
    }
    static int get(void* buf, int count, int rank, MPI_Aint disp, Win win) {
        return MPI_Get(buf, count, MPI_BYTE, rank, disp, count, MPI_BYTE, win);
    }
    static int fetch_and_op(const void* in, void* out, int rank, MPI_Aint disp, MPI_Op op, Win win) {
        return MPI_Fetch_and_op(in, out, MPI_INT64_T, rank, disp, op, win);
    }
    static int compare_and_swap(const void* in, const void* cmp, void* out, int rank, MPI_Aint disp, Win win) {
        return MPI_Compare_and_swap(in, cmp, out, MPI_INT64_T, rank, disp, win);
    }
    static std::string error_string(int rc) { return mpi_error_string(rc); }

    // Which osc component holds the window. Open MPI 4.1 names it nowhere, but each component
    // answers MPI_Win_get_info with its own keys: sm "alloc_shared_noncontig"/"blocking_fence",
    // rdma "no_locks", ucx and pt2pt none. Under --mca osc <c> only <c> is opened, so there the
    // label is the answer and the keys are a cross-check; in the default run the keys decide.
    static std::string served_by(Win win, std::string* info_keys) {
        MPI_Info info;
        std::string keys;
        bool sm = false, rdma = false;
        if (MPI_Win_get_info(win, &info) == MPI_SUCCESS) {
            int n = 0;
            MPI_Info_get_nkeys(info, &n);
            for (int i = 0; i < n; ++i) {
                char key[MPI_MAX_INFO_KEY + 1];
                char val[256];
                int flag = 0;
                MPI_Info_get_nthkey(info, i, key);
                MPI_Info_get(info, key, int(sizeof val) - 1, val, &flag);
                if (!keys.empty()) keys += ' ';
                keys += std::string(key) + "=" + (flag ? val : "");
                if (!std::strcmp(key, "alloc_shared_noncontig") || !std::strcmp(key, "blocking_fence")) sm = true;
                if (!std::strcmp(key, "no_locks")) rdma = true;
            }
            MPI_Info_free(&info);
        }
        *info_keys = keys.empty() ? "(none)" : keys;
        std::string guess = sm ? "sm" : rdma ? "rdma" : "ucx|pt2pt";
        const std::string c = g_opt.component.substr(0, g_opt.component.find('@'));
        if (c == "sm" || c == "rdma" || c == "ucx" || c == "pt2pt") {
            if (guess.find(c) == std::string::npos) return c + "(info says " + guess + ")";
            return c;
        }
        return guess;
    }
};

struct FastrmaImpl {
    using Win = FRMA_Win;
    static constexpr const char* name = "fastrma";
    static Win null_win() { return FRMA_WIN_NULL; }
    static int win_allocate(MPI_Aint size, MPI_Comm comm, void* baseptr, Win* win) {
        return FRMA_Win_allocate(size, 1, MPI_INFO_NULL, comm, baseptr, win);
    }
    static int win_create(void* base, MPI_Aint size, MPI_Comm comm, Win* win) {
        return FRMA_Win_create(base, size, 1, MPI_INFO_NULL, comm, win);
    }
    static int win_free(Win* win) { return FRMA_Win_free(win); }
    static int set_errhandler(Win win, MPI_Errhandler eh) { return FRMA_Win_set_errhandler(win, eh); }
    static int get_attr(Win win, int keyval, void* val, int* flag) { return FRMA_Win_get_attr(win, keyval, val, flag); }
    static int lock_all(Win win) { return FRMA_Win_lock_all(0, win); }
    static int unlock_all(Win win) { return FRMA_Win_unlock_all(win); }
    static int flush(int rank, Win win) { return FRMA_Win_flush(rank, win); }
    static int put(const void* buf, int count, int rank, MPI_Aint disp, Win win) {
        return FRMA_Put(buf, count, MPI_BYTE, rank, disp, count, MPI_BYTE, win);
    }
    static int get(void* buf, int count, int rank, MPI_Aint disp, Win win) {
        return FRMA_Get(buf, count, MPI_BYTE, rank, disp, count, MPI_BYTE, win);
    }
    static int fetch_and_op(const void* in, void* out, int rank, MPI_Aint disp, MPI_Op op, Win win) {
        return FRMA_Fetch_and_op(in, out, MPI_INT64_T, rank, disp, op, win);
    }
    static int compare_and_swap(const void* in, const void* cmp, void* out, int rank, MPI_Aint disp, Win win) {
        return FRMA_Compare_and_swap(in, cmp, out, MPI_INT64_T, rank, disp, win);
    }
    static std::string error_string(int rc) {
        std::string s = mpi_error_string(rc);
        const char* last = FRMA_Last_error_message();
        if (last && *last) s += std::string(" (") + last + ")";
        return s;
    }
    static std::string served_by(Win, std::string* info_keys) {
        *info_keys = "";
        return "fastrma";
    }
};

// ---------------------------------------------------------------- timing

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Stat {
    int rc = MPI_SUCCESS;
    double median_s = 0;  // seconds per rep
    double min_s = 0;
};

double budget_seconds() {
    if (g_opt.budget_ms > 0) return g_opt.budget_ms * 1e-3;
    return g_opt.quick ? 0.010 : 0.050;
}

// rep() does one repetition and returns an MPI error code. Warm-up runs for a tenth of the
// budget (at least 3 reps) and sizes the batches; a failing rep stops the measurement.
template <class Rep>
Stat measure(Rep&& rep) {
    Stat st;
    const double budget = budget_seconds();
    const int batches = g_opt.quick ? 5 : 11;
    long warm = 0;
    auto t0 = Clock::now();
    while (warm < 3 || (seconds_since(t0) < budget * 0.1 && warm < 1000000)) {
        if ((st.rc = rep()) != MPI_SUCCESS) return st;
        ++warm;
    }
    const double per_rep = seconds_since(t0) / double(warm);
    long reps = long(budget / batches / std::max(per_rep, 1e-9));
    reps = std::clamp(reps, 1L, 2000000L);
    std::vector<double> v;
    v.reserve(size_t(batches));
    for (int b = 0; b < batches; ++b) {
        auto tb = Clock::now();
        for (long i = 0; i < reps; ++i)
            if ((st.rc = rep()) != MPI_SUCCESS) return st;
        v.push_back(seconds_since(tb) / double(reps));
    }
    std::sort(v.begin(), v.end());
    st.median_s = v[v.size() / 2];
    st.min_s = v.front();
    return st;
}

std::vector<size_t> latency_sizes() {
    std::vector<size_t> s;
    for (size_t x = 8; x <= 65536; x *= (g_opt.quick ? 4 : 2)) s.push_back(x);
    if (s.back() != 65536) s.push_back(65536);
    return s;
}

std::vector<size_t> bandwidth_sizes() {
    std::vector<size_t> s;
    for (size_t x = 8; x <= size_t(kDataBytes); x *= (g_opt.quick ? 8 : 2)) s.push_back(x);
    if (g_opt.quick) {  // 8 .. 2 MiB by 8, plus the 1 MiB row the report compares and 4 MiB
        s.push_back(size_t(1) << 20);
        s.push_back(size_t(kDataBytes));
        std::sort(s.begin(), s.end());
        s.erase(std::unique(s.begin(), s.end()), s.end());
    }
    return s;
}

// Puts per bandwidth rep: 64, fewer for large sizes so that one rep moves about 16 MiB.
int puts_per_rep(size_t size) { return int(std::clamp<size_t>((size_t(16) << 20) / size, 4, 64)); }

uint8_t pattern_byte(size_t i, unsigned seed) { return uint8_t((i * 131u + seed * 7u + 1u) & 0xff); }

void print_latency(const char* impl, const char* flavor, const char* op, size_t size, const Stat& st) {
    std::printf("%-8s %-10s %-9s %-17s %9s %10.1f ns  (min %.1f)\n", impl, g_opt.component.c_str(), flavor, op,
                size_label(size).c_str(), st.median_s * 1e9, st.min_s * 1e9);
    std::fflush(stdout);
    emit_result(impl, flavor, op, size, "ns", st.median_s * 1e9);
    emit_result(impl, flavor, op, size, "ns_min", st.min_s * 1e9);
}

void print_bandwidth(const char* impl, const char* flavor, const char* op, size_t size, double bytes_per_rep,
                     const Stat& st) {
    const double mbs = bytes_per_rep / st.median_s / 1e6;
    const double mbs_max = bytes_per_rep / st.min_s / 1e6;
    std::printf("%-8s %-10s %-9s %-17s %9s %10.1f MB/s (max %.1f)\n", impl, g_opt.component.c_str(), flavor, op,
                size_label(size).c_str(), mbs, mbs_max);
    std::fflush(stdout);
    emit_result(impl, flavor, op, size, "MB/s", mbs);
    emit_result(impl, flavor, op, size, "MB/s_max", mbs_max);
}

// ---------------------------------------------------------------- memcpy reference

// The engine's shm put is a memcpy into a shared mapping: this is its ceiling on this machine.
// Same sizes, same number of copies per rep and the same destination offsets as the put test.
void run_memcpy_reference() {
    std::vector<uint8_t> src(static_cast<size_t>(kDataBytes), 0x5a);
    std::vector<uint8_t> dst(static_cast<size_t>(kDataBytes), 0);
    for (size_t size : bandwidth_sizes()) {
        const int n = puts_per_rep(size);
        Stat st = measure([&] {
            for (int i = 0; i < n; ++i) {
                std::memcpy(dst.data() + (size_t(i) * size) % size_t(kDataBytes), src.data(), size);
                asm volatile("" ::: "memory");  // keep the copies
            }
            return MPI_SUCCESS;
        });
        print_bandwidth("memcpy", "-", "memcpy", size, double(n) * double(size), st);
    }
}

// ---------------------------------------------------------------- the benchmark, once

template <class Impl>
struct Suite {
    using Win = typename Impl::Win;
    Win win;
    const char* flavor;
    std::vector<uint8_t>& origin;  // kDataBytes, source of puts
    std::vector<uint8_t>& result;  // kDataBytes, destination of gets
    std::string failures;  // "op size: error; ..."
    int64_t counter_expected = 0;  // the fetch_and_op target counts our +1s

    bool note_failure(const char* op, size_t size, int rc) {
        if (rc == MPI_SUCCESS) return false;
        std::string msg = std::string(op) + " " + size_label(size) + ": " + Impl::error_string(rc);
        std::printf("%-8s %-10s %-9s %-17s FAILED %s\n", Impl::name, g_opt.component.c_str(), flavor, op, msg.c_str());
        std::fflush(stdout);
        if (!failures.empty()) failures += "; ";
        failures += msg;
        return true;
    }

    void latency_put_get(bool is_put) {
        const char* op = is_put ? "put" : "get";
        for (size_t size : latency_sizes()) {
            Stat st = measure([&] {
                int rc = is_put ? Impl::put(origin.data(), int(size), kTarget, 0, win)
                                : Impl::get(result.data(), int(size), kTarget, 0, win);
                return rc != MPI_SUCCESS ? rc : Impl::flush(kTarget, win);
            });
            if (note_failure(op, size, st.rc)) break;
            print_latency(Impl::name, flavor, op, size, st);
        }
    }

    void latency_fetch_and_op() {
        int64_t one = 1, fetched = 0;
        Stat st = measure([&] {
            int rc = Impl::fetch_and_op(&one, &fetched, kTarget, kCounterDisp, MPI_SUM, win);
            if (rc == MPI_SUCCESS) ++counter_expected;  // posted: it will be applied
            return rc != MPI_SUCCESS ? rc : Impl::flush(kTarget, win);
        });
        if (!note_failure("fetch_and_op", 8, st.rc)) print_latency(Impl::name, flavor, "fetch_and_op", 8, st);
    }

    // The word stays 0: every CAS compares equal and swaps 0 for 0, so each one takes the full
    // read-compare-write path without the value drifting.
    void latency_compare_and_swap() {
        int64_t zero = 0, cas_out = -1;
        Stat st = measure([&] {
            int rc = Impl::compare_and_swap(&zero, &zero, &cas_out, kTarget, kCasDisp, win);
            return rc != MPI_SUCCESS ? rc : Impl::flush(kTarget, win);
        });
        if (!note_failure("compare_and_swap", 8, st.rc)) print_latency(Impl::name, flavor, "compare_and_swap", 8, st);
    }

    void bandwidth_put() {
        for (size_t size : bandwidth_sizes()) {
            const int n = puts_per_rep(size);
            Stat st = measure([&] {
                for (int i = 0; i < n; ++i) {
                    int rc = Impl::put(origin.data(), int(size), kTarget,
                                       MPI_Aint((size_t(i) * size) % size_t(kDataBytes)), win);
                    if (rc != MPI_SUCCESS) return rc;
                }
                return Impl::flush(kTarget, win);
            });
            if (note_failure("put_bw", size, st.rc)) break;
            print_bandwidth(Impl::name, flavor, "put_bw", size, double(n) * double(size), st);
        }
    }

    void run_op(const std::string& op) {
        if (op == "put")
            latency_put_get(true);
        else if (op == "get")
            latency_put_get(false);
        else if (op == "fetch_and_op")
            latency_fetch_and_op();
        else if (op == "compare_and_swap")
            latency_compare_and_swap();
        else if (op == "put_bw")
            bandwidth_put();
    }

    // Get the target's start pattern back: a get that returns origin-local or stale bytes fails.
    bool check_initial_pattern() {
        std::memset(result.data(), 0, kCheckBytes);
        int rc = Impl::get(result.data(), int(kCheckBytes), kTarget, 0, win);
        if (rc == MPI_SUCCESS) rc = Impl::flush(kTarget, win);
        if (note_failure("check-get", kCheckBytes, rc)) return false;
        for (size_t i = 0; i < kCheckBytes; ++i)
            if (result[i] != pattern_byte(i, 1)) {
                failures += std::string(failures.empty() ? "" : "; ") +
                            "check-get: get returned wrong bytes from offset " + std::to_string(i);
                std::printf("%-8s %-10s %-9s check-get FAILED at byte %zu\n", Impl::name, g_opt.component.c_str(),
                            flavor, i);
                return false;
            }
        return true;
    }

    // Leave a final pattern and read the counter, for the target to check in its own memory.
    // The counter is read with fetch_and_op(MPI_NO_OP) unless fetch_and_op is being skipped
    // (it crashed in an earlier attempt); then only the put is checked.
    int64_t leave_final_state(bool read_counter) {
        for (size_t i = 0; i < kCheckBytes; ++i) origin[i] = pattern_byte(i, 2);
        int rc = Impl::put(origin.data(), int(kCheckBytes), kTarget, 0, win);
        int64_t dummy = 0, counter = read_counter ? -1 : 0;
        if (rc == MPI_SUCCESS && read_counter)
            rc = Impl::fetch_and_op(&dummy, &counter, kTarget, kCounterDisp, MPI_NO_OP, win);
        if (rc == MPI_SUCCESS) rc = Impl::flush(kTarget, win);
        if (note_failure("check-final", kCheckBytes, rc)) return -1;
        return counter;
    }
};

// The target's wait while the origin measures. "barrier" spins in MPI_Barrier, turning the
// host MPI's progress engine all the time (what osc pt2pt and AM-based rdma need). "yield"
// polls an MPI_Ibarrier and yields between polls, so that progress threads (fastrma's, UCX's
// async thread) get the core. "sleep" polls it every 20 us and sleeps in between, leaving the
// CPU to the origin and to progress threads, at the price of slow host-MPI passive progress.
// Only the target waits differently: mpi_yield_when_idle would make the origin yield inside
// every flush too. (Both ranks use MPI_Ibarrier then: nonblocking and blocking collectives
// never match.)
void idle_in_barrier(int rank) {
    if (g_opt.target_wait == "barrier") {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    const bool sleep = g_opt.target_wait == "sleep";
    int done = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        if (sleep) {
            timespec ts{0, 20000};
            nanosleep(&ts, nullptr);
        } else {
            sched_yield();
        }
    }
}

void append(std::string& list, const std::string& item) {
    if (item.empty()) return;
    if (!list.empty()) list += "; ";
    list += item;
}

// Runs one (implementation, flavor) pair on both ranks. Collective over `comm`; both ranks
// take the same branches, as they parse the same command line.
template <class Impl>
void run_one(MPI_Comm comm, int rank, bool allocate, std::vector<uint8_t>& origin, std::vector<uint8_t>& result) {
    using Win = typename Impl::Win;
    const char* flavor = allocate ? "allocate" : "create";
    if (skipped(Impl::name, flavor, "*")) return;
    if (rank == 0) {
        emit_status(Impl::name, flavor, "started", "", "");
        progress(Impl::name, flavor, "win_create");
    }

    Win win = Impl::null_win();
    uint8_t* base = nullptr;
    void* user_mem = nullptr;
    int rc;
    if (allocate) {
        rc = Impl::win_allocate(kWinBytes, comm, &base, &win);
    } else {
        user_mem = std::malloc(size_t(kWinBytes));
        base = static_cast<uint8_t*>(user_mem);
        rc = Impl::win_create(user_mem, kWinBytes, comm, &win);
    }
    // Both ranks must agree before anything else is collective. On a one-sided failure the
    // window that did come up is leaked rather than freed (freeing it would be collective).
    int ok = rc == MPI_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        std::string detail = rc == MPI_SUCCESS ? "succeeded here" : Impl::error_string(rc);
        if (rank == 1) {
            MPI_Send(detail.c_str(), int(detail.size()) + 1, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            int len = 0;
            MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &len);
            std::string other(size_t(len), '\0');
            MPI_Recv(other.data(), len, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            other.resize(std::strlen(other.c_str()));
            if (other != detail) detail = "rank 0: " + detail + " | rank 1: " + other;
            emit_status(Impl::name, flavor, "refused", "", (allocate ? "Win_allocate: " : "Win_create: ") + detail);
        }
        if (!ok) std::free(user_mem);
        return;
    }
    Impl::set_errhandler(win, MPI_ERRORS_RETURN);

    std::string info_keys;
    const std::string served = Impl::served_by(win, &info_keys);
    std::string notes;  // for the status row
    if (!info_keys.empty()) append(notes, "info: " + info_keys);
    int* flavor_attr = nullptr;
    int flag = 0;
    if (Impl::get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor_attr, &flag) == MPI_SUCCESS && flag) {
        const int want = allocate ? MPI_WIN_FLAVOR_ALLOCATE : MPI_WIN_FLAVOR_CREATE;
        if (*flavor_attr != want) append(notes, "flavor attribute is " + std::to_string(*flavor_attr));
    } else {
        append(notes, "no flavor attribute");
    }

    // Target memory: the check pattern at the start, zeroed atomics.
    if (rank == 1) {
        for (size_t i = 0; i < kCheckBytes; ++i) base[i] = pattern_byte(i, 1);
        std::memset(base + kCounterDisp, 0, 16);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t counter = -1, counter_expected = 0;
    std::string failures, skipped_ops;
    if (rank == 0) {
        Suite<Impl> s{win, flavor, origin, result, "", 0};
        progress(Impl::name, flavor, "lock_all");
        if (!s.note_failure("lock_all", 0, Impl::lock_all(win))) {
            progress(Impl::name, flavor, "check");
            if (s.check_initial_pattern()) {
                for (const char* op : kOps) {
                    if (skipped(Impl::name, flavor, op)) {
                        append(skipped_ops, op);
                        continue;
                    }
                    progress(Impl::name, flavor, op);
                    s.run_op(op);
                }
                progress(Impl::name, flavor, "final");
                counter = s.leave_final_state(!skipped(Impl::name, flavor, "fetch_and_op"));
            }
            progress(Impl::name, flavor, "unlock_all");
            s.note_failure("unlock_all", 0, Impl::unlock_all(win));
        }
        failures = s.failures;
        counter_expected = s.counter_expected;
        progress(Impl::name, flavor, "verify");
    }
    idle_in_barrier(rank);  // rank 1 idles here while rank 0 measures

    // The target checks its own memory: the final pattern and the counter.
    int64_t seen = counter;
    MPI_Bcast(&seen, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int target_ok = 1;
    if (rank == 1 && seen >= 0) {
        for (size_t i = 0; i < kCheckBytes && target_ok; ++i)
            if (base[i] != pattern_byte(i, 2)) target_ok = 0;
        int64_t mine;
        std::memcpy(&mine, base + kCounterDisp, 8);
        if (mine != seen) target_ok = 0;
    }
    MPI_Bcast(&target_ok, 1, MPI_INT, 1, MPI_COMM_WORLD);

    if (rank == 0) {
        std::string detail = failures;
        const char* status = failures.empty() ? "ran" : "op_failed";
        if (counter >= 0 && counter != counter_expected) {
            status = "invalid";
            append(detail, "fetch_and_op counter is " + std::to_string(counter) + ", expected " +
                               std::to_string(counter_expected));
        }
        if (!target_ok) {
            status = "invalid";
            append(detail, "target memory does not hold the final put/counter");
        }
        if (!skipped_ops.empty()) append(detail, "skipped: " + skipped_ops);
        append(detail, notes);
        emit_status(Impl::name, flavor, status, served, detail);
        progress(Impl::name, flavor, "win_free");
    }

    rc = Impl::win_free(&win);
    if (rc != MPI_SUCCESS && rank == 0)
        std::printf("# %s %s: Win_free failed: %s\n", Impl::name, flavor, Impl::error_string(rc).c_str());
    std::free(user_mem);
}

// ---------------------------------------------------------------- main

void usage() {
    std::printf(
        "usage: mpiexec -n 2 rma_bench [--quick] [--impl all|mpi|fastrma] [--flavor all|allocate|create]\n"
        "                 [--component LABEL] [--csv FILE] [--status-csv FILE]\n"
        "                 [--progress FILE] [--skip IMPL:FLAVOR:OP]...\n"
        "                 [--thread multiple|serialized|funneled|single] [--budget-ms MS]\n"
        "                 [--target-wait barrier|yield|sleep]\n"
        "  IMPL mpi|fastrma|memcpy, FLAVOR allocate|create|-, OP put|get|fetch_and_op|\n"
        "  compare_and_swap|put_bw|memcpy; any may be *; IMPL:FLAVOR:* skips the window.\n");
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::string& out) {
            if (i + 1 >= argc) return false;
            out = argv[++i];
            return true;
        };
        std::string v;
        if (a == "--quick") {
            o.quick = true;
        } else if (a == "--impl" && value(v)) {
            o.run_mpi = v == "all" || v == "mpi";
            o.run_fastrma = v == "all" || v == "fastrma";
            if (!o.run_mpi && !o.run_fastrma) return false;
        } else if (a == "--flavor" && value(v)) {
            o.run_allocate = v == "all" || v == "allocate";
            o.run_create = v == "all" || v == "create";
            if (!o.run_allocate && !o.run_create) return false;
        } else if (a == "--component" && value(v)) {
            o.component = v;
        } else if (a == "--csv" && value(v)) {
            o.csv_path = v;
        } else if (a == "--status-csv" && value(v)) {
            o.status_path = v;
        } else if (a == "--progress" && value(v)) {
            o.progress_path = v;
        } else if (a == "--skip" && value(v)) {
            o.skips.push_back(v);
        } else if (a == "--target-wait" && value(v)) {
            if (v != "barrier" && v != "yield" && v != "sleep") return false;
            o.target_wait = v;
        } else if (a == "--budget-ms" && value(v)) {
            o.budget_ms = std::atof(v.c_str());
        } else if (a == "--thread" && value(v)) {
            if (v == "multiple")
                o.thread_level = MPI_THREAD_MULTIPLE;
            else if (v == "serialized")
                o.thread_level = MPI_THREAD_SERIALIZED;
            else if (v == "funneled")
                o.thread_level = MPI_THREAD_FUNNELED;
            else if (v == "single")
                o.thread_level = MPI_THREAD_SINGLE;
            else
                return false;
        } else {
            return false;
        }
    }
    return true;
}

const char* thread_level_name(int l) {
    switch (l) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    }
    return "?";
}

}  // namespace

int main(int argc, char** argv) {
    int provided = -1;
    // Parse before MPI_Init_thread: the requested level is an option.
    const bool args_ok = parse(argc, argv, g_opt);
    MPI_Init_thread(&argc, &argv, g_opt.thread_level, &provided);
    int rank = 0, nranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!args_ok || nranks != 2) {
        if (rank == 0) {
            if (nranks != 2) std::printf("rma_bench needs exactly 2 ranks (got %d)\n", nranks);
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    if (g_opt.component.empty()) {
        const char* env = std::getenv("OMPI_MCA_osc");
        g_opt.component = env && *env ? env : "default";
    }

    // Window creation reports its errors on the communicator: return them, never abort.
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    if (rank == 0) {
        int major = 0, minor = 0, len = 0;
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_version(&major, &minor);
        MPI_Get_library_version(lib, &len);
        if (char* nl = std::strchr(lib, '\n')) *nl = '\0';
        std::printf("# rma_bench: %s; MPI %d.%d; component=%s; mode=%s; target wait=%s\n", lib, major, minor,
                    g_opt.component.c_str(), g_opt.quick ? "quick" : "full", g_opt.target_wait.c_str());
        std::printf("# thread level: requested %s, provided %s%s\n", thread_level_name(g_opt.thread_level),
                    thread_level_name(provided), provided < g_opt.thread_level ? "  (LOWER THAN REQUESTED)" : "");
        std::fflush(stdout);
        if (!g_opt.csv_path.empty()) {
            g_csv = std::fopen(g_opt.csv_path.c_str(), "w");
            if (!g_csv)
                std::perror(g_opt.csv_path.c_str());
            else
                std::fprintf(g_csv, "impl,component,flavor,op,size,metric,value\n");
        }
        if (!g_opt.status_path.empty()) {
            g_status = std::fopen(g_opt.status_path.c_str(), "w");
            if (!g_status)
                std::perror(g_opt.status_path.c_str());
            else
                std::fprintf(g_status, "impl,component,flavor,status,served_by,detail\n");
        }
        if (!g_opt.progress_path.empty()) {
            g_progress = std::fopen(g_opt.progress_path.c_str(), "w");
            if (!g_progress) std::perror(g_opt.progress_path.c_str());
        }
        if (!skipped("memcpy", "-", "memcpy")) {
            progress("memcpy", "-", "memcpy");
            run_memcpy_reference();
        }
    }

    std::vector<uint8_t> origin(static_cast<size_t>(kDataBytes));
    std::vector<uint8_t> result(static_cast<size_t>(kDataBytes));
    for (size_t i = 0; i < origin.size(); ++i) origin[i] = uint8_t(i * 7 + 3);

    for (int f = 0; f < 2; ++f) {
        const bool allocate = f == 0;
        if (allocate ? !g_opt.run_allocate : !g_opt.run_create) continue;
        if (g_opt.run_fastrma) run_one<FastrmaImpl>(comm, rank, allocate, origin, result);
        if (g_opt.run_mpi) run_one<MpiImpl>(comm, rank, allocate, origin, result);
    }

    if (rank == 0) {
        if (g_csv) std::fclose(g_csv);
        if (g_status) std::fclose(g_status);
        progress("-", "-", "done");
        if (g_progress) std::fclose(g_progress);
        std::printf("# done\n");
        std::fflush(stdout);
    }
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
