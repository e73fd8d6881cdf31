// test_derived.cpp — large derived-datatype puts, gets and accumulates, checked byte by byte
// at the target (every data element where MPI-3.1 §11.3 puts it, every gap and margin
// untouched) on allocate, create and dynamic windows: the strided copy loops of mapped
// peers, the dense-span reads of cross-memory attach (spans longer than the span buffer,
// and a sparse layout below the density rule), the iovec-a-piece puts, and a span that
// crosses an unmapped gap of a dynamic window. Every rank works on the next (a ring), but
// for the concurrent accumulates, which every rank sends to rank 0 at once.
// Runs over shared memory and over am (FASTRMA_TRANSPORT=am).
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/mpi_world.hpp"

namespace {

constexpr int kSentinel = -7;  // what every window int holds before a put
constexpr int kN = 70000;  // elements: a vector of them spans 560 KB (more than one span buffer)
constexpr std::size_t kInts = 2 * kN + 64;  // window ints
constexpr std::size_t kMargin = 16;  // ints before the first element

int value(int rank, std::size_t i) { return rank * 1000000 + int(i); }

// One window of kInts ints per rank, of one flavor; disp(r, i) names int i of rank r's part.
struct Win {
    std::string flavor;
    FRMA_Win win = FRMA_WIN_NULL;
    int* mem = nullptr;
    std::vector<int> owned;
    std::vector<MPI_Aint> addr;  // dynamic: every rank's base address
    explicit Win(const std::string& f) : flavor(f) {
        if (f == "allocate") {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(kInts * sizeof(int)), int(sizeof(int)), MPI_INFO_NULL,
                                                     MPI_COMM_WORLD, &mem, &win));
        } else {
            owned.assign(kInts, 0);
            mem = owned.data();
            if (f == "create") {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, MPI_Aint(kInts * sizeof(int)), int(sizeof(int)),
                                                       MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            } else {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem, MPI_Aint(kInts * sizeof(int))));
            }
        }
        MPI_Aint mine = 0;
        MPI_Get_address(mem, &mine);
        addr.assign(std::size_t(world_size()), 0);
        MPI_Allgather(&mine, 1, MPI_AINT, addr.data(), 1, MPI_AINT, MPI_COMM_WORLD);
        fill_sentinel();
    }
    ~Win() {
        if (flavor == "dynamic") FRMA_Win_detach(win, mem);
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    }
    MPI_Aint disp(int r, std::size_t i) const {
        return flavor == "dynamic" ? addr[std::size_t(r)] + MPI_Aint(i * sizeof(int)) : MPI_Aint(i);
    }
    void fill_sentinel() {
        for (std::size_t i = 0; i < kInts; ++i) mem[i] = kSentinel;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    void fill_values() {
        for (std::size_t i = 0; i < kInts; ++i) mem[i] = value(world_rank(), i);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    // One op in a lock_all epoch, completed, then every rank may look at its own part.
    template <class F>
    void epoch(F f) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        f();
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
        MPI_Barrier(MPI_COMM_WORLD);
    }
};

struct Type {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    explicit Type(MPI_Datatype d) : t(d) { MPI_Type_commit(&t); }
    ~Type() { MPI_Type_free(&t); }
};

MPI_Datatype vector_of_ints(int n, int stride) {
    MPI_Datatype t;
    MPI_Type_vector(n, 1, stride, MPI_INT, &t);
    return t;
}

// Where element k of the transfer lies at the target, in ints from the target index given as
// the displacement, for each shape; -1 ends the list (checked against the window below).
struct Shape {
    const char* name;
    MPI_Datatype (*make)();
    std::size_t first;  // the displacement's int index
    std::vector<std::size_t> (*where)(std::size_t first);
};

std::vector<std::size_t> every_other(std::size_t first) {
    std::vector<std::size_t> w(kN);
    for (std::size_t k = 0; k < std::size_t(kN); ++k) w[k] = first + 2 * k;
    return w;
}
std::vector<std::size_t> downward(std::size_t first) {  // hvector, stride -8 bytes
    std::vector<std::size_t> w(kN);
    for (std::size_t k = 0; k < std::size_t(kN); ++k) w[k] = first - 2 * k;
    return w;
}
std::vector<std::size_t> uneven(std::size_t first) {  // blocks of 1, 2, 3 ints, gaps of 1
    std::vector<std::size_t> w;
    for (std::size_t at = first, b = 0; w.size() < std::size_t(kN); at += 1, ++b)
        for (std::size_t j = 0; j <= b % 3 && w.size() < std::size_t(kN); ++j) w.push_back(at++);
    return w;
}

MPI_Datatype make_vector() { return vector_of_ints(kN, 2); }
MPI_Datatype make_hvector_down() {
    MPI_Datatype t;
    MPI_Type_create_hvector(kN, 1, -8, MPI_INT, &t);
    return t;
}
MPI_Datatype make_indexed() {  // uniform: blocks of one int at every other int
    std::vector<int> len(kN, 1), d(kN);
    for (int k = 0; k < kN; ++k) d[std::size_t(k)] = 2 * k;
    MPI_Datatype t;
    MPI_Type_indexed(kN, len.data(), d.data(), MPI_INT, &t);
    return t;
}
MPI_Datatype make_uneven() {
    const std::vector<std::size_t> w = uneven(0);
    std::vector<int> len, d;
    for (std::size_t k = 0; k < w.size(); ++k) {
        if (k > 0 && w[k] == w[k - 1] + 1) {
            ++len.back();
        } else {
            len.push_back(1);
            d.push_back(int(w[k]));
        }
    }
    MPI_Datatype t;
    MPI_Type_indexed(int(len.size()), len.data(), d.data(), MPI_INT, &t);
    return t;
}

const Shape kShapes[] = {
    {"vector", make_vector, kMargin, every_other},
    {"hvector_negative_stride", make_hvector_down, kMargin + 2 * (kN - 1), downward},
    {"indexed", make_indexed, kMargin, every_other},
    {"indexed_uneven", make_uneven, kMargin, uneven},
};

class Derived : public ::testing::TestWithParam<std::string> {};

// Target rank `me` holds, at the places `where` lists, what `from` put; elsewhere init(i).
template <class Init>
void expect_window(const int* mem, const std::vector<std::size_t>& where, int from, Init init, const char* what) {
    std::vector<int> want(kInts);
    for (std::size_t i = 0; i < kInts; ++i) want[i] = init(i);
    for (std::size_t k = 0; k < where.size(); ++k) want[where[k]] = value(from, k);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < kInts && bad < 5; ++i)
        if (mem[i] != want[i]) {
            ADD_FAILURE() << what << ": window int " << i << " is " << mem[i] << ", want " << want[i];
            ++bad;
        }
}

TEST_P(Derived, PutScattersIntoTheTypeAndLeavesGapsAlone) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n, from = (me + n - 1) % n;
    std::vector<int> src(kN);
    for (int k = 0; k < kN; ++k) src[std::size_t(k)] = value(me, std::size_t(k));
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(s.name);
        Type t(s.make());
        w.fill_sentinel();
        w.epoch(
            [&] { ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src.data(), kN, MPI_INT, to, w.disp(to, s.first), 1, t.t, w.win)); });
        expect_window(
            w.mem, s.where(s.first), from, [](std::size_t) { return kSentinel; }, s.name);
    }
}

TEST_P(Derived, GetGathersFromTheType) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n;
    w.fill_values();
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(s.name);
        Type t(s.make());
        std::vector<int> got(kN + 8, kSentinel);
        w.epoch([&] {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data() + 4, kN, MPI_INT, to, w.disp(to, s.first), 1, t.t, w.win));
        });
        const std::vector<std::size_t> where = s.where(s.first);
        for (std::size_t k = 0; k < std::size_t(kN); ++k)
            if (got[k + 4] != value(to, where[k])) {
                ADD_FAILURE() << s.name << ": element " << k << " is " << got[k + 4] << ", want "
                              << value(to, where[k]);
                break;
            }
        for (std::size_t k : {0, 1, 2, 3, kN + 4, kN + 5, kN + 6, kN + 7})
            EXPECT_EQ(got[k], kSentinel) << "origin margin " << k;
    }
}

TEST_P(Derived, GetIntoAStridedOriginLeavesOriginGapsAlone) {
    // The origin is the vector (local scatter at a stride), the target contiguous.
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n;
    w.fill_values();
    Type t(make_vector());
    std::vector<int> got(2 * kN, kSentinel);
    w.epoch([&] { ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data(), 1, t.t, to, w.disp(to, kMargin), kN, MPI_INT, w.win)); });
    for (std::size_t k = 0; k < std::size_t(kN); ++k) {
        ASSERT_EQ(got[2 * k], value(to, kMargin + k)) << "element " << k;
        ASSERT_EQ(got[2 * k + 1], kSentinel) << "origin gap " << k;
    }
}

TEST_P(Derived, SparseGetBelowTheDensityRule) {
    // Ints 2 KiB apart (one int per 512): gaps far above the span rule, read piece by piece.
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n;
    w.fill_values();
    constexpr int kStride = 512, kCount = int((kInts - kMargin) / kStride);
    Type t(vector_of_ints(kCount, kStride));
    std::vector<int> got(kCount, kSentinel);
    w.epoch(
        [&] { ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data(), kCount, MPI_INT, to, w.disp(to, kMargin), 1, t.t, w.win)); });
    for (std::size_t k = 0; k < std::size_t(kCount); ++k)
        ASSERT_EQ(got[k], value(to, kMargin + k * kStride)) << "element " << k;
}

TEST_P(Derived, AccumulateSumsOnlyTheTypesElements) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n, from = (me + n - 1) % n;
    w.fill_values();
    std::vector<int> ones(kN, 1);
    Type t(make_vector());
    w.epoch([&] {
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Accumulate(ones.data(), kN, MPI_INT, to, w.disp(to, kMargin), 1, t.t, MPI_SUM, w.win));
    });
    for (std::size_t i = 0; i < kInts; ++i) {
        const bool hit = i >= kMargin && i < kMargin + 2 * kN && (i - kMargin) % 2 == 0;
        ASSERT_EQ(w.mem[i], value(me, i) + (hit ? 1 : 0)) << "window int " << i;
    }
    (void)from;
}

// Blocks of 3 ints on both sides at different strides (origin every 4 ints, target every 7,
// upward and downward: hvector of -28 bytes): over am a strided request with a strided origin.
TEST_P(Derived, PutBlocksFromAStridedOriginAtAStride) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n, from = (me + n - 1) % n;
    constexpr int kBlocks = int((kInts - kMargin - 8) / 7);
    std::vector<int> src(std::size_t(kBlocks) * 4);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = value(me, i);
    MPI_Datatype o, up, down;
    MPI_Type_vector(kBlocks, 3, 4, MPI_INT, &o);
    MPI_Type_vector(kBlocks, 3, 7, MPI_INT, &up);
    MPI_Type_create_hvector(kBlocks, 3, -28, MPI_INT, &down);
    Type ot(o), upt(up), downt(down);
    for (const bool upward : {true, false}) {
        SCOPED_TRACE(upward ? "upward" : "downward");
        const std::size_t first = upward ? kMargin : kMargin + 7 * std::size_t(kBlocks - 1);
        w.fill_sentinel();
        w.epoch([&] {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Put(src.data(), 1, ot.t, to, w.disp(to, first), 1, upward ? upt.t : downt.t, w.win));
        });
        std::vector<int> want(kInts, kSentinel);
        for (std::size_t b = 0; b < std::size_t(kBlocks); ++b)
            for (std::size_t j = 0; j < 3; ++j)
                want[(upward ? first + 7 * b : first - 7 * b) + j] = value(from, 4 * b + j);
        for (std::size_t i = 0; i < kInts; ++i) ASSERT_EQ(w.mem[i], want[i]) << "window int " << i;
    }
}

// The get of PutBlocksFromAStridedOriginAtAStride: blocks of 3 ints every 7 (up and down)
// into blocks every 4 of the origin, whose gaps stay as they were.
TEST_P(Derived, GetBlocksIntoAStridedOriginFromAStride) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n;
    constexpr int kBlocks = int((kInts - kMargin - 8) / 7);
    MPI_Datatype o, up, down;
    MPI_Type_vector(kBlocks, 3, 4, MPI_INT, &o);
    MPI_Type_vector(kBlocks, 3, 7, MPI_INT, &up);
    MPI_Type_create_hvector(kBlocks, 3, -28, MPI_INT, &down);
    Type ot(o), upt(up), downt(down);
    w.fill_values();
    for (const bool upward : {true, false}) {
        SCOPED_TRACE(upward ? "upward" : "downward");
        const std::size_t first = upward ? kMargin : kMargin + 7 * std::size_t(kBlocks - 1);
        std::vector<int> got(std::size_t(kBlocks) * 4, kSentinel);
        w.epoch([&] {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Get(got.data(), 1, ot.t, to, w.disp(to, first), 1, upward ? upt.t : downt.t, w.win));
        });
        for (std::size_t b = 0; b < std::size_t(kBlocks); ++b) {
            for (std::size_t j = 0; j < 3; ++j)
                ASSERT_EQ(got[4 * b + j], value(to, (upward ? first + 7 * b : first - 7 * b) + j)) << "block " << b;
            ASSERT_EQ(got[4 * b + 3], kSentinel) << "origin gap " << b;
        }
    }
}

// Blocks of 1100 ints (4400 bytes, above am's strided piece size) every 1200 ints: over am
// each block is a put of its own, received in place.
TEST_P(Derived, PutLargeBlocksAtAStride) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size(), to = (me + 1) % n, from = (me + n - 1) % n;
    constexpr int kBlock = 1100, kStep = 1200, kBlocks = int((kInts - kMargin) / kStep);
    std::vector<int> src(std::size_t(kBlocks) * kBlock);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = value(me, i);
    MPI_Datatype v;
    MPI_Type_vector(kBlocks, kBlock, kStep, MPI_INT, &v);
    Type t(v);
    w.fill_sentinel();
    w.epoch([&] {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src.data(), int(src.size()), MPI_INT, to, w.disp(to, kMargin), 1, t.t, w.win));
    });
    std::vector<int> want(kInts, kSentinel);
    for (std::size_t b = 0; b < std::size_t(kBlocks); ++b)
        for (std::size_t j = 0; j < std::size_t(kBlock); ++j)
            want[kMargin + kStep * b + j] = value(from, kBlock * b + j);
    for (std::size_t i = 0; i < kInts; ++i) ASSERT_EQ(w.mem[i], want[i]) << "window int " << i;
}

// Every rank accumulates into the same elements of rank 0 (vector, hvector downward,
// indexed): rank r adds r + 1 to each; gaps untouched.
TEST_P(Derived, AccumulatesFromEveryRankIntoTheSameElements) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size();
    const int total = n * (n + 1) / 2;
    std::vector<int> add(kN, me + 1);
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(s.name);
        Type t(s.make());
        w.fill_values();
        w.epoch([&] {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Accumulate(add.data(), kN, MPI_INT, 0, w.disp(0, s.first), 1, t.t, MPI_SUM, w.win));
        });
        if (me != 0) continue;
        std::vector<int> want(kInts);
        for (std::size_t i = 0; i < kInts; ++i) want[i] = value(0, i);
        for (std::size_t at : s.where(s.first)) want[at] += total;
        for (std::size_t i = 0; i < kInts; ++i) ASSERT_EQ(w.mem[i], want[i]) << "window int " << i;
    }
}

// Blocks of 3 ints from a strided origin (every 4 ints) onto blocks every 7 ints downward
// (hvector of -28 bytes) of rank 0, from every rank: rank r adds r + 1 to each element.
TEST_P(Derived, AccumulateBlocksFromAStridedOriginDownward) {
    Win w(GetParam());
    const int me = world_rank(), n = world_size();
    const int total = n * (n + 1) / 2;
    constexpr int kBlocks = int((kInts - kMargin - 8) / 7);
    std::vector<int> src(std::size_t(kBlocks) * 4, -1000);  // the gaps would show as -1000
    for (std::size_t b = 0; b < std::size_t(kBlocks); ++b)
        for (std::size_t j = 0; j < 3; ++j) src[4 * b + j] = me + 1;
    MPI_Datatype o, down;
    MPI_Type_vector(kBlocks, 3, 4, MPI_INT, &o);
    MPI_Type_create_hvector(kBlocks, 3, -28, MPI_INT, &down);
    Type ot(o), downt(down);
    const std::size_t first = kMargin + 7 * std::size_t(kBlocks - 1);
    w.fill_values();
    w.epoch([&] {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(src.data(), 1, ot.t, 0, w.disp(0, first), 1, downt.t, MPI_SUM, w.win));
    });
    if (me != 0) return;
    std::vector<int> want(kInts);
    for (std::size_t i = 0; i < kInts; ++i) want[i] = value(0, i);
    for (std::size_t b = 0; b < std::size_t(kBlocks); ++b)
        for (std::size_t j = 0; j < 3; ++j) want[first - 7 * b + j] += total;
    for (std::size_t i = 0; i < kInts; ++i) ASSERT_EQ(w.mem[i], want[i]) << "window int " << i;
}

// Accumulates from every rank at once into the same elements of rank 0's window: kReps ops a
// rank, back to back in one lock_all epoch, through a derived target type (vector, hvector of
// negative stride, uniform and uneven indexed) and a contiguous origin. MPI_SUM on int and
// double, MPI_REPLACE (int), get_accumulate (MPI_SUM on int and double; the old values show
// each rank's own earlier ops in issue order, and every other rank's as a whole number of
// ops) and an MPI_NO_OP
// get_accumulate of what the window holds. Every window byte is checked: elements as
// computed, gaps and margins as filled.
constexpr int kReps = 3;

struct AccShape {
    const char* name;
    MPI_Datatype basic;  // MPI_INT or MPI_DOUBLE
    int n;  // elements
    const char* kind;  // "vector", "hvector_down", "indexed", "uneven"
    std::size_t first;  // the displacement, in elements of basic
};

const AccShape kAccShapes[] = {
    {"int_vector", MPI_INT, kN, "vector", kMargin},
    {"int_hvector_negative_stride", MPI_INT, kN, "hvector_down", kMargin + 2 * (kN - 1)},
    {"int_indexed", MPI_INT, kN, "indexed", kMargin},
    {"int_indexed_uneven", MPI_INT, kN, "uneven", kMargin},
    {"double_vector", MPI_DOUBLE, kN / 4, "vector", 8},
    {"double_hvector_negative_stride", MPI_DOUBLE, kN / 4, "hvector_down", 8 + 2 * (kN / 4 - 1)},
    {"double_indexed", MPI_DOUBLE, kN / 4, "indexed", 8},
};

MPI_Datatype make_acc_type(const AccShape& s) {
    MPI_Datatype t;
    const int es = s.basic == MPI_INT ? 4 : 8;
    if (!std::strcmp(s.kind, "vector")) {
        MPI_Type_vector(s.n, 1, 2, s.basic, &t);
    } else if (!std::strcmp(s.kind, "hvector_down")) {
        MPI_Type_create_hvector(s.n, 1, -2 * es, s.basic, &t);
    } else if (!std::strcmp(s.kind, "indexed")) {
        std::vector<int> len(std::size_t(s.n), 1), d(std::size_t(s.n));
        for (int k = 0; k < s.n; ++k) d[std::size_t(k)] = 2 * k;
        MPI_Type_indexed(s.n, len.data(), d.data(), s.basic, &t);
    } else {
        t = make_uneven();  // MPI_INT, kN elements
    }
    return t;
}

std::vector<std::size_t> acc_where(const AccShape& s) {
    if (!std::strcmp(s.kind, "uneven")) return uneven(s.first);
    std::vector<std::size_t> w(std::size_t(s.n));
    for (std::size_t k = 0; k < w.size(); ++k)
        w[k] = !std::strcmp(s.kind, "hvector_down") ? s.first - 2 * k : s.first + 2 * k;
    return w;
}

// What rank r adds to element k in one op: 1..3 in byte r (int), or (r + 1) * (1..3) (double).
int int_part(int r, std::size_t k) { return int(1 + k % 3) << (8 * r); }
double double_part(int r, std::size_t k) { return double((r + 1) * int(1 + k % 3)); }

// Rank 0's window bytes equal want's, or the first few differing ints are reported.
void expect_bytes(const int* mem, const std::vector<int>& want, const std::string& what) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < kInts && bad < 5; ++i)
        if (std::memcmp(&mem[i], &want[i], sizeof(int)) != 0) {
            ADD_FAILURE() << what << ": window int " << i << " is " << mem[i] << ", want " << want[i];
            ++bad;
        }
}

TEST_P(Derived, ConcurrentAccumulatesFromEveryRankIntoTheSameElements) {
    Win w(GetParam());
    const int me = world_rank(), np = world_size();
    ASSERT_LE(np, 4);  // int_part: one byte of the int per rank
    for (const AccShape& s : kAccShapes) {
        SCOPED_TRACE(s.name);
        Type t(make_acc_type(s));
        const std::vector<std::size_t> where = acc_where(s);
        const std::size_t n = where.size();
        const bool ints = s.basic == MPI_INT;
        // The window's first state: ints value(0, i); doubles i / 4 (exact) at double i.
        std::vector<int> init(kInts);
        for (std::size_t i = 0; i < kInts; ++i) init[i] = value(0, i);
        if (!ints)
            for (std::size_t i = 0; i < kInts / 2; ++i) {
                const double d = double(i) / 4;
                std::memcpy(&init[2 * i], &d, sizeof d);
            }
        auto reset = [&] {
            if (me == 0) std::memcpy(w.mem, init.data(), kInts * sizeof(int));
            MPI_Barrier(MPI_COMM_WORLD);
        };
        const std::string base = std::string(GetParam()) + " " + s.name;

        // MPI_SUM, kReps ops from every rank (int: every rank's count shows in its own byte).
        reset();
        std::vector<int> iorig(n);
        std::vector<double> dorig(n);
        for (std::size_t k = 0; k < n; ++k) iorig[k] = int_part(me, k), dorig[k] = double_part(me, k);
        const void* orig = ints ? static_cast<const void*>(iorig.data()) : dorig.data();
        w.epoch([&] {
            for (int r = 0; r < kReps; ++r)
                ASSERT_EQ(MPI_SUCCESS,
                          FRMA_Accumulate(orig, int(n), s.basic, 0, w.disp(0, ints ? s.first : 2 * s.first), 1, t.t,
                                          MPI_SUM, w.win));
        });
        std::vector<int> want = init;
        for (std::size_t k = 0; k < n; ++k) {
            if (ints) {
                for (int r = 0; r < np; ++r) want[where[k]] += kReps * int_part(r, k);
            } else {
                double d;
                std::memcpy(&d, &want[2 * where[k]], sizeof d);
                for (int r = 0; r < np; ++r) d += kReps * double_part(r, k);
                std::memcpy(&want[2 * where[k]], &d, sizeof d);
            }
        }
        if (me == 0) expect_bytes(w.mem, want, base + " MPI_SUM");
        MPI_Barrier(MPI_COMM_WORLD);

        // MPI_NO_OP get_accumulate of the same elements: what MPI_SUM left.
        if (ints) {
            std::vector<int> got(n, kSentinel);
            w.epoch([&] {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(nullptr, 0, MPI_INT, got.data(), int(n), MPI_INT, 0,
                                                           w.disp(0, s.first), 1, t.t, MPI_NO_OP, w.win));
            });
            for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(got[k], want[where[k]]) << base << " NO_OP element " << k;
        } else {
            std::vector<double> got(n, -1.0);
            w.epoch([&] {
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(nullptr, 0, MPI_DOUBLE, got.data(), int(n), MPI_DOUBLE, 0,
                                                           w.disp(0, 2 * s.first), 1, t.t, MPI_NO_OP, w.win));
            });
            for (std::size_t k = 0; k < n; ++k) {
                double d;
                std::memcpy(&d, &want[2 * where[k]], sizeof d);
                ASSERT_EQ(got[k], d) << base << " NO_OP element " << k;
            }
        }
        if (!ints) {
            // get_accumulate MPI_SUM of doubles: op r of rank me saw exactly r of its own ops
            // before it and a whole number (0..kReps) of every other rank's, element by element.
            reset();
            std::vector<double> old(std::size_t(kReps) * n, -1.0);
            w.epoch([&] {
                for (int r = 0; r < kReps; ++r)
                    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(dorig.data(), int(n), MPI_DOUBLE,
                                                               old.data() + std::size_t(r) * n, int(n), MPI_DOUBLE, 0,
                                                               w.disp(0, 2 * s.first), 1, t.t, MPI_SUM, w.win));
            });
            int combos = 1;
            for (int q = 1; q < np; ++q) combos *= kReps + 1;
            for (int r = 0; r < kReps; ++r)
                for (std::size_t k = 0; k < n; ++k) {
                    double d0;
                    std::memcpy(&d0, &init[2 * where[k]], sizeof d0);
                    const double delta = old[std::size_t(r) * n + k] - d0, unit = double(1 + k % 3);
                    bool fine = false;
                    for (int c = 0; c < combos && !fine; ++c) {
                        double units = double(r * (me + 1));
                        for (int q = 0, x = c; q < np; ++q) {
                            if (q == me) continue;
                            units += double((x % (kReps + 1)) * (q + 1));
                            x /= kReps + 1;
                        }
                        fine = delta == units * unit;
                    }
                    ASSERT_TRUE(fine) << base << " get_accumulate op " << r << " element " << k << " old "
                                      << old[std::size_t(r) * n + k];
                }
            if (me == 0) expect_bytes(w.mem, want, base + " get_accumulate MPI_SUM");
            MPI_Barrier(MPI_COMM_WORLD);
            continue;
        }

        // get_accumulate MPI_SUM: op r of rank me saw exactly r of its own ops before it, and
        // a whole number (0..kReps) of every other rank's.
        reset();
        std::vector<int> old(std::size_t(kReps) * n, kSentinel);
        w.epoch([&] {
            for (int r = 0; r < kReps; ++r)
                ASSERT_EQ(MPI_SUCCESS,
                          FRMA_Get_accumulate(iorig.data(), int(n), MPI_INT, old.data() + std::size_t(r) * n, int(n),
                                              MPI_INT, 0, w.disp(0, s.first), 1, t.t, MPI_SUM, w.win));
        });
        for (int r = 0; r < kReps; ++r)
            for (std::size_t k = 0; k < n; ++k) {
                const int delta = old[std::size_t(r) * n + k] - init[where[k]], unit = int(1 + k % 3);
                for (int q = 0; q < 4; ++q) {
                    const int b = (delta >> (8 * q)) & 0xff;
                    const bool fine = q == me ? b == r * unit : q < np ? b % unit == 0 && b <= kReps * unit : b == 0;
                    ASSERT_TRUE(fine) << base << " get_accumulate op " << r << " element " << k << " old "
                                      << old[std::size_t(r) * n + k];
                }
            }
        if (me == 0) expect_bytes(w.mem, want, base + " get_accumulate MPI_SUM");
        MPI_Barrier(MPI_COMM_WORLD);

        // MPI_REPLACE from every rank: each element holds one rank's value whole; gaps untouched.
        reset();
        std::vector<int> mine(n);
        for (std::size_t k = 0; k < n; ++k) mine[k] = value(me + 1, k);
        w.epoch([&] {
            for (int r = 0; r < kReps; ++r)
                ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(mine.data(), int(n), MPI_INT, 0, w.disp(0, s.first), 1, t.t,
                                                       MPI_REPLACE, w.win));
        });
        if (me == 0) {
            want = init;
            for (std::size_t k = 0; k < n; ++k) {
                const int got = w.mem[where[k]];
                bool one = false;
                for (int r = 0; r < np; ++r) one = one || got == value(r + 1, k);
                ASSERT_TRUE(one) << base << " MPI_REPLACE element " << k << " is " << got;
                want[where[k]] = got;
            }
            expect_bytes(w.mem, want, base + " MPI_REPLACE gaps");
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

// get_accumulate through three different layouts of T (MPI_INT or MPI_DOUBLE): origin blocks
// of 3 every 4 elements, result blocks of 3 every 5, target blocks of 3 every 7 (upward, and
// downward: an hvector of negative stride), MPI_SUM then MPI_NO_OP. Each rank to the next (a
// ring): every old value is what the target held, element by element; the result's gaps,
// the target's gaps and margins untouched, its elements summed (MPI_SUM) or left (NO_OP).
template <class T>
void get_accumulate_three_layouts(Win& w, MPI_Datatype basic) {
    const int me = world_rank(), np = world_size(), to = (me + 1) % np, from = (me + np - 1) % np;
    T* mem = reinterpret_cast<T*>(w.mem);
    const std::size_t nt = kInts * sizeof(int) / sizeof(T), blocks = (nt - 2 * kMargin) / 7;
    auto held = [](int r, std::size_t i) { return T(r * 1000000 + int(i)); };
    auto add = [](int r, std::size_t k) { return T(1 + r + int(k % 5)); };
    MPI_Datatype o, res, up, down;
    MPI_Type_vector(int(blocks), 3, 4, basic, &o);
    MPI_Type_vector(int(blocks), 3, 5, basic, &res);
    MPI_Type_vector(int(blocks), 3, 7, basic, &up);
    MPI_Type_create_hvector(int(blocks), 3, -7 * MPI_Aint(sizeof(T)), basic, &down);
    Type ot(o), rt(res), upt(up), downt(down);
    std::vector<T> src(blocks * 4, T(-1000));  // the gaps would show as -1000
    for (std::size_t b = 0; b < blocks; ++b)
        for (std::size_t j = 0; j < 3; ++j) src[4 * b + j] = add(me, 3 * b + j);
    for (const bool upward : {true, false})
        for (const bool noop : {false, true}) {
            SCOPED_TRACE(std::string(upward ? "upward" : "downward") + (noop ? " MPI_NO_OP" : " MPI_SUM"));
            const std::size_t first = upward ? kMargin : kMargin + 7 * (blocks - 1);
            auto at = [&](std::size_t b) { return upward ? first + 7 * b : first - 7 * b; };
            for (std::size_t i = 0; i < nt; ++i) mem[i] = held(me, i);
            MPI_Barrier(MPI_COMM_WORLD);
            std::vector<T> got(blocks * 5, T(-7));
            w.epoch([&] {
                ASSERT_EQ(MPI_SUCCESS,
                          FRMA_Get_accumulate(noop ? nullptr : src.data(), noop ? 0 : 1, noop ? basic : ot.t,
                                              got.data(), 1, rt.t, to, w.disp(to, first * sizeof(T) / sizeof(int)), 1,
                                              upward ? upt.t : downt.t, noop ? MPI_NO_OP : MPI_SUM, w.win));
            });
            for (std::size_t b = 0; b < blocks; ++b) {
                for (std::size_t j = 0; j < 3; ++j)
                    ASSERT_EQ(got[5 * b + j], held(to, at(b) + j)) << "old value, block " << b << " element " << j;
                ASSERT_EQ(got[5 * b + 3], T(-7)) << "result gap, block " << b;
                ASSERT_EQ(got[5 * b + 4], T(-7)) << "result gap, block " << b;
            }
            std::vector<T> want(nt);
            for (std::size_t i = 0; i < nt; ++i) want[i] = held(me, i);
            if (!noop)
                for (std::size_t b = 0; b < blocks; ++b)
                    for (std::size_t j = 0; j < 3; ++j) want[at(b) + j] += add(from, 3 * b + j);
            for (std::size_t i = 0; i < nt; ++i) ASSERT_EQ(mem[i], want[i]) << "window element " << i;
            MPI_Barrier(MPI_COMM_WORLD);
        }
}

TEST_P(Derived, GetAccumulateThroughThreeLayouts) {
    Win w(GetParam());
    {
        SCOPED_TRACE("MPI_INT");
        get_accumulate_three_layouts<int>(w, MPI_INT);
    }
    {
        SCOPED_TRACE("MPI_DOUBLE");
        get_accumulate_three_layouts<double>(w, MPI_DOUBLE);
    }
}

// A pair type with holes (MPI_DOUBLE_INT: 12 data bytes, extent 16) through a vector, MPI_MAXLOC
// from every rank at once into rank 0: each element the winner (larger value, lower index on a
// tie), its 4 padding bytes and the gaps between elements untouched.
TEST_P(Derived, ConcurrentMaxlocOfAPairTypeWithHoles) {
    struct DI {
        double v;
        int i;
    };
    static_assert(sizeof(DI) == 16);
    Win w(GetParam());
    const int me = world_rank(), np = world_size();
    constexpr int m = 2000;
    constexpr std::size_t first = 4;  // elements of 16 bytes: int 4 * first
    MPI_Datatype vt;
    MPI_Type_vector(m, 1, 2, MPI_DOUBLE_INT, &vt);
    Type t(vt);
    auto mine = [](int r, int k) { return DI{double((k + r) % 4), r * 10 + k % 3}; };
    std::vector<int> want(kInts);
    for (std::size_t i = 0; i < kInts; ++i) want[i] = value(0, i);
    for (int k = 0; k < m; ++k) {
        const double v0 = -1.0;
        const int i0 = 999;
        std::memcpy(&want[4 * (first + 2 * std::size_t(k))], &v0, 8);
        std::memcpy(&want[4 * (first + 2 * std::size_t(k)) + 2], &i0, 4);
    }
    if (me == 0) std::memcpy(w.mem, want.data(), kInts * sizeof(int));
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<DI> orig(m);
    for (int k = 0; k < m; ++k) orig[std::size_t(k)] = mine(me, k);
    w.epoch([&] {
        for (int r = 0; r < kReps; ++r)
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(orig.data(), m, MPI_DOUBLE_INT, 0, w.disp(0, 4 * first), 1, vt,
                                                   MPI_MAXLOC, w.win));
    });
    if (me == 0) {
        for (int k = 0; k < m; ++k) {
            DI best{-1.0, 999};
            for (int r = 0; r < np; ++r) {
                const DI c = mine(r, k);
                if (c.v > best.v || (c.v == best.v && c.i < best.i)) best = c;
            }
            std::memcpy(&want[4 * (first + 2 * std::size_t(k))], &best.v, 8);
            std::memcpy(&want[4 * (first + 2 * std::size_t(k)) + 2], &best.i, 4);
        }
        expect_bytes(w.mem, want, std::string(GetParam()) + " MPI_MAXLOC on MPI_DOUBLE_INT");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

INSTANTIATE_TEST_SUITE_P(Flavors, Derived, ::testing::Values("allocate", "create", "dynamic"),
                         [](const auto& p) { return p.param; });

// A dynamic window region with an unreadable page inside (PROT_NONE): a get whose pieces lie
// densely on both sides of it reads them (the span over the page cannot be read whole, and
// is read piece by piece) and nothing else.
TEST(DerivedDynamic, GetAroundAnUnreadablePageInsideARegion) {
    const int me = world_rank(), n = world_size(), to = (me + 1) % n;
    const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
    auto* mem = static_cast<unsigned char*>(
        mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem, MAP_FAILED);
    int* ints = reinterpret_cast<int*>(mem);
    const std::size_t per = page / sizeof(int);
    for (std::size_t i = 0; i < 3 * per; ++i)
        if (i / per != 1) ints[i] = value(me, i);
    ASSERT_EQ(0, mprotect(mem + page, page, PROT_NONE));
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem, MPI_Aint(3 * page)));
    MPI_Aint mine = 0;
    MPI_Get_address(mem, &mine);
    std::vector<MPI_Aint> addr(static_cast<std::size_t>(n));
    MPI_Allgather(&mine, 1, MPI_AINT, addr.data(), 1, MPI_AINT, MPI_COMM_WORLD);
    // Every other int of the first page, then every other int of the third (one type, one get).
    const std::size_t half = per / 2;
    std::vector<MPI_Aint> disp;
    std::vector<std::size_t> idx;
    for (std::size_t k = 0; k < half; ++k) idx.push_back(2 * k);
    for (std::size_t k = 0; k < half; ++k) idx.push_back(2 * per + 2 * k);
    for (std::size_t i : idx) disp.push_back(MPI_Aint(i * sizeof(int)));
    MPI_Datatype t;
    MPI_Type_create_hindexed_block(int(disp.size()), 1, disp.data(), MPI_INT, &t);
    MPI_Type_commit(&t);
    std::vector<int> got(disp.size(), kSentinel);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data(), int(got.size()), MPI_INT, to, addr[std::size_t(to)], 1, t, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    for (std::size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], value(to, idx[k])) << "element " << k;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Type_free(&t);
    FRMA_Win_detach(win, mem);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    munmap(mem, 3 * page);
}

}  // namespace
