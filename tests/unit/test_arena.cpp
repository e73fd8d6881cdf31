// test_arena.cpp — ShmArena, the memory behind FRMA_Alloc_mem: blocks are reused after a
// free, aligned, never overlap, free neighbours merge, pages are reserved once, thousands of
// live allocations need a handful of descriptors, and a range looked up in it can be mapped
// by a peer (here: this process, through pidfd_getfd on itself) and reached by load/store.
// Each test makes its own arena with small chunks (1 MiB, dedicated above 256 KiB).
#include <gtest/gtest.h>
#include <mpi.h>

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "common/fds.hpp"
#include "transport/shm/arena.hpp"

using namespace fastrma::detail;

namespace {

constexpr std::size_t kChunk = std::size_t(1) << 20;
constexpr std::size_t kDedicated = std::size_t(256) << 10;

void* must_alloc(ShmArena& a, std::size_t n) {
    int err = -1;
    void* p = a.alloc(n, &err);
    EXPECT_EQ(err, MPI_SUCCESS) << "alloc(" << n << ")";
    EXPECT_NE(p, nullptr) << "alloc(" << n << ")";
    return p;
}

bool shared_memory_here() {
    ShmArena a(kChunk, kDedicated);
    return a.stats().shared;
}

}  // namespace

TEST(Arena, AFreedBlockIsReusedWithoutNewSegmentsOrReservations) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    void* x = must_alloc(a, 1000);
    void* y = must_alloc(a, 20000);
    const ArenaStats s0 = a.stats();
    ASSERT_EQ(a.free(x), MPI_SUCCESS);
    ASSERT_EQ(a.free(y), MPI_SUCCESS);
    EXPECT_EQ(a.stats().live_allocs, 0u);
    EXPECT_EQ(a.stats().live_bytes, 0u);
    for (int i = 0; i < 1000; ++i) {
        void* x2 = must_alloc(a, 1000);
        void* y2 = must_alloc(a, 20000);
        EXPECT_EQ(x2, x) << "iteration " << i;
        EXPECT_EQ(y2, y) << "iteration " << i;
        EXPECT_EQ(a.free(y2), MPI_SUCCESS);
        EXPECT_EQ(a.free(x2), MPI_SUCCESS);
    }
    EXPECT_EQ(a.stats().segments, s0.segments);
    EXPECT_EQ(a.stats().reserved_bytes, s0.reserved_bytes);
}

TEST(Arena, BlocksAreAlignedAndDisjoint) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    const std::size_t sizes[] = {0, 1, 7, 63, 64, 65, 100, 4095, 4096, 4097, 10000, 65536, 200000, 300000};
    std::vector<std::pair<unsigned char*, std::size_t>> blocks;
    for (int round = 0; round < 3; ++round)
        for (std::size_t n : sizes) {
            auto* p = static_cast<unsigned char*>(must_alloc(a, n));
            const std::uintptr_t u = reinterpret_cast<std::uintptr_t>(p);
            EXPECT_EQ(u % 64, 0u) << "size " << n;
            if (n >= 4096) {
                EXPECT_EQ(u % 4096, 0u) << "size " << n;
            }
            blocks.emplace_back(p, n);
        }
    // Fill each block with its own byte, then check nobody overwrote anybody.
    for (std::size_t i = 0; i < blocks.size(); ++i) std::memset(blocks[i].first, int(i + 1), blocks[i].second);
    std::set<void*> distinct;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        distinct.insert(blocks[i].first);
        for (std::size_t k = 0; k < blocks[i].second; ++k)
            ASSERT_EQ(blocks[i].first[k], static_cast<unsigned char>(i + 1)) << "block " << i << " byte " << k;
    }
    EXPECT_EQ(distinct.size(), blocks.size()) << "size-0 allocations must be unique pointers too";
    for (auto& [p, n] : blocks) EXPECT_EQ(a.free(p), MPI_SUCCESS);
}

TEST(Arena, FreeNeighboursMergeIntoOneBlock) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    auto* x = static_cast<unsigned char*>(must_alloc(a, 65536));
    auto* y = static_cast<unsigned char*>(must_alloc(a, 65536));
    auto* z = static_cast<unsigned char*>(must_alloc(a, 65536));
    ASSERT_EQ(y, x + 65536);  // a fresh chunk fills from its start
    ASSERT_EQ(z, y + 65536);
    void* keep = must_alloc(a, 4096);  // after z: the merged block must not reach the tail
    ASSERT_EQ(keep, z + 65536);
    EXPECT_EQ(a.free(y), MPI_SUCCESS);
    EXPECT_EQ(a.free(x), MPI_SUCCESS);
    EXPECT_EQ(a.free(z), MPI_SUCCESS);
    // Best fit: the 192 KiB hole left by x, y, z, not the larger tail of the chunk.
    EXPECT_EQ(must_alloc(a, 3 * 65536), x);
}

TEST(Arena, FiveThousandLiveAllocationsNeedAFewDescriptors) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    // A soft limit just above what is open now: one descriptor per allocation cannot pass.
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    rlimit tight = old;
    tight.rlim_cur = rlim_t(open_fds() + 64);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    {
        ShmArena a(kChunk, kDedicated);
        std::vector<void*> ps;
        for (int i = 0; i < 5000; ++i) {
            int err = -1;
            void* p = a.alloc(std::size_t(64 + (i % 7) * 600), &err);
            if (!p) {
                ADD_FAILURE() << "allocation " << i << " failed with error " << err;
                break;
            }
            static_cast<unsigned char*>(p)[0] = 1;
            ps.push_back(p);
        }
        const ArenaStats s = a.stats();
        EXPECT_EQ(s.live_allocs, ps.size());
        EXPECT_LE(s.segments, 20u);
        EXPECT_GE(s.reserved_bytes, s.live_bytes);
        for (void* p : ps) EXPECT_EQ(a.free(p), MPI_SUCCESS);
        EXPECT_EQ(a.stats().live_allocs, 0u);
    }
    setrlimit(RLIMIT_NOFILE, &old);
}

TEST(Arena, HugeBlocksHaveTheirOwnSegmentGoneAtFree) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    void* small = must_alloc(a, 100);
    const std::size_t seg0 = a.stats().segments;
    void* big = must_alloc(a, kDedicated + 1);
    EXPECT_EQ(a.stats().segments, seg0 + 1);
    std::memset(big, 7, kDedicated + 1);
    ArenaHit hit{};
    ASSERT_TRUE(a.lookup(big, kDedicated + 1, &hit));
    EXPECT_EQ(hit.seg.id, 0u) << "a dedicated segment is not cached by peers";
    EXPECT_EQ(a.free(big), MPI_SUCCESS);
    EXPECT_EQ(a.stats().segments, seg0);
    EXPECT_EQ(a.free(small), MPI_SUCCESS);
}

TEST(Arena, BadFreesAreRefusedAndFreeNothing) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    auto* p = static_cast<unsigned char*>(must_alloc(a, 256));
    int local = 0;
    EXPECT_EQ(a.free(&local), MPI_ERR_ARG);
    EXPECT_EQ(a.free(p + 64), MPI_ERR_ARG);  // inside, not the start
    EXPECT_EQ(a.stats().live_allocs, 1u);
    EXPECT_EQ(a.free(p), MPI_SUCCESS);
    EXPECT_EQ(a.free(p), MPI_ERR_ARG);  // twice
}

TEST(Arena, ALookedUpRangeMappedByAPeerIsTheSameMemory) {
    if (!shared_memory_here()) GTEST_SKIP() << "pidfd_getfd refused here: the arena is malloc";
    ShmArena a(kChunk, kDedicated);
    void* other = must_alloc(a, 3000);  // so that the block of interest is not at offset 0
    auto* p = static_cast<std::uint64_t*>(must_alloc(a, 8 * 1000));
    ArenaHit hit{};
    ASSERT_TRUE(a.lookup(p + 10, 8 * 990, &hit));
    EXPECT_NE(hit.seg.id, 0u);
    EXPECT_FALSE(a.lookup(p + 10, 8 * 991, &hit)) << "past the allocation's end";
    int local = 0;
    EXPECT_FALSE(a.lookup(&local, sizeof local, &hit));
    ASSERT_TRUE(a.lookup(p + 10, 8 * 990, &hit));
    ArenaPeerMap m1, m2;
    ASSERT_EQ(m1.map_peer(hit.seg), MPI_SUCCESS);
    ASSERT_EQ(m2.map_peer(hit.seg), MPI_SUCCESS);
    EXPECT_EQ(m1.data(), m2.data()) << "a chunk is mapped once per process";
    auto* q = reinterpret_cast<std::uint64_t*>(m1.data() + hit.offset);
    EXPECT_NE(static_cast<void*>(q), static_cast<void*>(p + 10)) << "a second mapping, not the owner's";
    for (int i = 0; i < 990; ++i) q[i] = 1000u + unsigned(i);
    for (int i = 0; i < 990; ++i) ASSERT_EQ(p[10 + i], 1000u + unsigned(i));
    __atomic_fetch_add(&q[5], 1, __ATOMIC_SEQ_CST);
    EXPECT_EQ(__atomic_load_n(&p[15], __ATOMIC_SEQ_CST), 1006u);
    EXPECT_EQ(a.free(p), MPI_SUCCESS);
    EXPECT_FALSE(a.lookup(p + 10, 8, &hit)) << "freed";
    EXPECT_EQ(a.free(other), MPI_SUCCESS);
}
