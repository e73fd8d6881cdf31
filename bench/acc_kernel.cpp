// acc_kernel.cpp — the accumulate kernels alone (src/ops/reduce.cpp), one process, no MPI_Init:
// reduce_atomic() (lock-free per element, the path of an accumulate to mapped memory; as it
// runs, then with its 16-byte block way switched off) and reduce() (plain, what runs under the
// stripe lock) over a 1 MiB target, in ns per element and MB/s of target data. Beside them,
// floors measured the same way: a plain loop (what a locked implementation runs), a bare
// `lock cmpxchg` / `lock add` per 8-byte word (the least a one-element-at-a-time atomic update
// costs), a bare `lock cmpxchg16b` per two doubles (the least the block way costs) and a
// relaxed store (the cmpxchg16b floor is measured on x86-64 only). docs/accumulate.md quotes it.
//
// Method: every case resets the target from a pristine copy (untimed), then times one call over
// the whole 1 MiB; --reps repetitions (default 41), median and fastest reported. The target is
// warm in cache, as after a previous accumulate; the machine is noisy, so compare medians of
// runs made back to back.
//
// usage: acc_kernel [--reps N] [--bytes B] [--filter SUBSTRING]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/reduce.hpp"

using fastrma::detail::lookup_type;
using fastrma::detail::reduce;
using fastrma::detail::reduce_atomic;
using fastrma::detail::set_wide_cas;
using fastrma::detail::TypeInfo;

namespace {

struct Result {
    double med_ns, min_ns;
};

// Times body() reps times on a target reset from `init` before each rep.
Result time_it(int reps, std::vector<unsigned char>& dst, const std::vector<unsigned char>& init, size_t n,
               const std::function<void()>& body) {
    std::vector<double> ns;
    ns.reserve(reps);
    for (int r = 0; r < reps + 2; ++r) {  // two warm-up reps
        std::memcpy(dst.data(), init.data(), init.size());
        auto t0 = std::chrono::steady_clock::now();
        body();
        auto t1 = std::chrono::steady_clock::now();
        if (r >= 2) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(n));
    }
    std::sort(ns.begin(), ns.end());
    return {ns[ns.size() / 2], ns.front()};
}

template <class T>
void fill(std::vector<unsigned char>& buf, size_t n, T (*f)(size_t)) {
    for (size_t i = 0; i < n; ++i) {
        T v = f(i);
        std::memcpy(buf.data() + i * sizeof(T), &v, sizeof(T));
    }
}

struct Case {
    const char* name;
    MPI_Op op;
    MPI_Datatype type;
    bool result;  // Get_accumulate (old values wanted) vs Accumulate
    // Fills dst and src (n elements of the type's extent).
    std::function<void(std::vector<unsigned char>&, std::vector<unsigned char>&, size_t)> init;
};

}  // namespace

int main(int argc, char** argv) {
    int reps = 41;
    size_t bytes = size_t{1} << 20;
    std::string filter;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--reps" && i + 1 < argc)
            reps = std::atoi(argv[++i]);
        else if (a == "--bytes" && i + 1 < argc)
            bytes = std::strtoull(argv[++i], nullptr, 0);
        else if (a == "--filter" && i + 1 < argc)
            filter = argv[++i];
        else {
            std::fprintf(stderr, "usage: acc_kernel [--reps N] [--bytes B] [--filter SUBSTRING]\n");
            return 2;
        }
    }
    reps = std::max(reps, 1);

    auto dbl = [](double (*d)(size_t), double (*s)(size_t)) {
        return [d, s](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
            fill<double>(dst, n, d);
            fill<double>(src, n, s);
        };
    };
    auto i64 = [](int64_t (*d)(size_t), int64_t (*s)(size_t)) {
        return [d, s](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
            fill<int64_t>(dst, n, d);
            fill<int64_t>(src, n, s);
        };
    };
    auto i32 = [](int32_t (*d)(size_t), int32_t (*s)(size_t)) {
        return [d, s](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
            fill<int32_t>(dst, n, d);
            fill<int32_t>(src, n, s);
        };
    };
    auto u8 = [](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            dst[i] = static_cast<unsigned char>(0xf0 | i);
            src[i] = static_cast<unsigned char>(0x3c ^ i);
        }
    };
    auto pairs = [](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            int32_t d[2] = {int32_t(i % 100), int32_t(i)}, s[2] = {int32_t((i * 7) % 100), int32_t(i + 1)};
            std::memcpy(dst.data() + 8 * i, d, 8);
            std::memcpy(src.data() + 8 * i, s, 8);
        }
    };
    auto ramp = [](size_t i) { return double(i % 1000) * 0.5; };
    auto small = [](size_t i) { return 1.0 + double(i % 7); };
    auto iramp = [](size_t i) { return int64_t(i * 3); };
    auto ione = [](size_t i) { return int64_t(i & 15); };
    auto big32 = [](size_t i) { return int32_t(1000000 + int32_t(i % 1000)); };
    auto small32 = [](size_t i) { return int32_t(i % 1000); };

    const std::vector<Case> cases = {
        {"SUM double", MPI_SUM, MPI_DOUBLE, false, dbl(ramp, small)},
        {"SUM double +old", MPI_SUM, MPI_DOUBLE, true, dbl(ramp, small)},
        {"PROD double", MPI_PROD, MPI_DOUBLE, false, dbl(small, small)},
        {"MIN double (dst wins)", MPI_MIN, MPI_DOUBLE, false, dbl(ramp, [](size_t i) { return 1e9 + double(i); })},
        {"MIN double (src wins)", MPI_MIN, MPI_DOUBLE, false, dbl(ramp, [](size_t i) { return -1.0 - double(i); })},
        {"REPLACE double", MPI_REPLACE, MPI_DOUBLE, false, dbl(ramp, small)},
        {"REPLACE double +old", MPI_REPLACE, MPI_DOUBLE, true, dbl(ramp, small)},
        {"NO_OP double +old", MPI_NO_OP, MPI_DOUBLE, true, dbl(ramp, small)},
        {"SUM int64", MPI_SUM, MPI_INT64_T, false, i64(iramp, ione)},
        {"SUM int64 +old", MPI_SUM, MPI_INT64_T, true, i64(iramp, ione)},
        {"BOR int64", MPI_BOR, MPI_INT64_T, false, i64(iramp, ione)},
        {"BXOR int64 +old", MPI_BXOR, MPI_INT64_T, true, i64(iramp, ione)},
        {"SUM int32", MPI_SUM, MPI_INT32_T, false, i32(small32, small32)},
        {"MAX int32 (dst wins)", MPI_MAX, MPI_INT32_T, false, i32(big32, small32)},
        {"MAX int32 (src wins)", MPI_MAX, MPI_INT32_T, false, i32(small32, big32)},
        {"MAX int32 (src wins) +old", MPI_MAX, MPI_INT32_T, true, i32(small32, big32)},
        {"LAND int32", MPI_LAND, MPI_INT32_T, false, i32(small32, small32)},
        {"BAND uint8", MPI_BAND, MPI_UINT8_T, false, u8},
        {"SUM uint8", MPI_SUM, MPI_UINT8_T, false, u8},
        {"MAXLOC 2INT", MPI_MAXLOC, MPI_2INT, false, pairs},
        {"SUM float complex", MPI_SUM, MPI_C_FLOAT_COMPLEX, false,
         [](std::vector<unsigned char>& dst, std::vector<unsigned char>& src, size_t n) {
             for (size_t i = 0; i < 2 * n; ++i) {
                 float d = float(i % 100), s = 0.25f;
                 std::memcpy(dst.data() + 4 * i, &d, 4);
                 std::memcpy(src.data() + 4 * i, &s, 4);
             }
         }},
    };

    std::printf("# acc_kernel: %zu-byte target, %d reps, median (fastest) ns/element, MB/s of target at the median\n",
                bytes, reps);
    std::printf("%-28s %18s %8s %18s %8s %18s %8s\n", "case", "reduce_atomic", "MB/s", "(per element)", "MB/s",
                "reduce (plain)", "MB/s");
    for (const Case& c : cases) {
        if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos) continue;
        const TypeInfo* ti = lookup_type(c.type);
        if (ti == nullptr) return 1;
        const size_t n = bytes / ti->extent;
        std::vector<unsigned char> dst(n * ti->extent + 64), src(dst.size()), old(dst.size()), init;
        c.init(dst, src, n);
        init = dst;
        init.resize(n * ti->extent);
        void* res = c.result ? old.data() : nullptr;
        bool refused = false;
        auto atomic = [&] {
            if (!reduce_atomic(c.op, *ti, dst.data(), src.data(), n, res)) refused = true;
        };
        Result a = time_it(reps, dst, init, n, atomic);
        const bool was = set_wide_cas(false);  // the one-element-at-a-time way alone
        Result e = time_it(reps, dst, init, n, atomic);
        set_wide_cas(was);
        Result p = time_it(reps, dst, init, n, [&] { reduce(c.op, *ti, dst.data(), src.data(), n, res); });
        auto mbs = [&](double ns_per_el) { return double(ti->extent) / ns_per_el * 1e3; };
        std::printf("%-28s %7.2f (%7.2f) %8.0f %7.2f (%7.2f) %8.0f %7.2f (%7.2f) %8.0f%s\n", c.name, a.med_ns, a.min_ns,
                    mbs(a.med_ns), e.med_ns, e.min_ns, mbs(e.med_ns), p.med_ns, p.min_ns, mbs(p.med_ns),
                    refused ? "  ATOMIC REFUSED" : "");
    }

    // Floors, on 8-byte words: a plain add loop, and one locked instruction per element.
    if (filter.empty() || std::string("floor").find(filter) != std::string::npos) {
        const size_t n = bytes / 8;
        std::vector<unsigned char> dst(bytes), init(bytes), srcb(bytes);
        fill<double>(init, n, [](size_t i) { return double(i % 1000); });
        fill<double>(srcb, n, [](size_t) { return 1.0; });
        auto* d = reinterpret_cast<double*>(dst.data());
        auto* u = reinterpret_cast<uint64_t*>(dst.data());
        const auto* s = reinterpret_cast<const double*>(srcb.data());
        Result plain = time_it(reps, dst, init, n, [&] {
            for (size_t i = 0; i < n; ++i) d[i] += s[i];
            asm volatile("" ::"r"(d) : "memory");
        });
        Result cas = time_it(reps, dst, init, n, [&] {
            for (size_t i = 0; i < n; ++i) {
                uint64_t o = __atomic_load_n(u + i, __ATOMIC_RELAXED), nw;
                do {
                    double x;
                    std::memcpy(&x, &o, 8);
                    x += s[i];
                    std::memcpy(&nw, &x, 8);
                } while (!__atomic_compare_exchange_n(u + i, &o, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
            }
        });
        // One lock cmpxchg16b per two doubles: the least the block way can cost.
        Result cas16 = time_it(reps, dst, init, n, [&] {
            for (size_t i = 0; i + 1 < n; i += 2) {
                uint64_t lo = __atomic_load_n(u + i, __ATOMIC_RELAXED),
                         hi = __atomic_load_n(u + i + 1, __ATOMIC_RELAXED);
                for (;;) {
                    double x, y;
                    std::memcpy(&x, &lo, 8);
                    std::memcpy(&y, &hi, 8);
                    x += s[i];
                    y += s[i + 1];
                    uint64_t nlo, nhi;
                    std::memcpy(&nlo, &x, 8);
                    std::memcpy(&nhi, &y, 8);
#if defined(__x86_64__)
                    bool ok;
                    asm volatile("lock cmpxchg16b %1"
                                 : "=@ccz"(ok), "+m"(*reinterpret_cast<unsigned __int128*>(u + i)), "+a"(lo), "+d"(hi)
                                 : "b"(nlo), "c"(nhi)
                                 : "memory");
                    if (ok) break;
#else
                    (void)nlo, (void)nhi;
                    break;
#endif
                }
            }
        });
        Result add = time_it(reps, dst, init, n, [&] {
            for (size_t i = 0; i < n; ++i) __atomic_fetch_add(u + i, uint64_t{1}, __ATOMIC_RELAXED);
        });
        Result store = time_it(reps, dst, init, n, [&] {
            for (size_t i = 0; i < n; ++i) __atomic_store_n(u + i, uint64_t{i}, __ATOMIC_RELAXED);
        });
        std::printf("%-28s %7.2f (%7.2f) %8.0f\n", "floor: plain double +=", plain.med_ns, plain.min_ns,
                    8e3 / plain.med_ns);
        std::printf("%-28s %7.2f (%7.2f) %8.0f\n", "floor: lock cmpxchg (dbl +)", cas.med_ns, cas.min_ns,
                    8e3 / cas.med_ns);
        std::printf("%-28s %7.2f (%7.2f) %8.0f\n", "floor: cmpxchg16b (2 dbl +)", cas16.med_ns, cas16.min_ns,
                    8e3 / cas16.med_ns);
        std::printf("%-28s %7.2f (%7.2f) %8.0f\n", "floor: lock add (8 B)", add.med_ns, add.min_ns, 8e3 / add.med_ns);
        std::printf("%-28s %7.2f (%7.2f) %8.0f\n", "floor: relaxed store (8 B)", store.med_ns, store.min_ns,
                    8e3 / store.med_ns);
    }
    return 0;
}
