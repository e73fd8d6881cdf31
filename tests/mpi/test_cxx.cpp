// test_cxx.cpp — the C++ API (include/fastrma/fastrma.hpp) under mpiexec with 1, 2 and 4
// ranks: typed data lands where the index says, RAII epochs open and close what they
// should, failures arrive as fastrma::Error with the MPI error class, the typed atomics
// lose no update across ranks and threads, windows and epochs move.
//
// Suites by what they need from the engine: Cxx{Types,Window,Passive,Errors,Atomics} and
// the typed CxxTypedRing / CxxTypedAtomics passive-target RMA; CxxActive fence and PSCW;
// CxxShared allocate_shared and dynamic windows; CxxRequest rput & co.; CxxManage names,
// info and attributes; CxxDerived a user struct with a derived datatype.
#include <gtest/gtest.h>
#include <mpi.h>
#include <fastrma/fastrma.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#include "common/mpi_world.hpp"

// A struct of the application's own, made an Element by specializing datatype_of with a
// committed derived datatype (CxxDerived).
namespace app {
struct Vec3 {
    double x, y, z;
    friend bool operator==(const Vec3&, const Vec3&) = default;
};
inline MPI_Datatype vec3_datatype() {
    static const MPI_Datatype t = [] {
        MPI_Datatype d;
        MPI_Type_contiguous(3, MPI_DOUBLE, &d);
        MPI_Type_commit(&d);
        return d;
    }();
    return t;
}
}  // namespace app

template <>
struct fastrma::datatype_of<app::Vec3> {
    static MPI_Datatype get() noexcept { return app::vec3_datatype(); }
};

namespace {

using fastrma::Error;
using fastrma::op;
using fastrma::value_index;
using fastrma::Window;

int right_of(int r) { return (r + 1) % world_size(); }
int left_of(int r) { return (r + world_size() - 1) % world_size(); }

// f() must throw fastrma::Error of class cls whose message names `call`.
template <class F>
void expect_error(int cls, const char* call, F&& f) {
    try {
        f();
        ADD_FAILURE() << "expected " << call << " to throw error class " << cls;
    } catch (const Error& e) {
        EXPECT_EQ(e.error_class(), cls) << e.what();
        EXPECT_NE(std::string(e.what()).find(call), std::string::npos) << e.what();
    }
}

template <class T>
struct is_complex : std::false_type {};
template <class V>
struct is_complex<std::complex<V>> : std::true_type {};
template <class T>
struct is_value_index : std::false_type {};
template <class V>
struct is_value_index<value_index<V>> : std::true_type {};

// A value that differs by rank and by index, for every element type.
template <class T>
T value_for(int r, std::size_t i) {
    const long long x = r * 1000LL + static_cast<long long>(i) * 7 + 1;
    if constexpr (std::is_same_v<T, bool>)
        return x % 3 == 0;
    else if constexpr (std::is_same_v<T, std::byte>)
        return std::byte(x & 0xff);
    else if constexpr (std::is_same_v<T, char>)
        return char('a' + x % 26);
    else if constexpr (is_complex<T>::value)
        return T(typename T::value_type(x), typename T::value_type(-r));
    else if constexpr (is_value_index<T>::value)
        return T{decltype(T::value)(x), int(i) - r};
    else
        return static_cast<T>(x);
}

template <class T>
std::vector<T> values_for(int r, std::size_t n) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = value_for<T>(r, i);
    return v;
}

enum class Flavor { allocate, create };

// A zero-filled window of `count` elements per rank; for the create flavor, `memory` is the
// user's (declared first, so it outlives the window).
template <class T>
struct TestWindow {
    std::vector<T> memory;
    Window<T> win;
    TestWindow(Flavor f, std::size_t count, MPI_Comm comm = MPI_COMM_WORLD) {
        if (f == Flavor::allocate) {
            win = Window<T>::allocate(comm, count);
            std::fill(win.local().begin(), win.local().end(), T{});
        } else {
            memory.assign(count, T{});
            win = Window<T>::create(comm, memory);
        }
        MPI_Barrier(comm);
    }
};

// ---- types ------------------------------------------------------------------------------------

static_assert(fastrma::Element<std::int8_t> && fastrma::Element<std::uint64_t> && fastrma::Element<bool> &&
              fastrma::Element<long double> && fastrma::Element<std::complex<float>> && fastrma::Element<std::byte> &&
              fastrma::Element<char> && fastrma::Element<value_index<short>>);
static_assert(!fastrma::Element<std::string> && !fastrma::Element<const int> && !fastrma::Element<int*> &&
              !fastrma::Element<value_index<char>>);
static_assert(!std::is_copy_constructible_v<Window<int>> && std::is_nothrow_move_constructible_v<Window<int>>);
static_assert(!std::is_copy_constructible_v<fastrma::LockEpoch> &&
              std::is_nothrow_move_constructible_v<fastrma::LockEpoch>);

template <class T>
void expect_layout() {
    MPI_Datatype t = fastrma::mpi_type<T>();
    MPI_Aint lb = -1, extent = 0;
    int size = 0;
    MPI_Type_get_extent(t, &lb, &extent);
    MPI_Type_size(t, &size);
    EXPECT_EQ(lb, 0) << typeid(T).name();
    EXPECT_EQ(extent, MPI_Aint(sizeof(T))) << typeid(T).name();
    if constexpr (is_value_index<T>::value) {
        EXPECT_EQ(size, int(sizeof(T::value) + sizeof(int))) << typeid(T).name();
        const std::size_t after_value = (sizeof(T::value) + alignof(int) - 1) / alignof(int) * alignof(int);
        EXPECT_EQ(offsetof(T, index), after_value) << "index must follow value like the C pair struct";
    } else {
        EXPECT_EQ(size, int(sizeof(T))) << typeid(T).name();
    }
}

TEST(CxxTypes, DatatypesMatchTheCppLayout) {
    expect_layout<char>();
    expect_layout<signed char>();
    expect_layout<unsigned char>();
    expect_layout<std::int16_t>();
    expect_layout<std::uint16_t>();
    expect_layout<std::int32_t>();
    expect_layout<std::uint32_t>();
    expect_layout<std::int64_t>();
    expect_layout<std::uint64_t>();
    expect_layout<long long>();
    expect_layout<unsigned long long>();
    expect_layout<wchar_t>();
    expect_layout<bool>();
    expect_layout<float>();
    expect_layout<double>();
    expect_layout<long double>();
    expect_layout<std::complex<float>>();
    expect_layout<std::complex<double>>();
    expect_layout<std::complex<long double>>();
    expect_layout<std::byte>();
    expect_layout<value_index<float>>();
    expect_layout<value_index<double>>();
    expect_layout<value_index<long double>>();
    expect_layout<value_index<long>>();
    expect_layout<value_index<int>>();
    expect_layout<value_index<short>>();
    EXPECT_EQ(fastrma::mpi_type<value_index<double>>(), MPI_DOUBLE_INT);
    EXPECT_EQ(fastrma::mpi_type<value_index<int>>(), MPI_2INT);
    EXPECT_EQ(fastrma::mpi_type<std::complex<double>>(), MPI_CXX_DOUBLE_COMPLEX);
    EXPECT_EQ(fastrma::mpi_type<bool>(), MPI_CXX_BOOL);
    EXPECT_EQ(fastrma::mpi_type<std::byte>(), MPI_BYTE);
    EXPECT_EQ(fastrma::mpi_type<int>(), MPI_INT);
}

TEST(CxxTypes, OpsAndModesMapToMpi) {
    const std::pair<op, MPI_Op> table[] = {
        {op::sum, MPI_SUM},         {op::prod, MPI_PROD},  {op::min, MPI_MIN},       {op::max, MPI_MAX},
        {op::land, MPI_LAND},       {op::lor, MPI_LOR},    {op::lxor, MPI_LXOR},     {op::band, MPI_BAND},
        {op::bor, MPI_BOR},         {op::bxor, MPI_BXOR},  {op::maxloc, MPI_MAXLOC}, {op::minloc, MPI_MINLOC},
        {op::replace, MPI_REPLACE}, {op::no_op, MPI_NO_OP}};
    for (auto [o, m] : table) EXPECT_EQ(fastrma::to_mpi(o), m) << int(o);
    EXPECT_EQ(int(fastrma::mode::noprecede | fastrma::mode::nostore), MPI_MODE_NOPRECEDE | MPI_MODE_NOSTORE);
    EXPECT_EQ(int(fastrma::nocheck), MPI_MODE_NOCHECK);
    EXPECT_EQ(int(fastrma::mode::none), 0);
}

// ---- typed put / get ring ------------------------------------------------------------------

template <class T>
class CxxTypedRing : public ::testing::Test {};
using RingTypes = ::testing::Types<std::int8_t, std::uint16_t, int, std::uint64_t, long long, float, double,
                                   long double, std::complex<float>, std::complex<double>, char, std::byte,
                                   value_index<double>, value_index<int>>;  // bool: see BoolElements
TYPED_TEST_SUITE(CxxTypedRing, RingTypes);

TYPED_TEST(CxxTypedRing, PutGetRingExchange) {
    using T = TypeParam;
    const int me = world_rank(), right = right_of(me), left = left_of(me);
    for (Flavor f : {Flavor::allocate, Flavor::create}) {
        for (std::size_t k : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000)}) {
            // [0, k) and [2k, 3k) must stay untouched; [k, 2k) receives the left rank's block.
            TestWindow<T> tw(f, 3 * k);
            const Window<T>& w = tw.win;
            const std::vector<T> src = values_for<T>(me, k);
            std::vector<T> back(k);
            if (k % 2) {  // lock_all
                auto epoch = w.lock_all();
                w.put(right, k, src).flush();
                w.get(right, k, back).wait();
            } else {  // a shared lock on the one target
                auto epoch = w.lock(right, fastrma::shared);
                w.put(right, k, src);
                epoch.flush();
                w.get(right, k, back);
                epoch.flush_local();
            }
            EXPECT_EQ(back, src) << "k " << k;
            MPI_Barrier(MPI_COMM_WORLD);
            const std::span<T> mine = w.local();
            ASSERT_EQ(mine.size(), 3 * k);
            const std::vector<T> want = values_for<T>(left, k);
            for (std::size_t i = 0; i < k; ++i) {
                ASSERT_EQ(mine[i], T{}) << "before the block, i " << i;
                ASSERT_EQ(mine[k + i], want[i]) << "k " << k << " i " << i;
                ASSERT_EQ(mine[2 * k + i], T{}) << "after the block, i " << i;
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

// ---- windows --------------------------------------------------------------------------------

TEST(CxxWindow, BoolElements) {
    // std::vector<bool> has no contiguous storage, so bool gets its own test on arrays.
    const int me = world_rank(), right = right_of(me), left = left_of(me);
    std::array<bool, 9> memory{};
    auto w = Window<bool>::create(MPI_COMM_WORLD, memory);
    MPI_Barrier(MPI_COMM_WORLD);
    std::array<bool, 9> src{};
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = (i + std::size_t(me)) % 3 == 0;
    {
        auto e = w.lock_all();
        w.put(right, 0, src).flush();
        EXPECT_EQ(w.fetch_and_op(right, 8, true, op::lxor), src[8]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(memory[i], (i + std::size_t(left)) % 3 == 0) << i;
    EXPECT_EQ(memory[8], !((8 + std::size_t(left)) % 3 == 0));
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxWindow, LocalSpanRankSizeAndAttributes) {
    const int me = world_rank(), n = world_size();
    fastrma::init();  // idempotent: the first window may have started the engine already
    EXPECT_TRUE(fastrma::initialized());
    for (Flavor f : {Flavor::allocate, Flavor::create}) {
        TestWindow<double> tw(f, 12);
        const Window<double>& w = tw.win;
        EXPECT_TRUE(bool(w));
        EXPECT_NE(w.handle(), FRMA_WIN_NULL);
        EXPECT_EQ(w.rank(), me);
        EXPECT_EQ(w.size(), n);
        EXPECT_EQ(w.local().size(), 12u);
        if (f == Flavor::create) {
            EXPECT_EQ(w.local().data(), tw.memory.data());
        }
        EXPECT_EQ(w.flavor(), f == Flavor::allocate ? MPI_WIN_FLAVOR_ALLOCATE : MPI_WIN_FLAVOR_CREATE);
        EXPECT_EQ(w.disp_unit(), int(sizeof(double)));
        EXPECT_EQ(w.size_bytes(), MPI_Aint(12 * sizeof(double)));
        EXPECT_EQ(w.model(), MPI_WIN_UNIFIED);
        auto base = w.get_attr(MPI_WIN_BASE);
        ASSERT_TRUE(base.has_value());
        EXPECT_EQ(*base, static_cast<void*>(w.local().data()));
        auto flavor = w.get_attr(MPI_WIN_CREATE_FLAVOR);
        ASSERT_TRUE(flavor.has_value());
        EXPECT_EQ(*static_cast<int*>(*flavor), w.flavor());
        EXPECT_EQ(w.group().size(), n);
        EXPECT_EQ(w.errhandler(), MPI_ERRORS_RETURN) << "every Window<T> returns errors (and throws)";
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST(CxxWindow, MoveSemantics) {
    const int me = world_rank(), right = right_of(me), left = left_of(me);
    auto a = Window<int>::allocate(MPI_COMM_WORLD, 8);
    std::fill(a.local().begin(), a.local().end(), 0);
    const FRMA_Win h = a.handle();
    int* const p = a.local().data();
    MPI_Barrier(MPI_COMM_WORLD);

    Window<int> b(std::move(a));
    EXPECT_FALSE(bool(a));
    EXPECT_EQ(a.handle(), FRMA_WIN_NULL);
    EXPECT_TRUE(a.local().empty());
    EXPECT_EQ(b.handle(), h);
    EXPECT_EQ(b.local().data(), p);
    EXPECT_EQ(b.rank(), me);
    const int v = 100 + me;
    {
        auto e = b.lock_all();
        b.put(right, 1, std::span(&v, 1)).flush();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(b.local()[1], 100 + left);

    // Move-assigning onto a live window frees that window first (collectively: every rank
    // does this here).
    auto c = Window<int>::allocate(MPI_COMM_WORLD, 2);
    c = std::move(b);
    EXPECT_EQ(c.handle(), h);
    EXPECT_FALSE(bool(b));

    // An epoch belongs to the handle, not to the Window object: it survives a move.
    {
        auto e = c.lock_all();
        Window<int> d = std::move(c);
        const int w2 = 200 + me;
        d.put(right, 2, std::span(&w2, 1));
        e.flush();
        e.unlock();
        MPI_Barrier(MPI_COMM_WORLD);
        EXPECT_EQ(d.local()[2], 200 + left);
        c = std::move(d);  // onto an empty window: nothing to free
    }
    // Windows in a vector survive reallocation.
    std::vector<Window<int>> many;
    for (int i = 0; i < 5; ++i) {
        many.push_back(Window<int>::allocate(MPI_COMM_WORLD, 1));
        many.back().local()[0] = i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 5; ++i) {
        auto e = many[std::size_t(i)].lock(right, fastrma::shared);
        EXPECT_EQ(many[std::size_t(i)].atomic_load(right, 0), i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Moved epochs end once.
    std::vector<fastrma::LockEpoch> locks;
    for (int t = 0; t < world_size(); ++t) locks.push_back(c.lock(t, fastrma::shared));
    for (int t = 0; t < world_size(); ++t) c.flush(t);
    fastrma::LockEpoch moved = std::move(locks.front());
    EXPECT_FALSE(locks.front().active());
    EXPECT_TRUE(moved.active());
    locks.clear();
    moved.unlock();
    EXPECT_FALSE(moved.active());
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxWindow, ExplicitFreeAndRelease) {
    auto w = Window<long>::allocate(MPI_COMM_WORLD, 4);
    {
        auto e = w.lock_all();
        expect_error(MPI_ERR_RMA_SYNC, "FRMA_Win_free", [&] { w.free(); });
        EXPECT_TRUE(bool(w)) << "a failed free keeps the window";
    }
    w.free();
    EXPECT_FALSE(bool(w));
    EXPECT_TRUE(w.local().empty());
    w.free();  // nothing to do

    auto r = Window<long>::allocate(MPI_COMM_WORLD, 4);
    FRMA_Win raw = r.release();
    EXPECT_FALSE(bool(r));
    ASSERT_NE(raw, FRMA_WIN_NULL);
    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&raw));
}

TEST(CxxWindow, WindowOnSelf) {
    auto w = Window<std::int64_t>::allocate(MPI_COMM_SELF, 4);
    EXPECT_EQ(w.rank(), 0);
    EXPECT_EQ(w.size(), 1);
    auto e = w.lock(0, fastrma::exclusive);
    w.local()[0] = 41;  // a lock on self is granted at once: loads and stores are allowed
    EXPECT_EQ(w.fetch_add(0, 0, 1), 41);
    EXPECT_EQ(w.local()[0], 42);
    w.atomic_store(0, 3, -7);
    EXPECT_EQ(w.local()[3], -7);
}

// ---- passive-target epochs --------------------------------------------------------------

TEST(CxxPassive, LockScopeReleasesTheExclusiveLock) {
    const int me = world_rank(), n = world_size();
    auto w = Window<long>::allocate(MPI_COMM_WORLD, 4);
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    // On one rank: a second lock on the same target is refused while the first is held and
    // accepted once its scope ended.
    {
        auto e = w.lock(me, fastrma::exclusive);
        expect_error(MPI_ERR_RMA_SYNC, "FRMA_Win_lock", [&] { (void)w.lock(me, fastrma::exclusive); });
    }
    { auto again = w.lock(me, fastrma::exclusive); }
    MPI_Barrier(MPI_COMM_WORLD);
    if (n < 2) return;
    // Across ranks: rank 1's exclusive lock on rank 0 gets through only once rank 0's
    // scope has ended, and then sees everything rank 0 wrote in it.
    if (me == 0) {
        {
            auto e = w.lock(0, fastrma::exclusive);
            w.atomic_store(0, 0, 1);  // forces the grant
            MPI_Barrier(MPI_COMM_WORLD);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            w.atomic_store(0, 0, 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 1) {
            const auto t0 = std::chrono::steady_clock::now();
            auto e = w.lock(0, fastrma::exclusive);
            EXPECT_EQ(w.atomic_load(0, 0), 2) << "the exclusive lock overlapped rank 0's";
            EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
            w.atomic_store(0, 0, 3);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[0], 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxPassive, SharedLocksCoexist) {
    // Every rank holds a granted shared lock on rank 0 while all meet in a barrier.
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 1);
    w.local()[0] = 9;
    MPI_Barrier(MPI_COMM_WORLD);
    auto e = w.lock(0, fastrma::shared);
    EXPECT_EQ(w.atomic_load(0, 0), 9);
    MPI_Barrier(MPI_COMM_WORLD);
    e.unlock();
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxPassive, LockAllCompletionsAndSync) {
    const int me = world_rank(), n = world_size();
    const std::size_t k = 64;
    auto w = Window<std::uint32_t>::allocate(MPI_COMM_WORLD, k * std::size_t(n));
    std::fill(w.local().begin(), w.local().end(), 0u);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::uint32_t> src(k);
    std::iota(src.begin(), src.end(), std::uint32_t(me) << 16);
    {
        auto e = w.lock_all(fastrma::nocheck);
        for (int t = 0; t < n; ++t) {
            fastrma::Completion c = w.put(t, std::size_t(me) * k, src);
            EXPECT_EQ(c.rank(), t);
            c.wait();  // local completion: src may be reused
        }
        e.flush();  // all targets, remote
        e.flush_local();  // nothing left
        for (int t = 0; t < n; ++t) {
            std::vector<std::uint32_t> seen(k);
            w.get_accumulate(t, std::size_t(me) * k, {}, seen, op::no_op);
            e.flush(t);
            EXPECT_EQ(seen, src);
            // MPI_NO_OP ignores the origin, whatever its size.
            std::vector<std::uint32_t> again(k), ignored(3, 7u);
            w.get_accumulate(t, std::size_t(me) * k, ignored, again, op::no_op);
            e.flush(t);
            EXPECT_EQ(again, src);
            e.flush_local(t);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        e.sync();
        for (int o = 0; o < n; ++o)
            for (std::size_t i = 0; i < k; ++i)
                ASSERT_EQ(w.local()[std::size_t(o) * k + i], (std::uint32_t(o) << 16) + i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxPassive, ExceptionInsideAnEpochUnlocksOnTheWay) {
    const int me = world_rank(), n = world_size();
    auto w = Window<std::int64_t>::allocate(MPI_COMM_WORLD, 2);
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < 20; ++it) {
        try {
            auto e = w.lock(0, fastrma::exclusive);
            std::int64_t v = 0;
            w.get(0, 0, std::span(&v, 1)).wait();
            ++v;
            w.put(0, 0, std::span(&v, 1)).wait();
            w.put(0, 2, std::span(&v, 1));  // out of range: throws inside the epoch
            ADD_FAILURE() << "no exception";
        } catch (const Error& e) {
            EXPECT_EQ(e.error_class(), MPI_ERR_RMA_RANGE) << e.what();
        }
    }
    // Had any unwinding left rank 0 locked, the next exclusive locks would never be granted.
    {
        auto e = w.lock(0, fastrma::exclusive);
        w.fetch_add(0, 1, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[0], 20 * n) << "an exclusive read-modify-write was lost";
        EXPECT_EQ(w.local()[1], n);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- errors ----------------------------------------------------------------------------------

TEST(CxxErrors, ClassesAndMessages) {
    const int me = world_rank(), n = world_size();
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 16);
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const int v = 5;
    const std::span<const int> one(&v, 1);
    const std::vector<int> seven(7, 1);
    int out = 0;

    expect_error(MPI_ERR_RMA_SYNC, "FRMA_Put", [&] { w.put(0, 0, one); });
    expect_error(MPI_ERR_RMA_SYNC, "FRMA_Fetch_and_op", [&] { w.fetch_add(0, 0, 1); });
    expect_error(MPI_ERR_RMA_SYNC, "FRMA_Win_flush", [&] { w.flush(0); });
    expect_error(MPI_ERR_RANK, "FRMA_Win_lock", [&] { (void)w.lock(n, fastrma::shared); });
    try {
        w.put(0, 0, one);
    } catch (const std::runtime_error& e) {  // Error is a std::runtime_error
        EXPECT_NE(std::string(e.what()), "");
    }
    {
        auto e = w.lock(0, fastrma::shared);
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Put", [&] { w.put(0, 16, one); });  // index == count
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Put", [&] { w.put(0, 10, seven); });
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Get", [&] { w.get(0, 16, std::span(&out, 1)); });
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Fetch_and_op", [&] { w.fetch_add(0, 16, 1); });
        // An index that becomes a negative displacement: an invalid argument (MPI_ERR_DISP,
        // as MPICH answers), in every call that takes one.
        const std::size_t neg = std::size_t(-1);
        expect_error(MPI_ERR_DISP, "FRMA_Accumulate", [&] { w.accumulate(0, neg, one, op::sum); });
        expect_error(MPI_ERR_DISP, "FRMA_Put", [&] { w.put(0, neg, one); });
        expect_error(MPI_ERR_DISP, "FRMA_Get", [&] { w.get(0, neg, std::span(&out, 1)); });
        expect_error(MPI_ERR_DISP, "FRMA_Get_accumulate",
                     [&] { w.get_accumulate(0, neg, one, std::span(&out, 1), op::sum); });
        expect_error(MPI_ERR_DISP, "FRMA_Fetch_and_op", [&] { w.fetch_add(0, neg, 1); });
        expect_error(MPI_ERR_DISP, "FRMA_Compare_and_swap", [&] { w.compare_and_swap(0, neg, 0, 1); });
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Compare_and_swap", [&] { w.compare_and_swap(0, 16, 0, 1); });
        expect_error(MPI_ERR_RMA_SYNC, "FRMA_Win_lock", [&] { (void)w.lock(0, fastrma::shared); });
        if (n > 1) {
            expect_error(MPI_ERR_RMA_SYNC, "FRMA_Put", [&] { w.put(1, 0, one); });  // rank 1 not locked
        }
        // Caught by the wrapper before the engine sees them.
        expect_error(MPI_ERR_COUNT, "FRMA_Get_accumulate",
                     [&] { w.get_accumulate(0, 0, seven, std::span(&out, 1), op::sum); });
        expect_error(MPI_ERR_DISP, "FRMA_Put", [&] { w.put(0, fastrma::remote_address<int>{0}, one); });
    }
    {
        auto wd = Window<double>::allocate(MPI_COMM_WORLD, 2);
        auto e = wd.lock(0, fastrma::shared);
        const double d = 1;
        expect_error(MPI_ERR_TYPE, "FRMA_Accumulate", [&] { wd.accumulate(0, 0, std::span(&d, 1), op::band); });
        expect_error(MPI_ERR_TYPE, "FRMA_Compare_and_swap", [&] { wd.compare_and_swap(0, 0, 0.0, 1.0); });
        e.unlock();
        auto wc = Window<char>::allocate(MPI_COMM_WORLD, 2);  // MPI_CHAR: a C integer (docs/accumulate.md)
        wc.local()[0] = wc.local()[1] = 'a';
        auto ec = wc.lock(me, fastrma::shared);
        const char c = 1;
        wc.accumulate(me, 0, std::span(&c, 1), op::sum);
        wc.flush(me);
        EXPECT_EQ(wc.local()[0], 'b') << "SUM on char";
        EXPECT_EQ(wc.atomic_swap(me, 1, 'y'), 'a') << "REPLACE on char is allowed";
        EXPECT_EQ(wc.atomic_load(me, 1), 'y');
    }
    // Creation: the wrapper's own check, and an engine error routed through the
    // communicator's handler (set to return here) before it is thrown.
    expect_error(MPI_ERR_SIZE, "FRMA_Win_allocate",
                 [&] { (void)Window<double>::allocate(MPI_COMM_SELF, std::size_t(PTRDIFF_MAX) / 4); });
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    expect_error(MPI_ERR_COMM, "FRMA_Win_allocate", [&] { (void)Window<int>::allocate(MPI_COMM_NULL, 1); });
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        for (int x : w.local()) ASSERT_EQ(x, 0) << "a rejected operation wrote";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    {  // still usable
        auto e = w.lock(0, fastrma::exclusive);
        w.accumulate(0, 0, one, op::sum);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[0], 5 * n);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int g_handler_calls = 0;
int g_handler_code = 0;
void count_errors(FRMA_Win*, int* code, ...) {
    ++g_handler_calls;
    g_handler_code = *code;
}

TEST(CxxErrors, UserErrhandlerRunsThenTheCallThrows) {
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 4);
    {
        fastrma::Errhandler eh(count_errors);
        w.set_errhandler(eh);
        EXPECT_EQ(w.errhandler(), eh.get());
        g_handler_calls = 0;
        const int v = 1;
        expect_error(MPI_ERR_RMA_SYNC, "FRMA_Put", [&] { w.put(0, 0, std::span(&v, 1)); });
        EXPECT_EQ(g_handler_calls, 1);
        EXPECT_EQ(g_handler_code, MPI_ERR_RMA_SYNC);
        w.call_errhandler(MPI_ERR_OTHER);
        EXPECT_EQ(g_handler_calls, 2);
        EXPECT_EQ(g_handler_code, MPI_ERR_OTHER);
        w.set_errhandler(MPI_ERRORS_RETURN);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- atomics ---------------------------------------------------------------------------------

TEST(CxxAtomics, FetchAddFromFourThreadsPerRankLosesNothing) {
    // Every thread of every rank takes tickets from rank 0's counter: the tickets handed out
    // must be exactly 0 .. total-1, each once. Each also adds 2 to its right neighbour.
    const int me = world_rank(), n = world_size();
    const int threads = 4, iters = 400;
    auto w = Window<long>::allocate(MPI_COMM_WORLD, 2);
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<long> tickets(std::size_t(threads * iters));
    {
        auto e = w.lock_all();
        std::vector<std::thread> ts;
        std::atomic<int> failures{0};
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                try {
                    for (int i = 0; i < iters; ++i) {
                        tickets[std::size_t(t * iters + i)] = w.fetch_add(0, 0, 1);
                        w.fetch_add(right_of(me), 1, 2);
                    }
                } catch (const Error& err) {
                    std::fprintf(stderr, "%s\n", err.what());
                    ++failures;
                }
            });
        for (auto& t : ts) t.join();
        ASSERT_EQ(failures.load(), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const long total = long(n) * threads * iters;
    std::vector<long> all(me == 0 ? std::size_t(total) : 0);
    MPI_Gather(tickets.data(), threads * iters, MPI_LONG, all.data(), threads * iters, MPI_LONG, 0, MPI_COMM_WORLD);
    if (me == 0) {
        std::sort(all.begin(), all.end());
        for (long i = 0; i < total; ++i) ASSERT_EQ(all[std::size_t(i)], i) << "a ticket was lost or duplicated";
        EXPECT_EQ(w.local()[0], total);
    }
    EXPECT_EQ(w.local()[1], 2L * threads * iters);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxAtomics, CompareAndSwapTicketAndSpinlock) {
    const int me = world_rank(), n = world_size();
    auto w = Window<std::int64_t>::allocate(MPI_COMM_WORLD, 3);  // [0] winner, [1] lock word, [2] counter
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const int iters = 50;
    std::int64_t old = -1;
    {
        auto e = w.lock_all();
        // Exactly one rank wins 0 -> me + 1.
        old = w.compare_and_swap(0, 0, 0, me + 1);
        // A spinlock on word 1 guards a plain get / put increment of word 2.
        for (int it = 0; it < iters; ++it) {
            while (w.compare_and_swap(0, 1, 0, me + 1) != 0) std::this_thread::yield();
            std::int64_t c = 0;
            w.get(0, 2, std::span(&c, 1)).wait();
            ++c;
            w.put(0, 2, std::span(&c, 1)).flush();
            EXPECT_EQ(w.atomic_swap(0, 1, 0), me + 1) << "someone else held the lock";
        }
    }
    int won = old == 0, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(winners, 1);
    int winner = won ? me : -1, who = -1;
    MPI_Allreduce(&winner, &who, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!won) {
        EXPECT_EQ(old, who + 1) << "a loser must see the winner's value";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[0], who + 1);
        EXPECT_EQ(w.local()[1], 0);
        EXPECT_EQ(w.local()[2], std::int64_t(n) * iters);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxAtomics, MaxlocAndMinlocWithValueIndex) {
    // Rank r offers (r % 2, r): MAXLOC keeps value 1 at the lowest index among ties (rank 1),
    // MINLOC value 0 at rank 0. With one rank both are (0, 0).
    const int me = world_rank(), n = world_size();
    using VI = value_index<double>;
    auto w = Window<VI>::allocate(MPI_COMM_WORLD, 3);
    if (me == 0) {
        w.local()[0] = {-1e300, -1};
        w.local()[1] = {1e300, -1};
        w.local()[2] = {0.0, -1};
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const VI mine{double(me % 2), me};
    {
        auto e = w.lock(0, fastrma::shared);
        w.accumulate(0, 0, std::span(&mine, 1), op::maxloc);
        w.accumulate(0, 1, std::span(&mine, 1), op::minloc);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[0], (VI{n > 1 ? 1.0 : 0.0, n > 1 ? 1 : 0}));
        EXPECT_EQ(w.local()[1], (VI{0.0, 0}));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // get_accumulate MAXLOC on element 2: every rank offers (10 + me, me) and gets back what
    // was there before it, which is never its own offer and never above the final maximum.
    const VI bid{10.0 + me, me};
    VI before{};
    {
        auto e = w.lock_all();
        w.get_accumulate(0, 2, std::span(&bid, 1), std::span(&before, 1), op::maxloc).wait();
    }
    EXPECT_NE(before.index, me);
    EXPECT_TRUE(before.index == -1 || (before.value == 10.0 + before.index && before.index < n));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.local()[2], (VI{10.0 + n - 1, n - 1}));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

template <class T>
class CxxTypedAtomics : public ::testing::Test {};
using AtomicTypes = ::testing::Types<std::int8_t, int, unsigned long, long long, float, double, long double>;
TYPED_TEST_SUITE(CxxTypedAtomics, AtomicTypes);

TYPED_TEST(CxxTypedAtomics, StoreLoadSwapFetchCompare) {
    using T = TypeParam;
    const int me = world_rank(), n = world_size();
    // Element r of rank 0 belongs to rank r; element n is everyone's.
    auto w = Window<T>::allocate(MPI_COMM_WORLD, std::size_t(n) + 1);
    std::fill(w.local().begin(), w.local().end(), T{});
    MPI_Barrier(MPI_COMM_WORLD);
    const std::size_t at = std::size_t(me);
    {
        auto e = w.lock_all();
        w.atomic_store(0, at, T(me + 1));
        EXPECT_EQ(w.atomic_load(0, at), T(me + 1));
        EXPECT_EQ(w.atomic_swap(0, at, T(me + 5)), T(me + 1));
        EXPECT_EQ(w.fetch_add(0, at, T(2)), T(me + 5));
        EXPECT_EQ(w.fetch_and_op(0, at, T(100), op::max), T(me + 7));
        EXPECT_EQ(w.fetch_and_op(0, at, T(3), op::min), T(100));
        EXPECT_EQ(w.fetch_and_op(0, at, T(2), op::prod), T(3));
        if constexpr (std::is_integral_v<T>) {
            EXPECT_EQ(w.compare_and_swap(0, at, T(6), T(9)), T(6));  // swaps
            EXPECT_EQ(w.compare_and_swap(0, at, T(6), T(11)), T(9));  // does not
            EXPECT_EQ(w.fetch_and_op(0, at, T(0x10), op::bor), T(9));
        } else {
            w.atomic_store(0, at, T(0x19));
        }
        w.fetch_add(0, std::size_t(n), T(1));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        for (int r = 0; r < n; ++r) EXPECT_EQ(w.local()[std::size_t(r)], T(0x19)) << "rank " << r;
        EXPECT_EQ(w.local()[std::size_t(n)], T(n));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- a user struct with a derived datatype ---------------------------------------------------

TEST(CxxDerived, UserStructThroughDatatypeOf) {
    static_assert(fastrma::Element<app::Vec3>);
    const int me = world_rank(), n = world_size(), right = right_of(me), left = left_of(me);
    auto w = Window<app::Vec3>::allocate(MPI_COMM_WORLD, 4);
    std::fill(w.local().begin(), w.local().end(), app::Vec3{0, 0, 0});
    MPI_Barrier(MPI_COMM_WORLD);
    const std::array<app::Vec3, 2> mine{{{1.0 * me, 2.0 * me, 3.0 * me}, {-1, -2, -3}}};
    const app::Vec3 step{0.5, 1, 2};
    {
        auto e = w.lock_all();
        w.put(right, 1, mine).flush();
        std::array<app::Vec3, 2> back{};
        w.get(right, 1, back).wait();
        EXPECT_EQ(back, mine);
        w.accumulate(0, 3, std::span(&step, 1), op::sum);  // element-wise on the three doubles
    }
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(w.local()[0], (app::Vec3{0, 0, 0}));
    EXPECT_EQ(w.local()[1], (app::Vec3{1.0 * left, 2.0 * left, 3.0 * left}));
    EXPECT_EQ(w.local()[2], (app::Vec3{-1, -2, -3}));
    if (me == 0) {
        EXPECT_EQ(w.local()[3], (app::Vec3{0.5 * n, 1.0 * n, 2.0 * n}));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- active target: fence, PSCW ----------------------------------------------------

TEST(CxxActive, FenceRing) {
    const int me = world_rank(), right = right_of(me), left = left_of(me);
    const std::size_t k = 100;
    auto w = Window<double>::allocate(MPI_COMM_WORLD, 2 * k);
    std::fill(w.local().begin(), w.local().end(), 0.0);
    const std::vector<double> src = values_for<double>(me, k);
    w.fence(fastrma::mode::noprecede);
    w.put(right, 0, src);  // [0, k) <- my left's values
    w.accumulate(left, k, src, op::sum);  // [k, 2k) <- my right's values
    w.fence();
    EXPECT_EQ(std::vector<double>(w.local().begin(), w.local().begin() + k), values_for<double>(left, k));
    EXPECT_EQ(std::vector<double>(w.local().begin() + k, w.local().end()), values_for<double>(right, k));
    std::vector<double> back(k);
    w.get(right, 0, back);  // right's [0, k) holds my values
    w.fence(fastrma::mode::nosucceed);
    EXPECT_EQ(back, src);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxActive, FetchAndOpAndCompletionUnderFence) {
    const int me = world_rank(), right = right_of(me);
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 2);
    std::fill(w.local().begin(), w.local().end(), 0);
    w.fence();
    int old1 = -1, old2 = -1, cas_old = -1;
    const int one = 1, zero = 0, mark = 50 + me;
    fastrma::Completion c = w.fetch_and_op(right, 0, one, op::sum, old1);
    w.compare_and_swap(right, 1, zero, mark, cas_old);
    // Flushes belong to passive-target epochs: under a fence they are erroneous.
    expect_error(MPI_ERR_RMA_SYNC, "FRMA_Win_flush_local", [&] { c.wait(); });
    w.fence();
    EXPECT_EQ(old1, 0);
    EXPECT_EQ(cas_old, 0);
    w.fetch_and_op(right, 0, one, op::sum, old2);
    w.fence();
    EXPECT_EQ(old2, 1);
    EXPECT_EQ(w.local()[0], 2);
    EXPECT_EQ(w.local()[1], 50 + left_of(me));
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxActive, PscwRingWithGroups) {
    const int me = world_rank(), n = world_size(), right = right_of(me), left = left_of(me);
    const std::size_t k = 16;
    auto w = Window<std::int32_t>::allocate(MPI_COMM_WORLD, 2 * k + std::size_t(n));
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const fastrma::Group origins = fastrma::Group::of(MPI_COMM_WORLD, std::array{left});
    const fastrma::Group targets = fastrma::Group::of(MPI_COMM_WORLD, std::array{right});
    EXPECT_EQ(origins.size(), 1);
    const std::vector<std::int32_t> src = values_for<std::int32_t>(me, k);
    {
        auto exposure = w.post(origins);
        {
            auto access = w.start(targets);
            w.put(right, 0, src);
            w.accumulate(right, k, src, op::sum);
        }  // complete()
    }  // wait()
    const std::vector<std::int32_t> want = values_for<std::int32_t>(left, k);
    EXPECT_EQ(std::vector<std::int32_t>(w.local().begin(), w.local().begin() + k), want);
    EXPECT_EQ(std::vector<std::int32_t>(w.local().begin() + k, w.local().begin() + 2 * k), want);

    // Again, ending the exposure by polling test(), the access by an explicit complete().
    {
        auto exposure = w.post(origins);
        auto access = w.start(targets);
        w.accumulate(right, k, src, op::sum);
        access.complete();
        EXPECT_FALSE(access.active());
        while (!exposure.test()) std::this_thread::yield();
        EXPECT_FALSE(exposure.active());
    }
    for (std::size_t i = 0; i < k; ++i) ASSERT_EQ(w.local()[k + i], 2 * want[i]);

    // Everyone with everyone: rank o writes o + 1 into slot o of every rank.
    std::vector<int> everyone(static_cast<std::size_t>(n));
    std::iota(everyone.begin(), everyone.end(), 0);
    const fastrma::Group all = fastrma::Group::of(MPI_COMM_WORLD, everyone);
    {
        auto exposure = w.post(all);
        auto access = w.start(all);
        const std::int32_t v = me + 1;
        for (int t = 0; t < n; ++t) w.put(t, 2 * k + std::size_t(me), std::span(&v, 1));
    }  // access completes first (declared last), then the exposure waits
    for (int o = 0; o < n; ++o) EXPECT_EQ(w.local()[2 * k + std::size_t(o)], o + 1);
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- shared and dynamic windows --------------------------------------------------

TEST(CxxShared, AllocateSharedNeighboursByLoadStore) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int me = 0, n = 0;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &n);
    {
        const std::size_t k = 16;
        auto w = Window<long>::allocate_shared(node, k);
        EXPECT_EQ(w.flavor(), MPI_WIN_FLAVOR_SHARED);
        EXPECT_EQ(w.local().size(), k);
        EXPECT_EQ(w.shared_query(me).data(), w.local().data());
        auto e = w.lock_all();
        for (std::size_t i = 0; i < k; ++i) w.local()[i] = 1000L * me + long(i);
        // The unified-model recipe: sync, barrier, sync.
        e.sync();
        MPI_Barrier(node);
        e.sync();
        for (int r = 0; r < n; ++r) {
            const std::span<long> part = w.shared_query(r);
            ASSERT_EQ(part.size(), k);
            if (r + 1 < n) {
                EXPECT_EQ(w.shared_query(r + 1).data(), part.data() + k) << "parts are contiguous";
            }
            for (std::size_t i = 0; i < k; ++i) ASSERT_EQ(part[i], 1000L * r + long(i)) << "rank " << r;
        }
        // Store into the right neighbour's part; read what the left one stored into mine.
        const int right = (me + 1) % n;
        e.sync();
        MPI_Barrier(node);
        w.shared_query(right)[0] = -1 - me;
        e.sync();
        MPI_Barrier(node);
        e.sync();
        EXPECT_EQ(w.local()[0], -1 - (me + n - 1) % n);
        // RMA and load/store see the same memory.
        EXPECT_EQ(w.atomic_load(right, 0), -1 - me);
        MPI_Barrier(node);
    }
    MPI_Comm_free(&node);
}

TEST(CxxShared, SharedQueryProcNullFindsTheFirstNonEmptyPart) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int me = 0, n = 0;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &n);
    {
        auto w = Window<int>::allocate_shared(node, me == 0 ? 0 : 4);  // rank 0 brings nothing
        EXPECT_TRUE(w.shared_query(0).empty());
        if (n > 1) {
            EXPECT_EQ(w.shared_query(MPI_PROC_NULL).data(), w.shared_query(1).data());
        }
        MPI_Barrier(node);
    }
    MPI_Comm_free(&node);
}

TEST(CxxShared, DynamicAttachVector) {
    const int me = world_rank(), n = world_size(), right = right_of(me), left = left_of(me);
    const std::size_t k = 64;
    auto w = Window<std::int64_t>::create_dynamic(MPI_COMM_WORLD);
    EXPECT_EQ(w.flavor(), MPI_WIN_FLAVOR_DYNAMIC);
    EXPECT_TRUE(w.local().empty());
    std::vector<std::int64_t> mine(k, -1);
    const fastrma::remote_address<std::int64_t> addr = w.attach(mine);
    EXPECT_EQ(addr, fastrma::address_of(mine.data()));
    std::vector<MPI_Aint> addrs(static_cast<std::size_t>(n));
    MPI_Allgather(&addr.value, 1, MPI_AINT, addrs.data(), 1, MPI_AINT, MPI_COMM_WORLD);
    const fastrma::remote_address<std::int64_t> there{addrs[std::size_t(right)]};
    const std::vector<std::int64_t> src = values_for<std::int64_t>(me, k);
    {
        auto e = w.lock_all();
        w.put(right, there, src).flush();
        std::vector<std::int64_t> back(k / 2);
        w.get(right, there + std::ptrdiff_t(k / 2), back).wait();
        EXPECT_TRUE(std::equal(back.begin(), back.end(), src.begin() + k / 2));
        EXPECT_EQ(w.fetch_add(right, there + 3, 1000), src[3]);
        // An index means nothing on a dynamic window; past the attached region is out of range.
        expect_error(MPI_ERR_DISP, "FRMA_Put", [&] { w.put(right, 0, src); });
        expect_error(MPI_ERR_RMA_RANGE, "FRMA_Put", [&] { w.put(right, there + std::ptrdiff_t(k), src); });
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::int64_t> want = values_for<std::int64_t>(left, k);
    want[3] += 1000;
    EXPECT_EQ(mine, want);
    MPI_Barrier(MPI_COMM_WORLD);
    w.detach(mine);
    MPI_Barrier(MPI_COMM_WORLD);
    {
        // Detached: refused at the put (shared memory: the origin re-reads the target's table)
        // or, over am, by the target, and reported where the epoch completes.
        auto e = w.lock(right, fastrma::shared);
        bool thrown_at_put = false;
        try {
            w.put(right, there, src);
        } catch (const Error& x) {
            EXPECT_EQ(x.error_class(), MPI_ERR_RMA_RANGE) << x.what();
            thrown_at_put = true;
        }
        if (thrown_at_put)
            e.unlock();
        else
            expect_error(MPI_ERR_RMA_RANGE, "FRMA_Win_unlock", [&] { e.unlock(); });
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- request-based operations --------------------------------------------------

TEST(CxxRequest, RputRgetWithWaitall) {
    const int me = world_rank(), right = right_of(me), left = left_of(me);
    const std::size_t k = 256, chunks = 4;
    auto w = Window<double>::allocate(MPI_COMM_WORLD, k * chunks);
    std::fill(w.local().begin(), w.local().end(), 0.0);
    MPI_Barrier(MPI_COMM_WORLD);
    const std::vector<double> src = values_for<double>(me, k * chunks);
    const std::span<const double> s(src);
    std::vector<double> back(k * chunks);
    {
        auto e = w.lock_all();
        std::vector<MPI_Request> raw;
        for (std::size_t c = 0; c < chunks; ++c) raw.push_back(w.rput(right, c * k, s.subspan(c * k, k)).release());
        ASSERT_EQ(MPI_SUCCESS, MPI_Waitall(int(raw.size()), raw.data(), MPI_STATUSES_IGNORE));
        for (MPI_Request r : raw) EXPECT_EQ(r, MPI_REQUEST_NULL);
        e.flush(right);  // requests complete locally; the flush makes the data land
        std::vector<fastrma::Request> reqs;
        for (std::size_t c = 0; c < chunks; ++c)
            reqs.push_back(w.rget(right, c * k, std::span(back).subspan(c * k, k)));
        fastrma::wait_all(reqs);
        for (const auto& r : reqs) EXPECT_FALSE(r.active());
    }
    EXPECT_EQ(back, src);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(std::vector<double>(w.local().begin(), w.local().end()), values_for<double>(left, k * chunks));
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxRequest, RaccumulateRgetAccumulateTestAndDestructorWait) {
    const int me = world_rank(), n = world_size();
    const std::size_t k = 32;
    auto w = Window<long>::allocate(MPI_COMM_WORLD, k);
    std::fill(w.local().begin(), w.local().end(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const std::vector<long> ones(k, 1);
    {
        auto e = w.lock_all();
        fastrma::Request r = w.raccumulate(0, 0, ones, op::sum);
        while (!r.test()) std::this_thread::yield();
        EXPECT_FALSE(r.active());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<long> seen(k, -1);
    {
        auto e = w.lock(0, fastrma::shared);
        w.rget_accumulate(0, 0, {}, seen, op::no_op).wait();
    }
    EXPECT_EQ(seen, std::vector<long>(k, n));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        const std::vector<long> mark(k, 77);
        auto e = w.lock(0, fastrma::exclusive);
        { fastrma::Request r = w.rput(0, 0, mark); }  // the destructor waits
        e.flush();
        EXPECT_EQ(w.atomic_load(0, k - 1), 77);
    }
    // Request-based operations need a passive-target epoch.
    const long v = 1;
    expect_error(MPI_ERR_RMA_SYNC, "FRMA_Rput", [&] { (void)w.rput(0, 0, std::span(&v, 1)); });
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- names, info, attributes ---------------------------------------------------

TEST(CxxManage, NameRoundTrip) {
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 1);
    w.set_name("kv-store buckets");
    EXPECT_EQ(w.name(), "kv-store buckets");
    w.set_name("");
    EXPECT_EQ(w.name(), "");
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CxxManage, InfoAtCreationAndLater) {
    fastrma::Info hints;
    hints.set("accumulate_ordering", "none").set("no_locks", "false");
    EXPECT_EQ(hints.get("accumulate_ordering"), std::optional<std::string>("none"));
    EXPECT_EQ(hints.get("absent"), std::nullopt);
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 1, hints);
    fastrma::Info used = w.info();
    ASSERT_NE(used.get(), MPI_INFO_NULL);
    int nkeys = -1;
    EXPECT_EQ(MPI_SUCCESS, MPI_Info_get_nkeys(used, &nkeys));
    EXPECT_GE(nkeys, 0);
    w.set_info(hints);  // collective
    MPI_Barrier(MPI_COMM_WORLD);
}

int g_deletes = 0;
void* g_deleted = nullptr;
int count_deletes(FRMA_Win, int, void* value, void* extra) {
    ++g_deletes;
    g_deleted = value;
    ++*static_cast<int*>(extra);
    return MPI_SUCCESS;
}

TEST(CxxManage, AttributesWithAKeyvalDeleteCallback) {
    int extra = 0, x = 1, y = 2;
    g_deletes = 0;
    fastrma::Keyval key(count_deletes, &extra);
    auto w = Window<int>::allocate(MPI_COMM_WORLD, 1);
    EXPECT_FALSE(w.get_attr(key).has_value());
    w.set_attr(key, &x);
    EXPECT_EQ(w.get_attr(key), std::optional<void*>(&x));
    w.set_attr(key, &y);  // replacing deletes the old value
    EXPECT_EQ(g_deletes, 1);
    EXPECT_EQ(g_deleted, &x);
    EXPECT_EQ(w.get_attr(key), std::optional<void*>(&y));
    w.delete_attr(key);
    EXPECT_EQ(g_deletes, 2);
    EXPECT_EQ(g_deleted, &y);
    EXPECT_FALSE(w.get_attr(key).has_value());
    w.set_attr(key, &x);
    w.free();  // freeing the window deletes its attributes
    EXPECT_EQ(g_deletes, 3);
    EXPECT_EQ(g_deleted, &x);
    EXPECT_EQ(extra, 3);
}

}  // namespace
