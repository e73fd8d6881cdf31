// test_matrix.cpp — the conformance matrix: every window flavor × every synchronization
// mode × every operation, with contiguous and derived datatypes, checked value by value;
// and 4 threads per rank posting into one epoch (lock_all and fence).
//
// Each rank works on its right neighbour (ring), so with 1 rank everything targets self.
// Window: kWords int64 words per rank, disp_unit 1 (byte displacements), so the same
// arithmetic serves dynamic windows (displacement = address).
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "common/mpi_world.hpp"

namespace {

enum class Flavor { allocate, create, shared, dynamic };
enum class Sync { fence, pscw, lock, lock_all };
const char* name(Flavor f) {
    switch (f) {
    case Flavor::allocate:
        return "allocate";
    case Flavor::create:
        return "create";
    case Flavor::shared:
        return "shared";
    case Flavor::dynamic:
        return "dynamic";
    }
    return "?";
}
const char* name(Sync s) {
    switch (s) {
    case Sync::fence:
        return "fence";
    case Sync::pscw:
        return "pscw";
    case Sync::lock:
        return "lock";
    case Sync::lock_all:
        return "lock_all";
    }
    return "?";
}

constexpr int kWords = 256;

struct MatrixWin {
    FRMA_Win win = FRMA_WIN_NULL;
    std::int64_t* mem = nullptr;
    std::vector<std::int64_t> user;
    std::vector<MPI_Aint> disp0;  // byte displacement of word 0 at each rank

    explicit MatrixWin(Flavor f) {
        const int n = world_size();
        disp0.assign(std::size_t(n), 0);
        const MPI_Aint bytes = kWords * 8;
        switch (f) {
        case Flavor::allocate:
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(bytes, 1, window_info(), MPI_COMM_WORLD, &mem, &win));
            break;
        case Flavor::shared:
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate_shared(bytes, 1, window_info(), MPI_COMM_WORLD, &mem, &win));
            break;
        case Flavor::create:
            user.assign(kWords, 0);
            mem = user.data();
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, bytes, 1, window_info(), MPI_COMM_WORLD, &win));
            break;
        case Flavor::dynamic: {
            user.assign(kWords, 0);
            mem = user.data();
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(window_info(), MPI_COMM_WORLD, &win));
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem, bytes));
            MPI_Aint mine;
            MPI_Get_address(mem, &mine);
            MPI_Allgather(&mine, 1, MPI_AINT, disp0.data(), 1, MPI_AINT, MPI_COMM_WORLD);
            break;
        }
        }
        std::memset(mem, 0, kWords * 8);
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    ~MatrixWin() {
        MPI_Barrier(MPI_COMM_WORLD);
        if (!user.empty() && disp0.size() && win != FRMA_WIN_NULL) {
            int* flavor = nullptr;
            int flag = 0;
            FRMA_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
            if (flag && *flavor == MPI_WIN_FLAVOR_DYNAMIC) FRMA_Win_detach(win, mem);
        }
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    }
    MPI_Aint disp(int rank, int word) const { return disp0[std::size_t(rank)] + 8 * word; }
};

MPI_Group group_of(int rank) {
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &rank, &g);
    MPI_Group_free(&world);
    return g;
}

// Opens an access epoch to `right` (and exposure to `left` where the mode needs it).
void open_epoch(Sync s, FRMA_Win win, int left, int right) {
    switch (s) {
    case Sync::fence:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, win));
        break;
    case Sync::pscw: {
        MPI_Group gl = group_of(left), gr = group_of(right);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(gl, 0, win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(gr, 0, win));
        MPI_Group_free(&gl);
        MPI_Group_free(&gr);
        break;
    }
    case Sync::lock:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
        break;
    case Sync::lock_all:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        break;
    }
}

// Closes it; afterwards (and after the barrier) every op of the epoch is visible.
void close_epoch(Sync s, FRMA_Win win, int right) {
    switch (s) {
    case Sync::fence:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, win));
        break;
    case Sync::pscw:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(win));
        break;
    case Sync::lock:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, win));
        break;
    case Sync::lock_all:
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
        break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

class Matrix : public ::testing::TestWithParam<std::tuple<Flavor, Sync>> {};

TEST_P(Matrix, EveryOperationLandsWhereTheStandardSays) {
    const auto [flavor, sync] = GetParam();
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    MatrixWin w(flavor);

    // Words 0..15 of every rank hold a pattern the neighbours read.
    for (int i = 0; i < 16; ++i) w.mem[i] = 1000 * me + i;
    w.mem[20] = 5;  // accumulate target
    w.mem[21] = 7;  // get_accumulate target
    w.mem[22] = 100;  // fetch_and_op target
    w.mem[23] = 0;  // compare_and_swap target
    double d = 1.5;
    std::memcpy(&w.mem[24], &d, 8);  // double accumulate target
    MPI_Barrier(MPI_COMM_WORLD);

    // Epoch 1: put, get, accumulate (int64 SUM, double PROD, MAX), get_accumulate,
    // fetch_and_op, compare_and_swap, and derived types (strided put and get).
    open_epoch(sync, w.win, left, right);
    std::int64_t src[8], got[16] = {0}, one = 3, old_ga = -1, old_fop = -1, cas_old = -1;
    for (int i = 0; i < 8; ++i) src[i] = 50000 + 100 * me + i;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src, 8, MPI_INT64_T, right, w.disp(right, 32), 8, MPI_INT64_T, w.win))
        << FRMA_Last_error_message();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got, 16, MPI_INT64_T, right, w.disp(right, 0), 16, MPI_INT64_T, w.win));
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Accumulate(&one, 1, MPI_INT64_T, right, w.disp(right, 20), 1, MPI_INT64_T, MPI_SUM, w.win));
    double two = 2.0;
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Accumulate(&two, 1, MPI_DOUBLE, right, w.disp(right, 24), 1, MPI_DOUBLE, MPI_PROD, w.win));
    std::int64_t big = 1 << 20;
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Accumulate(&big, 1, MPI_INT64_T, right, w.disp(right, 25), 1, MPI_INT64_T, MPI_MAX, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(&one, 1, MPI_INT64_T, &old_ga, 1, MPI_INT64_T, right, w.disp(right, 21),
                                               1, MPI_INT64_T, MPI_SUM, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old_fop, MPI_INT64_T, right, w.disp(right, 22), MPI_SUM, w.win));
    std::int64_t cmp = 0, desired = 1 + me;
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Compare_and_swap(&desired, &cmp, &cas_old, MPI_INT64_T, right, w.disp(right, 23), w.win));
    close_epoch(sync, w.win, right);

    for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], 1000 * right + i) << "get word " << i;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(w.mem[32 + i], 50000 + 100 * left + i) << "put word " << i;
    EXPECT_EQ(w.mem[20], 5 + 3);
    EXPECT_EQ(old_ga, 7);
    EXPECT_EQ(w.mem[21], 7 + 3);
    EXPECT_EQ(old_fop, 100);
    EXPECT_EQ(w.mem[22], 103);
    EXPECT_EQ(cas_old, 0);
    EXPECT_EQ(w.mem[23], 1 + left);
    double dd;
    std::memcpy(&dd, &w.mem[24], 8);
    EXPECT_EQ(dd, 3.0);
    EXPECT_EQ(w.mem[25], 1 << 20);
    for (int i = 40; i < kWords; ++i) ASSERT_EQ(w.mem[i], 0) << "stray write at word " << i;

    // Epoch 2: read back what epoch 1 wrote at the neighbour, from the origin side.
    open_epoch(sync, w.win, left, right);
    std::int64_t back[8] = {0};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(back, 8, MPI_INT64_T, right, w.disp(right, 32), 8, MPI_INT64_T, w.win));
    std::int64_t noop = -1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(nullptr, &noop, MPI_INT64_T, right, w.disp(right, 22), MPI_NO_OP, w.win));
    close_epoch(sync, w.win, right);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], src[i]);
    EXPECT_EQ(noop, 103);

    // Epoch 3: derived datatypes on origin and target, for every operation kind.
    MPI_Datatype every_other, idx3, pair_vec, mixed;
    MPI_Type_vector(4, 1, 2, MPI_INT64_T, &every_other);  // 4 words, stride 2
    MPI_Type_commit(&every_other);
    const int blens[3] = {1, 2, 1}, displs[3] = {0, 3, 7};
    MPI_Type_indexed(3, blens, displs, MPI_INT64_T, &idx3);  // words 0, 3, 4, 7
    MPI_Type_commit(&idx3);
    MPI_Type_vector(2, 2, 3, MPI_INT64_T, &pair_vec);  // words 0,1, 3,4
    MPI_Type_commit(&pair_vec);
    {
        struct S {
            std::int32_t i;
            double d;
        };
        int bl[2] = {1, 1};
        MPI_Aint dp[2] = {offsetof(S, i), offsetof(S, d)};
        MPI_Datatype ty[2] = {MPI_INT32_T, MPI_DOUBLE};
        MPI_Type_create_struct(2, bl, dp, ty, &mixed);
        MPI_Type_commit(&mixed);
    }
    open_epoch(sync, w.win, left, right);
    std::int64_t four[4] = {9000 + me, 9001 + me, 9002 + me, 9003 + me};
    // contiguous origin -> strided target (words 48, 50, 52, 54)
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(four, 4, MPI_INT64_T, right, w.disp(right, 48), 1, every_other, w.win))
        << FRMA_Last_error_message();
    // strided origin (from a local array) <- indexed target (words 0, 3, 4, 7 of the pattern)
    std::int64_t strided[8];
    for (auto& x : strided) x = -1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(strided, 1, every_other, right, w.disp(right, 0), 1, idx3, w.win));
    // accumulate SUM through a derived target type (words 60,61, 63,64)
    std::int64_t ones[4] = {1, 2, 3, 4};
    ASSERT_EQ(MPI_SUCCESS,
              FRMA_Accumulate(ones, 4, MPI_INT64_T, right, w.disp(right, 60), 1, pair_vec, MPI_SUM, w.win));
    // get_accumulate with derived origin, result and target (words 70.. every other)
    std::int64_t gsrc[8] = {5, 0, 6, 0, 7, 0, 8, 0}, gres[4] = {-1, -1, -1, -1};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get_accumulate(gsrc, 1, every_other, gres, 4, MPI_INT64_T, right, w.disp(right, 70), 1,
                                               every_other, MPI_REPLACE, w.win));
    // a struct of two basic types: put only (accumulates need one basic type)
    struct S {
        std::int32_t i;
        double d;
    } sv{me, 0.25 * me};
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&sv, 1, mixed, right, w.disp(right, 80), 1, mixed, w.win));
    EXPECT_EQ(MPI_ERR_TYPE, FRMA_Accumulate(&sv, 1, mixed, right, w.disp(right, 80), 1, mixed, MPI_SUM, w.win))
        << "accumulate on a type of two basic types";
    MPI_Type_free(&every_other);  // freed while the ops may still be in flight (MPI allows it)
    MPI_Type_free(&idx3);
    MPI_Type_free(&pair_vec);
    MPI_Type_free(&mixed);
    close_epoch(sync, w.win, right);
    for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(w.mem[48 + 2 * k], 9000 + left + k) << "vector put " << k;
        EXPECT_EQ(w.mem[49 + 2 * k], 0) << "vector put hole " << k;
    }
    const int picked[4] = {0, 3, 4, 7};
    for (int k = 0; k < 4; ++k) EXPECT_EQ(strided[2 * k], 1000 * right + picked[k]) << "indexed get " << k;
    for (int k = 0; k < 4; ++k) EXPECT_EQ(strided[2 * k + 1], -1) << "get wrote a hole";
    EXPECT_EQ(w.mem[60], 1);
    EXPECT_EQ(w.mem[61], 2);
    EXPECT_EQ(w.mem[62], 0);
    EXPECT_EQ(w.mem[63], 3);
    EXPECT_EQ(w.mem[64], 4);
    for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(gres[k], 0) << "get_accumulate old value " << k;
        EXPECT_EQ(w.mem[70 + 2 * k], 5 + k) << "get_accumulate REPLACE " << k;
        EXPECT_EQ(w.mem[71 + 2 * k], 0);
    }
    S got_s;
    std::memcpy(&got_s, &w.mem[80], sizeof got_s);
    EXPECT_EQ(got_s.i, left);
    EXPECT_EQ(got_s.d, 0.25 * left);
}

TEST_P(Matrix, FourThreadsPostIntoOneEpoch) {
    // Threads share one epoch of the calling process; every thread targets `right`, which
    // every sync mode has opened.
    const auto [flavor, sync] = GetParam();
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    MatrixWin w(flavor);
    open_epoch(sync, w.win, left, right);
    std::atomic<int> errors{0};
    std::vector<std::thread> ts;
    // The fetched values land by the end of the epoch (MPI's contract: a result buffer is
    // the implementation's until the op completes; over am it is written when the answer
    // arrives), so they live until then.
    std::vector<std::int64_t> olds(4 * 32, -1);
    const std::int64_t one = 1;
    for (int th = 0; th < 4; ++th)
        ts.emplace_back([&, th] {
            for (int i = 0; i < 32; ++i) {
                std::int64_t v = (std::int64_t(me) << 32) | (th << 8) | i;
                errors += FRMA_Put(&v, 1, MPI_INT64_T, right, w.disp(right, th * 32 + i), 1, MPI_INT64_T, w.win) !=
                          MPI_SUCCESS;
                errors += FRMA_Fetch_and_op(&one, &olds[std::size_t(th * 32 + i)], MPI_INT64_T, right,
                                            w.disp(right, 200), MPI_SUM, w.win) != MPI_SUCCESS;
            }
        });
    for (auto& t : ts) t.join();
    ASSERT_EQ(errors.load(), 0) << FRMA_Last_error_message();
    close_epoch(sync, w.win, right);
    for (int th = 0; th < 4; ++th)
        for (int i = 0; i < 32; ++i) ASSERT_EQ(w.mem[th * 32 + i], (std::int64_t(left) << 32) | (th << 8) | i);
    EXPECT_EQ(w.mem[200], 4 * 32);
    // Atomic fetch-and-add: the 128 old values are 0..127, each once.
    std::sort(olds.begin(), olds.end());
    for (std::size_t k = 0; k < olds.size(); ++k) ASSERT_EQ(olds[k], std::int64_t(k)) << "fetched values";
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Matrix,
    ::testing::Combine(::testing::Values(Flavor::allocate, Flavor::create, Flavor::shared, Flavor::dynamic),
                       ::testing::Values(Sync::fence, Sync::pscw, Sync::lock, Sync::lock_all)),
    [](const auto& info) { return std::string(name(std::get<0>(info.param))) + "_" + name(std::get<1>(info.param)); });

// Large transfers at every page-offset distance between the origin buffer and the target
// memory, including 1..31 (where the host's rep-movsb copy is slow and fastrma moves data
// through buffers placed at the other side's page offset: transports/copy.hpp): put, get,
// accumulate and get_accumulate of 8 KiB, 64 KiB + 24 B and 300 KiB (over two get pieces)
// land exactly, with nothing outside the target range touched.
class PageOffsets : public ::testing::TestWithParam<Flavor> {};

TEST_P(PageOffsets, LargeTransfersLandAtEveryDistance) {
    const Flavor flavor = GetParam();
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n;
    constexpr std::size_t kWin = 1 << 20, kMaxLen = 300 * 1024;
    std::vector<unsigned char> user;
    unsigned char* mem = nullptr;
    FRMA_Win win = FRMA_WIN_NULL;
    std::vector<MPI_Aint> base(std::size_t(n), 0);
    if (flavor == Flavor::allocate) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(kWin, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    } else {
        user.assign(kWin + 4096, 0);
        mem = user.data() + (4096 - reinterpret_cast<std::uintptr_t>(user.data()) % 4096);  // page-aligned
        if (flavor == Flavor::create) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, kWin, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        } else {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem, kWin));
            MPI_Aint mine;
            MPI_Get_address(mem, &mine);
            MPI_Allgather(&mine, 1, MPI_AINT, base.data(), 1, MPI_AINT, MPI_COMM_WORLD);
        }
    }
    FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    // Origin buffers at offsets from the window memory's own page offset (an am allocate
    // window starts half a page in), so that every window kind meets the slow distances.
    std::vector<std::int64_t> src_store((kMaxLen + 8192) / 8), dst_store((kMaxLen + 8192) / 8);
    auto page_at = [](std::vector<std::int64_t>& v, std::size_t off) {
        auto* b = reinterpret_cast<unsigned char*>(v.data());
        return b + (4096 - reinterpret_cast<std::uintptr_t>(b) % 4096) % 4096 + off;
    };
    auto pattern = [](int rank, std::size_t i, int round) {
        return std::int64_t(rank) * 1000003 + std::int64_t(i) * 7 + round;
    };
    int round = 0;
    for (std::size_t len : {std::size_t(8192), std::size_t(65536 + 24), kMaxLen}) {
        for (std::size_t ooff : {0, 8, 16, 24, 32, 48, 4088}) {
            for (std::size_t toff : {std::size_t(0), std::size_t(16)}) {
                ++round;
                const std::size_t words = len / 8;
                std::memset(mem, 0xEE, kWin);
                MPI_Barrier(MPI_COMM_WORLD);
                const std::size_t at = (reinterpret_cast<std::uintptr_t>(mem) + ooff) % 4096;
                auto* src = reinterpret_cast<std::int64_t*>(page_at(src_store, at));
                auto* dst = reinterpret_cast<std::int64_t*>(page_at(dst_store, at));
                for (std::size_t i = 0; i < words; ++i) src[i] = pattern(me, i, round);
                const MPI_Aint t = base[std::size_t(right)] + MPI_Aint(toff);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Put(src, int(words), MPI_INT64_T, right, t, int(words), MPI_INT64_T, win))
                    << FRMA_Last_error_message();
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, win));
                std::memset(dst, 0, len);
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(dst, int(words), MPI_INT64_T, right, t, int(words), MPI_INT64_T, win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, win));
                for (std::size_t i = 0; i < words; ++i)
                    ASSERT_EQ(dst[i], pattern(me, i, round)) << "get after put, len " << len << " origin offset "
                                                             << ooff << " target offset " << toff << " word " << i;
                // SUM adds the pattern again; get_accumulate (SUM of 1) fetches twice the pattern.
                ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(src, int(words), MPI_INT64_T, right, t, int(words), MPI_INT64_T,
                                                       MPI_SUM, win));
                std::vector<std::int64_t> ones(words, 1);
                std::memset(dst, 0, len);
                ASSERT_EQ(MPI_SUCCESS,
                          FRMA_Get_accumulate(ones.data(), int(words), MPI_INT64_T, dst, int(words), MPI_INT64_T, right,
                                              t, int(words), MPI_INT64_T, MPI_SUM, win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, win));
                for (std::size_t i = 0; i < words; ++i)
                    ASSERT_EQ(dst[i], 2 * pattern(me, i, round)) << "get_accumulate, len " << len << " origin offset "
                                                                 << ooff << " target offset " << toff << " word " << i;
                MPI_Barrier(MPI_COMM_WORLD);
                // My memory, written by my left neighbour: 2 x pattern + 1, and 0xEE around it.
                const int left = (me + n - 1) % n;
                std::int64_t word;
                for (std::size_t i = 0; i < words; ++i) {
                    std::memcpy(&word, mem + toff + 8 * i, 8);
                    ASSERT_EQ(word, 2 * pattern(left, i, round) + 1) << "target word " << i << " len " << len;
                }
                for (std::size_t b = 0; b < toff; ++b) ASSERT_EQ(mem[b], 0xEE) << "byte before the target range";
                for (std::size_t b = toff + len; b < toff + len + 64; ++b) ASSERT_EQ(mem[b], 0xEE) << "byte after it";
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
    }
    if (flavor == Flavor::dynamic) FRMA_Win_detach(win, mem);
    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

INSTANTIATE_TEST_SUITE_P(Flavors, PageOffsets, ::testing::Values(Flavor::allocate, Flavor::create, Flavor::dynamic),
                         [](const auto& info) { return std::string(name(info.param)); });

}  // namespace
