// layout.cpp — flattening MPI datatypes, the per-type cache, and the cursors (see layout.hpp).
//
// Layout of this file: (1) LayoutBuilder, which appends repeated copies of a child layout and
// merges as it goes; (2) the static layouts of predefined types; (3) flatten(), one case per
// MPI combiner, driven by MPI_Type_get_envelope / MPI_Type_get_contents; (4) the caches: an
// MPI attribute on the type holding a shared_ptr, built under one mutex, and behind it a map
// by construction (combiner and arguments) for types of predefined children; (5) validation and
// footprint; (6) the cursors and the chunk zipper.
//
// Why the sizes come from MPI: extents of structs carry alignment padding whose rules are
// the implementation's (Open MPI pads to the largest member alignment), and resized types
// set bounds freely. So flatten() computes only WHERE the data bytes are, and takes size, lb
// and extent from MPI_Type_size_x / MPI_Type_get_extent_x for every node; the flattened byte
// count is checked against MPI_Type_size_x, which catches a combiner read wrongly.
//
// Why an attribute and not a map keyed by handle: MPI reuses handle values after
// MPI_Type_free. The delete callback drops the cache's reference exactly when the type dies;
// ops in flight keep theirs.
#include "ops/layout.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <vector>

namespace fastrma::detail {

// ---------------------------------------------------------------------------------------------
// (1) LayoutBuilder.

namespace {

bool has_holes(const TypeInfo* ti) { return ti != nullptr && ti->size != ti->extent; }

// disp + k * stride with two's-complement wrap instead of signed-overflow UB (the cursors:
// every block of a flattened type lies inside the signed 64-bit range, checked by push()).
std::int64_t at(std::int64_t disp, std::uint64_t k, std::int64_t stride) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(disp) + k * static_cast<std::uint64_t>(stride));
}

// Byte positions while flattening: wide enough that no displacement, stride or sum of them a
// datatype can describe overflows, so push() can refuse a block outside the 64-bit range.
using Wide = __int128;

}  // namespace

class LayoutBuilder {
public:
    // n copies of child, the k-th at disp + k * stride. False (with *why) past kMaxLayoutBlocks.
    // A block outside [INT64_MIN, INT64_MAX] (start or end) fails too, and sets out_of_range().
    bool add(const Layout& child, Wide disp, std::uint64_t n, Wide stride, std::string* why) {
        if (n == 0 || child.size_ == 0) return true;  // no data: no say in basic() either
        if (state_ == State::none) {
            state_ = child.basic_ != nullptr ? State::one : State::mixed;
            basic_ = child.basic_;
        } else if (state_ == State::one && child.basic_ != basic_) {
            state_ = State::mixed;
            basic_ = nullptr;
            std::vector<Block>().swap(runs_);
        }
        std::uint64_t bytes = 0;
        if (__builtin_mul_overflow(n, child.size_, &bytes) || __builtin_add_overflow(data_, bytes, &data_))
            return fail(why, "more data bytes than 64 bits count");
        if (!repeat(blocks_, child.blocks_, 1, disp, n, stride, why)) return false;
        if (state_ == State::one && has_holes(basic_))
            return repeat(runs_, child.runs_, basic_->extent, disp, n, stride, why);
        return true;
    }

    // The last failure of add() was a block outside the signed 64-bit byte range.
    bool out_of_range() const { return out_of_range_; }

    // MPI's view of the node: its size (must equal the bytes added), lb and extent.
    int finish(std::uint64_t mpi_size, std::int64_t lb, std::int64_t extent, const char* description,
               std::shared_ptr<const Layout>* out, std::string* why) {
        if (data_ != mpi_size) {
            if (why != nullptr)
                *why = std::string(description) + ": flattened " + std::to_string(data_) +
                       " data bytes but MPI_Type_size says " + std::to_string(mpi_size);
            return MPI_ERR_TYPE;
        }
        std::shared_ptr<Layout> l(new Layout);
        l->blocks_ = std::move(blocks_);
        l->blocks_.shrink_to_fit();
        if (state_ == State::one && has_holes(basic_)) {
            l->runs_ = std::move(runs_);
            l->runs_.shrink_to_fit();
        }
        l->size_ = mpi_size;
        l->lb_ = lb;
        l->extent_ = extent;
        l->basic_ = state_ == State::one ? basic_ : nullptr;
        l->description_ = description;
        seal(*l);
        *out = std::move(l);
        return MPI_SUCCESS;
    }

    // A predefined type: value (and index) pieces straight from the table; no MPI calls.
    static std::shared_ptr<const Layout> predefined(const TypeInfo& ti) {
        std::shared_ptr<Layout> l(new Layout);
        if (ti.cls == TypeClass::pair && ti.index_size != 0) {
            l->blocks_.push_back({0, ti.value_size});
            std::int64_t io = static_cast<std::int64_t>(ti.index_offset);
            if (ti.index_offset == ti.value_size)
                l->blocks_[0].len += ti.index_size;
            else
                l->blocks_.push_back({io, ti.index_size});
        } else if (ti.size != 0) {
            l->blocks_.push_back({0, ti.size});
        }
        if (has_holes(&ti)) l->runs_.push_back({0, 1});
        l->size_ = ti.size;
        l->extent_ = static_cast<std::int64_t>(ti.extent);
        l->basic_ = &ti;
        l->description_ = ti.name;
        seal(*l);
        return l;
    }

    // A predefined type RMA has no table entry for: its bytes, no basic type.
    static std::shared_ptr<const Layout> opaque(std::int64_t true_lb, std::uint64_t size, std::int64_t lb,
                                                std::int64_t extent, const char* description) {
        std::shared_ptr<Layout> l(new Layout);
        if (size != 0) l->blocks_.push_back({true_lb, size});
        l->size_ = size;
        l->lb_ = lb;
        l->extent_ = extent;
        l->description_ = description;
        seal(*l);
        return l;
    }

private:
    enum class State { none, one, mixed };

    static bool fail(std::string* why, const char* what) {
        if (why != nullptr) *why = what;
        return false;
    }

    // Appends n copies of src (offsets + disp + k * stride) to dst, merging a piece into the
    // previous one when it starts where that one ends. unit: bytes per len unit (1 for blocks,
    // the element extent for runs).
    bool repeat(std::vector<Block>& dst, const std::vector<Block>& src, std::uint64_t unit, Wide disp, std::uint64_t n,
                Wide stride, std::string* why) {
        std::uint64_t total = 0;
        // Dense: one piece that exactly fills the stride. The n copies are one piece; this keeps
        // PMPI_Type_contiguous(1 << 30, MPI_BYTE) from taking a billion steps.
        if (src.size() == 1 && stride > 0 && Wide(src[0].len) * unit == stride &&
            !__builtin_mul_overflow(src[0].len, n, &total))
            return push(dst, disp + src[0].offset, total, unit, why);
        for (std::uint64_t k = 0; k < n; ++k) {
            const Wide base = disp + Wide(k) * stride;
            for (const Block& b : src)
                if (!push(dst, base + b.offset, b.len, unit, why)) return false;
        }
        return true;
    }

    // A piece of len units at offset. Refused when it starts or ends outside the signed
    // 64-bit range: no memory holds it, and the cursors' and range checks' arithmetic on it
    // would wrap.
    bool push(std::vector<Block>& dst, Wide offset, std::uint64_t len, std::uint64_t unit, std::string* why) {
        if (offset < INT64_MIN || offset + Wide(len) * unit > INT64_MAX) {
            out_of_range_ = true;
            if (why != nullptr)
                *why = "its block of bytes [" + wide_text(offset) + ", " + wide_text(offset + Wide(len) * unit) +
                       ") lies outside the signed 64-bit range: no memory holds it";
            return false;
        }
        const Block b{static_cast<std::int64_t>(offset), len};
        if (!dst.empty()) {
            Block& last = dst.back();
            if (at(last.offset, last.len, static_cast<std::int64_t>(unit)) == b.offset) {
                last.len += b.len;
                return true;
            }
        }
        if (blocks_.size() + runs_.size() >= kMaxLayoutBlocks) {
            if (why != nullptr)
                *why = "datatype has more than " + std::to_string(kMaxLayoutBlocks) +
                       " non-contiguous blocks; fastrma does not flatten types that large";
            return false;
        }
        dst.push_back(b);
        return true;
    }

    // Everything derived from blocks_ and the MPI values.
    static void seal(Layout& l) {
        if (l.blocks_.empty()) {
            l.true_lb_ = l.true_ub_ = 0;
        } else {
            std::int64_t lo = INT64_MAX, hi = INT64_MIN;
            for (const Block& b : l.blocks_) {
                lo = std::min(lo, b.offset);
                hi = std::max(hi, at(b.offset, 1, static_cast<std::int64_t>(b.len)));
            }
            l.true_lb_ = lo;
            l.true_ub_ = hi;
        }
        l.contiguous_ = l.blocks_.size() == 1 && l.blocks_[0].offset == 0 && l.blocks_[0].len == l.size_ &&
                        l.extent_ >= 0 && static_cast<std::uint64_t>(l.extent_) == l.size_;
        seal_uniform(l);
    }

    // uniform_len / uniform_stride: one pass over the blocks, once per type.
    static void seal_uniform(Layout& l) {
        const std::vector<Block>& b = l.blocks_;
        if (b.empty()) return;
        const std::int64_t step = b.size() == 1 ? l.extent_ : b[1].offset - b[0].offset;
        for (std::size_t i = 1; i < b.size(); ++i)
            if (b[i].len != b[0].len || b[i].offset != at(b[0].offset, i, step)) return;
        l.uniform_len_ = b[0].len;
        l.uniform_stride_ = step;
    }

    static std::string wide_text(Wide v) {
        const bool neg = v < 0;
        unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
        std::string t;
        do {
            t.insert(t.begin(), char('0' + int(u % 10)));
            u /= 10;
        } while (u != 0);
        return neg ? "-" + t : t;
    }

    std::vector<Block> blocks_, runs_;
    bool out_of_range_ = false;
    State state_ = State::none;
    const TypeInfo* basic_ = nullptr;
    std::uint64_t data_ = 0;
};

// ---------------------------------------------------------------------------------------------
// (2) Predefined types.

namespace {

using LayoutPtr = std::shared_ptr<const Layout>;

const std::vector<LayoutPtr>& predefined_layouts() {
    static const std::vector<LayoutPtr> table = [] {
        std::vector<LayoutPtr> v(type_count());
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = LayoutBuilder::predefined(*type_by_id(static_cast<std::uint8_t>(i)));
        return v;
    }();
    return table;
}

// ---------------------------------------------------------------------------------------------
// (3) flatten().

const char* combiner_name(int c) {
    switch (c) {
    case MPI_COMBINER_NAMED:
        return "predefined";
    case MPI_COMBINER_DUP:
        return "derived (dup)";
    case MPI_COMBINER_CONTIGUOUS:
        return "derived (contiguous)";
    case MPI_COMBINER_VECTOR:
        return "derived (vector)";
    case MPI_COMBINER_HVECTOR:
        return "derived (hvector)";
    case MPI_COMBINER_INDEXED:
        return "derived (indexed)";
    case MPI_COMBINER_HINDEXED:
        return "derived (hindexed)";
    case MPI_COMBINER_INDEXED_BLOCK:
        return "derived (indexed_block)";
    case MPI_COMBINER_HINDEXED_BLOCK:
        return "derived (hindexed_block)";
    case MPI_COMBINER_STRUCT:
        return "derived (struct)";
    case MPI_COMBINER_SUBARRAY:
        return "derived (subarray)";
    case MPI_COMBINER_DARRAY:
        return "derived (darray)";
    case MPI_COMBINER_F90_REAL:
        return "derived (f90 real)";
    case MPI_COMBINER_F90_COMPLEX:
        return "derived (f90 complex)";
    case MPI_COMBINER_F90_INTEGER:
        return "derived (f90 integer)";
    case MPI_COMBINER_RESIZED:
        return "derived (resized)";
    default:
        return "derived (unknown combiner)";
    }
}

int type_error(std::string* why, std::string text) {
    if (why != nullptr) *why = std::move(text);
    return MPI_ERR_TYPE;
}

int combiner_of(MPI_Datatype t) {
    int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
    PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
    return combiner;
}

// MPI_Type_get_contents' arrays. The derived datatypes it returns are new references that
// we must free; predefined ones must not be freed.
struct Contents {
    int combiner = MPI_COMBINER_NAMED;
    std::vector<int> ints;
    std::vector<MPI_Aint> addrs;
    std::vector<MPI_Datatype> types;

    explicit Contents(MPI_Datatype t) {
        int ni = 0, na = 0, nd = 0;
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
        if (combiner == MPI_COMBINER_NAMED) return;  // get_contents is erroneous on these
        ints.resize(static_cast<std::size_t>(ni));
        addrs.resize(static_cast<std::size_t>(na));
        types.resize(static_cast<std::size_t>(nd), MPI_DATATYPE_NULL);
        PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data());
    }
    ~Contents() {
        for (MPI_Datatype& t : types)
            if (t != MPI_DATATYPE_NULL && combiner_of(t) != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
    }
    Contents(const Contents&) = delete;
    Contents& operator=(const Contents&) = delete;
};

// F90 parameterised types are plain predefined numbers of the size MPI chose: borrow the
// table's layout of that size and class, so their accumulates work like the named types.
const TypeInfo* f90_equivalent(int combiner, std::uint64_t size) {
    std::vector<MPI_Datatype> candidates;
    switch (combiner) {
    case MPI_COMBINER_F90_REAL:
#ifdef MPI_REAL4
        candidates.push_back(MPI_REAL4);
#endif
#ifdef MPI_REAL8
        candidates.push_back(MPI_REAL8);
#endif
#ifdef MPI_REAL16
        candidates.push_back(MPI_REAL16);
#endif
        candidates.insert(candidates.end(), {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE});
        break;
    case MPI_COMBINER_F90_COMPLEX:
#ifdef MPI_COMPLEX8
        candidates.push_back(MPI_COMPLEX8);
#endif
#ifdef MPI_COMPLEX16
        candidates.push_back(MPI_COMPLEX16);
#endif
#ifdef MPI_COMPLEX32
        candidates.push_back(MPI_COMPLEX32);
#endif
        candidates.insert(candidates.end(), {MPI_COMPLEX, MPI_DOUBLE_COMPLEX});
        break;
    default:  // MPI_COMBINER_F90_INTEGER
#ifdef MPI_INTEGER1
        candidates.push_back(MPI_INTEGER1);
#endif
#ifdef MPI_INTEGER2
        candidates.push_back(MPI_INTEGER2);
#endif
#ifdef MPI_INTEGER4
        candidates.push_back(MPI_INTEGER4);
#endif
#ifdef MPI_INTEGER8
        candidates.push_back(MPI_INTEGER8);
#endif
        candidates.push_back(MPI_INTEGER);
        break;
    }
    for (MPI_Datatype c : candidates) {
        const TypeInfo* ti = lookup_type(c);
        if (ti != nullptr && ti->size == size && ti->extent == size) return ti;
    }
    return nullptr;
}

struct IndexRun {
    std::int64_t start, len;
};

// The elements of an n-dimensional piece of an array (subarray, darray): dims[level..] from
// slowest to fastest, runs[d] the indices taken in dim d (ascending), stride[d] the bytes
// between consecutive indices of dim d. The fastest dim's runs become repeated children.
bool emit_grid(LayoutBuilder& b, const Layout& child, const std::vector<int>& dims,
               const std::vector<std::vector<IndexRun>>& runs, const std::vector<std::int64_t>& stride,
               std::size_t level, Wide base, std::string* why) {
    if (dims.empty()) return b.add(child, base, 1, child.extent(), why);
    const int d = dims[level];
    const std::int64_t s = stride[static_cast<std::size_t>(d)];
    for (const IndexRun& r : runs[static_cast<std::size_t>(d)]) {
        if (level + 1 == dims.size()) {
            if (!b.add(child, base + Wide(r.start) * s, static_cast<std::uint64_t>(r.len), s, why)) return false;
            continue;
        }
        for (std::int64_t i = r.start; i < r.start + r.len; ++i)
            if (!emit_grid(b, child, dims, runs, stride, level + 1, base + Wide(i) * s, why)) return false;
    }
    return true;
}

// Slowest-to-fastest dims and byte strides of an array of `sizes` elements of `ext` bytes.
void array_geometry(const std::vector<std::int64_t>& sizes, bool c_order, std::int64_t ext, std::vector<int>* dims,
                    std::vector<std::int64_t>* stride) {
    const int n = static_cast<int>(sizes.size());
    dims->resize(sizes.size());
    stride->assign(sizes.size(), ext);
    for (int i = 0; i < n; ++i) (*dims)[static_cast<std::size_t>(i)] = c_order ? i : n - 1 - i;
    for (int i = n - 2; i >= 0; --i) {  // walk from the fastest dim outwards
        std::size_t d = static_cast<std::size_t>((*dims)[static_cast<std::size_t>(i)]);
        std::size_t inner = static_cast<std::size_t>((*dims)[static_cast<std::size_t>(i + 1)]);
        (*stride)[d] = (*stride)[inner] * sizes[inner];
    }
}

// The global indices process `coord` of `p` owns in one dimension of a darray (MPI-3.1 §4.1.4).
std::vector<IndexRun> darray_runs(int distrib, int darg, std::int64_t g, std::int64_t p, std::int64_t coord) {
    std::vector<IndexRun> runs;
    if (distrib == MPI_DISTRIBUTE_NONE) {
        if (g > 0) runs.push_back({0, g});
    } else if (distrib == MPI_DISTRIBUTE_BLOCK) {
        const std::int64_t blk = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
        const std::int64_t lo = std::min(g, coord * blk), hi = std::min(g, lo + blk);
        if (hi > lo) runs.push_back({lo, hi - lo});
    } else {  // MPI_DISTRIBUTE_CYCLIC
        const std::int64_t blk = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        for (std::int64_t s = coord * blk; s < g; s += p * blk) runs.push_back({s, std::min(blk, g - s)});
    }
    return runs;
}

int flatten(MPI_Datatype t, LayoutPtr* out, std::string* why);

// The layouts of all children of a derived node, in the order of Contents::types.
int flatten_children(const Contents& c, std::vector<LayoutPtr>* kids, std::string* why) {
    kids->resize(c.types.size());
    for (std::size_t i = 0; i < c.types.size(); ++i)
        if (int rc = flatten(c.types[i], &(*kids)[i], why)) return rc;
    return MPI_SUCCESS;
}

// A subarray type's runs of its child k into b (ints as MPI_Type_get_contents gives them, n
// dimensions, their count checked by the caller).
bool add_subarray(LayoutBuilder& b, const std::vector<int>& ints, std::size_t n, const Layout& k, std::string* err) {
    std::vector<std::int64_t> sizes(n);
    std::vector<std::vector<IndexRun>> runs(n);
    for (std::size_t d = 0; d < n; ++d) {
        sizes[d] = ints[1 + d];
        const std::int64_t sub = ints[1 + n + d], start = ints[1 + 2 * n + d];
        if (sub > 0) runs[d].push_back({start, sub});
    }
    std::vector<int> dims;
    std::vector<std::int64_t> stride;
    array_geometry(sizes, ints[1 + 3 * n] == MPI_ORDER_C, k.extent(), &dims, &stride);
    return emit_grid(b, k, dims, runs, stride, 0, 0, err);
}

// A distributed array's runs of its child k into b, for the process whose rank it names (as
// add_subarray).
bool add_darray(LayoutBuilder& b, const std::vector<int>& ints, std::size_t n, const Layout& k, std::string* err) {
    const int* gsizes = &ints[3];
    const int* distribs = gsizes + n;
    const int* dargs = distribs + n;
    const int* psizes = dargs + n;
    const int order = psizes[n];
    // The process grid is row-major whatever the array order (MPI-3.1 §4.1.4).
    std::vector<std::int64_t> coords(n), sizes(n);
    std::int64_t r = ints[1];
    for (std::size_t i = n; i-- > 0;) {
        const std::int64_t p = std::max(1, psizes[i]);
        coords[i] = r % p;
        r /= p;
    }
    std::vector<std::vector<IndexRun>> runs(n);
    for (std::size_t d = 0; d < n; ++d) {
        sizes[d] = gsizes[d];
        runs[d] = darray_runs(distribs[d], dargs[d], gsizes[d], std::max(1, psizes[d]), coords[d]);
    }
    std::vector<int> dims;
    std::vector<std::int64_t> stride;
    array_geometry(sizes, order == MPI_ORDER_C, k.extent(), &dims, &stride);
    return emit_grid(b, k, dims, runs, stride, 0, 0, err);
}

int flatten(MPI_Datatype t, LayoutPtr* out, std::string* why) {
    if (const TypeInfo* ti = lookup_type(t)) {
        *out = predefined_layouts()[ti->id];
        return MPI_SUCCESS;
    }
    if (t == MPI_DATATYPE_NULL) return type_error(why, "datatype is MPI_DATATYPE_NULL");
    if (t == MPI_PACKED) return type_error(why, "MPI_PACKED cannot be used in RMA");

    MPI_Count mpi_size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
    PMPI_Type_size_x(t, &mpi_size);
    PMPI_Type_get_extent_x(t, &lb, &extent);
    const std::uint64_t size = static_cast<std::uint64_t>(mpi_size);
    Contents c(t);
    const char* name = combiner_name(c.combiner);
    switch (c.combiner) {
    case MPI_COMBINER_NAMED:  // predefined, but not in the RMA table (no basic type)
    case MPI_COMBINER_F90_REAL:
    case MPI_COMBINER_F90_COMPLEX:
    case MPI_COMBINER_F90_INTEGER: {
        if (c.combiner != MPI_COMBINER_NAMED) {
            if (const TypeInfo* ti = f90_equivalent(c.combiner, size)) {
                *out = predefined_layouts()[ti->id];
                return MPI_SUCCESS;
            }
        }
        PMPI_Type_get_true_extent_x(t, &tlb, &textent);
        *out = LayoutBuilder::opaque(tlb, size, lb, extent, name);
        return MPI_SUCCESS;
    }
    case MPI_COMBINER_DUP: {  // the same type map and bounds as its child
        if (c.types.size() != 1) break;
        return flatten(c.types[0], out, why);
    }
    default:
        break;
    }

    std::vector<LayoutPtr> kids;
    if (int rc = flatten_children(c, &kids, why)) return rc;
    const std::vector<int>& ints = c.ints;
    const std::vector<MPI_Aint>& addrs = c.addrs;
    auto bad_contents = [&] {
        return type_error(why, std::string(name) + ": MPI_Type_get_contents returned an unexpected shape");
    };
    auto need = [&](std::size_t ni, std::size_t na, std::size_t nd) {
        return ints.size() >= ni && addrs.size() >= na && kids.size() >= nd;
    };
    auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v < 0 ? 0 : v); };

    LayoutBuilder b;
    bool ok = true;
    std::string err;
    switch (c.combiner) {
    case MPI_COMBINER_CONTIGUOUS: {
        if (!need(1, 0, 1)) return bad_contents();
        ok = b.add(*kids[0], 0, u(ints[0]), kids[0]->extent(), &err);
        break;
    }
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        const bool bytes = c.combiner == MPI_COMBINER_HVECTOR;
        if (!need(bytes ? 2 : 3, bytes ? 1 : 0, 1)) return bad_contents();
        const Layout& k = *kids[0];
        const Wide stride = bytes ? Wide(addrs[0]) : Wide(ints[2]) * k.extent();
        for (std::int64_t i = 0; ok && i < ints[0]; ++i) ok = b.add(k, Wide(i) * stride, u(ints[1]), k.extent(), &err);
        break;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED: {
        const bool bytes = c.combiner == MPI_COMBINER_HINDEXED;
        if (ints.empty()) return bad_contents();
        const std::size_t n = u(ints[0]);
        if (!need(1 + (bytes ? n : 2 * n), bytes ? n : 0, 1)) return bad_contents();
        const Layout& k = *kids[0];
        for (std::size_t i = 0; ok && i < n; ++i) {
            const Wide disp = bytes ? Wide(addrs[i]) : Wide(ints[1 + n + i]) * k.extent();
            ok = b.add(k, disp, u(ints[1 + i]), k.extent(), &err);
        }
        break;
    }
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
        const bool bytes = c.combiner == MPI_COMBINER_HINDEXED_BLOCK;
        if (ints.size() < 2) return bad_contents();
        const std::size_t n = u(ints[0]);
        if (!need(bytes ? 2 : 2 + n, bytes ? n : 0, 1)) return bad_contents();
        const Layout& k = *kids[0];
        for (std::size_t i = 0; ok && i < n; ++i) {
            const Wide disp = bytes ? Wide(addrs[i]) : Wide(ints[2 + i]) * k.extent();
            ok = b.add(k, disp, u(ints[1]), k.extent(), &err);
        }
        break;
    }
    case MPI_COMBINER_STRUCT: {
        if (ints.empty()) return bad_contents();
        const std::size_t n = u(ints[0]);
        if (!need(1 + n, n, n)) return bad_contents();
        for (std::size_t i = 0; ok && i < n; ++i)
            ok = b.add(*kids[i], addrs[i], u(ints[1 + i]), kids[i]->extent(), &err);
        break;
    }
    case MPI_COMBINER_SUBARRAY: {
        if (ints.empty()) return bad_contents();
        const std::size_t n = u(ints[0]);
        if (!need(2 + 3 * n, 0, 1)) return bad_contents();
        ok = add_subarray(b, ints, n, *kids[0], &err);
        break;
    }
    case MPI_COMBINER_DARRAY: {
        if (ints.size() < 3) return bad_contents();
        const std::size_t n = u(ints[2]);
        if (!need(4 + 4 * n, 0, 1)) return bad_contents();
        ok = add_darray(b, ints, n, *kids[0], &err);
        break;
    }
    case MPI_COMBINER_RESIZED: {  // new bounds (from MPI below), the same data bytes
        if (!need(0, 0, 1)) return bad_contents();
        ok = b.add(*kids[0], 0, 1, 0, &err);
        break;
    }
    default:
        return type_error(why, "datatype combiner " + std::to_string(c.combiner) + " is not supported by fastrma");
    }
    if (!ok) {
        type_error(why, std::move(err));
        return b.out_of_range() ? MPI_ERR_RMA_RANGE : MPI_ERR_TYPE;
    }
    return b.finish(size, lb, extent, name, out, why);
}

// ---------------------------------------------------------------------------------------------
// (4) The cache: an attribute on the datatype.

// The second cache, by construction: ARMCI-MPI (and layers like it) builds a new subarray,
// vector or indexed type for every call and frees it right after, so the attribute below
// never hits and every call flattened again. Types whose children are all in the predefined
// table are also kept under their combiner and arguments (equal arguments, equal type map).
// It is bounded in bytes (key and layout: set_layout_cache_bytes, FASTRMA_LAYOUT_CACHE),
// least recently used out first; an entry above kKeepFreedMax bytes goes when the last live
// type that uses it is freed (the attribute's delete callback tells us), so large types used
// once and freed hold nothing. Its own mutex (shape_mu()), never held across an MPI call:
// delete callbacks run inside MPI_Type_free, also under cache_mutex().
constexpr std::size_t kKeepFreedMax = 64 * 1024;
std::atomic<std::size_t> g_shape_limit{kLayoutCacheBytesDefault};

struct ShapeEntry;
using ShapeMap = std::map<std::vector<std::int64_t>, std::shared_ptr<ShapeEntry>>;
struct ShapeEntry {
    LayoutPtr layout;
    std::size_t bytes = 0;
    std::size_t live = 0;  // live types whose attribute refers to it (shape_mu)
    bool cached = false;  // in the map and the recency list (shape_mu)
    ShapeMap::iterator it;
    std::list<ShapeEntry*>::iterator lru;
};
struct ShapeCache {
    ShapeMap map;
    std::list<ShapeEntry*> lru;  // most recently used first
    std::size_t bytes = 0;
    void drop(ShapeEntry& e) {
        lru.erase(e.lru);
        bytes -= e.bytes;
        e.cached = false;
        map.erase(e.it);  // (may free e: callers hold a shared_ptr of their own)
    }
    void trim(std::size_t limit) {
        while (bytes > limit && !lru.empty()) {
            std::shared_ptr<ShapeEntry> last = lru.back()->it->second;
            drop(*last);
        }
    }
};
std::mutex& shape_mu() {
    static auto* m = new std::mutex;  // lives past static destruction (MPI_Finalize may free types late)
    return *m;
}
ShapeCache& shape_cache() {
    static auto* c = new ShapeCache;
    return *c;
}

std::shared_ptr<ShapeEntry> shape_find(const std::vector<std::int64_t>& key) {
    std::lock_guard lk(shape_mu());
    ShapeCache& c = shape_cache();
    auto it = c.map.find(key);
    if (it == c.map.end()) return nullptr;
    c.lru.splice(c.lru.begin(), c.lru, it->second->lru);
    return it->second;
}

std::shared_ptr<ShapeEntry> shape_insert(std::vector<std::int64_t>&& key, const LayoutPtr& l) {
    auto e = std::make_shared<ShapeEntry>();
    e->layout = l;
    e->bytes = key.capacity() * sizeof(std::int64_t) + l->memory_bytes() + 128;  // + map and list nodes
    std::lock_guard lk(shape_mu());
    ShapeCache& c = shape_cache();
    const std::size_t limit = g_shape_limit.load(std::memory_order_relaxed);
    if (e->bytes > limit) return e;  // too large to keep at all
    auto [it, fresh] = c.map.emplace(std::move(key), e);
    if (!fresh) return it->second;  // another thread's build of the same shape came first
    e->it = it;
    e->cached = true;
    c.lru.push_front(e.get());
    e->lru = c.lru.begin();
    c.bytes += e->bytes;
    c.trim(limit);
    return e;
}

void shape_retain(ShapeEntry* e) {
    std::lock_guard lk(shape_mu());
    ++e->live;
}

void shape_release(const std::shared_ptr<ShapeEntry>& e) {
    std::lock_guard lk(shape_mu());
    if (--e->live == 0 && e->cached && e->bytes > kKeepFreedMax) shape_cache().drop(*e);
}

// The attribute value. Built before MPI_Type_set_attr publishes it; `ready` is stored with
// release and loaded with acquire by readers, so the layout pointer is visibly initialised
// without relying on the ordering MPI's own locks give (which ThreadSanitizer cannot see).
// shape: the shape-cache entry the type's layout came from or went into (null: none); the
// type counts as one of its live users until it dies.
struct CacheEntry {
    CacheEntry(LayoutPtr l, std::shared_ptr<ShapeEntry> s) : layout(std::move(l)), shape(std::move(s)) {
        if (shape) shape_retain(shape.get());
        ready.store(true, std::memory_order_release);
    }
    ~CacheEntry() {
        if (shape) shape_release(shape);
    }
    CacheEntry(const CacheEntry&) = delete;
    CacheEntry& operator=(const CacheEntry&) = delete;
    LayoutPtr layout;
    std::shared_ptr<ShapeEntry> shape;
    std::atomic<bool> ready{false};
    LayoutPtr get() const { return ready.load(std::memory_order_acquire) ? layout : nullptr; }
};

// MPI_Type_dup: the new type has the same type map and bounds, so it shares the entry's
// layout (a new entry: each type's delete callback frees its own).
int copy_entry(MPI_Datatype, int, void*, void* in, void* out, int* flag) {
    const auto* e = static_cast<const CacheEntry*>(in);
    LayoutPtr l = e->get();
    *flag = l != nullptr ? 1 : 0;
    if (l != nullptr) *static_cast<void**>(out) = new CacheEntry(std::move(l), e->shape);
    return MPI_SUCCESS;
}

// MPI_Type_free (when the type really dies): drop the cache's reference. Must not take
// cache_mutex(): it runs inside MPI_Type_free, which flatten() calls with the mutex held.
int delete_entry(MPI_Datatype, int, void* value, void*) {
    delete static_cast<CacheEntry*>(value);
    return MPI_SUCCESS;
}

std::mutex& cache_mutex() {
    static std::mutex m;
    return m;
}

int cache_keyval() {
    static int keyval = MPI_KEYVAL_INVALID;
    static std::once_flag once;
    std::call_once(once, [] { PMPI_Type_create_keyval(copy_entry, delete_entry, &keyval, nullptr); });
    return keyval;
}

LayoutPtr cached(MPI_Datatype t, int keyval) {
    void* value = nullptr;
    int flag = 0;
    PMPI_Type_get_attr(t, keyval, &value, &flag);
    return flag != 0 && value != nullptr ? static_cast<const CacheEntry*>(value)->get() : nullptr;
}

// MPI has no "is committed" query; MPI_Pack checks it (Open MPI's parameter checks) and
// reports MPI_ERR_TYPE through the communicator's error handler, which on this private
// duplicate of MPI_COMM_SELF returns. Called with cache_mutex() held.
bool committed(MPI_Datatype t) {
    static MPI_Comm comm = MPI_COMM_NULL;
    if (comm == MPI_COMM_NULL) {
        PMPI_Comm_dup(MPI_COMM_SELF, &comm);
        PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    }
    char byte = 0;
    int position = 0;
    int rc = PMPI_Pack(&byte, 0, t, &byte, 0, &position, comm);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
    return cls != MPI_ERR_TYPE;
}

// The key of the shape cache (above): combiner, argument counts, arguments, children's table
// ids. False when a child is not a predefined type of the table. Called with cache_mutex() held.
bool shape_key(MPI_Datatype t, std::vector<std::int64_t>* key) {
    const Contents c(t);
    if (c.combiner == MPI_COMBINER_NAMED) return false;
    key->clear();
    key->reserve(4 + c.ints.size() + c.addrs.size() + c.types.size());
    key->push_back(c.combiner);
    key->push_back(std::int64_t(c.ints.size()));
    key->push_back(std::int64_t(c.addrs.size()));
    key->push_back(std::int64_t(c.types.size()));
    for (int i : c.ints) key->push_back(i);
    for (MPI_Aint a : c.addrs) key->push_back(std::int64_t(a));
    for (MPI_Datatype child : c.types) {
        const TypeInfo* ti = lookup_type(child);
        if (ti == nullptr) return false;
        key->push_back(std::int64_t(ti->id));
    }
    return true;
}

}  // namespace

int get_layout(MPI_Datatype type, std::shared_ptr<const Layout>* out, std::string* why) {
    out->reset();
    if (type == MPI_DATATYPE_NULL) return type_error(why, "datatype is MPI_DATATYPE_NULL");
    if (const TypeInfo* ti = lookup_type(type)) {  // no MPI call, no allocation
        *out = predefined_layouts()[ti->id];
        return MPI_SUCCESS;
    }
    if (type == MPI_PACKED) return type_error(why, "MPI_PACKED cannot be used in RMA");

    const int keyval = cache_keyval();
    if (LayoutPtr l = cached(type, keyval)) {
        *out = std::move(l);
        return MPI_SUCCESS;
    }
    // One builder per process: concurrent first uses of one type build it once; building is
    // rare (once per type), so one mutex for all types costs nothing that matters.
    std::lock_guard<std::mutex> lock(cache_mutex());
    if (LayoutPtr l = cached(type, keyval)) {
        *out = std::move(l);
        return MPI_SUCCESS;
    }
    const bool named = combiner_of(type) == MPI_COMBINER_NAMED;
    if (!named && !committed(type))
        return type_error(why, "derived datatype is not committed (call MPI_Type_commit before using it in RMA)");
    LayoutPtr l;
    std::shared_ptr<ShapeEntry> shape;
    std::vector<std::int64_t> key;
    const bool keyed = !named && shape_key(type, &key);
    if (keyed && (shape = shape_find(key))) l = shape->layout;
    if (l == nullptr) {
        if (int rc = flatten(type, &l, why)) return rc;
        if (keyed) shape = shape_insert(std::move(key), l);
    }
    // Predefined types outside the table stay uncached (rebuilt each time: they are rare).
    if (!named) {
        auto* entry = new CacheEntry(l, std::move(shape));
        if (PMPI_Type_set_attr(type, keyval, entry) != MPI_SUCCESS) delete entry;
    }
    *out = std::move(l);
    return MPI_SUCCESS;
}

const Layout& predefined_layout(const TypeInfo& ti) { return *predefined_layouts()[ti.id]; }

void set_layout_cache_bytes(std::size_t bytes) {
    g_shape_limit.store(bytes, std::memory_order_relaxed);
    std::lock_guard lk(shape_mu());
    shape_cache().trim(bytes);
}

std::size_t layout_cache_bytes() {
    std::lock_guard lk(shape_mu());
    return shape_cache().bytes;
}

// ---------------------------------------------------------------------------------------------
// (5) Validation and footprint.

namespace {

std::string sig_text(const Layout& l, std::uint64_t count, unsigned __int128 bytes) {
    return std::to_string(count) + " x " + l.description() + " = " +
           std::to_string(static_cast<unsigned long long>(bytes)) + " bytes";
}

}  // namespace

int check_signature(const Layout& a, std::uint64_t a_count, const Layout& b, std::uint64_t b_count, std::string* why,
                    const char* what) {
    const unsigned __int128 ab = static_cast<unsigned __int128>(a.size()) * a_count;
    const unsigned __int128 bb = static_cast<unsigned __int128>(b.size()) * b_count;
    if (ab == bb) return MPI_SUCCESS;
    return type_error(why, std::string(what) + " type signatures differ: " + sig_text(a, a_count, ab) + " vs " +
                               sig_text(b, b_count, bb));
}

int check_accumulate_layouts(MPI_Op op, const Layout& origin, std::uint64_t origin_count, const Layout& target,
                             std::uint64_t target_count, std::string* why) {
    // No data on either side: a no-op, whatever the types (as MPICH and Open MPI accept a
    // zero-count MPI_SUM on MPI_BYTE, mpi4py's default); the op must still be a predefined one.
    if ((origin_count == 0 || origin.size() == 0) && (target_count == 0 || target.size() == 0)) {
        if (op_kind(op) != OpKind::invalid) return MPI_SUCCESS;
        return check_accumulate(op, MPI_DATATYPE_NULL, why);  // MPI_ERR_OP with its reason
    }
    for (const Layout* l : {&origin, &target}) {
        if (l->basic() == nullptr && l->size() != 0)
            return type_error(why, std::string(l == &origin ? "origin" : "target") + " datatype (" + l->description() +
                                       ") is not made of a single predefined type, which accumulates "
                                       "require (MPI-3.1 §11.3.4)");
    }
    const TypeInfo* bt = target.basic() != nullptr ? target.basic() : origin.basic();
    if (origin.basic() != nullptr && target.basic() != nullptr && origin.basic() != target.basic())
        return type_error(why, std::string("origin basic type ") + origin.basic()->name +
                                   " differs from target basic type " + target.basic()->name);
    if (bt != nullptr) {
        if (int rc = check_accumulate(op, bt->type, why)) return rc;
    }
    return check_signature(origin, origin_count, target, target_count, why);
}

std::pair<std::int64_t, std::int64_t> footprint(const Layout& layout, std::uint64_t count) {
    if (count == 0 || layout.size() == 0) return {0, 0};
    const __int128 last = static_cast<__int128>(count - 1) * layout.extent();
    auto clamp = [](__int128 v) { return static_cast<std::int64_t>(std::clamp<__int128>(v, INT64_MIN, INT64_MAX)); };
    return {clamp(layout.true_lb() + std::min<__int128>(0, last)),
            clamp(layout.true_ub() + std::max<__int128>(0, last))};
}

// ---------------------------------------------------------------------------------------------
// (6) Cursors.

ByteCursor::ByteCursor(const Layout& layout, std::uint64_t count) {
    const std::vector<Block>& b = layout.blocks();
    if (count == 0 || b.empty()) return;
    extent_ = layout.extent();
    std::uint64_t total = 0;
    if (b.size() == 1 && extent_ > 0 && b[0].len == static_cast<std::uint64_t>(extent_) &&
        !__builtin_mul_overflow(b[0].len, count, &total)) {
        whole_ = {b[0].offset, total};  // dense: count elements are one piece
        nblocks_ = 1;
        count_ = 1;
    } else {
        blocks_ = b.data();
        nblocks_ = b.size();
        count_ = count;
        ulen_ = layout.uniform_len();
        ustride_ = layout.uniform_stride();
        ucross_ = ulen_ != 0 && extent_ == at(0, nblocks_, ustride_);
    }
    done_ = false;
    load();
}

void ByteCursor::load() {
    const Block& b = block(blk_);
    off_ = at(b.offset, elem_, extent_);
    avail_ = b.len;
}

void ByteCursor::advance(std::uint64_t n) {
    off_ = at(off_, n, 1);
    avail_ -= n;
    if (avail_ != 0) return;
    if (++blk_ == nblocks_) {
        blk_ = 0;
        if (++elem_ == count_) {
            done_ = true;
            return;
        }
    }
    load();
}

namespace {
constexpr std::uint64_t kMaxRegular = std::uint64_t(1) << 40;  // pieces in one StridedChunk at most
}  // namespace

std::uint64_t ByteCursor::regular(std::uint64_t len, std::int64_t* stride) const {
    if (ulen_ == len && avail_ == len) {  // at the start of a block of a uniform layout
        *stride = ustride_;
        std::uint64_t k = nblocks_ - blk_, more = 0;
        if (ucross_ && (__builtin_mul_overflow(count_ - elem_ - 1, nblocks_, &more) || more > kMaxRegular - k))
            return kMaxRegular;
        return k + more;
    }
    *stride = static_cast<std::int64_t>(len);
    return avail_ / len;
}

void ByteCursor::skip(std::uint64_t k, std::uint64_t len) {
    if (k == 0) return;
    if (avail_ != len || ulen_ != len || k == 1) {  // inside one piece (or a single piece)
        advance(k * len);
        return;
    }
    // k whole blocks of the progression, from the start of block blk_.
    const std::uint64_t t = blk_ + k;
    elem_ += t / nblocks_;
    blk_ = t % nblocks_;
    if (elem_ == count_) {
        done_ = true;
        return;
    }
    load();
}

ElementCursor::ElementCursor(const Layout& layout, std::uint64_t count) {
    const TypeInfo* bt = layout.basic();
    if (bt == nullptr || count == 0 || layout.size() == 0) return;
    bext_ = bt->extent;
    extent_ = layout.extent();
    const bool holes = has_holes(bt);
    const std::vector<Block>& runs = holes ? layout.runs_ : layout.blocks_;
    divisor_ = holes ? 1 : bext_;
    std::uint64_t total = 0;
    const std::uint64_t first = runs[0].len / divisor_;
    if (runs.size() == 1 && extent_ > 0 && first * bext_ == static_cast<std::uint64_t>(extent_) &&
        !__builtin_mul_overflow(first, count, &total)) {
        whole_ = {runs[0].offset, total};  // dense: count elements are one run
        nruns_ = 1;
        count_ = 1;
    } else {
        runs_ = runs.data();
        nruns_ = runs.size();
        count_ = count;
    }
    done_ = false;
    load();
}

std::uint64_t ElementCursor::run_len(std::size_t i) const {
    return runs_ != nullptr ? runs_[i].len / divisor_ : whole_.len;
}

void ElementCursor::load() {
    off_ = at(run_off(run_), elem_, extent_);
    avail_ = run_len(run_);
}

void ElementCursor::advance(std::uint64_t n) {
    off_ = at(off_, n, static_cast<std::int64_t>(bext_));
    avail_ -= n;
    if (avail_ != 0) return;
    if (++run_ == nruns_) {
        run_ = 0;
        if (++elem_ == count_) {
            done_ = true;
            return;
        }
    }
    load();
}

std::size_t ChunkZipper::next_strided(StridedChunk* out, std::size_t max) {
    std::size_t n = 0;
    while (!origin_.done() && !target_.done()) {
        const std::uint64_t len = std::min(origin_.avail(), target_.avail());
        void* local = byte_address(origin_base_, origin_.offset());
        const std::uint64_t remote = target_offset_ + static_cast<std::uint64_t>(target_.offset());
        std::int64_t ls = 0, rs = 0;
        const std::uint64_t k = std::min(origin_.regular(len, &ls), target_.regular(len, &rs));
        StridedChunk* last = n != 0 ? &out[n - 1] : nullptr;
        if (k >= 2) {
            if (n == max) break;
            out[n++] = StridedChunk{local, remote, static_cast<std::size_t>(len), k, ls, rs};
        } else if (last != nullptr && last->n == 1 &&
                   byte_address(last->local, static_cast<std::int64_t>(last->len)) == local &&
                   last->offset + last->len == remote) {
            last->len += len;  // contiguous on both sides: one chunk
        } else {
            if (n == max) break;
            out[n++] = StridedChunk{local, remote, static_cast<std::size_t>(len), 1, 0, 0};
        }
        origin_.skip(k, len);
        target_.skip(k, len);
        bytes_ += k * len;
    }
    return n;
}

std::size_t ChunkZipper::next(Chunk* out, std::size_t max) {
    std::size_t n = 0;
    while (!origin_.done() && !target_.done()) {
        const std::uint64_t len = std::min(origin_.avail(), target_.avail());
        void* local = byte_address(origin_base_, origin_.offset());
        const std::uint64_t remote = target_offset_ + static_cast<std::uint64_t>(target_.offset());
        Chunk* last = n != 0 ? &out[n - 1] : nullptr;
        if (last != nullptr && byte_address(last->local, static_cast<std::int64_t>(last->len)) == local &&
            last->offset + last->len == remote) {
            last->len += len;  // contiguous on both sides: one chunk
        } else {
            if (n == max) break;
            out[n++] = Chunk{local, remote, static_cast<std::size_t>(len)};
        }
        origin_.advance(len);
        target_.advance(len);
        bytes_ += len;
    }
    return n;
}

}  // namespace fastrma::detail
