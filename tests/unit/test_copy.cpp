// test_copy.cpp — copy_bytes(): every size around the memcpy / vector-loop / memcpy
// boundaries, every source and destination misalignment within 16 bytes, lands exactly the
// source bytes and touches nothing outside the destination range.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/copy.hpp"

using namespace fastrma::detail;

namespace {

void check_copy(std::size_t n, std::size_t src_off, std::size_t dst_off) {
    constexpr std::size_t kGuard = 80;
    std::vector<unsigned char> src(n + src_off + kGuard), dst(n + dst_off + 2 * kGuard);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    for (auto& b : dst) b = 0xA5;
    copy_bytes(dst.data() + kGuard + dst_off, src.data() + src_off, n);
    std::vector<unsigned char> want(dst.size(), 0xA5);
    std::memcpy(want.data() + kGuard + dst_off, src.data() + src_off, n);
    if (dst == want) return;
    for (std::size_t i = 0; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], want[i]) << "n=" << n << " src_off=" << src_off << " dst_off=" << dst_off << " byte " << i
                                   << (i < kGuard + dst_off || i >= kGuard + dst_off + n ? " (outside the destination)"
                                                                                         : "");
}

TEST(Copy, EverySizeAroundTheVectorRangeAndEveryMisalignment) {
    std::vector<std::size_t> sizes;
    for (std::size_t n = 0; n <= 200; ++n) sizes.push_back(n);
    for (std::size_t base : {kCopyVectorMin, std::size_t(4096), std::size_t(65536) + 3, kCopyVectorMax})
        for (std::size_t d : {0, 1, 2, 15, 16, 17, 48, 63, 64, 65, 127, 128, 129}) {
            sizes.push_back(base + d);
            if (base > d) sizes.push_back(base - d);
        }
    for (std::size_t n : sizes)
        for (std::size_t so : {0, 1, 7, 15})
            for (std::size_t dof : {0, 3, 8, 13}) {
                if (n > 8192 && (so + dof) % 7 != 0) continue;  // large: a sample
                check_copy(n, so, dof);
                if (::testing::Test::HasFatalFailure()) return;
            }
}

TEST(Copy, EveryVectorLoopDirectlyFrom64Bytes) {
    for (const CopyVariant& v : copy_vector_variants())
        for (std::size_t n = 64; n <= 1100; ++n) {
            std::vector<unsigned char> src(n + 3), dst(n + 5, 0);
            for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i ^ 0x5C);
            v.fn(dst.data() + 2, src.data() + 3, n);
            ASSERT_EQ(dst[0], 0) << v.name;
            ASSERT_EQ(dst[1], 0) << v.name;
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i + 2], src[i + 3]) << v.name << " " << n << " " << i;
            ASSERT_EQ(dst[n + 2], 0) << v.name;
        }
}

// copy_strided: every fixed-size case and a generic one, positive and negative strides on
// either side, gaps between pieces and the margins around them untouched.
TEST(Copy, StridedLandsEveryPieceAndNothingElse) {
    constexpr std::int64_t kGuard = 64;
    for (std::size_t len : {1, 2, 3, 4, 8, 12, 16, 24, 32, 40}) {
        for (std::int64_t sgap : {0, 4, 9}) {
            for (std::int64_t dgap : {0, 4, 9}) {
                for (int sdir : {1, -1}) {
                    for (int ddir : {1, -1}) {
                        const std::uint64_t n = 37;
                        const std::int64_t ss = sdir * (std::int64_t(len) + sgap);
                        const std::int64_t ds = ddir * (std::int64_t(len) + dgap);
                        const std::int64_t sspan = std::int64_t(n) * (std::int64_t(len) + sgap);
                        const std::int64_t dspan = std::int64_t(n) * (std::int64_t(len) + dgap);
                        std::vector<unsigned char> src(std::size_t(sspan + 2 * kGuard)),
                            dst(std::size_t(dspan + 2 * kGuard), 0xA5);
                        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
                        // The first piece sits at the low end for an upward stride, the high end otherwise.
                        const std::int64_t s0 = kGuard + (sdir > 0 ? 0 : sspan - std::int64_t(len) - sgap);
                        const std::int64_t d0 = kGuard + (ddir > 0 ? 0 : dspan - std::int64_t(len) - dgap);
                        std::vector<unsigned char> want = dst;
                        for (std::uint64_t k = 0; k < n; ++k)
                            std::memcpy(want.data() + d0 + std::int64_t(k) * ds, src.data() + s0 + std::int64_t(k) * ss,
                                        len);
                        copy_strided(dst.data() + d0, ds, src.data() + s0, ss, len, n);
                        ASSERT_EQ(dst, want) << "len " << len << " sgap " << sgap << " dgap " << dgap << " sdir "
                                             << sdir << " ddir " << ddir;
                    }
                }
            }
        }
    }
}

}  // namespace
