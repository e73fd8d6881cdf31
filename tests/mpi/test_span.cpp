// test_span.cpp — windows whose peers are on several nodes (run with the world split into
// nodes: FASTRMA_NODE_NAME per rank on one machine, or scripts/twohost.sh's two hosts; on
// one node every check still holds, with every peer on shared memory).
//
// Span.EachPeerOnItsMedium: a peer is reached by shared memory exactly when it is on my
// node (the node key: FASTRMA_NODE_NAME, else the host name), on every flavor; the domain
// of accumulates follows (docs/accumulate.md).
// Span.ContendedAtomicsFromBothMediaAreExact: threads of every rank hit the same elements
// of one target per node with fetch_and_op, accumulate (one element and whole ranges),
// compare_and_swap locks around a plain read-modify-write, and exclusive-lock counters, at
// once, from node and off-node origins; every fetched value is seen once, every count exact.
// Span.HammeredElementsFromBothMediaAreExact: every rank adds to a few elements of one
// target as fast as it can, so node and off-node applications overlap in time.
// Span.LockAllAndExclusiveLocksNeverOverlap: lock_all epochs from one half of the ranks race
// exclusive locks from the other half on every target; a word written under each shows no
// overlap.
// Span.FenceAndPscwCountBothMedia: puts and accumulates from every rank to every rank under
// fence and PSCW land before the epoch ends, whatever medium carried them.
#include <fastrma/fastrma.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/mpi_world.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"

namespace {

enum class Flavor { allocate, create, dynamic };

// Each rank's node, as the engine keys it (FASTRMA_NODE_NAME stands in for the host).
std::vector<std::string> nodes_of_world() {
    char key[128] = {};
    if (const char* n = std::getenv("FASTRMA_NODE_NAME"); n && *n)
        std::snprintf(key, sizeof key, "name:%s", n);
    else
        gethostname(key, sizeof key - 1);
    std::vector<char> all(sizeof key * std::size_t(world_size()));
    MPI_Allgather(key, sizeof key, MPI_CHAR, all.data(), sizeof key, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < world_size(); ++r) out.emplace_back(&all[std::size_t(r) * sizeof key]);
    return out;
}

struct SpanWin {
    FRMA_Win win = FRMA_WIN_NULL;
    std::int64_t* mem = nullptr;
    std::vector<std::int64_t> user;
    std::vector<MPI_Aint> disp0;  // byte displacement of element 0 at each rank
    Flavor flavor;

    SpanWin(Flavor f, std::size_t words) : flavor(f) {
        disp0.assign(std::size_t(world_size()), 0);
        const MPI_Aint bytes = MPI_Aint(words * 8);
        if (f == Flavor::allocate) {
            EXPECT_EQ(MPI_SUCCESS, FRMA_Win_allocate(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
        } else {
            user.assign(words, 0);
            mem = user.data();
            if (f == Flavor::create) {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create(mem, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            } else {
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
                EXPECT_EQ(MPI_SUCCESS, FRMA_Win_attach(win, mem, bytes));
                MPI_Aint mine;
                MPI_Get_address(mem, &mine);
                MPI_Allgather(&mine, 1, MPI_AINT, disp0.data(), 1, MPI_AINT, MPI_COMM_WORLD);
            }
        }
        std::memset(mem, 0, std::size_t(bytes));
        FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    ~SpanWin() {
        MPI_Barrier(MPI_COMM_WORLD);
        if (flavor == Flavor::dynamic) FRMA_Win_detach(win, mem);
        EXPECT_EQ(MPI_SUCCESS, FRMA_Win_free(&win));
    }
    // The displacement of element i at rank r (dynamic: an address; else disp_unit 8).
    MPI_Aint at(int r, std::size_t i) const {
        return flavor == Flavor::dynamic ? disp0[std::size_t(r)] + MPI_Aint(i * 8) : MPI_Aint(i);
    }
    fastrma::detail::Window* impl() const { return fastrma::detail::window_of(win); }
};

class Span : public ::testing::TestWithParam<Flavor> {};

TEST_P(Span, EachPeerOnItsMedium) {
    const std::vector<std::string> nodes = nodes_of_world();
    const int me = world_rank(), n = world_size();
    const char* want = std::getenv("FASTRMA_TRANSPORT");
    const std::string t = want ? want : "auto";
    const bool own_node = t == "am" || t == "ofi";
    SpanWin w(GetParam(), 16);
    auto* impl = w.impl();
    bool spans = false;
    for (int r = 0; r < n; ++r) spans = spans || nodes[std::size_t(r)] != nodes[std::size_t(me)];
    const bool net_dynamic = impl->uses_network() && GetParam() == Flavor::dynamic;
    for (int r = 0; r < n; ++r) {
        const bool same = nodes[std::size_t(r)] == nodes[std::size_t(me)];
        if (r == me) continue;
        if (own_node || net_dynamic)
            EXPECT_TRUE(impl->peer_remote(r)) << "rank " << r << " with FASTRMA_TRANSPORT=" << t;
        else
            EXPECT_EQ(!same, impl->peer_remote(r))
                << "rank " << r << " (" << nodes[std::size_t(r)] << ", I am on " << nodes[std::size_t(me)] << ")";
        // A node peer of an allocate window is mapped here: loads and stores reach it.
        if (same && !own_node && GetParam() == Flavor::allocate) {
            EXPECT_TRUE(impl->peer_mapped(r)) << "rank " << r;
        }
    }
    EXPECT_EQ(spans || own_node, impl->uses_am());
    if (spans && !own_node && !net_dynamic) {
        // My node segment holds exactly my node's ranks.
        std::vector<int> mine;
        for (int r = 0; r < n; ++r)
            if (nodes[std::size_t(r)] == nodes[std::size_t(me)]) mine.push_back(r);
        EXPECT_EQ(mine, impl->node_ranks());
        // Allocate windows keep CPU atomics among node peers where others share my node; the
        // target's agent applies off-node accumulates with the same rule.
        if (GetParam() == Flavor::allocate && !impl->uses_network()) {
            EXPECT_EQ(mine.size() > 1, impl->cpu_atomics());
        }
    }
}

TEST_P(Span, ContendedAtomicsFromBothMediaAreExact) {
    const int me = world_rank(), n = world_size();
    constexpr int kThreads = 2, kRounds = 300;
    constexpr std::size_t kRange = 64;  // elements [8, 8 + kRange): accumulated
    // Layout of each target: [0] fetch_and_op counter, [1] CAS lock word, [2] counter under
    // the CAS lock, [3] counter under exclusive locks, [8..8+kRange) accumulate range.
    SpanWin w(GetParam(), 8 + kRange);
    // One target per end of the world: on a split world, one per node (or two on one).
    const int targets[2] = {0, n - 1};
    std::vector<std::vector<std::int64_t>> fetched(kThreads);
    auto worker = [&](int tid) {
        const std::int64_t one = 1;
        std::vector<std::int64_t> ones(kRange, 1);
        for (int i = 0; i < kRounds; ++i) {
            const int t = targets[(i + tid + me) % 2];
            std::int64_t old = -1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Fetch_and_op(&one, &old, MPI_INT64_T, t, w.at(t, 0), MPI_SUM, w.win));
            // One element and the whole range, overlapping, from every origin.
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, t, w.at(t, 8 + std::size_t(i) % kRange), 1,
                                                   MPI_INT64_T, MPI_SUM, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(ones.data(), int(kRange), MPI_INT64_T, t, w.at(t, 8), int(kRange),
                                                   MPI_INT64_T, MPI_SUM, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            if (t == targets[0]) fetched[std::size_t(tid)].push_back(old);
            if (i % 10 == 0) {
                // A spin lock by compare_and_swap around a plain get + put of a counter.
                const std::int64_t mine = std::int64_t(me * kThreads + tid + 1), zero = 0;
                for (std::int64_t prev = -1; prev != 0;) {
                    ASSERT_EQ(MPI_SUCCESS,
                              FRMA_Compare_and_swap(&mine, &zero, &prev, MPI_INT64_T, t, w.at(t, 1), w.win));
                    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
                }
                std::int64_t v = -1;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, t, w.at(t, 2), 1, MPI_INT64_T, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
                ++v;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, 2), 1, MPI_INT64_T, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
                std::int64_t back = -1;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Compare_and_swap(&zero, &mine, &back, MPI_INT64_T, t, w.at(t, 1), w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
                ASSERT_EQ(back, mine) << "the CAS lock changed hands while held";
            }
        }
    };
    // One lock_all epoch of the process; its threads issue and flush inside it.
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
    for (auto& t : ts) t.join();
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    // Exclusive-lock counters: lock, get, put back one more, unlock (one thread: MPI allows
    // one lock per target per process).
    for (int i = 0; i < 20; ++i)
        for (int t : targets) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w.win));
            std::int64_t v = -1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, t, w.at(t, 3), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            ++v;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, 3), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
        }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(w.win));
    // Every value target 0's counter handed out, once.
    std::vector<std::int64_t> mine;
    for (auto& f : fetched) mine.insert(mine.end(), f.begin(), f.end());
    int count = int(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n));
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < n; ++r) {
        offs[std::size_t(r)] = total;
        total += counts[std::size_t(r)];
    }
    std::vector<std::int64_t> all(static_cast<std::size_t>(total));
    MPI_Allgatherv(mine.data(), count, MPI_INT64_T, all.data(), counts.data(), offs.data(), MPI_INT64_T,
                   MPI_COMM_WORLD);
    std::sort(all.begin(), all.end());
    for (int i = 0; i < total; ++i) ASSERT_EQ(all[std::size_t(i)], i) << "fetch_and_op values at target 0";
    // Per target: how many rounds went to it from all threads of all ranks.
    const bool one_target = targets[0] == targets[1];
    for (int t : targets) {
        if (me != t) continue;
        std::int64_t rounds = 0;  // rounds that chose this target, over every rank and thread
        for (int r = 0; r < n; ++r)
            for (int tid = 0; tid < kThreads; ++tid)
                for (int i = 0; i < kRounds; ++i)
                    if (one_target || targets[(i + tid + r) % 2] == t) ++rounds;
        std::int64_t cas_rounds = 0, singles[kRange] = {};
        for (int r = 0; r < n; ++r)
            for (int tid = 0; tid < kThreads; ++tid)
                for (int i = 0; i < kRounds; ++i)
                    if (one_target || targets[(i + tid + r) % 2] == t) {
                        if (i % 10 == 0) ++cas_rounds;
                        ++singles[std::size_t(i) % kRange];
                    }
        EXPECT_EQ(w.mem[0], rounds) << "fetch_and_op counter at rank " << t;
        EXPECT_EQ(w.mem[1], 0) << "CAS lock left held at rank " << t;
        EXPECT_EQ(w.mem[2], cas_rounds) << "counter under the CAS lock at rank " << t;
        EXPECT_EQ(w.mem[3], std::int64_t(n) * 20 * (one_target ? 2 : 1)) << "exclusive-lock counter at rank " << t;
        for (std::size_t k = 0; k < kRange; ++k)
            ASSERT_EQ(w.mem[8 + k], rounds + singles[k]) << "accumulated element " << k << " at rank " << t;
    }
}

TEST_P(Span, HammeredElementsFromBothMediaAreExact) {
    // Every rank adds to the same few elements of target 0 as fast as it can for the same
    // stretch of time (node origins by CPU atomics, off-node ones through the target's
    // agent, which applies them in batches), so applications from the two media overlap;
    // a lost update shows in the totals.
    const int me = world_rank();
    constexpr double kSeconds = 0.4;
    SpanWin w(GetParam(), 8);
    const std::int64_t one = 1;
    std::int64_t mine[5] = {};
    std::vector<std::int64_t> olds(256);  // fetched values land by the flush every 256 ops
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i % 256 != 0 || MPI_Wtime() - t0 < kSeconds; ++i) {
        const std::size_t k = std::size_t(i) % 4;
        ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&one, 1, MPI_INT64_T, 0, w.at(0, k), 1, MPI_INT64_T, MPI_SUM, w.win));
        ++mine[k];
        if (i % 16 == me % 16) {
            ASSERT_EQ(MPI_SUCCESS,
                      FRMA_Fetch_and_op(&one, &olds[std::size_t(i) % 256], MPI_INT64_T, 0, w.at(0, 4), MPI_SUM, w.win));
            ++mine[4];
        }
        if (i % 256 == 255) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(0, w.win));
        }
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
    std::int64_t total[5] = {};
    MPI_Allreduce(mine, total, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) {
        for (int k = 0; k < 5; ++k) EXPECT_EQ(w.mem[k], total[k]) << "element " << k;
    }
}

TEST_P(Span, LockAllAndExclusiveLocksNeverOverlap) {
    const int me = world_rank(), n = world_size();
    SpanWin w(GetParam(), 4);
    // Word 0 of each target: set to the holder while held (exclusive), read back before
    // release; lock_all holders read every target's word 0 and find it 0 (no exclusive
    // holder beside them).
    const std::int64_t mine = me + 1, zero = 0;
    for (int i = 0; i < 40; ++i) {
        if ((me + i) % 2 == 0) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock_all(0, w.win));
            for (int t = 0; t < n; ++t) {
                std::int64_t v = -1;
                ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
                ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
                ASSERT_EQ(v, 0) << "rank " << t << " held exclusively during my lock_all";
            }
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock_all(w.win));
        } else {
            const int t = (me + i) % n;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&mine, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            std::int64_t v = -1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            ASSERT_EQ(v, mine) << "another holder wrote rank " << t << "'s word under my exclusive lock";
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&zero, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
        }
    }
}

TEST_P(Span, SharedAndExclusiveLocksFromBothMediaExclude) {
    // Every rank locks every target in turn, exclusive or shared, from both media at once
    // (node peers take the words directly, off-node ones through the target's agent). An
    // exclusive holder writes a pair of words one flush apart and bumps a counter; a shared
    // holder must never see the pair torn, nor a write of another exclusive holder under it.
    const int me = world_rank(), n = world_size();
    SpanWin w(GetParam(), 4);  // [0] counter, [1] [2] the pair
    constexpr int kRounds = 60;
    int exclusive_rounds = 0;
    for (int i = 0; i < kRounds; ++i) {
        const int t = (me + i) % n;
        if ((i + me) % 3 != 0) {
            ++exclusive_rounds;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w.win));
            std::int64_t v = -1;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(&v, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            ++v;
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, 1), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, 2), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, 0), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
        } else {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_lock(MPI_LOCK_SHARED, t, 0, w.win));
            std::int64_t a[3] = {-1, -1, -1}, b[3] = {-2, -2, -2};
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(a, 3, MPI_INT64_T, t, w.at(t, 0), 3, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_flush(t, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(b, 3, MPI_INT64_T, t, w.at(t, 0), 3, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_unlock(t, w.win));
            EXPECT_TRUE(a[0] == a[1] && a[1] == a[2])
                << "torn pair at rank " << t << ": " << a[0] << " " << a[1] << " " << a[2];
            EXPECT_TRUE(a[0] == b[0] && a[1] == b[1] && a[2] == b[2])
                << "rank " << t << " changed under my shared lock: " << a[0] << " -> " << b[0];
        }
    }
    int total = 0;
    MPI_Allreduce(&exclusive_rounds, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_sync(w.win));
    std::int64_t mine = w.mem[0], sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(sum, total) << "exclusive-lock counters over every target";
}

TEST_P(Span, FenceAndPscwCountBothMedia) {
    const int me = world_rank(), n = world_size();
    SpanWin w(GetParam(), std::size_t(2 * n));
    for (int e = 1; e <= 10; ++e) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        const std::int64_t v = 1000 * e + me;
        for (int t = 0; t < n; ++t) {
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, std::size_t(me)), 1, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Accumulate(&v, 1, MPI_INT64_T, t, w.at(t, std::size_t(n + me)), 1, MPI_INT64_T,
                                                   MPI_SUM, w.win));
        }
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
        for (int r = 0; r < n; ++r) {
            ASSERT_EQ(w.mem[r], 1000 * e + r) << "fence epoch " << e << ": put from rank " << r;
            std::int64_t sum = 0;
            for (int k = 1; k <= e; ++k) sum += 1000 * k + r;
            ASSERT_EQ(w.mem[n + r], sum) << "fence epoch " << e << ": accumulate from rank " << r;
        }
        // A get of every peer's part after the fence sees what the others put there.
        for (int t = 0; t < n; ++t) {
            std::vector<std::int64_t> got(std::size_t(n), -1);
            ASSERT_EQ(MPI_SUCCESS, FRMA_Get(got.data(), n, MPI_INT64_T, t, w.at(t, 0), n, MPI_INT64_T, w.win));
            ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(0, w.win));
            for (int r = 0; r < n; ++r) ASSERT_EQ(got[std::size_t(r)], 1000 * e + r) << "get from rank " << t;
        }
    }
    ASSERT_EQ(MPI_SUCCESS, FRMA_Win_fence(MPI_MODE_NOSUCCEED, w.win));
    // PSCW: everyone exposes to everyone and accesses everyone.
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int e = 1; e <= 10; ++e) {
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_post(world, 0, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_start(world, 0, w.win));
        const std::int64_t v = 7000 * e + me;
        for (int t = 0; t < n; ++t)
            ASSERT_EQ(MPI_SUCCESS, FRMA_Put(&v, 1, MPI_INT64_T, t, w.at(t, std::size_t(me)), 1, MPI_INT64_T, w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_complete(w.win));
        ASSERT_EQ(MPI_SUCCESS, FRMA_Win_wait(w.win));
        for (int r = 0; r < n; ++r) ASSERT_EQ(w.mem[r], 7000 * e + r) << "PSCW epoch " << e << ": rank " << r;
        MPI_Barrier(MPI_COMM_WORLD);  // nobody puts the next epoch's value before all have read
    }
    MPI_Group_free(&world);
}

INSTANTIATE_TEST_SUITE_P(Flavors, Span, ::testing::Values(Flavor::allocate, Flavor::create, Flavor::dynamic),
                         [](const ::testing::TestParamInfo<Flavor>& i) {
                             return std::string(i.param == Flavor::allocate ? "allocate"
                                                : i.param == Flavor::create ? "create"
                                                                            : "dynamic");
                         });

}  // namespace
