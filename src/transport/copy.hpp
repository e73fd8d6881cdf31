// copy.hpp — the one routine that moves bytes between this process and a peer's mapping.
//
// Why not plain memcpy: glibc 2.36 on this AMD EPYC VM (FSRM, ERMS) copies sizes between
// its rep_movsb_threshold (~2 KiB) and its stop threshold with `rep movsb`, and `rep movsb`
// reading a page-aligned region of another process's shared mapping ran at ~1.8 GB/s here
// (a 64 KiB get took 31–36 µs against 1.7 µs for Open MPI's osc sm; with
// GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4194304 it took 1.77 µs). copy_bytes()
// leaves small copies to memcpy (its vector moves are the best there), copies the middle
// range with 16-byte vector loads and stores of its own, and hands huge copies back to
// memcpy, whose non-temporal stores spare the cache. See docs/transports.md.
#pragma once

#include <cstddef>
#include <cstring>

namespace fastrma::detail {

// Copy the middle range with vector moves (copy.cpp; built so that the compiler cannot
// turn the loop back into a memcpy call).
void copy_vector(void* dst, const void* src, std::size_t n) noexcept;

inline constexpr std::size_t kCopyVectorMin = 1024;
inline constexpr std::size_t kCopyVectorMax = std::size_t(4) << 20;

inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
    if (n < kCopyVectorMin || n >= kCopyVectorMax) std::memcpy(dst, src, n);
    else copy_vector(dst, src, n);
}

}  // namespace fastrma::detail
