// test_served_fuzz.cpp — a node peer writing arbitrary requests into a target's served slots
// and bulk buffers, and garbage into the words that say where the bulk area is: the target
// serves them through the node transport (its decoder and its appliers, as a window's). Nothing
// is written outside the window's range the request names, nor into the target's state page
// outside the slot or buffer served; a malformed request is answered with an error (never
// kRefused, which would have the origin apply it) and not applied. Then the origin's side: a
// bulk area is claimed only where this process laid one out, an owner that died is taken over,
// and a target that died holding a request ends the wait.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/copy.hpp"
#include "ops/op.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"
#include "transport/shm/liveness.hpp"
#include "transport/shm/node.hpp"
#include "transport/shm/served.hpp"

using namespace fastrma::detail;

namespace {
constexpr std::size_t kWin = 16384, kGuard = 4096, kArea = 8192;
constexpr std::size_t kPageWords = kStateBytes / 8 + kArea / 8;
constexpr std::size_t kBulkWord0 = kStateBytes / 8;
constexpr std::size_t kHalf = (kArea - 3 * kWordsPerLine * 8) / 2 / 64 * 64;  // a bulk buffer's data bytes
constexpr unsigned char kFill = 0xA5;

// The target: its state page (with a guard after it), its window (guards on both sides) and
// its node transport serving both, with appliers shaped as the window's (they read and write
// elements * element bytes at origin, compare and result).
struct Target {
    std::vector<std::uint64_t> page = std::vector<std::uint64_t>(kPageWords + kGuard / 8, 0x5A5A5A5A5A5A5A5Aull);
    std::vector<unsigned char> mem = std::vector<unsigned char>(kWin + 2 * kGuard, kFill);
    NodeTransport nt{nullptr, [] {}, 2, 0, 1};
    int outside = 0;  // appliers asked for bytes outside the window

    unsigned char* win() { return mem.data() + kGuard; }
    Target() {
        std::fill(page.begin(), page.begin() + kPageWords, 0);
        page[kInfoPid] = std::uint64_t(getpid());
        page[kServedBulkWord] = kBulkWord0;  // (as a window publishes them)
        page[kServedBulkBytes] = kArea;
        nt.layout.base = reinterpret_cast<unsigned char*>(page.data());
        nt.layout.state_bytes = kPageWords * 8;
        nt.set_served_bulk(kBulkWord0, kArea, 1);
        LocalTarget lt;
        lt.base = win();
        lt.size = kWin;
        lt.state = page.data();
        lt.state_words = kPageWords;
        lt.accumulate = [this](int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n, std::uint64_t eb,
                               const void* src, const void* cmp, void* res) {
            const TypeInfo* ti = type_id >= 0 && type_id <= 255 ? type_by_id(std::uint8_t(type_id)) : nullptr;
            if (!ti || eb != ti->extent || n == 0) return int(MPI_ERR_TYPE);
            if (kind != int(RmaKind::cas) && (op_id < 0 || op_id >= int(OpKind::invalid))) return int(MPI_ERR_OP);
            if (toff > kWin || n > (kWin - toff) / eb) {
                ++outside;
                return int(MPI_ERR_RMA_RANGE);
            }
            return apply(toff, n * eb, src, cmp, res);
        };
        lt.accumulate_strided = [this](int, int op_id, int type_id, std::uint64_t toff, std::int64_t stride,
                                       std::uint64_t n, std::uint64_t pieces, std::uint64_t eb, const void* src,
                                       void* res) {
            const TypeInfo* ti = type_id >= 0 && type_id <= 255 ? type_by_id(std::uint8_t(type_id)) : nullptr;
            if (!ti || eb != ti->extent || n == 0) return int(MPI_ERR_TYPE);
            if (op_id < 0 || op_id >= int(OpKind::invalid)) return int(MPI_ERR_OP);
            std::uint64_t lo = 0, span = 0;
            if (!strided_footprint(toff, stride, n * eb, pieces, &lo, &span) || lo > kWin || span > kWin - lo) {
                ++outside;
                return int(MPI_ERR_RMA_RANGE);
            }
            for (std::uint64_t i = 0; i < pieces; ++i) {
                const std::uint64_t at = toff + std::uint64_t(std::int64_t(i) * stride), b = n * eb;
                apply(at, b, src ? static_cast<const unsigned char*>(src) + i * b : nullptr, nullptr,
                      res ? static_cast<unsigned char*>(res) + i * b : nullptr);
            }
            return int(MPI_SUCCESS);
        };
        nt.serve_for(lt);
    }
    // An accumulate's memory traffic: the operand and compare read, the old values out, the
    // operand in.
    int apply(std::uint64_t toff, std::uint64_t bytes, const void* src, const void* cmp, void* res) {
        std::vector<unsigned char> in(bytes), c(bytes);
        if (src) std::memcpy(in.data(), src, bytes);
        if (cmp) std::memcpy(c.data(), cmp, bytes);
        if (res) std::memcpy(res, win() + toff, bytes);
        if (src) std::memcpy(win() + toff, in.data(), bytes);
        return int(MPI_SUCCESS);
    }
    std::uint64_t* slot(std::size_t i) { return page.data() + kServedSlot0 + i * kServedSlotWords; }
    std::uint64_t* bulk_header(int b) { return page.data() + kBulkWord0 + std::size_t(1 + b) * kWordsPerLine; }
};

// The words of the page a serve may change besides the request's own: the flags and the beat.
bool control_word(std::size_t w) { return w == kServedPosted || w == kServedScanning || w == kServedBeat; }

std::vector<int> valid_type_ids() {
    std::vector<int> ids;
    for (int i = 0; i < 256; ++i)
        if (type_by_id(std::uint8_t(i))) ids.push_back(i);
    return ids;
}

template <class T, std::size_t N>
T pick(std::mt19937_64& rng, const T (&v)[N]) {
    return v[rng() % N];
}

// A descriptor word as an origin (or a hostile peer) might write it.
std::uint64_t random_desc(std::mt19937_64& rng, const std::vector<int>& types, std::uint64_t bytes) {
    const std::uint64_t kind = rng() % 8 == 0 ? rng() % 256 : rng() % 7;
    const std::uint64_t op = rng() % 4 == 0 ? rng() % 256 : rng() % 4 == 0 ? 0 : rng() % std::uint64_t(OpKind::invalid);
    const std::uint64_t type = rng() % 4 == 0   ? rng() % 65536
                               : rng() % 4 == 0 ? 0
                                                : std::uint64_t(types[rng() % types.size()]);
    std::uint64_t d = kind | op << 8 | type << 16 | (bytes & 0xffff) << 32 | (rng() & 1) << 48;
    if (rng() % 16 == 0) d |= rng() << 49;
    return d;
}

// Would the decoder take this slot request? (Its rules, written out again.)
bool slot_well_formed(std::uint64_t d) {
    const int kind = int(d & 0xff), op = int((d >> 8) & 0xff), type = int((d >> 16) & 0xffff);
    const std::uint64_t bytes = (d >> 32) & 0xffff;
    const bool has_origin = (d >> 48) & 1;
    if (d >> 49 || kind > int(RmaKind::cas) || type > 255 || bytes == 0) return false;
    const bool transfer = kind == int(RmaKind::put) || kind == int(RmaKind::get);
    const bool atomic = kind == int(RmaKind::fop) || kind == int(RmaKind::cas);
    if (bytes > (atomic ? 8u : served::kMaxBytes)) return false;
    if (transfer && (op || type || has_origin != (kind == int(RmaKind::put)))) return false;
    return kind != int(RmaKind::cas) || has_origin;
}
}  // namespace

TEST(ServedFuzz, HostileSlotsAreAnsweredAndNeverWriteOutsideTheirRange) {
    Target t;
    const std::vector<int> types = valid_type_ids();
    ASSERT_FALSE(types.empty());
    std::mt19937_64 rng(36);
    const std::uint64_t sizes[] = {0, 1, 2, 4, 8, 9, 12, 16, 95, 96, 97, 100, 4096, 16384, 65535};
    int applied = 0, malformed = 0;
    for (int it = 0; it < 20000; ++it) {
        const std::vector<std::uint64_t> page0 = t.page;
        const std::vector<unsigned char> mem0 = t.mem;
        const std::size_t i = rng() % kServedSlots;
        std::uint64_t* s = t.slot(i);
        const std::uint64_t bytes = rng() % 3 == 0 ? rng() % 65536 : pick(rng, sizes);
        const std::uint64_t d = random_desc(rng, types, bytes);
        const std::uint64_t offs[] = {
            0, 8, kWin - 8, kWin, kWin + 8, 1ull << 63, ~0ull, ~0ull - 7, kWin - (bytes & 0xffff)};
        const std::uint64_t toff = rng() % 2 ? rng() % (2 * kWin) : pick(rng, offs);
        for (std::size_t w = served::kData; w < kServedSlotWords; ++w) s[w] = rng();
        s[served::kDesc] = d;
        s[served::kToff] = toff;
        s[served::kAnswer] = 0x77;
        const std::vector<std::uint64_t> posted(s, s + kServedSlotWords);
        __atomic_store_n(s + served::kState, std::uint64_t(served::kPosted), __ATOMIC_RELEASE);
        t.page[kServedPosted] = 1;
        t.nt.serve_requests(false);
        ASSERT_EQ(s[served::kState], std::uint64_t(served::kAnswered)) << "iteration " << it;
        const int answer = int(std::int64_t(s[served::kAnswer]));
        const bool good = slot_well_formed(d);
        if (!good) {
            ++malformed;
            EXPECT_NE(answer, MPI_SUCCESS) << "iteration " << it << ": a malformed request applied";
            EXPECT_NE(answer, served::kRefused) << "iteration " << it << ": a malformed request left to its origin";
        }
        applied += answer == MPI_SUCCESS;
        // The window: changed only inside the request's own range, and only when applied.
        const std::uint64_t len = (d >> 32) & 0xffff;
        for (std::size_t k = 0; k < t.mem.size(); ++k) {
            const std::uint64_t off = std::uint64_t(k) - kGuard;
            const bool in_range = k >= kGuard && off >= toff && off - toff < len && answer == MPI_SUCCESS;
            if (!in_range && t.mem[k] != mem0[k]) {
                ADD_FAILURE() << "iteration " << it << ": window byte " << std::int64_t(off) << " written (desc "
                              << std::hex << d << " toff " << toff << std::dec << ", answer " << answer << ")";
                break;
            }
        }
        // The page: nothing outside this slot but the flags (a get's or atomic's answer stays in
        // the slot's data words).
        for (std::size_t w = 0; w < t.page.size(); ++w) {
            if ((w >= std::size_t(s - t.page.data()) && w < std::size_t(s - t.page.data()) + kServedSlotWords) ||
                control_word(w))
                continue;
            if (t.page[w] != page0[w]) {
                ADD_FAILURE() << "iteration " << it << ": state word " << w << " written (desc " << std::hex << d
                              << std::dec << ")";
                break;
            }
        }
        if (answer != MPI_SUCCESS) {
            for (std::size_t w = served::kData; w < kServedSlotWords; ++w)
                ASSERT_EQ(s[w], posted[w]) << "iteration " << it << ": a refused request's slot data changed";
        }
        ASSERT_EQ(t.outside, 0);
        s[served::kState] = served::kFree;
        if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GT(applied, 100);
    EXPECT_GT(malformed, 1000);
    // Every slot posted at once, garbage throughout: served in one pass, nothing outside.
    for (int it = 0; it < 2000; ++it) {
        for (std::size_t i = 0; i < kServedSlots; ++i) {
            std::uint64_t* s = t.slot(i);
            for (std::size_t w = served::kDesc; w < kServedSlotWords; ++w) s[w] = rng();
            if (rng() % 2) s[served::kDesc] = random_desc(rng, types, rng() % 128);
            if (rng() % 2) s[served::kToff] = rng() % kWin;
            s[served::kState] = served::kPosted;
        }
        t.page[kServedPosted] = 1;
        t.nt.serve_requests(false);
        for (std::size_t i = 0; i < kServedSlots; ++i) {
            ASSERT_EQ(t.slot(i)[served::kState], std::uint64_t(served::kAnswered));
            t.slot(i)[served::kState] = served::kFree;
        }
    }
    for (std::size_t k = 0; k < kGuard; ++k) ASSERT_EQ(t.mem[k], kFill) << "the guard before the window";
    for (std::size_t k = kGuard + kWin; k < t.mem.size(); ++k) ASSERT_EQ(t.mem[k], kFill) << "the guard after it";
    for (std::size_t w = kPageWords; w < t.page.size(); ++w) ASSERT_EQ(t.page[w], 0x5A5A5A5A5A5A5A5Aull);
    EXPECT_EQ(t.outside, 0);
}

TEST(ServedFuzz, HostileBulkPartsAndGeometryAreAnsweredAndNeverWriteOutside) {
    Target t;
    const std::vector<int> types = valid_type_ids();
    std::mt19937_64 rng(3636);
    const std::uint64_t pieces[] = {0, 1, 4, 8, 64, kHalf, kHalf + 1, 1ull << 32, ~0ull, 3};
    const std::uint64_t counts[] = {0, 1, 2, kHalf, kHalf / 4, 1ull << 33, ~0ull, 7};
    int applied = 0, malformed = 0;
    for (int it = 0; it < 20000; ++it) {
        const int b = int(rng() % 2);
        std::uint64_t* h = t.bulk_header(b);
        unsigned char* data =
            reinterpret_cast<unsigned char*>(t.page.data() + kBulkWord0 + 3 * kWordsPerLine) + std::size_t(b) * kHalf;
        const std::uint64_t piece = rng() % 3 == 0 ? rng() % 512 + 1 : pick(rng, pieces);
        const std::uint64_t count = rng() % 3 == 0 ? rng() % 64 + 1 : pick(rng, counts);
        std::uint64_t d = random_desc(rng, types, 0);
        if (rng() % 8 == 0) d |= (rng() & 0xffff) << 32;  // (a bytes field: bulk descriptors have none)
        const std::int64_t strides[] = {std::int64_t(piece),
                                        -std::int64_t(piece),
                                        0,
                                        std::int64_t(1) << 62,
                                        INT64_MIN,
                                        std::int64_t(rng() % 4096) - 2048};
        const std::int64_t stride = pick(rng, strides);
        const std::uint64_t offs[] = {0, 64, kWin - 8, kWin, 1ull << 63, ~0ull, (count - 1) * piece};
        const std::uint64_t toff = rng() % 2 ? rng() % kWin : pick(rng, offs);
        for (std::size_t k = 0; k < 64; ++k) data[rng() % kHalf] = std::uint8_t(rng());
        // The page's own words naming the area: a peer may write them (the target never reads them).
        if (rng() % 4 == 0) {
            const std::uint64_t words[] = {0, 1, kServedBulkWord, kPageWords - 1, 1ull << 40, ~0ull};
            t.page[kServedBulkWord] = pick(rng, words);
            t.page[kServedBulkBytes] = rng() % 2 ? ~0ull : rng();
        }
        const std::vector<std::uint64_t> page0 = t.page;
        const std::vector<unsigned char> mem0 = t.mem;
        h[1] = d, h[2] = toff, h[3] = std::uint64_t(stride), h[4] = piece, h[5] = count, h[6] = 0x77;
        __atomic_store_n(h, std::uint64_t(served::kPosted), __ATOMIC_RELEASE);
        t.page[kServedPosted] = 1;
        t.nt.serve_requests(false);
        ASSERT_EQ(h[0], std::uint64_t(served::kAnswered)) << "iteration " << it;
        const int answer = int(std::int64_t(h[6]));
        const int kind = int(d & 0xff), op = int((d >> 8) & 0xff), type = int((d >> 16) & 0xffff);
        const bool has_origin = (d >> 48) & 1;
        const bool transfer = kind == int(RmaKind::put) || kind == int(RmaKind::get);
        const bool good = (d >> 32) == (has_origin ? 1u << 16 : 0u) && kind <= int(RmaKind::get_acc) && type <= 255 &&
                          piece && count && piece <= kHalf && count <= kHalf / piece &&
                          (!transfer || (!op && !type && has_origin == (kind == int(RmaKind::put))));
        if (!good) {
            ++malformed;
            EXPECT_NE(answer, MPI_SUCCESS) << "iteration " << it << ": a malformed part applied";
            EXPECT_NE(answer, served::kRefused) << "iteration " << it << ": a malformed part left to its origin";
        }
        applied += answer == MPI_SUCCESS;
        // The window: only inside the part's footprint, only when applied.
        std::uint64_t lo = 0, span = 0;
        const bool fp = good && strided_footprint(toff, stride, piece, count, &lo, &span);
        for (std::size_t k = 0; k < t.mem.size(); ++k) {
            const std::uint64_t off = std::uint64_t(k) - kGuard;
            const bool in = k >= kGuard && fp && answer == MPI_SUCCESS && off >= lo && off - lo < span;
            if (!in && t.mem[k] != mem0[k]) {
                ADD_FAILURE() << "iteration " << it << ": window byte " << std::int64_t(off) << " written";
                break;
            }
        }
        // The page: only this buffer's header and data.
        const std::size_t h0 = std::size_t(h - t.page.data());
        const std::size_t d0 = kBulkWord0 + 3 * kWordsPerLine + std::size_t(b) * kHalf / 8;
        for (std::size_t w = 0; w < t.page.size(); ++w) {
            if ((w >= h0 && w < h0 + kWordsPerLine) || (w >= d0 && w < d0 + kHalf / 8) || control_word(w)) continue;
            if (t.page[w] != page0[w]) {
                ADD_FAILURE() << "iteration " << it << ": state word " << w << " written";
                break;
            }
        }
        ASSERT_EQ(t.outside, 0);
        h[0] = served::kFree;
        t.page[kServedBulkWord] = kBulkWord0;
        t.page[kServedBulkBytes] = kArea;
        if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GT(applied, 100);
    EXPECT_GT(malformed, 1000);
    for (std::size_t k = 0; k < kGuard; ++k) ASSERT_EQ(t.mem[k], kFill);
    for (std::size_t k = kGuard + kWin; k < t.mem.size(); ++k) ASSERT_EQ(t.mem[k], kFill);
    for (std::size_t w = kPageWords; w < t.page.size(); ++w) ASSERT_EQ(t.page[w], 0x5A5A5A5A5A5A5A5Aull);
}

namespace {
// A child process that lives until killed, watched as a window watches its node peers.
pid_t watched_child() {
    const pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    watch_pid(pid);
    return pid;
}
void kill_child(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
}
}  // namespace

// The origin takes the bulk area where this process laid it out, whatever the peer's page says;
// a page it laid out nothing for has none.
TEST(ServedFuzz, OriginsClaimOnlyTheAreaTheyLaidOut) {
    Target t;  // (its node transport registered the page's area)
    t.page[kServedBeat] = now_ns();
    t.page[kServedBulkWord] = 1ull << 40;  // garbage where the area is said to be
    t.page[kServedBulkBytes] = ~0ull;
    // Patience 1 s: the beat counts as fresh although this thread may be preempted for
    // longer than kFreshNs (10 us) between writing it and claiming (it was, once, in CI).
    constexpr std::uint64_t kPatient = 1'000'000'000;
    {
        served::BulkChannel ch;
        ASSERT_TRUE(ch.claim(t.page.data(), 0, kPatient));
        EXPECT_EQ(ch.part_bytes(), kHalf);
        EXPECT_EQ(t.page[kBulkWord0], std::uint64_t(getpid())) << "the owner word holds the origin's pid";
    }
    EXPECT_EQ(t.page[kBulkWord0], 0u);
    std::vector<std::uint64_t> other(kPageWords, 0);  // a page with an area it states, never laid out here
    other[kServedBulkWord] = kBulkWord0;
    other[kServedBulkBytes] = kArea;
    other[kServedBeat] = now_ns();
    served::BulkChannel ch;
    EXPECT_FALSE(ch.claim(other.data(), 0, kPatient));
}

// An origin that died holding a bulk area: the next one takes it over (its parts withdrawn).
TEST(ServedFuzz, ABulkAreaHeldByADeadOriginIsTakenOver) {
    Target t;
    const pid_t dead = watched_child();
    t.page[kBulkWord0] = std::uint64_t(dead);
    t.bulk_header(0)[0] = served::kPosted;  // a part it left posted
    t.bulk_header(1)[0] = served::kAnswered;  // and one it never collected
    {
        served::BulkChannel ch;
        t.page[kServedBeat] = now_ns();
        EXPECT_FALSE(ch.claim(t.page.data(), 0, 1'000'000'000)) << "held by a live process";
    }
    kill_child(dead);
    served::BulkChannel ch;
    t.page[kServedBeat] = now_ns();
    ASSERT_TRUE(ch.claim(t.page.data(), 1'000'000'000, 1'000'000'000));
    EXPECT_EQ(t.page[kBulkWord0], std::uint64_t(getpid()));
    EXPECT_EQ(t.bulk_header(0)[0], std::uint64_t(served::kFree));
    EXPECT_EQ(t.bulk_header(1)[0], std::uint64_t(served::kFree));
}

// A target that died holding a request (taken, never answered): the origin's wait ends within
// milliseconds, refused (its own path then finds the process gone).
TEST(ServedFuzz, ATargetThatDiedHoldingARequestEndsTheWait) {
    std::vector<std::uint64_t> page(kPageWords, 0);
    const pid_t target = watched_child();
    page[kInfoPid] = std::uint64_t(target);
    const std::uint64_t one = 1;
    served::Posted p;
    ASSERT_TRUE(served::post(page.data(), served::Request{int(RmaKind::fop), 0, 0, 0, 8, &one, nullptr}, &p));
    std::uint64_t* s = page.data() + kServedSlot0;
    for (std::size_t i = 0; i < kServedSlots && s[served::kState] != served::kPosted; ++i) s += kServedSlotWords;
    ASSERT_EQ(s[served::kState], std::uint64_t(served::kPosted));
    s[served::kState] = served::kTaken;  // the target took it, then died
    kill_child(target);
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t old = 0;
    int rc = -2;
    EXPECT_EQ(served::finish(p, &old, &rc), served::Outcome::refused);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}
