// test_am_fuzz.cpp — the am target's request decoder (AmEndpoint::serve_message) fed with
// mutated requests: it must refuse what does not fit, never write outside its part or its
// state words, never hand its accumulate path a run outside the part, never crash and never
// wait for ever. Run it under ASan too (the sanitizer job runs the MPI tier).
//
// The corpus is real traffic: this binary interposes PMPI_Isend (the executable's definition
// comes before libmpi's) and records the requests an origin endpoint sends to itself — puts
// small and large, batches, in-place payload puts, gets plain and gathered, 8-byte atomics,
// notifies, lock requests, accumulates inline and with their data behind, state reads,
// flushes, strided puts, gets, accumulates and get_accumulates (upward, downward, from a
// strided origin, into a strided result, MPI_NO_OP without origin data, split in two
// requests). Every other endpoint's target applies strided requests through a strided
// accumulate path, the others run by run through the plain one. Each iteration mutates one
// of them (bit flips, byte runs, interesting 64-bit values over aligned words, truncation,
// extension, splicing two requests) and serves it on
// a second endpoint whose part lies between guard bytes. A request whose first word (the
// kind) announces a payload (7: put data, 9: accumulate data) gets one of a random size sent
// first, as an origin would. Answers the server sends are drained after every request.
//
// FASTRMA_FUZZ_SEED (default 1) seeds it; FASTRMA_FUZZ_SECONDS (default 8) bounds its time.
// One rank.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "transport/am.hpp"

using namespace fastrma::detail;

namespace {

bool recording = false;
std::vector<std::vector<unsigned char>> corpus;  // request messages (tag 7), in send order
std::vector<std::size_t> payload_after;  // per request: bytes of the payload sent behind it (0: none)

}  // namespace

extern "C" int PMPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* rq) {
    using Fn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "PMPI_Isend"));
    if (recording && type == MPI_BYTE && tag == 7 && buf) {
        const auto* b = static_cast<const unsigned char*>(buf);
        corpus.emplace_back(b, b + count);
        payload_after.push_back(0);
    } else if (recording && type == MPI_BYTE && tag == AmEndpoint::kPayloadTag && !payload_after.empty()) {
        payload_after.back() = std::size_t(count);
    }
    return real(buf, count, type, dest, tag, comm, rq);
}

namespace {

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

// A window part between guard regions, state words between guards, and a stub accumulate
// path that checks what reaches it.
struct Target {
    static constexpr std::size_t kPart = 4096, kGuard = 4096, kWords = 64;
    static constexpr unsigned char kFill = 0xA5;
    std::vector<unsigned char> mem = std::vector<unsigned char>(kGuard + kPart + kGuard, kFill);
    std::vector<std::uint64_t> state = std::vector<std::uint64_t>(kWords + 2 * 64, 0);
    std::uint64_t bad_accumulates = 0;
    bool grant = true;  // what the next lock attempt answers
    AmLocal local(bool strided = true) {
        AmLocal l;
        l.base = mem.data() + kGuard;
        l.size = kPart;
        l.state = state.data() + 64;
        l.state_words = kWords;
        l.accumulate = [this](int, int, int, std::uint64_t toff, std::uint64_t n, std::uint64_t eb, const void*,
                              const void*, void* result) {
            if (eb == 0 || toff > kPart || n > (kPart - toff) / eb) ++bad_accumulates;
            if (result && eb && n <= (1u << 20) / eb) std::memset(result, 0, n * eb);
            return MPI_SUCCESS;
        };
        if (strided)
            l.accumulate_strided = [this](int, int, int, std::uint64_t toff, std::int64_t stride, std::uint64_t n,
                                          std::uint64_t pieces, std::uint64_t eb, const void*, void* result) {
                for (std::uint64_t i = 0; i < pieces; ++i) {
                    const std::uint64_t at = toff + i * std::uint64_t(stride);
                    if (eb == 0 || at > kPart || n > (kPart - at) / eb) {
                        ++bad_accumulates;
                        break;
                    }
                }
                if (result && eb && n <= (1u << 20) / eb && pieces <= (1u << 20) / (n * eb))
                    std::memset(result, 0, n * eb * pieces);
                return MPI_SUCCESS;
            };
        l.grant_lock = [this](Transport::LockRequest) { return grant; };
        return l;
    }
    bool guards_intact() const {
        for (std::size_t i = 0; i < kGuard; ++i)
            if (mem[i] != kFill || mem[kGuard + kPart + i] != kFill) return false;
        for (std::size_t i = 0; i < 64; ++i)
            if (state[i] != 0 || state[64 + kWords + i] != 0) return false;
        return true;
    }
};

// Every message the server sent back to us (answers, refusal notices the ring did not take),
// and stray payloads, received and dropped.
void drain(MPI_Comm comm) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st);
        if (!flag) return;
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        std::vector<unsigned char> sink(std::size_t(n) + 1);
        MPI_Recv(sink.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
    }
}

void record_corpus() {
    Target t;
    AmEndpoint ep(MPI_COMM_WORLD, t.local(), 256);
    ASSERT_EQ(ep.error(), MPI_SUCCESS);
    ep.set_served_elsewhere(false);
    std::vector<unsigned char> data(128 * 1024, 0x3C), back(64 * 1024);  // data: the 1100-piece put reads 70,400 B
    recording = true;
    const Chunk small{data.data(), 16, 64}, medium{data.data(), 0, 3000}, large{data.data(), 0, 4000};
    ep.put(0, &small, 1);  // batched
    ep.put(0, &medium, 1);
    ep.put(0, &large, 1);  // header + payload
    Chunk pieces[4] = {
        {data.data(), 0, 8}, {data.data() + 8, 100, 8}, {data.data() + 16, 300, 16}, {data.data(), 900, 4}};
    ep.put(0, pieces, 4);
    Chunk gets[4] = {
        {back.data(), 0, 8}, {back.data() + 8, 64, 8}, {back.data() + 16, 200, 16}, {back.data(), 3000, 4}};
    ep.put_strided(0, data.data(), 8, 16, 24, 8, 20);  // strided put, origin at a stride too
    ep.put_strided(0, data.data(), 16, 3000, -40, 16, 30);  // downward
    ep.put_strided(0, data.data(), 0, 0, 4, 4, 1000);  // 16 KiB of target footprint: refused
    ep.put_strided(0, data.data(), 64, 8, 64, 64, 1100);  // two requests (more than kMaxMessage)
    ep.get(0, gets, 1);
    ep.get(0, gets, 4);  // gathered
    ep.get_strided(0, back.data(), 12, 8, 24, 8, 30);  // strided get into a strided buffer
    ep.get_strided(0, back.data(), 8, 2000, -16, 8, 40);  // downward
    const Chunk big_get{back.data(), 0, 4096};
    ep.get(0, &big_get, 1);
    ep.atomic8(0, 3, AtomicOp::fetch_add, 1, 0);
    ep.atomic8(0, 5, AtomicOp::compare_swap, 2, 0);
    ep.notify8(0, 4, AtomicOp::fetch_add, 1);
    std::uint64_t words[4];
    ep.read_state(0, 2, 4, words);
    const double d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    double res[8];
    ep.accumulate(0, 2, 2, 0, 64, 4, 8, d, nullptr, nullptr);  // batched
    ep.accumulate(0, 3, 2, 0, 128, 4, 8, d, nullptr, res);  // with result
    ep.accumulate(0, 4, 0, 0, 256, 1, 8, d, d + 1, res);  // compare_and_swap
    ep.accumulate(0, 2, 2, 0, 0, 4000 / 8 + 8, 8, data.data(), nullptr, nullptr);  // data behind the header
    ep.accumulate_strided(0, 2, 2, 0, 64, 24, 2, 8, d, 16, 4);  // strided accumulate (sum of doubles)
    ep.accumulate_strided(0, 2, 2, 0, 3000, -40, 1, 8, d, 8, 8);  // downward
    ep.accumulate_strided(0, 2, 2, 0, 0, 8, 1, 8, data.data(), 8, 9000);  // two requests, refused
    std::vector<double> gres(9000);
    ep.get_accumulate_strided(0, 3, 2, 0, 64, 24, 2, 8, d, 16, gres.data(), 24, 4);  // into a strided result
    ep.get_accumulate_strided(0, 3, 13, 0, 3000, -40, 1, 8, nullptr, 0, gres.data(), 8, 8);  // MPI_NO_OP, downward
    ep.get_accumulate_strided(0, 3, 2, 0, 0, 8, 1, 8, data.data(), 8, gres.data(), 8, 9000);  // two, refused
    ep.lock_request(0, Transport::LockRequest::shared);
    const Transport::Release rel{6, AtomicOp::fetch_add, std::uint64_t(-1)};
    ep.release(0, &rel, 1);
    ep.flush(0);
    recording = false;
    ep.flush_all();
    drain(ep.comm());
}

std::vector<unsigned char> mutate(std::mt19937_64& rng, std::vector<unsigned char> m) {
    static const std::uint64_t kInteresting[] = {0,
                                                 1,
                                                 7,
                                                 8,
                                                 255,
                                                 Target::kPart - 8,
                                                 Target::kPart - 4,
                                                 Target::kPart - 1,
                                                 Target::kPart,
                                                 Target::kPart + 1,
                                                 Target::kPart + 8,
                                                 65535,
                                                 65536,
                                                 1u << 20,
                                                 (1u << 20) + 1,
                                                 0x7fffffffull,
                                                 0x80000000ull,
                                                 0xffffffffull,
                                                 1ull << 40,
                                                 0x7fffffffffffffffull,
                                                 0x8000000000000000ull,
                                                 ~0ull,
                                                 ~0ull - 7};
    const int rounds = 1 + int(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
        const unsigned what = unsigned(rng() % 7);
        if (m.empty()) m.resize(1 + rng() % 96);
        if (what == 0) {  // bit flips
            for (int k = 0, n = 1 + int(rng() % 8); k < n; ++k) m[rng() % m.size()] ^= std::uint8_t(1u << (rng() % 8));
        } else if (what == 1) {  // a run of random bytes
            const std::size_t at = rng() % m.size(), n = std::min<std::size_t>(1 + rng() % 16, m.size() - at);
            for (std::size_t k = 0; k < n; ++k) m[at + k] = std::uint8_t(rng());
        } else if (what == 2 && m.size() >= 8) {  // an interesting value over an aligned word: the header's
            // fields and the first segment or record (the first 128 bytes) most of the time
            const std::size_t words = rng() % 4 ? std::min<std::size_t>(32, m.size() / 4) : m.size() / 4;
            const std::size_t at = (rng() % words) * 4;
            const std::uint64_t v = kInteresting[rng() % (sizeof kInteresting / sizeof kInteresting[0])];
            std::memcpy(m.data() + at, &v, std::min<std::size_t>(rng() % 2 ? 8 : 4, m.size() - at));
        } else if (what == 3) {  // truncated
            m.resize(rng() % m.size());
        } else if (what == 4) {  // extended
            const std::size_t n = rng() % 256;
            for (std::size_t k = 0; k < n; ++k) m.push_back(std::uint8_t(rng()));
        } else if (what == 5 && m.size() >= 4) {  // another kind
            const std::uint32_t kind = std::uint32_t(rng() % 17);
            std::memcpy(m.data(), &kind, 4);
        } else if (what == 6 && !corpus.empty()) {  // spliced with another request's tail
            const auto& o = corpus[rng() % corpus.size()];
            const std::size_t cut = rng() % (m.size() + 1), from = o.empty() ? 0 : rng() % o.size();
            m.resize(cut);
            m.insert(m.end(), o.begin() + std::ptrdiff_t(from), o.end());
        }
    }
    if (m.size() > AmEndpoint::kMaxRequest) m.resize(AmEndpoint::kMaxRequest);
    return m;
}

TEST(AmFuzz, MutatedRequestsAreRefusedNeverWrittenOutsideThePart) {
    int np = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np != 1) GTEST_SKIP() << "one rank";
    if (corpus.empty()) record_corpus();
    ASSERT_GE(corpus.size(), 12u) << "the recorded traffic";
    const std::uint64_t seed = env_u64("FASTRMA_FUZZ_SEED", 1);
    const double seconds = double(env_u64("FASTRMA_FUZZ_SECONDS", 8));
    std::mt19937_64 rng(seed);
    Target t;
    std::uint64_t served = 0, endpoints = 0;
    std::vector<unsigned char> payload(2 << 20, 0x5A);
    auto fresh = [&] {
        auto ep = std::make_unique<AmEndpoint>(MPI_COMM_WORLD, t.local(endpoints % 2 == 0), 256);
        ep->set_served_elsewhere(false);
        ep->set_payload_wait(std::chrono::milliseconds(5));
        ++endpoints;
        return ep;
    };
    std::unique_ptr<AmEndpoint> ep = fresh();
    ASSERT_EQ(ep->error(), MPI_SUCCESS);
    const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < stop) {
        for (int k = 0; k < 64; ++k, ++served) {
            const std::size_t pick = rng() % corpus.size();
            std::vector<unsigned char> m = rng() % 16 ? mutate(rng, corpus[pick]) : corpus[pick];
            std::uint32_t kind = 0;
            if (m.size() >= 4) std::memcpy(&kind, m.data(), 4);
            // Announces a payload: send one, mostly of the recorded size, else truncated or of
            // a random size; or none at all (the server gives up after its payload wait).
            const unsigned how = unsigned(rng() % 64);
            if ((kind == 7 || kind == 9) && how != 0) {
                const std::size_t want = payload_after[pick];
                const std::size_t n = how >= 16 ? want : how >= 8 ? (want ? rng() % want : 0) : rng() % payload.size();
                MPI_Request rq;
                MPI_Isend(payload.data(), int(n), MPI_BYTE, 0, AmEndpoint::kPayloadTag, ep->comm(), &rq);
                MPI_Request_free(&rq);
            }
            const int source = rng() % 32 ? 0 : int(rng() % 5) - 2;
            t.grant = rng() % 2;  // a lock request parks its origin, the next poll may grant it
            ep->serve_message(m.data(), m.size(), source);
            t.grant = rng() % 2;
            ep->poll();  // refusal notices to ourselves, parked requests
            drain(ep->comm());
            ASSERT_TRUE(t.guards_intact()) << "seed " << seed << ", request " << served << " (from corpus entry "
                                           << pick << ", " << m.size() << " bytes)";
            ASSERT_EQ(t.bad_accumulates, 0u) << "seed " << seed << ", request " << served;
            // Still parked (a lock not granted, or a later fence or PSCW epoch, which never
            // comes here): every later request of the origin would wait behind it. A fresh
            // endpoint goes on.
            if (ep->has_parked()) {
                ep->settle();
                drain(ep->comm());
                ep = fresh();
            }
        }
    }
    ep->settle();
    drain(ep->comm());
    (void)ep->take_failure(nullptr);  // (a payload of the wrong size is MPI_ERR_TRUNCATE: recorded, fine)
    ep.reset();
    std::printf("am decoder fuzz: seed %llu, %llu requests served, %llu endpoints\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(served),
                static_cast<unsigned long long>(endpoints));
}

// A header whose payload never comes (an origin killed between its two sends, a mismatched
// peer) must not hold the server for ever (issue 36, 4): past the payload wait the request is
// dropped, its origin told (a refusal), the failure recorded for this process's next
// completion point, and the server goes on. A truncated payload is refused the same way.
// A watchdog aborts the job if the server hangs.
TEST(AmServer, AHeaderWhosePayloadNeverComesIsDroppedAndReported) {
    int np = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np != 1) GTEST_SKIP() << "one rank";
    if (corpus.empty()) record_corpus();
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
        const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done.load() && std::chrono::steady_clock::now() < stop)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!done.load()) {
            std::fprintf(stderr, "the am server waited 30 s for a payload that never came\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    });
    Target t;
    AmEndpoint ep(MPI_COMM_WORLD, t.local(), 256);
    ASSERT_EQ(ep.error(), MPI_SUCCESS);
    ep.set_served_elsewhere(false);
    ep.set_payload_wait(std::chrono::milliseconds(200));
    std::vector<unsigned char> payload(64 * 1024, 0x5A);
    int headers = 0;
    for (std::size_t i = 0; i < corpus.size(); ++i) {
        std::uint32_t kind = 0;
        std::memcpy(&kind, corpus[i].data(), 4);
        if (kind != 7 && kind != 9) continue;
        ++headers;
        SCOPED_TRACE("corpus entry " + std::to_string(i) + ", kind " + std::to_string(kind));
        for (const bool truncated : {false, true}) {
            if (truncated) {
                MPI_Request rq;
                MPI_Isend(payload.data(), int(payload_after[i] / 2), MPI_BYTE, 0, AmEndpoint::kPayloadTag, ep.comm(),
                          &rq);
                MPI_Request_free(&rq);
            }
            const auto t0 = std::chrono::steady_clock::now();
            ep.serve_message(corpus[i].data(), corpus[i].size(), 0);
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ep.settle();
            ep.serve_arrived();
            EXPECT_EQ(ep.take_rejected(0), 1u) << (truncated ? "truncated payload" : "no payload") << ": refused";
            std::string what;
            const int cls = ep.take_failure(&what);
            if (truncated) {
                EXPECT_LT(waited, 0.2) << "a payload that came is not waited for";
            } else {
                EXPECT_EQ(cls, MPI_ERR_OTHER) << "the missing payload is reported";
                EXPECT_NE(what.find("did not arrive"), std::string::npos) << what;
                EXPECT_GE(waited, 0.15);
                EXPECT_LT(waited, 5.0);
            }
            drain(ep.comm());
        }
    }
    EXPECT_GE(headers, 2) << "a put and an accumulate with their data behind the header";
    for (std::size_t i = 0; i < Target::kPart; ++i)
        ASSERT_EQ(t.mem[Target::kGuard + i], Target::kFill) << "nothing of a dropped request landed, byte " << i;
    EXPECT_TRUE(t.guards_intact());
    // The server goes on: the put with its payload lands.
    for (std::size_t i = 0; i < corpus.size(); ++i) {
        std::uint32_t kind = 0;
        std::memcpy(&kind, corpus[i].data(), 4);
        if (kind != 7) continue;
        MPI_Request rq;
        MPI_Isend(payload.data(), int(payload_after[i]), MPI_BYTE, 0, AmEndpoint::kPayloadTag, ep.comm(), &rq);
        MPI_Request_free(&rq);
        ep.serve_message(corpus[i].data(), corpus[i].size(), 0);
        ep.settle();
        EXPECT_EQ(t.mem[Target::kGuard], 0x5A) << "the put landed";
        break;
    }
    ep.settle();
    drain(ep.comm());
    done = true;
    watchdog.join();
}

}  // namespace
