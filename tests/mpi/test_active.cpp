// test_active.cpp — the rest of MPI-3.1 chapter 11 through the C API: fence (with its
// assertions), post/start/complete/wait/test (with early posts for a later epoch),
// allocate_shared + shared_query (contiguous and noncontig), dynamic windows (attach,
// detach, thousands of regions, stale regions never written), request-based operations
// completed by the host MPI's MPI_Wait*, names, info, user attributes, and MPI_ERR_RMA_SYNC
// for each illegal transition the caller can detect.
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "common/mpi_world.hpp"

namespace {

struct Alloc {
    FRMA_Win win = FRMA_WIN_NULL;
    std::int64_t* base = nullptr;
    explicit Alloc(std::size_t n, MPI_Info info = window_info()) {
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(n * 8), 8, info, MPI_COMM_WORLD, &base, &win));
        std::memset(base, 0, n * 8);
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    ~Alloc() {
        if (win != FRMA_WIN_NULL) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
        }
    }
};

MPI_Group group_of(const std::vector<int>& ranks) {
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, int(ranks.size()), ranks.data(), &g);
    MPI_Group_free(&world);
    return g;
}

// ---- fence ------------------------------------------------------------------------------

TEST(Fence, RingOfPutsGetsAndAccumulatesAcrossEpochs) {
    const int me = world_rank(), n = world_size();
    Alloc w(8);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOPRECEDE, w.win));
    for (int epoch = 1; epoch <= 5; ++epoch) {
        std::int64_t v = 100 * epoch + me;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, (me + 1) % n, 0, 1, MPI_INT64_T, w.win));
        std::int64_t one = 1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, MPI_SUM, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        EXPECT_EQ(w.base[0], 100 * epoch + (me + n - 1) % n) << "epoch " << epoch;
        if (me == 0) {
            EXPECT_EQ(w.base[1], std::int64_t(epoch) * n);
        }
        std::int64_t got = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, (me + 1) % n, 0, 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, w.win));
        EXPECT_EQ(got, 100 * epoch + me);
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
    std::int64_t v = 1;
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, w.win)) << "after NOSUCCEED";
}

TEST(Fence, LocalStoresBeforeAFenceAreSeenByGetsAfterIt) {
    const int me = world_rank(), n = world_size();
    Alloc w(4);
    w.base[2] = 7000 + me;  // a plain store
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
    std::int64_t got = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, (me + 1) % n, 2, 1, MPI_INT64_T, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
    EXPECT_EQ(got, 7000 + (me + 1) % n);
}

TEST(Fence, EveryOpOfAnEpochLandsBeforeAnyOfTheNext) {
    // Epoch e: one rank writes a block (8 B, 8 KiB or 256 KiB: a batched record, an eager
    // message, a payload received in place) and replaces a word by accumulate at its right
    // neighbour; epoch e + 1: every rank reads both back from that neighbour. Over am the
    // readers' requests can reach the target before the writer's last ones were applied
    // there (different origins); the target must not serve them before its fence is over.
    const int me = world_rank(), n = world_size();
    constexpr std::size_t kBlock = 32 * 1024;  // int64 elements: 256 KiB
    Alloc w(kBlock + 1);
    std::vector<std::int64_t> block(kBlock);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
    for (int e = 1; e <= 60; ++e) {
        const int writer = e % n, target = (writer + 1) % n;
        const std::size_t len = e % 3 == 0 ? 1 : e % 3 == 1 ? 1024 : kBlock;
        const std::int64_t written = e;  // the accumulate's origin: alive until the fence completes it
        if (me == writer) {
            for (std::size_t i = 0; i < len; ++i) block[i] = 1000 * e + std::int64_t(i % 7);
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Put(block.data(), int(len), MPI_INT64_T, target, 0, int(len), MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&written, 1, MPI_INT64_T, target, MPI_Aint(kBlock), 1, MPI_INT64_T,
                                                   MPI_REPLACE, w.win));
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        std::int64_t first = -1, last = -1, mark = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&first, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&last, 1, MPI_INT64_T, target, MPI_Aint(len - 1), 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Fetch_and_op(nullptr, &mark, MPI_INT64_T, target, MPI_Aint(kBlock), MPI_NO_OP, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        EXPECT_EQ(first, 1000 * e) << "epoch " << e;
        EXPECT_EQ(last, 1000 * e + std::int64_t((len - 1) % 7)) << "epoch " << e;
        EXPECT_EQ(mark, e) << "epoch " << e;
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
}

TEST(Fence, MisuseIsDetected) {
    Alloc w(4);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
    std::int64_t v = 1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, 0, 3, 1, MPI_INT64_T, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win)) << "lock inside an active fence epoch";
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock_all(0, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_flush(0, w.win)) << "flush needs a passive epoch";
    MPI_Group g = group_of({0});
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_start(g, 0, w.win));
    MPI_Group_free(&g);
    MPI_Request rq;
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Rput(&v, 1, MPI_INT64_T, 0, 3, 1, MPI_INT64_T, w.win, &rq))
        << "request-based op outside a passive epoch";
    EXPECT_EQ(rq, MPI_REQUEST_NULL);
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_fence(MPI_MODE_NOPRECEDE, w.win)) << "NOPRECEDE after ops";
    EXPECT_EQ(MPI_ERR_ASSERT, FRMA_Win_fence(MPI_MODE_NOCHECK, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
    // A fence with no operation after it does not stop a lock epoch.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- PSCW -------------------------------------------------------------------------------

TEST(Pscw, EveryoneExposesToEveryoneAndStartsOnAll) {
    const int me = world_rank(), n = world_size();
    Alloc w{static_cast<std::size_t>(n)};
    std::vector<int> all(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) all[std::size_t(r)] = r;
    MPI_Group g = group_of(all);
    for (int epoch = 1; epoch <= 4; ++epoch) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(g, 0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(g, 0, w.win));
        for (int t = 0; t < n; ++t) {
            std::int64_t v = 1000 * epoch + me;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, me, 1, MPI_INT64_T, w.win));
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));
        for (int o = 0; o < n; ++o) EXPECT_EQ(w.base[o], 1000 * epoch + o) << "epoch " << epoch;
    }
    MPI_Group_free(&g);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Pscw, EarlyPostForALaterEpochDoesNotMatchTheCurrentOne) {
    // Rank 0 is the origin of two epochs: first to {1}, then to {2}. Rank 2 posts at once
    // (early, for the second epoch); rank 1 posts only after a delay. Rank 2's post is not
    // rank 1's: the first epoch's put must not reach rank 1's memory before rank 1 posts —
    // on shared memory the start waits for that post; over am the start may return at once
    // (MPI allows it) and rank 1 holds the put back until its post. Rank 1 checks its
    // memory is untouched just before it posts; each target gets only its own epoch's put.
    const int me = world_rank(), n = world_size();
    ASSERT_GE(n, 3) << "needs 3 ranks (ctest filters it out of smaller runs)";
    Alloc w(4);
    if (me == 0) {
        MPI_Group g1 = group_of({1}), g2 = group_of({2});
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(g1, 0, w.win));
        std::int64_t v = 11;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(g2, 0, w.win));
        v = 22;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, 2, 0, 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
        MPI_Group_free(&g1);
        MPI_Group_free(&g2);
    } else if (me == 1 || me == 2) {
        MPI_Group g0 = group_of({0});
        if (me == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            EXPECT_EQ(__atomic_load_n(&w.base[0], __ATOMIC_ACQUIRE), 0) << "a put was applied before the post";
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(g0, 0, w.win));
        int flag = 0;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_test(w.win, &flag));  // true at once when the epoch came early (am)
        if (!flag) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));
        }
        EXPECT_EQ(w.base[0], me == 1 ? 11 : 22);
        MPI_Group_free(&g0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Pscw, NocheckAndMisuse) {
    const int me = world_rank(), n = world_size();
    Alloc w(2);
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_complete(w.win)) << "complete without start";
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_wait(w.win)) << "wait without post";
    int flag;
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_test(w.win, &flag));
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_Group gr = group_of({right}), gl = group_of({left});
    // NOCHECK on both sides: the application synchronised itself (the barrier).
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(gl, MPI_MODE_NOCHECK, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_post(gl, 0, w.win)) << "post twice";
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(gr, MPI_MODE_NOCHECK, w.win));
    EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock(MPI_LOCK_SHARED, right, 0, w.win)) << "lock inside start";
    std::int64_t v = 5 + me;
    if (n > 2) {
        EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Put(&v, 1, MPI_INT64_T, (me + 2) % n, 0, 1, MPI_INT64_T, w.win))
            << "not in the start group";
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, right, 1, 1, MPI_INT64_T, w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));
    EXPECT_EQ(w.base[1], 5 + left);
    MPI_Group_free(&gr);
    MPI_Group_free(&gl);
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- shared windows -----------------------------------------------------------------------

void check_shared(bool noncontig) {
    const int me = world_rank(), n = world_size();
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", noncontig ? "true" : "false");
    FRMA_Win win;
    std::int64_t* base = nullptr;
    const int count = 3 + me;  // different sizes per rank
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate_shared(MPI_Aint(count * 8), 8, info, MPI_COMM_WORLD, &base, &win));
    MPI_Info_free(&info);
    for (int i = 0; i < count; ++i) base[i] = 100 * me + i;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(win));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(win));
    std::int64_t* prev_end = nullptr;
    for (int r = 0; r < n; ++r) {
        MPI_Aint sz;
        int du;
        std::int64_t* p = nullptr;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(win, r, &sz, &du, &p));
        EXPECT_EQ(sz, (3 + r) * 8);
        EXPECT_EQ(du, 8);
        for (int i = 0; i < 3 + r; ++i) EXPECT_EQ(p[i], 100 * r + i) << "load from rank " << r;
        if (!noncontig && prev_end) {
            EXPECT_EQ(p, prev_end) << "contiguous by default";
        }
        prev_end = p + 3 + r;
    }
    // Stores by load/store through the queried pointer are seen by RMA gets.
    MPI_Aint sz;
    int du;
    std::int64_t* right = nullptr;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(win, (me + 1) % n, &sz, &du, &right));
    MPI_Barrier(MPI_COMM_WORLD);
    right[2] = -me;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(win));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(win));
    std::int64_t got = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, me, 2, 1, MPI_INT64_T, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(me, win));
    EXPECT_EQ(got, -((me + n - 1) % n));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    MPI_Info used;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_info(win, &used));
    char val[64];
    int flag = 0;
    MPI_Info_get(used, "alloc_shared_noncontig", 63, val, &flag);
    EXPECT_TRUE(flag);
    EXPECT_EQ(std::string(val), noncontig ? "true" : "false");
    MPI_Info_free(&used);
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

TEST(Shared, ContiguousPartsByLoadStoreAndRma) { check_shared(false); }
TEST(Shared, NoncontigPartsByLoadStoreAndRma) { check_shared(true); }

// MPI-4.1: shared_query on every flavor (issue 36, 11). A part this process reaches by load
// and store comes back with its base and size: its own, and over shared memory its node
// peers' parts of an allocate window; others (peers over am or ofi, create windows on user
// memory that only cross-memory attach reaches, every part of a dynamic window) come back as
// base NULL, size 0. A rank outside the group is still MPI_ERR_RANK.
TEST(Shared, QueryOnOtherFlavorsGivesTheMappedPartsElseNull) {
    const int me = world_rank(), n = world_size();
    Alloc w(2);
    w.base[0] = 100 + me;
    MPI_Info used;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_info(w.win, &used));
    char tp[MPI_MAX_INFO_VAL + 1] = "";
    int found = 0;
    MPI_Info_get(used, "fastrma_transport", MPI_MAX_INFO_VAL, tp, &found);
    MPI_Info_free(&used);
    // My node's ranks map each other's parts: the ranks of my host with my FASTRMA_NODE_NAME,
    // unless FASTRMA_TRANSPORT=am / ofi makes every rank a node of its own.
    const char* forced = std::getenv("FASTRMA_TRANSPORT");
    const bool alone = forced && (std::string(forced) == "am" || std::string(forced) == "ofi");
    char key[256] = "";
    gethostname(key, 128);
    const char* node_name = std::getenv("FASTRMA_NODE_NAME");
    std::snprintf(key + std::strlen(key), sizeof key - std::strlen(key), "/%s", node_name ? node_name : "");
    std::vector<char> keys(std::size_t(n) * sizeof key);
    MPI_Allgather(key, int(sizeof key), MPI_CHAR, keys.data(), int(sizeof key), MPI_CHAR, MPI_COMM_WORLD);
    auto on_my_node = [&](int r) { return !alone && std::strcmp(&keys[std::size_t(r) * sizeof key], key) == 0; };
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(w.win));
    for (int r = 0; r < n; ++r) {
        MPI_Aint sz = -1;
        int du = -1;
        void* p = reinterpret_cast<void*>(1);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(w.win, r, &sz, &du, &p)) << FRMA_Last_error_message();
        EXPECT_EQ(du, 8);
        if (r == me || on_my_node(r)) {
            EXPECT_EQ(sz, 16) << "rank " << r << " over " << tp;
            ASSERT_NE(p, nullptr) << "rank " << r;
            EXPECT_EQ(*static_cast<std::int64_t*>(p), 100 + r) << "rank " << r << "'s part, loaded";
            if (r == me) {
                EXPECT_EQ(p, static_cast<void*>(w.base));
            }
        } else {
            EXPECT_EQ(sz, 0) << "rank " << r << " over " << tp;
            EXPECT_EQ(p, nullptr) << "rank " << r << " over " << tp;
        }
    }
    MPI_Aint sz = -1;
    int du = -1;
    void* p = nullptr;
    EXPECT_EQ(MPI_ERR_RANK, FRMA_Win_shared_query(w.win, n, &sz, &du, &p));
    // A create window on user memory: its own part only.
    std::vector<std::int64_t> mem(4, 0);
    FRMA_Win cw = FRMA_WIN_NULL;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create(mem.data(), 32, 4, window_info(), MPI_COMM_WORLD, &cw));
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(cw, r, &sz, &du, &p));
        EXPECT_EQ(du, 4);
        EXPECT_EQ(sz, r == me ? 32 : 0) << "rank " << r;
        EXPECT_EQ(p, r == me ? static_cast<void*>(mem.data()) : nullptr) << "rank " << r;
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(cw, MPI_PROC_NULL, &sz, &du, &p));
    EXPECT_EQ(p, static_cast<void*>(mem.data())) << "the first part reached here";
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&cw));
    // A dynamic window: nothing, its own regions included.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(window_info(), MPI_COMM_WORLD, &cw));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(cw, mem.data(), 32));
    for (int r : {me, (me + 1) % n, MPI_PROC_NULL}) {
        p = reinterpret_cast<void*>(1);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_shared_query(cw, r, &sz, &du, &p));
        EXPECT_EQ(sz, 0);
        EXPECT_EQ(p, nullptr);
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(cw, mem.data()));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&cw));
}

// ---- dynamic windows ------------------------------------------------------------------------

TEST(Dynamic, AttachManyRegionsPutGetAccumulateAndDetach) {
    const int me = world_rank(), n = world_size();
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    const int nreg = 2000;
    std::vector<std::vector<std::int64_t>> regions(nreg, std::vector<std::int64_t>(4, 0));
    for (auto& r : regions) ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, r.data(), 32));
    EXPECT_EQ(MPI_ERR_RMA_ATTACH, FRMA_Win_attach(win, regions[5].data() + 1, 8)) << "overlap";
    // Exchange the addresses of my last region.
    MPI_Aint mine, addrs[64];
    MPI_Get_address(regions[nreg - 1].data(), &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
    const int right = (me + 1) % n;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    std::int64_t v = 50 + me, one = 1, got = 0;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, right, addrs[right], 1, MPI_INT64_T, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, 0, addrs[0] + 8, 1, MPI_INT64_T, MPI_SUM, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush_all(win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&got, 1, MPI_INT64_T, right, addrs[right], 1, MPI_INT64_T, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, win));
    EXPECT_EQ(got, 50 + me);
    // Outside any region: an error, nothing written.
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 1, MPI_INT64_T, right, addrs[right] + 32, 1, MPI_INT64_T, win));
    EXPECT_EQ(MPI_ERR_RMA_RANGE, FRMA_Put(&v, 2, MPI_INT64_T, right, addrs[right] + 24, 2, MPI_INT64_T, win))
        << "straddles the end";
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(regions[nreg - 1][0], 50 + (me + n - 1) % n);
    if (me == 0) {
        EXPECT_EQ(regions[nreg - 1][1], n);
    }
    // Detach: the origins' cached copy of my table must not let a write through.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, regions[nreg - 1].data()));
    EXPECT_EQ(MPI_ERR_RMA_ATTACH, FRMA_Win_detach(win, regions[nreg - 1].data())) << "detach twice";
    regions[nreg - 1].assign(4, 777);  // "reused" memory
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    // Refused at the put (shared memory: the origin re-reads the table's version) or, over
    // am, by the target, and then reported at the completion point.
    const int rc_put = FRMA_Put(&v, 1, MPI_INT64_T, right, addrs[right], 1, MPI_INT64_T, win);
    const int rc_end = FRMA_Win_unlock_all(win);
    EXPECT_TRUE(rc_put == MPI_ERR_RMA_RANGE ? rc_end == MPI_SUCCESS
                                            : rc_put == MPI_SUCCESS && rc_end == MPI_ERR_RMA_RANGE)
        << "put " << rc_put << ", unlock_all " << rc_end << ": a put to a detached region must be refused once";
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(regions[nreg - 1][0], 777) << "a detached region was written through a stale cache";
    for (int i = 0; i < nreg - 1; ++i) ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, regions[i].data()));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

// The window's info key fastrma_transport: which transport its peers went over.
std::string window_transport(FRMA_Win win) {
    MPI_Info info;
    char transport[32] = "";
    int found = 0;
    if (FRMA_Win_get_info(win, &info) != MPI_SUCCESS) return "";
    MPI_Info_get(info, "fastrma_transport", int(sizeof transport) - 1, transport, &found);
    MPI_Info_free(&info);
    return transport;
}

// FASTRMA_TRANSPORT=ofi: a dynamic window goes over libfabric too (each attached region
// registered), where the provider takes the keys we ask for (tcp;ofi_rxm, sockets); it used
// to fall back to am.
TEST(Dynamic, GoesOverTheNetworkTransportWhenAskedFor) {
    const char* want = std::getenv("FASTRMA_TRANSPORT");
    if (!want || std::strcmp(want, "ofi") != 0 || world_size() < 2) GTEST_SKIP() << "FASTRMA_TRANSPORT is not ofi";
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    EXPECT_EQ("ofi", window_transport(win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

// Every kind of access to regions the target detached after the origin read its table: never
// applied (the memory is the target's again), each refused either when issued or, over am,
// by the target, then reported at the next completion point — once; and a valid op in the
// same epoch still lands.
TEST(Dynamic, AccessesToADetachedRegionAreRefusedAndReportedOnce) {
    const int me = world_rank(), n = world_size();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    std::vector<std::int64_t> small(4, 0), big(8192, 0), live(4, 0);  // big: 64 KiB, a put sent in place
    for (auto* r : {&small, &big, &live})
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, r->data(), MPI_Aint(r->size() * 8)));
    MPI_Aint mine[3], addrs[3 * 64];
    MPI_Get_address(small.data(), &mine[0]);
    MPI_Get_address(big.data(), &mine[1]);
    MPI_Get_address(live.data(), &mine[2]);
    MPI_Allgather(mine, 3, MPI_AINT, addrs, 3, MPI_AINT, MPI_COMM_WORLD);
    const MPI_Aint r_small = addrs[3 * right], r_big = addrs[3 * right + 1], r_live = addrs[3 * right + 2];
    // The origins read (and cache) my table.
    std::int64_t one = 1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&one, 1, MPI_INT64_T, right, r_small, 1, MPI_INT64_T, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&one, 1, MPI_INT64_T, right, r_big, 1, MPI_INT64_T, win));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, small.data()));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, big.data()));
    small.assign(small.size(), 777);  // the memory is mine again
    big.assign(big.size(), 777);
    MPI_Barrier(MPI_COMM_WORLD);

    std::vector<std::int64_t> src(8192, 5);
    std::int64_t got = -1, old = -5, cmp = 777, old2 = -6, mark = 100 + me;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    const int rc[] = {
        FRMA_Put(src.data(), 1, MPI_INT64_T, right, r_small, 1, MPI_INT64_T, win),
        FRMA_Put(src.data(), 8192, MPI_INT64_T, right, r_big, 8192, MPI_INT64_T, win),
        FRMA_Accumulate(src.data(), 2, MPI_INT64_T, right, r_small + 8, 2, MPI_INT64_T, MPI_SUM, win),
        FRMA_Get(&got, 1, MPI_INT64_T, right, r_small, 1, MPI_INT64_T, win),
        FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, right, r_small + 24, MPI_SUM, win),
        FRMA_Compare_and_swap(&one, &cmp, &old2, MPI_INT64_T, right, r_small, win),
    };
    ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&mark, 1, MPI_INT64_T, right, r_live, 1, MPI_INT64_T, win));
    const int rc_end = FRMA_Win_flush(right, win);
    for (std::size_t i = 0; i < std::size(rc); ++i) {
        EXPECT_TRUE(rc[i] == MPI_ERR_RMA_RANGE || rc[i] == MPI_SUCCESS) << "op " << i << ": " << rc[i];
        if (rc[i] == MPI_SUCCESS) {
            EXPECT_EQ(rc_end, MPI_ERR_RMA_RANGE) << "op " << i << " was accepted and never reported";
        }
    }
    if (rc_end != MPI_SUCCESS) {
        EXPECT_EQ(rc_end, MPI_ERR_RMA_RANGE) << FRMA_Last_error_message();
        EXPECT_NE(std::strstr(FRMA_Last_error_message(), "not applied"), nullptr) << FRMA_Last_error_message();
    }
    EXPECT_EQ(got, -1) << "a refused get wrote the origin's buffer";
    EXPECT_EQ(old, -5) << "a refused fetch_and_op wrote the origin's result";
    EXPECT_EQ(old2, -6) << "a refused compare_and_swap wrote the origin's result";
    EXPECT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, win)) << "a refusal reported twice";
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    for (std::int64_t x : small) EXPECT_EQ(x, 777) << "a detached region was written";
    EXPECT_EQ(std::count(big.begin(), big.end(), 777), std::ptrdiff_t(big.size())) << "a detached region was written";
    // Over ofi (tcp;ofi_rxm) the target's provider cancels an access under a key it no
    // longer has and drops the connection: the operations behind it on this window fail
    // too (reported, never applied), so the valid put need not land there.
    if (window_transport(win) != "ofi") {
        EXPECT_EQ(live[0], 100 + left) << "a valid put after the refused ones did not land";
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, live.data()));
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

// A get of a region that its owner detaches while the answer is still on its way: after
// FRMA_Win_detach returns the owner reuses the memory, and fastrma must not read it any more.
// The origin gets the region as it was (the get was served before the detach; over am the
// detach then waits until the answer has left, settle()) or a refusal with its buffer
// untouched — never the reused memory. Over am with the origin's progress thread off
// (ctest mpi_active_np2_am_noprogress) the origin pulls nothing of the 1 MiB answer until
// its flush, 0.8 s after the owner learnt the get was served: without settle() the owner
// detaches at once and the origin reads the reused memory.
TEST(Dynamic, ADetachWaitsForAnswersStillReadingTheRegion) {
    const int me = world_rank(), n = world_size();
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    constexpr std::size_t kWords = 131072;  // 1 MiB: an answer the origin must pull
    std::vector<std::int64_t> big(kWords), live(512, 0), got(kWords, -1);
    for (std::size_t i = 0; i < kWords; ++i) big[i] = std::int64_t(i) * 3 + 1;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, big.data(), MPI_Aint(kWords * 8)));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, live.data(), MPI_Aint(live.size() * 8)));
    MPI_Aint mine[2], addrs[2 * 64];
    MPI_Get_address(big.data(), &mine[0]);
    MPI_Get_address(live.data(), &mine[1]);
    MPI_Allgather(mine, 2, MPI_AINT, addrs, 2, MPI_AINT, MPI_COMM_WORLD);
    const int origin = 0, owner = n > 1 ? 1 : 0;
    if (me == origin) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
        // The owner detaches after at most 0.2 s: when the lock and the get's look-up of the
        // owner's regions take longer (first contact across hosts), the get is refused here.
        const int rc_get =
            FRMA_Get(got.data(), int(kWords), MPI_INT64_T, owner, addrs[2 * owner], int(kWords), MPI_INT64_T, win);
        ASSERT_TRUE(rc_get == MPI_SUCCESS || rc_get == MPI_ERR_RMA_RANGE) << rc_get << " " << FRMA_Last_error_message();
        // The marker: 2 KiB (a message of its own over am, behind the get's request).
        std::vector<std::int64_t> marker(256, 4242);
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Put(marker.data(), 256, MPI_INT64_T, owner, addrs[2 * owner + 1], 256, MPI_INT64_T, win));
        if (owner != origin) std::this_thread::sleep_for(std::chrono::milliseconds(800));  // no MPI call
        const int rc_flush = FRMA_Win_flush(owner, win);
        const int rc = rc_get != MPI_SUCCESS ? rc_get : rc_flush;
        if (rc_get != MPI_SUCCESS) {
            EXPECT_EQ(rc_flush, MPI_SUCCESS) << "a refusal at issue reported again";
        }
        if (rc == MPI_SUCCESS) {
            for (std::size_t i = 0; i < kWords; ++i)
                ASSERT_EQ(got[i], std::int64_t(i) * 3 + 1) << "word " << i << ": read after the detach";
        } else {
            EXPECT_EQ(rc, MPI_ERR_RMA_RANGE) << FRMA_Last_error_message();
            EXPECT_EQ(std::count(got.begin(), got.end(), -1), std::ptrdiff_t(kWords)) << "a refused get wrote";
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    }
    if (me == owner && owner != origin) {
        // Wait (serving: the host's progress runs the am server when no thread does) until the
        // marker landed, then detach and reuse. Over shared memory the marker may land only at
        // the origin's flush: give up after 0.2 s, well before it.
        const auto t0 = std::chrono::steady_clock::now();
        while (__atomic_load_n(&live[0], __ATOMIC_ACQUIRE) != 4242 &&
               std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, big.data()));
        big.assign(kWords, 777);
    } else {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, big.data()));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_detach(win, live.data()));
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

// ---- request-based operations ------------------------------------------------------------

TEST(Requests, CompletedByTheHostMpisWaitFunctions) {
    const int me = world_rank(), n = world_size();
    Alloc w(16);
    const int right = (me + 1) % n;
    for (int mode = 0; mode < 2; ++mode) {
        if (mode == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
        } else
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, w.win));
        MPI_Request rq[4];
        std::int64_t v[2] = {10 + me, 20 + me}, got[2] = {0, 0}, one = 1, old = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Rput(v, 2, MPI_INT64_T, right, 4 * mode, 2, MPI_INT64_T, w.win, &rq[0]));
        ASSERT_EQ(MPI_SUCCESS,
                  FRMA_Raccumulate(&one, 1, MPI_INT64_T, right, 10, 1, MPI_INT64_T, MPI_SUM, w.win, &rq[1]));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Rget_accumulate(&one, 1, MPI_INT64_T, &old, 1, MPI_INT64_T, right, 11, 1,
                                                    MPI_INT64_T, MPI_SUM, w.win, &rq[2]));
        ASSERT_EQ(MPI_SUCCESS, MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(right, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Rget(got, 2, MPI_INT64_T, right, 4 * mode, 2, MPI_INT64_T, w.win, &rq[3]));
        ASSERT_EQ(MPI_SUCCESS, MPI_Wait(&rq[3], MPI_STATUS_IGNORE));
        EXPECT_EQ(rq[3], MPI_REQUEST_NULL);
        EXPECT_EQ(got[0], 10 + me);
        EXPECT_EQ(got[1], 20 + me);
        EXPECT_EQ(old, mode);
        if (mode == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        } else
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(right, w.win));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    EXPECT_EQ(w.base[10], 2);
}

bool over_am() {  // a remote transport: am, or ofi (whose requests complete on their own too)
    const char* t = std::getenv("FASTRMA_TRANSPORT");
    return t && (std::string(t) == "am" || std::string(t) == "ofi");
}

// 64 MiB from the next rank, contiguous at the target or (vector) as 16,384 blocks of 4 KiB
// 8 KiB apart. Over am the data travels in round trips that the target's progress (its
// thread, or the hook inside its MPI_Barrier) serves: FRMA_Rget must hand the request out at
// once (its posting takes under `share` of the transfer's time), and MPI_Test/MPI_Wait must
// complete it with the data in place. On shared memory the data is copied at post: complete
// at once.
void rget_returns_when_posted(bool vector, double share) {
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a second rank";
    constexpr std::size_t kBytes = std::size_t(64) << 20, kBlock = 4096;
    const std::size_t span = vector ? 2 * kBytes : kBytes;
    unsigned char* base = nullptr;
    FRMA_Win win;
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_allocate(MPI_Aint(span), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    // Block b (4 KiB of the data) sits at b * 4 KiB, or at b * 8 KiB in the vector case: its
    // first and last bytes mark it, the rest is 0; the vector's gaps hold 0xEE.
    const std::size_t step = vector ? 2 * kBlock : kBlock;
    std::memset(base, vector ? 0xEE : 0, span);
    for (std::size_t b = 0; b < kBytes / kBlock; ++b) {
        std::memset(base + b * step, 0, kBlock);
        base[b * step] = static_cast<unsigned char>(b * 7 + me);
        base[b * step + kBlock - 1] = static_cast<unsigned char>(b * 5 + me);
    }
    MPI_Datatype target_type = MPI_BYTE;
    int target_count = int(kBytes);
    if (vector) {
        ASSERT_EQ(MPI_SUCCESS, MPI_Type_vector(int(kBytes / kBlock), int(kBlock), int(step), MPI_BYTE, &target_type));
        ASSERT_EQ(MPI_SUCCESS, MPI_Type_commit(&target_type));
        target_count = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Rank 1, the target, makes no MPI call for 50 ms after each round starts. With no
    // progress thread nobody serves it meanwhile, so the data is surely still in flight when
    // the origin's MPI_Test runs: it must report incomplete. With a thread serving, MPI_Test
    // may legally find it done (Open MPI's receiver copies a matched rendezvous message
    // whole, one CMA read, inside it): then it is only reported.
    const char* prog = std::getenv("FASTRMA_PROGRESS");
    const bool thread = !(prog && std::string(prog) == "0");
    std::vector<unsigned char> got(me == 0 ? kBytes : 0, 0);  // pages touched before the clock starts
    if (me == 0) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, win));
    }
    // Three rounds, the best judged: a round whose posting thread lost its core to another
    // process for milliseconds says nothing about the call.
    double best = 1.0;
    int incomplete = 0;
    for (int round = 0; round < 3; ++round) {
        if (me == 0) std::fill(got.begin(), got.end(), 0);
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (me == 0) {
            MPI_Request rq;
            const auto t0 = std::chrono::steady_clock::now();
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Rget(got.data(), int(kBytes), MPI_BYTE, 1, 0, target_count, target_type, win, &rq));
            const auto t1 = std::chrono::steady_clock::now();
            int flag = -1;
            ASSERT_EQ(MPI_SUCCESS, MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            if (!over_am()) {
                EXPECT_EQ(flag, 1) << "shared memory: complete at post";
            } else if (!thread) {
                EXPECT_EQ(flag, 0) << "complete while the target served nobody";
            }
            incomplete += flag == 0;
            if (!flag) {
                ASSERT_EQ(MPI_SUCCESS, MPI_Wait(&rq, MPI_STATUS_IGNORE));
            }
            const auto t2 = std::chrono::steady_clock::now();
            const double post_s = std::chrono::duration<double>(t1 - t0).count();
            const double all_s = std::chrono::duration<double>(t2 - t0).count();
            best = std::min(best, post_s / all_s);
            if (over_am())
                std::printf("64 MiB FRMA_Rget (%s) over am: posted in %.3f ms, complete in %.3f ms\n",
                            vector ? "vector of 4 KiB blocks" : "contiguous", post_s * 1e3, all_s * 1e3);
            std::size_t bad = 0;
            for (std::size_t b = 0; b < kBytes / kBlock; ++b) {
                const unsigned char* blk = got.data() + b * kBlock;
                bad += blk[0] != static_cast<unsigned char>(b * 7 + 1) ||
                       blk[kBlock - 1] != static_cast<unsigned char>(b * 5 + 1) ||
                       std::count(blk + 1, blk + kBlock - 1, 0) != std::ptrdiff_t(kBlock - 2);
            }
            EXPECT_EQ(bad, 0u) << "blocks not as the target holds them (a gap's 0xEE, or missing)";
        }
        MPI_Barrier(MPI_COMM_WORLD);  // the target serves here (hook or thread) if not before
    }
    // The derived case is judged over am: over ofi its pieces are posted within the
    // provider's own flow control, which may hold the call; in a sanitizer build the
    // instrumented posting of its 16,384 pieces costs 5-10 times as much (ASan: 14-33 ms
    // of a 100-146 ms transfer at 2 ranks, ~210 of 220 at 3), which says nothing about the
    // design. Only reported there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    constexpr bool sanitized = true;
#else
    constexpr bool sanitized = false;
#endif
    const char* tr = std::getenv("FASTRMA_TRANSPORT");
    const bool judged = vector ? !sanitized && tr && std::string(tr) == "am" : over_am();
    if (me == 0) {
        if (over_am()) {
            if (judged) {
                EXPECT_LT(best, share) << "FRMA_Rget took at least " << share
                                       << " of the transfer's time in every round";
            }
            std::printf("MPI_Test right after the post found %d of 3 rounds incomplete\n", incomplete);
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (vector) MPI_Type_free(&target_type);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
}

TEST(Requests, AnRgetReturnsWhenPostedAndCompletesInTheHostsWait) { rget_returns_when_posted(false, 0.25); }

TEST(Requests, ADerivedTypeRgetReturnsWhenPostedAndCompletesInTheHostsWait) { rget_returns_when_posted(true, 0.1); }

TEST(Requests, QueuedBehindALockTheyCompleteOnceGranted) {
    // Rank 0 holds an exclusive lock on itself; the other ranks' Rput and Rget to it wait for
    // the grant. The request is handed out at once; MPI_Wait completes it when the lock came
    // and the op was issued (by the progress thread) — or, where nobody polls, the call
    // itself waited. Either way the data is in place.
    const int me = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs a second rank";
    Alloc w(4 * std::size_t(n));
    if (me == 0) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
        w.base[0] = 5;
        MPI_Barrier(MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
        std::int64_t v = 100 + me, got = -1;
        MPI_Request rq[2];
        ASSERT_EQ(MPI_SUCCESS, FRMA_Rput(&v, 1, MPI_INT64_T, 0, 4 * me, 1, MPI_INT64_T, w.win, &rq[0]));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Rget(&got, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, w.win, &rq[1]));
        ASSERT_EQ(MPI_SUCCESS, MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        EXPECT_EQ(got, 5);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        for (int r = 1; r < n; ++r) EXPECT_EQ(w.base[4 * r], 100 + r);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- derived types freed while their op is still queued ------------------------------------

TEST(DerivedTypes, FreedRightAfterTheCallWhileTheOpWaitsForItsLock) {
    // Rank 0 holds an exclusive lock on itself; the last rank's lock on rank 0 is not
    // granted yet, so its put (through a fresh vector type) is queued. The type is freed at
    // once, as MPI allows; the op must still land correctly once the lock comes.
    const int me = world_rank(), n = world_size();
    ASSERT_GE(n, 2);
    Alloc w(16);
    const int last = n - 1;
    if (me == 0) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
        MPI_Send(nullptr, 0, MPI_BYTE, last, 3, MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
    } else if (me == last) {
        MPI_Recv(nullptr, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Datatype vec;
        MPI_Type_vector(3, 1, 4, MPI_INT64_T, &vec);
        MPI_Type_commit(&vec);
        std::int64_t v[3] = {71, 72, 73};
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Put(v, 3, MPI_INT64_T, 0, 1, 1, vec, w.win));
        MPI_Type_free(&vec);
        MPI_Datatype junk;  // reuse the freed handle's memory, if the MPI does
        MPI_Type_contiguous(7, MPI_BYTE, &junk);
        MPI_Type_commit(&junk);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));
        MPI_Type_free(&junk);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        EXPECT_EQ(w.base[1], 71);
        EXPECT_EQ(w.base[5], 72);
        EXPECT_EQ(w.base[9], 73);
        EXPECT_EQ(w.base[2], 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---- names, info, attributes ---------------------------------------------------------------

int g_deleted = 0;
int count_delete(FRMA_Win, int, void* v, void* extra) {
    g_deleted += *static_cast<int*>(extra) + (v != nullptr);
    return MPI_SUCCESS;
}

TEST(Management, NameInfoAndUserAttributes) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "no_locks", "true");
    MPI_Info_set(info, "accumulate_ordering", "none");
    MPI_Info_set(info, "accumulate_ops", "same_op");
    {
        Alloc w(2, info);
        char name[MPI_MAX_OBJECT_NAME];
        int len = -1;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_name(w.win, name, &len));
        EXPECT_EQ(len, 0);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_name(w.win, "halo window"));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_name(w.win, name, &len));
        EXPECT_EQ(std::string(name), "halo window");
        MPI_Info used;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_info(w.win, &used));
        char val[64];
        int flag = 0;
        MPI_Info_get(used, "no_locks", 63, val, &flag);
        EXPECT_EQ(std::string(val), "true");
        MPI_Info_get(used, "accumulate_ordering", 63, val, &flag);
        EXPECT_EQ(std::string(val), "none");
        MPI_Info_get(used, "accumulate_ops", 63, val, &flag);
        EXPECT_EQ(std::string(val), "same_op");
        MPI_Info_free(&used);
        EXPECT_EQ(MPI_ERR_RMA_SYNC, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win)) << "no_locks=true";
        // set_info can lift it.
        MPI_Info again;
        MPI_Info_create(&again);
        MPI_Info_set(again, "no_locks", "false");
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_info(w.win, again));
        MPI_Info_free(&again);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(0, w.win));

        int extra = 10, kv = MPI_KEYVAL_INVALID;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_create_keyval(nullptr, count_delete, &kv, &extra));
        EXPECT_NE(kv, MPI_WIN_BASE);
        int payload = 42;
        void* out = nullptr;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, kv, &out, &flag));
        EXPECT_FALSE(flag);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_attr(w.win, kv, &payload));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_get_attr(w.win, kv, &out, &flag));
        EXPECT_TRUE(flag);
        EXPECT_EQ(out, &payload);
        g_deleted = 0;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_attr(w.win, kv, &payload));  // replaces: deletes the old
        EXPECT_EQ(g_deleted, 11);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_delete_attr(w.win, kv));
        EXPECT_EQ(g_deleted, 22);
        EXPECT_EQ(MPI_ERR_KEYVAL, FRMA_Win_delete_attr(w.win, kv));
        EXPECT_EQ(MPI_ERR_KEYVAL, FRMA_Win_set_attr(w.win, MPI_WIN_BASE, &payload)) << "predefined is read-only";
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_set_attr(w.win, kv, nullptr));
        g_deleted = 0;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free(&w.win));  // runs the delete callback
        EXPECT_EQ(g_deleted, 10);
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_free_keyval(&kv));
        EXPECT_EQ(kv, MPI_KEYVAL_INVALID);
    }
    MPI_Info_free(&info);
}

}  // namespace
