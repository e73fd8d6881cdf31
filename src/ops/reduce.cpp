// reduce.cpp — the predefined-type table, the op × type rules, and the accumulate kernels.
//
// Layout of this file: (1) element codecs, which read and write only the data bytes of an
// element; (2) combine<K, T>, the MPI meaning of each op on one C type; (3) a constexpr table
// of kernels indexed by [op][Repr], nullptr where the op means nothing on that representation;
// (4) the atomic drivers, which reuse those same kernels on a private copy of the word inside a
// CAS loop, so the locked and the atomic paths cannot disagree on a result; (5) the datatype
// table and its pointer-keyed hash; (6) the MPI rules of §5.9.2 / §11.3.4.
//
// Invariants: signed integer arithmetic wraps (computed in the unsigned type, never UB);
// logical results are exactly 0 or 1 (so MPI_C_BOOL stays a valid bool); MAXLOC/MINLOC keep
// the lower index on ties; floating MIN/MAX keep dst unless src compares strictly smaller /
// larger (so a NaN in src is ignored and a NaN in dst stays). All atomics are GCC __atomic
// builtins with seq_cst order on plain memory: on x86-64 every RMW is a full barrier anyway
// and a seq_cst load is a plain load, so the stronger order costs nothing there.
#include "ops/reduce.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <complex>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace fastrma::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// (1) Element codecs.

// x87 extended precision keeps 10 significant bytes in a 16-byte slot. Arithmetic results are
// written back with only those bytes so the slot's padding is never touched (as a C store of
// a long double would do).
constexpr size_t kLongDoubleDataBytes =
    std::numeric_limits<long double>::digits == 64 ? 10 : sizeof(long double);

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
  static std::complex<T> load(const std::byte* p) {
    return {Codec<T>::load(p), Codec<T>::load(p + sizeof(T))};
  }
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
  static Pair<V, I> load(const std::byte* p) {
    return {Codec<V>::load(p), Codec<I>::load(p + index_offset)};
  }
  static void store(std::byte* p, const Pair<V, I>& x) {
    Codec<V>::store(p, x.v);
    Codec<I>::store(p + index_offset, x.i);
  }
};

template <Repr R> struct ReprType;
template <> struct ReprType<Repr::i8> { using type = int8_t; };
template <> struct ReprType<Repr::i16> { using type = int16_t; };
template <> struct ReprType<Repr::i32> { using type = int32_t; };
template <> struct ReprType<Repr::i64> { using type = int64_t; };
template <> struct ReprType<Repr::u8> { using type = uint8_t; };
template <> struct ReprType<Repr::u16> { using type = uint16_t; };
template <> struct ReprType<Repr::u32> { using type = uint32_t; };
template <> struct ReprType<Repr::u64> { using type = uint64_t; };
template <> struct ReprType<Repr::f32> { using type = float; };
template <> struct ReprType<Repr::f64> { using type = double; };
template <> struct ReprType<Repr::f_long> { using type = long double; };
template <> struct ReprType<Repr::c32> { using type = std::complex<float>; };
template <> struct ReprType<Repr::c64> { using type = std::complex<double>; };
template <> struct ReprType<Repr::c_long> { using type = std::complex<long double>; };
template <> struct ReprType<Repr::pair_f32_i32> { using type = Pair<float, int>; };
template <> struct ReprType<Repr::pair_f64_i32> { using type = Pair<double, int>; };
template <> struct ReprType<Repr::pair_i64_i32> { using type = Pair<long, int>; };
template <> struct ReprType<Repr::pair_i32_i32> { using type = Pair<int, int>; };
template <> struct ReprType<Repr::pair_i16_i32> { using type = Pair<short, int>; };
template <> struct ReprType<Repr::pair_flong_i32> { using type = Pair<long double, int>; };
template <> struct ReprType<Repr::pair_f32_f32> { using type = Pair<float, float>; };
template <> struct ReprType<Repr::pair_f64_f64> { using type = Pair<double, double>; };
template <> struct ReprType<Repr::opaque> { using type = void; };

constexpr size_t kNumRepr = static_cast<size_t>(Repr::count_);
constexpr size_t kNumArithOps = static_cast<size_t>(OpKind::replace);  // max .. minloc

template <class T> inline constexpr bool is_complex_v = false;
template <class T> inline constexpr bool is_complex_v<std::complex<T>> = true;
template <class T> inline constexpr bool is_pair_v = false;
template <class V, class I> inline constexpr bool is_pair_v<Pair<V, I>> = true;

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
    if constexpr (std::is_integral_v<T>) return wrap_add(d, s);
    else return d + s;
  } else if constexpr (K == OpKind::prod) {
    if constexpr (std::is_integral_v<T>) return wrap_mul(d, s);
    else return d * s;
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
// (3) Kernels. The stride is a compile-time constant (it is fixed by the representation),
// which lets the compiler vectorise the contiguous cases.

using KernelFn = void (*)(std::byte* dst, const std::byte* src, size_t count);

template <OpKind K, class T>
void kernel(std::byte* dst, const std::byte* src, size_t count) {
  using C = Codec<T>;
  for (size_t k = 0; k < count; ++k, dst += C::extent, src += C::extent) {
    C::store(dst, combine<K, T>(C::load(dst), C::load(src)));
  }
}

template <OpKind K, size_t R>
constexpr KernelFn pick_kernel() {
  using T = typename ReprType<static_cast<Repr>(R)>::type;
  if constexpr (has_kernel<K, T>()) return &kernel<K, T>;
  else return nullptr;
}

template <size_t Op, size_t... Rs>
constexpr std::array<KernelFn, kNumRepr> kernel_row(std::index_sequence<Rs...>) {
  return {pick_kernel<static_cast<OpKind>(Op), Rs>()...};
}

template <size_t... Ops>
constexpr std::array<std::array<KernelFn, kNumRepr>, kNumArithOps> kernel_table(std::index_sequence<Ops...>) {
  return {kernel_row<Ops>(std::make_index_sequence<kNumRepr>{})...};
}

constexpr auto kKernels = kernel_table(std::make_index_sequence<kNumArithOps>{});

KernelFn kernel_for(OpKind op, Repr r) {
  auto o = static_cast<size_t>(op), i = static_cast<size_t>(r);
  return (o < kNumArithOps && i < kNumRepr) ? kKernels[o][i] : nullptr;
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
    std::memmove(dst, src, count * ti.size);  // memmove: dst == src is allowed
    return;
  }
  for (size_t k = 0; k < count; ++k) copy_data(ti, dst + k * ti.extent, src + k * ti.extent);
}

// ---------------------------------------------------------------------------------------------
// (4) Atomic drivers.

// may_alias: the window memory holds doubles, pairs, ... that we access as unsigned words.
template <class U> struct AliasWord;
template <> struct AliasWord<uint8_t> { typedef uint8_t __attribute__((may_alias)) type; };
template <> struct AliasWord<uint16_t> { typedef uint16_t __attribute__((may_alias)) type; };
template <> struct AliasWord<uint32_t> { typedef uint32_t __attribute__((may_alias)) type; };
template <> struct AliasWord<uint64_t> { typedef uint64_t __attribute__((may_alias)) type; };

static_assert(__atomic_always_lock_free(1, 0) && __atomic_always_lock_free(2, 0) &&
                  __atomic_always_lock_free(4, 0) && __atomic_always_lock_free(8, 0),
              "native_atomic assumes lock-free CAS of 1, 2, 4 and 8 bytes");

enum class AtomicWay : uint8_t { load, exchange, fetch_add, fetch_and, fetch_or, fetch_xor, cas_loop };

bool is_integer_repr(Repr r) { return r <= Repr::u64; }

AtomicWay atomic_way(OpKind op, const TypeInfo& ti) {
  bool whole_word = ti.size == ti.extent;  // no padding inside the word
  switch (op) {
    case OpKind::no_op: return AtomicWay::load;
    case OpKind::replace: return whole_word ? AtomicWay::exchange : AtomicWay::cas_loop;
    case OpKind::sum: return is_integer_repr(ti.repr) ? AtomicWay::fetch_add : AtomicWay::cas_loop;
    case OpKind::band: return is_integer_repr(ti.repr) ? AtomicWay::fetch_and : AtomicWay::cas_loop;
    case OpKind::bor: return is_integer_repr(ti.repr) ? AtomicWay::fetch_or : AtomicWay::cas_loop;
    case OpKind::bxor: return is_integer_repr(ti.repr) ? AtomicWay::fetch_xor : AtomicWay::cas_loop;
    default: return AtomicWay::cas_loop;
  }
}

template <class U>
void atomic_elements(OpKind op, AtomicWay way, KernelFn fn, const TypeInfo& ti, std::byte* dst,
                     const std::byte* src, size_t count, std::byte* old_out) {
  using Word = typename AliasWord<U>::type;
  constexpr size_t w = sizeof(U);
  for (size_t k = 0; k < count; ++k) {
    Word* p = reinterpret_cast<Word*>(dst + k * w);
    // MPI_NO_OP (Get_accumulate, Fetch_and_op) may come without an origin buffer at all.
    const std::byte* s = src != nullptr ? src + k * w : nullptr;
    // Whole-word operand for the fetch-op and exchange ways (never used with padding: those
    // ways are only chosen when size == extent). src may be misaligned, hence memcpy.
    U operand = 0;
    if (way != AtomicWay::load && way != AtomicWay::cas_loop) std::memcpy(&operand, s, w);
    U old;
    switch (way) {
      case AtomicWay::load: old = __atomic_load_n(p, __ATOMIC_SEQ_CST); break;
      case AtomicWay::exchange: old = __atomic_exchange_n(p, operand, __ATOMIC_SEQ_CST); break;
      case AtomicWay::fetch_add: old = __atomic_fetch_add(p, operand, __ATOMIC_SEQ_CST); break;
      case AtomicWay::fetch_and: old = __atomic_fetch_and(p, operand, __ATOMIC_SEQ_CST); break;
      case AtomicWay::fetch_or: old = __atomic_fetch_or(p, operand, __ATOMIC_SEQ_CST); break;
      case AtomicWay::fetch_xor: old = __atomic_fetch_xor(p, operand, __ATOMIC_SEQ_CST); break;
      case AtomicWay::cas_loop:
      default: {
        old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
        for (;;) {
          // The new word starts as the old one, so padding bytes travel through unchanged;
          // the kernel (the same one reduce() uses) writes only the data bytes.
          U next = old;
          auto* nb = reinterpret_cast<std::byte*>(&next);
          if (op == OpKind::replace) copy_data(ti, nb, s);
          else fn(nb, s, 1);
          // Equal bits: nothing to write; the load above is the linearisation point. Bits,
          // not values, are compared, so -0.0 vs 0.0 and NaN payloads are handled exactly.
          if (next == old) break;
          if (__atomic_compare_exchange_n(p, &old, next, /*weak=*/true, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST)) {
            break;
          }
        }
      }
    }
    if (old_out != nullptr) copy_data(ti, old_out + k * w, reinterpret_cast<const std::byte*>(&old));
  }
}

template <class U>
void cas_one(std::byte* dst, const std::byte* origin, const std::byte* compare, std::byte* result) {
  using Word = typename AliasWord<U>::type;
  U expected, desired;
  std::memcpy(&expected, compare, sizeof(U));
  std::memcpy(&desired, origin, sizeof(U));
  // On failure `expected` receives the current value; on success it already equals it.
  __atomic_compare_exchange_n(reinterpret_cast<Word*>(dst), &expected, desired, /*weak=*/false,
                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
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
  if constexpr (std::is_void_v<T>) return Layout{0, 0, 0, 0, 0};  // opaque: size from the entry
  else return layout_of<T>();
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
    case 1: return s ? Repr::i8 : Repr::u8;
    case 2: return s ? Repr::i16 : Repr::u16;
    case 4: return s ? Repr::i32 : Repr::u32;
    default: static_assert(sizeof(T) <= 8); return s ? Repr::i64 : Repr::u64;
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

#define FRMA_TYPE(h, ...) Entry{h, #h, __VA_ARGS__}

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
      // Predefined, but in no reduction group: only MPI_REPLACE and MPI_NO_OP apply.
      FRMA_TYPE(MPI_CHAR, C::other, Repr::opaque, sizeof(char)),
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
      FRMA_TYPE(MPI_2COMPLEX, C::other, Repr::opaque, 2 * 2 * sizeof(float)),
      FRMA_TYPE(MPI_2DOUBLE_COMPLEX, C::other, Repr::opaque, 2 * 2 * sizeof(double)),
  };
  return e;
}

#undef FRMA_TYPE

// Open addressing keyed by the handle's address. Handles are neighbouring globals in libmpi
// (a fixed stride apart), which a fixed hash spreads poorly, so the constructor picks a
// multiplier that gives every type its own slot in this process (typically after a few dozen
// tries); lookups then cost one multiply, one compare and one load. Linear probing stays as
// the fallback, so correctness never depends on finding a perfect multiplier.
class TypeTable {
 public:
  TypeTable() {
    std::vector<MPI_Datatype> seen;
    for (const Entry& e : predefined_entries()) {
      if (e.type == MPI_DATATYPE_NULL ||
          std::find(seen.begin(), seen.end(), e.type) != seen.end()) {
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
      ti.multi_language = e.multi_language;
      ti.repr = e.repr;
      ti.id = static_cast<uint8_t>(infos_.size());
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
    slot_type_.fill(nullptr);
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
    auto x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t));
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
    case OpKind::min: return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::floating);
    case OpKind::sum:
    case OpKind::prod:
      return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::floating) | bit(C::complex);
    case OpKind::land:
    case OpKind::lor:
    case OpKind::lxor: return bit(C::c_integer) | bit(C::logical);
    case OpKind::band:
    case OpKind::bor:
    case OpKind::bxor: return bit(C::c_integer) | bit(C::fortran_integer) | bit(C::byte);
    case OpKind::maxloc:
    case OpKind::minloc: return bit(C::pair);
    case OpKind::replace:
    case OpKind::no_op: return 0xff;
    default: return 0;
  }
}

const char* allowed_groups_text(OpKind op) {
  switch (op) {
    case OpKind::max:
    case OpKind::min: return "C integer, Fortran integer, floating point, multi-language";
    case OpKind::sum:
    case OpKind::prod: return "C integer, Fortran integer, floating point, complex, multi-language";
    case OpKind::land:
    case OpKind::lor:
    case OpKind::lxor: return "C integer, logical";
    case OpKind::band:
    case OpKind::bor:
    case OpKind::bxor: return "C integer, Fortran integer, byte, multi-language";
    case OpKind::maxloc:
    case OpKind::minloc: return "pair types (MPI_FLOAT_INT, MPI_2INT, ...)";
    default: return "every predefined type";
  }
}

std::string handle_text(const void* h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", h);
  return buf;
}

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
    case OpKind::max: return MPI_MAX;
    case OpKind::min: return MPI_MIN;
    case OpKind::sum: return MPI_SUM;
    case OpKind::prod: return MPI_PROD;
    case OpKind::land: return MPI_LAND;
    case OpKind::band: return MPI_BAND;
    case OpKind::lor: return MPI_LOR;
    case OpKind::bor: return MPI_BOR;
    case OpKind::lxor: return MPI_LXOR;
    case OpKind::bxor: return MPI_BXOR;
    case OpKind::maxloc: return MPI_MAXLOC;
    case OpKind::minloc: return MPI_MINLOC;
    case OpKind::replace: return MPI_REPLACE;
    case OpKind::no_op: return MPI_NO_OP;
    default: return MPI_OP_NULL;
  }
}

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::max: return "MPI_MAX";
    case OpKind::min: return "MPI_MIN";
    case OpKind::sum: return "MPI_SUM";
    case OpKind::prod: return "MPI_PROD";
    case OpKind::land: return "MPI_LAND";
    case OpKind::band: return "MPI_BAND";
    case OpKind::lor: return "MPI_LOR";
    case OpKind::bor: return "MPI_BOR";
    case OpKind::lxor: return "MPI_LXOR";
    case OpKind::bxor: return "MPI_BXOR";
    case OpKind::maxloc: return "MPI_MAXLOC";
    case OpKind::minloc: return "MPI_MINLOC";
    case OpKind::replace: return "MPI_REPLACE";
    case OpKind::no_op: return "MPI_NO_OP";
    default: return "unknown op";
  }
}

const char* op_name(MPI_Op op) {
  if (op == MPI_OP_NULL) return "MPI_OP_NULL";
  return op_name(op_kind(op));
}

const char* type_class_name(TypeClass cls) {
  switch (cls) {
    case TypeClass::c_integer: return "C integer";
    case TypeClass::fortran_integer: return "Fortran integer";
    case TypeClass::floating: return "floating point";
    case TypeClass::logical: return "logical";
    case TypeClass::complex: return "complex";
    case TypeClass::byte: return "byte";
    case TypeClass::pair: return "pair";
    default: return "no reduction group";
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
                 : "op " + handle_text(op) +
                       " is not a predefined op; RMA accumulates take only predefined ops";
    }
    return MPI_ERR_OP;
  }
  const TypeInfo* ti = lookup_type(t);
  if (ti == nullptr) {
    if (why != nullptr) {
      if (t == MPI_DATATYPE_NULL) *why = std::string(op_name(k)) + " on MPI_DATATYPE_NULL";
      else if (t == MPI_PACKED) *why = std::string(op_name(k)) + " on MPI_PACKED: not usable in RMA";
      else
        *why = std::string(op_name(k)) + " on datatype " + handle_text(t) +
               ": not a predefined datatype (pass the basic type of a derived datatype)";
    }
    return MPI_ERR_TYPE;
  }
  if (!op_defined_on(k, *ti)) {
    if (why != nullptr) {
      *why = std::string(op_name(k)) + " is not defined on " + ti->name + " (" +
             (ti->multi_language ? "multi-language" : type_class_name(ti->cls)) +
             "); MPI-3.1 allows it on " + allowed_groups_text(k);
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
    std::string name = ti != nullptr ? ti->name
                       : t == MPI_DATATYPE_NULL ? "MPI_DATATYPE_NULL"
                       : t == MPI_PACKED        ? "MPI_PACKED"
                                                : "datatype " + handle_text(t);
    *why = ok ? "MPI_Compare_and_swap on " + name + ": ok"
              : "MPI_Compare_and_swap on " + name +
                    ": needs a C integer, Fortran integer, logical, multi-language or byte type";
  }
  return ok ? MPI_SUCCESS : MPI_ERR_TYPE;
}

void reduce(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (old_out != nullptr) copy_elements(ti, static_cast<std::byte*>(old_out), d, count);
  if (op == OpKind::no_op) return;
  if (op == OpKind::replace) {
    copy_elements(ti, d, s, count);
    return;
  }
  KernelFn fn = kernel_for(op, ti.repr);
  assert(fn != nullptr && op_defined_on(op, ti) && "reduce(): op not valid on type; check_accumulate first");
  if (fn != nullptr) fn(d, s, count);
}

void reduce(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out) {
  reduce(op_kind(op), ti, dst, src, count, old_out);
}

bool reduce_atomic(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count,
                   void* old_out) {
  if (!atomic_possible(ti, dst)) return false;
  KernelFn fn = nullptr;
  if (op != OpKind::replace && op != OpKind::no_op) {
    fn = kernel_for(op, ti.repr);
    if (fn == nullptr) return false;
  }
  AtomicWay way = atomic_way(op, ti);
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  auto* o = static_cast<std::byte*>(old_out);
  switch (ti.extent) {
    case 1: atomic_elements<uint8_t>(op, way, fn, ti, d, s, count, o); break;
    case 2: atomic_elements<uint16_t>(op, way, fn, ti, d, s, count, o); break;
    case 4: atomic_elements<uint32_t>(op, way, fn, ti, d, s, count, o); break;
    default: atomic_elements<uint64_t>(op, way, fn, ti, d, s, count, o); break;
  }
  return true;
}

bool reduce_atomic(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count,
                   void* old_out) {
  return reduce_atomic(op_kind(op), ti, dst, src, count, old_out);
}

bool compare_and_swap_atomic(const TypeInfo& ti, void* dst, const void* origin, const void* compare,
                             void* result) {
  if (!atomic_possible(ti, dst) || ti.size != ti.extent) return false;
  auto* d = static_cast<std::byte*>(dst);
  const auto* o = static_cast<const std::byte*>(origin);
  const auto* c = static_cast<const std::byte*>(compare);
  auto* r = static_cast<std::byte*>(result);
  switch (ti.extent) {
    case 1: cas_one<uint8_t>(d, o, c, r); break;
    case 2: cas_one<uint16_t>(d, o, c, r); break;
    case 4: cas_one<uint32_t>(d, o, c, r); break;
    default: cas_one<uint64_t>(d, o, c, r); break;
  }
  return true;
}

void compare_and_swap(const TypeInfo& ti, void* dst, const void* origin, const void* compare,
                      void* result) {
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
