// test_epochs.cpp — the epoch machines (src/epochs) against an in-process fake transport,
// ranks as threads: no MPI, no shared-memory segment, no window.
//
// FakeTransport delays and reorders: every put, get and one-way 8-byte atomic (a PSCW post
// or complete, a lock release) waits in its origin's pending list for a random delay
// (seeded per rank and test: the draws repeat, the thread interleaving does not) and a
// delivery thread applies due items in random order; a fetching atomic waits its delay and
// is applied by the caller. flush(peer) returns once everything the origin posted to peer
// was applied. So a protocol that signals before its data is complete, or that relies on an
// order the transport does not promise, loses data here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/config.hpp"
#include "engine/bootstrap_threads.hpp"
#include "engine/engine.hpp"
#include "epochs/epoch_state.hpp"
#include "epochs/epochs.hpp"
#include "ops/state_words.hpp"

using namespace fastrma::detail;

namespace {

constexpr std::size_t kWords = 8192;  // each rank's state words (locks, PSCW, bitmaps)
constexpr std::size_t kData = 4096;  // each rank's window data

// The memory of every rank, and the delivery of what is in flight between them.
class FakeWorld {
public:
    FakeWorld(int n, unsigned seed, unsigned max_delay_us)
        : n_(n),
          max_delay_us_(max_delay_us),
          words_(std::size_t(n) * kWords, 0),
          data_(std::size_t(n) * kData, 0),
          rng_(seed),
          pending_(std::size_t(n)) {
        deliverer_ = std::thread([this] { deliver_loop(); });
    }
    ~FakeWorld() {
        {
            std::lock_guard lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        deliverer_.join();
    }
    int size() const { return n_; }
    std::uint64_t* words(int r) { return &words_[std::size_t(r) * kWords]; }
    unsigned char* data(int r) { return &data_[std::size_t(r) * kData]; }
    unsigned max_delay_us() const { return max_delay_us_; }
    // At most this many items from one origin to one target in flight (0: no bound); a
    // post beyond it is refused (Post::retry), as a full transport does.
    std::size_t capacity = 0;
    bool full(int origin, int target) {
        if (!capacity) return false;
        std::lock_guard lk(mu_);
        std::size_t k = 0;
        for (const Item& it : pending_[std::size_t(origin)]) k += it.target == target;
        return k >= capacity;
    }

    // An item posted by origin to target, applied when due.
    void post(int origin, int target, std::function<void()> apply, unsigned delay_us) {
        std::lock_guard lk(mu_);
        pending_[std::size_t(origin)].push_back(
            {target, std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us), std::move(apply)});
        ++in_flight_;
        cv_.notify_all();
    }
    // Waits until nothing origin posted to target (or to anyone, target < 0) is pending.
    void drain(int origin, int target) {
        std::unique_lock lk(mu_);
        done_cv_.wait(lk, [&] {
            for (const Item& it : pending_[std::size_t(origin)])
                if (target < 0 || it.target == target) return false;
            return true;
        });
    }

private:
    struct Item {
        int target;
        std::chrono::steady_clock::time_point due;
        std::function<void()> apply;
    };
    void deliver_loop() {
        std::unique_lock lk(mu_);
        while (!stop_ || in_flight_) {
            // Every due item, from any origin, in random order.
            std::vector<std::pair<int, std::size_t>> due;
            const auto now = std::chrono::steady_clock::now();
            for (int o = 0; o < n_; ++o)
                for (std::size_t i = 0; i < pending_[std::size_t(o)].size(); ++i)
                    if (pending_[std::size_t(o)][i].due <= now) due.emplace_back(o, i);
            if (due.empty()) {
                cv_.wait_for(lk, std::chrono::microseconds(20));
                continue;
            }
            const auto [o, i] = due[std::uniform_int_distribution<std::size_t>(0, due.size() - 1)(rng_)];
            Item it = std::move(pending_[std::size_t(o)][i]);
            pending_[std::size_t(o)].erase(pending_[std::size_t(o)].begin() + std::ptrdiff_t(i));
            it.apply();
            --in_flight_;
            done_cv_.notify_all();
        }
    }

    const int n_;
    const unsigned max_delay_us_;
    std::vector<std::uint64_t> words_;
    std::vector<unsigned char> data_;
    std::mt19937 rng_;  // (mu_)
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::vector<std::deque<Item>> pending_;
    std::size_t in_flight_ = 0;
    bool stop_ = false;
    std::thread deliverer_;
};

// One rank's view of the world: the Transport the epochs call.
class FakeTransport final : public Transport {
public:
    FakeTransport(FakeWorld& w, int me, unsigned seed) : w_(w), me_(me), rng_(seed * 7919u + unsigned(me)) {}
    const char* name() const override { return "fake"; }
    Caps caps(const PeerRegion&) const override { return {false, false, false}; }
    Post put(const PeerRegion& p, const Chunk* c, std::size_t n) override {
        if (w_.full(me_, p.rank)) return refuse();
        for (std::size_t i = 0; i < n; ++i) {
            std::vector<unsigned char> bytes(static_cast<const unsigned char*>(c[i].local),
                                             static_cast<const unsigned char*>(c[i].local) + c[i].len);
            unsigned char* dst = w_.data(p.rank) + c[i].offset;
            w_.post(
                me_, p.rank, [dst, bytes] { std::memcpy(dst, bytes.data(), bytes.size()); }, delay());
        }
        return Post::posted;
    }
    Post get(const PeerRegion& p, const Chunk* c, std::size_t n) override {
        if (w_.full(me_, p.rank)) return refuse();
        for (std::size_t i = 0; i < n; ++i) {
            unsigned char* src = w_.data(p.rank) + c[i].offset;
            auto* dst = static_cast<unsigned char*>(c[i].local);
            const std::size_t len = c[i].len;
            w_.post(
                me_, p.rank, [dst, src, len] { std::memcpy(dst, src, len); }, delay());
        }
        return Post::posted;
    }
    std::uint64_t atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override {
        pause(delay());
        return apply_atomic8(w_.words(p.rank) + word, op, operand, compare);
    }
    void notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override {
        std::uint64_t* at = w_.words(p.rank) + word;
        w_.post(
            me_, p.rank, [at, op, operand] { apply_atomic8(at, op, operand, 0); }, delay());
    }
    void flush(const PeerRegion& p) override { w_.drain(me_, p.rank); }
    void flush_all() override { w_.drain(me_, -1); }
    std::atomic<int> refused{0};

private:
    Post refuse() {
        ++refused;
        return Post::retry;
    }
    unsigned delay() {
        std::lock_guard lk(mu_);
        return std::uniform_int_distribution<unsigned>(0, w_.max_delay_us())(rng_);
    }
    static void pause(unsigned us) {
        if (us < 5)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    FakeWorld& w_;
    const int me_;
    std::mutex mu_;
    std::mt19937 rng_;
};

// One rank's window, as the epochs see it. issue() takes the Op's origin, offset and bytes
// as one contiguous put or get (the ops layer is not under test here).
class FakeHost final : public EpochHost {
public:
    FakeHost(FakeWorld& w, int me, unsigned seed, std::shared_ptr<ThreadGroup> g)
        : w_(w), me_(me), tp_(w, me, seed), bs_(std::move(g), me) {}
    int host_rank() const override { return me_; }
    int host_size() const override { return w_.size(); }
    Transport& tp(int) const override { return tp_; }
    PeerRegion peer(int r) const override {
        PeerRegion p;
        p.rank = r;
        p.size = kData;
        return p;
    }
    std::uint64_t* my_word(std::size_t w) const override { return w_.words(me_) + w; }
    Transport& group_tp() const override { return tp_; }
    Bootstrap& group() override { return bs_; }
    Transport* serving_tp() const override { return nullptr; }
    int issue(int r, const Op& op) override {
        const Chunk c{const_cast<void*>(op.origin ? op.origin : op.result), op.offset, std::size_t(op.bytes)};
        const Post p = op.kind == RmaKind::get ? tp_.get(peer(r), &c, 1) : tp_.put(peer(r), &c, 1);
        if (p == Post::retry) return kIssueRetry;
        ++issued;
        {
            std::lock_guard lk(log_mu);
            issued_offsets[std::size_t(r)].push_back(op.offset);
        }
        return accepted(p) ? MPI_SUCCESS : MPI_ERR_OTHER;
    }
    int track_request(int, Completion* done) override {
        done->signal(MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    bool completes_later(const Completion&) const override { return false; }
    void flush_every_target() override { tp_.flush_all(); }
    int completion_error(const char*, int, int) override { return MPI_SUCCESS; }
    void register_lock_wait(int) override {}
    void ring_lock_waiters(int) override {}

    std::atomic<int> issued{0};
    std::mutex log_mu;
    std::vector<std::vector<std::uint64_t>> issued_offsets = std::vector<std::vector<std::uint64_t>>(64);
    int refused() const { return tp_.refused.load(); }

private:
    FakeWorld& w_;
    const int me_;
    mutable FakeTransport tp_;
    ThreadBootstrap bs_;
};

// Runs fn(rank, epochs, host, world) on n threads over one FakeWorld, each with its own
// Engine (no progress thread: the epochs' waits drive progress themselves); then at_end
// (world) once every rank is done, before the world goes.
void run_ranks(int n, unsigned seed, unsigned max_delay_us,
               const std::function<void(int, Epochs&, FakeHost&, FakeWorld&)>& fn,
               const std::function<void(FakeWorld&)>& at_end = {}, std::size_t capacity = 0) {
    FakeWorld world(n, seed, max_delay_us);
    world.capacity = capacity;
    auto group = std::make_shared<ThreadGroup>(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
            Config cfg;
            cfg.progress_thread = false;
            Engine eng(cfg, r, n);
            FakeHost host(world, r, seed, group);
            Epochs epochs(host, eng.progress(), eng.config(), &eng.op_pool(), &eng.target_pool());
            fn(r, epochs, host, world);
            group->barrier();  // nobody's world goes before every rank is done with it
        });
    for (auto& t : ts) t.join();
    if (at_end) at_end(world);
}

// An Op as FakeHost::issue reads it: kind, the origin (put) or result (get) buffer, the
// target offset and the bytes.
Op contiguous_op(RmaKind kind, void* buffer, std::uint64_t offset, std::uint64_t bytes) {
    Op op;
    op.kind = kind;
    (kind == RmaKind::get ? op.result : const_cast<void*&>(op.origin)) = buffer;
    op.offset = offset;
    op.bytes = bytes;
    return op;
}
Op put_op(const void* origin, std::uint64_t offset, std::uint64_t bytes) {
    return contiguous_op(RmaKind::put, const_cast<void*>(origin), offset, bytes);
}
Op get_op(void* result, std::uint64_t offset, std::uint64_t bytes) {
    return contiguous_op(RmaKind::get, result, offset, bytes);
}

std::int64_t load64(FakeWorld& w, int rank, std::size_t slot) {
    std::int64_t v;
    std::memcpy(&v, w.data(rank) + 8 * slot, 8);
    return v;
}

class EpochsFake : public ::testing::TestWithParam<unsigned> {};

// Exclusive locks from every rank on one target: a read-modify-write of a counter (get,
// flush, put) under the lock loses no update, whatever the delays.
TEST_P(EpochsFake, ExclusiveLocksSerializeReadModifyWrite) {
    const int n = 4, iters = 25;
    std::int64_t total = -1;
    run_ranks(
        n, GetParam(), 40,
        [&](int, Epochs& e, FakeHost&, FakeWorld&) {
            for (int i = 0; i < iters; ++i) {
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_EXCLUSIVE, 1, 0));
                std::int64_t v = -1;
                ASSERT_EQ(MPI_SUCCESS, e.submit("get", 1, get_op(&v, 0, 8), nullptr));
                ASSERT_EQ(MPI_SUCCESS, e.flush(1, false));
                ++v;
                ASSERT_EQ(MPI_SUCCESS, e.submit("put", 1, put_op(&v, 0, 8), nullptr));
                ASSERT_EQ(MPI_SUCCESS, e.unlock(1));
            }
        },
        [&](FakeWorld& w) { total = load64(w, 1, 0); });
    EXPECT_EQ(total, std::int64_t(n) * iters);
}

// Locks on mapped lock words (Epochs::map_states: a granted lock is a word of held_, no
// Target) whose ops the transport refuses (one item in flight per link): the refused op
// turns the direct lock into a granted Target (Epochs::materialize) and queues there; the
// flush and the unlock issue and complete the queue. Each rank locks its right neighbour
// (nobody contends, so every lock is granted at once and only a refusal makes a queue);
// each epoch: three puts of its own values, then a read-modify-write of a counter. Nothing
// lost, the last puts landed, and refused ops were queued.
TEST_P(EpochsFake, DirectLocksQueueOnATargetWhenTheTransportRefuses) {
    const int n = 3, iters = 20;
    std::vector<std::int64_t> total(n, -1), last(3 * n, -1);
    std::atomic<int> queued_seen{0}, refused{0};
    run_ranks(
        n, GetParam(), 60,
        [&](int r, Epochs& e, FakeHost& host, FakeWorld& w) {
            NodeTransport node(
                nullptr, [] {}, n, 0, 16);  // its layout: the fake world's words
            node.layout.base = reinterpret_cast<unsigned char*>(w.words(0));
            node.layout.state_bytes = kWords * 8;
            e.map_states(&node, false);
            const int t = (r + 1) % n;
            for (int i = 0; i < iters; ++i) {
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_EXCLUSIVE, t, 0));
                std::int64_t vals[3];
                for (int k = 0; k < 3; ++k) {
                    vals[k] = 1000 * r + 10 * i + k;
                    ASSERT_EQ(MPI_SUCCESS, e.submit("put", t, put_op(&vals[k], 8 + 8 * std::uint64_t(k), 8), nullptr));
                }
                if (e.queued_ops() > 0) ++queued_seen;
                std::int64_t v = -1;
                ASSERT_EQ(MPI_SUCCESS, e.submit("get", t, get_op(&v, 0, 8), nullptr));
                ASSERT_EQ(MPI_SUCCESS, e.flush(t, false));
                ++v;
                ASSERT_EQ(MPI_SUCCESS, e.submit("put", t, put_op(&v, 0, 8), nullptr));
                ASSERT_EQ(MPI_SUCCESS, e.unlock(t));
                EXPECT_EQ(e.queued_ops(), 0u);
            }
            refused += host.refused();
        },
        [&](FakeWorld& w) {
            for (int r = 0; r < n; ++r) {
                total[std::size_t(r)] = load64(w, r, 0);
                for (int k = 0; k < 3; ++k) last[std::size_t(3 * r + k)] = load64(w, r, 1 + std::size_t(k));
            }
        },
        1);
    for (int r = 0; r < n; ++r) {
        const int origin = (r + n - 1) % n;
        EXPECT_EQ(total[std::size_t(r)], iters) << "rank " << r << "'s counter";
        for (int k = 0; k < 3; ++k)
            EXPECT_EQ(last[std::size_t(3 * r + k)], 1000 * origin + 10 * (iters - 1) + k)
                << "rank " << r << " put " << k;
    }
    EXPECT_GT(refused.load(), 0);
    EXPECT_GT(queued_seen.load(), 0) << "no refused op queued on a Target made from a direct lock";
}

// A lock that is not granted yet returns (LOCK_CALLED); the ops posted under it queue on
// their Target and go once the holder releases; the unlock completes them.
TEST_P(EpochsFake, OpsQueueBehindAnUngrantedLockAndLandAfterTheHoldersWrites) {
    std::atomic<int> stage{0};
    std::int64_t final0 = -1, final1 = -1;
    run_ranks(
        3, GetParam(), 30,
        [&](int r, Epochs& e, FakeHost& host, FakeWorld&) {
            if (r == 1) {  // the holder
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_EXCLUSIVE, 0, 0));
                stage.store(1);
                while (stage.load() < 2) std::this_thread::yield();
                std::int64_t a = 11, b = 12;
                ASSERT_EQ(MPI_SUCCESS, e.submit("put", 0, put_op(&a, 0, 8), nullptr));
                ASSERT_EQ(MPI_SUCCESS, e.submit("put", 0, put_op(&b, 8, 8), nullptr));
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                ASSERT_EQ(MPI_SUCCESS, e.unlock(0));
            } else if (r == 2) {  // the waiter
                while (stage.load() < 1) std::this_thread::yield();
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_EXCLUSIVE, 0, 0));  // not granted: returns
                EXPECT_EQ(e.mode(), AccessMode::per_target);
                std::int64_t c = 21;
                ASSERT_EQ(MPI_SUCCESS, e.submit("put", 0, put_op(&c, 8, 8), nullptr));
                EXPECT_EQ(e.queued_ops(), 1u) << "the put went before the lock was granted";
                EXPECT_EQ(host.issued.load(), 0);
                stage.store(2);
                ASSERT_EQ(MPI_SUCCESS, e.unlock(0));  // waits for the grant, issues, completes
                EXPECT_EQ(e.queued_ops(), 0u);
                EXPECT_EQ(host.issued.load(), 1);
                EXPECT_EQ(e.mode(), AccessMode::none);
            }
        },
        [&](FakeWorld& w) {
            final0 = load64(w, 0, 0);
            final1 = load64(w, 0, 1);
        });
    EXPECT_EQ(final0, 11);
    EXPECT_EQ(final1, 21) << "the queued put must land after the holder's put of 12";
}

// Shared locks coexist; an exclusive lock waits for every shared holder; lock_all waits
// for the exclusive holder. Checked with a count of holders kept beside the protocol.
TEST_P(EpochsFake, SharedExclusiveAndLockAllExcludeAsMpiSays) {
    const int n = 4, iters = 20;
    std::atomic<int> shared_in{0}, excl_in{0}, all_in{0}, violations{0};
    run_ranks(n, GetParam(), 25, [&](int r, Epochs& e, FakeHost&, FakeWorld&) {
        for (int i = 0; i < iters; ++i) {
            const int kind = (r + i) % 3;
            if (kind == 0) {
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_SHARED, 2, 0));
                ASSERT_EQ(MPI_SUCCESS, e.flush(2, false));  // the lock is ours once a flush returns
                shared_in.fetch_add(1);
                if (excl_in.load()) violations.fetch_add(1);
                std::this_thread::sleep_for(std::chrono::microseconds(50));
                shared_in.fetch_sub(1);
                ASSERT_EQ(MPI_SUCCESS, e.unlock(2));
            } else if (kind == 1) {
                ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_EXCLUSIVE, 2, 0));
                ASSERT_EQ(MPI_SUCCESS, e.flush(2, false));
                if (excl_in.fetch_add(1) != 0 || shared_in.load() || all_in.load()) violations.fetch_add(1);
                std::this_thread::sleep_for(std::chrono::microseconds(50));
                excl_in.fetch_sub(1);
                ASSERT_EQ(MPI_SUCCESS, e.unlock(2));
            } else {
                ASSERT_EQ(MPI_SUCCESS, e.lock_all(0));
                ASSERT_EQ(MPI_SUCCESS, e.flush_all(false));  // completes the acquisition
                all_in.fetch_add(1);
                if (excl_in.load()) violations.fetch_add(1);
                std::this_thread::sleep_for(std::chrono::microseconds(50));
                all_in.fetch_sub(1);
                ASSERT_EQ(MPI_SUCCESS, e.unlock_all());
            }
        }
    });
    EXPECT_EQ(violations.load(), 0);
}

// PSCW epochs back to back: each origin's puts of epoch k are at the target when its wait
// returns, never a value of another epoch; posts for epoch k+1 that arrive early stay for
// it. The complete's signal is a one-way atomic that the fake may deliver before the puts
// unless the protocol completes them first.
TEST_P(EpochsFake, PscwEpochsDeliverEveryPutBeforeTheWaitReturns) {
    const int n = 4, epochs = 12;
    std::atomic<int> bad{0};
    run_ranks(n, GetParam(), 40, [&](int r, Epochs& e, FakeHost&, FakeWorld& w) {
        std::vector<int> origins, target{0};
        for (int o = 1; o < n; ++o) origins.push_back(o);
        for (int k = 1; k <= epochs; ++k) {
            if (r == 0) {
                ASSERT_EQ(MPI_SUCCESS, e.post(origins, 0));
                ASSERT_EQ(MPI_SUCCESS, e.wait());
                for (int o = 1; o < n; ++o)
                    for (int j = 0; j < 4; ++j)
                        if (load64(w, 0, std::size_t(o) * 4 + std::size_t(j)) != k * 100 + o * 10 + j) bad.fetch_add(1);
            } else {
                ASSERT_EQ(MPI_SUCCESS, e.start(target, 0));
                std::int64_t v[4];
                for (int j = 0; j < 4; ++j) {
                    v[j] = k * 100 + r * 10 + j;
                    ASSERT_EQ(
                        MPI_SUCCESS,
                        e.submit("put", 0, put_op(&v[j], (std::uint64_t(r) * 4 + std::uint64_t(j)) * 8, 8), nullptr));
                }
                ASSERT_EQ(MPI_SUCCESS, e.complete());  // v may go once complete returns
                std::memset(v, 0, sizeof v);
            }
        }
    });
    EXPECT_EQ(bad.load(), 0);
}

// Fence epochs: every rank puts to every other; after the fence each sees every value of
// the epoch; a get in the next epoch reads what the fence completed.
TEST_P(EpochsFake, FenceCompletesEveryRanksOpsOfTheEpoch) {
    const int n = 4, epochs = 8;
    std::atomic<int> bad{0};
    run_ranks(n, GetParam(), 40, [&](int r, Epochs& e, FakeHost&, FakeWorld& w) {
        ASSERT_EQ(MPI_SUCCESS, e.fence(MPI_MODE_NOPRECEDE));
        for (int k = 1; k <= epochs; ++k) {
            std::vector<std::int64_t> v(static_cast<std::size_t>(n));
            for (int t = 0; t < n; ++t) {
                v[std::size_t(t)] = k * 1000 + r * 10 + t;
                ASSERT_EQ(MPI_SUCCESS,
                          e.submit("put", t, put_op(&v[std::size_t(t)], std::uint64_t(r) * 8, 8), nullptr));
            }
            ASSERT_EQ(MPI_SUCCESS, e.fence(0));
            for (int o = 0; o < n; ++o)
                if (load64(w, r, std::size_t(o)) != k * 1000 + o * 10 + r) bad.fetch_add(1);
            std::int64_t got = -1;
            const int next = (r + 1) % n;
            ASSERT_EQ(MPI_SUCCESS, e.submit("get", next, get_op(&got, std::uint64_t(r) * 8, 8), nullptr));
            ASSERT_EQ(MPI_SUCCESS, e.fence(0));
            if (got != k * 1000 + r * 10 + next) bad.fetch_add(1);
        }
        ASSERT_EQ(MPI_SUCCESS, e.fence(MPI_MODE_NOSUCCEED));
        EXPECT_EQ(e.mode(), AccessMode::none);
    });
    EXPECT_EQ(bad.load(), 0);
}

// A transport that takes at most 2 items in flight per target refuses the rest
// (Post::retry). In every synchronization mode the refused ops queue on their Target (made
// for the purpose in the window-wide modes), later ones queue behind them, and the call
// that completes the epoch issues them, waiting for room (no progress thread here): every
// value lands, each target got this origin's ops in the order they were posted, and the
// queues are empty afterwards.
TEST_P(EpochsFake, OpsAFullTransportRefusesQueueInEveryModeAndGoInOrder) {
    const int n = 4, per = 40;
    enum Mode { lock_all, lock, fence, pscw };
    for (int mode : {lock_all, lock, fence, pscw}) {
        SCOPED_TRACE(mode);
        std::atomic<int> bad{0}, refused{0}, out_of_order{0};
        run_ranks(
            n, GetParam() + 10 * unsigned(mode), 30,
            [&](int r, Epochs& e, FakeHost& host, FakeWorld&) {
                std::vector<int> others;
                for (int t = 0; t < n; ++t)
                    if (t != r) others.push_back(t);
                if (mode == lock_all) {
                    ASSERT_EQ(MPI_SUCCESS, e.lock_all(0));
                }
                if (mode == fence) {
                    ASSERT_EQ(MPI_SUCCESS, e.fence(0));
                }
                if (mode == pscw) {
                    ASSERT_EQ(MPI_SUCCESS, e.post(others, 0));
                    ASSERT_EQ(MPI_SUCCESS, e.start(others, 0));
                }
                if (mode == lock)
                    for (int t : others) {
                        ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_SHARED, t, 0));
                    }
                std::vector<std::int64_t> v(std::size_t(n) * per);
                for (int i = 0; i < per; ++i)
                    for (int t : others) {
                        std::int64_t& x = v[std::size_t(t) * per + std::size_t(i)];
                        x = 100000 * mode + 1000 * r + 10 * i + t;
                        ASSERT_EQ(MPI_SUCCESS,
                                  e.submit("put", t, put_op(&x, (std::uint64_t(r) * per + std::uint64_t(i)) * 8, 8),
                                           nullptr));
                    }
                if (mode == lock_all) {
                    ASSERT_EQ(MPI_SUCCESS, e.flush(others[0], false));  // one target's queue first
                    // The progress thread's passes issue the rest; the emptied queues' Targets
                    // must still go at unlock_all (a lock after it found one: "already locked").
                    for (int pass = 0; e.queued_ops() != 0 && pass < 100000; ++pass) {
                        e.poll();
                        std::this_thread::yield();
                    }
                    EXPECT_EQ(e.queued_ops(), 0u);
                    ASSERT_EQ(MPI_SUCCESS, e.unlock_all());
                    ASSERT_EQ(MPI_SUCCESS, e.lock(MPI_LOCK_SHARED, others[1], 0));
                    ASSERT_EQ(MPI_SUCCESS, e.unlock(others[1]));
                }
                if (mode == lock)
                    for (int t : others) {
                        ASSERT_EQ(MPI_SUCCESS, e.unlock(t));
                    }
                if (mode == fence) {
                    ASSERT_EQ(MPI_SUCCESS, e.fence(MPI_MODE_NOSUCCEED));
                }
                if (mode == pscw) {
                    ASSERT_EQ(MPI_SUCCESS, e.complete());
                    ASSERT_EQ(MPI_SUCCESS, e.wait());
                }
                EXPECT_EQ(e.queued_ops(), 0u);
                EXPECT_EQ(e.mode(), AccessMode::none);
                refused += host.refused();
                for (int t : others) {
                    const auto& log = host.issued_offsets[std::size_t(t)];
                    if (log.size() != std::size_t(per)) bad.fetch_add(1);
                    for (std::size_t i = 0; i < log.size(); ++i)
                        if (log[i] != (std::uint64_t(r) * per + i) * 8) out_of_order.fetch_add(1);
                }
            },
            [&](FakeWorld& w) {
                for (int t = 0; t < n; ++t)
                    for (int o = 0; o < n; ++o)
                        for (int i = 0; i < per && o != t; ++i)
                            if (load64(w, t, std::size_t(o) * per + std::size_t(i)) !=
                                100000 * mode + 1000 * o + 10 * i + t)
                                bad.fetch_add(1);
            },
            2);
        EXPECT_EQ(bad.load(), 0);
        EXPECT_EQ(out_of_order.load(), 0) << "a queued op was issued after a later one";
        EXPECT_GT(refused.load(), 0) << "the transport never refused: the queue was not exercised";
    }
}

INSTANTIATE_TEST_SUITE_P(Seeds, EpochsFake, ::testing::Values(1u, 2u, 3u));

// The one table: a sample of legal and illegal transitions, each as MPI-3.1 §11.5 says.
TEST(EpochState, TheTableAnswersAsTheStandardSays) {
    using A = AccessMode;
    using C = SyncCall;
    struct Case {
        C call;
        A mode;
        bool exposed;
        bool legal;
    };
    const Case cases[] = {
        {C::lock, A::none, false, true},
        {C::lock, A::per_target, false, true},  // several targets
        {C::lock, A::lock_all_granted, false, false},
        {C::lock, A::pscw, false, false},
        {C::lock, A::fence_active, false, false},
        {C::lock, A::fence_called, false, true},  // a fence need not open an epoch
        {C::lock, A::none, true, true},  // passive access beside a PSCW exposure
        {C::unlock, A::none, false, false},
        {C::unlock_all, A::per_target, false, false},
        {C::unlock_all, A::lock_all_called, false, true},
        {C::flush, A::fence_active, false, false},
        {C::flush, A::pscw, false, false},
        {C::flush, A::lock_all_called, false, true},
        {C::fence, A::per_target, false, false},
        {C::fence, A::none, true, false},  // exposure open
        {C::fence, A::fence_active, false, true},
        {C::post, A::none, true, false},  // one exposure at a time
        {C::post, A::fence_active, false, false},
        {C::post, A::pscw, false, true},  // access and exposure together
        {C::start, A::pscw, false, false},
        {C::start, A::lock_all_granted, false, false},
        {C::start, A::none, true, true},
        {C::complete, A::none, false, false},
        {C::wait, A::pscw, false, false},
        {C::wait, A::none, true, true},
        {C::op, A::none, false, false},
        {C::op, A::fence_called, false, true},
        {C::free, A::per_target, false, false},
        {C::free, A::none, true, false},
        {C::free, A::fence_called, false, true},
    };
    for (const Case& c : cases)
        EXPECT_EQ(illegal(c.call, c.mode, c.exposed) == nullptr, c.legal)
            << "call " << int(c.call) << " in " << mode_name(c.mode) << (c.exposed ? " with an exposure" : "");
}

// Every sync call in a state the table forbids fails with MPI_ERR_RMA_SYNC and leaves the
// state as it was.
TEST(EpochState, EpochsRefuseIllegalCallsAndKeepTheirState) {
    run_ranks(2, 7, 5, [&](int r, Epochs& e, FakeHost&, FakeWorld&) {
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.unlock(1 - r));
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.unlock_all());
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.flush(1 - r, false));
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.complete());
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.wait());
        std::int64_t v = 1;
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.submit("put", 1 - r, put_op(&v, 0, 8), nullptr));
        ASSERT_EQ(MPI_SUCCESS, e.lock_all(0));
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.lock(MPI_LOCK_SHARED, 1 - r, 0));
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.start({1 - r}, 0));
        EXPECT_EQ(MPI_ERR_RMA_SYNC, e.check_free());
        ASSERT_EQ(MPI_SUCCESS, e.unlock_all());
        EXPECT_EQ(e.mode(), AccessMode::none);
        EXPECT_EQ(MPI_SUCCESS, e.check_free());
    });
}

}  // namespace
