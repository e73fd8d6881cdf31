// test_ofi.cpp — the ofi transport's pure pieces: how a chunk list is cut into messages
// within the provider's limits (plan_rma), the addresses a registration publishes under
// each mr_mode, and libfabric errors as MPI error classes.
#include <gtest/gtest.h>
#include <mpi.h>
#include <rdma/fi_errno.h>

#include <cstdint>
#include <vector>

#include "transport/ofi.hpp"

using namespace fastrma::detail;

namespace {

struct Msg {
    std::vector<ofi::Piece> pieces;
    std::size_t bytes() const {
        std::size_t b = 0;
        for (const auto& p : pieces) b += p.len;
        return b;
    }
};

std::vector<Msg> plan(const std::vector<Chunk>& chunks, const ofi::Limits& lim) {
    std::vector<Msg> out;
    EXPECT_TRUE(ofi::plan_rma(chunks.data(), chunks.size(), lim, [&](const ofi::Piece* p, std::size_t k) {
        out.push_back(Msg{std::vector<ofi::Piece>(p, p + k)});
        return true;
    }));
    return out;
}

// Every byte of every chunk is in exactly one piece, in order, local and remote in step.
void expect_covers(const std::vector<Chunk>& chunks, const std::vector<Msg>& msgs) {
    std::vector<ofi::Piece> flat;
    for (const auto& m : msgs) flat.insert(flat.end(), m.pieces.begin(), m.pieces.end());
    std::size_t f = 0;
    for (const Chunk& c : chunks) {
        std::size_t done = 0;
        while (done < c.len) {
            ASSERT_LT(f, flat.size());
            const ofi::Piece& p = flat[f++];
            EXPECT_EQ(p.local, static_cast<unsigned char*>(c.local) + done);
            EXPECT_EQ(p.offset, c.offset + done);
            ASSERT_GT(p.len, 0u);
            done += p.len;
        }
        EXPECT_EQ(done, c.len);
    }
    EXPECT_EQ(f, flat.size()) << "pieces beyond the chunks";
}

}  // namespace

TEST(OfiPlan, GroupsChunksUpToTheSmallerIovLimit) {
    std::vector<unsigned char> buf(1000);
    std::vector<Chunk> chunks;
    for (int i = 0; i < 10; ++i) chunks.push_back(Chunk{buf.data() + 100 * i, std::uint64_t(4096 * i), 100});
    const auto msgs = plan(chunks, ofi::Limits{1 << 20, 8, 4});  // rxm: 4 remote iovecs
    ASSERT_EQ(msgs.size(), 3u);
    EXPECT_EQ(msgs[0].pieces.size(), 4u);
    EXPECT_EQ(msgs[1].pieces.size(), 4u);
    EXPECT_EQ(msgs[2].pieces.size(), 2u);
    expect_covers(chunks, msgs);
}

TEST(OfiPlan, SplitsChunksLongerThanAMessageAndNeverExceedsIt) {
    std::vector<unsigned char> buf(10000);
    const std::vector<Chunk> chunks = {
        {buf.data(), 0, 2500}, {buf.data() + 2500, 8192, 10}, {buf.data() + 2510, 20000, 7490}};
    const ofi::Limits lim{1024, 3, 3};
    const auto msgs = plan(chunks, lim);
    for (const auto& m : msgs) {
        EXPECT_LE(m.bytes(), lim.max_msg);
        EXPECT_LE(m.pieces.size(), 3u);
    }
    expect_covers(chunks, msgs);
    std::size_t total = 0;
    for (const auto& m : msgs) total += m.bytes();
    EXPECT_EQ(total, 10000u);
    EXPECT_EQ(msgs.size(), (10000u + 1023) / 1024) << "full messages except the last";
}

TEST(OfiPlan, DropsEmptyChunksAndStopsWhenAPostFails) {
    unsigned char b[64];
    const std::vector<Chunk> chunks = {{b, 0, 0}, {b, 8, 8}, {b + 8, 100, 0}, {b + 16, 200, 8}};
    const auto msgs = plan(chunks, ofi::Limits{1 << 20, 1, 1});
    ASSERT_EQ(msgs.size(), 2u);
    EXPECT_EQ(msgs[0].pieces[0].offset, 8u);
    EXPECT_EQ(msgs[1].pieces[0].offset, 200u);
    int calls = 0;
    EXPECT_FALSE(ofi::plan_rma(chunks.data(), chunks.size(), ofi::Limits{1 << 20, 1, 1},
                               [&](const ofi::Piece*, std::size_t) { return ++calls < 1; }));
    EXPECT_EQ(calls, 1) << "nothing is posted after a failed post";
    const std::vector<Chunk> none = {{b, 0, 0}};
    EXPECT_TRUE(plan(none, ofi::Limits{}).empty());
}

TEST(OfiMrMode, VirtualAddressesOrOffsets) {
    alignas(64) unsigned char region[256];
    // FI_MR_VIRT_ADDR: peers name the owner's virtual address.
    const std::uint64_t virt = ofi::published_base(true, region);
    EXPECT_EQ(virt, reinterpret_cast<std::uint64_t>(region));
    EXPECT_EQ(ofi::remote_address(virt, 40), reinterpret_cast<std::uint64_t>(region + 40));
    // Without it: offsets from the start of the registration.
    const std::uint64_t off = ofi::published_base(false, region);
    EXPECT_EQ(off, 0u);
    EXPECT_EQ(ofi::remote_address(off, 40), 40u);
}

TEST(OfiErrors, MapToMpiClasses) {
    EXPECT_EQ(ofi::error_class(0), MPI_SUCCESS);
    EXPECT_EQ(ofi::error_class(-FI_ENOMEM), MPI_ERR_NO_MEM);
    EXPECT_EQ(ofi::error_class(FI_ENOMEM), MPI_ERR_NO_MEM) << "completion errors are positive";
    EXPECT_EQ(ofi::error_class(-FI_ENODATA), MPI_ERR_UNSUPPORTED_OPERATION);
    EXPECT_EQ(ofi::error_class(-FI_EOPNOTSUPP), MPI_ERR_UNSUPPORTED_OPERATION);
    EXPECT_EQ(ofi::error_class(FI_EKEYREJECTED), MPI_ERR_RMA_RANGE);
    EXPECT_EQ(ofi::error_class(FI_EACCES), MPI_ERR_RMA_RANGE);
    EXPECT_EQ(ofi::error_class(FI_ETRUNC), MPI_ERR_TRUNCATE);
    EXPECT_EQ(ofi::error_class(-FI_EINVAL), MPI_ERR_ARG);
    EXPECT_EQ(ofi::error_class(FI_EIO), MPI_ERR_OTHER);
}

// ---- post_message: what a message does when the provider or the peer's window is full ----

namespace {
// A fake provider: answers -FI_EAGAIN `busy` times, then 0; drive() "completes" one message
// per call while `completing` is set.
struct FakeFabric {
    int busy = 0, posts = 0, drives = 0;
    bool completing = false;
    std::int64_t in_flight = 0, window = 1 << 20;
    ssize_t post() {
        ++posts;
        if (busy > 0) {
            --busy;
            return -FI_EAGAIN;
        }
        ++in_flight;
        return 0;
    }
    bool drive() {
        ++drives;
        if (!completing || in_flight == 0) return false;
        --in_flight;
        return true;
    }
    bool room(bool started) const { return in_flight < (started ? 2 * window : window); }
    ssize_t send(bool started, std::chrono::nanoseconds patience = std::chrono::seconds(5)) {
        return ofi::post_message([this] { return post(); }, [this] { return drive(); },
                                 [this](bool st) { return room(st); }, started, patience);
    }
};
}  // namespace

TEST(OfiPost, AFirstMessageIsRefusedAfterOneMoreTryWhenTheProviderStaysBusy) {
    FakeFabric f;
    f.busy = 100;
    EXPECT_EQ(f.send(false), ofi::kRefused);
    EXPECT_EQ(f.posts, 2) << "tried once more after reading the CQ, no more";
    EXPECT_EQ(f.drives, 1);
    EXPECT_EQ(f.in_flight, 0) << "nothing taken";
}

TEST(OfiPost, AFirstMessageGoesWhenTheSecondTryIsTaken) {
    FakeFabric f;
    f.busy = 1;
    EXPECT_EQ(f.send(false), 0);
    EXPECT_EQ(f.posts, 2);
    EXPECT_EQ(f.in_flight, 1);
}

TEST(OfiPost, ALaterMessageIsRetriedInPlaceUntilTaken) {
    FakeFabric f;
    f.busy = 1000;
    EXPECT_EQ(f.send(true), 0);
    EXPECT_EQ(f.posts, 1001);
    EXPECT_EQ(f.in_flight, 1);
}

TEST(OfiPost, ALaterMessageGivesUpAfterItsPatienceWithNothingCompleting) {
    FakeFabric f;
    f.busy = 1 << 30;
    EXPECT_EQ(f.send(true, std::chrono::milliseconds(20)), ofi::kStuck);
    EXPECT_LT(f.in_flight, 1);
}

TEST(OfiPost, TheWindowRefusesAFirstMessageAndHoldsALaterOneAtTwiceTheBound) {
    FakeFabric f;
    f.window = 2;
    EXPECT_EQ(f.send(false), 0);
    EXPECT_EQ(f.send(false), 0);
    const int posts = f.posts;
    EXPECT_EQ(f.send(false), ofi::kRefused) << "two in flight: the bound";
    EXPECT_EQ(f.posts, posts) << "refused before the provider was asked";
    // An operation already under way may go up to twice the bound ...
    EXPECT_EQ(f.send(true), 0);
    EXPECT_EQ(f.send(true), 0);
    EXPECT_EQ(f.in_flight, 4);
    // ... and beyond waits in place for completions (here: the fake completes while driven).
    f.completing = true;
    EXPECT_EQ(f.send(true), 0);
    EXPECT_LE(f.in_flight, 4);
    EXPECT_GE(f.drives, 1);
    // Without completions it gives up after its patience.
    f.completing = false;
    while (f.in_flight < 4) f.post();
    EXPECT_EQ(f.send(true, std::chrono::milliseconds(20)), ofi::kStuck);
}

TEST(OfiPost, ErrorsOtherThanEagainAreReturnedAsTheyAre) {
    struct Bad {
        int posts = 0;
    } b;
    const ssize_t rc = ofi::post_message(
        [&] {
            ++b.posts;
            return ssize_t(-FI_EINVAL);
        },
        [] { return false; }, [](bool) { return true; }, false, std::chrono::seconds(1));
    EXPECT_EQ(rc, -FI_EINVAL);
    EXPECT_EQ(b.posts, 1);
}

// A message waiting in place for a peer whose process died (the provider answers -FI_EAGAIN
// for ever while it reconnects) is given up once gone() says so, long before its patience.
TEST(OfiPost, AWaitForADeadPeerEndsWhenGoneSaysSo) {
    int asked = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const ssize_t rc =
        ofi::post_message([] { return ssize_t(-FI_EAGAIN); }, [] { return false; }, [](bool) { return true; }, true,
                          std::chrono::seconds(30), [&] { return ++asked == 3; });
    EXPECT_EQ(rc, ofi::kGone);
    EXPECT_EQ(asked, 3);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    // Not dead: its patience decides, as before.
    EXPECT_EQ(ofi::post_message([] { return ssize_t(-FI_EAGAIN); }, [] { return false; }, [](bool) { return true; },
                                true, std::chrono::milliseconds(20), [] { return false; }),
              ofi::kStuck);
}
