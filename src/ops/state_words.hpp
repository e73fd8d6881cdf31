// state_words.hpp — the layout of each process's state segment: the 64-bit words that
// remote peers update with transport atomics (locks, accumulate-lock stripes).
// Each word sits on its own cache line so that contention on one does not slow another.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

constexpr std::size_t kWordsPerLine = 8;
constexpr std::size_t kStateBytes = 4096;  // one page, before the window data

enum StateWord : std::size_t {
    kLockLocal = 0 * kWordsPerLine,   // exclusive bit + shared count (every process)
    kLockGlobal = 1 * kWordsPerLine,  // lock_all holders << 32 | exclusive holders (master)
    kAccStripe0 = 2 * kWordsPerLine,  // accumulate-lock stripes, one line each
};
constexpr int kMaxAccStripes = 32;
static_assert((kAccStripe0 + kMaxAccStripes * kWordsPerLine) * 8 <= kStateBytes);

constexpr std::uint64_t kLocalExclusive = 1ull << 32;  // in kLockLocal
constexpr std::uint64_t kGlobalLockAll = 1ull << 32;   // in kLockGlobal
constexpr std::uint64_t kLow32 = 0xffffffffull;

}  // namespace fastrma::detail
