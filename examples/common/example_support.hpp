// example_support.hpp — what the example applications share: command-line flags with
// --help, a clock, a barrier that yields the CPU, progress lines for long runs, the RESULT
// line that scripts/main.sh reads, and which RMA implementation serves the program.
//
// The examples are plain MPI programs: they include <mpi.h> and nothing of fastrma. The
// same binary runs on the host MPI's own RMA or, with libfastrma-mpi.so preloaded
// (mpiexec -x LD_PRELOAD=...), on fastrma. rma_implementation() tells the two apart by
// looking for fastrma's C API among the symbols of the process, so every output line says
// which one was measured.
//
// Invariants: flags are parsed before MPI_Init (so --help and a bad flag need no MPI), and
// only the first rank of the job prints (rank taken from the launcher's environment before
// MPI_Init, from MPI_COMM_WORLD after).
#ifndef FASTRMA_EXAMPLES_EXAMPLE_SUPPORT_HPP
#define FASTRMA_EXAMPLES_EXAMPLE_SUPPORT_HPP

#include <mpi.h>

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace examples {

// ---- clock and hashing -----------------------------------------------------------------

inline double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// SplitMix64: a cheap, well-mixed hash. Inputs, keys and payloads are functions of their
// global index through it, so any rank can regenerate any value to check it.
inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A value in [-1, 1) from a hash.
inline double unit_double(std::uint64_t h) { return double(h >> 11) * 0x1.0p-52 - 1.0; }

inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- which rank prints -----------------------------------------------------------------

// Before MPI_Init the launcher's environment says which rank this is (Open MPI, MPICH /
// Hydra, Slurm); a program started without a launcher is rank 0.
inline bool first_rank_before_init() {
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
        if (const char* v = std::getenv(var)) return std::atoi(v) == 0;
    }
    return true;
}

inline int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

// ---- command-line flags ------------------------------------------------------------------

// Flags of the form --name VALUE or --name=VALUE; switches --name / --no-name. Each flag
// points at the variable holding its default, so --help prints the defaults.
class Flags {
public:
    Flags(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

    void add(const char* name, long* v, const char* help) { flags_.push_back({name, help, v}); }
    void add(const char* name, int* v, const char* help) { flags_.push_back({name, help, v}); }
    void add(const char* name, double* v, const char* help) { flags_.push_back({name, help, v}); }
    void add(const char* name, std::string* v, const char* help) { flags_.push_back({name, help, v}); }
    void add(const char* name, bool* v, const char* help) { flags_.push_back({name, help, v}); }
    void epilog(std::string text) { epilog_ = std::move(text); }

    // Parses argv. Returns -1 to go on, else the exit status (0 after --help, 2 on error);
    // only the first rank prints.
    int parse(int argc, char** argv) {
        const bool talk = first_rank_before_init();
        for (int i = 1; i < argc; ++i) {
            std::string arg = argv[i];
            if (arg == "-h" || arg == "--help") {
                if (talk) usage(stdout);
                return 0;
            }
            if (arg.rfind("--", 0) != 0) return fail(talk, "unexpected argument '" + arg + "'");
            std::string name = arg.substr(2), value;
            bool has_value = false;
            if (const auto eq = name.find('='); eq != std::string::npos) {
                value = name.substr(eq + 1);
                name.resize(eq);
                has_value = true;
            }
            bool negated = false;
            Flag* f = find(name);
            if (f == nullptr && name.rfind("no-", 0) == 0) {
                f = find(name.substr(3));
                negated = f != nullptr && std::holds_alternative<bool*>(f->target);
                if (!negated) f = nullptr;
            }
            if (f == nullptr) return fail(talk, "unknown flag '--" + name + "'");
            if (auto* b = std::get_if<bool*>(&f->target)) {
                if (has_value) {
                    if (value != "0" && value != "1" && value != "true" && value != "false")
                        return fail(talk, "--" + name + " takes 0/1/true/false");
                    **b = value == "1" || value == "true";
                } else {
                    **b = !negated;
                }
                continue;
            }
            if (!has_value) {
                if (i + 1 >= argc) return fail(talk, "--" + name + " needs a value");
                value = argv[++i];
            }
            if (!assign(*f, value)) return fail(talk, "bad value '" + value + "' for --" + name);
        }
        return -1;
    }

    void usage(std::FILE* out) const {
        std::fprintf(out, "usage: mpiexec -n P %s [flags]\n\n%s\n\nflags:\n", program_.c_str(), summary_.c_str());
        for (const Flag& f : flags_) {
            std::string lhs = "--" + f.name;
            if (!std::holds_alternative<bool*>(f.target)) lhs.append(1, ' ').append(kind(f));
            std::fprintf(out, "  %-26s %s (default: %s)\n", lhs.c_str(), f.help.c_str(), current(f).c_str());
        }
        std::fprintf(out, "  %-26s %s\n", "-h, --help", "this text");
        if (!epilog_.empty()) std::fprintf(out, "\n%s\n", epilog_.c_str());
    }

private:
    struct Flag {
        std::string name, help;
        std::variant<long*, int*, double*, std::string*, bool*> target;
    };

    Flag* find(const std::string& name) {
        for (Flag& f : flags_)
            if (f.name == name) return &f;
        return nullptr;
    }

    // Integers accept a K/M/G suffix (powers of 1024): --slots 1M.
    static bool parse_long(const std::string& s, long* out) {
        if (s.empty()) return false;
        char* end = nullptr;
        long v = std::strtol(s.c_str(), &end, 0);
        std::string rest = end;
        if (rest == "K" || rest == "k")
            v <<= 10;
        else if (rest == "M" || rest == "m")
            v <<= 20;
        else if (rest == "G" || rest == "g")
            v <<= 30;
        else if (!rest.empty())
            return false;
        *out = v;
        return true;
    }

    static bool assign(Flag& f, const std::string& s) {
        long l = 0;
        if (auto* p = std::get_if<long*>(&f.target)) return parse_long(s, *p);
        if (auto* p = std::get_if<int*>(&f.target)) {
            if (!parse_long(s, &l) || l < INT32_MIN || l > INT32_MAX) return false;
            **p = int(l);
            return true;
        }
        if (auto* p = std::get_if<double*>(&f.target)) {
            char* end = nullptr;
            **p = std::strtod(s.c_str(), &end);
            return !s.empty() && *end == '\0';
        }
        if (auto* p = std::get_if<std::string*>(&f.target)) {
            **p = s;
            return true;
        }
        return false;
    }

    static std::string kind(const Flag& f) {
        if (std::holds_alternative<long*>(f.target) || std::holds_alternative<int*>(f.target)) return "N";
        if (std::holds_alternative<double*>(f.target)) return "X";
        return "S";
    }

    static std::string current(const Flag& f) {
        char buf[64];
        if (auto* p = std::get_if<long*>(&f.target)) return std::to_string(**p);
        if (auto* p = std::get_if<int*>(&f.target)) return std::to_string(**p);
        if (auto* p = std::get_if<double*>(&f.target)) {
            std::snprintf(buf, sizeof buf, "%g", **p);
            return buf;
        }
        if (auto* p = std::get_if<std::string*>(&f.target)) return **p;
        return *std::get<bool*>(f.target) ? "on" : "off";
    }

    int fail(bool talk, const std::string& msg) const {
        if (talk) std::fprintf(stderr, "%s: %s (try --help)\n", program_.c_str(), msg.c_str());
        return 2;
    }

    std::string program_, summary_, epilog_;
    std::vector<Flag> flags_;
};

// ---- MPI start and which RMA serves us ---------------------------------------------------

// MPI_Init_thread asking for what the run needs: MPI_THREAD_MULTIPLE with several threads
// per rank, MPI_THREAD_SINGLE otherwise (the host MPI may then take cheaper paths, and osc
// pt2pt, which refuses MPI_THREAD_MULTIPLE, can serve the run). Fails (returns false, after
// printing on the first rank) when threads > 1 and the library gives less.
inline bool init_mpi(int* argc, char*** argv, int threads, const char* program) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, threads > 1 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    if (threads > 1 && provided < MPI_THREAD_MULTIPLE) {
        if (world_rank() == 0)
            std::fprintf(stderr, "%s: --threads %d needs MPI_THREAD_MULTIPLE, the MPI library provides level %d\n",
                         program, threads, provided);
        return false;
    }
    return true;
}

// "fastrma" when libfastrma-mpi.so serves MPI_Win_* (its FRMA_ C API is in the process:
// the preloaded library brings libfastrma along), else "host:<osc component>" where the
// component is what mpiexec --mca osc asked for ("default": Open MPI's own choice).
inline std::string rma_implementation() {
    if (dlsym(RTLD_DEFAULT, "FRMA_Win_allocate") != nullptr) return "fastrma";
    const char* osc = std::getenv("OMPI_MCA_osc");
    std::string c = osc != nullptr && *osc != '\0' ? osc : "default";
    std::replace(c.begin(), c.end(), ',', '+');  // keep RESULT fields free of commas
    return "host:" + c;
}

// A barrier that gives the CPU away while it waits. The examples run oversubscribed (4 ranks
// on 2 cores), and a rank spinning in MPI_Barrier while another checks results or computes
// a reference would steal that rank's core. Used outside the timed regions only.
inline void yield_barrier(MPI_Comm comm) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm, &req);
    int done = 0;
    while (true) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        sched_yield();
    }
}

// ---- a team of threads --------------------------------------------------------------------

// T threads that run one task after another, all of them each time: run(f) calls f(tid) on
// every thread (tid 0 is the caller) and returns when all are done. The workers persist, so
// a task costs two barrier crossings instead of T thread creations (tens of microseconds,
// which would swamp a DSDE round).
class ThreadTeam {
public:
    explicit ThreadTeam(int n) : n_(n), start_(n), done_(n) {
        for (int t = 1; t < n; ++t) workers_.emplace_back([this, t] { work(t); });
    }
    ~ThreadTeam() {
        stop_ = true;
        if (n_ > 1) start_.arrive_and_wait();
        for (auto& w : workers_) w.join();
    }
    ThreadTeam(const ThreadTeam&) = delete;
    ThreadTeam& operator=(const ThreadTeam&) = delete;

    int size() const { return n_; }

    template <class F>
    void run(F&& f) {
        if (n_ == 1) {
            f(0);
            return;
        }
        task_ = std::function<void(int)>(std::forward<F>(f));
        start_.arrive_and_wait();  // publishes task_ to the workers
        task_(0);
        done_.arrive_and_wait();
    }

private:
    void work(int tid) {
        while (true) {
            start_.arrive_and_wait();
            if (stop_) return;
            task_(tid);
            done_.arrive_and_wait();
        }
    }

    int n_;
    std::barrier<> start_, done_;
    std::function<void(int)> task_;
    bool stop_ = false;  // written before a start_ crossing, read after it
    std::vector<std::thread> workers_;
};

// ---- progress and results -------------------------------------------------------------

// Prints "<app>: <what> i/n (t s)" on stderr, at most once a second and only after the
// first second, so short runs stay quiet and long runs show they are alive.
class Progress {
public:
    Progress(std::string app, bool enabled) : app_(std::move(app)), enabled_(enabled), start_(now_s()), last_(start_) {}
    void tick(const char* what, long done, long total) {
        if (!enabled_) return;
        const double t = now_s();
        if (t - last_ < 1.0) return;
        last_ = t;
        std::fprintf(stderr, "%s: %s %ld/%ld (%.1f s)\n", app_.c_str(), what, done, total, t - start_);
        std::fflush(stderr);
    }

private:
    std::string app_;
    bool enabled_;
    double start_, last_;
};

// The one machine-readable line of a run: "RESULT key=value key=value ...". scripts/main.sh
// and the ctest registrations read it; values never contain spaces.
class Result {
public:
    explicit Result(const std::string& app) { add("app", app); }
    Result& add(const std::string& key, const std::string& value) {
        line_ += " " + key + "=" + value;
        return *this;
    }
    Result& add(const std::string& key, long value) { return add(key, std::to_string(value)); }
    Result& add(const std::string& key, int value) { return add(key, std::to_string(value)); }
    Result& add(const std::string& key, double value) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", value);
        return add(key, std::string(buf));
    }
    void print() const {
        std::printf("RESULT%s\n", line_.c_str());
        std::fflush(stdout);
    }

private:
    std::string line_;
};

// MPI calls in the examples use the default handler (MPI_ERRORS_ARE_FATAL): a failed call
// aborts the job with the library's message, which is what a demo should do.

}  // namespace examples

#endif  // FASTRMA_EXAMPLES_EXAMPLE_SUPPORT_HPP
