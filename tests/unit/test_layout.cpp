// test_layout.cpp — unit tests for src/ops/layout: flattened datatypes, their cache, and the
// origin x target walks.
//
// Ground truth is MPI itself, never the implementation: every layout is checked against
// MPI_Type_size / MPI_Type_get_extent / MPI_Type_get_true_extent and against MPI_Pack (the
// bytes the blocks name, in order, must be exactly what MPI_Pack produces); hand-worked
// block lists pin the interesting cases. zip_chunks must copy exactly what
// MPI_Pack(origin) + MPI_Unpack(into target) copies, and zip_elements + reduce() exactly what
// unpacking both sides into basic arrays + MPI_Reduce_local + unpacking back gives, for many
// (origin type, target type) pairs with equal signatures and several counts.
// MPI_Init_thread(MPI_THREAD_MULTIPLE) is done by main_unit.cpp.
#include "ops/copy.hpp"
#include "ops/layout.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace fastrma::detail;
using LayoutPtr = std::shared_ptr<const Layout>;

// ---------------------------------------------------------------------------------------------
// Helpers.

// A committed derived datatype freed at scope exit (predefined handles are left alone).
class Type {
public:
    Type() = default;
    explicit Type(MPI_Datatype t, bool commit = true) : t_(t) {
        if (commit) MPI_Type_commit(&t_);
    }
    Type(Type&& o) noexcept : t_(o.t_) { o.t_ = MPI_DATATYPE_NULL; }
    Type& operator=(Type&& o) noexcept {
        std::swap(t_, o.t_);
        return *this;
    }
    ~Type() { reset(); }
    void reset() {
        if (t_ != MPI_DATATYPE_NULL && lookup_type(t_) == nullptr) MPI_Type_free(&t_);
        t_ = MPI_DATATYPE_NULL;
    }
    MPI_Datatype get() const { return t_; }
    operator MPI_Datatype() const { return t_; }  // NOLINT: reads like an MPI handle

private:
    MPI_Datatype t_ = MPI_DATATYPE_NULL;
};

Type predefined(MPI_Datatype t) { return Type(t, false); }
Type contiguous(int n, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_contiguous(n, old, &t);
    return Type(t);
}
Type vector(int count, int bl, int stride, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_vector(count, bl, stride, old, &t);
    return Type(t);
}
Type hvector(int count, int bl, MPI_Aint stride, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_hvector(count, bl, stride, old, &t);
    return Type(t);
}
Type indexed(std::vector<int> bl, std::vector<int> disp, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_indexed(int(bl.size()), bl.data(), disp.data(), old, &t);
    return Type(t);
}
Type hindexed(std::vector<int> bl, std::vector<MPI_Aint> disp, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_hindexed(int(bl.size()), bl.data(), disp.data(), old, &t);
    return Type(t);
}
Type indexed_block(int bl, std::vector<int> disp, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_indexed_block(int(disp.size()), bl, disp.data(), old, &t);
    return Type(t);
}
Type hindexed_block(int bl, std::vector<MPI_Aint> disp, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_hindexed_block(int(disp.size()), bl, disp.data(), old, &t);
    return Type(t);
}
Type structure(std::vector<int> bl, std::vector<MPI_Aint> disp, std::vector<MPI_Datatype> types) {
    MPI_Datatype t;
    MPI_Type_create_struct(int(bl.size()), bl.data(), disp.data(), types.data(), &t);
    return Type(t);
}
Type subarray(std::vector<int> sizes, std::vector<int> sub, std::vector<int> starts, int order, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_subarray(int(sizes.size()), sizes.data(), sub.data(), starts.data(), order, old, &t);
    return Type(t);
}
Type darray(int size, int rank, std::vector<int> gsizes, std::vector<int> distribs, std::vector<int> dargs,
            std::vector<int> psizes, int order, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_darray(size, rank, int(gsizes.size()), gsizes.data(), distribs.data(), dargs.data(), psizes.data(),
                           order, old, &t);
    return Type(t);
}
Type resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent) {
    MPI_Datatype t;
    MPI_Type_create_resized(old, lb, extent, &t);
    return Type(t);
}
Type dup(MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_dup(old, &t);
    return Type(t);
}

LayoutPtr layout_of(MPI_Datatype t) {
    LayoutPtr l;
    std::string why;
    int rc = get_layout(t, &l, &why);
    EXPECT_EQ(rc, MPI_SUCCESS) << why;
    EXPECT_NE(l, nullptr);
    return l;
}

std::vector<Block> blocks(std::initializer_list<Block> b) { return b; }

std::string to_string(const std::vector<Block>& v) {
    std::string s;
    for (const Block& b : v) s += "{" + std::to_string(b.offset) + "," + std::to_string(b.len) + "}";
    return s;
}

void expect_blocks(const Layout& l, const std::vector<Block>& want) {
    EXPECT_EQ(to_string(l.blocks()), to_string(want));
}

// A buffer covering count x type's footprint with margins, addressed like the user's buffer.
struct Buffer {
    Buffer(const Layout& l, std::uint64_t count, unsigned char fill = 0) {
        auto fp = footprint(l, count);
        lo = fp.first - kMargin;
        bytes.assign(std::size_t(fp.second - fp.first + 2 * kMargin), fill);
    }
    unsigned char* base() { return bytes.data() - lo; }  // the address MPI calls the buffer
    static constexpr std::int64_t kMargin = 16;
    std::int64_t lo;
    std::vector<unsigned char> bytes;
};

void fill_pattern(std::vector<unsigned char>& v, unsigned seed) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 17 + 7) % 251);
}

std::vector<unsigned char> mpi_pack(const void* base, std::uint64_t count, MPI_Datatype t) {
    int size = 0;
    MPI_Pack_size(int(count), t, MPI_COMM_SELF, &size);
    std::vector<unsigned char> out(std::size_t(size) + 1);
    int pos = 0;
    MPI_Pack(base, int(count), t, out.data(), int(out.size()), &pos, MPI_COMM_SELF);
    out.resize(std::size_t(pos));
    return out;
}

void mpi_unpack(const std::vector<unsigned char>& packed, void* base, std::uint64_t count, MPI_Datatype t) {
    int pos = 0;
    MPI_Unpack(packed.data(), int(packed.size()), &pos, base, int(count), t, MPI_COMM_SELF);
}

// The generic checks every layout must pass against MPI.
void check_against_mpi(MPI_Datatype t, const Layout& l) {
    MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
    MPI_Type_size_x(t, &size);
    MPI_Type_get_extent_x(t, &lb, &extent);
    MPI_Type_get_true_extent_x(t, &tlb, &textent);
    EXPECT_EQ(l.size(), std::uint64_t(size));
    EXPECT_EQ(l.extent(), extent);
    EXPECT_EQ(l.lb(), lb);
    if (size > 0) {
        EXPECT_EQ(l.true_lb(), tlb);
        EXPECT_EQ(l.true_ub(), tlb + textent);
    }
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < l.blocks().size(); ++i) {
        EXPECT_GT(l.blocks()[i].len, 0u);
        sum += l.blocks()[i].len;
        if (i > 0) {
            EXPECT_NE(l.blocks()[i - 1].offset + std::int64_t(l.blocks()[i - 1].len), l.blocks()[i].offset)
                << "unmerged neighbours at " << i;
        }
    }
    EXPECT_EQ(sum, l.size());
    if (l.basic() != nullptr) {
        EXPECT_EQ(l.basic_count() * l.basic()->size, l.size());
    }
    // The blocks, in order, name exactly the bytes MPI_Pack takes.
    for (std::uint64_t count : {1, 3}) {
        Buffer buf(l, count);
        fill_pattern(buf.bytes, unsigned(count));
        std::vector<unsigned char> packed = mpi_pack(buf.base(), count, t);
        std::vector<unsigned char> walked;
        for (ByteCursor c(l, count); !c.done(); c.advance(c.avail())) {
            const unsigned char* p = buf.base() + c.offset();
            walked.insert(walked.end(), p, p + c.avail());
        }
        EXPECT_EQ(walked, packed) << "count " << count;
    }
}

LayoutPtr checked_layout(MPI_Datatype t) {
    LayoutPtr l = layout_of(t);
    if (l != nullptr) check_against_mpi(t, *l);
    return l;
}

// ---------------------------------------------------------------------------------------------
// Layouts, worked out by hand.

TEST(LayoutTypes, EveryPredefinedTypeMatchesMpi) {
    for (std::size_t id = 0; id < type_count(); ++id) {
        const TypeInfo* ti = type_by_id(std::uint8_t(id));
        SCOPED_TRACE(ti->name);
        LayoutPtr l = checked_layout(ti->type);
        ASSERT_NE(l, nullptr);
        EXPECT_EQ(l->basic(), ti);
        EXPECT_EQ(l->basic_count(), 1u);
        EXPECT_EQ(layout_of(ti->type), l) << "predefined layouts are static";
        EXPECT_EQ(&predefined_layout(*ti), l.get());
    }
}

TEST(LayoutTypes, PairTypesHaveHoles) {
    LayoutPtr di = checked_layout(MPI_DOUBLE_INT);
    expect_blocks(*di, blocks({{0, 12}}));  // value and index abut: one block, 4 bytes of padding
    EXPECT_EQ(di->extent(), 16);
    EXPECT_FALSE(di->contiguous());
    EXPECT_EQ(di->basic(), lookup_type(MPI_DOUBLE_INT));
    LayoutPtr si = checked_layout(MPI_SHORT_INT);
    expect_blocks(*si, blocks({{0, 2}, {4, 4}}));
    EXPECT_EQ(si->extent(), 8);
    LayoutPtr ii = checked_layout(MPI_2INT);
    expect_blocks(*ii, blocks({{0, 8}}));
    EXPECT_TRUE(ii->contiguous());
    LayoutPtr i = checked_layout(MPI_INT);
    EXPECT_TRUE(i->contiguous());
    EXPECT_STREQ(i->description(), "MPI_INT");
}

TEST(LayoutTypes, Contiguous) {
    Type t = contiguous(3, MPI_INT);
    LayoutPtr l = checked_layout(t);
    expect_blocks(*l, blocks({{0, 12}}));
    EXPECT_TRUE(l->contiguous());
    EXPECT_EQ(l->basic(), lookup_type(MPI_INT));
    EXPECT_EQ(l->basic_count(), 3u);
    // Big enough that a per-element loop would show: flattened in one step.
    Type big = contiguous(1 << 30, MPI_BYTE);
    LayoutPtr lb = layout_of(big);  // (not packed: 1 GiB)
    expect_blocks(*lb, blocks({{0, 1u << 30}}));
    EXPECT_EQ(lb->extent(), std::int64_t{1} << 30);
    EXPECT_TRUE(lb->contiguous());
    Type empty = contiguous(0, MPI_INT);
    LayoutPtr le = checked_layout(empty);
    EXPECT_TRUE(le->blocks().empty());
    EXPECT_EQ(le->size(), 0u);
    EXPECT_FALSE(le->contiguous());
}

TEST(LayoutTypes, Vector) {
    Type gaps = vector(3, 2, 4, MPI_INT);
    LayoutPtr l = checked_layout(gaps);
    expect_blocks(*l, blocks({{0, 8}, {16, 8}, {32, 8}}));
    EXPECT_EQ(l->extent(), 40);
    EXPECT_EQ(l->true_ub(), 40);
    EXPECT_FALSE(l->contiguous());
    EXPECT_EQ(l->basic_count(), 6u);
    Type dense = vector(4, 1, 1, MPI_INT);  // stride == blocklength: no gaps
    LayoutPtr d = checked_layout(dense);
    expect_blocks(*d, blocks({{0, 16}}));
    EXPECT_TRUE(d->contiguous());
}

TEST(LayoutTypes, HvectorNegativeStride) {
    Type t = hvector(3, 1, -12, MPI_INT);
    LayoutPtr l = checked_layout(t);
    expect_blocks(*l, blocks({{0, 4}, {-12, 4}, {-24, 4}}));  // type-map order, not sorted
    EXPECT_EQ(l->lb(), -24);
    EXPECT_EQ(l->extent(), 28);
    EXPECT_EQ(l->true_lb(), -24);
    EXPECT_EQ(l->true_ub(), 4);
    auto fp = footprint(*l, 2);
    EXPECT_EQ(fp.first, -24);
    EXPECT_EQ(fp.second, 28 + 4);
}

TEST(LayoutTypes, UniformLayoutsWalkAsOneStridedChunk) {
    struct Case {
        Type type;
        std::uint64_t count, len;
        std::int64_t stride;
        std::uint64_t pieces;  // in the one StridedChunk
    };
    std::vector<Case> cases;
    cases.push_back({vector(1000, 1, 2, MPI_INT), 1, 4, 8, 1000});
    cases.push_back({hvector(1000, 2, -24, MPI_INT), 1, 8, -24, 1000});
    {
        std::vector<int> bl(500, 1), disp(500);
        for (int k = 0; k < 500; ++k) disp[std::size_t(k)] = 3 * k;
        cases.push_back({indexed(bl, disp, MPI_INT), 1, 4, 12, 500});
    }
    cases.push_back({resized(predefined(MPI_INT), 0, 16), 300, 4, 16, 300});  // across elements
    cases.push_back({vector(10, 1, 2, MPI_INT), 7, 4, 8, 10});  // extent 76: a new run per element
    for (const Case& c : cases) {
        LayoutPtr l = layout_of(c.type);
        ASSERT_NE(l, nullptr);
        SCOPED_TRACE(l->description());
        EXPECT_EQ(l->uniform_len(), c.len);
        EXPECT_EQ(l->uniform_stride(), c.stride);
        const Layout& bytes = *layout_of(MPI_BYTE);
        std::vector<unsigned char> src(l->size() * c.count);
        std::vector<StridedChunk> got;
        zip_strided(bytes, src.size(), src.data(), *l, c.count, 1 << 20, [&](const StridedChunk* k, std::size_t n) {
            got.insert(got.end(), k, k + n);
            return true;
        });
        ASSERT_EQ(got.size(), l->size() * c.count / (c.len * c.pieces));
        EXPECT_EQ(got[0].n, c.pieces);
        EXPECT_EQ(got[0].len, c.len);
        EXPECT_EQ(got[0].rstride, c.stride);
        EXPECT_EQ(got[0].lstride, std::int64_t(c.len));
        EXPECT_EQ(got[0].offset, std::uint64_t((1 << 20) + l->blocks()[0].offset));
    }
    Type uneven = indexed({1, 2, 1}, {0, 2, 6}, MPI_INT);
    EXPECT_EQ(layout_of(uneven)->uniform_len(), 0u);
    Type steps = indexed({1, 1, 1}, {0, 2, 5}, MPI_INT);
    EXPECT_EQ(layout_of(steps)->uniform_len(), 0u);
}

TEST(LayoutTypes, IndexedFamily) {
    Type ix = indexed({2, 1, 3}, {5, 0, 9}, MPI_INT);
    LayoutPtr l = checked_layout(ix);
    expect_blocks(*l, blocks({{20, 8}, {0, 4}, {36, 12}}));
    EXPECT_EQ(l->extent(), 48);
    Type hx = hindexed({1, 2}, {20, 4}, MPI_INT);
    l = checked_layout(hx);
    expect_blocks(*l, blocks({{20, 4}, {4, 8}}));
    EXPECT_EQ(l->lb(), 4);
    EXPECT_EQ(l->extent(), 20);
    Type ib = indexed_block(2, {6, 0, 3}, MPI_INT);
    l = checked_layout(ib);
    expect_blocks(*l, blocks({{24, 8}, {0, 8}, {12, 8}}));
    EXPECT_EQ(l->extent(), 32);
    Type hb = hindexed_block(1, {8, 0}, MPI_DOUBLE);
    l = checked_layout(hb);
    expect_blocks(*l, blocks({{8, 8}, {0, 8}}));
    EXPECT_EQ(l->basic(), lookup_type(MPI_DOUBLE));
    Type merged = indexed({1, 1, 1}, {0, 1, 2}, MPI_INT);  // adjacent in memory and in order
    l = checked_layout(merged);
    expect_blocks(*l, blocks({{0, 12}}));
    EXPECT_TRUE(l->contiguous());
    Type reversed = indexed({1, 1}, {1, 0}, MPI_INT);  // adjacent in memory, not in order
    l = checked_layout(reversed);
    expect_blocks(*l, blocks({{4, 4}, {0, 4}}));
    EXPECT_FALSE(l->contiguous());
}

TEST(LayoutTypes, Struct) {
    Type same = structure({2, 1}, {0, 16}, {MPI_INT, MPI_INT});
    LayoutPtr l = checked_layout(same);
    expect_blocks(*l, blocks({{0, 8}, {16, 4}}));
    EXPECT_EQ(l->basic(), lookup_type(MPI_INT));
    EXPECT_EQ(l->basic_count(), 3u);
    Type mixed = structure({1, 1}, {0, 8}, {MPI_INT, MPI_DOUBLE});
    l = checked_layout(mixed);
    expect_blocks(*l, blocks({{0, 4}, {8, 8}}));
    EXPECT_EQ(l->basic(), nullptr);
    EXPECT_EQ(l->basic_count(), 0u);
    EXPECT_EQ(l->extent(), 16);
    Type packed = structure({1, 1}, {0, 4}, {MPI_INT, MPI_DOUBLE});
    l = checked_layout(packed);
    expect_blocks(*l, blocks({{0, 12}}));  // merged across basic types
    EXPECT_EQ(l->extent(), 16);  // alignment padding: MPI's rule, taken from MPI
    EXPECT_FALSE(l->contiguous());
    Type pairs = structure({1, 2}, {0, 32}, {MPI_DOUBLE_INT, MPI_DOUBLE_INT});
    l = checked_layout(pairs);
    expect_blocks(*l, blocks({{0, 12}, {32, 12}, {48, 12}}));
    EXPECT_EQ(l->basic(), lookup_type(MPI_DOUBLE_INT));
    EXPECT_EQ(l->basic_count(), 3u);
    Type pair_and_int = structure({1, 1}, {0, 16}, {MPI_DOUBLE_INT, MPI_INT});
    l = checked_layout(pair_and_int);
    EXPECT_EQ(l->basic(), nullptr);
    Type zero_member = structure({1, 0}, {0, 8}, {MPI_INT, MPI_DOUBLE});  // no bytes: no say
    l = checked_layout(zero_member);
    EXPECT_EQ(l->basic(), lookup_type(MPI_INT));
}

TEST(LayoutTypes, Subarray) {
    Type c2 = subarray({4, 5}, {2, 3}, {1, 1}, MPI_ORDER_C, MPI_INT);
    LayoutPtr l = checked_layout(c2);
    expect_blocks(*l, blocks({{24, 12}, {44, 12}}));
    EXPECT_EQ(l->extent(), 80);
    EXPECT_EQ(l->true_lb(), 24);
    Type f2 = subarray({4, 5}, {2, 3}, {1, 1}, MPI_ORDER_FORTRAN, MPI_INT);
    l = checked_layout(f2);
    expect_blocks(*l, blocks({{20, 8}, {36, 8}, {52, 8}}));
    Type c3 = subarray({3, 4, 2}, {2, 2, 2}, {1, 1, 0}, MPI_ORDER_C, MPI_INT);
    l = checked_layout(c3);
    expect_blocks(*l, blocks({{40, 16}, {72, 16}}));
    EXPECT_EQ(l->extent(), 96);
    Type f3 = subarray({3, 4, 2}, {2, 2, 2}, {1, 1, 0}, MPI_ORDER_FORTRAN, MPI_INT);
    l = checked_layout(f3);
    expect_blocks(*l, blocks({{16, 8}, {28, 8}, {64, 8}, {76, 8}}));
    Type of_pairs = subarray({3, 3}, {2, 2}, {0, 1}, MPI_ORDER_C, MPI_SHORT_INT);
    l = checked_layout(of_pairs);
    EXPECT_EQ(l->basic(), lookup_type(MPI_SHORT_INT));
    EXPECT_EQ(l->basic_count(), 4u);
}

// ARMCI-MPI's pattern: a new subarray type per call, freed right after. A type built with
// the same arguments as a freed one gets its layout back from the cache by construction (the
// same object); one argument different gives its own layout.
TEST(LayoutTypes, TypesBuiltAlikeShareALayoutAfterTheFirstIsFreed) {
    const void* first = nullptr;
    {
        Type a = subarray({64, 512}, {8, 8}, {0, 16}, MPI_ORDER_C, MPI_DOUBLE);
        first = checked_layout(a).get();
    }
    Type b = subarray({64, 512}, {8, 8}, {0, 16}, MPI_ORDER_C, MPI_DOUBLE);
    LayoutPtr lb = checked_layout(b);
    EXPECT_EQ(lb.get(), first);
    Type c = subarray({64, 512}, {8, 8}, {0, 24}, MPI_ORDER_C, MPI_DOUBLE);
    LayoutPtr lc = checked_layout(c);
    EXPECT_NE(lc.get(), first);
    EXPECT_EQ(lc->true_lb(), 24 * 8);
    EXPECT_EQ(lb->true_lb(), 16 * 8);
}

TEST(LayoutTypes, Darray) {
    // 1-D, cyclic(2) over 3 processes, rank 1 of a 10-element array: indices 2, 3, 8, 9.
    Type t = darray(3, 1, {10}, {MPI_DISTRIBUTE_CYCLIC}, {2}, {3}, MPI_ORDER_C, MPI_INT);
    LayoutPtr l = checked_layout(t);
    expect_blocks(*l, blocks({{8, 8}, {32, 8}}));
    EXPECT_EQ(l->extent(), 40);
    // Every rank of a few 2-D / 3-D grids, both orders, all distributions: against MPI_Pack.
    struct Case {
        std::vector<int> gsizes, distribs, dargs, psizes;
    };
    const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE,
              D = MPI_DISTRIBUTE_DFLT_DARG;
    const std::vector<Case> cases = {
        {{5, 7}, {B, C}, {D, 2}, {2, 2}},
        {{6, 5}, {C, B}, {D, D}, {3, 2}},
        {{4, 9}, {N, C}, {D, 3}, {1, 2}},
        {{7, 3, 4}, {B, N, C}, {4, D, 1}, {2, 1, 3}},
    };
    for (const Case& c : cases) {
        int size = 1;
        for (int p : c.psizes) size *= p;
        for (int order : {MPI_ORDER_C, MPI_ORDER_FORTRAN}) {
            for (int rank = 0; rank < size; ++rank) {
                SCOPED_TRACE("darray rank " + std::to_string(rank) + " order " + std::to_string(order));
                Type d = darray(size, rank, c.gsizes, c.distribs, c.dargs, c.psizes, order, MPI_INT);
                checked_layout(d);
            }
        }
    }
}

TEST(LayoutTypes, Resized) {
    Type v = vector(2, 1, 3, MPI_INT);
    Type r = resized(v, -4, 20);
    LayoutPtr l = checked_layout(r);
    expect_blocks(*l, blocks({{0, 4}, {12, 4}}));
    EXPECT_EQ(l->lb(), -4);
    EXPECT_EQ(l->extent(), 20);
    EXPECT_EQ(l->true_lb(), 0);
    EXPECT_EQ(l->true_ub(), 16);
    // Resized down to the data: count elements become one contiguous run of ints.
    Type shrunk = resized(contiguous(2, MPI_INT), 0, 8);
    l = checked_layout(shrunk);
    EXPECT_TRUE(l->contiguous());
    // Extent smaller than the data: elements overlap (legal for a get's origin).
    Type overlap = resized(contiguous(2, MPI_INT), 0, 4);
    l = checked_layout(overlap);
    EXPECT_EQ(l->extent(), 4);
    auto fp = footprint(*l, 3);
    EXPECT_EQ(fp.first, 0);
    EXPECT_EQ(fp.second, 16);
}

TEST(LayoutTypes, NestedAndDup) {
    Type inner = vector(2, 1, 2, MPI_INT);  // {0,4},{8,4}, extent 12
    Type s = structure({1, 1}, {0, 24}, {inner.get(), MPI_INT});  // + {24,4}, extent 28
    Type outer = vector(2, 1, 2, s);  // stride 56
    LayoutPtr l = checked_layout(outer);
    expect_blocks(*l, blocks({{0, 4}, {8, 4}, {24, 4}, {56, 4}, {64, 4}, {80, 4}}));
    EXPECT_EQ(l->extent(), 84);
    EXPECT_EQ(l->basic(), lookup_type(MPI_INT));
    EXPECT_EQ(l->basic_count(), 6u);
    Type d = dup(outer);
    LayoutPtr ld = checked_layout(d);
    EXPECT_EQ(to_string(ld->blocks()), to_string(l->blocks()));
    Type dp = dup(MPI_DOUBLE);
    LayoutPtr ldp = checked_layout(dp);
    EXPECT_EQ(ldp->basic(), lookup_type(MPI_DOUBLE));
    EXPECT_TRUE(ldp->contiguous());
}

TEST(LayoutTypes, VectorsOfPairs) {
    Type v = vector(3, 1, 2, MPI_DOUBLE_INT);
    LayoutPtr l = checked_layout(v);
    expect_blocks(*l, blocks({{0, 12}, {32, 12}, {64, 12}}));
    EXPECT_EQ(l->extent(), 80);
    EXPECT_EQ(l->basic(), lookup_type(MPI_DOUBLE_INT));
    EXPECT_EQ(l->basic_count(), 3u);
    // Short+int: the index of one element abuts the value of the next, so blocks glue pieces
    // of two elements together; element runs stay whole elements (checked by the zips below).
    Type c = contiguous(3, MPI_SHORT_INT);
    l = checked_layout(c);
    expect_blocks(*l, blocks({{0, 2}, {4, 6}, {12, 6}, {20, 4}}));
    EXPECT_EQ(l->basic(), lookup_type(MPI_SHORT_INT));
    EXPECT_EQ(l->basic_count(), 3u);
    Type ld = vector(2, 2, 3, MPI_LONG_DOUBLE_INT);
    checked_layout(ld);
}

TEST(LayoutTypes, Fortran90Types) {
    MPI_Datatype r = MPI_DATATYPE_NULL, i = MPI_DATATYPE_NULL, c = MPI_DATATYPE_NULL;
    MPI_Type_create_f90_real(15, MPI_UNDEFINED, &r);  // predefined-like: never freed
    MPI_Type_create_f90_integer(9, &i);
    MPI_Type_create_f90_complex(6, MPI_UNDEFINED, &c);
    for (MPI_Datatype t : {r, i, c}) {
        LayoutPtr l = checked_layout(t);
        ASSERT_NE(l->basic(), nullptr);
        EXPECT_EQ(l->basic()->size, l->size());
    }
    EXPECT_EQ(layout_of(r)->basic()->cls, TypeClass::floating);
    EXPECT_EQ(layout_of(c)->basic()->cls, TypeClass::complex);
    EXPECT_EQ(layout_of(i)->basic()->cls, TypeClass::fortran_integer);
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(LayoutErrors, RejectedTypes) {
    LayoutPtr l;
    std::string why;
    EXPECT_EQ(get_layout(MPI_DATATYPE_NULL, &l, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("MPI_DATATYPE_NULL"), std::string::npos) << why;
    EXPECT_EQ(l, nullptr);
    why.clear();
    EXPECT_EQ(get_layout(MPI_PACKED, &l, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("MPI_PACKED"), std::string::npos) << why;
    why.clear();
    MPI_Datatype raw;
    MPI_Type_vector(2, 1, 2, MPI_INT, &raw);
    Type holder(raw, /*commit=*/false);
    EXPECT_EQ(get_layout(holder, &l, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("commit"), std::string::npos) << why;
    EXPECT_EQ(l, nullptr);
    // Committing it makes it usable, and the earlier refusal cached nothing.
    MPI_Datatype committed = holder.get();
    MPI_Type_commit(&committed);
    EXPECT_EQ(get_layout(committed, &l, &why), MPI_SUCCESS) << why;
}

// Issue 36, 1: a block that starts or ends outside the signed 64-bit range is refused when
// the type is flattened (MPI_ERR_RMA_RANGE), whatever the combiner that put it there; one
// that ends exactly at INT64_MAX is fine.
TEST(LayoutErrors, BlocksOutsideTheSigned64BitRangeAreRefused) {
    const MPI_Aint kMax = INT64_MAX;
    struct Case {
        const char* what;
        Type t;
        int rc;
    };
    Case cases[] = {
        {"hindexed, end past INT64_MAX", hindexed({1, 1}, {0, kMax - 1}, MPI_INT), MPI_ERR_RMA_RANGE},
        {"hindexed, end at INT64_MAX", hindexed({1, 1}, {0, kMax - 4}, MPI_INT), MPI_SUCCESS},
        {"hindexed, start below INT64_MIN + 1", hindexed({1, 1}, {0, -kMax}, MPI_INT), MPI_SUCCESS},
        {"hvector, third block wraps", hvector(3, 1, kMax / 2 + 1, MPI_INT), MPI_ERR_RMA_RANGE},
        {"struct of a hindexed near the top, moved up", structure({1}, {8}, {hindexed({1}, {kMax - 8}, MPI_INT)}),
         MPI_ERR_RMA_RANGE},
    };
    for (Case& c : cases) {
        LayoutPtr l;
        std::string why;
        EXPECT_EQ(get_layout(c.t, &l, &why), c.rc) << c.what << ": " << why;
        if (c.rc != MPI_SUCCESS) {
            EXPECT_NE(why.find("64-bit"), std::string::npos) << why;
            EXPECT_EQ(l, nullptr);
        }
    }
}

TEST(LayoutErrors, SignatureAndAccumulateChecks) {
    Type v = vector(3, 2, 4, MPI_INT);  // 6 ints
    Type mixed = structure({1, 1}, {0, 8}, {MPI_INT, MPI_DOUBLE});
    LayoutPtr lv = layout_of(v), li = layout_of(MPI_INT), ld = layout_of(MPI_DOUBLE), lm = layout_of(mixed);
    std::string why;
    EXPECT_EQ(check_signature(*lv, 2, *li, 12, &why), MPI_SUCCESS);
    EXPECT_EQ(check_signature(*lv, 2, *li, 11, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("48 bytes"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate_layouts(MPI_SUM, *lv, 2, *li, 12, &why), MPI_SUCCESS) << why;
    EXPECT_EQ(check_accumulate_layouts(MPI_SUM, *lv, 1, *li, 12, &why), MPI_ERR_TYPE);
    EXPECT_EQ(check_accumulate_layouts(MPI_SUM, *li, 2, *ld, 1, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("MPI_DOUBLE"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate_layouts(MPI_REPLACE, *lm, 1, *lm, 1, &why), MPI_ERR_TYPE);
    EXPECT_NE(why.find("single predefined type"), std::string::npos) << why;
    EXPECT_EQ(check_accumulate_layouts(MPI_MAXLOC, *lv, 1, *li, 6, &why), MPI_ERR_TYPE);
    EXPECT_EQ(check_accumulate_layouts(MPI_OP_NULL, *lv, 1, *li, 6, &why), MPI_ERR_OP);
    Type pv = vector(2, 1, 2, MPI_DOUBLE_INT);
    EXPECT_EQ(check_accumulate_layouts(MPI_MAXLOC, *layout_of(pv), 3, *layout_of(MPI_DOUBLE_INT), 6, &why), MPI_SUCCESS)
        << why;
}

// ---------------------------------------------------------------------------------------------
// The cache.

TEST(LayoutCache, SamePointerDupAndFree) {
    Type v = vector(3, 2, 4, MPI_INT);
    LayoutPtr a = layout_of(v), b = layout_of(v);
    EXPECT_EQ(a, b);
    Type d = dup(v);  // the attribute's copy callback shares the layout
    EXPECT_EQ(layout_of(d), a);
    LayoutPtr held = a;
    a.reset();
    b.reset();
    v.reset();
    d.reset();
    // The type is gone; the op's reference keeps the layout whole.
    expect_blocks(*held, blocks({{0, 8}, {16, 8}, {32, 8}}));
    std::vector<int> src(12), dst(6, -1);
    std::iota(src.begin(), src.end(), 0);
    zip_chunks(*held, 1, src.data(), *layout_of(MPI_INT), 6, 0, [&](const Chunk* c, std::size_t n) {
        for (std::size_t k = 0; k < n; ++k)
            std::memcpy(reinterpret_cast<char*>(dst.data()) + c[k].offset, c[k].local, c[k].len);
        return true;
    });
    EXPECT_EQ(dst, (std::vector<int>{0, 1, 4, 5, 8, 9}));
}

TEST(LayoutCache, FreedHandleReusedGetsItsOwnLayout) {
    // MPI hands out freed handles again: a cache keyed by handle would return the old layout.
    for (int round = 0; round < 20; ++round) {
        Type a = vector(2, 1, 2 + round, MPI_INT);
        LayoutPtr la = layout_of(a);
        MPI_Datatype handle_a = a.get();
        a.reset();
        Type b = contiguous(round + 1, MPI_DOUBLE);
        LayoutPtr lb = layout_of(b);
        EXPECT_EQ(lb->size(), 8u * std::uint64_t(round + 1));
        EXPECT_TRUE(lb->contiguous());
        if (b.get() == handle_a) {
            EXPECT_NE(lb, la);
        }
    }
}

TEST(LayoutCache, ConcurrentFirstUseBuildsOne) {
    constexpr int kThreads = 8;
    for (int round = 0; round < 10; ++round) {
        Type t = indexed({1, 2, 3}, {0, 3 + round, 9 + 2 * round}, MPI_INT);
        std::atomic<int> arrived{0};
        std::vector<LayoutPtr> got(kThreads);
        std::vector<std::thread> threads;
        for (int k = 0; k < kThreads; ++k) {
            threads.emplace_back([&, k] {
                arrived.fetch_add(1);
                while (arrived.load() < kThreads) std::this_thread::yield();
                std::string why;
                EXPECT_EQ(get_layout(t, &got[std::size_t(k)], &why), MPI_SUCCESS) << why;
            });
        }
        for (std::thread& th : threads) th.join();
        for (int k = 1; k < kThreads; ++k) EXPECT_EQ(got[std::size_t(k)], got[0]) << "round " << round;
        EXPECT_EQ(layout_of(t), got[0]);
    }
}

// Issue 36, 7: the cache by construction is bounded in bytes, not entries. Distinct large
// indexed types (131,072 blocks: 2 MiB of layout and 2 MiB of key each), each used once and
// freed, hold nothing once freed; medium ones freed stay within the bound (least recently used
// out first); a small one freed and built again still gets its layout back (ARMCI's pattern,
// TypesBuiltAlikeShareALayoutAfterTheFirstIsFreed).
TEST(LayoutCache, FreedLargeTypesHoldNothingAndTheCacheIsBoundedInBytes) {
    constexpr int kBlocks = 131072;
    std::vector<std::weak_ptr<const Layout>> large;
    for (int t = 0; t < 12; ++t) {
        std::vector<int> lens(kBlocks, 1), disps(kBlocks);
        for (int i = 0; i < kBlocks; ++i) disps[std::size_t(i)] = 2 * i + t;
        Type ty = indexed(std::move(lens), std::move(disps), MPI_INT);
        LayoutPtr l = layout_of(ty);
        ASSERT_EQ(l->blocks().size(), std::size_t(kBlocks));
        large.push_back(l);
    }  // (each type freed at the end of its round; nothing else holds its layout)
    int alive = 0;
    for (const auto& w : large) alive += !w.expired();
    EXPECT_EQ(alive, 0) << "layouts of large freed types still held";
    EXPECT_LE(layout_cache_bytes(), kLayoutCacheBytesDefault);

    constexpr std::size_t kLimit = 256 * 1024;
    set_layout_cache_bytes(kLimit);
    std::vector<std::weak_ptr<const Layout>> medium;  // ~32 KiB each (key and blocks)
    for (int t = 0; t < 64; ++t) {
        std::vector<int> lens(1000, 1), disps(1000);
        for (int i = 0; i < 1000; ++i) disps[std::size_t(i)] = 3 * i + t;
        Type ty = indexed(std::move(lens), std::move(disps), MPI_INT);
        medium.push_back(layout_of(ty));
        EXPECT_LE(layout_cache_bytes(), kLimit) << "round " << t;
    }
    alive = 0;
    for (const auto& w : medium) alive += !w.expired();
    EXPECT_GT(alive, 0) << "medium freed types are kept, within the bound";
    EXPECT_LT(alive, 16) << "more kept than the bound allows";
    EXPECT_FALSE(medium.back().expired()) << "the most recent one is kept";
    set_layout_cache_bytes(kLayoutCacheBytesDefault);
}

// ---------------------------------------------------------------------------------------------
// zip_chunks against MPI_Pack + MPI_Unpack.

struct Family {
    std::vector<Type> types;
    std::vector<std::uint64_t> elems;  // basic elements per type element
};

void add(Family& f, Type t) {
    LayoutPtr l = layout_of(t);
    ASSERT_NE(l, nullptr);
    const TypeInfo* b = l->basic();
    f.elems.push_back(b != nullptr ? l->basic_count() : l->size());
    f.types.push_back(std::move(t));
}

Family int_family() {
    Family f;
    add(f, predefined(MPI_INT));
    add(f, contiguous(3, MPI_INT));
    add(f, vector(3, 2, 4, MPI_INT));
    add(f, vector(4, 1, 1, MPI_INT));
    add(f, hvector(3, 1, -12, MPI_INT));
    add(f, indexed({2, 1, 3}, {5, 0, 9}, MPI_INT));
    add(f, hindexed({1, 2}, {20, 4}, MPI_INT));
    add(f, indexed_block(2, {6, 0, 3}, MPI_INT));
    add(f, hindexed_block(2, {-8, 16}, MPI_INT));
    add(f, structure({2, 1}, {0, 16}, {MPI_INT, MPI_INT}));
    add(f, subarray({4, 5}, {2, 3}, {1, 1}, MPI_ORDER_C, MPI_INT));
    add(f, subarray({3, 4, 2}, {2, 2, 2}, {1, 1, 0}, MPI_ORDER_FORTRAN, MPI_INT));
    add(f, resized(vector(2, 1, 3, MPI_INT), -4, 20));
    add(f, resized(contiguous(2, MPI_INT), 0, 8));
    {
        Type inner = vector(2, 1, 2, MPI_INT);
        Type s = structure({1, 1}, {0, 24}, {inner.get(), MPI_INT});
        add(f, vector(2, 1, 2, s));
    }
    add(f, dup(vector(3, 2, 4, MPI_INT)));
    add(f, darray(4, 1, {5, 7}, {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, {MPI_DISTRIBUTE_DFLT_DARG, 2}, {2, 2},
                  MPI_ORDER_C, MPI_INT));
    add(f, darray(6, 4, {6, 5}, {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC}, {MPI_DISTRIBUTE_DFLT_DARG, 2}, {3, 2},
                  MPI_ORDER_FORTRAN, MPI_INT));
    return f;
}

Family short_int_family() {  // a pair type with a hole inside the element
    Family f;
    add(f, predefined(MPI_SHORT_INT));
    add(f, contiguous(3, MPI_SHORT_INT));
    add(f, vector(2, 2, 3, MPI_SHORT_INT));
    add(f, hvector(2, 1, -16, MPI_SHORT_INT));
    add(f, indexed({1, 2}, {3, 0}, MPI_SHORT_INT));
    add(f, structure({1, 2}, {0, 24}, {MPI_SHORT_INT, MPI_SHORT_INT}));
    add(f, resized(predefined(MPI_SHORT_INT), -8, 16));
    return f;
}

Family double_int_family() {
    Family f;
    add(f, predefined(MPI_DOUBLE_INT));
    add(f, vector(3, 1, 2, MPI_DOUBLE_INT));
    add(f, contiguous(2, MPI_DOUBLE_INT));
    add(f, structure({1, 1}, {0, 40}, {MPI_DOUBLE_INT, MPI_DOUBLE_INT}));
    add(f, subarray({3, 3}, {2, 2}, {1, 0}, MPI_ORDER_C, MPI_DOUBLE_INT));
    return f;
}

Family mixed_family() {  // same signature (int, double, char), different places
    Family f;
    add(f, structure({1, 1, 1}, {0, 8, 16}, {MPI_INT, MPI_DOUBLE, MPI_CHAR}));
    add(f, structure({1, 1, 1}, {20, 0, 12}, {MPI_INT, MPI_DOUBLE, MPI_CHAR}));
    add(f, structure({1, 1, 1}, {0, 4, 12}, {MPI_INT, MPI_DOUBLE, MPI_CHAR}));
    {
        Type s = structure({1, 1, 1}, {0, 8, 16}, {MPI_INT, MPI_DOUBLE, MPI_CHAR});
        add(f, vector(2, 1, 3, s));
    }
    return f;
}

// zip_strided from origin into window (target offsets from window): copy_strided per chunk,
// plain copies for single pieces. Returns the bytes moved.
std::uint64_t scatter_strided(const Layout& o, std::uint64_t oc, void* obase, const Layout& t, std::uint64_t tc,
                              std::uint64_t toff, unsigned char* window) {
    std::uint64_t bytes = 0;
    zip_strided(o, oc, obase, t, tc, toff, [&](const StridedChunk* c, std::size_t n) {
        EXPECT_GE(n, 1u);
        EXPECT_LE(n, kMaxBatch);
        for (std::size_t k = 0; k < n; ++k) {
            EXPECT_GT(c[k].len, 0u);
            EXPECT_GE(c[k].n, 1u);
            copy_strided(window + c[k].offset, c[k].rstride, c[k].local, c[k].lstride, c[k].len, c[k].n);
            bytes += c[k].len * c[k].n;
        }
        return true;
    });
    return bytes;
}

// Copies count x origin into count x target with zip_chunks and with MPI; compares buffers.
void check_zip_chunks(MPI_Datatype ot, std::uint64_t oc, MPI_Datatype tt, std::uint64_t tc) {
    LayoutPtr o = layout_of(ot), t = layout_of(tt);
    ASSERT_TRUE(o && t);
    std::string why;
    ASSERT_EQ(check_signature(*o, oc, *t, tc, &why), MPI_SUCCESS) << why;
    Buffer src(*o, oc);
    fill_pattern(src.bytes, unsigned(oc + tc));
    Buffer want(*t, tc, 0xEE), got(*t, tc, 0xEE);
    mpi_unpack(mpi_pack(src.base(), oc, ot), want.base(), tc, tt);
    // The target is addressed as an offset into "the window": here, got.bytes.
    const std::uint64_t toff = std::uint64_t(-got.lo);
    std::uint64_t bytes = 0, batches = 0;
    bool ok = zip_chunks(*o, oc, src.base(), *t, tc, toff, [&](const Chunk* c, std::size_t n) {
        EXPECT_GE(n, 1u);
        EXPECT_LE(n, kMaxBatch);
        ++batches;
        for (std::size_t k = 0; k < n; ++k) {
            EXPECT_GT(c[k].len, 0u);
            EXPECT_LE(c[k].offset + c[k].len, got.bytes.size());
            std::memcpy(got.bytes.data() + c[k].offset, c[k].local, c[k].len);
            bytes += c[k].len;
        }
        return true;
    });
    EXPECT_TRUE(ok);
    EXPECT_EQ(bytes, o->size() * oc);
    EXPECT_EQ(got.bytes, want.bytes) << o->description() << " x " << oc << " -> " << t->description() << " x " << tc;
    // The same walk as StridedChunks, scattered with copy_strided.
    Buffer strided(*t, tc, 0xEE);
    EXPECT_EQ(scatter_strided(*o, oc, src.base(), *t, tc, toff, strided.bytes.data()), o->size() * oc);
    EXPECT_EQ(strided.bytes, want.bytes) << "strided: " << o->description() << " x " << oc << " -> " << t->description()
                                         << " x " << tc;
}

void zip_family(const Family& f, std::initializer_list<std::uint64_t> multipliers) {
    for (std::size_t a = 0; a < f.types.size(); ++a) {
        for (std::size_t b = 0; b < f.types.size(); ++b) {
            const std::uint64_t g = std::gcd(f.elems[a], f.elems[b]);
            for (std::uint64_t m : multipliers) {
                SCOPED_TRACE("origin #" + std::to_string(a) + " target #" + std::to_string(b) + " m " +
                             std::to_string(m));
                check_zip_chunks(f.types[a], m * f.elems[b] / g, f.types[b], m * f.elems[a] / g);
            }
        }
    }
}

TEST(LayoutZip, ChunksMatchPackUnpackInts) { zip_family(int_family(), {1, 2, 5}); }
TEST(LayoutZip, ChunksMatchPackUnpackPairs) {
    zip_family(short_int_family(), {1, 3});
    zip_family(double_int_family(), {1, 3});
}
TEST(LayoutZip, ChunksMatchPackUnpackMixedStructs) { zip_family(mixed_family(), {1, 2, 4}); }

TEST(LayoutZip, ZeroCountsAndEmptyTypes) {
    Type v = vector(3, 2, 4, MPI_INT);
    Type empty = contiguous(0, MPI_INT);
    int calls = 0;
    auto count_calls = [&](const Chunk*, std::size_t) {
        ++calls;
        return true;
    };
    EXPECT_TRUE(zip_chunks(*layout_of(v), 0, nullptr, *layout_of(MPI_INT), 0, 0, count_calls));
    EXPECT_TRUE(zip_chunks(*layout_of(empty), 5, nullptr, *layout_of(empty), 7, 0, count_calls));
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(footprint(*layout_of(v), 0), (std::pair<std::int64_t, std::int64_t>{0, 0}));
    EXPECT_EQ(footprint(*layout_of(empty), 9), (std::pair<std::int64_t, std::int64_t>{0, 0}));
}

TEST(LayoutZip, StopsWhenTheCallbackSaysSo) {
    Type v = vector(1000, 1, 2, MPI_INT);
    int calls = 0;
    bool ok = zip_chunks(*layout_of(v), 1, nullptr, *layout_of(MPI_INT), 1000, 0, [&](const Chunk*, std::size_t n) {
        EXPECT_EQ(n, kMaxBatch);
        return ++calls < 2;
    });
    EXPECT_FALSE(ok);
    EXPECT_EQ(calls, 2);
}

TEST(LayoutZip, ResumableZipperGivesTheSameChunks) {
    Type a = indexed({2, 1, 3}, {5, 0, 9}, MPI_INT);
    Type b = vector(3, 2, 4, MPI_INT);
    LayoutPtr la = layout_of(a), lb = layout_of(b);
    std::vector<Chunk> one_by_one, batched;
    ChunkZipper z1(*la, 50, nullptr, *lb, 50, 1000);
    Chunk c;
    while (z1.next(&c, 1) == 1) one_by_one.push_back(c);
    EXPECT_TRUE(z1.done());
    zip_chunks(*la, 50, nullptr, *lb, 50, 1000, [&](const Chunk* cs, std::size_t n) {
        batched.insert(batched.end(), cs, cs + n);
        return true;
    });
    ASSERT_EQ(one_by_one.size(), batched.size());
    for (std::size_t i = 0; i < batched.size(); ++i) {
        EXPECT_EQ(one_by_one[i].local, batched[i].local);
        EXPECT_EQ(one_by_one[i].offset, batched[i].offset);
        EXPECT_EQ(one_by_one[i].len, batched[i].len);
    }
    EXPECT_EQ(z1.bytes(), 50 * la->size());
}

TEST(LayoutZip, AbsoluteAddressesFromMpiBottom) {
    std::vector<int> a(4), b(3);
    std::iota(a.begin(), a.end(), 10);
    std::iota(b.begin(), b.end(), 20);
    MPI_Aint pa, pb;
    MPI_Get_address(&a[1], &pa);
    MPI_Get_address(&b[0], &pb);
    Type t = hindexed({2, 3}, {pa, pb}, MPI_INT);
    std::vector<int> dst(5, 0);
    zip_chunks(*layout_of(t), 1, MPI_BOTTOM, *layout_of(MPI_INT), 5, 0, [&](const Chunk* c, std::size_t n) {
        for (std::size_t k = 0; k < n; ++k)
            std::memcpy(reinterpret_cast<char*>(dst.data()) + c[k].offset, c[k].local, c[k].len);
        return true;
    });
    EXPECT_EQ(dst, (std::vector<int>{11, 12, 20, 21, 22}));
}

TEST(LayoutZip, LargeCountsCopy) {
    // 10^5 elements each way, real copies, compared with MPI.
    Type v = vector(3, 1, 2, MPI_INT);
    Type s = subarray({4, 5}, {2, 3}, {1, 1}, MPI_ORDER_C, MPI_INT);
    Type p = vector(2, 1, 3, MPI_SHORT_INT);
    auto t0 = std::chrono::steady_clock::now();
    check_zip_chunks(v, 100000, MPI_INT, 300000);
    check_zip_chunks(MPI_INT, 600000, s, 100000);
    check_zip_chunks(v, 200000, s, 100000);
    check_zip_chunks(p, 100000, MPI_SHORT_INT, 200000);
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ info ] 4 zips of 1e5 elements, with MPI_Pack/Unpack ground truth: %.1f ms\n", ms);
}

TEST(LayoutZip, HugeCountsWalkWithoutMemory) {
    // 5 * 10^6 elements of a strided vector against ints: 10^7 chunks, 60 MB of data the walk
    // never touches (no buffers exist; the addresses are only counted). Proportional
    // allocation or per-element re-flattening would show as time and memory here.
    // vector(3, 1, 2) puts ints at 0, 8, 16 with extent 20: the last int of one element and
    // the first of the next are adjacent, so they leave as one chunk: 2n + 1 chunks.
    Type v = vector(3, 1, 2, MPI_INT);
    LayoutPtr lv = layout_of(v), li = layout_of(MPI_INT);
    const std::uint64_t n = 5'000'000;
    std::uint64_t bytes = 0, chunks = 0;
    std::uint64_t next_offset = 0;
    bool monotone = true;
    auto t0 = std::chrono::steady_clock::now();
    zip_chunks(*lv, n, reinterpret_cast<void*>(std::uintptr_t{1} << 40), *li, 3 * n, 0,
               [&](const Chunk* c, std::size_t k) {
                   for (std::size_t i = 0; i < k; ++i) {
                       monotone &= c[i].offset == next_offset;
                       next_offset = c[i].offset + c[i].len;
                       bytes += c[i].len;
                   }
                   chunks += k;
                   return true;
               });
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(monotone);
    EXPECT_EQ(bytes, 12 * n);
    EXPECT_EQ(chunks, 2 * n + 1);
    std::printf("[ info ] %llu chunks walked in %.1f ms (%.1f ns/chunk)\n", static_cast<unsigned long long>(chunks), ms,
                ms * 1e6 / double(chunks));
    // Dense on both sides: one chunk, whatever the count.
    Type c = contiguous(4, MPI_INT);
    chunks = 0;
    zip_chunks(*layout_of(c), n, nullptr, *li, 4 * n, 0, [&](const Chunk* cs, std::size_t k) {
        chunks += k;
        EXPECT_EQ(cs[0].len, 16 * n);
        return true;
    });
    EXPECT_EQ(chunks, 1u);
}

// ---------------------------------------------------------------------------------------------
// zip_elements + reduce() against MPI_Reduce_local on unpacked basic arrays.

void fill_doubles(const Layout& l, std::uint64_t count, unsigned char* base, double first) {
    double v = first;
    for (ElementCursor c(l, count); !c.done(); c.advance(1)) {
        std::memcpy(base + c.offset(), &v, sizeof v);
        v += 1.5;
    }
}

void check_zip_elements(MPI_Op op, MPI_Datatype ot, std::uint64_t oc, MPI_Datatype tt, std::uint64_t tc,
                        MPI_Datatype rt = MPI_DATATYPE_NULL, std::uint64_t rc = 0, std::uint64_t max_run = UINT64_MAX) {
    LayoutPtr o = layout_of(ot), t = layout_of(tt);
    ASSERT_TRUE(o && t);
    std::string why;
    ASSERT_EQ(check_accumulate_layouts(op, *o, oc, *t, tc, &why), MPI_SUCCESS) << why;
    const TypeInfo& bt = *t->basic();
    const std::uint64_t n = t->basic_count() * tc;
    Buffer src(*o, oc), want(*t, tc), got(*t, tc);
    fill_pattern(src.bytes, 3);
    fill_pattern(want.bytes, 5);
    if (bt.type == MPI_DOUBLE) {  // byte patterns may be NaN: put small integers in the data
        fill_doubles(*o, oc, src.base(), 1);
        fill_doubles(*t, tc, want.base(), 1000);
    }
    got.bytes = want.bytes;
    // Expected: both sides as basic arrays, MPI_Reduce_local, back into the target layout.
    std::vector<unsigned char> oarr(n * bt.extent), tarr(n * bt.extent);
    mpi_unpack(mpi_pack(src.base(), oc, ot), oarr.data(), n, bt.type);
    mpi_unpack(mpi_pack(want.base(), tc, tt), tarr.data(), n, bt.type);
    std::vector<unsigned char> old_target = mpi_pack(tarr.data(), n, bt.type);
    MPI_Reduce_local(oarr.data(), tarr.data(), int(n), bt.type, op);
    mpi_unpack(mpi_pack(tarr.data(), n, bt.type), want.base(), tc, tt);

    const std::uint64_t toff = std::uint64_t(-got.lo);
    std::uint64_t elems = 0;
    if (rt == MPI_DATATYPE_NULL) {
        bool ok = zip_elements(
            *o, oc, src.base(), *t, tc, toff,
            [&](const void* optr, std::uint64_t off, std::uint64_t k) {
                EXPECT_LE(k, max_run);
                reduce(op, bt, got.bytes.data() + off, optr, k);
                elems += k;
            },
            max_run);
        EXPECT_TRUE(ok);
    } else {  // get_accumulate: the old target values also land in a result buffer of its own type
        LayoutPtr r = layout_of(rt);
        Buffer res(*r, rc, 0xEE), res_want(*r, rc, 0xEE);
        mpi_unpack(old_target, res_want.base(), rc, rt);
        bool ok = zip_elements(
            *o, oc, src.base(), *r, rc, res.base(), *t, tc, toff,
            [&](const void* optr, void* rptr, std::uint64_t off, std::uint64_t k) {
                reduce(op, bt, got.bytes.data() + off, optr, k, rptr);
                elems += k;
                return true;
            },
            max_run);
        EXPECT_TRUE(ok);
        EXPECT_EQ(res.bytes, res_want.bytes) << "result buffer";
    }
    EXPECT_EQ(elems, n);
    EXPECT_EQ(got.bytes, want.bytes) << o->description() << " x " << oc << " -> " << t->description() << " x " << tc;
}

void reduce_family(const Family& f, MPI_Op op, std::initializer_list<std::uint64_t> multipliers) {
    for (std::size_t a = 0; a < f.types.size(); ++a) {
        for (std::size_t b = 0; b < f.types.size(); ++b) {
            const std::uint64_t g = std::gcd(f.elems[a], f.elems[b]);
            for (std::uint64_t m : multipliers) {
                SCOPED_TRACE("origin #" + std::to_string(a) + " target #" + std::to_string(b) + " m " +
                             std::to_string(m));
                check_zip_elements(op, f.types[a], m * f.elems[b] / g, f.types[b], m * f.elems[a] / g);
            }
        }
    }
}

TEST(LayoutElements, SumOverIntLayouts) { reduce_family(int_family(), MPI_SUM, {1, 3}); }
TEST(LayoutElements, MaxlocOverPairLayouts) {
    reduce_family(short_int_family(), MPI_MAXLOC, {1, 2});
    reduce_family(double_int_family(), MPI_MINLOC, {1, 2});
}

TEST(LayoutElements, DoublesAndBoundedRuns) {
    Type v = vector(4, 3, 5, MPI_DOUBLE);
    Type s = subarray({6, 4}, {3, 4}, {2, 0}, MPI_ORDER_FORTRAN, MPI_DOUBLE);
    check_zip_elements(MPI_MAX, v, 3, s, 3);
    check_zip_elements(MPI_SUM, s, 2, v, 2, MPI_DOUBLE, 24, 4);
    check_zip_elements(MPI_BXOR, contiguous(5, MPI_INT), 40, MPI_INT, 200, MPI_DATATYPE_NULL, 0, 7);
}

TEST(LayoutElements, GetAccumulateThreeWay) {
    Type v = vector(3, 2, 4, MPI_INT);
    Type ix = indexed({2, 1, 3}, {5, 0, 9}, MPI_INT);
    Type sub = subarray({4, 5}, {2, 3}, {1, 1}, MPI_ORDER_C, MPI_INT);
    check_zip_elements(MPI_SUM, v, 4, ix, 4, sub, 4);
    check_zip_elements(MPI_SUM, MPI_INT, 24, v, 4, ix, 4, 5);
    Type pv = vector(2, 2, 3, MPI_SHORT_INT);
    check_zip_elements(MPI_MAXLOC, pv, 3, MPI_SHORT_INT, 12, contiguous(3, MPI_SHORT_INT), 4);
}

TEST(LayoutElements, RefusesDifferentBasicTypes) {
    int calls = 0;
    EXPECT_FALSE(zip_elements(*layout_of(MPI_INT), 2, nullptr, *layout_of(MPI_FLOAT), 2, 0,
                              [&](const void*, std::uint64_t, std::uint64_t) { ++calls; }));
    Type mixed = structure({1, 1}, {0, 8}, {MPI_INT, MPI_DOUBLE});
    EXPECT_FALSE(zip_elements(*layout_of(mixed), 1, nullptr, *layout_of(mixed), 1, 0,
                              [&](const void*, std::uint64_t, std::uint64_t) { ++calls; }));
    EXPECT_EQ(calls, 0);
}

TEST(LayoutElements, PairRunsAreWholeElements) {
    // contiguous(3, MPI_SHORT_INT) has blocks that glue one index to the next value; element
    // runs must still be whole pairs at the pair's extent.
    Type c = contiguous(3, MPI_SHORT_INT);
    std::vector<std::pair<std::int64_t, std::uint64_t>> runs;
    zip_elements(*layout_of(c), 2, nullptr, *layout_of(c), 2, 0,
                 [&](const void* p, std::uint64_t off, std::uint64_t n) {
                     EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p), off);
                     runs.push_back({std::int64_t(off), n});
                 });
    ASSERT_EQ(runs.size(), 1u);  // 2 x 3 pairs at stride 8 on both sides: one run
    EXPECT_EQ(runs[0], (std::pair<std::int64_t, std::uint64_t>{0, 6}));
    Type v = vector(2, 1, 2, MPI_SHORT_INT);
    runs.clear();
    zip_elements(*layout_of(v), 2, nullptr, *layout_of(MPI_SHORT_INT), 4, 0,
                 [&](const void* p, std::uint64_t off, std::uint64_t n) {
                     runs.push_back({std::int64_t(reinterpret_cast<std::uintptr_t>(p)), n});
                     EXPECT_EQ(off % 8, 0u);
                 });
    // Origin pairs at 0, 16, 24, 40 (extent of the vector: 24): runs {0,1}, {16,2}, {40,1}.
    EXPECT_EQ(runs, (std::vector<std::pair<std::int64_t, std::uint64_t>>{{0, 1}, {16, 2}, {40, 1}}));
}

// ---------------------------------------------------------------------------------------------
// Fuzz: random nested derived datatypes against MPI's own walk. Every layout must pass
// check_against_mpi (size, bounds, merged blocks, the walk == MPI_Pack for 1 and 3 elements),
// and scattering a packed stream through zip_chunks must leave a buffer exactly as
// MPI_Unpack does (margins untouched). FASTRMA_FUZZ_SEED (default 1) seeds it,
// FASTRMA_FUZZ_SECONDS (default 8) bounds its time; a failure names the seed, the iteration
// and the type.

struct RandomType {
    Type type;
    std::string what;
};

RandomType random_type(std::mt19937_64& rng, int depth) {
    static const MPI_Datatype kBasic[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_SHORT, MPI_DOUBLE_INT, MPI_SHORT_INT};
    static const char* const kBasicName[] = {"int", "double", "char", "short", "double_int", "short_int"};
    if (depth == 0 || rng() % 4 == 0) {
        const std::size_t b = rng() % 6;
        return {predefined(kBasic[b]), kBasicName[b]};
    }
    auto pick = [&](int lo, int hi) { return lo + int(rng() % unsigned(hi - lo + 1)); };
    // Children with data: Open MPI 4.1 packs a struct holding a zero-size darray at the
    // struct's size instead of its extent (its own MPI_Type_get_extent disagrees).
    auto child = [&] {
        RandomType k = random_type(rng, depth - 1);
        int ksize = 0;
        MPI_Type_size(k.type, &ksize);
        return ksize > 0 ? std::move(k) : RandomType{predefined(MPI_INT), "int"};
    };
    RandomType c = child();
    MPI_Aint lb = 0, ext = 0;
    MPI_Type_get_extent(c.type, &lb, &ext);
    const MPI_Aint unit = ext > 0 ? ext : 1;
    const std::string of = "(" + c.what + ")";
    switch (rng() % 11) {
    case 0: {
        const int n = pick(1, 4);
        return {contiguous(n, c.type), "contiguous " + std::to_string(n) + of};
    }
    case 1: {
        // A negative stride leaves a gap: Open MPI 4.1 packs blocks that touch or overlap at a
        // negative stride (vector 2,1,-1 of char; hvector 3,2,-1) as if they ascended, and
        // its true bounds disagree with the type map.
        const int n = pick(1, 4), bl = pick(1, 3);
        const int stride = rng() % 4 ? bl + pick(0, 3) : -(bl + pick(1, 3));
        return {vector(n, bl, stride, c.type),
                "vector " + std::to_string(n) + "," + std::to_string(bl) + "," + std::to_string(stride) + of};
    }
    case 2: {
        const int n = pick(1, 4), bl = pick(1, 3);
        const MPI_Aint stride = rng() % 4 ? MPI_Aint(bl) * unit + pick(0, 3) : -(MPI_Aint(bl) * unit + pick(1, 3));
        return {hvector(n, bl, stride, c.type),
                "hvector " + std::to_string(n) + "," + std::to_string(bl) + "," + std::to_string(stride) + of};
    }
    case 3:
    case 4: {
        const int n = pick(1, 4);
        const std::size_t sz = std::size_t(n);
        std::vector<int> bl(sz), disp(sz);
        std::vector<MPI_Aint> bdisp(sz);
        std::string w;
        for (int i = 0; i < n; ++i) {
            bl[std::size_t(i)] = pick(0, 3);
            disp[std::size_t(i)] = pick(-2, 10);
            bdisp[std::size_t(i)] = MPI_Aint(disp[std::size_t(i)]) * unit + pick(0, 7);
            w += " " + std::to_string(bl[std::size_t(i)]) + "@" +
                 std::to_string(rng() % 2 ? disp[std::size_t(i)] : bdisp[std::size_t(i)]);
        }
        if (rng() % 2) return {indexed(bl, disp, c.type), "indexed" + w + of};
        return {hindexed(bl, bdisp, c.type), "hindexed(bytes)" + w + of};
    }
    case 5:
    case 6: {
        const int n = pick(1, 4), bl = pick(1, 3);
        const std::size_t sz = std::size_t(n);
        std::vector<int> disp(sz);
        std::vector<MPI_Aint> bdisp(sz);
        for (int i = 0; i < n; ++i) {
            disp[std::size_t(i)] = pick(-2, 10);
            bdisp[std::size_t(i)] = MPI_Aint(disp[std::size_t(i)]) * unit + pick(0, 7);
        }
        if (rng() % 2) return {indexed_block(bl, disp, c.type), "indexed_block " + std::to_string(bl) + of};
        return {hindexed_block(bl, bdisp, c.type), "hindexed_block " + std::to_string(bl) + of};
    }
    case 7: {
        const int n = pick(1, 3);
        std::vector<RandomType> kids;
        std::vector<int> bl;
        std::vector<MPI_Aint> disp;
        std::vector<MPI_Datatype> types;
        std::string w = "struct";
        kids.push_back(std::move(c));
        for (int i = 1; i < n; ++i) kids.push_back(child());
        for (const RandomType& k : kids) {
            bl.push_back(pick(1, 3));
            disp.push_back(pick(-16, 64));
            types.push_back(k.type);
            w += " " + std::to_string(bl.back()) + "@" + std::to_string(disp.back()) + "(" + k.what + ")";
        }
        return {structure(bl, disp, types), w};
    }
    case 8: {
        const MPI_Aint nlb = pick(-8, 8), next = ext + pick(0, 16) > 0 ? ext + pick(0, 16) : 1;
        return {resized(c.type, nlb, next), "resized " + std::to_string(nlb) + "," + std::to_string(next) + of};
    }
    case 9: {
        const int nd = pick(1, 3), order = rng() % 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
        std::vector<int> sizes, sub, starts;
        std::string w = order == MPI_ORDER_C ? "subarray C" : "subarray F";
        for (int d = 0; d < nd; ++d) {
            sizes.push_back(pick(1, 4));
            sub.push_back(pick(1, sizes.back()));
            starts.push_back(pick(0, sizes.back() - sub.back()));
            w += " " + std::to_string(sizes.back()) + "/" + std::to_string(sub.back()) + "+" +
                 std::to_string(starts.back());
        }
        return {subarray(sizes, sub, starts, order, c.type), w + of};
    }
    default: {
        const int nprocs = pick(1, 4), rank = pick(0, nprocs - 1), nd = pick(1, 2);
        const int order = rng() % 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
        std::vector<int> gsizes, distribs, dargs, psizes;
        std::string w = "darray " + std::to_string(rank) + "/" + std::to_string(nprocs);
        for (int d = 0; d < nd; ++d) {
            gsizes.push_back(pick(1, 6));
            psizes.push_back(d == 0 ? nprocs : 1);
            int dist = psizes.back() == 1 && rng() % 3 == 0 ? MPI_DISTRIBUTE_NONE
                       : rng() % 2                          ? MPI_DISTRIBUTE_BLOCK
                                                            : MPI_DISTRIBUTE_CYCLIC;
#ifdef MPICH_VERSION
            // MPICH 4.0.2 puts the true lower bound of a cyclic darray at 0 where its first
            // element is not (rank 1 of 2, cyclic over 5 doubles: elements at 8 and 24; Open
            // MPI and fastrma say 8): with MPICH as the host, blocks only.
            if (dist == MPI_DISTRIBUTE_CYCLIC) dist = MPI_DISTRIBUTE_BLOCK;
#endif
            distribs.push_back(dist);
            // A block of the default size always fits; cyclic(k) any k.
            dargs.push_back(dist == MPI_DISTRIBUTE_CYCLIC && rng() % 2 ? pick(1, 2) : MPI_DISTRIBUTE_DFLT_DARG);
            w += " " + std::to_string(gsizes.back()) + ":" + std::to_string(dist) + ":" + std::to_string(dargs.back());
        }
        // Over a predefined type: Open MPI refuses some derived old types (MPI_ERR_TYPE).
        const bool dbl = rng() % 2;
        return {darray(nprocs, rank, gsizes, distribs, dargs, psizes, order, dbl ? MPI_DOUBLE : MPI_INT),
                w + (dbl ? "(double)" : "(int)")};
    }
    }
}

std::uint64_t fuzz_env(const char* name, std::uint64_t dflt) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

TEST(LayoutFuzz, RandomNestedTypesWalkAsMpiPacksAndUnpacks) {
    const std::uint64_t seed = fuzz_env("FASTRMA_FUZZ_SEED", 1);
    const double seconds = double(fuzz_env("FASTRMA_FUZZ_SECONDS", 8));
    std::mt19937_64 rng(seed);
    const Layout& bytes = *layout_of(MPI_BYTE);
    std::uint64_t n = 0;
    const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (; std::chrono::steady_clock::now() < stop; ++n) {
        RandomType r = random_type(rng, 1 + int(rng() % 3));
        MPI_Count size = 0;
        MPI_Type_size_x(r.type, &size);
        if (size > (1 << 20)) continue;
        SCOPED_TRACE("seed " + std::to_string(seed) + ", type " + std::to_string(n) + ": " + r.what);
        LayoutPtr l = layout_of(r.type);
        ASSERT_NE(l, nullptr);
        check_against_mpi(r.type, *l);
        for (std::uint64_t count : {1, 2}) {
            if (l->size() == 0) break;  // (nothing to unpack: MPI_Unpack refuses an empty buffer)
            Buffer mpi(*l, count, 0xEE), ours(*l, count, 0xEE);
            std::vector<unsigned char> packed(std::size_t(l->size() * count));
            fill_pattern(packed, unsigned(n));
            mpi_unpack(packed, mpi.base(), count, r.type);
            zip_chunks(bytes, packed.size(), packed.data(), *l, count, 0, [&](const Chunk* c, std::size_t k) {
                for (std::size_t i = 0; i < k; ++i) std::memcpy(ours.base() + c[i].offset, c[i].local, c[i].len);
                return true;
            });
            ASSERT_EQ(ours.bytes, mpi.bytes) << "count " << count << ": scattered unlike MPI_Unpack";
            Buffer strided(*l, count, 0xEE);
            scatter_strided(bytes, packed.size(), packed.data(), *l, count, std::uint64_t(-strided.lo),
                            strided.bytes.data());
            ASSERT_EQ(strided.bytes, mpi.bytes) << "count " << count << ": strided scatter unlike MPI_Unpack";
            // ... and the other way: gathered from the type (the origin side strided), as MPI packs it.
            std::vector<unsigned char> gathered(packed.size(), 0xEE);
            scatter_strided(*l, count, mpi.base(), bytes, gathered.size(), 0, gathered.data());
            std::vector<unsigned char> want = mpi_pack(mpi.base(), count, r.type);  // (overlaps: the last write)
            want.resize(gathered.size());
            ASSERT_EQ(gathered, want) << "count " << count << ": strided gather unlike MPI_Pack";
        }
        if (HasFailure()) break;
    }
    std::printf("layout fuzz: seed %llu, %llu types\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(n));
}

}  // namespace
