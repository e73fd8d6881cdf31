// dsde — dynamic sparse data exchange over MPI RMA: every round each rank sends messages
// of random sizes to a set of peers that the receivers do not know in advance (random peers,
// or the 6 neighbours on a 3D torus of ranks), the motif of Hoefler, Siebert and Lumsdaine,
// "Scalable communication protocols for dynamic sparse data exchange" (PPoPP 2010).
//
// Delivery (both protocols): each rank exposes an inbox (one window). A sender reserves room
// in the target's inbox with MPI_Fetch_and_op(MPI_SUM) on the inbox's fill counter and puts
// the message (2 header words + payload) at the offset it got. The inbox has two halves used
// in alternate rounds, so a rank may empty one half while peers already fill the other: the
// collective of round r+1 separates the reset of half r%2 from its reuse in round r+2.
//
// Termination (--term):
//   barrier  MPI_Win_flush_all, then MPI_Barrier: every message of the round is in place;
//            the receiver reads its fill counter and walks the messages.
//   counter  an accumulate-based census first, as in the RSX protocol: each sender adds 1
//            per message to the target's census counter (MPI_Accumulate in a fence epoch
//            on a second window, one fence per round); after the fence each rank knows how
//            many messages it gets. Messages are then delivered as above, each followed,
//            once flushed, by an atomic store of its header word (MPI_Accumulate with
//            MPI_REPLACE), which marks it complete; the receiver processes messages as their
//            headers appear, until it has its count. No barrier at the end of the round.
// Check: every payload word is a hash of (round, source, target, message, index); the
// receiver verifies each message, and the sums of everything sent and received, allreduced,
// must agree (so must the message counts).
//
// Plain MPI (only <mpi.h>): the same binary measures the host MPI's RMA or, with
// libfastrma-mpi.so preloaded, fastrma.
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/example_support.hpp"

namespace {

using examples::splitmix64;

struct Config {
    std::string pattern = "random";  // random | neighbors
    int peers = 3;  // random: targets per rank and round
    long max_words = 512;  // payload words of a message: 1..max_words, random
    int rounds = 200;
    int threads = 1;
    std::string term = "barrier";  // barrier | counter
    std::string win = "allocate";
    long seed = 2010;
};

constexpr long kHeaderWords = 2;
constexpr long kDataStart = 8;  // words: the two fill counters, padded to a cache line

// A message of one round: its target, its index among the sender's messages, its size.
struct Message {
    int target;
    int index;
    long words;  // payload
};

// The messages rank `me` sends in `round`: the receivers never see this list.
std::vector<Message> plan_round(const Config& cfg, int me, int p, int round, const int dims[3]) {
    std::vector<Message> out;
    std::uint64_t h = splitmix64(std::uint64_t(cfg.seed) ^ (std::uint64_t(round) << 24) ^ std::uint64_t(me));
    auto size_of = [&](int index) {
        return 1 + long(splitmix64(h + std::uint64_t(index) * 7919) % std::uint64_t(cfg.max_words));
    };
    if (cfg.pattern == "neighbors") {
        // Rank -> (x, y, z) row-major on a periodic dims[0] x dims[1] x dims[2] torus.
        const int c[3] = {me / (dims[1] * dims[2]), (me / dims[2]) % dims[1], me % dims[2]};
        int index = 0;
        for (int d = 0; d < 3; ++d)
            for (int step : {-1, 1}) {
                int n[3] = {c[0], c[1], c[2]};
                n[d] = (n[d] + step + dims[d]) % dims[d];
                out.push_back({(n[0] * dims[1] + n[1]) * dims[2] + n[2], index, size_of(index)});
                ++index;
            }
        return out;
    }
    // random: `peers` distinct ranks other than me (me itself when alone), fresh every round.
    std::vector<int> others;
    for (int r = 0; r < p; ++r)
        if (r != me || p == 1) others.push_back(r);
    const int k = std::min<int>(cfg.peers, int(others.size()));
    for (int i = 0; i < k; ++i) {
        h = splitmix64(h);
        std::swap(others[std::size_t(i)],
                  others[std::size_t(i) + std::size_t(h % std::uint64_t(others.size() - std::size_t(i)))]);
        out.push_back({others[std::size_t(i)], i, size_of(i)});
    }
    return out;
}

// The most messages one rank can receive in a round: every rank sends it all of its own.
long max_incoming(const Config& cfg, int p) {
    return long(p) * (cfg.pattern == "neighbors" ? 6 : std::max(1, std::min(cfg.peers, std::max(1, p - 1))));
}

inline std::uint64_t payload_word(const Config& cfg, int round, int src, int dst, int index, long j) {
    const std::uint64_t m = splitmix64(std::uint64_t(cfg.seed) * 31 + (std::uint64_t(round) << 40) +
                                       (std::uint64_t(src) << 24) + (std::uint64_t(dst) << 8) + std::uint64_t(index));
    return splitmix64(m + std::uint64_t(j));
}

// Header word 0: nonzero, it says who sent the message, which one and how long it is (it is
// the completion mark of --term counter). Word 1: the round (a stale message fails the check).
inline std::uint64_t header0(int src, int index, long words) {
    return (std::uint64_t(words) << 32) | (std::uint64_t(index) << 24) | std::uint64_t(src + 1);
}

class Exchange {
public:
    Exchange(const Config& cfg, int me, int p) : cfg_(cfg), me_(me), p_(p) {
        dims_[0] = dims_[1] = dims_[2] = 0;
        MPI_Dims_create(p, 3, dims_);
        half_words_ = max_incoming(cfg, p) * (kHeaderWords + cfg.max_words);
        const long words = kDataStart + 2 * half_words_;
        if (cfg.win == "create") {
            owned_.assign(std::size_t(words), 0);
            inbox_ = owned_.data();
            MPI_Win_create(inbox_, MPI_Aint(words * 8), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win_);
        } else {
            MPI_Win_allocate(MPI_Aint(words * 8), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &inbox_, &win_);
            std::fill_n(inbox_, words, 0);
        }
        if (cfg.term == "counter") {
            MPI_Win_allocate(2 * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &census_, &census_win_);
            census_[0] = census_[1] = 0;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock_all(0, win_);
        if (census_win_ != MPI_WIN_NULL) MPI_Win_fence(MPI_MODE_NOPRECEDE, census_win_);
        send_buf_.resize(std::size_t(cfg.threads));
    }
    ~Exchange() {
        if (census_win_ != MPI_WIN_NULL) {
            MPI_Win_fence(MPI_MODE_NOSUCCEED, census_win_);
            MPI_Win_free(&census_win_);
        }
        MPI_Win_unlock_all(win_);
        MPI_Win_free(&win_);
    }

    // One round. Adds to the sums; counts errors (bad messages, an overflowing inbox).
    void round(int r, std::uint64_t& sent_sum, std::uint64_t& recv_sum, long& sent_msgs, long& recv_msgs, long& errors,
               long& bytes) {
        const int parity = r % 2;
        const std::vector<Message> mine = plan_round(cfg_, me_, p_, r, dims_);
        long expected = -1;
        if (cfg_.term == "counter") expected = census(mine, parity);

        std::vector<long> thread_errors(std::size_t(cfg_.threads), 0);
        std::vector<std::uint64_t> thread_sums(std::size_t(cfg_.threads), 0);
        team_.run([&](int tid) {
            thread_sums[std::size_t(tid)] = send(mine, r, parity, tid, thread_errors[std::size_t(tid)]);
        });
        for (int t = 0; t < cfg_.threads; ++t) {
            errors += thread_errors[std::size_t(t)];
            sent_sum += thread_sums[std::size_t(t)];
        }
        sent_msgs += long(mine.size());
        for (const Message& m : mine) bytes += (kHeaderWords + m.words) * 8;

        if (cfg_.term == "barrier") {
            MPI_Barrier(MPI_COMM_WORLD);  // every rank's flush_all is behind it
            MPI_Win_sync(win_);
        }
        receive(r, parity, expected, recv_sum, recv_msgs, errors);
    }

private:
    // Census (--term counter): +1 in the target's counter per message, one fence; returns
    // how many messages this rank gets in round r and clears its counter for round r+2.
    long census(const std::vector<Message>& mine, int parity) {
        const std::int64_t one = 1;
        for (const Message& m : mine)
            MPI_Accumulate(&one, 1, MPI_INT64_T, m.target, parity, 1, MPI_INT64_T, MPI_SUM, census_win_);
        MPI_Win_fence(0, census_win_);
        const long n = long(census_[parity]);
        census_[parity] = 0;  // nobody adds to this parity before the next fence
        return n;
    }

    // Thread tid's share of the messages: reserve, put, (counter) mark complete. Returns the
    // sum of the payload words it sent.
    std::uint64_t send(const std::vector<Message>& mine, int r, int parity, int tid, long& errors) {
        std::vector<std::uint64_t>& buf = send_buf_[std::size_t(tid)];
        std::size_t need = 0;
        for (std::size_t i = std::size_t(tid); i < mine.size(); i += std::size_t(cfg_.threads))
            need += std::size_t(kHeaderWords + mine[i].words);
        buf.resize(need);  // stays untouched until the flush below: the puts read from it
        std::uint64_t sum = 0;
        std::size_t at = 0;
        const MPI_Aint half_base = kDataStart + parity * half_words_;
        for (std::size_t i = std::size_t(tid); i < mine.size(); i += std::size_t(cfg_.threads)) {
            const Message& m = mine[i];
            std::uint64_t* msg = buf.data() + at;
            const std::int64_t len = kHeaderWords + m.words;
            at += std::size_t(len);
            msg[0] = header0(me_, m.index, m.words);
            msg[1] = std::uint64_t(r);
            for (long j = 0; j < m.words; ++j) {
                msg[kHeaderWords + j] = payload_word(cfg_, r, me_, m.target, m.index, j);
                sum += msg[kHeaderWords + j];
            }
            std::int64_t offset = -1;
            MPI_Fetch_and_op(&len, &offset, MPI_INT64_T, m.target, parity, MPI_SUM, win_);
            MPI_Win_flush(m.target, win_);
            if (offset < 0 || offset + len > half_words_) {  // cannot happen with max_incoming()
                ++errors;
                continue;
            }
            if (cfg_.term == "barrier") {
                MPI_Put(msg, int(len), MPI_UINT64_T, m.target, half_base + offset, int(len), MPI_UINT64_T, win_);
            } else {
                // Payload and round word first; the header word, atomically, once they are in.
                MPI_Put(msg + 1, int(len - 1), MPI_UINT64_T, m.target, half_base + offset + 1, int(len - 1),
                        MPI_UINT64_T, win_);
                MPI_Win_flush(m.target, win_);
                MPI_Accumulate(msg, 1, MPI_UINT64_T, m.target, half_base + offset, 1, MPI_UINT64_T, MPI_REPLACE, win_);
            }
        }
        MPI_Win_flush_all(win_);
        return sum;
    }

    // Walks this round's half of the inbox, checks each message, then empties the half.
    void receive(int r, int parity, long expected, std::uint64_t& recv_sum, long& recv_msgs, long& errors) {
        std::uint64_t* half = inbox_ + kDataStart + parity * half_words_;
        long off = 0, got = 0;
        while (true) {
            if (cfg_.term == "barrier") {
                if (off >= long(inbox_[parity])) break;
            } else {
                if (got == expected) break;
                // Wait for the header word of the next message (peers write it atomically).
                // MPI_Iprobe drives the host MPI's progress engine: MPIs that serve
                // fetch-and-op with the target's help need this rank to call MPI.
                while (__atomic_load_n(&half[off], __ATOMIC_ACQUIRE) == 0) {
                    int flag = 0;
                    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                    MPI_Win_sync(win_);
                    sched_yield();
                }
                MPI_Win_sync(win_);
            }
            const std::uint64_t h0 = half[off];
            const int src = int(h0 & 0xffffff) - 1;
            const int index = int((h0 >> 24) & 0xff);
            const long words = long(h0 >> 32);
            if (src < 0 || src >= p_ || words < 1 || words > cfg_.max_words || half[off + 1] != std::uint64_t(r)) {
                ++errors;  // a corrupt header: the rest of the half cannot be parsed
                break;
            }
            for (long j = 0; j < words; ++j) {
                const std::uint64_t v = half[off + kHeaderWords + j];
                recv_sum += v;
                if (v != payload_word(cfg_, r, src, me_, index, j)) ++errors;
            }
            off += kHeaderWords + words;
            ++got;
        }
        recv_msgs += got;
        // Empty the half for round r+2 (the next collective orders this before any reuse).
        std::fill_n(half, std::max(off, cfg_.term == "barrier" ? long(inbox_[parity]) : off), 0);
        inbox_[parity] = 0;
        MPI_Win_sync(win_);
    }

    const Config& cfg_;
    int me_, p_;
    int dims_[3];
    long half_words_ = 0;
    std::uint64_t* inbox_ = nullptr;
    std::vector<std::uint64_t> owned_;
    MPI_Win win_ = MPI_WIN_NULL;
    std::int64_t* census_ = nullptr;
    MPI_Win census_win_ = MPI_WIN_NULL;
    std::vector<std::vector<std::uint64_t>> send_buf_;
    examples::ThreadTeam team_{cfg_.threads};  // senders of every round
};

}  // namespace

int main(int argc, char** argv) {
    Config cfg;
    examples::Flags flags("dsde",
                          "Dynamic sparse data exchange: each round every rank sends messages of random size to peers\n"
                          "the receivers do not know; MPI_Fetch_and_op reserves room in the target's inbox, MPI_Put\n"
                          "delivers; termination by barrier or by an accumulate-based census. Checked by checksums.");
    flags.add("pattern", &cfg.pattern, "random (peers chosen per round) or neighbors (6 on a 3D torus of ranks)");
    flags.add("peers", &cfg.peers, "random: messages per rank and round (distinct targets)");
    flags.add("words", &cfg.max_words, "largest payload in 64-bit words (sizes are random in 1..words)");
    flags.add("rounds", &cfg.rounds, "exchange rounds (iterations)");
    flags.add("threads", &cfg.threads, "threads per rank sending (MPI_THREAD_MULTIPLE)");
    flags.add("term", &cfg.term, "termination: barrier or counter");
    flags.add("win", &cfg.win, "inbox window flavor: allocate or create");
    flags.add("seed", &cfg.seed, "seed of peers and sizes");
    flags.epilog(
        "Output: a summary, then one line 'RESULT app=dsde ... time_s=T check=PASS|FAIL'.\n"
        "Exit status 0 only when every message arrived intact.");
    if (int rc = flags.parse(argc, argv); rc >= 0) return rc;
    if (!examples::init_mpi(&argc, &argv, cfg.threads, "dsde")) {
        MPI_Finalize();
        return 2;
    }
    int me = 0, p = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    std::string err;
    if (cfg.pattern != "random" && cfg.pattern != "neighbors")
        err = "--pattern is random or neighbors";
    else if (cfg.term != "barrier" && cfg.term != "counter")
        err = "--term is barrier or counter";
    else if (cfg.win != "allocate" && cfg.win != "create")
        err = "--win is allocate or create";
    else if (cfg.peers < 1 || cfg.max_words < 1 || cfg.max_words > (1L << 28) || cfg.rounds < 1 || cfg.threads < 1)
        err = "bad --peers/--words/--rounds/--threads";
    else if (p > (1 << 23))
        err = "too many ranks for the header format";
    if (!err.empty()) {
        if (me == 0) std::fprintf(stderr, "dsde: %s\n", err.c_str());
        MPI_Finalize();
        return 2;
    }
    const std::string impl = examples::rma_implementation();
    if (me == 0)
        std::printf(
            "dsde: %s pattern%s, payload 1..%ld words, %d rounds, term=%s, %d ranks x %d threads, win=%s, rma=%s\n",
            cfg.pattern.c_str(), cfg.pattern == "random" ? (", " + std::to_string(cfg.peers) + " peers").c_str() : "",
            cfg.max_words, cfg.rounds, cfg.term.c_str(), p, cfg.threads, cfg.win.c_str(), impl.c_str());

    std::uint64_t sums[2] = {0, 0};  // sent, received
    long counts[4] = {0, 0, 0, 0};  // sent msgs, received msgs, errors, bytes
    double elapsed = 0;
    {
        Exchange ex(cfg, me, p);
        examples::Progress progress("dsde", me == 0);
        examples::yield_barrier(MPI_COMM_WORLD);
        const double t0 = examples::now_s();
        for (int r = 0; r < cfg.rounds; ++r) {
            ex.round(r, sums[0], sums[1], counts[0], counts[1], counts[2], counts[3]);
            progress.tick("round", r + 1, cfg.rounds);
        }
        elapsed = examples::now_s() - t0;
    }
    std::uint64_t gsums[2];
    long gcounts[4];
    double gtime = 0;
    MPI_Allreduce(sums, gsums, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);  // wraps mod 2^64 alike on both sides
    MPI_Allreduce(counts, gcounts, 4, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&elapsed, &gtime, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const bool ok = gcounts[2] == 0 && gsums[0] == gsums[1] && gcounts[0] == gcounts[1];
    if (me == 0) {
        std::printf("  %ld messages, %.1f MB in %.4f s: %.3g messages/s, %.1f us per round\n", gcounts[0],
                    double(gcounts[3]) / 1e6, gtime, double(gcounts[0]) / gtime, 1e6 * gtime / cfg.rounds);
        std::printf("  check: sent %ld / received %ld messages, checksum sent %016llx received %016llx, %ld bad\n",
                    gcounts[0], gcounts[1], (unsigned long long)gsums[0], (unsigned long long)gsums[1], gcounts[2]);
        examples::Result r("dsde");
        r.add("size", cfg.pattern + "-" + std::to_string(cfg.max_words) + "w")
            .add("ranks", p)
            .add("threads", cfg.threads)
            .add("term", cfg.term)
            .add("win", cfg.win)
            .add("rma", impl)
            .add("time_s", gtime)
            .add("rounds", cfg.rounds)
            .add("round_us", 1e6 * gtime / cfg.rounds)
            .add("msgs_per_s", double(gcounts[0]) / gtime)
            .add("check", ok ? "PASS" : "FAIL");
        r.print();
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
