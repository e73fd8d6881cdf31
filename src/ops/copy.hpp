// copy.hpp — the routines that move bytes between user memory and window memory, and the
// page-offset rule for copies made by the kernel or the host MPI (docs/transports.md).
//
// Why not plain memcpy: glibc 2.36 copies sizes between its rep_movsb_threshold (~2 KiB)
// and its stop threshold with `rep movsb`, which is slow at some page-offset distances on
// AMD Zen (below; figures in docs/performance.md).
// copy_bytes() leaves small copies to memcpy (its vector moves are the best there), copies
// the middle range with vector loads and stores of its own (32-byte AVX2 moves where the
// CPU has them, chosen once, else 16-byte ones), and hands huge copies back to memcpy,
// whose non-temporal stores spare the cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace fastrma::detail {

// Reads in this scope are invisible to ThreadSanitizer (no-op in other builds): for data
// whose hand-over only the host MPI orders (a completed receive), see its uses.
struct TsanIgnoreReads {
#if defined(__SANITIZE_THREAD__)
    TsanIgnoreReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
    ~TsanIgnoreReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
#endif
};

// Copy the middle range (n >= 64) with vector moves (copy.cpp; built so that the compiler
// cannot turn the loops back into memcpy calls).
void copy_vector(void* dst, const void* src, std::size_t n) noexcept;

// The loops copy_vector can run on this CPU, the one it runs first (for tests).
struct CopyVariant {
    using Fn = void (*)(void*, const void*, std::size_t) noexcept;
    const char* name;
    Fn fn;
};
std::vector<CopyVariant> copy_vector_variants();

inline constexpr std::size_t kCopyVectorMin = 1024;
inline constexpr std::size_t kCopyVectorMax = std::size_t(4) << 20;

inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
    if (n < kCopyVectorMin || n >= kCopyVectorMax)
        std::memcpy(dst, src, n);
    else
        copy_vector(dst, src, n);
}

// n pieces of len bytes, piece i from src + i * sstride to dst + i * dstride (strides may be
// negative; pieces of one side may overlap only on the source side). Pieces of 1, 2, 4, 8,
// 12, 16, 24 or 32 bytes move in a loop of fixed-size loads and stores; others by copy_bytes
// each. This is the unpack / pack of a vector or uniform indexed type (copy.cpp).
void copy_strided(void* dst, std::int64_t dstride, const void* src, std::int64_t sstride, std::size_t len,
                  std::uint64_t n) noexcept;

// The footprint of n pieces of `piece` bytes from off at stride (negative: downward), as
// copy_strided moves them: its lowest byte in *lo and its extent in *span; false when piece
// or n is 0 or it does not fit in 64 bits.
bool strided_footprint(std::uint64_t off, std::int64_t stride, std::uint64_t piece, std::uint64_t n, std::uint64_t* lo,
                       std::uint64_t* span) noexcept;

// The page-offset distance: on AMD Zen with FSRM, `rep movsb` — glibc's memcpy between
// ~2 KiB and its stop threshold, and the kernel's copy_to_user / copy_from_user, hence
// cross-memory attach and Open MPI's single-copy shared-memory messages — runs 5-20x slower
// when (dst - src) mod 4096 is in [1, 31] (4K aliasing: each load waits for the store just
// issued to the same page offset; figures in docs/performance.md). A page-aligned window
// and a malloc'ed user buffer (page offset 16) sit at distance 16 for a get. Our own copies
// avoid it (copy_bytes: no rep movsb);
// host copies we cannot change go through a buffer placed at the source's page offset.
inline constexpr std::size_t kPageOffsetMin = 4096;  // below: one page, not worth a bounce
inline bool slow_distance(std::uintptr_t dst, std::uintptr_t src) {
    const std::uintptr_t d = (dst - src) & 4095;
    return d != 0 && d < 32;
}

// A buffer of n bytes (not zeroed), optionally starting at a given page offset (so that a
// copy to or from a peer buffer at that offset is at distance 0). Moving it keeps data().
class PageOffsetBuffer {
public:
    PageOffsetBuffer() = default;
    explicit PageOffsetBuffer(std::size_t n) : mem_(new unsigned char[n ? n : 1]), cap_(n) {}
    PageOffsetBuffer(std::size_t n, std::size_t page_offset)
        : mem_(new unsigned char[n + 4096]), cap_(n), placeable_(true) {
        place(page_offset);
    }
    unsigned char* data() { return mem_.get() + shift_; }
    explicit operator bool() const { return mem_ != nullptr; }
    std::size_t capacity() const { return mem_ ? cap_ : 0; }
    // Can it hold n bytes at any page offset? (then place() may move its start)
    bool fits(std::size_t n) const { return placeable_ && cap_ >= n; }
    void place(std::size_t page_offset) {
        shift_ = (page_offset - reinterpret_cast<std::uintptr_t>(mem_.get())) & 4095;
    }

    // A placed buffer of n bytes from spares (kept by the caller, recycled with recycle()),
    // or a new one: fresh memory costs a page fault per page each time (glibc gives a freed
    // block below its mmap threshold back to the kernel when it tops the heap).
    static PageOffsetBuffer take(std::vector<PageOffsetBuffer>& spares, std::size_t n, std::size_t page_offset) {
        for (std::size_t i = 0; i < spares.size(); ++i) {
            if (!spares[i].fits(n)) continue;
            PageOffsetBuffer b = std::move(spares[i]);
            spares[i] = std::move(spares.back());
            spares.pop_back();
            b.place(page_offset);
            return b;
        }
        return PageOffsetBuffer(n, page_offset);
    }
    static void recycle(std::vector<PageOffsetBuffer>& spares, PageOffsetBuffer&& b) {
        constexpr std::size_t kSpares = 8, kSpareMax = std::size_t(1) << 20;
        if (!b.placeable_ || b.cap_ > kSpareMax) return;
        if (spares.size() == kSpares) {  // keep the larger ones
            auto small = std::min_element(spares.begin(), spares.end(),
                                          [](const auto& x, const auto& y) { return x.cap_ < y.cap_; });
            if (small->cap_ >= b.cap_) return;
            *small = std::move(b);
            return;
        }
        spares.push_back(std::move(b));
    }

private:
    std::unique_ptr<unsigned char[]> mem_;
    std::size_t cap_ = 0;
    std::size_t shift_ = 0;
    bool placeable_ = false;  // allocated with a page of slack
};

}  // namespace fastrma::detail
