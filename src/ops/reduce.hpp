// reduce.hpp — the accumulate kernels and the table of predefined MPI datatypes.
//
// Job: everything fastrma needs to know about one predefined datatype and one predefined op
// to carry out MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op and MPI_Compare_and_swap
// on memory it can address directly: which (op, type) pairs MPI-3.1 allows (§5.9.2, §11.3.4),
// the byte layout of each type, and the element-wise kernels, in a plain (caller holds a lock)
// and an atomic (lock-free: every element updated by one atomic access covering it) flavour.
// Choosing between the two, and taking the lock, is the job of the caller one level up
// (docs/accumulate.md).
//
// Invariants the rest of the engine relies on:
//  * The table needs no MPI_Init: handles of predefined types are addresses of globals in
//    libmpi, and sizes come from sizeof on the C types (Fortran sizes are gfortran's).
//  * Handles (MPI_Datatype, MPI_Op) are process-local pointers — libmpi is mapped at a
//    different address in each process — so anything sent to another process carries
//    TypeInfo::id and OpKind, never a handle. Both are stable across processes of one build.
//  * reduce_atomic() and compare_and_swap_atomic() refuse (return false) based only on the
//    type and the address, never on the op or on contention. Concurrent accumulates to one
//    location must use the same basic type (MPI-3.1 §11.7.1), so they always all take the
//    atomic path or all take the locked path: CPU atomics and the lock never race on a word.
//  * Only the data bytes of an element are read as values or written: padding inside pair
//    types (e.g. bytes 2..3 of MPI_SHORT_INT) is never written, and arithmetic on long double
//    writes only its 10 significant x87 bytes. MPI_REPLACE copies the MPI_Type_size bytes.
//  * Nothing here uses std::atomic<T> on foreign memory or libatomic: types wider than 8 bytes
//    are never native_atomic, because libatomic's fallback locks are private to one process.
//    (The 16-byte CAS that updates several narrow elements at once is inline asm.)
#pragma once

// The deprecated MPI C++ bindings are not used and do not compile warning-free with -Wextra.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace fastrma::detail {

// Groups of MPI-3.1 §5.9.2. The multi-language types (MPI_AINT, MPI_OFFSET, MPI_COUNT) are
// c_integer with TypeInfo::multi_language set, which removes MPI_LAND/LOR/LXOR from them.
enum class TypeClass : uint8_t { c_integer, fortran_integer, floating, logical, complex, byte, pair, other };

// The C representation of one element; the kernels are instantiated per Repr. Types that
// share a representation (MPI_INT, MPI_INT32_T, MPI_INTEGER, MPI_LOGICAL) share kernels;
// the TypeClass decides which ops are legal on them.
enum class Repr : uint8_t {
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
    f_long,  // float, double, long double
    c32,
    c64,
    c_long,  // complex of float, double, long double
    pair_f32_i32,
    pair_f64_i32,
    pair_i64_i32,
    pair_i32_i32,
    pair_i16_i32,
    pair_flong_i32,
    pair_f32_f32,
    pair_f64_f64,  // MPI_2REAL, MPI_2DOUBLE_PRECISION (index is a REAL too)
    opaque,  // only MPI_REPLACE / MPI_NO_OP: bytes are copied
    count_
};

// The predefined ops in a form that can travel between processes. The first twelve are the
// arithmetic ones that have kernels; replace and no_op are handled as byte copies.
enum class OpKind : uint8_t {
    max,
    min,
    sum,
    prod,
    land,
    band,
    lor,
    bor,
    lxor,
    bxor,
    maxloc,
    minloc,
    replace,
    no_op,
    invalid  // MPI_OP_NULL, user-defined ops, garbage
};

struct TypeInfo {
    MPI_Datatype type;
    const char* name;
    TypeClass cls;
    size_t size;  // MPI_Type_size: data bytes of one element (pairs: value + index, no padding)
    size_t extent;  // bytes between consecutive elements (pairs include padding)
    // Pair types: value at offset 0, index (int, or the second REAL/DOUBLE/INTEGER) at
    // index_offset. Other types: value_size == size, index_offset == index_size == 0.
    size_t value_size;
    size_t index_offset;
    size_t index_size;
    // extent is 1, 2, 4 or 8 and one lock-free CAS of that width updates an aligned element.
    bool native_atomic;
    // The atomicity domain windows use for this type when their memory is mapped: CPU atomics
    // for native integer, logical and byte types (fetch-add, and, or, xor are one locked
    // instruction; the PGAS counters), the target's striped accumulate lock with plain,
    // vectorised kernels for everything else. Floating, complex and pair types would need a
    // compare-and-swap loop per element, several times slower than the locked kernel
    // (docs/accumulate.md). Per type, never per op or size, so one element never sees both.
    bool cpu_domain;
    // Additions beyond the MPI view:
    bool multi_language;  // MPI_AINT, MPI_OFFSET, MPI_COUNT
    Repr repr;
    uint8_t id;  // index into the table; same in every process of one build (use on the wire)
    // Bit k set: OpKind k is defined on this type (op_defined_on, computed once with the
    // table), so the fast paths check an accumulate with one test instead of a table walk.
    uint16_t ops_defined;
};

// The largest TypeInfo::size / extent in the table (MPI_C_LONG_DOUBLE_COMPLEX, MPI_2DOUBLE_COMPLEX).
inline constexpr size_t kMaxTypeExtent = 32;

// nullptr for anything RMA cannot use as a basic type: derived types, MPI_DATATYPE_NULL,
// MPI_PACKED. Lock-free after the first call (a static table, built once, thread-safe).
const TypeInfo* lookup_type(MPI_Datatype t);
// The entry with TypeInfo::id == id, nullptr if out of range.
const TypeInfo* type_by_id(uint8_t id);
size_t type_count();

OpKind op_kind(MPI_Op op);
MPI_Op op_handle(OpKind op);  // MPI_OP_NULL for OpKind::invalid
const char* op_name(MPI_Op op);  // "MPI_SUM", ..., "MPI_OP_NULL", "unknown op"
const char* op_name(OpKind op);
const char* type_class_name(TypeClass cls);

// MPI-3.1 §5.9.2 table: is `op` (not replace/no_op, which are always allowed) defined on ti?
bool op_defined_on(OpKind op, const TypeInfo& ti);

// op_defined_on for the fast paths: the op's bit in the type's mask (false for invalid).
inline bool op_defined_fast(OpKind op, const TypeInfo& ti) { return (ti.ops_defined >> unsigned(op)) & 1u; }
// op_kind with the ops of PGAS codes (SUM, REPLACE, NO_OP) tested inline; same result.
inline OpKind op_kind_fast(MPI_Op op) {
    if (op == MPI_SUM) return OpKind::sum;
    if (op == MPI_REPLACE) return OpKind::replace;
    if (op == MPI_NO_OP) return OpKind::no_op;
    return op_kind(op);
}

// Is `op` valid on `t` for the accumulate family? MPI_SUCCESS; MPI_ERR_OP for MPI_OP_NULL and
// user-defined ops; MPI_ERR_TYPE when t is not a predefined type usable by RMA or op is not
// defined on t's group. `why` (if non-null) receives one line naming op and type.
int check_accumulate(MPI_Op op, MPI_Datatype t, std::string* why);
// MPI_Compare_and_swap types: C integer, Fortran integer, logical, multi-language, byte.
int check_compare_and_swap(MPI_Datatype t, std::string* why);

// Non-atomic, element-wise: for i < count, dst[i] = dst[i] OP src[i] (REPLACE: dst = src;
// NO_OP: nothing). Elements are ti.extent apart in dst, src and old_out. If old_out is
// non-null the previous dst elements are copied there first. dst and src may be the same
// buffer but must not partially overlap; old_out must overlap neither. With MPI_NO_OP src
// is never read and may be null (also in reduce_atomic).
// Precondition: check_accumulate(op, ti.type) == MPI_SUCCESS (asserted in debug builds).
void reduce(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out = nullptr);
void reduce(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out = nullptr);

// Atomic, element-wise, on directly addressable memory that other processes may update with
// this same function or with plain CPU atomics of width ti.extent: each element is read or
// written by one lock-free atomic access that covers it whole (a load, an aligned store for
// REPLACE without old_out, a fetch-op, an exchange, a CAS loop of width ti.extent, or a
// 16-byte CAS loop over the 16 / extent whole elements of an aligned block — reduce.cpp §4);
// its old value goes to old_out (may be null). Memory order is relaxed: the caller's
// completion point (flush, unlock) supplies the fence. Returns false without touching
// anything when ti is not native_atomic or dst is not aligned to ti.extent (and, as a
// precondition failure, when op is not defined on ti); the caller then locks and reduce()s.
// Each element is atomic on its own; a multi-element call is not atomic as a whole (as MPI).
bool reduce_atomic(MPI_Op op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out = nullptr);
bool reduce_atomic(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, void* old_out = nullptr);

// Strided runs: `pieces` runs of `count` elements each, run i at dst + i * st.dst, src +
// i * st.src and old_out + i * st.old_out (bytes; negative and zero steps allowed), applied in
// order i = 0, 1, ... with the same kernels and the same rules as reduce() / reduce_atomic()
// (each run must satisfy their overlap rules). The op and type are resolved once and one
// kernel call loops over the runs: a derived type's blocks (a vector of single ints) cost a
// loop step each, not a dispatch each. reduce_atomic_strided refuses (false, nothing
// touched) when reduce_atomic would refuse any run: not native_atomic, or dst or st.dst not
// a multiple of ti.extent.
struct RunStrides {
    std::int64_t dst = 0, src = 0, old_out = 0;
};
void reduce_strided(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, size_t pieces,
                    const RunStrides& st, void* old_out = nullptr);
bool reduce_atomic_strided(OpKind op, const TypeInfo& ti, void* dst, const void* src, size_t count, size_t pieces,
                           const RunStrides& st, void* old_out = nullptr);

// The 16-byte block way of reduce_atomic(): available on x86-64 CPUs with cmpxchg16b (not
// under ThreadSanitizer), and then on unless set_wide_cas(false). For tests and benchmarks,
// which exercise or measure the one-element-at-a-time way with it off; both ways are atomic
// against each other, so flipping it while other threads accumulate is harmless.
// set_wide_cas returns whether the block way was in use before the call.
bool wide_cas_available();
bool set_wide_cas(bool on);

// The plain kernels exist twice on x86-64, for the baseline ISA and for AVX2, the latter
// used where the CPU has it unless set_avx2_kernels(false) (tests: the baseline ones must
// give the same results). Returns whether the AVX2 kernels were in use before the call.
bool avx2_kernels_available();
bool set_avx2_kernels(bool on);

// One element: if *dst == *compare (bitwise) then *dst = *origin; *result = the old *dst.
// The atomic form returns false on the same conditions as reduce_atomic (and for types whose
// size differs from their extent); the caller then locks and uses compare_and_swap().
bool compare_and_swap_atomic(const TypeInfo& ti, void* dst, const void* origin, const void* compare, void* result);
void compare_and_swap(const TypeInfo& ti, void* dst, const void* origin, const void* compare, void* result);

}  // namespace fastrma::detail
