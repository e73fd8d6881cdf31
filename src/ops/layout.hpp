// layout.hpp — MPI datatypes flattened into byte blocks, and the walks that pair an origin
// layout with a target layout.
//
// Job: an RMA op names (count, datatype) on both sides. This file turns a datatype into a
// Layout — the contiguous byte blocks of ONE element in type-map order, plus size, extent,
// true bounds and the single predefined ("basic") type every byte belongs to — and walks
// (count x origin layout) against (count x target layout) in type-map order, yielding pieces
// contiguous on both sides: transport Chunks for put/get (zip_chunks, ChunkZipper) and runs
// of whole basic elements for the accumulate kernels (zip_elements, ElementZipper).
//
// Invariants the rest of the engine relies on:
//  * A Layout is immutable after construction and shared as std::shared_ptr<const Layout>.
//    Ops in flight hold that pointer, so MPI_Type_free on the handle never pulls it away.
//  * blocks() are in type-map order (never sorted: the k-th data byte of the origin goes to
//    the k-th data byte of the target), have len > 0, and two neighbours are merged exactly
//    when the second starts where the first ends. Their sum is MPI_Type_size.
//  * Block offsets are relative to the buffer address the user passes and may be negative
//    (lb < 0, negative strides, absolute addresses with MPI_BOTTOM).
//  * Blocks of `count` elements are never materialised: the cursors iterate, with a fixed
//    amount of state, whatever the count. Only the type's own map is stored (once per type).
//  * Predefined types have static layouts: get_layout() on them makes no MPI call and, after
//    the first call, no allocation. Derived types are flattened once and cached on the type
//    itself (an MPI attribute), so a handle reused by MPI after MPI_Type_free never sees a
//    stale layout.
//  * basic() is set only when every byte belongs to elements of one predefined type; then
//    every block consists of whole basic elements (pair types: of whole value/index pieces),
//    which is what lets zip_elements hand whole elements to reduce().
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/chunk.hpp"
#include "ops/reduce.hpp"

namespace fastrma::detail {

// Bytes, relative to the buffer address the user passes.
struct Block {
    std::int64_t offset;
    std::uint64_t len;
};

class Layout {
public:
    // Blocks of ONE element, in type-map order, neighbours merged when contiguous in memory
    // and in order. Empty for a type with no data (PMPI_Type_contiguous(0, ...)).
    const std::vector<Block>& blocks() const { return blocks_; }
    std::uint64_t size() const { return size_; }  // MPI_Type_size
    std::int64_t lb() const { return lb_; }  // MPI_Type_get_extent's lb
    std::int64_t extent() const { return extent_; }  // stride between elements of count
    // Of ONE element: element i touches [i*extent + true_lb, i*extent + true_ub). 0, 0 if no data.
    std::int64_t true_lb() const { return true_lb_; }
    std::int64_t true_ub() const { return true_ub_; }
    // One block at offset 0 with len == extent == size: count elements are one block.
    bool contiguous() const { return contiguous_; }
    // Uniform: every block has uniform_len() bytes and block i starts at blocks()[0].offset + i *
    // uniform_stride() (a vector or hvector of a contiguous child, an indexed type of equal
    // blocks at a fixed step, a resized basic type). uniform_len() is 0 otherwise. When
    // extent() == blocks().size() * uniform_stride(), the step continues across elements.
    std::uint64_t uniform_len() const { return uniform_len_; }
    std::int64_t uniform_stride() const { return uniform_stride_; }
    // The one predefined type every byte belongs to; nullptr when the type mixes basic types
    // (or holds a predefined type RMA has no table entry for). For pair types (MPI_DOUBLE_INT)
    // and anything built only from them, it is the pair type itself.
    const TypeInfo* basic() const { return basic_; }
    // Basic elements in one element of this type; 0 when basic() is nullptr.
    std::uint64_t basic_count() const { return basic_ != nullptr ? size_ / basic_->size : 0; }
    // For messages: "MPI_INT" for predefined types, "derived (vector)" and so on otherwise.
    const char* description() const { return description_; }
    // Bytes this layout holds in memory (the object and its block lists).
    std::size_t memory_bytes() const {
        return sizeof(Layout) + (blocks_.capacity() + runs_.capacity()) * sizeof(Block);
    }

private:
    friend class LayoutBuilder;
    friend class ElementCursor;
    Layout() = default;

    std::vector<Block> blocks_;
    // Element runs {offset, number of basic elements at basic()->extent stride}, stored only
    // when basic()'s data has holes (pair types with size != extent: a merged block there may
    // glue the index of one element to the value of the next). Otherwise runs are blocks()
    // with len / basic()->extent elements each.
    std::vector<Block> runs_;
    std::uint64_t size_ = 0;
    std::int64_t lb_ = 0, extent_ = 0, true_lb_ = 0, true_ub_ = 0;
    std::uint64_t uniform_len_ = 0;
    std::int64_t uniform_stride_ = 0;
    bool contiguous_ = false;
    const TypeInfo* basic_ = nullptr;
    const char* description_ = "";
};

// The most blocks (plus element runs) one flattened type may hold: 16 Mi blocks is 256 MiB
// of layout. Beyond that get_layout() fails with MPI_ERR_TYPE rather than exhaust memory.
inline constexpr std::size_t kMaxLayoutBlocks = std::size_t{1} << 24;

// MPI_SUCCESS and *out = the layout of `type`; or MPI_ERR_TYPE with a one-line reason in *why
// (if non-null): MPI_DATATYPE_NULL, MPI_PACKED, an uncommitted derived type, a combiner this
// file does not know, a type above kMaxLayoutBlocks; or MPI_ERR_RMA_RANGE (reason in *why) when
// a block of the type starts or ends outside the signed 64-bit byte range (a displacement near
// INT64_MAX: no memory holds it). Thread-safe; the first call for a derived
// type builds (once, even when many threads ask at once), later calls read the cache.
// Derived types need MPI to be initialised (and not finalised); predefined ones do not.
int get_layout(MPI_Datatype type, std::shared_ptr<const Layout>* out, std::string* why);

// Derived types of predefined children are also cached by construction (combiner and
// arguments), so that a type built again after MPI_Type_free is not flattened again; that
// cache holds at most this many bytes (keys and layouts; FASTRMA_LAYOUT_CACHE), least recently
// used out first, and an entry above 64 KiB goes when the last live type using it is freed.
inline constexpr std::size_t kLayoutCacheBytesDefault = std::size_t{16} << 20;
void set_layout_cache_bytes(std::size_t bytes);
std::size_t layout_cache_bytes();  // held now

// The static layout of a predefined type: lives until the process exits, so hot paths may
// keep the reference without a shared_ptr (no reference-count traffic).
const Layout& predefined_layout(const TypeInfo& ti);

// ---- validation ---------------------------------------------------------------------------

// MPI_SUCCESS when count x layout carry the same number of data bytes on both sides (the
// part of "type signatures match" that can be checked without the type maps), else
// MPI_ERR_TYPE. `what` names the pair in the message, e.g. "origin and target".
int check_signature(const Layout& a, std::uint64_t a_count, const Layout& b, std::uint64_t b_count, std::string* why,
                    const char* what = "origin and target");

// Accumulate family (MPI-3.1 §11.3.4): both layouts made of one predefined type, the same
// one on both sides, `op` defined on it (check_accumulate) and the same number of elements.
// MPI_ERR_TYPE / MPI_ERR_OP otherwise. When neither side carries data (zero counts) only the
// op is checked (a predefined one): the operation is a no-op. With MPI_NO_OP the origin is
// ignored by MPI: pass the result (Get_accumulate) or the target layout as `origin`.
int check_accumulate_layouts(MPI_Op op, const Layout& origin, std::uint64_t origin_count, const Layout& target,
                             std::uint64_t target_count, std::string* why);

// The bytes count elements touch, relative to the buffer address: [first, second).
// {0, 0} when count is 0 or the type has no data. Handles negative extents.
std::pair<std::int64_t, std::int64_t> footprint(const Layout& layout, std::uint64_t count);

// ---- walking one side -------------------------------------------------------------------

// count x layout as a sequence of contiguous byte pieces, in type-map order. Holds a pointer
// to the layout's blocks: the Layout must outlive the cursor. Copyable; fixed size.
class ByteCursor {
public:
    ByteCursor() = default;
    ByteCursor(const Layout& layout, std::uint64_t count);
    bool done() const { return done_; }
    std::int64_t offset() const { return off_; }  // of the current piece, from the buffer
    std::uint64_t avail() const { return avail_; }  // bytes left in the current piece (> 0)
    void advance(std::uint64_t n);  // 0 < n <= avail()
    // How many pieces of exactly len bytes (0 < len <= avail()) start here at one fixed step,
    // the current one first, and that step (*stride): avail() / len at step len inside the
    // current piece, or the blocks left in a uniform layout's progression when the current
    // piece is one whole block of len bytes; 1 when nothing regular follows.
    std::uint64_t regular(std::uint64_t len, std::int64_t* stride) const;
    // Moves over k such pieces (k <= regular(len)): O(1), whatever k.
    void skip(std::uint64_t k, std::uint64_t len);

private:
    const Block& block(std::size_t i) const { return blocks_ != nullptr ? blocks_[i] : whole_; }
    void load();
    std::uint64_t ulen_ = 0;  // the layout's uniform_len(), or 0
    std::int64_t ustride_ = 0;
    bool ucross_ = false;  // the progression continues across elements
    const Block* blocks_ = nullptr;  // nullptr: the whole transfer is `whole_`
    std::size_t nblocks_ = 0;
    std::int64_t extent_ = 0;
    std::uint64_t count_ = 0, elem_ = 0;
    std::size_t blk_ = 0;
    std::int64_t off_ = 0;
    std::uint64_t avail_ = 0;
    Block whole_{0, 0};
    bool done_ = true;
};

// count x layout as runs of whole basic elements (at basic()->extent stride), in type-map
// order. Precondition: layout.basic() != nullptr. Same lifetime rule as ByteCursor.
class ElementCursor {
public:
    ElementCursor() = default;
    ElementCursor(const Layout& layout, std::uint64_t count);
    bool done() const { return done_; }
    std::int64_t offset() const { return off_; }  // byte offset of the current element
    std::uint64_t avail() const { return avail_; }  // elements left in the current run (> 0)
    void advance(std::uint64_t n);  // 0 < n <= avail()
    std::uint64_t element_extent() const { return bext_; }

private:
    std::uint64_t run_len(std::size_t i) const;
    std::int64_t run_off(std::size_t i) const { return runs_ != nullptr ? runs_[i].offset : whole_.offset; }
    void load();
    const Block* runs_ = nullptr;  // nullptr: the whole transfer is `whole_` (len in elements)
    std::size_t nruns_ = 0;
    std::uint64_t divisor_ = 1;  // runs_ lens are bytes (divide by bext_) or elements (1)
    std::uint64_t bext_ = 1;
    std::int64_t extent_ = 0;
    std::uint64_t count_ = 0, elem_ = 0;
    std::size_t run_ = 0;
    std::int64_t off_ = 0;
    std::uint64_t avail_ = 0;
    Block whole_{0, 0};
    bool done_ = true;
};

// Byte arithmetic that never forms an out-of-range pointer (origin_base may be MPI_BOTTOM).
inline void* byte_address(const void* base, std::int64_t offset) {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(base) + static_cast<std::uintptr_t>(offset));
}

// ---- origin x target ----------------------------------------------------------------------

inline constexpr std::size_t kMaxBatch = 256;  // chunks handed to a transport at once

// n pieces of len bytes: piece i is local + i * lstride here and offset + i * rstride at the
// target (strides may be negative). n == 1 is a plain Chunk (strides then mean nothing).
struct StridedChunk {
    void* local;
    std::uint64_t offset;
    std::size_t len;
    std::uint64_t n;
    std::int64_t lstride, rstride;
};

// A resumable zip of origin and target layouts into Chunks (local = origin piece, offset =
// target piece). Adjacent chunks contiguous on both sides are merged. Stops at whichever
// side ends first: check_signature() beforehand. A caller whose transport answers "retry"
// keeps the chunks it got and re-posts them; the zipper itself never goes backwards.
class ChunkZipper {
public:
    ChunkZipper(const Layout& origin, std::uint64_t origin_count, void* origin_base, const Layout& target,
                std::uint64_t target_count, std::uint64_t target_offset)
        : origin_(origin, origin_count),
          target_(target, target_count),
          origin_base_(origin_base),
          target_offset_(target_offset) {}
    // Writes up to max chunks to out; returns how many. 0 means finished.
    std::size_t next(Chunk* out, std::size_t max);
    // The same pieces, but a run of equal pieces at fixed steps on both sides (a uniform
    // layout against a contiguous or uniform one) comes out as one StridedChunk, in O(1).
    // Do not mix with next() on one zipper.
    std::size_t next_strided(StridedChunk* out, std::size_t max);
    bool done() const { return origin_.done() || target_.done(); }
    std::uint64_t bytes() const { return bytes_; }  // data bytes handed out so far

private:
    ByteCursor origin_, target_;
    void* origin_base_;
    std::uint64_t target_offset_;
    std::uint64_t bytes_ = 0;
};

// Chunks {origin_base + origin offset, target_offset + target offset, len} in type-map order,
// in batches of at most kMaxBatch, to fn(const Chunk*, std::size_t n) -> bool; false stops the
// walk and zip_chunks returns false. No allocation; a batch lives on the stack.
template <class Fn>
bool zip_chunks(const Layout& origin, std::uint64_t origin_count, void* origin_base, const Layout& target,
                std::uint64_t target_count, std::uint64_t target_offset, Fn&& fn) {
    ChunkZipper zip(origin, origin_count, origin_base, target, target_count, target_offset);
    Chunk batch[kMaxBatch];
    for (;;) {
        std::size_t n = zip.next(batch, kMaxBatch);
        if (n == 0) return true;
        if (!fn(static_cast<const Chunk*>(batch), n)) return false;
    }
}

// The walk of zip_chunks as StridedChunks (ChunkZipper::next_strided), in batches of at most
// kMaxBatch, to fn(const StridedChunk*, std::size_t n) -> bool; false stops the walk.
template <class Fn>
bool zip_strided(const Layout& origin, std::uint64_t origin_count, void* origin_base, const Layout& target,
                 std::uint64_t target_count, std::uint64_t target_offset, Fn&& fn) {
    ChunkZipper zip(origin, origin_count, origin_base, target, target_count, target_offset);
    StridedChunk batch[kMaxBatch];
    for (;;) {
        std::size_t n = zip.next_strided(batch, kMaxBatch);
        if (n == 0) return true;
        if (!fn(static_cast<const StridedChunk*>(batch), n)) return false;
    }
}

// N layouts walked together as runs of whole basic elements, each run contiguous (at the
// basic element's extent) on every side. Precondition: every layout has the same basic().
// Runs are merged while every side continues at stride, and cut at max_run elements (a
// caller pipelining through a bounded bounce buffer sets it).
template <std::size_t N>
class ElementZipper {
public:
    struct Run {
        std::array<std::int64_t, N> offset;  // byte offsets from each side's base
        std::uint64_t n;  // elements
    };
    ElementZipper(const std::array<const Layout*, N>& layouts, const std::array<std::uint64_t, N>& counts,
                  std::uint64_t max_run = UINT64_MAX)
        : max_run_(max_run == 0 ? 1 : max_run) {
        for (std::size_t i = 0; i < N; ++i) cursors_[i] = ElementCursor(*layouts[i], counts[i]);
        bext_ = cursors_[0].element_extent();
    }
    // The next run, false when any side has ended.
    bool next(Run* run) {
        bool have = false;
        while (!ended()) {
            std::uint64_t n = max_run_;
            for (const ElementCursor& c : cursors_) n = std::min(n, c.avail());
            if (have) {
                bool continues = run->n < max_run_;
                for (std::size_t i = 0; i < N && continues; ++i)
                    continues = std::uint64_t(cursors_[i].offset()) == std::uint64_t(run->offset[i]) + run->n * bext_;
                if (!continues) return true;
                n = std::min(n, max_run_ - run->n);
                run->n += n;
            } else {
                for (std::size_t i = 0; i < N; ++i) run->offset[i] = cursors_[i].offset();
                run->n = n;
                have = true;
            }
            for (ElementCursor& c : cursors_) c.advance(n);
        }
        return have;
    }
    bool ended() const {
        for (const ElementCursor& c : cursors_)
            if (c.done()) return true;
        return false;
    }

private:
    std::array<ElementCursor, N> cursors_;
    std::uint64_t bext_ = 1;
    std::uint64_t max_run_;
};

namespace layout_internal {
template <class Fn, class... Args>
bool call_continue(Fn& fn, Args&&... args) {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&, Args...>>) {
        fn(std::forward<Args>(args)...);
        return true;
    } else {
        return static_cast<bool>(fn(std::forward<Args>(args)...));
    }
}
}  // namespace layout_internal

// Runs of whole basic elements for the accumulate kernels: fn(const void* origin_elems,
// std::uint64_t target_offset_of_first_elem, std::uint64_t n), the n elements laid out at
// basic()->extent on both sides, so reduce(op, *basic(), target + off, origin, n) applies.
// fn may return void or bool (false stops; zip_elements then returns false). Returns false
// without calling fn when the basic types differ or are nullptr (check_accumulate_layouts).
template <class Fn>
bool zip_elements(const Layout& origin, std::uint64_t origin_count, const void* origin_base, const Layout& target,
                  std::uint64_t target_count, std::uint64_t target_offset, Fn&& fn,
                  std::uint64_t max_run = UINT64_MAX) {
    if (origin.basic() == nullptr || origin.basic() != target.basic()) return false;
    ElementZipper<2> zip({&origin, &target}, {origin_count, target_count}, max_run);
    typename ElementZipper<2>::Run r;
    while (zip.next(&r)) {
        if (!layout_internal::call_continue(fn, static_cast<const void*>(byte_address(origin_base, r.offset[0])),
                                            target_offset + std::uint64_t(r.offset[1]), r.n))
            return false;
    }
    return true;
}

// Get_accumulate: origin, result and target together. fn(const void* origin_elems,
// void* result_elems, std::uint64_t target_offset, std::uint64_t n).
template <class Fn>
bool zip_elements(const Layout& origin, std::uint64_t origin_count, const void* origin_base, const Layout& result,
                  std::uint64_t result_count, void* result_base, const Layout& target, std::uint64_t target_count,
                  std::uint64_t target_offset, Fn&& fn, std::uint64_t max_run = UINT64_MAX) {
    if (origin.basic() == nullptr || origin.basic() != target.basic() || result.basic() != target.basic()) return false;
    ElementZipper<3> zip({&origin, &result, &target}, {origin_count, result_count, target_count}, max_run);
    typename ElementZipper<3>::Run r;
    while (zip.next(&r)) {
        if (!layout_internal::call_continue(fn, static_cast<const void*>(byte_address(origin_base, r.offset[0])),
                                            byte_address(result_base, r.offset[1]),
                                            target_offset + std::uint64_t(r.offset[2]), r.n))
            return false;
    }
    return true;
}

}  // namespace fastrma::detail
