// fft3d — a distributed 3D FFT (complex to complex, forward) with slab decomposition and a
// global transpose made of one-sided puts, the motif of the foMPI paper's FFT evaluation.
//
// Data flow for an NX x NY x NZ array on P ranks (NX and NY divisible by P):
//   1. rank r owns the x-planes [r*NX/P, (r+1)*NX/P) of the input, A[x][y][z];
//   2. each plane gets a 2D FFT over (y, z) (FFTW);
//   3. the transpose: plane x holds, for every rank q, the rows y in q's y-range as one
//      contiguous block; it goes with ONE MPI_Put into q's window B at B[x][0..NY/P)[z],
//      where it is contiguous too (B is x-major, so no packing on either side);
//   4. after the epoch completes, each rank copies B, one ky at a time, into its result
//      C[ky][x][z] and runs the 1D FFTs along x there; it then holds X[kx][ky][kz] for its
//      ky-range as C[ky][kx][kz]. (Transforming B in place would make the compute time depend
//      on where the RMA library put the window: FFTW picks other codelets for an 8-byte
//      aligned base than for a page-aligned one, and the long strides cost TLB misses.)
// Overlap: with --overlap on, the puts of plane k are issued right after its 2D FFT and the
// rank goes on with plane k+1 while they travel; the epoch is completed once at the end.
// With --overlap off, every plane is transformed first and all puts are issued afterwards.
// --overlap both (default) times the two schedules alternately in one run.
// Synchronization (--sync): lock (one MPI_Win_lock_all for the run; per transform
// MPI_Win_flush_all + MPI_Barrier + MPI_Win_sync), fence (MPI_Win_fence around the puts),
// or pscw (post/start to every rank, complete/wait).
// Check: rank 0 computes the whole transform with one serial FFTW plan on the same input
// (generated from a hash of the global index, so every rank can make its part) and compares
// every rank's result; the run fails if max|error| / max|X| exceeds --tol.
//
// Plain MPI (only <mpi.h>): the same binary measures the host MPI's RMA or, preloaded with
// libfastrma-mpi.so, fastrma.
#include <fftw3.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/example_support.hpp"

namespace {

using examples::now_s;
using cplx = std::complex<double>;

struct Config {
    long n = 64;  // cubic size unless --nx/--ny/--nz are given
    long nx = 0, ny = 0, nz = 0;
    int iters = 5;
    int warmup = 1;
    int threads = 1;
    std::string sync = "lock";
    std::string overlap = "both";
    std::string win = "allocate";
    bool check = true;
    double tol = 1e-10;
    bool measure = false;
    long seed = 12345;
};

// Timings of one transform on one rank (seconds).
struct Timing {
    double total = 0, fft2d_put = 0, put = 0, complete = 0, fft1d = 0;
};

class Fft3d {
public:
    Fft3d(const Config& cfg, int rank, int nranks)
        : cfg_(cfg),
          rank_(rank),
          p_(nranks),
          nx_(cfg.nx),
          ny_(cfg.ny),
          nz_(cfg.nz),
          nxl_(nx_ / p_),
          nyl_(ny_ / p_),
          x0_(rank * nxl_) {
        const std::size_t a_elems = std::size_t(nxl_ * ny_ * nz_);
        const std::size_t b_elems = std::size_t(nx_ * nyl_ * nz_);
        a_ = static_cast<cplx*>(fftw_malloc(a_elems * sizeof(cplx)));
        c_ = static_cast<cplx*>(fftw_malloc(b_elems * sizeof(cplx)));
        const MPI_Aint b_bytes = MPI_Aint(b_elems * sizeof(cplx));
        if (cfg.win == "create") {
            b_owned_ = static_cast<cplx*>(fftw_malloc(b_elems * sizeof(cplx)));
            b_ = b_owned_;
            MPI_Win_create(b_, b_bytes, int(sizeof(cplx)), MPI_INFO_NULL, MPI_COMM_WORLD, &win_);
        } else {
            MPI_Win_allocate(b_bytes, int(sizeof(cplx)), MPI_INFO_NULL, MPI_COMM_WORLD, &b_, &win_);
        }
        std::fill(b_, b_ + b_elems, cplx(0, 0));
        MPI_Comm_group(MPI_COMM_WORLD, &all_);
        make_plans();
        if (cfg_.sync == "lock") MPI_Win_lock_all(0, win_);
    }

    ~Fft3d() {
        if (cfg_.sync == "lock") MPI_Win_unlock_all(win_);
        fftw_destroy_plan(plan2d_);
        fftw_destroy_plan(plan1d_);
        MPI_Group_free(&all_);
        MPI_Win_free(&win_);
        fftw_free(b_owned_);
        fftw_free(c_);
        fftw_free(a_);
    }

    // The input of the transform, A[x][y][z] for the local x-planes, and an empty B, so
    // that a put that never arrives shows in the check (not timed).
    void fill_input() {
        std::fill(b_, b_ + nx_ * nyl_ * nz_, cplx(0, 0));
        if (cfg_.sync == "lock") MPI_Win_sync(win_);  // our stores, before the peers' puts
        for (long xl = 0; xl < nxl_; ++xl)
            for (long y = 0; y < ny_; ++y)
                for (long z = 0; z < nz_; ++z) a_[(xl * ny_ + y) * nz_ + z] = input_value(cfg_, x0_ + xl, y, z);
    }

    static cplx input_value(const Config& cfg, long x, long y, long z) {
        const std::uint64_t idx = std::uint64_t((x * cfg.ny + y) * cfg.nz + z);
        const std::uint64_t h = examples::splitmix64(std::uint64_t(cfg.seed) * 0x100000001b3ULL + idx);
        return {examples::unit_double(h), examples::unit_double(examples::splitmix64(h))};
    }

    // One forward transform; on return this rank's C holds X[kx][ky][kz] for its ky-range.
    // Every rank must have finished reading B of the previous transform (the caller's
    // barrier), since the puts overwrite it.
    Timing transform(bool overlap) {
        Timing t;
        const double t0 = now_s();
        open_epoch();
        std::vector<double> put_time(std::size_t(cfg_.threads), 0.0);
        run_threads(cfg_.threads, [&](int tid) {
            double& pt = put_time[std::size_t(tid)];
            if (overlap) {
                for (long xl = tid; xl < nxl_; xl += cfg_.threads) {
                    fft_plane(xl);
                    put_plane(xl, pt);  // travels while the next plane is transformed
                }
            } else {
                for (long xl = tid; xl < nxl_; xl += cfg_.threads) fft_plane(xl);
                for (long xl = tid; xl < nxl_; xl += cfg_.threads) put_plane(xl, pt);
            }
        });
        const double t1 = now_s();
        close_epoch();
        const double t2 = now_s();
        run_threads(cfg_.threads, [&](int tid) {
            for (long yl = tid; yl < nyl_; yl += cfg_.threads) {
                cplx* dst = c_ + yl * nx_ * nz_;
                for (long x = 0; x < nx_; ++x) std::copy_n(b_ + (x * nyl_ + yl) * nz_, nz_, dst + x * nz_);
                fftw_execute_dft(plan1d_, out_block(yl), out_block(yl));
            }
        });
        const double t3 = now_s();
        t.fft2d_put = t1 - t0;
        t.complete = t2 - t1;
        t.fft1d = t3 - t2;
        t.total = t3 - t0;
        for (double v : put_time) t.put += v;
        t.put /= cfg_.threads;
        return t;
    }

    // Max |C - X| and max |X| over this rank's part, against the serial reference X (rank 0
    // holds it; the others send their C there). Collective.
    void compare(const std::vector<cplx>& ref, double* max_err, double* max_ref) {
        *max_err = 0;
        *max_ref = 0;
        const std::size_t c_elems = std::size_t(nx_ * nyl_ * nz_);
        if (rank_ != 0) {
            send_large(c_, c_elems, 0);
            return;
        }
        std::vector<cplx> part(c_elems);
        for (int q = 0; q < p_; ++q) {
            const cplx* cq = c_;
            if (q != 0) {
                recv_large(part.data(), c_elems, q);
                cq = part.data();
            }
            for (long yl = 0; yl < nyl_; ++yl)
                for (long x = 0; x < nx_; ++x)
                    for (long z = 0; z < nz_; ++z) {
                        const cplx r = ref[std::size_t((x * ny_ + q * nyl_ + yl) * nz_ + z)];
                        const cplx v = cq[std::size_t((yl * nx_ + x) * nz_ + z)];
                        *max_err = std::max(*max_err, std::abs(v - r));
                        *max_ref = std::max(*max_ref, std::abs(r));
                    }
        }
    }

    // The serial transform of the whole input (rank 0, for the check).
    static std::vector<cplx> reference(const Config& cfg) {
        std::vector<cplx> x(std::size_t(cfg.nx * cfg.ny * cfg.nz));
        for (long i = 0; i < cfg.nx; ++i)
            for (long j = 0; j < cfg.ny; ++j)
                for (long k = 0; k < cfg.nz; ++k)
                    x[std::size_t((i * cfg.ny + j) * cfg.nz + k)] = input_value(cfg, i, j, k);
        auto* data = reinterpret_cast<fftw_complex*>(x.data());
        fftw_plan plan =
            fftw_plan_dft_3d(int(cfg.nx), int(cfg.ny), int(cfg.nz), data, data, FFTW_FORWARD, FFTW_ESTIMATE);
        fftw_execute(plan);
        fftw_destroy_plan(plan);
        return x;
    }

private:
    fftw_complex* plane(long xl) const { return reinterpret_cast<fftw_complex*>(a_ + xl * ny_ * nz_); }
    fftw_complex* out_block(long yl) const { return reinterpret_cast<fftw_complex*>(c_ + yl * nx_ * nz_); }

    // FFTW executes a plan on other arrays only if they have the planning array's
    // alignment; where some plane or column does not, the plan is made unaligned.
    void make_plans() {
        const unsigned flags = cfg_.measure ? FFTW_MEASURE : FFTW_ESTIMATE;
        unsigned f2 = flags, f1 = flags;
        for (long xl = 0; xl < nxl_; ++xl)
            if (fftw_alignment_of(reinterpret_cast<double*>(plane(xl))) !=
                fftw_alignment_of(reinterpret_cast<double*>(plane(0))))
                f2 |= FFTW_UNALIGNED;
        for (long yl = 0; yl < nyl_; ++yl)
            if (fftw_alignment_of(reinterpret_cast<double*>(out_block(yl))) !=
                fftw_alignment_of(reinterpret_cast<double*>(out_block(0))))
                f1 |= FFTW_UNALIGNED;
        // FFTW_MEASURE overwrites the arrays while planning: plan before any data is there.
        plan2d_ = fftw_plan_dft_2d(int(ny_), int(nz_), plane(0), plane(0), FFTW_FORWARD, f2);
        // The columns of one C[ky] block: NZ transforms of length NX, stride NZ between
        // elements, 1 between transforms.
        const int n[1] = {int(nx_)};
        const int stride = int(nz_);
        plan1d_ = fftw_plan_many_dft(1, n, int(nz_), out_block(0), nullptr, stride, 1, out_block(0), nullptr, stride, 1,
                                     FFTW_FORWARD, f1);
        if (plan2d_ == nullptr || plan1d_ == nullptr) {
            std::fprintf(stderr, "fft3d: FFTW could not make a plan\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    void fft_plane(long xl) { fftw_execute_dft(plan2d_, plane(xl), plane(xl)); }

    // Plane xl to every rank q: rows [q*NYL, (q+1)*NYL) of the plane, contiguous here, land
    // contiguous at B_q[x0+xl][0][0]. One put per (plane, rank), our own rank included.
    void put_plane(long xl, double& put_time) {
        const double t = now_s();
        const long block = nyl_ * nz_;
        const MPI_Aint disp = MPI_Aint((x0_ + xl) * block);
        for (int i = 0; i < p_; ++i) {
            const int q = (rank_ + 1 + i) % p_;  // start with the next rank: spread the load
            const cplx* src = a_ + (xl * ny_ + q * nyl_) * nz_;
            MPI_Put(src, int(2 * block), MPI_DOUBLE, q, disp, int(2 * block), MPI_DOUBLE, win_);
        }
        put_time += now_s() - t;
    }

    void open_epoch() {
        if (cfg_.sync == "fence") {
            MPI_Win_fence(MPI_MODE_NOPRECEDE, win_);
        } else if (cfg_.sync == "pscw") {
            MPI_Win_post(all_, 0, win_);
            MPI_Win_start(all_, 0, win_);
        }
    }

    void close_epoch() {
        if (cfg_.sync == "fence") {
            MPI_Win_fence(MPI_MODE_NOSUCCEED | MPI_MODE_NOSTORE, win_);
        } else if (cfg_.sync == "pscw") {
            MPI_Win_complete(win_);
            MPI_Win_wait(win_);
        } else {
            MPI_Win_flush_all(win_);  // our puts are in place at every target
            MPI_Barrier(MPI_COMM_WORLD);  // ... and everyone's are
            MPI_Win_sync(win_);  // then our loads see them
        }
    }

    template <class F>
    static void run_threads(int n, F&& body) {
        if (n == 1) {
            body(0);
            return;
        }
        std::vector<std::thread> pool;
        for (int t = 1; t < n; ++t) pool.emplace_back(body, t);
        body(0);
        for (auto& th : pool) th.join();
    }

    // Point-to-point in chunks below INT_MAX doubles (the check only).
    static void send_large(const cplx* p, std::size_t n, int to) {
        const std::size_t chunk = std::size_t(1) << 26;
        for (std::size_t off = 0; off < n; off += chunk)
            MPI_Send(p + off, int(2 * std::min(chunk, n - off)), MPI_DOUBLE, to, 7, MPI_COMM_WORLD);
    }
    static void recv_large(cplx* p, std::size_t n, int from) {
        const std::size_t chunk = std::size_t(1) << 26;
        for (std::size_t off = 0; off < n; off += chunk)
            MPI_Recv(p + off, int(2 * std::min(chunk, n - off)), MPI_DOUBLE, from, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }

    const Config& cfg_;
    int rank_, p_;
    long nx_, ny_, nz_, nxl_, nyl_, x0_;
    cplx* a_ = nullptr;
    cplx* b_ = nullptr;
    cplx* b_owned_ = nullptr;
    cplx* c_ = nullptr;  // the result, C[ky][kx][kz]
    MPI_Win win_ = MPI_WIN_NULL;
    MPI_Group all_ = MPI_GROUP_NULL;
    fftw_plan plan2d_ = nullptr, plan1d_ = nullptr;
};

// Per schedule: the per-transform timings, each the max over ranks.
struct Series {
    std::vector<Timing> runs;
    double median_total() const {
        std::vector<double> v;
        for (const Timing& t : runs) v.push_back(t.total);
        return examples::median(v);
    }
    double median_of(double Timing::*field) const {
        std::vector<double> v;
        for (const Timing& t : runs) v.push_back(t.*field);
        return examples::median(v);
    }
};

Timing max_over_ranks(const Timing& t) {
    double in[5] = {t.total, t.fft2d_put, t.put, t.complete, t.fft1d}, out[5];
    MPI_Allreduce(in, out, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return {out[0], out[1], out[2], out[3], out[4]};
}

}  // namespace

int main(int argc, char** argv) {
    Config cfg;
    examples::Flags flags("fft3d",
                          "Distributed 3D FFT (slab decomposition); the global transpose is one MPI_Put per\n"
                          "(plane, rank) into the target's window, overlapped with the next plane's 2D FFT.\n"
                          "Checked against a serial FFTW transform of the same input.");
    flags.add("n", &cfg.n, "global size N of an N x N x N transform");
    flags.add("nx", &cfg.nx, "global size in x (0: N); divisible by the number of ranks");
    flags.add("ny", &cfg.ny, "global size in y (0: N); divisible by the number of ranks");
    flags.add("nz", &cfg.nz, "global size in z (0: N)");
    flags.add("iters", &cfg.iters, "timed transforms per schedule");
    flags.add("warmup", &cfg.warmup, "untimed transforms per schedule first");
    flags.add("threads", &cfg.threads, "threads per rank (planes split between them; MPI_THREAD_MULTIPLE)");
    flags.add("sync", &cfg.sync, "transpose synchronization: lock (lock_all + flush_all), fence, pscw");
    flags.add("overlap", &cfg.overlap, "on (put plane k, FFT plane k+1), off (all FFTs, then all puts), both");
    flags.add("win", &cfg.win, "window flavor: allocate (MPI_Win_allocate) or create (MPI_Win_create)");
    flags.add("check", &cfg.check, "compare with a serial FFTW transform on rank 0");
    flags.add("tol", &cfg.tol, "largest accepted max|error| / max|X|");
    flags.add("measure", &cfg.measure, "plan with FFTW_MEASURE instead of FFTW_ESTIMATE");
    flags.add("seed", &cfg.seed, "seed of the input");
    flags.epilog(
        "Output: a summary, then one line 'RESULT app=fft3d ... time_s=T check=PASS|FAIL'.\n"
        "Exit status 0 only when the check passes.");
    if (int rc = flags.parse(argc, argv); rc >= 0) return rc;
    if (cfg.nx == 0) cfg.nx = cfg.n;
    if (cfg.ny == 0) cfg.ny = cfg.n;
    if (cfg.nz == 0) cfg.nz = cfg.n;

    if (!examples::init_mpi(&argc, &argv, cfg.threads, "fft3d")) {
        MPI_Finalize();
        return 2;
    }
    int rank = 0, p = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    auto usage_error = [&](const std::string& msg) {
        if (rank == 0) std::fprintf(stderr, "fft3d: %s\n", msg.c_str());
        MPI_Finalize();
        return 2;
    };
    if (cfg.nx <= 0 || cfg.ny <= 0 || cfg.nz <= 0 || cfg.nx % p != 0 || cfg.ny % p != 0)
        return usage_error("nx and ny must be positive multiples of the number of ranks (" + std::to_string(p) + ")");
    if ((cfg.ny / p) * cfg.nz > (1L << 29) || cfg.iters < 1 || cfg.warmup < 0 || cfg.threads < 1)
        return usage_error("bad --iters/--warmup/--threads or too large a transform");
    if (cfg.sync != "lock" && cfg.sync != "fence" && cfg.sync != "pscw")
        return usage_error("--sync is lock, fence or pscw");
    if (cfg.overlap != "on" && cfg.overlap != "off" && cfg.overlap != "both")
        return usage_error("--overlap is on, off or both");
    if (cfg.win != "allocate" && cfg.win != "create") return usage_error("--win is allocate or create");

    const std::string impl = examples::rma_implementation();
    const double gib = double(cfg.nx * cfg.ny * cfg.nz) * sizeof(cplx) / double(1 << 30);
    if (rank == 0)
        std::printf("fft3d: %ldx%ldx%ld complex doubles (%.2f GiB) on %d ranks x %d threads, sync=%s, win=%s, rma=%s\n",
                    cfg.nx, cfg.ny, cfg.nz, gib, p, cfg.threads, cfg.sync.c_str(), cfg.win.c_str(), impl.c_str());

    // The reference first, while the other ranks wait without spinning.
    std::vector<cplx> ref;
    double t_ref = 0;
    if (cfg.check && rank == 0) {
        const double t = now_s();
        ref = Fft3d::reference(cfg);
        t_ref = now_s() - t;
    }
    examples::yield_barrier(MPI_COMM_WORLD);

    std::vector<bool> schedules;  // overlap on/off, interleaved so drift hits both alike
    if (cfg.overlap != "off") schedules.push_back(true);
    if (cfg.overlap != "on") schedules.push_back(false);

    bool ok = true;
    double worst_rel = 0;
    Series series[2];  // [0]: overlap on, [1]: off
    {
        Fft3d fft(cfg, rank, p);
        examples::Progress progress("fft3d", rank == 0);
        const int total = cfg.warmup + cfg.iters;
        for (int it = 0; it < total; ++it) {
            for (bool overlap : schedules) {
                fft.fill_input();
                examples::yield_barrier(MPI_COMM_WORLD);
                const Timing t = max_over_ranks(fft.transform(overlap));
                if (it >= cfg.warmup) series[overlap ? 0 : 1].runs.push_back(t);
                // The last transform of each schedule is checked.
                if (cfg.check && it == total - 1) {
                    examples::yield_barrier(MPI_COMM_WORLD);
                    double err = 0, mref = 0;
                    fft.compare(ref, &err, &mref);
                    double rel = mref > 0 ? err / mref : err;
                    MPI_Bcast(&rel, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // every rank exits alike
                    worst_rel = std::max(worst_rel, rel);
                    if (!(rel <= cfg.tol)) ok = false;
                    if (rank == 0)
                        std::printf("  check (overlap %s): max|err| = %.3g, max|X| = %.3g, relative %.3g (tol %.1g)\n",
                                    overlap ? "on" : "off", err, mref, rel, cfg.tol);
                }
            }
            progress.tick("transform", it + 1, total);
        }
    }

    if (rank == 0) {
        if (cfg.check) std::printf("  serial FFTW reference: %.3f s\n", t_ref);
        const double moved = double(cfg.nx * cfg.ny * cfg.nz) * sizeof(cplx);  // bytes through the transpose
        for (int s = 0; s < 2; ++s) {
            if (series[s].runs.empty()) continue;
            const Series& ser = series[s];
            std::printf(
                "  overlap %-3s: %.4f s per transform (median of %zu; 2D FFT+put %.4f, in MPI_Put %.4f, "
                "complete %.4f, unpack+1D FFT %.4f), transpose %.2f GB/s\n",
                s == 0 ? "on" : "off", ser.median_total(), ser.runs.size(), ser.median_of(&Timing::fft2d_put),
                ser.median_of(&Timing::put), ser.median_of(&Timing::complete), ser.median_of(&Timing::fft1d),
                moved / (ser.median_of(&Timing::put) + ser.median_of(&Timing::complete)) / 1e9);
        }
        if (!series[0].runs.empty() && !series[1].runs.empty())
            std::printf("  overlap gain: %.1f %%\n",
                        100.0 * (1.0 - series[0].median_total() / series[1].median_total()));
        examples::Result r("fft3d");
        r.add("size", std::to_string(cfg.nx) + "x" + std::to_string(cfg.ny) + "x" + std::to_string(cfg.nz))
            .add("ranks", p)
            .add("threads", cfg.threads)
            .add("sync", cfg.sync)
            .add("win", cfg.win)
            .add("rma", impl);
        // time_s: the overlapped schedule when it ran, else the other one.
        const Series& main_series = series[0].runs.empty() ? series[1] : series[0];
        r.add("time_s", main_series.median_total());
        if (!series[0].runs.empty()) r.add("time_overlap_s", series[0].median_total());
        if (!series[1].runs.empty()) r.add("time_nooverlap_s", series[1].median_total());
        r.add("put_s", main_series.median_of(&Timing::put)).add("complete_s", main_series.median_of(&Timing::complete));
        if (cfg.check) r.add("rel_err", worst_rel);
        r.add("check", cfg.check ? (ok ? "PASS" : "FAIL") : "SKIPPED");
        r.print();
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
