// state_words.hpp — the layout of each process's state segment: the 64-bit words that
// remote peers update with transport atomics (locks, accumulate-lock stripes).
// Each word sits on its own cache line so that contention on one does not slow another.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

constexpr std::size_t kWordsPerLine = 8;
constexpr std::size_t kStateBytes = 4096;  // the fixed words: one page

// After the fixed page come, in this order (word offsets from the segment start):
//   the PSCW post bitmap: bit r flips with each post of rank r to me; it differs from the
//     value my last start with r saw while a post is outstanding (ceil(p / 64) words; at
//     most one outstanding post per pair, so a bit suffices);
//   the lock-waiter bitmap: bit r set = rank r found one of my lock words taken and waits
//     (ceil(p / 64) words); whoever releases a lock word of mine takes the bitmap and rings
//     each waiter's doorbell (shared-memory peers only);
//   dynamic windows only: the region table, kDynHeaderWords + 2 words per region.
// The window data of allocate windows follows the whole state area, page-aligned.
constexpr std::size_t kPostBitmap0 = kStateBytes / 8;
inline std::size_t post_bitmap_words(int nprocs) { return (std::size_t(nprocs) + 63) / 64; }
inline std::size_t lock_waiters_word0(int nprocs) { return kPostBitmap0 + post_bitmap_words(nprocs); }
inline std::size_t dyn_table_word0(int nprocs) { return lock_waiters_word0(nprocs) + post_bitmap_words(nprocs); }
constexpr std::size_t kDynHeaderWords = 2;  // [0] version (seqlock: odd while changing), [1] count

enum StateWord : std::size_t {
    kLockLocal = 0 * kWordsPerLine,  // exclusive bit + shared count (every process)
    kLockGlobal = 1 * kWordsPerLine,  // lock_all holders << 32 | exclusive holders (master; the
    // shared-memory variant keeps the low half 0: lock_protocol.hpp)
    kPscwComplete = 2 * kWordsPerLine,  // completes received (monotone counter)
    kAccStripe0 = 3 * kWordsPerLine,  // accumulate-lock stripes, one line each
};
constexpr int kMaxAccStripes = 32;

// What a process publishes about its part at window creation, read by peers from its state
// page (so no process keeps per-peer arrays: O(1) memory per window in the number of ranks).
enum InfoWord : std::size_t {
    kInfoPid = kAccStripe0 + kMaxAccStripes * kWordsPerLine,
    kInfoBase,  // data address in the owner's address space (cross-memory attach)
    kInfoSize,  // bytes of its part
    kInfoDispUnit,
    kInfoDataOff,  // offset of its data in the window's node segment, or kNoData
    kInfoArena,  // 1: its data is FRMA_Alloc_mem memory, exported below
    kInfoArenaOff,  // offset of the data inside that allocation
    kInfoArenaSeg,  // a SegmentExport, kArenaSegWords words
};
constexpr std::size_t kArenaSegWords = 12;
// My process's doorbell (Engine::bell_export, a SegmentExport like kInfoArenaSeg),
// and a counter a releaser bumps before ringing it: "a lock you wait for here came free".
constexpr std::size_t kInfoBell = kInfoArenaSeg + kArenaSegWords;  // kArenaSegWords words
constexpr std::size_t kLockKick = (kInfoBell + kArenaSegWords + kWordsPerLine - 1) / kWordsPerLine * kWordsPerLine;
// Node windows' fences: arrivals at the barrier, counted in rank 0's word (monotone: fence k
// of a window is complete once it reaches k * p).
constexpr std::size_t kFenceArrive = kLockKick + kWordsPerLine;
constexpr std::uint64_t kNoData = ~0ull;
// Small operations applied by this process for node peers that cannot map its memory
// (transport/shm/served.hpp): a beat (when a thread of mine last served from inside MPI); beside it a
// word an origin sets after it posted, unless the word after it says that my passes read the
// slots themselves (Server::posted); and kServedSlots request slots of two lines each (a
// header, then the data).
constexpr std::size_t kServedBeat = kFenceArrive + kWordsPerLine;
constexpr std::size_t kServedPosted = kServedBeat + 1;
constexpr std::size_t kServedScanning = kServedBeat + 2;
constexpr std::size_t kServedSlot0 = kServedBeat + kWordsPerLine;
constexpr std::size_t kServedSlots = 8;
constexpr std::size_t kServedSlotWords = 2 * kWordsPerLine;
// The served bulk area of create and dynamic windows (transport/shm/served.hpp, large and strided
// transfers): its first word, counted from the start of my state area (0: no area), and its
// bytes in all; it lies after the dynamic region table, page-aligned.
constexpr std::size_t kServedBulkWord = kServedSlot0 + kServedSlots * kServedSlotWords;
constexpr std::size_t kServedBulkBytes = kServedBulkWord + 1;
// CPU-atomic accumulate-family ops this process's threads are applying right now on the
// window's CPU-domain elements (transport/shm/acc_domain.hpp): a plain run of a CPU-domain type waits
// until every node member's count is zero.
constexpr std::size_t kAccReaders = kServedBulkWord + kWordsPerLine;
static_assert(kAccReaders % kWordsPerLine == 0 && (kAccReaders + kWordsPerLine) * 8 <= kStateBytes);

constexpr std::uint64_t kLocalExclusive = 1ull << 32;  // in kLockLocal
constexpr std::uint64_t kGlobalLockAll = 1ull << 32;  // in kLockGlobal
constexpr std::uint64_t kLow32 = 0xffffffffull;

}  // namespace fastrma::detail
