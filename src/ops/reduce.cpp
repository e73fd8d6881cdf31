// reduce.cpp — the predefined-type table, the op × type rules, and the accumulate kernels.
//
// Layout of this file: (1) element codecs, which read and write only the data bytes of an
// element; (2) combine<K, T>, the MPI meaning of each op on one C type; (3) a constexpr table
// of kernels indexed by [op][Repr], nullptr where the op means nothing on that representation;
// (4) the atomic drivers, a second table of whole-run functions typed on (op, Repr), whose CAS
// loops run those same kernels (apply<K, T>) on a private copy of the word(s), so the locked
// and the atomic paths cannot disagree on a result; (5) the datatype table and its
// pointer-keyed hash; (6) the MPI rules of §5.9.2 / §11.3.4. The op and the type are looked
// up once per call (one indirect call per run), never per element.
//
// Invariants: signed integer arithmetic wraps (computed in the unsigned type, never UB);
// logical results are exactly 0 or 1 (so MPI_C_BOOL stays a valid bool); MAXLOC/MINLOC keep
// the lower index on ties; floating MIN/MAX keep dst unless src compares strictly smaller /
// larger (so a NaN in src is ignored and a NaN in dst stays). Accumulate atomics are GCC
// __atomic builtins (plus one inline-asm cmpxchg16b) with relaxed order on plain memory: MPI
// wants each element atomic, not ordered against its neighbours, and completion points fence;
// on x86-64 every locked RMW is a full barrier anyway. Compare-and-swap stays seq_cst.
#include "ops/reduce.hpp"
#include "ops/copy.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <complex>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "base/host_abi.hpp"

namespace fastrma::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// (1) Element codecs.

// x87 extended precision keeps 10 significant bytes in a 16-byte slot. Arithmetic results are
// written back with only those bytes so the slot's padding is never touched (as a C store of
// a long double would do).
constexpr size_t kLongDoubleDataBytes = std::numeric_limits<long double>::digits == 64 ? 10 : sizeof(long double);

template <class T>
struct Codec {  // integers, float, double
    static constexpr size_t extent = sizeof(T);
    static T load(const std::byte* p) {
        T v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    static void store(std::byte* p, const T& v) { std::memcpy(p, &v, sizeof v); }
};

template <>
struct Codec<long double> {
    static constexpr size_t extent = sizeof(long double);
    static long double load(const std::byte* p) {
        long double v = 0;
        std::memcpy(&v, p, kLongDoubleDataBytes);
        return v;
    }
    static void store(std::byte* p, const long double& v) { std::memcpy(p, &v, kLongDoubleDataBytes); }
};

template <class T>
struct Codec<std::complex<T>> {  // C99 _Complex / Fortran COMPLEX layout: re, im
    static constexpr size_t extent = 2 * sizeof(T);
    static std::complex<T> load(const std::byte* p) { return {Codec<T>::load(p), Codec<T>::load(p + sizeof(T))}; }
    static void store(std::byte* p, const std::complex<T>& v) {
        Codec<T>::store(p, v.real());
        Codec<T>::store(p + sizeof(T), v.imag());
    }
};

// The C struct behind each pair type: value first, then the index; padding as the C ABI puts it.
template <class V, class I>
struct Pair {
    V v;
    I i;
};

template <class V, class I>
struct Codec<Pair<V, I>> {
    using P = Pair<V, I>;
    static constexpr size_t extent = sizeof(P);
    static constexpr size_t index_offset = offsetof(P, i);
    static Pair<V, I> load(const std::byte* p) { return {Codec<V>::load(p), Codec<I>::load(p + index_offset)}; }
    static void store(std::byte* p, const Pair<V, I>& x) {
        Codec<V>::store(p, x.v);
        Codec<I>::store(p + index_offset, x.i);
    }
};

template <Repr R>
struct ReprType;
template <>
struct ReprType<Repr::i8> {
    using type = int8_t;
};
template <>
struct ReprType<Repr::i16> {
    using type = int16_t;
};
template <>
struct ReprType<Repr::i32> {
    using type = int32_t;
};
template <>
struct ReprType<Repr::i64> {
    using type = int64_t;
};
template <>
struct ReprType<Repr::u8> {
    using type = uint8_t;
};
template <>
struct ReprType<Repr::u16> {
    using type = uint16_t;
};
template <>
struct ReprType<Repr::u32> {
    using type = uint32_t;
};
template <>
struct ReprType<Repr::u64> {
    using type = uint64_t;
};
template <>
struct ReprType<Repr::f32> {
    using type = float;
};
template <>
struct ReprType<Repr::f64> {
    using type = double;
};
template <>
struct ReprType<Repr::f_long> {
    using type = long double;
};
template <>
struct ReprType<Repr::c32> {
    using type = std::complex<float>;
};
template <>
struct ReprType<Repr::c64> {
    using type = std::complex<double>;
};
template <>
struct ReprType<Repr::c_long> {
    using type = std::complex<long double>;
};
template <>
struct ReprType<Repr::pair_f32_i32> {
    using type = Pair<float, int>;
};
template <>
struct ReprType<Repr::pair_f64_i32> {
    using type = Pair<double, int>;
};
template <>
struct ReprType<Repr::pair_i64_i32> {
    using type = Pair<long, int>;
};
template <>
struct ReprType<Repr::pair_i32_i32> {
    using type = Pair<int, int>;
};
template <>
struct ReprType<Repr::pair_i16_i32> {
    using type = Pair<short, int>;
};
template <>
struct ReprType<Repr::pair_flong_i32> {
    using type = Pair<long double, int>;
};
template <>
struct ReprType<Repr::pair_f32_f32> {
    using type = Pair<float, float>;
};
template <>
struct ReprType<Repr::pair_f64_f64> {
    using type = Pair<double, double>;
};
template <>
struct ReprType<Repr::opaque> {
    using type = void;
};

constexpr size_t kNumRepr = static_cast<size_t>(Repr::count_);
constexpr size_t kNumArithOps = static_cast<size_t>(OpKind::replace);  // max .. minloc

template <class T>
inline constexpr bool is_complex_v = false;
template <class T>
inline constexpr bool is_complex_v<std::complex<T>> = true;
template <class T>
inline constexpr bool is_pair_v = false;
template <class V, class I>
inline constexpr bool is_pair_v<Pair<V, I>> = true;

// ---------------------------------------------------------------------------------------------
// (2) What each op means on one C type.

// Which arithmetic ops have a meaning on the representation T. Legality per MPI group is a
// separate, stricter question (op_defined_on); this only decides which kernels exist.
template <OpKind K, class T>
constexpr bool has_kernel() {
    if constexpr (std::is_void_v<T>) {
        return false;
    } else if constexpr (std::is_integral_v<T>) {
        return K != OpKind::maxloc && K != OpKind::minloc;
    } else if constexpr (std::is_floating_point_v<T>) {
        return K == OpKind::max || K == OpKind::min || K == OpKind::sum || K == OpKind::prod;
    } else if constexpr (is_complex_v<T>) {
        return K == OpKind::sum || K == OpKind::prod;
    } else if constexpr (is_pair_v<T>) {
        return K == OpKind::maxloc || K == OpKind::minloc;
    } else {
        return false;
    }
}

// Integer + and * in the unsigned type: wraps modulo 2^N instead of signed-overflow UB, and
// widening to at least `unsigned` keeps uint16 * uint16 from overflowing a promoted int.
template <class T>
T wrap_add(T a, T b) {
    using U = std::make_unsigned_t<T>;
    using W = std::common_type_t<U, unsigned>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) + static_cast<W>(static_cast<U>(b))));
}
template <class T>
T wrap_mul(T a, T b) {
    using U = std::make_unsigned_t<T>;
    using W = std::common_type_t<U, unsigned>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

// dst OP src. MPI defines target = target op origin; every predefined op is commutative
// except where ties are broken explicitly (MAXLOC/MINLOC), so the order only matters there.
template <OpKind K, class T>
T combine(const T& d, const T& s) {
    if constexpr (K == OpKind::max) {
        return s > d ? s : d;
    } else if constexpr (K == OpKind::min) {
        return s < d ? s : d;
    } else if constexpr (K == OpKind::sum) {
        if constexpr (std::is_integral_v<T>)
            return wrap_add(d, s);
        else
            return d + s;
    } else if constexpr (K == OpKind::prod) {
        if constexpr (std::is_integral_v<T>)
            return wrap_mul(d, s);
        else
            return d * s;
    } else if constexpr (K == OpKind::land) {
        return static_cast<T>((d != 0) && (s != 0));
    } else if constexpr (K == OpKind::lor) {
        return static_cast<T>((d != 0) || (s != 0));
    } else if constexpr (K == OpKind::lxor) {
        return static_cast<T>((d != 0) != (s != 0));
    } else if constexpr (K == OpKind::band) {
        return static_cast<T>(d & s);
    } else if constexpr (K == OpKind::bor) {
        return static_cast<T>(d | s);
    } else if constexpr (K == OpKind::bxor) {
        return static_cast<T>(d ^ s);
    } else if constexpr (K == OpKind::maxloc) {
        if (s.v > d.v) return s;
        if (s.v == d.v && s.i < d.i) return T{d.v, s.i};  // tie: lower index, dst's value bits
        return d;
    } else {
        static_assert(K == OpKind::minloc);
        if (s.v < d.v) return s;
        if (s.v == d.v && s.i < d.i) return T{d.v, s.i};
        return d;
    }
}

// ---------------------------------------------------------------------------------------------
// (3) Plain kernels. One call runs whole runs with the type and the op fixed at compile time
// (one indirect call per group of runs at fixed steps, none per run or element); inside a run
// the stride is a constant, which lets the compiler vectorise the contiguous cases. old_out,
// when wanted, is filled in the same pass.

// Table entries take `pieces` runs at fixed steps (reduce_strided); reduce() passes one.
using KernelFn = void (*)(std::byte* dst, const std::byte* src, size_t count, std::byte* old_out, size_t pieces,
                          const RunStrides& st);

// p + stride without forming an out-of-range pointer from null (src of NO_OP, no old_out).
template <class P>
[[gnu::always_inline]] inline P* step(P* p, std::int64_t stride) {
    return p == nullptr ? nullptr : reinterpret_cast<P*>(reinterpret_cast<uintptr_t>(p) + uintptr_t(stride));
}

// The data bytes of one T, as copy_data() copies them: pairs value and index (never the
// padding between them), everything else its whole size (long double: all 16 bytes).
template <class T>
[[gnu::always_inline]] inline void copy_data_t(std::byte* dst, const std::byte* src) {
    if constexpr (is_pair_v<T>) {
        std::memcpy(dst, src, sizeof(T::v));
        std::memcpy(dst + Codec<T>::index_offset, src + Codec<T>::index_offset, sizeof(T::i));
    } else {
        std::memcpy(dst, src, sizeof(T));
    }
}

// dst[k] = dst[k] OP src[k] for k < count; REPLACE copies the data bytes, NO_OP does nothing.
// Used by reduce() and, on a private copy of the old word(s), by the atomic CAS loops: both
// paths run the same code, so they cannot disagree on a result.
template <OpKind K, class T>
[[gnu::always_inline]] inline void apply(std::byte* dst, const std::byte* src, size_t count) {
    constexpr size_t E = Codec<T>::extent;
    if constexpr (K == OpKind::no_op) {
        (void)dst, (void)src, (void)count;
    } else if constexpr (K == OpKind::replace) {
        for (size_t k = 0; k < count; ++k) copy_data_t<T>(dst + k * E, src + k * E);
    } else {
        using C = Codec<T>;
        // Unrolled: the vectorised loop's own counting otherwise costs as much as its store.
#pragma GCC unroll 4
        for (size_t k = 0; k < count; ++k, dst += E, src += E) {
            C::store(dst, combine<K, T>(C::load(dst), C::load(src)));
        }
    }
}

inline constexpr size_t kTwoPassMinBytes = 4096;  // kernel_body: runs this long copy old values out first

template <OpKind K, class T>
[[gnu::always_inline]] inline void kernel_body(std::byte* dst, const std::byte* src, size_t count, std::byte* old_out) {
    if (old_out == nullptr) {
        apply<K, T>(dst, src, count);
        return;
    }
    using C = Codec<T>;
    constexpr size_t E = C::extent;
    if constexpr (!is_pair_v<T>) {
        // A run of a page or more: copy the old values out with memcpy, then apply. The fused
        // loop below stores into old_out 32 bytes at a time, each store a read for ownership of
        // its line; when that buffer was last read by another core (an am answer buffer, which
        // the origin's cross-memory read pulls into its own cache) every line is a cross-core
        // miss, while memcpy's string stores write whole lines without reading them. Warm in
        // this core's cache the fused loop is faster: it stays below a page (figures:
        // docs/performance.md).
        // (Pairs keep the fused loop: memcpy would write their padding into old_out.)
        if (count * E >= kTwoPassMinBytes) {
            std::memcpy(old_out, dst, count * E);
            apply<K, T>(dst, src, count);
            return;
        }
    }
    // Fused: one pass reads dst once (old_out must overlap neither dst nor src; src may be dst).
    for (size_t k = 0; k < count; ++k, dst += E, src += E, old_out += E) {
        const T d = C::load(dst);
        copy_data_t<T>(old_out, dst);
        C::store(dst, combine<K, T>(d, C::load(src)));
    }
}

// The same loops compiled twice: for the baseline x86-64 (SSE2) and for AVX2, picked once at
// run time (kernel_for). Same operations element by element, so the same results (AVX2
// brings no FMA: nothing is contracted).
template <OpKind K, class T>
void kernel(std::byte* dst, const std::byte* src, size_t count, std::byte* old_out, size_t pieces,
            const RunStrides& st) {
    for (size_t p = 0; p < pieces; ++p, dst += st.dst, src += st.src, old_out = step(old_out, st.old_out))
        kernel_body<K, T>(dst, src, count, old_out);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define FASTRMA_AVX2_KERNELS 1
template <OpKind K, class T>
[[gnu::target("avx2")]] void kernel_avx2(std::byte* dst, const std::byte* src, size_t count, std::byte* old_out,
                                         size_t pieces, const RunStrides& st) {
    for (size_t p = 0; p < pieces; ++p, dst += st.dst, src += st.src, old_out = step(old_out, st.old_out))
        kernel_body<K, T>(dst, src, count, old_out);
}
#endif

template <OpKind K, size_t R, bool Avx2>
constexpr KernelFn pick_kernel() {
    using T = typename ReprType<static_cast<Repr>(R)>::type;
    if constexpr (!has_kernel<K, T>()) return nullptr;
#ifdef FASTRMA_AVX2_KERNELS
    else if constexpr (Avx2)
        return &kernel_avx2<K, T>;
#endif
    else
        return &kernel<K, T>;
}

template <size_t Op, bool Avx2, size_t... Rs>
constexpr std::array<KernelFn, kNumRepr> kernel_row(std::index_sequence<Rs...>) {
    return {pick_kernel<static_cast<OpKind>(Op), Rs, Avx2>()...};
}

template <bool Avx2, size_t... Ops>
constexpr std::array<std::array<KernelFn, kNumRepr>, kNumArithOps> kernel_table(std::index_sequence<Ops...>) {
    return {kernel_row<Ops, Avx2>(std::make_index_sequence<kNumRepr>{})...};
}

constexpr auto kKernels = kernel_table<false>(std::make_index_sequence<kNumArithOps>{});
constexpr auto kKernelsAvx2 = kernel_table<true>(std::make_index_sequence<kNumArithOps>{});

bool avx2_usable() {
#ifdef FASTRMA_AVX2_KERNELS
    static const bool avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
    return avx2;
#else
    return false;
#endif
}
std::atomic<bool> g_avx2_wanted{true};  // set_avx2_kernels (tests)

KernelFn kernel_for(OpKind op, Repr r) {
    auto o = static_cast<size_t>(op), i = static_cast<size_t>(r);
    if (o >= kNumArithOps || i >= kNumRepr) return nullptr;
    return avx2_usable() && g_avx2_wanted.load(std::memory_order_relaxed) ? kKernelsAvx2[o][i] : kKernels[o][i];
}

// Copy the data bytes of one element (pairs: value and index, skipping padding).
inline void copy_data(const TypeInfo& ti, std::byte* dst, const std::byte* src) {
    if (ti.cls == TypeClass::pair) {
        std::memcpy(dst, src, ti.value_size);
        std::memcpy(dst + ti.index_offset, src + ti.index_offset, ti.index_size);
    } else {
        std::memcpy(dst, src, ti.size);
    }
}

inline bool data_equal(const TypeInfo& ti, const std::byte* a, const std::byte* b) {
    if (ti.cls == TypeClass::pair) {
        return std::memcmp(a, b, ti.value_size) == 0 &&
               std::memcmp(a + ti.index_offset, b + ti.index_offset, ti.index_size) == 0;
    }
    return std::memcmp(a, b, ti.size) == 0;
}

void copy_elements(const TypeInfo& ti, std::byte* dst, const std::byte* src, size_t count) {
    if (ti.size == ti.extent) {
        const size_t n = count * ti.size;
        if (dst == src) return;
        if (dst + n <= src || src + n <= dst)
            copy_bytes(dst, src, n);  // the usual case
        else
            std::memmove(dst, src, n);
        return;
    }
    for (size_t k = 0; k < count; ++k) copy_data(ti, dst + k * ti.extent, src + k * ti.extent);
}

// ---------------------------------------------------------------------------------------------
// (4) Atomic drivers.
//
// Each element is updated by one atomic access that covers it whole, so it is atomic against
// every other accumulate, fetch_and_op and compare_and_swap on it, from any process, and
// against the engine's own fetch-add fast path. Memory order is relaxed: MPI asks for
// atomicity per element, not for an order between the elements of one call, and every
// completion point (flush, unlock, fence) issues a full fence. On x86-64 that changes nothing
// for read-modify-writes (every locked instruction is a full barrier anyway); it lets a
// REPLACE be a plain aligned store instead of an exchange.
//
// What each (op, type) costs per element, as chosen below:
//  * NO_OP: a load (8-byte loads for 1/2/4-byte types: each element lies inside one of them);
//    nothing at all without old_out.
//  * REPLACE without old_out, no padding: an aligned store (8 bytes at a time for narrow types:
//    every element of the word is replaced, by one atomic store).
//  * Everything else, in runs: a 16-byte compare-and-swap (x86-64 `lock cmpxchg16b`) over the
//    16 / extent whole elements of each 16-byte-aligned block: read both halves, compute the
//    new block on a private copy with apply<K, T>, write nothing if no bit changed (a MAX
//    that loses costs a load), else CAS, and on failure recompute from the value the CAS
//    returned. One locked instruction then serves 2 doubles or 16 bytes instead of one
//    element. Elements outside whole blocks (unaligned head, tail, single-element calls such
//    as MPI_Fetch_and_op) take the per-element way: fetch_add/and/or/xor for integer
//    SUM/BAND/BOR/BXOR (one locked instruction, no retry), exchange for REPLACE with old_out,
//    a CAS loop of width extent otherwise (same skip-if-unchanged rule).
// Mixed widths are sound on x86: a locked instruction on memory inside one cache line holds
// the line for its whole read-modify-write, so an 8-byte `lock xadd` on one double and a
// 16-byte `lock cmpxchg16b` on the block holding it are ordered one after the other, and a
// plain aligned load or store never splits either; the CAS compares all 16 bytes, so any
// change to either element in between makes it fail and retry. Under ThreadSanitizer (which
// cannot see inline asm) and off x86-64 only the per-element way is used.

// may_alias: the window memory holds doubles, pairs, ... that we access as unsigned words.
template <class U>
struct AliasWord;
template <>
struct AliasWord<uint8_t> {
    typedef uint8_t __attribute__((may_alias)) type;
};
template <>
struct AliasWord<uint16_t> {
    typedef uint16_t __attribute__((may_alias)) type;
};
template <>
struct AliasWord<uint32_t> {
    typedef uint32_t __attribute__((may_alias)) type;
};
template <>
struct AliasWord<uint64_t> {
    typedef uint64_t __attribute__((may_alias)) type;
};
template <class U>
using AWord = typename AliasWord<U>::type;

static_assert(__atomic_always_lock_free(1, 0) && __atomic_always_lock_free(2, 0) && __atomic_always_lock_free(4, 0) &&
                  __atomic_always_lock_free(8, 0),
              "native_atomic assumes lock-free CAS of 1, 2, 4 and 8 bytes");

template <size_t N>
struct WordOfSize;
template <>
struct WordOfSize<1> {
    using type = uint8_t;
};
template <>
struct WordOfSize<2> {
    using type = uint16_t;
};
template <>
struct WordOfSize<4> {
    using type = uint32_t;
};
template <>
struct WordOfSize<8> {
    using type = uint64_t;
};

template <class T>
constexpr bool native_v() {
    if constexpr (std::is_void_v<T>)
        return false;
    else
        return Codec<T>::extent == 1 || Codec<T>::extent == 2 || Codec<T>::extent == 4 || Codec<T>::extent == 8;
}

template <class T>
constexpr bool whole_word_v() {  // no padding inside the element
    if constexpr (is_pair_v<T>)
        return sizeof(T::v) + sizeof(T::i) == sizeof(T);
    else
        return true;
}

template <class U>
[[gnu::always_inline]] inline U load_relaxed(const std::byte* p) {
    return __atomic_load_n(reinterpret_cast<const AWord<U>*>(p), __ATOMIC_RELAXED);
}
template <class U>
[[gnu::always_inline]] inline void store_relaxed(std::byte* p, U v) {
    __atomic_store_n(reinterpret_cast<AWord<U>*>(p), v, __ATOMIC_RELAXED);
}

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FRMA_NO_WIDE_CAS 1
#endif
#endif
#ifndef FRMA_NO_WIDE_CAS
#define FRMA_WIDE_CAS 1
#endif
#endif

#ifdef FRMA_WIDE_CAS
constexpr size_t kBlock = 16;

typedef unsigned __int128 __attribute__((may_alias)) AliasU128;

// lock cmpxchg16b on the 16-byte-aligned block at p: if it holds lo (bytes 0..7) and hi (bytes
// 8..15) it becomes new_lo, new_hi and true is returned; otherwise lo, hi receive what it
// holds. Inline asm, not __atomic on 16 bytes: that would go to libatomic, whose fallback
// locks are private to a process (reduce.hpp).
[[gnu::always_inline]] inline bool cas_block(std::byte* p, uint64_t& lo, uint64_t& hi, uint64_t new_lo,
                                             uint64_t new_hi) {
    bool ok;
    asm volatile("lock cmpxchg16b %1"
                 : "=@ccz"(ok), "+m"(*reinterpret_cast<AliasU128*>(p)), "+a"(lo), "+d"(hi)
                 : "b"(new_lo), "c"(new_hi)
                 : "memory");
    return ok;
}

bool cpu_has_cx16() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_CMPXCHG16B) != 0;
}

std::atomic<bool> g_wide_wanted{true};

bool wide_cas_usable() {
    static const bool has = cpu_has_cx16();
    return has;
}

[[gnu::always_inline]] inline bool wide_cas_on() {
    return wide_cas_usable() && g_wide_wanted.load(std::memory_order_relaxed);
}
#endif

// One element, the CAS way: apply<K, T> on a private copy of the old word; write nothing when
// no bit changes (the load is then the linearisation point; bits, not values, so -0.0 vs 0.0
// and NaN payloads are exact); padding bytes travel through unchanged.
template <OpKind K, class T>
[[gnu::always_inline]] inline void cas_element(std::byte* d, const std::byte* s, std::byte* o) {
    using U = typename WordOfSize<Codec<T>::extent>::type;
    auto* p = reinterpret_cast<AWord<U>*>(d);
    U old = __atomic_load_n(p, __ATOMIC_RELAXED);
    for (;;) {
        U next = old;
        apply<K, T>(reinterpret_cast<std::byte*>(&next), s, 1);
        if (next == old) break;
        if (__atomic_compare_exchange_n(p, &old, next, /*weak=*/true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            break;
        }
    }
    if (o != nullptr) copy_data_t<T>(o, reinterpret_cast<const std::byte*>(&old));
}

// Per-element way over n elements (src non-null: not used for NO_OP).
template <OpKind K, class T>
void element_run(std::byte* d, const std::byte* s, size_t n, std::byte* o) {
    constexpr size_t E = Codec<T>::extent;
    using U = typename WordOfSize<E>::type;
    constexpr bool fetch_op =
        std::is_integral_v<T> && (K == OpKind::sum || K == OpKind::band || K == OpKind::bor || K == OpKind::bxor);
    for (size_t k = 0; k < n; ++k, d += E, s += E) {
        std::byte* ok = o != nullptr ? o + k * E : nullptr;
        if constexpr (fetch_op || (K == OpKind::replace && whole_word_v<T>())) {
            auto* p = reinterpret_cast<AWord<U>*>(d);
            U v;
            std::memcpy(&v, s, E);  // src may be misaligned
            U old;
            if constexpr (K == OpKind::sum)
                old = __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
            else if constexpr (K == OpKind::band)
                old = __atomic_fetch_and(p, v, __ATOMIC_RELAXED);
            else if constexpr (K == OpKind::bor)
                old = __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
            else if constexpr (K == OpKind::bxor)
                old = __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);
            else
                old = __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
            if (ok != nullptr) std::memcpy(ok, &old, E);
        } else {
            cas_element<K, T>(d, s, ok);
        }
    }
}

#ifdef FRMA_WIDE_CAS
// apply<K, T> on the 16 / extent elements of a private block held as two 8-byte halves.
// The ops of integers and reals are computed on the whole block as one 16-byte vector (GCC
// vector extensions: 16 byte adds are one paddb), each written to give exactly combine<K, T>
// of every lane: + * & | ^ in the unsigned lane type (wraps, as wrap_add / wrap_mul), MAX/MIN
// as "src if strictly larger/smaller, else dst" (so NaN and -0.0 behave as in combine), the
// logical ops as 0/1. The unit tests compare every (op, type) byte for byte with reduce().
// Everything else (pairs, complex) runs apply<K, T> on a copy of the block.
typedef uint64_t U64x2 __attribute__((vector_size(16)));

template <OpKind K, class T>
constexpr bool block_vector_op() {
    if constexpr (!std::is_arithmetic_v<T>) {
        return false;
    } else if constexpr (std::is_integral_v<T>) {
        return K == OpKind::max || K == OpKind::min || K == OpKind::sum || K == OpKind::prod || K == OpKind::band ||
               K == OpKind::bor || K == OpKind::bxor || K == OpKind::land || K == OpKind::lor || K == OpKind::lxor;
    } else {
        return K == OpKind::max || K == OpKind::min || K == OpKind::sum || K == OpKind::prod;
    }
}

template <OpKind K, class T>
[[gnu::always_inline]] inline void apply_block(uint64_t& lo, uint64_t& hi, const std::byte* s) {
    constexpr size_t G = kBlock / Codec<T>::extent;
    if constexpr (K == OpKind::replace && whole_word_v<T>()) {
        std::memcpy(&lo, s, 8);
        std::memcpy(&hi, s + 8, 8);
    } else if constexpr (block_vector_op<K, T>()) {
        using L =
            typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::type_identity<T>>::type;
        typedef T VT __attribute__((vector_size(16)));
        typedef L VL __attribute__((vector_size(16)));
        U64x2 w = {lo, hi};
        VT d, x, r;
        std::memcpy(&d, &w, kBlock);
        std::memcpy(&x, s, kBlock);
        if constexpr (K == OpKind::max) {
            r = x > d ? x : d;
        } else if constexpr (K == OpKind::min) {
            r = x < d ? x : d;
        } else if constexpr (K == OpKind::land || K == OpKind::lor || K == OpKind::lxor) {
            auto a = d != 0, b = x != 0;  // lanes of -1 / 0
            decltype(a) m;
            if constexpr (K == OpKind::land)
                m = a & b;
            else if constexpr (K == OpKind::lor)
                m = a | b;
            else
                m = a ^ b;
            r = reinterpret_cast<VT>(m & 1);
        } else {
            VL a = reinterpret_cast<VL>(d), b = reinterpret_cast<VL>(x), c;
            if constexpr (K == OpKind::sum)
                c = a + b;
            else if constexpr (K == OpKind::prod)
                c = a * b;
            else if constexpr (K == OpKind::band)
                c = a & b;
            else if constexpr (K == OpKind::bor)
                c = a | b;
            else
                c = a ^ b;
            r = reinterpret_cast<VT>(c);
        }
        std::memcpy(&w, &r, kBlock);
        lo = w[0];
        hi = w[1];
    } else {
        uint64_t block[2] = {lo, hi};
        apply<K, T>(reinterpret_cast<std::byte*>(block), s, G);
        lo = block[0];
        hi = block[1];
    }
}

// The 16-byte way over `blocks` aligned blocks of 16 / extent elements each. The halves are
// kept as two scalars (never a 16-byte object in memory: the CAS returns them in rdx:rax, and a
// 16-byte reload of two 8-byte stores would stall store forwarding).
template <OpKind K, class T>
void block_run(std::byte* d, const std::byte* s, size_t blocks, std::byte* o) {
    constexpr size_t E = Codec<T>::extent, G = kBlock / E;
    for (size_t b = 0; b < blocks; ++b, d += kBlock, s += kBlock) {
        // Two 8-byte loads: each element lies inside one of them, so each is read atomically;
        // a block torn between them only makes the CAS fail once.
        uint64_t lo = load_relaxed<uint64_t>(d), hi = load_relaxed<uint64_t>(d + 8);
        for (;;) {
            uint64_t next_lo = lo, next_hi = hi;
            apply_block<K, T>(next_lo, next_hi, s);
            if (next_lo == lo && next_hi == hi) break;  // no bit changes: nothing to write
            if (cas_block(d, lo, hi, next_lo, next_hi)) break;
        }
        if (o != nullptr) {
            std::byte* ob = o + b * kBlock;
            if constexpr (whole_word_v<T>()) {
                std::memcpy(ob, &lo, 8);
                std::memcpy(ob + 8, &hi, 8);
            } else {
                const uint64_t old[2] = {lo, hi};
                for (size_t j = 0; j < G; ++j)
                    copy_data_t<T>(ob + j * E, reinterpret_cast<const std::byte*>(old) + j * E);
            }
        }
    }
}
#endif

// NO_OP: old values only. Narrow whole-word types are read 8 bytes at a time.
template <class T>
void load_run(const std::byte* d, size_t n, std::byte* o) {
    if (o == nullptr) return;  // a read nobody looks at
    constexpr size_t E = Codec<T>::extent;
    using U = typename WordOfSize<E>::type;
    size_t k = 0;
    if constexpr (whole_word_v<T>() && E < 8) {
        while (k < n && (reinterpret_cast<uintptr_t>(d + k * E) & 7) != 0) {
            U v = load_relaxed<U>(d + k * E);
            std::memcpy(o + k * E, &v, E);
            ++k;
        }
        constexpr size_t per = 8 / E;
        for (; k + per <= n; k += per) {
            uint64_t v = load_relaxed<uint64_t>(d + k * E);
            std::memcpy(o + k * E, &v, 8);
        }
    }
    for (; k < n; ++k) {
        U v = load_relaxed<U>(d + k * E);
        copy_data_t<T>(o + k * E, reinterpret_cast<const std::byte*>(&v));
    }
}

// REPLACE without old values, no padding: aligned stores. Narrow types 8 bytes at a time (every
// element of such a word is being replaced, so one atomic store replaces each of them).
template <class U>
void store_run(std::byte* d, const std::byte* s, size_t n) {
    constexpr size_t E = sizeof(U);
    size_t k = 0;
    if constexpr (E < 8) {
        for (; k < n && (reinterpret_cast<uintptr_t>(d + k * E) & 7) != 0; ++k) {
            U v;
            std::memcpy(&v, s + k * E, E);
            store_relaxed<U>(d + k * E, v);
        }
    }
    constexpr size_t per = 8 / E;
    for (; k + per <= n; k += per) {
        uint64_t v;
        std::memcpy(&v, s + k * E, 8);  // src may be misaligned
        store_relaxed<uint64_t>(d + k * E, v);
    }
    for (; k < n; ++k) {
        U v;
        std::memcpy(&v, s + k * E, E);
        store_relaxed<U>(d + k * E, v);
    }
}

using AtomicFn = void (*)(std::byte* dst, const std::byte* src, size_t count, std::byte* old_out, size_t pieces,
                          const RunStrides& st);

template <OpKind K, class T>
void atomic_run(std::byte* d, const std::byte* s, size_t n, std::byte* o) {
#if !defined(__SANITIZE_THREAD__)
    // Byte elements (MPI_BYTE and friends: ARMCI-MPI's puts and gets) cannot tear, so any
    // copy keeps every element whole: vector moves instead of one 8-byte word at a time.
    // (ThreadSanitizer builds keep the atomic loads and stores it can see.)
    if constexpr (std::is_same_v<T, uint8_t> && (K == OpKind::no_op || K == OpKind::replace)) {
        if (K == OpKind::no_op && o != nullptr) copy_bytes(o, d, n);
        if (K == OpKind::replace && o == nullptr) copy_bytes(d, s, n);
        if (K == OpKind::no_op || o == nullptr) return;
    }
#endif
    if constexpr (K == OpKind::no_op) {
        load_run<T>(d, n, o);
        return;
    } else {
        constexpr size_t E = Codec<T>::extent;
        if constexpr (K == OpKind::replace && whole_word_v<T>()) {
            if (o == nullptr) {
                store_run<typename WordOfSize<E>::type>(d, s, n);
                return;
            }
        }
        size_t k = 0;
#ifdef FRMA_WIDE_CAS
        constexpr size_t G = kBlock / E;
        if (n >= G && wide_cas_on()) {  // (a single element, e.g. MPI_Fetch_and_op, never asks)
            const size_t head = ((kBlock - (reinterpret_cast<uintptr_t>(d) & (kBlock - 1))) & (kBlock - 1)) / E;
            const size_t blocks = (n - head) / G;  // head < G <= n
            if (blocks > 0) {
                element_run<K, T>(d, s, head, o);
                block_run<K, T>(d + head * E, s + head * E, blocks, o != nullptr ? o + head * E : nullptr);
                k = head + blocks * G;
            }
        }
#endif
        element_run<K, T>(d + k * E, s + k * E, n - k, o != nullptr ? o + k * E : nullptr);
    }
}

// A table entry: atomic_run over `pieces` runs at fixed steps (reduce_atomic_strided).
template <OpKind K, class T>
void atomic_pieces(std::byte* d, const std::byte* s, size_t n, std::byte* o, size_t pieces, const RunStrides& st) {
    for (size_t p = 0; p < pieces; ++p, d += st.dst, s = step(s, st.src), o = step(o, st.old_out))
        atomic_run<K, T>(d, s, n, o);
}

// atomic_run instantiations by (op, Repr): nullptr where the op has no kernel on the
// representation or the representation is never native. REPLACE and NO_OP on types without
// padding only move bytes, so they share the instantiation of the unsigned word of that width.
template <OpKind K, size_t R>
constexpr AtomicFn pick_atomic() {
    using T = typename ReprType<static_cast<Repr>(R)>::type;
    if constexpr (!native_v<T>()) {
        return nullptr;  // opaque (void) included: chosen by width in atomic_for()
    } else if constexpr (K == OpKind::replace || K == OpKind::no_op) {
        if constexpr (whole_word_v<T>())
            return &atomic_pieces<K, typename WordOfSize<Codec<T>::extent>::type>;
        else
            return &atomic_pieces<K, T>;
    } else if constexpr (has_kernel<K, T>()) {
        return &atomic_pieces<K, T>;
    } else {
        return nullptr;
    }
}

constexpr size_t kNumAtomicOps = static_cast<size_t>(OpKind::no_op) + 1;  // max .. no_op

template <size_t Op, size_t... Rs>
constexpr std::array<AtomicFn, kNumRepr> atomic_row(std::index_sequence<Rs...>) {
    return {pick_atomic<static_cast<OpKind>(Op), Rs>()...};
}

template <size_t... Ops>
constexpr std::array<std::array<AtomicFn, kNumRepr>, kNumAtomicOps> atomic_table(std::index_sequence<Ops...>) {
    return {atomic_row<Ops>(std::make_index_sequence<kNumRepr>{})...};
}

constexpr auto kAtomics = atomic_table(std::make_index_sequence<kNumAtomicOps>{});

template <OpKind K>
AtomicFn opaque_atomic(size_t extent) {
    switch (extent) {
    case 1:
        return &atomic_pieces<K, uint8_t>;
    case 2:
        return &atomic_pieces<K, uint16_t>;
    case 4:
        return &atomic_pieces<K, uint32_t>;
    case 8:
        return &atomic_pieces<K, uint64_t>;
    default:
        return nullptr;
    }
}

AtomicFn atomic_for(OpKind op, const TypeInfo& ti) {
    auto o = static_cast<size_t>(op), i = static_cast<size_t>(ti.repr);
    if (o >= kNumAtomicOps || i >= kNumRepr) return nullptr;
    if (ti.repr == Repr::opaque) {  // REPLACE / NO_OP only; no padding (size == extent)
        if (op == OpKind::replace) return opaque_atomic<OpKind::replace>(ti.extent);
        if (op == OpKind::no_op) return opaque_atomic<OpKind::no_op>(ti.extent);
        return nullptr;
    }
    return kAtomics[o][i];
}

template <class U>
void cas_one(std::byte* dst, const std::byte* origin, const std::byte* compare, std::byte* result) {
    using Word = AWord<U>;
    U expected, desired;
    std::memcpy(&expected, compare, sizeof(U));
    std::memcpy(&desired, origin, sizeof(U));
    // On failure `expected` receives the current value; on success it already equals it.
    __atomic_compare_exchange_n(reinterpret_cast<Word*>(dst), &expected, desired, /*weak=*/false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    std::memcpy(result, &expected, sizeof(U));
}

bool atomic_possible(const TypeInfo& ti, const void* dst) {
    return ti.native_atomic && reinterpret_cast<uintptr_t>(dst) % ti.extent == 0;
}

// ---------------------------------------------------------------------------------------------
// (5) The datatype table.

struct Layout {
    size_t size, extent, value_size, index_offset, index_size;
};

template <class T>
constexpr Layout layout_of() {
    if constexpr (is_pair_v<T>) {
        using V = decltype(T::v);
        using I = decltype(T::i);
        return {sizeof(V) + sizeof(I), sizeof(T), sizeof(V), Codec<T>::index_offset, sizeof(I)};
    } else {
        return {sizeof(T), sizeof(T), sizeof(T), 0, 0};
    }
}

template <size_t R>
constexpr Layout layout_for() {
    using T = typename ReprType<static_cast<Repr>(R)>::type;
    if constexpr (std::is_void_v<T>)
        return Layout{0, 0, 0, 0, 0};  // opaque: size from the entry
    else
        return layout_of<T>();
}

template <size_t... Rs>
constexpr std::array<Layout, kNumRepr> layout_table(std::index_sequence<Rs...>) {
    return {layout_for<Rs>()...};
}

constexpr auto kLayouts = layout_table(std::make_index_sequence<kNumRepr>{});

template <class T>
constexpr Repr int_repr() {
    static_assert(std::is_integral_v<T>);
    constexpr bool s = std::is_signed_v<T>;
    switch (sizeof(T)) {
    case 1:
        return s ? Repr::i8 : Repr::u8;
    case 2:
        return s ? Repr::i16 : Repr::u16;
    case 4:
        return s ? Repr::i32 : Repr::u32;
    default:
        static_assert(sizeof(T) <= 8);
        return s ? Repr::i64 : Repr::u64;
    }
}

static_assert(sizeof(bool) == 1, "MPI_C_BOOL / MPI_CXX_BOOL are handled as one byte");

// Sizes of Fortran types as gfortran lays them out on x86-64 (what Debian's Open MPI was
// configured with; tests compare every entry against MPI_Type_size / MPI_Type_get_extent).
// Open MPI maps REAL*16 to C long double (ompi_fortran_real16_t), so MPI_REAL16 and
// MPI_COMPLEX32 share the long double kernels.
constexpr Repr kFortranInteger = Repr::i32;
constexpr Repr kFortranLogical = Repr::i32;
constexpr Repr kFortranReal = Repr::f32;
constexpr Repr kFortranDouble = Repr::f64;

struct Entry {
    MPI_Datatype type;
    const char* name;
    TypeClass cls;
    Repr repr;
    size_t opaque_size = 0;  // Repr::opaque only
    bool multi_language = false;
};

#define FRMA_TYPE(h, ...) \
    Entry { h, #h, __VA_ARGS__ }

// Order defines TypeInfo::id: identical in every process of one build, but the #ifdef'd
// entries shift it between builds, so ids must never cross a build boundary.
std::vector<Entry> predefined_entries() {
    using C = TypeClass;
    std::vector<Entry> e = {
        // C integer
        FRMA_TYPE(MPI_INT, C::c_integer, int_repr<int>()),
        FRMA_TYPE(MPI_LONG, C::c_integer, int_repr<long>()),
        FRMA_TYPE(MPI_SHORT, C::c_integer, int_repr<short>()),
        FRMA_TYPE(MPI_UNSIGNED_SHORT, C::c_integer, int_repr<unsigned short>()),
        FRMA_TYPE(MPI_UNSIGNED, C::c_integer, int_repr<unsigned>()),
        FRMA_TYPE(MPI_UNSIGNED_LONG, C::c_integer, int_repr<unsigned long>()),
#ifdef MPI_LONG_LONG_INT
        FRMA_TYPE(MPI_LONG_LONG_INT, C::c_integer, int_repr<long long>()),  // == MPI_LONG_LONG
        FRMA_TYPE(MPI_UNSIGNED_LONG_LONG, C::c_integer, int_repr<unsigned long long>()),
#endif
        FRMA_TYPE(MPI_SIGNED_CHAR, C::c_integer, int_repr<signed char>()),
        FRMA_TYPE(MPI_UNSIGNED_CHAR, C::c_integer, int_repr<unsigned char>()),
        FRMA_TYPE(MPI_INT8_T, C::c_integer, Repr::i8),
        FRMA_TYPE(MPI_INT16_T, C::c_integer, Repr::i16),
        FRMA_TYPE(MPI_INT32_T, C::c_integer, Repr::i32),
        FRMA_TYPE(MPI_INT64_T, C::c_integer, Repr::i64),
        FRMA_TYPE(MPI_UINT8_T, C::c_integer, Repr::u8),
        FRMA_TYPE(MPI_UINT16_T, C::c_integer, Repr::u16),
        FRMA_TYPE(MPI_UINT32_T, C::c_integer, Repr::u32),
        FRMA_TYPE(MPI_UINT64_T, C::c_integer, Repr::u64),
        // Multi-language types: integers, but MPI-3.1 leaves LAND/LOR/LXOR off them.
        FRMA_TYPE(MPI_AINT, C::c_integer, int_repr<MPI_Aint>(), 0, true),
        FRMA_TYPE(MPI_OFFSET, C::c_integer, int_repr<MPI_Offset>(), 0, true),
        FRMA_TYPE(MPI_COUNT, C::c_integer, int_repr<MPI_Count>(), 0, true),
        // Fortran integer
        FRMA_TYPE(MPI_INTEGER, C::fortran_integer, kFortranInteger),
#ifdef MPI_INTEGER1
        FRMA_TYPE(MPI_INTEGER1, C::fortran_integer, Repr::i8),
#endif
#ifdef MPI_INTEGER2
        FRMA_TYPE(MPI_INTEGER2, C::fortran_integer, Repr::i16),
#endif
#ifdef MPI_INTEGER4
        FRMA_TYPE(MPI_INTEGER4, C::fortran_integer, Repr::i32),
#endif
#ifdef MPI_INTEGER8
        FRMA_TYPE(MPI_INTEGER8, C::fortran_integer, Repr::i64),
#endif
#ifdef MPI_INTEGER16
        FRMA_TYPE(MPI_INTEGER16, C::other, Repr::opaque, 16),  // no 128-bit kernels: REPLACE only
#endif
        // Floating point
        FRMA_TYPE(MPI_FLOAT, C::floating, Repr::f32),
        FRMA_TYPE(MPI_DOUBLE, C::floating, Repr::f64),
        FRMA_TYPE(MPI_LONG_DOUBLE, C::floating, Repr::f_long),
        FRMA_TYPE(MPI_REAL, C::floating, kFortranReal),
        FRMA_TYPE(MPI_DOUBLE_PRECISION, C::floating, kFortranDouble),
#ifdef MPI_REAL2
        FRMA_TYPE(MPI_REAL2, C::other, Repr::opaque, 2),  // no half-precision kernels: REPLACE only
#endif
#ifdef MPI_REAL4
        FRMA_TYPE(MPI_REAL4, C::floating, Repr::f32),
#endif
#ifdef MPI_REAL8
        FRMA_TYPE(MPI_REAL8, C::floating, Repr::f64),
#endif
#ifdef MPI_REAL16
        FRMA_TYPE(MPI_REAL16, C::floating, Repr::f_long),
#endif
        // Logical
        FRMA_TYPE(MPI_C_BOOL, C::logical, Repr::u8),
        FRMA_TYPE(MPI_CXX_BOOL, C::logical, Repr::u8),
        FRMA_TYPE(MPI_LOGICAL, C::logical, kFortranLogical),
    // Complex
#ifdef MPI_C_FLOAT_COMPLEX
        FRMA_TYPE(MPI_C_FLOAT_COMPLEX, C::complex, Repr::c32),  // == MPI_C_COMPLEX
#endif
#ifdef MPI_C_DOUBLE_COMPLEX
        FRMA_TYPE(MPI_C_DOUBLE_COMPLEX, C::complex, Repr::c64),
#endif
#ifdef MPI_C_LONG_DOUBLE_COMPLEX
        FRMA_TYPE(MPI_C_LONG_DOUBLE_COMPLEX, C::complex, Repr::c_long),
#endif
        FRMA_TYPE(MPI_CXX_FLOAT_COMPLEX, C::complex, Repr::c32),
        FRMA_TYPE(MPI_CXX_DOUBLE_COMPLEX, C::complex, Repr::c64),
        FRMA_TYPE(MPI_CXX_LONG_DOUBLE_COMPLEX, C::complex, Repr::c_long),
        FRMA_TYPE(MPI_COMPLEX, C::complex, Repr::c32),
        FRMA_TYPE(MPI_DOUBLE_COMPLEX, C::complex, Repr::c64),
#ifdef MPI_COMPLEX4
        FRMA_TYPE(MPI_COMPLEX4, C::other, Repr::opaque, 4),
#endif
#ifdef MPI_COMPLEX8
        FRMA_TYPE(MPI_COMPLEX8, C::complex, Repr::c32),
#endif
#ifdef MPI_COMPLEX16
        FRMA_TYPE(MPI_COMPLEX16, C::complex, Repr::c64),
#endif
#ifdef MPI_COMPLEX32
        FRMA_TYPE(MPI_COMPLEX32, C::complex, Repr::c_long),
#endif
        // Byte
        FRMA_TYPE(MPI_BYTE, C::byte, Repr::u8),
        // Pair types (MAXLOC / MINLOC)
        FRMA_TYPE(MPI_FLOAT_INT, C::pair, Repr::pair_f32_i32),
        FRMA_TYPE(MPI_DOUBLE_INT, C::pair, Repr::pair_f64_i32),
        FRMA_TYPE(MPI_LONG_INT, C::pair, Repr::pair_i64_i32),
        FRMA_TYPE(MPI_2INT, C::pair, Repr::pair_i32_i32),
        FRMA_TYPE(MPI_SHORT_INT, C::pair, Repr::pair_i16_i32),
        FRMA_TYPE(MPI_LONG_DOUBLE_INT, C::pair, Repr::pair_flong_i32),
        FRMA_TYPE(MPI_2REAL, C::pair, Repr::pair_f32_f32),
        FRMA_TYPE(MPI_2DOUBLE_PRECISION, C::pair, Repr::pair_f64_f64),
        FRMA_TYPE(MPI_2INTEGER, C::pair, Repr::pair_i32_i32),
        // MPI-3.1 puts MPI_CHAR in no reduction group; MPICH and Open MPI both treat it as a
        // C integer (plain char: signed here) and codes rely on it (docs/accumulate.md).
        FRMA_TYPE(MPI_CHAR, C::c_integer, int_repr<char>()),
        // Predefined, but in no reduction group: only MPI_REPLACE and MPI_NO_OP apply.
        FRMA_TYPE(MPI_WCHAR, C::other, Repr::opaque, sizeof(wchar_t)),
        FRMA_TYPE(MPI_CHARACTER, C::other, Repr::opaque, 1),
#ifdef MPI_LOGICAL1
        FRMA_TYPE(MPI_LOGICAL1, C::other, Repr::opaque, 1),
#endif
#ifdef MPI_LOGICAL2
        FRMA_TYPE(MPI_LOGICAL2, C::other, Repr::opaque, 2),
#endif
#ifdef MPI_LOGICAL4
        FRMA_TYPE(MPI_LOGICAL4, C::other, Repr::opaque, 4),
#endif
#ifdef MPI_LOGICAL8
        FRMA_TYPE(MPI_LOGICAL8, C::other, Repr::opaque, 8),
#endif
#ifdef MPI_2COMPLEX  // Open MPI only
        FRMA_TYPE(MPI_2COMPLEX, C::other, Repr::opaque, 2 * 2 * sizeof(float)),
#endif
#ifdef MPI_2DOUBLE_COMPLEX
        FRMA_TYPE(MPI_2DOUBLE_COMPLEX, C::other, Repr::opaque, 2 * 2 * sizeof(double)),
#endif
    };
    return e;
}

#undef FRMA_TYPE

// Open addressing keyed by the handle (host_abi::handle_key: an address in Open MPI, an
// encoded integer in MPICH). Handles are neighbouring globals in libmpi (a fixed stride
// apart) or integers that differ in a few bits, which a fixed hash spreads poorly, so the constructor picks a
// multiplier that gives every type its own slot in this process (typically after a few dozen
// tries); lookups then cost one multiply, one compare and one load. Linear probing stays as
// the fallback, so correctness never depends on finding a perfect multiplier.
class TypeTable {
public:
    TypeTable() {
        std::vector<MPI_Datatype> seen;
        for (const Entry& e : predefined_entries()) {
            if (e.type == MPI_DATATYPE_NULL || std::find(seen.begin(), seen.end(), e.type) != seen.end()) {
                continue;  // aliased handles (MPI_LONG_LONG == MPI_LONG_LONG_INT, ...)
            }
            seen.push_back(e.type);
            assert(infos_.size() < kEmpty && (infos_.size() + 1) * 2 < kSlots);
            Layout l = e.repr == Repr::opaque ? Layout{e.opaque_size, e.opaque_size, e.opaque_size, 0, 0}
                                              : kLayouts[static_cast<size_t>(e.repr)];
            TypeInfo ti{};
            ti.type = e.type;
            ti.name = e.name;
            ti.cls = e.cls;
            ti.size = l.size;
            ti.extent = l.extent;
            ti.value_size = l.value_size;
            ti.index_offset = l.index_offset;
            ti.index_size = l.index_size;
            ti.native_atomic = l.extent == 1 || l.extent == 2 || l.extent == 4 || l.extent == 8;
            ti.cpu_domain = ti.native_atomic && (e.cls == TypeClass::c_integer || e.cls == TypeClass::fortran_integer ||
                                                 e.cls == TypeClass::logical || e.cls == TypeClass::byte);
            ti.multi_language = e.multi_language;
            ti.repr = e.repr;
            ti.id = static_cast<uint8_t>(infos_.size());
            ti.ops_defined = 0;
            for (unsigned k = 0; k < unsigned(OpKind::invalid); ++k)
                if (op_defined_on(OpKind(k), ti)) ti.ops_defined |= uint16_t(1u << k);
            assert(l.extent <= kMaxTypeExtent);
            infos_.push_back(ti);
        }
        uint64_t best_mult = kGolden;
        size_t best_collisions = SIZE_MAX;
        for (uint64_t k = 0; k < 4096 && best_collisions != 0; ++k) {
            uint64_t mult = kGolden + 2 * k * 0x632BE59BD9B4E019ull;  // odd, deterministic sequence
            mult_ = mult;
            std::array<bool, kSlots> used{};
            size_t collisions = 0;
            for (const TypeInfo& ti : infos_) {
                size_t s = slot_of(ti.type);
                collisions += used[s];
                used[s] = true;
            }
            if (collisions < best_collisions) {
                best_collisions = collisions;
                best_mult = mult;
            }
        }
        mult_ = best_mult;
        slot_type_.fill(MPI_DATATYPE_NULL);
        slot_index_.fill(kEmpty);
        for (const TypeInfo& ti : infos_) {
            size_t s = slot_of(ti.type);
            while (slot_index_[s] != kEmpty) s = (s + 1) & (kSlots - 1);
            slot_type_[s] = ti.type;
            slot_index_[s] = ti.id;
        }
    }

    const TypeInfo* find(MPI_Datatype t) const {
        for (size_t s = slot_of(t);; s = (s + 1) & (kSlots - 1)) {
            uint8_t i = slot_index_[s];
            if (i == kEmpty) return nullptr;
            if (slot_type_[s] == t) return &infos_[i];
        }
    }
    const TypeInfo* by_id(uint8_t id) const { return id < infos_.size() ? &infos_[id] : nullptr; }
    size_t count() const { return infos_.size(); }

private:
    static constexpr size_t kSlotBits = 9;
    static constexpr size_t kSlots = size_t{1} << kSlotBits;
    static constexpr uint8_t kEmpty = 0xff;
    static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
    size_t slot_of(MPI_Datatype t) const {
        uint64_t x = host_abi::handle_key(t);
        return static_cast<size_t>((x * mult_) >> (64 - kSlotBits));
    }
    uint64_t mult_ = kGolden;
    std::vector<TypeInfo> infos_;
    std::array<MPI_Datatype, kSlots> slot_type_;
    std::array<uint8_t, kSlots> slot_index_;
};

[[gnu::always_inline]] inline const TypeTable& type_table() {
    static const TypeTable table;  // C++11 magic static: built once, thread-safe
    return table;
}

// ---------------------------------------------------------------------------------------------
// (6) MPI-3.1 §5.9.2: which groups each op is defined on.

constexpr uint16_t bit(TypeClass c) { return static_cast<uint16_t>(1u << static_cast<unsigned>(c)); }

constexpr uint16_t allowed_classes(OpKind op) {
    using C = TypeClass;
    switch (op) {
    case OpKind::max:
    case OpKind::min:
        return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::floating);
    case OpKind::sum:
    case OpKind::prod:
        return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::floating) | bit(C::complex);
    case OpKind::land:
    case OpKind::lor:
    case OpKind::lxor:
        return bit(C::c_integer) | bit(C::logical);
    case OpKind::band:
    case OpKind::bor:
    case OpKind::bxor:
        return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::byte);
    case OpKind::maxloc:
    case OpKind::minloc:
        return bit(C::pair);
    case OpKind::replace:
    case OpKind::no_op:
        return 0xff;
    default:
        return 0;
    }
}

const char* allowed_groups_text(OpKind op) {
    switch (op) {
    case OpKind::max:
    case OpKind::min:
        return "C integer, Fortran integer, floating point, multi-language";
    case OpKind::sum:
    case OpKind::prod:
        return "C integer, Fortran integer, floating point, complex, multi-language";
    case OpKind::land:
    case OpKind::lor:
    case OpKind::lxor:
        return "C integer, logical";
    case OpKind::band:
    case OpKind::bor:
    case OpKind::bxor:
        return "C integer, Fortran integer, byte, multi-language";
    case OpKind::maxloc:
    case OpKind::minloc:
        return "pair types (MPI_FLOAT_INT, MPI_2INT, ...)";
    default:
        return "every predefined type";
    }
}

using host_abi::handle_text;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public functions.

const TypeInfo* lookup_type(MPI_Datatype t) { return type_table().find(t); }
const TypeInfo* type_by_id(uint8_t id) { return type_table().by_id(id); }
size_t type_count() { return type_table().count(); }

OpKind op_kind(MPI_Op op) {
    // Most frequent first: SUM and REPLACE dominate RMA accumulates, NO_OP is every Get_accumulate.
    if (op == MPI_SUM) return OpKind::sum;
    if (op == MPI_REPLACE) return OpKind::replace;
    if (op == MPI_NO_OP) return OpKind::no_op;
    if (op == MPI_MAX) return OpKind::max;
    if (op == MPI_MIN) return OpKind::min;
    if (op == MPI_PROD) return OpKind::prod;
    if (op == MPI_BOR) return OpKind::bor;
    if (op == MPI_BAND) return OpKind::band;
    if (op == MPI_BXOR) return OpKind::bxor;
    if (op == MPI_LAND) return OpKind::land;
    if (op == MPI_LOR) return OpKind::lor;
    if (op == MPI_LXOR) return OpKind::lxor;
    if (op == MPI_MAXLOC) return OpKind::maxloc;
    if (op == MPI_MINLOC) return OpKind::minloc;
    return OpKind::invalid;
}

MPI_Op op_handle(OpKind op) {
    switch (op) {
    case OpKind::max:
        return MPI_MAX;
    case OpKind::min:
        return MPI_MIN;
    case OpKind::sum:
        return MPI_SUM;
    case OpKind::prod:
        return MPI_PROD;
    case OpKind::land:
        return MPI_LAND;
    case OpKind::band:
        return MPI_BAND;
    case OpKind::lor:
        return MPI_LOR;
    case OpKind::bor:
        return MPI_BOR;
    case OpKind::lxor:
        return MPI_LXOR;
    case OpKind::bxor:
        return MPI_BXOR;
    case OpKind::maxloc:
        return MPI_MAXLOC;
    case OpKind::minloc:
        return MPI_MINLOC;
    case OpKind::replace:
        return MPI_REPLACE;
    case OpKind::no_op:
        return MPI_NO_OP;
    default:
        return MPI_OP_NULL;
    }
}

const char* op_name(OpKind op) {
    switch (op) {
    case OpKind::max:
        return "MPI_MAX";
    case OpKind::min:
        return "MPI_MIN";
    case OpKind::sum:
        return "MPI_SUM";
    case OpKind::prod:
        return "MPI_PROD";
    case OpKind::land:
        return "MPI_LAND";
    case OpKind::band:
        return "MPI_BAND";
    case OpKind::lor:
        return "MPI_LOR";
    case OpKind::bor:
        return "MPI_BOR";
    case OpKind::lxor:
        return "MPI_LXOR";
    case OpKind::bxor:
        return "MPI_BXOR";
    case OpKind::maxloc:
        return "MPI_MAXLOC";
    case OpKind::minloc:
        return "MPI_MINLOC";
    case OpKind::replace:
        return "MPI_REPLACE";
    case OpKind::no_op:
        return "MPI_NO_OP";
    default:
        return "unknown op";
    }
}

const char* op_name(MPI_Op op) {
    if (op == MPI_OP_NULL) return "MPI_OP_NULL";
    return op_name(op_kind(op));
}

const char* type_class_name(TypeClass cls) {
    switch (cls) {
    case TypeClass::c_integer:
        return "C integer";
    case TypeClass::fortran_integer:
        return "Fortran integer";
    case TypeClass::floating:
        return "floating point";
    case TypeClass::logical:
        return "logical";
    case TypeClass::complex:
        return "complex";
    case TypeClass::byte:
        return "byte";
    case TypeClass::pair:
        return "pair";
    default:
        return "no reduction group";
    }
}

bool op_defined_on(OpKind op, const TypeInfo& ti) {
    if (op == OpKind::replace || op == OpKind::no_op) return true;
    if (op == OpKind::invalid) return false;
    if (ti.multi_language && (op == OpKind::land || op == OpKind::lor || op == OpKind::lxor)) {
        return false;
    }
    return (allowed_classes(op) & bit(ti.cls)) != 0;
}

int check_accumulate(MPI_Op op, MPI_Datatype t, std::string* why) {
    OpKind k = op_kind(op);
    if (k == OpKind::invalid) {
        if (why != nullptr) {
            *why = op == MPI_OP_NULL
                       ? std::string("MPI_OP_NULL is not a valid accumulate op")
                       : "op " + handle_text(op) + " is not a predefined op; RMA accumulates take only predefined ops";
        }
        return MPI_ERR_OP;
    }
    const TypeInfo* ti = lookup_type(t);
    if (ti == nullptr) {
        if (why != nullptr) {
            if (t == MPI_DATATYPE_NULL)
                *why = std::string(op_name(k)) + " on MPI_DATATYPE_NULL";
            else if (t == MPI_PACKED)
                *why = std::string(op_name(k)) + " on MPI_PACKED: not usable in RMA";
            else
                *why = std::string(op_name(k)) + " on datatype " + handle_text(t) +
                       ": not a predefined datatype (pass the basic type of a derived datatype)";
        }
        return MPI_ERR_TYPE;
    }
    if (!op_defined_on(k, *ti)) {
        if (why != nullptr) {
            *why = std::string(op_name(k)) + " is not defined on " + ti->name + " (" +
                   (ti->multi_language ? "multi-language" : type_class_name(ti->cls)) + "); MPI-3.1 allows it on " +
                   allowed_groups_text(k);
        }
        return MPI_ERR_TYPE;
    }
    if (why != nullptr) *why = std::string(op_name(k)) + " on " + ti->name + ": ok";
    return MPI_SUCCESS;
}

int check_compare_and_swap(MPI_Datatype t, std::string* why) {
    const TypeInfo* ti = lookup_type(t);
    bool ok = ti != nullptr && (ti->cls == TypeClass::c_integer || ti->cls == TypeClass::fortran_integer ||
                                ti->cls == TypeClass::logical || ti->cls == TypeClass::byte);
    if (why != nullptr) {
        std::string name = ti != nullptr            ? ti->name
                           : t == MPI_DATATYPE_NULL ? "MPI_DATATYPE_NULL"
                           : t == MPI_PACKED        ? "MPI_PACKED"
                                                    : "datatype " + handle_text(t);
        *why = ok ? "MPI_Compare_and_swap on " + name + ": ok"
                  : "MPI_Compare_and_swap on " + name +
                        ": needs a C integer, Fortran integer, logical, multi-language or byte type";
    }
    return ok ? MPI_SUCCESS : MPI_ERR_TYPE;
}

void reduce_strided(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, size_t pieces,
                    const RunStrides& st, void* old_out) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    auto* o = static_cast<std::byte*>(old_out);
    if (op == OpKind::no_op || op == OpKind::replace) {
        for (size_t p = 0; p < pieces; ++p, d += st.dst, s = step(s, st.src), o = step(o, st.old_out)) {
            if (o != nullptr) copy_elements(ti, o, d, count);
            if (op == OpKind::replace) copy_elements(ti, d, s, count);
        }
        return;
    }
    KernelFn fn = kernel_for(op, ti.repr);
    assert(fn != nullptr && op_defined_on(op, ti) && "reduce(): op not valid on type; check_accumulate first");
    if (fn != nullptr) fn(d, s, count, o, pieces, st);
}

void reduce(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
    reduce_strided(op, ti, dst, src, count, 1, RunStrides{}, old_out);
}

void reduce(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
    reduce(op_kind(op), ti, dst, src, count, old_out);
}

bool reduce_atomic_strided(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, size_t pieces,
                           const RunStrides& st, void* old_out) {
    if (!atomic_possible(ti, dst)) return false;
    if (pieces > 1 && uint64_t(st.dst) % ti.extent != 0) return false;  // (extent: 1, 2, 4 or 8)
    AtomicFn fn = atomic_for(op, ti);
    if (fn == nullptr) return false;
    fn(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), count, static_cast<std::byte*>(old_out),
       pieces, st);
    return true;
}

bool reduce_atomic(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
    return reduce_atomic_strided(op, ti, dst, src, count, 1, RunStrides{}, old_out);
}

bool reduce_atomic(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
    return reduce_atomic(op_kind(op), ti, dst, src, count, old_out);
}

bool avx2_kernels_available() { return avx2_usable(); }

bool set_avx2_kernels(bool on) { return g_avx2_wanted.exchange(on, std::memory_order_relaxed) && avx2_usable(); }

bool wide_cas_available() {
#ifdef FRMA_WIDE_CAS
    return wide_cas_usable();
#else
    return false;
#endif
}

bool set_wide_cas(bool on) {
#ifdef FRMA_WIDE_CAS
    return g_wide_wanted.exchange(on, std::memory_order_relaxed) && wide_cas_usable();
#else
    (void)on;
    return false;
#endif
}

bool compare_and_swap_atomic(const TypeInfo& ti, void* dst, const void* origin, const void* compare, void* result) {
    if (!atomic_possible(ti, dst) || ti.size != ti.extent) return false;
    auto* d = static_cast<std::byte*>(dst);
    const auto* o = static_cast<const std::byte*>(origin);
    const auto* c = static_cast<const std::byte*>(compare);
    auto* r = static_cast<std::byte*>(result);
    switch (ti.extent) {
    case 1:
        cas_one<uint8_t>(d, o, c, r);
        break;
    case 2:
        cas_one<uint16_t>(d, o, c, r);
        break;
    case 4:
        cas_one<uint32_t>(d, o, c, r);
        break;
    default:
        cas_one<uint64_t>(d, o, c, r);
        break;
    }
    return true;
}

void compare_and_swap(const TypeInfo& ti, void* dst, const void* origin, const void* compare, void* result) {
    // Snapshot the inputs first, so result may share storage with origin or compare.
    std::byte old[kMaxTypeExtent]{}, cmp[kMaxTypeExtent]{}, org[kMaxTypeExtent]{};
    auto* d = static_cast<std::byte*>(dst);
    copy_data(ti, old, d);
    copy_data(ti, cmp, static_cast<const std::byte*>(compare));
    copy_data(ti, org, static_cast<const std::byte*>(origin));
    if (data_equal(ti, old, cmp)) copy_data(ti, d, org);
    copy_data(ti, static_cast<std::byte*>(result), old);
}

}  // namespace fastrma::detail
