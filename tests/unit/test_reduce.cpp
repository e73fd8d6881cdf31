// test_reduce.cpp — unit tests for src/ops/reduce: the predefined-type table, the MPI-3.1
// op × type rules, and the plain and atomic accumulate kernels.
//
// The tests keep their own description of every predefined type (group, C representation,
// size) and their own reference semantics for every op, written from the MPI standard rather
// than from the implementation, and check the implementation against them for every
// (op, type) pair: the check_accumulate verdict, the values reduce() produces, that
// reduce_atomic() gives byte-identical results (and refuses exactly where it should), that
// old_out receives the old values, and that no padding byte is ever written.
// MPI_Type_size / MPI_Type_get_extent cross-checks, user-defined ops and derived types need
// MPI_Init (done by main_unit.cpp); those parts skip themselves when MPI is not initialised.
#include "ops/reduce.hpp"

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace fastrma::detail;

static_assert(sizeof(long) == 8 && sizeof(int) == 4, "these tests describe an LP64 target");

// ---------------------------------------------------------------------------------------------
// The tests' own description of the predefined types.

enum class Group { c_int, multi, f_int, floating, logical, complex, byte, pair, other };
enum class Kind {
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    f32,
    f64,
    fl,
    c32,
    c64,
    cl,
    p_f_i,
    p_d_i,
    p_l_i,
    p_i_i,
    p_s_i,
    p_ld_i,
    p_f_f,
    p_d_d,
    raw
};

struct TT {
    MPI_Datatype type;
    const char* name;
    Group group;
    Kind kind;
    size_t raw_size;  // Kind::raw only
};

#define TT_(h, g, k) \
    TT { h, #h, Group::g, Kind::k, 0 }
#define TT_RAW(h, n) \
    TT { h, #h, Group::other, Kind::raw, n }

// Every distinct predefined datatype handle in Open MPI 4.1's mpi.h except MPI_PACKED and
// MPI_DATATYPE_NULL (which RMA cannot use). Fortran sizes are gfortran's on x86-64.
const std::vector<TT>& all_types() {
    static const std::vector<TT> v = {
        TT_(MPI_INT, c_int, i32),
        TT_(MPI_LONG, c_int, i64),
        TT_(MPI_SHORT, c_int, i16),
        TT_(MPI_UNSIGNED_SHORT, c_int, u16),
        TT_(MPI_UNSIGNED, c_int, u32),
        TT_(MPI_UNSIGNED_LONG, c_int, u64),
        TT_(MPI_LONG_LONG_INT, c_int, i64),
        TT_(MPI_UNSIGNED_LONG_LONG, c_int, u64),
        TT_(MPI_SIGNED_CHAR, c_int, i8),
        TT_(MPI_UNSIGNED_CHAR, c_int, u8),
        TT_(MPI_INT8_T, c_int, i8),
        TT_(MPI_INT16_T, c_int, i16),
        TT_(MPI_INT32_T, c_int, i32),
        TT_(MPI_INT64_T, c_int, i64),
        TT_(MPI_UINT8_T, c_int, u8),
        TT_(MPI_UINT16_T, c_int, u16),
        TT_(MPI_UINT32_T, c_int, u32),
        TT_(MPI_UINT64_T, c_int, u64),
        TT_(MPI_AINT, multi, i64),
        TT_(MPI_OFFSET, multi, i64),
        TT_(MPI_COUNT, multi, i64),
        TT_(MPI_INTEGER, f_int, i32),
        TT_(MPI_INTEGER1, f_int, i8),
        TT_(MPI_INTEGER2, f_int, i16),
        TT_(MPI_INTEGER4, f_int, i32),
        TT_(MPI_INTEGER8, f_int, i64),
        TT_(MPI_FLOAT, floating, f32),
        TT_(MPI_DOUBLE, floating, f64),
        TT_(MPI_LONG_DOUBLE, floating, fl),
        TT_(MPI_REAL, floating, f32),
        TT_(MPI_DOUBLE_PRECISION, floating, f64),
        TT_(MPI_REAL4, floating, f32),
        TT_(MPI_REAL8, floating, f64),
        TT_(MPI_REAL16, floating, fl),
        TT_(MPI_C_BOOL, logical, u8),
        TT_(MPI_CXX_BOOL, logical, u8),
        TT_(MPI_LOGICAL, logical, i32),
        TT_(MPI_C_FLOAT_COMPLEX, complex, c32),
        TT_(MPI_C_DOUBLE_COMPLEX, complex, c64),
        TT_(MPI_C_LONG_DOUBLE_COMPLEX, complex, cl),
        TT_(MPI_CXX_FLOAT_COMPLEX, complex, c32),
        TT_(MPI_CXX_DOUBLE_COMPLEX, complex, c64),
        TT_(MPI_CXX_LONG_DOUBLE_COMPLEX, complex, cl),
        TT_(MPI_COMPLEX, complex, c32),
        TT_(MPI_DOUBLE_COMPLEX, complex, c64),
        TT_(MPI_COMPLEX8, complex, c32),
        TT_(MPI_COMPLEX16, complex, c64),
        TT_(MPI_COMPLEX32, complex, cl),
        TT_(MPI_BYTE, byte, u8),
        TT_(MPI_FLOAT_INT, pair, p_f_i),
        TT_(MPI_DOUBLE_INT, pair, p_d_i),
        TT_(MPI_LONG_INT, pair, p_l_i),
        TT_(MPI_2INT, pair, p_i_i),
        TT_(MPI_SHORT_INT, pair, p_s_i),
        TT_(MPI_LONG_DOUBLE_INT, pair, p_ld_i),
        TT_(MPI_2REAL, pair, p_f_f),
        TT_(MPI_2DOUBLE_PRECISION, pair, p_d_d),
        TT_(MPI_2INTEGER, pair, p_i_i),
        TT_(MPI_CHAR, c_int, i8),  // accepted as a C integer, as MPICH and Open MPI do
        TT_RAW(MPI_WCHAR, 4),
        TT_RAW(MPI_CHARACTER, 1),
#ifdef MPI_LOGICAL1  // Open MPI's; MPICH has neither these nor the pair complexes
        TT_RAW(MPI_LOGICAL1, 1),
        TT_RAW(MPI_LOGICAL2, 2),
        TT_RAW(MPI_LOGICAL4, 4),
        TT_RAW(MPI_LOGICAL8, 8),
#endif
#ifdef MPI_2COMPLEX
        TT_RAW(MPI_2COMPLEX, 16),
        TT_RAW(MPI_2DOUBLE_COMPLEX, 32),
#endif
    };
    return v;
}

#undef TT_
#undef TT_RAW

struct NamedOp {
    MPI_Op op;
    const char* name;
};

const std::vector<NamedOp>& predefined_ops() {
    static const std::vector<NamedOp> v = {
        {MPI_MAX, "MPI_MAX"},         {MPI_MIN, "MPI_MIN"},     {MPI_SUM, "MPI_SUM"},       {MPI_PROD, "MPI_PROD"},
        {MPI_LAND, "MPI_LAND"},       {MPI_BAND, "MPI_BAND"},   {MPI_LOR, "MPI_LOR"},       {MPI_BOR, "MPI_BOR"},
        {MPI_LXOR, "MPI_LXOR"},       {MPI_BXOR, "MPI_BXOR"},   {MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"},
        {MPI_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, "MPI_NO_OP"},
    };
    return v;
}

bool mpi_ready() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

void user_fn(void*, void*, int*, MPI_Datatype*) {}

MPI_Op user_op() {
    static MPI_Op op = [] {
        MPI_Op o = MPI_OP_NULL;
        MPI_Op_create(user_fn, 1, &o);
        return o;
    }();
    return op;
}

MPI_Datatype derived_type() {
    static MPI_Datatype t = [] {
        MPI_Datatype d = MPI_DATATYPE_NULL;
        MPI_Type_contiguous(2, MPI_INT, &d);
        MPI_Type_commit(&d);
        return d;
    }();
    return t;
}

// MPI-3.1 §5.9.2, written out per op rather than per type, as the standard does.
bool op_allowed(MPI_Op op, Group g) {
    if (op == MPI_REPLACE || op == MPI_NO_OP) return true;
    if (op == MPI_MAX || op == MPI_MIN)
        return g == Group::c_int || g == Group::f_int || g == Group::floating || g == Group::multi;
    if (op == MPI_SUM || op == MPI_PROD)
        return g == Group::c_int || g == Group::f_int || g == Group::floating || g == Group::complex ||
               g == Group::multi;
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) return g == Group::c_int || g == Group::logical;
    if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR)
        return g == Group::c_int || g == Group::f_int || g == Group::byte || g == Group::multi;
    if (op == MPI_MAXLOC || op == MPI_MINLOC) return g == Group::pair;
    return false;
}

bool cas_allowed(Group g) {
    return g == Group::c_int || g == Group::f_int || g == Group::logical || g == Group::multi || g == Group::byte;
}

// ---------------------------------------------------------------------------------------------
// Typed views of elements.

template <class V, class I>
struct TPair {
    V v;
    I i;
};

template <class T>
struct IsPair : std::false_type {};
template <class V, class I>
struct IsPair<TPair<V, I>> : std::true_type {};
template <class T>
struct IsComplex : std::false_type {};
template <class T>
struct IsComplex<std::complex<T>> : std::true_type {};

template <class T>
struct Tag {
    using type = T;
};

template <class F>
void with_kind(Kind k, F&& f) {
    switch (k) {
    case Kind::i8:
        f(Tag<int8_t>{});
        break;
    case Kind::i16:
        f(Tag<int16_t>{});
        break;
    case Kind::i32:
        f(Tag<int32_t>{});
        break;
    case Kind::i64:
        f(Tag<int64_t>{});
        break;
    case Kind::u8:
        f(Tag<uint8_t>{});
        break;
    case Kind::u16:
        f(Tag<uint16_t>{});
        break;
    case Kind::u32:
        f(Tag<uint32_t>{});
        break;
    case Kind::u64:
        f(Tag<uint64_t>{});
        break;
    case Kind::f32:
        f(Tag<float>{});
        break;
    case Kind::f64:
        f(Tag<double>{});
        break;
    case Kind::fl:
        f(Tag<long double>{});
        break;
    case Kind::c32:
        f(Tag<std::complex<float>>{});
        break;
    case Kind::c64:
        f(Tag<std::complex<double>>{});
        break;
    case Kind::cl:
        f(Tag<std::complex<long double>>{});
        break;
    case Kind::p_f_i:
        f(Tag<TPair<float, int>>{});
        break;
    case Kind::p_d_i:
        f(Tag<TPair<double, int>>{});
        break;
    case Kind::p_l_i:
        f(Tag<TPair<long, int>>{});
        break;
    case Kind::p_i_i:
        f(Tag<TPair<int, int>>{});
        break;
    case Kind::p_s_i:
        f(Tag<TPair<short, int>>{});
        break;
    case Kind::p_ld_i:
        f(Tag<TPair<long double, int>>{});
        break;
    case Kind::p_f_f:
        f(Tag<TPair<float, float>>{});
        break;
    case Kind::p_d_d:
        f(Tag<TPair<double, double>>{});
        break;
    case Kind::raw:
        break;
    }
}

// Writing a long double stores its 10 x87 bytes only, so the slot's padding keeps its
// sentinel and the tests can see whether the implementation writes there.
constexpr size_t kLdBytes = std::numeric_limits<long double>::digits == 64 ? 10 : sizeof(long double);

template <class T>
void put(std::byte* p, const T& v) {
    if constexpr (IsPair<T>::value) {
        put(p, v.v);
        put(p + offsetof(T, i), v.i);
    } else if constexpr (IsComplex<T>::value) {
        using R = typename T::value_type;
        put<R>(p, v.real());
        put<R>(p + sizeof(R), v.imag());
    } else if constexpr (std::is_same_v<T, long double>) {
        std::memcpy(p, &v, kLdBytes);
    } else {
        std::memcpy(p, &v, sizeof(T));
    }
}

template <class T>
T get(const std::byte* p) {
    if constexpr (IsPair<T>::value) {
        return T{get<decltype(T::v)>(p), get<decltype(T::i)>(p + offsetof(T, i))};
    } else if constexpr (IsComplex<T>::value) {
        using R = typename T::value_type;
        return T(get<R>(p), get<R>(p + sizeof(R)));
    } else if constexpr (std::is_same_v<T, long double>) {
        long double v = 0;
        std::memcpy(&v, p, kLdBytes);
        return v;
    } else {
        T v;
        std::memcpy(&v, p, sizeof(T));
        return v;
    }
}

template <class T>
constexpr size_t t_size() {
    if constexpr (IsPair<T>::value)
        return sizeof(T::v) + sizeof(T::i);
    else
        return sizeof(T);
}

size_t kind_size(const TT& tt) {
    size_t s = tt.raw_size;
    with_kind(tt.kind, [&](auto tag) { s = t_size<typename decltype(tag)::type>(); });
    return s;
}
size_t kind_extent(const TT& tt) {
    size_t s = tt.raw_size;
    with_kind(tt.kind, [&](auto tag) { s = sizeof(typename decltype(tag)::type); });
    return s;
}

// Bytes of one element that belong to the MPI typemap (everything but pair padding).
std::vector<bool> mpi_data_mask(const TT& tt) {
    std::vector<bool> m(kind_extent(tt), true);
    with_kind(tt.kind, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (IsPair<T>::value) {
            std::fill(m.begin(), m.end(), false);
            for (size_t b = 0; b < sizeof(T::v); ++b) m[b] = true;
            for (size_t b = 0; b < sizeof(T::i); ++b) m[offsetof(T, i) + b] = true;
        }
    });
    return m;
}

// Bytes put<T> writes: the value bytes (excludes pair padding and long double tails).
template <class T>
std::vector<bool> value_mask() {
    std::vector<std::byte> a(sizeof(T), std::byte{0x00}), b(sizeof(T), std::byte{0xff});
    T v{};
    put(a.data(), v);
    put(b.data(), v);
    std::vector<bool> m(sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) m[i] = a[i] == b[i];
    return m;
}

template <class T>
bool same(const T& a, const T& b) {
    if constexpr (IsPair<T>::value) {
        return same(a.v, b.v) && same(a.i, b.i);
    } else if constexpr (IsComplex<T>::value) {
        return same(a.real(), b.real()) && same(a.imag(), b.imag());
    } else if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
        return a == b && std::signbit(a) == std::signbit(b);
    } else {
        return a == b;
    }
}

template <class T>
std::string show(const T& x) {
    // Appending, not "(" + ...: GCC 12 gives a false -Wrestrict on the latter at -O3.
    if constexpr (IsPair<T>::value) {
        std::string out("(");
        out += show(x.v);
        out += ", ";
        out += show(x.i);
        out += ")";
        return out;
    } else if constexpr (IsComplex<T>::value) {
        std::string out("(");
        out += show(x.real());
        out += ", ";
        out += show(x.imag());
        out += "i)";
        return out;
    } else if constexpr (std::is_floating_point_v<T>) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.21Lg", static_cast<long double>(x));
        return buf;
    } else if constexpr (std::is_signed_v<T>) {
        return std::to_string(static_cast<long long>(x));
    } else {
        return std::to_string(static_cast<unsigned long long>(x));
    }
}

// ---------------------------------------------------------------------------------------------
// Samples (dst, src) and the reference semantics.

template <class T>
std::vector<std::pair<T, T>> samples(Group g) {
    std::vector<std::pair<T, T>> v;
    if constexpr (std::is_integral_v<T>) {
        if (g == Group::logical) return {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
        constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
        const long long raw[][2] = {
            {0, 0},      {1, -1},          {-1, -1}, {5, -3}, {-7, 9}, {2, 3}, {123456789, 987654321},
            {-128, 127}, {0x5a5a, 0x0ff0}, {-2, 0},  {0, 7}};
        for (auto& r : raw) v.push_back({static_cast<T>(r[0]), static_cast<T>(r[1])});
        v.push_back({lo, static_cast<T>(-1)});
        v.push_back({hi, 1});
        v.push_back({hi, hi});
        v.push_back({lo, lo});
        v.push_back({lo, hi});
        v.push_back({hi, 0});
    } else if constexpr (std::is_floating_point_v<T>) {
        constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::lowest();
        v = {{1.5, 2.25},
             {-3, 0.5},
             {-2, -8},
             {0.25, 4},
             {1e30f, -1e30f},
             {-0.0, 0.0},
             {0.0, -0.0},
             {7, 7},
             {hi, 1},
             {lo, -1},
             {std::numeric_limits<T>::denorm_min(), 0},
             {-5, 0}};
    } else if constexpr (IsComplex<T>::value) {
        v = {{T(1, 2), T(3, -1)},
             {T(-2, 0.5), T(4, 8)},
             {T(0, 0), T(1, 1)},
             {T(-1, -1), T(-1, 1)},
             {T(0.5, -0.25), T(-6, 2)}};
    } else {
        static_assert(IsPair<T>::value);
        using V = decltype(T::v);
        using I = decltype(T::i);
        v = {{T{V(3), I(7)}, T{V(5), I(2)}},  // src larger
             {T{V(5), I(2)}, T{V(3), I(7)}},  // dst larger
             {T{V(4), I(9)}, T{V(4), I(2)}},  // tie, src index lower: index 2 wins
             {T{V(4), I(2)}, T{V(4), I(9)}},  // tie, dst index lower: index 2 stays
             {T{V(-1), I(0)}, T{V(-2), I(1)}},  // negatives
             {T{V(0), I(5)}, T{V(0), I(5)}},  // identical
             {T{V(-7), I(100)}, T{V(-7), I(-3)}},  // tie with a negative index
             {T{std::numeric_limits<V>::max(), I(1)}, T{std::numeric_limits<V>::lowest(), I(0)}}};
    }
    return v;
}

template <class T>
T ref(MPI_Op op, const T& d, const T& s) {
    if (op == MPI_REPLACE) return s;
    if (op == MPI_NO_OP) return d;
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        if (op == MPI_MAX) return std::max(d, s);
        if (op == MPI_MIN) return std::min(d, s);
        // Arithmetic modulo 2^64 then truncated equals arithmetic modulo 2^N.
        if (op == MPI_SUM) return static_cast<T>(static_cast<U>(static_cast<uint64_t>(d) + static_cast<uint64_t>(s)));
        if (op == MPI_PROD) return static_cast<T>(static_cast<U>(static_cast<uint64_t>(d) * static_cast<uint64_t>(s)));
        if (op == MPI_LAND) return (d != 0 && s != 0) ? 1 : 0;
        if (op == MPI_LOR) return (d != 0 || s != 0) ? 1 : 0;
        if (op == MPI_LXOR) return ((d != 0) != (s != 0)) ? 1 : 0;
        if (op == MPI_BAND) return static_cast<T>(static_cast<U>(d) & static_cast<U>(s));
        if (op == MPI_BOR) return static_cast<T>(static_cast<U>(d) | static_cast<U>(s));
        if (op == MPI_BXOR) return static_cast<T>(static_cast<U>(d) ^ static_cast<U>(s));
    } else if constexpr (std::is_floating_point_v<T>) {
        // fastrma's documented choice: dst is kept unless src is strictly larger / smaller.
        if (op == MPI_MAX) return s > d ? s : d;
        if (op == MPI_MIN) return s < d ? s : d;
        if (op == MPI_SUM) return d + s;
        if (op == MPI_PROD) return d * s;
    } else if constexpr (IsComplex<T>::value) {
        using R = typename T::value_type;
        if (op == MPI_SUM) return T(d.real() + s.real(), d.imag() + s.imag());
        if (op == MPI_PROD) {
            R re = d.real() * s.real() - d.imag() * s.imag();
            R im = d.real() * s.imag() + d.imag() * s.real();
            return T(re, im);
        }
    } else if constexpr (IsPair<T>::value) {
        // MPI-3.1 §5.9.4: the value of the winner; on equal values the smaller index.
        bool max = op == MPI_MAXLOC;
        if (max ? d.v > s.v : d.v < s.v) return d;
        if (max ? d.v < s.v : d.v > s.v) return s;
        return T{d.v, std::min(d.i, s.i)};
    }
    ADD_FAILURE() << "no reference for this op";
    return d;
}

// ---------------------------------------------------------------------------------------------
// Buffers.

constexpr std::byte kDstFill{0xa5};
constexpr std::byte kSrcFill{0x3c};
constexpr std::byte kOldFill{0x5a};

// 16-byte aligned storage (operator new guarantees it on x86-64) with an optional offset.
struct Buf {
    std::vector<std::byte> store;
    size_t off;
    Buf(size_t n, std::byte fill, size_t offset = 0) : store(n + 16, fill), off(offset) {}
    std::byte* p() { return store.data() + off; }
    const std::byte* p() const { return store.data() + off; }
};

const TypeInfo& info_of(const TT& tt) {
    const TypeInfo* ti = lookup_type(tt.type);
    EXPECT_NE(ti, nullptr) << tt.name;
    if (ti == nullptr) std::abort();
    return *ti;
}

// One arithmetic (op, type) pair: reduce() against the reference on every sample, old_out,
// padding; then reduce_atomic() byte-identical to reduce(), and with a misaligned src.
template <class T>
void check_arith(const TT& tt, const NamedOp& nop) {
    const TypeInfo& ti = info_of(tt);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name);
    auto smp = samples<T>(tt.group);
    const size_t n = smp.size(), ext = sizeof(T), bytes = n * ext;
    ASSERT_EQ(ti.extent, ext);
    const auto vmask = value_mask<T>();
    const auto dmask = mpi_data_mask(tt);

    Buf dst(bytes, kDstFill), src(bytes, kDstFill), old(bytes, kOldFill);
    for (size_t k = 0; k < n; ++k) {
        put(dst.p() + k * ext, smp[k].first);
        put(src.p() + k * ext, smp[k].second);
    }
    const Buf dst0 = dst, src0 = src;

    reduce(nop.op, ti, dst.p(), src.p(), n, old.p());
    for (size_t k = 0; k < n; ++k) {
        const T want = ref(nop.op, smp[k].first, smp[k].second);
        const T got = get<T>(dst.p() + k * ext);
        EXPECT_TRUE(same(got, want)) << "element " << k << ": " << show(smp[k].first) << " op " << show(smp[k].second)
                                     << " = " << show(got) << ", want " << show(want);
        EXPECT_TRUE(same(get<T>(old.p() + k * ext), smp[k].first)) << "old_out element " << k;
        for (size_t b = 0; b < ext; ++b) {
            if (!vmask[b]) {
                EXPECT_EQ(dst.p()[k * ext + b], kDstFill) << "padding byte " << b << " of element " << k;
            }
            if (!dmask[b]) {
                EXPECT_EQ(old.p()[k * ext + b], kOldFill) << "old_out padding byte " << b;
            }
        }
    }
    EXPECT_EQ(std::memcmp(src.p(), src0.p(), bytes), 0) << "src modified";

    // Without old_out: same result.
    Buf dst2 = dst0;
    reduce(nop.op, ti, dst2.p(), src.p(), n);
    EXPECT_EQ(std::memcmp(dst2.p(), dst.p(), bytes), 0);

    // Atomic: refuses exactly the non-native types, otherwise byte-identical results.
    for (size_t src_off : {size_t{0}, size_t{1}}) {
        Buf adst = dst0, aold(bytes, kOldFill), asrc(bytes, kDstFill, src_off);
        std::memcpy(asrc.p(), src0.p(), bytes);
        bool ok = reduce_atomic(nop.op, ti, adst.p(), asrc.p(), n, aold.p());
        EXPECT_EQ(ok, ti.native_atomic) << "src offset " << src_off;
        if (ok) {
            EXPECT_EQ(std::memcmp(adst.p(), dst.p(), bytes), 0) << "atomic result differs";
            EXPECT_EQ(std::memcmp(aold.p(), old.p(), bytes), 0) << "atomic old_out differs";
        } else {
            EXPECT_EQ(std::memcmp(adst.p(), dst0.p(), bytes), 0) << "refused but touched dst";
            EXPECT_EQ(std::memcmp(aold.store.data(), Buf(bytes, kOldFill).store.data(), bytes), 0);
        }
    }
}

// REPLACE and NO_OP on any type, by bytes: data bytes are copied, padding never.
void check_replace_noop(const TT& tt, const NamedOp& nop, size_t n = 5) {
    const TypeInfo& ti = info_of(tt);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name + ", " + std::to_string(n) + " elements");
    const size_t ext = kind_extent(tt), bytes = n * ext;
    ASSERT_EQ(ti.extent, ext);
    const auto mask = mpi_data_mask(tt);
    Buf dst(bytes, kDstFill), src(bytes, kSrcFill), old(bytes, kOldFill);
    for (size_t k = 0; k < n; ++k) {
        for (size_t b = 0; b < ext; ++b) {
            if (!mask[b]) continue;
            dst.p()[k * ext + b] = std::byte(static_cast<unsigned char>(17 * k + 3 * b + 1));
            src.p()[k * ext + b] = std::byte(static_cast<unsigned char>(29 * k + 7 * b + 200));
        }
    }
    const Buf dst0 = dst;
    reduce(nop.op, ti, dst.p(), src.p(), n, old.p());
    for (size_t i = 0; i < bytes; ++i) {
        size_t b = i % ext;
        std::byte want = !mask[b] ? kDstFill : nop.op == MPI_REPLACE ? src.p()[i] : dst0.p()[i];
        EXPECT_EQ(dst.p()[i], want) << "dst byte " << i;
        EXPECT_EQ(old.p()[i], mask[b] ? dst0.p()[i] : kOldFill) << "old_out byte " << i;
    }
    Buf adst = dst0, aold(bytes, kOldFill);
    bool ok = reduce_atomic(nop.op, ti, adst.p(), src.p(), n, aold.p());
    EXPECT_EQ(ok, ti.native_atomic);
    if (ok) {
        EXPECT_EQ(std::memcmp(adst.p(), dst.p(), bytes), 0);
        EXPECT_EQ(std::memcmp(aold.p(), old.p(), bytes), 0);
    } else {
        EXPECT_EQ(std::memcmp(adst.p(), dst0.p(), bytes), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The table.

TEST(ReduceTable, EveryPredefinedTypeIsListedWithItsLayout) {
    EXPECT_EQ(type_count(), all_types().size());
    for (const TT& tt : all_types()) {
        SCOPED_TRACE(tt.name);
        const TypeInfo* ti = lookup_type(tt.type);
        ASSERT_NE(ti, nullptr);
        EXPECT_EQ(ti->type, tt.type);
        EXPECT_STREQ(ti->name, tt.name);
        EXPECT_EQ(ti->size, kind_size(tt));
        EXPECT_EQ(ti->extent, kind_extent(tt));
        EXPECT_EQ(type_by_id(ti->id), ti);
        EXPECT_EQ(ti->multi_language, tt.group == Group::multi);
        bool native = ti->extent == 1 || ti->extent == 2 || ti->extent == 4 || ti->extent == 8;
        EXPECT_EQ(ti->native_atomic, native);
        with_kind(tt.kind, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (IsPair<T>::value) {
                EXPECT_EQ(ti->cls, TypeClass::pair);
                EXPECT_EQ(ti->value_size, sizeof(T::v));
                EXPECT_EQ(ti->index_offset, offsetof(T, i));
                EXPECT_EQ(ti->index_size, sizeof(T::i));
            } else {
                EXPECT_EQ(ti->value_size, ti->size);
                EXPECT_EQ(ti->index_size, 0u);
            }
        });
    }
    EXPECT_EQ(type_by_id(static_cast<uint8_t>(type_count())), nullptr);
}

TEST(ReduceTable, GroupsMatchTheStandard) {
    for (const TT& tt : all_types()) {
        SCOPED_TRACE(tt.name);
        const TypeInfo& ti = info_of(tt);
        switch (tt.group) {
        case Group::c_int:
        case Group::multi:
            EXPECT_EQ(ti.cls, TypeClass::c_integer);
            break;
        case Group::f_int:
            EXPECT_EQ(ti.cls, TypeClass::fortran_integer);
            break;
        case Group::floating:
            EXPECT_EQ(ti.cls, TypeClass::floating);
            break;
        case Group::logical:
            EXPECT_EQ(ti.cls, TypeClass::logical);
            break;
        case Group::complex:
            EXPECT_EQ(ti.cls, TypeClass::complex);
            break;
        case Group::byte:
            EXPECT_EQ(ti.cls, TypeClass::byte);
            break;
        case Group::pair:
            EXPECT_EQ(ti.cls, TypeClass::pair);
            break;
        case Group::other:
            EXPECT_EQ(ti.cls, TypeClass::other);
            break;
        }
    }
}

template <class Handle>
Handle not_a_predefined_type(int* somewhere) {
    if constexpr (std::is_pointer_v<Handle>) {
        return reinterpret_cast<Handle>(somewhere);
    } else {
        return static_cast<Handle>(0x4c0000ff);  // builtin datatype kind, unused index
    }
}

TEST(ReduceTable, AliasesAndNonPredefinedHandles) {
    EXPECT_EQ(lookup_type(MPI_LONG_LONG), lookup_type(MPI_LONG_LONG_INT));
    EXPECT_EQ(lookup_type(MPI_C_COMPLEX), lookup_type(MPI_C_FLOAT_COMPLEX));
#ifdef MPI_CXX_COMPLEX  // Open MPI's alias; MPICH has only MPI_CXX_FLOAT_COMPLEX
    EXPECT_EQ(lookup_type(MPI_CXX_COMPLEX), lookup_type(MPI_CXX_FLOAT_COMPLEX));
#endif
    EXPECT_EQ(lookup_type(MPI_DATATYPE_NULL), nullptr);
    EXPECT_EQ(lookup_type(MPI_PACKED), nullptr);
    // A handle that names no predefined type: an unrelated address (Open MPI) or an
    // integer of the datatype kind that MPICH never predefines.
    int dummy = 0;
    EXPECT_EQ(lookup_type(not_a_predefined_type<MPI_Datatype>(&dummy)), nullptr);
    if (mpi_ready()) {
        EXPECT_EQ(lookup_type(derived_type()), nullptr);
    }
}

TEST(ReduceTable, SizesAgreeWithOpenMpi) {
    if (!mpi_ready()) GTEST_SKIP() << "needs MPI_Init";
    for (const TT& tt : all_types()) {
        SCOPED_TRACE(tt.name);
        const TypeInfo& ti = info_of(tt);
        int size = -1;
        MPI_Aint lb = -1, extent = -1;
        ASSERT_EQ(MPI_Type_size(tt.type, &size), MPI_SUCCESS);
        ASSERT_EQ(MPI_Type_get_extent(tt.type, &lb, &extent), MPI_SUCCESS);
        EXPECT_EQ(static_cast<size_t>(size), ti.size);
        EXPECT_EQ(lb, 0);
        EXPECT_EQ(static_cast<size_t>(extent), ti.extent);
    }
}

TEST(ReduceTable, TypeLookupFromManyThreads) {
    std::vector<std::thread> th;
    std::vector<int> bad(4, 0);
    for (int t = 0; t < 4; ++t) {
        th.emplace_back([t, &bad] {
            for (int rep = 0; rep < 200; ++rep)
                for (const TT& tt : all_types()) {
                    const TypeInfo* ti = lookup_type(tt.type);
                    if (ti == nullptr || ti->type != tt.type) ++bad[t];
                }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(std::accumulate(bad.begin(), bad.end(), 0), 0);
}

TEST(ReduceOps, NamesAndKinds) {
    for (const NamedOp& o : predefined_ops()) {
        EXPECT_STREQ(op_name(o.op), o.name);
        EXPECT_NE(op_kind(o.op), OpKind::invalid);
        EXPECT_EQ(op_handle(op_kind(o.op)), o.op);
        EXPECT_STREQ(op_name(op_kind(o.op)), o.name);
    }
    EXPECT_STREQ(op_name(MPI_OP_NULL), "MPI_OP_NULL");
    EXPECT_EQ(op_kind(MPI_OP_NULL), OpKind::invalid);
    EXPECT_EQ(op_handle(OpKind::invalid), MPI_OP_NULL);
    if (mpi_ready()) {
        EXPECT_STREQ(op_name(user_op()), "unknown op");
        EXPECT_EQ(op_kind(user_op()), OpKind::invalid);
    }
}

// ---------------------------------------------------------------------------------------------
// Verdicts for every (op, type) pair.

TEST(ReduceCheck, EveryOpTypePair) {
    std::vector<NamedOp> ops = predefined_ops();
    ops.push_back({MPI_OP_NULL, "MPI_OP_NULL"});
    if (mpi_ready()) ops.push_back({user_op(), "user op"});
    size_t pairs = 0, valid = 0;
    for (const NamedOp& o : ops) {
        bool predefined = op_kind(o.op) != OpKind::invalid;
        for (const TT& tt : all_types()) {
            std::string why;
            int rc = check_accumulate(o.op, tt.type, &why);
            int want = !predefined ? MPI_ERR_OP : op_allowed(o.op, tt.group) ? MPI_SUCCESS : MPI_ERR_TYPE;
            EXPECT_EQ(rc, want) << o.name << " on " << tt.name << ": " << why;
            EXPECT_EQ(check_accumulate(o.op, tt.type, nullptr), rc);
            // The fast paths' form of the same verdict (op_kind_fast + the type's op mask).
            EXPECT_EQ(op_kind_fast(o.op), op_kind(o.op)) << o.name;
            if (const TypeInfo* ti = lookup_type(tt.type)) {
                EXPECT_EQ(op_defined_fast(op_kind_fast(o.op), *ti), rc == MPI_SUCCESS) << o.name << " on " << tt.name;
            }
            if (predefined) {
                EXPECT_NE(why.find(o.name), std::string::npos) << why;
                EXPECT_NE(why.find(tt.name), std::string::npos) << why;
                EXPECT_EQ(op_defined_on(op_kind(o.op), info_of(tt)), rc == MPI_SUCCESS);
            }
            EXPECT_FALSE(why.empty());
            ++pairs;
            valid += rc == MPI_SUCCESS;
        }
        std::vector<MPI_Datatype> not_rma = {MPI_PACKED, MPI_DATATYPE_NULL};
        if (mpi_ready()) not_rma.push_back(derived_type());
        for (MPI_Datatype t : not_rma) {
            std::string why;
            EXPECT_EQ(check_accumulate(o.op, t, &why), predefined ? MPI_ERR_TYPE : MPI_ERR_OP) << o.name << ": " << why;
            ++pairs;
        }
    }
    std::printf("[ reduce   ] %zu (op, type) verdicts checked, %zu valid\n", pairs, valid);
}

TEST(ReduceCheck, CompareAndSwapTypes) {
    for (const TT& tt : all_types()) {
        std::string why;
        int rc = check_compare_and_swap(tt.type, &why);
        EXPECT_EQ(rc, cas_allowed(tt.group) ? MPI_SUCCESS : MPI_ERR_TYPE) << tt.name << ": " << why;
        EXPECT_NE(why.find(tt.name), std::string::npos) << why;
    }
    EXPECT_EQ(check_compare_and_swap(MPI_PACKED, nullptr), MPI_ERR_TYPE);
    EXPECT_EQ(check_compare_and_swap(MPI_DATATYPE_NULL, nullptr), MPI_ERR_TYPE);
    if (mpi_ready()) {
        EXPECT_EQ(check_compare_and_swap(derived_type(), nullptr), MPI_ERR_TYPE);
    }
}

TEST(ReduceCheck, MessagesNameTheProblem) {
    std::string why;
    EXPECT_EQ(check_accumulate(MPI_BAND, MPI_DOUBLE, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("floating"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate(MPI_LAND, MPI_AINT, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("multi-language"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate(MPI_SUM, MPI_PACKED, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("MPI_PACKED"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate(MPI_OP_NULL, MPI_INT, &why), MPI_ERR_OP);
    EXPECT_NE(why.find("MPI_OP_NULL"), std::string::npos) << why;
}

// ---------------------------------------------------------------------------------------------
// Values for every valid (op, type) pair.

// A run of more than a page (kernel_body copies the old values out first from 4096 bytes on;
// pairs keep the fused loop): the samples repeated, every element against the reference,
// old_out the old values, its padding untouched.
template <class T>
void check_arith_long(const TT& tt, const NamedOp& nop) {
    const TypeInfo& ti = info_of(tt);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name + ", a long run");
    auto smp = samples<T>(tt.group);
    const size_t ext = sizeof(T), n = 4096 / ext + smp.size() + 1, bytes = n * ext;
    const auto dmask = mpi_data_mask(tt);
    Buf dst(bytes, kDstFill), src(bytes, kDstFill), old(bytes, kOldFill);
    for (size_t k = 0; k < n; ++k) {
        put(dst.p() + k * ext, smp[k % smp.size()].first);
        put(src.p() + k * ext, smp[k % smp.size()].second);
    }
    reduce(nop.op, ti, dst.p(), src.p(), n, old.p());
    size_t bad = 0;
    for (size_t k = 0; k < n && bad < 5; ++k) {
        const auto& [d, s] = smp[k % smp.size()];
        const T want = ref(nop.op, d, s), got = get<T>(dst.p() + k * ext);
        if (!same(got, want)) {
            ++bad;
            ADD_FAILURE() << "element " << k << ": " << show(d) << " op " << show(s) << " = " << show(got) << ", want "
                          << show(want);
        }
        if (!same(get<T>(old.p() + k * ext), d)) {
            ++bad;
            ADD_FAILURE() << "old_out element " << k;
        }
        for (size_t b = 0; b < ext; ++b) {
            if (!dmask[b] && old.p()[k * ext + b] != kOldFill) {
                ++bad;
                ADD_FAILURE() << "old_out padding byte " << b << " of element " << k;
            }
        }
    }
}

// reduce_strided / reduce_atomic_strided: 7 runs of 3 elements, dst at steps of +5 and -5
// elements, src at -3 (runs back to back, last first), old_out at +4: byte-identical to
// reduce() / reduce_atomic() run by run, in run order, everything between runs untouched.
// reduce_atomic_strided refuses what reduce_atomic refuses, and a dst step that misaligns a
// run, touching nothing. The bytes are a pattern, not samples: both sides run one kernel.
void check_strided(const TT& tt, const NamedOp& nop) {
    const TypeInfo& ti = info_of(tt);
    const OpKind op = op_kind(nop.op);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name + ", strided runs");
    const size_t e = ti.extent, cnt = 3, pieces = 7, span = (5 * pieces + cnt) * e;
    const auto ie = std::int64_t(e);
    for (int dir : {1, -1}) {
        for (bool atomic : {false, true}) {
            Buf dst(span, kDstFill), src(span, kSrcFill), old(span, kOldFill);
            for (size_t i = 0; i < span; ++i) {
                dst.p()[i] = std::byte(static_cast<unsigned char>(13 * i + 5));
                src.p()[i] = std::byte(static_cast<unsigned char>(7 * i + 100));
            }
            Buf rdst = dst, rold = old;
            const size_t d0 = dir > 0 ? 0 : 5 * (pieces - 1) * e, s0 = 3 * (pieces - 1) * e;
            const RunStrides st{dir * 5 * ie, -3 * ie, 4 * ie};
            const bool ok = atomic
                                ? reduce_atomic_strided(op, ti, dst.p() + d0, src.p() + s0, cnt, pieces, st, old.p())
                                : (reduce_strided(op, ti, dst.p() + d0, src.p() + s0, cnt, pieces, st, old.p()), true);
            EXPECT_EQ(ok, !atomic || ti.native_atomic) << "atomic " << atomic;
            if (!ok) {
                EXPECT_EQ(std::memcmp(dst.p(), rdst.p(), span), 0) << "refused but touched dst";
                continue;
            }
            for (size_t k = 0; k < pieces; ++k) {
                std::byte* d = rdst.p() + std::ptrdiff_t(d0) + std::ptrdiff_t(k) * st.dst;
                const std::byte* sp = src.p() + std::ptrdiff_t(s0) + std::ptrdiff_t(k) * st.src;
                std::byte* o = rold.p() + k * 4 * e;
                if (atomic)
                    EXPECT_TRUE(reduce_atomic(op, ti, d, sp, cnt, o));
                else
                    reduce(op, ti, d, sp, cnt, o);
            }
            EXPECT_EQ(std::memcmp(dst.p(), rdst.p(), span), 0) << "dst, direction " << dir << ", atomic " << atomic;
            EXPECT_EQ(std::memcmp(old.p(), rold.p(), span), 0) << "old_out, direction " << dir << ", atomic " << atomic;
        }
    }
    if (ti.native_atomic && e > 1) {
        Buf dst(span, kDstFill), src(span, kSrcFill);
        EXPECT_FALSE(reduce_atomic_strided(op, ti, dst.p(), src.p(), 1, 2, RunStrides{ie + 1, ie, 0}));
        EXPECT_EQ(std::memcmp(dst.p(), Buf(span, kDstFill).p(), span), 0);
    }
}

void check_every_valid_pair() {
    size_t checked = 0;
    for (const NamedOp& o : predefined_ops()) {
        for (const TT& tt : all_types()) {
            if (!op_allowed(o.op, tt.group)) continue;
            check_strided(tt, o);
            if (o.op == MPI_REPLACE || o.op == MPI_NO_OP) {
                check_replace_noop(tt, o);
                check_replace_noop(tt, o, 4096 / kind_extent(tt) + 3);  // past a page: two passes
            } else {
                with_kind(tt.kind, [&](auto tag) {
                    check_arith<typename decltype(tag)::type>(tt, o);
                    check_arith_long<typename decltype(tag)::type>(tt, o);
                });
            }
            ++checked;
        }
    }
    std::printf("[ reduce   ] values checked for %zu valid (op, type) pairs, short, long and strided runs\n", checked);
}

TEST(ReduceValues, EveryValidOpTypePair) { check_every_valid_pair(); }

// The same with the other set of plain kernels (baseline ISA where AVX2 is in use).
TEST(ReduceValues, EveryValidOpTypePairWithTheOtherKernels) {
    const bool avx2 = avx2_kernels_available();
    EXPECT_EQ(set_avx2_kernels(!avx2), avx2);
    check_every_valid_pair();
    set_avx2_kernels(true);
}

// Typed semantics spelled out, independent of the sample machinery.
TEST(ReduceValues, SpotChecks) {
    const TypeInfo& i32 = *lookup_type(MPI_INT);
    int d[3] = {std::numeric_limits<int>::max(), -5, 0}, s[3] = {1, -7, 0};
    reduce(MPI_SUM, i32, d, s, 3);
    EXPECT_EQ(d[0], std::numeric_limits<int>::min());  // wraps, no UB
    EXPECT_EQ(d[1], -12);

    const TypeInfo& u16 = *lookup_type(MPI_UNSIGNED_SHORT);
    uint16_t a = 65535, b = 65535;
    reduce(MPI_PROD, u16, &a, &b, 1);  // 65535² overflows a promoted int: must wrap in unsigned
    EXPECT_EQ(a, 1);

    const TypeInfo& cb = *lookup_type(MPI_C_BOOL);
    bool x[4] = {true, true, false, false}, y[4] = {true, false, true, false};
    reduce(MPI_LXOR, cb, x, y, 4);
    EXPECT_EQ(x[0], false);
    EXPECT_EQ(x[1], true);
    EXPECT_EQ(x[2], true);
    EXPECT_EQ(x[3], false);

    const TypeInfo& lg = *lookup_type(MPI_LOGICAL);
    int32_t l = 5, m = -3;  // any non-zero is true; the result is canonical 1
    reduce(MPI_LAND, lg, &l, &m, 1);
    EXPECT_EQ(l, 1);

    const TypeInfo& dc = *lookup_type(MPI_C_DOUBLE_COMPLEX);
    std::complex<double> z(1, 2), w(3, -1);
    reduce(MPI_PROD, dc, &z, &w, 1);
    EXPECT_EQ(z, std::complex<double>(5, 5));

    struct {
        double v;
        int i;
    } p{2.0, 9}, q{2.0, 4};
    reduce(MPI_MAXLOC, *lookup_type(MPI_DOUBLE_INT), &p, &q, 1);
    EXPECT_EQ(p.v, 2.0);
    EXPECT_EQ(p.i, 4);
    q = {3.0, 99};
    reduce(MPI_MINLOC, *lookup_type(MPI_DOUBLE_INT), &p, &q, 1);
    EXPECT_EQ(p.i, 4);
}

TEST(ReduceValues, ZeroCountTouchesNothing) {
    const TypeInfo& ti = *lookup_type(MPI_INT64_T);
    int64_t d = 42, s = 1, o = 7;
    reduce(MPI_SUM, ti, &d, &s, 0, &o);
    EXPECT_TRUE(reduce_atomic(MPI_SUM, ti, &d, &s, 0, &o));
    EXPECT_EQ(d, 42);
    EXPECT_EQ(o, 7);
}

TEST(ReduceValues, NoOpNeedsNoSrc) {  // Get_accumulate / Fetch_and_op with MPI_NO_OP
    for (MPI_Datatype t : {MPI_INT64_T, MPI_SHORT_INT, MPI_LONG_DOUBLE}) {
        const TypeInfo& ti = *lookup_type(t);
        alignas(16) std::byte d[64], o1[64], o2[64];
        for (size_t i = 0; i < sizeof d; ++i) d[i] = std::byte(static_cast<unsigned char>(i));
        std::memset(o1, 0, sizeof o1);
        std::memset(o2, 0, sizeof o2);
        reduce(MPI_NO_OP, ti, d, nullptr, 2, o1);
        EXPECT_EQ(reduce_atomic(MPI_NO_OP, ti, d, nullptr, 2, o2), ti.native_atomic) << ti.name;
        if (ti.native_atomic) {
            EXPECT_EQ(std::memcmp(o1, o2, sizeof o1), 0) << ti.name;
        }
        EXPECT_EQ(std::memcmp(o1, d, ti.value_size), 0) << ti.name;
    }
}

TEST(ReduceValues, SrcMayBeDst) {
    const TypeInfo& ti = *lookup_type(MPI_DOUBLE);
    double d[4] = {1, 2, 3, 4};
    reduce(MPI_SUM, ti, d, d, 4);
    EXPECT_EQ(d[3], 8.0);
    reduce(MPI_REPLACE, ti, d, d, 4);
    EXPECT_EQ(d[0], 2.0);
}

// ---------------------------------------------------------------------------------------------
// When the atomic path refuses.

TEST(ReduceAtomic, MisalignedDstIsRefused) {
    for (const TT& tt : all_types()) {
        const TypeInfo& ti = info_of(tt);
        if (!ti.native_atomic || ti.extent == 1) continue;
        SCOPED_TRACE(tt.name);
        for (size_t off = 1; off < ti.extent; ++off) {
            Buf dst(4 * ti.extent, kDstFill, off), src(4 * ti.extent, std::byte{1}), old(4 * ti.extent, kOldFill);
            EXPECT_FALSE(reduce_atomic(MPI_REPLACE, ti, dst.p(), src.p(), 4, old.p()));
            EXPECT_FALSE(reduce_atomic(MPI_NO_OP, ti, dst.p(), src.p(), 4, old.p()));
            EXPECT_EQ(dst.store, Buf(4 * ti.extent, kDstFill).store);
            EXPECT_EQ(old.store, Buf(4 * ti.extent, kOldFill).store);
            if (cas_allowed(tt.group)) {
                EXPECT_FALSE(compare_and_swap_atomic(ti, dst.p(), src.p(), src.p(), old.p()));
                EXPECT_EQ(dst.store, Buf(4 * ti.extent, kDstFill).store);
            }
        }
    }
}

TEST(ReduceAtomic, WideTypesAreNeverNative) {
    for (MPI_Datatype t : {
             MPI_LONG_DOUBLE,
             MPI_REAL16,
             MPI_C_DOUBLE_COMPLEX,
             MPI_C_LONG_DOUBLE_COMPLEX,
             MPI_DOUBLE_COMPLEX,
             MPI_DOUBLE_INT,
             MPI_LONG_INT,
             MPI_LONG_DOUBLE_INT,
             MPI_2DOUBLE_PRECISION,
#ifdef MPI_2COMPLEX
             MPI_2COMPLEX,
             MPI_2DOUBLE_COMPLEX,
#endif
         }) {
        const TypeInfo& ti = *lookup_type(t);
        EXPECT_FALSE(ti.native_atomic) << ti.name;
        alignas(64) std::byte dst[64] = {}, src[64] = {};
        EXPECT_FALSE(reduce_atomic(MPI_REPLACE, ti, dst, src, 1)) << ti.name;
    }
    // Eight-byte pairs and complex are native through one 8-byte CAS.
    for (MPI_Datatype t :
         {MPI_FLOAT_INT, MPI_2INT, MPI_SHORT_INT, MPI_2REAL, MPI_2INTEGER, MPI_C_FLOAT_COMPLEX, MPI_COMPLEX}) {
        EXPECT_TRUE(lookup_type(t)->native_atomic) << lookup_type(t)->name;
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrency: threads stand in for processes sharing a window (same CPU atomics).

constexpr int kThreads = 4;
constexpr int kPerThread = 100000;

template <class T>
void hammer_sum(MPI_Datatype type, T* target, T one) {
    const TypeInfo& ti = *lookup_type(type);
    std::vector<std::thread> th;
    std::vector<int> refused(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            for (int k = 0; k < kPerThread; ++k)
                if (!reduce_atomic(MPI_SUM, ti, target, &one, 1)) ++refused[t];
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(std::accumulate(refused.begin(), refused.end(), 0), 0);
}

TEST(ReduceConcurrent, Int64SumLosesNothing) {
    alignas(8) int64_t v = 0;
    hammer_sum<int64_t>(MPI_INT64_T, &v, 1);
    EXPECT_EQ(v, int64_t{kThreads} * kPerThread);
}

TEST(ReduceConcurrent, DoubleSumLosesNothing) {
    alignas(8) double v = 0;
    hammer_sum<double>(MPI_DOUBLE, &v, 1.0);  // CAS loop on the bit pattern
    EXPECT_EQ(v, double(kThreads) * kPerThread);
}

TEST(ReduceConcurrent, Int8SumLosesNothingAndSparesNeighbours) {
    alignas(8) int8_t bytes[8] = {11, 22, 33, 0, 55, 66, 77, 88};
    hammer_sum<int8_t>(MPI_INT8_T, &bytes[3], 1);
    EXPECT_EQ(bytes[3], static_cast<int8_t>(static_cast<uint8_t>((kThreads * kPerThread) & 0xff)));
    const int8_t rest[8] = {11, 22, 33, 0, 55, 66, 77, 88};
    for (int i = 0; i < 8; ++i)
        if (i != 3) {
            EXPECT_EQ(bytes[i], rest[i]);
        }
}

TEST(ReduceConcurrent, FetchAndAddHandsOutEveryValueOnce) {
    const TypeInfo& ti = *lookup_type(MPI_UINT32_T);
    alignas(4) uint32_t counter = 0;
    std::vector<std::vector<uint32_t>> seen(kThreads);
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            const uint32_t one = 1;
            seen[t].reserve(kPerThread);
            for (int k = 0; k < kPerThread; ++k) {
                uint32_t old = 0;
                reduce_atomic(MPI_SUM, ti, &counter, &one, 1, &old);
                seen[t].push_back(old);
            }
        });
    }
    for (auto& x : th) x.join();
    std::vector<uint32_t> all;
    for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), size_t{kThreads} * kPerThread);
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
}

// Every thread offers values with many ties; the winner is the largest (smallest) value with
// the lowest index among its holders, whatever the interleaving. Padding must survive.
template <class V>
void hammer_loc(MPI_Datatype type, MPI_Op op) {
    using P = TPair<V, int>;
    const TypeInfo& ti = *lookup_type(type);
    SCOPED_TRACE(std::string(ti.name) + " " + op_name(op));
    ASSERT_TRUE(ti.native_atomic);
    constexpr int n = kPerThread / 4;
    auto value = [](int t, int k) { return static_cast<V>((k * 7919 + t * 104729) % 3001 - 1500); };
    auto index = [](int t, int k) { return (k * 31 + t * 17) % 20011 + 5; };
    alignas(8) std::byte slot[sizeof(P)];
    std::memset(slot, 0xa5, sizeof slot);
    const bool max = op == MPI_MAXLOC;
    const P start{static_cast<V>(max ? -10000 : 10000), 1 << 30};
    put(slot, start);
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            for (int k = 0; k < n; ++k) {
                std::byte in[sizeof(P)];
                put(in, P{value(t, k), index(t, k)});
                EXPECT_TRUE(reduce_atomic(op, ti, slot, in, 1));
            }
        });
    }
    for (auto& x : th) x.join();
    P want = start;
    for (int t = 0; t < kThreads; ++t)
        for (int k = 0; k < n; ++k) want = ref(op, want, P{value(t, k), index(t, k)});
    P got = get<P>(slot);
    EXPECT_EQ(got.v, want.v);
    EXPECT_EQ(got.i, want.i);
    for (size_t b = sizeof(V); b < offsetof(P, i); ++b) EXPECT_EQ(slot[b], std::byte{0xa5}) << "padding " << b;
}

TEST(ReduceConcurrent, MaxlocAndMinlocPickTheRightWinner) {
    hammer_loc<float>(MPI_FLOAT_INT, MPI_MAXLOC);
    hammer_loc<int>(MPI_2INT, MPI_MINLOC);
    hammer_loc<short>(MPI_SHORT_INT, MPI_MAXLOC);  // 2 padding bytes inside the CAS word
    hammer_loc<short>(MPI_SHORT_INT, MPI_MINLOC);
}

// ---------------------------------------------------------------------------------------------
// Compare-and-swap.

TEST(ReduceCas, EveryAllowedType) {
    size_t checked = 0;
    for (const TT& tt : all_types()) {
        if (!cas_allowed(tt.group)) continue;
        const TypeInfo& ti = info_of(tt);
        SCOPED_TRACE(tt.name);
        ASSERT_TRUE(ti.native_atomic);
        const size_t n = ti.size;
        alignas(8) std::byte a[8], b[8], c[8];
        for (size_t i = 0; i < n; ++i) {
            bool boolish = tt.group == Group::logical;
            a[i] = std::byte(boolish ? (i == 0) : static_cast<unsigned char>(0x80 + i));
            b[i] = std::byte(boolish ? 0 : static_cast<unsigned char>(0x10 + 3 * i));
            c[i] = std::byte(boolish ? 0 : static_cast<unsigned char>(0x80 + i + (i == n - 1)));
        }
        for (bool atomic : {true, false}) {
            alignas(8) std::byte dst[8], result[8];
            auto cas = [&](const std::byte* compare) {
                std::memcpy(dst, a, n);
                std::memset(result, 0xee, sizeof result);
                if (atomic)
                    EXPECT_TRUE(compare_and_swap_atomic(ti, dst, b, compare, result));
                else
                    compare_and_swap(ti, dst, b, compare, result);
            };
            cas(a);  // match: swapped
            EXPECT_EQ(std::memcmp(dst, b, n), 0) << "atomic " << atomic;
            EXPECT_EQ(std::memcmp(result, a, n), 0);
            for (size_t i = n; i < sizeof result; ++i) EXPECT_EQ(result[i], std::byte{0xee});
            cas(c);  // mismatch: untouched
            EXPECT_EQ(std::memcmp(dst, a, n), 0) << "atomic " << atomic;
            EXPECT_EQ(std::memcmp(result, a, n), 0);
        }
        ++checked;
    }
    EXPECT_EQ(checked, 31u);  // 19 C integer (MPI_CHAR too) + 3 multi-language + 5 Fortran integer + 3 logical + byte
}

TEST(ReduceCas, ResultMayShareStorageWithCompare) {
    const TypeInfo& ti = *lookup_type(MPI_INT);
    int dst = 7, origin = 9, cmp_and_result = 7;
    compare_and_swap(ti, &dst, &origin, &cmp_and_result, &cmp_and_result);
    EXPECT_EQ(dst, 9);
    EXPECT_EQ(cmp_and_result, 7);
}

TEST(ReduceCas, ConcurrentCasIncrementsExactly) {
    const TypeInfo& ti = *lookup_type(MPI_INT64_T);
    alignas(8) int64_t v = 0;
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&] {
            for (int k = 0; k < kPerThread / 4; ++k) {
                int64_t seen = 0, want = 0;
                do {
                    want = seen + 1;
                    int64_t cmp = seen;
                    compare_and_swap_atomic(ti, &v, &want, &cmp, &seen);
                } while (seen != want - 1);
            }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(v, int64_t{kThreads} * (kPerThread / 4));
}

// ---------------------------------------------------------------------------------------------
// Long runs: reduce_atomic() takes the 16-byte block way (16 / extent whole elements per CAS)
// for the aligned blocks of a run and the per-element way for the unaligned head, the tail and
// short calls. Every valid (op, type) pair on a native type, dst at every offset its alignment
// allows inside a 16-byte block, several counts, with and without old_out, misaligned src, the
// block way on and off: byte-identical to reduce(), and no byte outside the run is touched.

// Turns the block way on or off for one scope.
struct WideCas {
    bool before;
    explicit WideCas(bool on) : before(set_wide_cas(on)) {}
    ~WideCas() { set_wide_cas(before); }
};

constexpr std::byte kGuardFill{0xc3};

void compare_runs_to_plain(const TypeInfo& ti, MPI_Op op, const std::vector<std::byte>& d0,
                           const std::vector<std::byte>& s0) {
    const size_t ext = ti.extent, total = d0.size() / ext, group = 16 / ext;
    const bool no_op = op == MPI_NO_OP;
    for (size_t n : {size_t{1}, group - 1, group, group + 1, 2 * group + 1, total}) {
        if (n == 0 || n > total) continue;
        const size_t bytes = n * ext;
        std::vector<std::byte> want_d(d0.begin(), d0.begin() + static_cast<std::ptrdiff_t>(bytes));
        std::vector<std::byte> want_o(bytes, kOldFill);
        reduce(op, ti, want_d.data(), no_op ? nullptr : s0.data(), n, want_o.data());
        for (bool wide : {true, false}) {
            WideCas w(wide);
            for (size_t off = 0; off < 16; off += ext) {
                for (bool with_old : {true, false}) {
                    SCOPED_TRACE("count " + std::to_string(n) + ", dst offset " + std::to_string(off) +
                                 (wide ? ", block way on" : ", block way off") + (with_old ? ", old_out" : ""));
                    // dst at 16 + off in a 16-aligned buffer (operator new), guards on both sides.
                    std::vector<std::byte> store(bytes + 64, kGuardFill), old(bytes + 32, kGuardFill);
                    std::byte* dst = store.data() + 16 + off;
                    std::memcpy(dst, d0.data(), bytes);
                    std::vector<std::byte> src(bytes + 8);
                    const size_t src_off = with_old ? 0 : 3;  // misaligned src too
                    std::memcpy(src.data() + src_off, s0.data(), bytes);
                    std::fill(old.begin() + 16, old.begin() + 16 + static_cast<std::ptrdiff_t>(bytes), kOldFill);
                    ASSERT_TRUE(reduce_atomic(op, ti, dst, no_op ? nullptr : src.data() + src_off, n,
                                              with_old ? old.data() + 16 : nullptr));
                    ASSERT_EQ(std::memcmp(dst, want_d.data(), bytes), 0) << "atomic result differs from reduce()";
                    for (size_t i = 0; i < 16 + off; ++i) ASSERT_EQ(store[i], kGuardFill) << "byte before dst touched";
                    for (size_t i = 16 + off + bytes; i < store.size(); ++i)
                        ASSERT_EQ(store[i], kGuardFill) << "byte after dst touched";
                    if (with_old) {
                        ASSERT_EQ(std::memcmp(old.data() + 16, want_o.data(), bytes), 0)
                            << "old_out differs from reduce()";
                        for (size_t i = 0; i < 16; ++i) ASSERT_EQ(old[i], kGuardFill);
                        for (size_t i = 16 + bytes; i < old.size(); ++i) ASSERT_EQ(old[i], kGuardFill);
                    }
                }
            }
        }
    }
}

template <class T>
void check_long_run(const TT& tt, const NamedOp& nop) {
    const TypeInfo& ti = info_of(tt);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name);
    const auto smp = samples<T>(tt.group);
    const size_t ns = smp.size(), ext = sizeof(T), n = 4 * (16 / ext) + 3;
    std::vector<std::byte> d0(n * ext, kDstFill), s0(n * ext, kDstFill);
    for (size_t k = 0; k < n; ++k) {  // every sample, then mixed pairs of them
        put(d0.data() + k * ext, smp[k % ns].first);
        put(s0.data() + k * ext, k < ns ? smp[k].second : smp[(k * 5 + 1) % ns].second);
    }
    compare_runs_to_plain(ti, nop.op, d0, s0);
}

void check_long_run_bytes(const TT& tt, const NamedOp& nop) {  // REPLACE, NO_OP
    const TypeInfo& ti = info_of(tt);
    SCOPED_TRACE(std::string(nop.name) + " on " + tt.name);
    const size_t ext = ti.extent, n = 4 * (16 / ext) + 3;
    const auto mask = mpi_data_mask(tt);
    std::vector<std::byte> d0(n * ext, kDstFill), s0(n * ext, kSrcFill);
    for (size_t i = 0; i < n * ext; ++i) {
        if (!mask[i % ext]) continue;
        d0[i] = std::byte(static_cast<unsigned char>(13 * i + 1));
        s0[i] = std::byte(static_cast<unsigned char>(71 * i + 200));
    }
    compare_runs_to_plain(ti, nop.op, d0, s0);
}

TEST(ReduceAtomic, LongRunsMatchReduceEveryValidOpTypePair) {
    size_t checked = 0;
    for (const NamedOp& o : predefined_ops()) {
        for (const TT& tt : all_types()) {
            if (!op_allowed(o.op, tt.group) || !info_of(tt).native_atomic) continue;
            if (o.op == MPI_REPLACE || o.op == MPI_NO_OP) {
                check_long_run_bytes(tt, o);
            } else {
                with_kind(tt.kind, [&](auto tag) { check_long_run<typename decltype(tag)::type>(tt, o); });
            }
            ++checked;
        }
    }
    std::printf("[ reduce   ] long atomic runs checked for %zu (op, native type) pairs\n", checked);
    EXPECT_GT(checked, 200u);
}

TEST(ReduceAtomic, WideCasSwitch) {
    const bool avail = wide_cas_available();
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    EXPECT_TRUE(avail) << "every x86-64 CPU this runs on has cmpxchg16b";
#endif
    EXPECT_EQ(set_wide_cas(false), avail);
    EXPECT_FALSE(set_wide_cas(true));
    EXPECT_EQ(set_wide_cas(true), avail);
}

// Arithmetic ops are refused on a misaligned dst just as REPLACE / NO_OP are (the caller then
// locks): whole runs and single elements, and nothing is touched.
TEST(ReduceAtomic, MisalignedDstIsRefusedForEveryOp) {
    struct Case {
        MPI_Datatype type;
        MPI_Op op;
    };
    for (Case c : {Case{MPI_DOUBLE, MPI_SUM}, Case{MPI_INT64_T, MPI_SUM}, Case{MPI_INT32_T, MPI_MAX},
                   Case{MPI_UINT16_T, MPI_BAND}, Case{MPI_FLOAT, MPI_MIN}, Case{MPI_2INT, MPI_MAXLOC},
                   Case{MPI_SHORT_INT, MPI_MINLOC}, Case{MPI_C_FLOAT_COMPLEX, MPI_PROD}}) {
        const TypeInfo& ti = *lookup_type(c.type);
        SCOPED_TRACE(std::string(op_name(c.op)) + " on " + ti.name);
        for (size_t n : {size_t{1}, size_t{40}}) {
            for (size_t off = 1; off < ti.extent; ++off) {
                Buf dst(n * ti.extent, kDstFill, off), src(n * ti.extent, std::byte{1}), old(n * ti.extent, kOldFill);
                EXPECT_FALSE(reduce_atomic(c.op, ti, dst.p(), src.p(), n, old.p()));
                EXPECT_FALSE(reduce_atomic(c.op, ti, dst.p(), src.p(), n));
                EXPECT_EQ(dst.store, Buf(n * ti.extent, kDstFill).store);
                EXPECT_EQ(old.store, Buf(n * ti.extent, kOldFill).store);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A MAX or MIN that loses (and a tie, a NaN in src, a MAXLOC whose dst wins, NO_OP) writes
// nothing, in the block way and the per-element way: the target is a read-only page, and any
// store or locked instruction on it would fault.

sigjmp_buf g_fault_jump;
void on_fault(int) { siglongjmp(g_fault_jump, 1); }

// Runs f with SIGSEGV / SIGBUS caught; false if f faulted.
template <class F>
bool without_fault(F&& f) {
    struct sigaction sa {
    }, old_segv{}, old_bus{};
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    bool ok = false;
    if (sigsetjmp(g_fault_jump, 1) == 0) {
        f();
        ok = true;
    }
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    return ok;
}

template <class T>
void check_no_write(MPI_Datatype type, MPI_Op op, T (*dst_at)(size_t), T (*src_at)(size_t)) {
    const TypeInfo& ti = *lookup_type(type);
    SCOPED_TRACE(std::string(op_name(op)) + " on " + ti.name);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), n = 100;
    ASSERT_GE(page, 2 * n * sizeof(T));
    void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    auto* base = static_cast<std::byte*>(m);
    std::vector<std::byte> src(n * sizeof(T) + sizeof(T)), want((n + 1) * sizeof(T));
    for (size_t i = 0; i < n + 1; ++i) {
        put(base + i * sizeof(T), dst_at(i));
        put(src.data() + i * sizeof(T), src_at(i));
    }
    std::memcpy(want.data(), base, want.size());
    ASSERT_EQ(mprotect(m, page, PROT_READ), 0);
    for (bool wide : {true, false}) {
        WideCas w(wide);
        for (size_t off : {size_t{0}, sizeof(T)}) {  // 16-aligned, and with a head element
            for (size_t count : {size_t{1}, n}) {
                std::vector<std::byte> old(count * sizeof(T), kOldFill);
                bool refused = false;
                EXPECT_TRUE(without_fault([&] {
                    refused = !reduce_atomic(op, ti, base + off, src.data(), count, old.data());
                    refused |= !reduce_atomic(op, ti, base + off, src.data(), count);
                })) << "a losing "
                    << op_name(op) << " wrote: count " << count << ", offset " << off
                    << (wide ? ", block way on" : ", block way off");
                EXPECT_FALSE(refused);
                EXPECT_EQ(std::memcmp(old.data(), want.data() + off, count * sizeof(T)), 0) << "old_out";
            }
        }
    }
    EXPECT_EQ(std::memcmp(base, want.data(), want.size()), 0);
    munmap(m, page);
}

TEST(ReduceAtomic, LosingMaxAndMinWriteNothing) {
    check_no_write<int32_t>(
        MPI_INT32_T, MPI_MAX, [](size_t i) { return int32_t(1000 + i); },
        [](size_t i) { return int32_t(i % 3 == 0 ? 1000 + i : i); });  // ties too
    check_no_write<int32_t>(
        MPI_INT32_T, MPI_MIN, [](size_t i) { return int32_t(-5 - i); }, [](size_t i) { return int32_t(i); });
    check_no_write<uint8_t>(
        MPI_UINT8_T, MPI_MAX, [](size_t) { return uint8_t{255}; }, [](size_t i) { return uint8_t(i); });
    check_no_write<int16_t>(
        MPI_SHORT, MPI_MIN, [](size_t i) { return int16_t(-30000 + i); }, [](size_t i) { return int16_t(i); });
    check_no_write<double>(
        MPI_DOUBLE, MPI_MAX, [](size_t i) { return double(i); },
        [](size_t i) { return i % 2 ? std::nan("") : -1.0 - double(i); });  // NaN in src ignored
    check_no_write<double>(
        MPI_DOUBLE, MPI_MIN, [](size_t i) { return i % 4 ? -double(i) : std::nan(""); },
        [](size_t i) { return double(i); });  // NaN in dst stays
    check_no_write<float>(
        MPI_FLOAT, MPI_MIN, [](size_t) { return -0.0f; },
        [](size_t) { return 0.0f; });  // -0.0 vs 0.0: not smaller, kept
    check_no_write<uint64_t>(
        MPI_UINT64_T, MPI_MAX, [](size_t i) { return uint64_t(i) << 40; },
        [](size_t i) { return uint64_t(i) << 40; });  // all ties
    check_no_write<uint32_t>(
        MPI_UINT32_T, MPI_NO_OP, [](size_t i) { return uint32_t(i * 77); }, [](size_t) { return uint32_t{0}; });
    using P = TPair<int, int>;
    check_no_write<P>(
        MPI_2INT, MPI_MAXLOC,
        [](size_t i) {
            return P{int(100 + i), int(i)};
        },
        [](size_t i) {
            return P{int(i), 0};
        });
}

// ---------------------------------------------------------------------------------------------
// Mixed widths: a long SUM (16-byte block CASes) against single-element atomics on the same
// elements — reduce_atomic with count 1 and raw __atomic_fetch_add of the element's own width,
// which is what the engine's fetch_and_op fast path does. No update may be lost.

template <class T>
void hammer_mixed(MPI_Datatype type) {
    const TypeInfo& ti = *lookup_type(type);
    SCOPED_TRACE(ti.name);
    using U = std::conditional_t<sizeof(T) == 1, uint8_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    constexpr size_t n = 64;
    constexpr int rounds = 20000, hits = 100000;
    alignas(64) T target[n] = {};
    std::vector<T> ones(n, T(1));
    WideCas w(true);
    std::atomic<int> ready{0};
    auto start = [&] {  // all threads begin together, so the block CASes meet the others
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();
    };
    std::vector<std::thread> th;
    th.emplace_back([&] {
        start();
        for (int r = 0; r < rounds; ++r) EXPECT_TRUE(reduce_atomic(MPI_SUM, ti, target, ones.data(), n));
    });
    for (int t = 1; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            start();
            const T one = 1;
            for (int k = 0; k < hits; ++k) {
                size_t i = static_cast<size_t>(k * 13 + t * 5) % n;
                if constexpr (std::is_integral_v<T>) {
                    if (k % 2 == 0) {
                        __atomic_fetch_add(reinterpret_cast<U*>(&target[i]), U{1}, __ATOMIC_SEQ_CST);
                        continue;
                    }
                }
                EXPECT_TRUE(reduce_atomic(MPI_SUM, ti, &target[i], &one, 1));
            }
        });
    }
    for (auto& x : th) x.join();
    std::vector<long long> want(n, rounds);
    for (int t = 1; t < kThreads; ++t)
        for (int k = 0; k < hits; ++k) ++want[static_cast<size_t>(k * 13 + t * 5) % n];
    for (size_t i = 0; i < n; ++i) {
        if constexpr (sizeof(T) == 1)
            EXPECT_EQ(target[i], static_cast<T>(want[i] & 0xff)) << "element " << i;
        else
            EXPECT_EQ(target[i], static_cast<T>(want[i])) << "element " << i;
    }
}

TEST(ReduceConcurrent, BlockCasAndElementAtomicsLoseNothing) {
    hammer_mixed<int64_t>(MPI_INT64_T);
    hammer_mixed<double>(MPI_DOUBLE);  // integer values: exact in any order
    hammer_mixed<uint32_t>(MPI_UINT32_T);
    hammer_mixed<uint8_t>(MPI_UINT8_T);  // 1-byte lock xadd inside a 16-byte CAS block
}

}  // namespace
