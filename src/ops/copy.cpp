// copy.cpp — copy_vector(): see copy.hpp for why it exists. CMakeLists.txt compiles this
// file with -fno-tree-loop-distribute-patterns (GCC) / -fno-builtin (Clang) so the loop
// below stays a loop; objdump of copy.cpp.o shows no call to memcpy. copy_strided's
// fixed-size moves are __builtin_memcpy of a constant size (inlined under -fno-builtin too).
#include "ops/copy.hpp"

#include <cstdint>

namespace fastrma::detail {

namespace {
// 16 bytes, any alignment: plain SSE2 moves on x86-64 (the baseline), NEON on arm64.
using V16 = unsigned char __attribute__((vector_size(16), aligned(1), may_alias));

// The last 64 bytes first (they may overlap what the loop writes; the ranges of dst and src
// never overlap, so the order does not matter), then 64-byte blocks from the start.
void copy_vector16(void* dst, const void* src, std::size_t n) noexcept {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const unsigned char* const end = s + n;
    const V16 t0 = *reinterpret_cast<const V16*>(end - 64);
    const V16 t1 = *reinterpret_cast<const V16*>(end - 48);
    const V16 t2 = *reinterpret_cast<const V16*>(end - 32);
    const V16 t3 = *reinterpret_cast<const V16*>(end - 16);
    unsigned char* const dend = d + n;
    for (; s + 64 <= end; s += 64, d += 64) {
        const V16 a = *reinterpret_cast<const V16*>(s);
        const V16 b = *reinterpret_cast<const V16*>(s + 16);
        const V16 c = *reinterpret_cast<const V16*>(s + 32);
        const V16 e = *reinterpret_cast<const V16*>(s + 48);
        *reinterpret_cast<V16*>(d) = a;
        *reinterpret_cast<V16*>(d + 16) = b;
        *reinterpret_cast<V16*>(d + 32) = c;
        *reinterpret_cast<V16*>(d + 48) = e;
    }
    *reinterpret_cast<V16*>(dend - 64) = t0;
    *reinterpret_cast<V16*>(dend - 48) = t1;
    *reinterpret_cast<V16*>(dend - 32) = t2;
    *reinterpret_cast<V16*>(dend - 16) = t3;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
using V32 = unsigned char __attribute__((vector_size(32), aligned(1), may_alias));

// The same with 32-byte AVX2 moves: 128-byte blocks, each loaded before the previous one is
// stored (a load then never waits on a store just issued to the same page offset, as when
// dst - src is 1-63 mod 4096), then 32-byte steps, then the last 64 bytes saved before the loop.
__attribute__((target("avx2"))) void copy_vector32(void* dst, const void* src, std::size_t n) noexcept {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const unsigned char* const end = s + n;
    const V32 t0 = *reinterpret_cast<const V32*>(end - 64);
    const V32 t1 = *reinterpret_cast<const V32*>(end - 32);
    unsigned char* const dend = d + n;
    if (s + 128 <= end) {
        V32 a = *reinterpret_cast<const V32*>(s), b = *reinterpret_cast<const V32*>(s + 32);
        V32 c = *reinterpret_cast<const V32*>(s + 64), e = *reinterpret_cast<const V32*>(s + 96);
        for (s += 128; s + 128 <= end; s += 128, d += 128) {
            const V32 a2 = *reinterpret_cast<const V32*>(s), b2 = *reinterpret_cast<const V32*>(s + 32);
            const V32 c2 = *reinterpret_cast<const V32*>(s + 64), e2 = *reinterpret_cast<const V32*>(s + 96);
            *reinterpret_cast<V32*>(d) = a;
            *reinterpret_cast<V32*>(d + 32) = b;
            *reinterpret_cast<V32*>(d + 64) = c;
            *reinterpret_cast<V32*>(d + 96) = e;
            a = a2, b = b2, c = c2, e = e2;
        }
        *reinterpret_cast<V32*>(d) = a;
        *reinterpret_cast<V32*>(d + 32) = b;
        *reinterpret_cast<V32*>(d + 64) = c;
        *reinterpret_cast<V32*>(d + 96) = e;
        d += 128;
    }
    for (; s + 32 <= end; s += 32, d += 32) *reinterpret_cast<V32*>(d) = *reinterpret_cast<const V32*>(s);
    *reinterpret_cast<V32*>(dend - 64) = t0;
    *reinterpret_cast<V32*>(dend - 32) = t1;
}

bool has_avx2() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#endif
}  // namespace

std::vector<CopyVariant> copy_vector_variants() {
    std::vector<CopyVariant> v;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (has_avx2()) v.push_back({"avx2", copy_vector32});
#endif
    v.push_back({"16-byte", copy_vector16});
    return v;
}

void copy_vector(void* dst, const void* src, std::size_t n) noexcept {  // n >= 64
    static const CopyVariant::Fn chosen = copy_vector_variants().front().fn;
    chosen(dst, src, n);
}

namespace {
template <std::size_t L>
void strided_fixed(unsigned char* d, std::int64_t ds, const unsigned char* s, std::int64_t ss, std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i, d += ds, s += ss) __builtin_memcpy(d, s, L);  // one move or two
}
}  // namespace

void copy_strided(void* dst, std::int64_t dstride, const void* src, std::int64_t sstride, std::size_t len,
                  std::uint64_t n) noexcept {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    switch (len) {
    case 1:
        return strided_fixed<1>(d, dstride, s, sstride, n);
    case 2:
        return strided_fixed<2>(d, dstride, s, sstride, n);
    case 4:
        return strided_fixed<4>(d, dstride, s, sstride, n);
    case 8:
        return strided_fixed<8>(d, dstride, s, sstride, n);
    case 12:
        return strided_fixed<12>(d, dstride, s, sstride, n);
    case 16:
        return strided_fixed<16>(d, dstride, s, sstride, n);
    case 24:
        return strided_fixed<24>(d, dstride, s, sstride, n);
    case 32:
        return strided_fixed<32>(d, dstride, s, sstride, n);
    default:
        for (std::uint64_t i = 0; i < n; ++i, d += dstride, s += sstride) copy_bytes(d, s, len);
    }
}

bool strided_footprint(std::uint64_t off, std::int64_t stride, std::uint64_t piece, std::uint64_t n, std::uint64_t* lo,
                       std::uint64_t* span) noexcept {
    if (piece == 0 || n == 0) return false;
    const std::uint64_t step = stride < 0 ? 0 - std::uint64_t(stride) : std::uint64_t(stride);
    if (n > 1 && step > (~0ull - piece) / (n - 1)) return false;
    const std::uint64_t reach = (n - 1) * step;  // first byte of the first piece to the last's
    if (stride < 0 && off < reach) return false;
    *lo = stride < 0 ? off - reach : off;
    *span = reach + piece;
    return true;
}

}  // namespace fastrma::detail
