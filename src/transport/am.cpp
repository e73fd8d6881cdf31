// am.cpp — see am.hpp.
#include "transport/am.hpp"

#include <sched.h>

#include <cstring>

#include "engine/errors.hpp"
#include "progress/host_progress.hpp"

namespace fastrma::detail {

AmTransport& am_transport() {
    static AmTransport t;
    return t;
}

namespace {
constexpr int kTagRequest = 7;
constexpr int kTagData = 8;   // the payload of a kPutData request, received in place
// Pieces at least this long travel as a header plus the user's own buffer, received
// straight into the window: no packing at the origin, no copy out of a bounce buffer at
// the target (above Open MPI's eager limit the host moves it with one copy).
constexpr std::uint64_t kZeroCopyMin = 16 * 1024;
constexpr int kTagReply0 = 1000;
constexpr int kTagReplySpan = 1 << 20;

enum Kind : std::uint32_t { kPut = 1, kGet, kAtomic8, kAccumulate, kFlush, kReadState, kPutData };

template <class T>
void append(std::vector<unsigned char>& v, const T& x) {
    const auto* p = reinterpret_cast<const unsigned char*>(&x);
    v.insert(v.end(), p, p + sizeof x);
}
void append_bytes(std::vector<unsigned char>& v, const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    v.insert(v.end(), b, b + n);
}
}  // namespace

struct AmEndpoint::Header {
    std::uint32_t kind;
    std::uint32_t nseg;
    std::int32_t reply_tag;   // -1: no answer wanted
    std::int32_t op_id;
    std::int32_t type_id;
    std::int32_t rma_kind;
    std::uint64_t a, b, c;    // kind-specific: word/operand/compare, toff/n/elem_bytes
    std::uint32_t aop;        // AtomicOp; accumulate: has_result | has_compare << 1
    std::uint32_t pad;
};

AmEndpoint::AmEndpoint(MPI_Comm comm, AmLocal local) : local_(std::move(local)) {
    err_ = PMPI_Comm_dup(comm, &comm_);
    if (err_ != MPI_SUCCESS) { comm_ = MPI_COMM_NULL; return; }
    PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    PMPI_Comm_size(comm_, &nprocs_);
    pending_.resize(std::size_t(nprocs_));
    unanswered_.reset(new std::atomic<int>[std::size_t(nprocs_)]);
    for (int i = 0; i < nprocs_; ++i) unanswered_[std::size_t(i)] = 0;
}

AmEndpoint::~AmEndpoint() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) {
        for (int r = 0; r < nprocs_; ++r) complete_sends(r);
        PMPI_Comm_free(&comm_);
    }
}

int AmEndpoint::next_tag() { return kTagReply0 + (tag_.fetch_add(1, std::memory_order_relaxed) & (kTagReplySpan - 1)); }

void AmEndpoint::request(int rank, std::vector<unsigned char>& msg, void* reply, std::size_t reply_len) {
    MPI_Request rq = MPI_REQUEST_NULL;
    if (reply) {
        auto* h = reinterpret_cast<Header*>(msg.data());
        PMPI_Irecv(reply, int(reply_len), MPI_BYTE, rank, h->reply_tag, comm_, &rq);
    }
    PMPI_Send(msg.data(), int(msg.size()), MPI_BYTE, rank, kTagRequest, comm_);
    if (!reply) return;
    unanswered_[std::size_t(rank)].store(0, std::memory_order_relaxed);
    wait_serving(&rq);
}

void AmEndpoint::wait_serving(MPI_Request* rq) {
    for (unsigned spins = 0;; ++spins) {
        int done = 0;
        PMPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        // Serve others while waiting: a target that is itself waiting on us must progress
        // even when no progress thread runs.
        if (!poll() && spins > 16) sched_yield();
    }
}

void AmEndpoint::send_async(int rank, std::vector<unsigned char>&& msg) {
    MPI_Request rq;
    PMPI_Isend(msg.data(), int(msg.size()), MPI_BYTE, rank, kTagRequest, comm_, &rq);
    std::lock_guard lk(send_mu_);
    auto& list = pending_[std::size_t(rank)];
    // Drop the ones already done, so a long epoch without flush holds few buffers.
    while (!list.empty()) {
        int done = 0;
        PMPI_Test(&list.front().rq, &done, MPI_STATUS_IGNORE);
        if (!done) break;
        list.erase(list.begin());
    }
    list.push_back({rq, std::move(msg)});
}

void AmEndpoint::send_pair(int rank, std::vector<unsigned char>&& header, const void* data, std::size_t n) {
    // Header and payload leave together: a second thread's pair must not slip between
    // them, or the target would receive its payload for our header.
    std::lock_guard lk(send_mu_);
    MPI_Request rh, rd;
    PMPI_Isend(header.data(), int(header.size()), MPI_BYTE, rank, kTagRequest, comm_, &rh);
    PMPI_Isend(data, int(n), MPI_BYTE, rank, kTagData, comm_, &rd);
    auto& list = pending_[std::size_t(rank)];
    list.push_back({rh, std::move(header)});
    list.push_back({rd, {}});  // the user's buffer: theirs until flush
}

void AmEndpoint::complete_sends(int rank) {
    std::vector<PendingSend> mine;
    {
        std::lock_guard lk(send_mu_);
        mine.swap(pending_[std::size_t(rank)]);
    }
    for (auto& p : mine) wait_serving(&p.rq);
}

void AmEndpoint::note_unanswered(int rank) {
    if (unanswered_[std::size_t(rank)].fetch_add(1, std::memory_order_relaxed) + 1 >= kMaxUnflushed)
        flush(rank);
}

Post AmEndpoint::put(int rank, const Chunk* chunks, std::size_t n) {
    // Pieces of at most a message, packed into messages of at most kMaxMessage data bytes
    // and 256 segments: small strided transfers travel together, large ones are pipelined.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> segs;
    std::vector<const unsigned char*> srcs;
    std::size_t bytes = 0;
    auto send = [&] {
        if (segs.empty()) return;
        std::vector<unsigned char> msg(sizeof(Header));
        Header h{kPut, std::uint32_t(segs.size()), -1, 0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(msg.data(), &h, sizeof h);
        msg.reserve(sizeof h + 16 * segs.size() + bytes);
        for (auto& s : segs) { append(msg, s.first); append(msg, s.second); }
        for (std::size_t k = 0; k < segs.size(); ++k) append_bytes(msg, srcs[k], segs[k].second);
        send_async(rank, std::move(msg));
        segs.clear();
        srcs.clear();
        bytes = 0;
        note_unanswered(rank);
    };
    for (std::size_t i = 0; i < n; ++i) {
        const Chunk& c = chunks[i];
        if (c.len >= kZeroCopyMin) {
            send();  // what was packed before goes first (order per target)
            for (std::uint64_t off = 0; off < c.len; off += kMaxMessage) {
                const std::uint64_t piece = std::min<std::uint64_t>(kMaxMessage, c.len - off);
                std::vector<unsigned char> msg(sizeof(Header));
                Header h{kPutData, 1, -1, 0, 0, 0, c.offset + off, piece, 0, 0, 0};
                std::memcpy(msg.data(), &h, sizeof h);
                send_pair(rank, std::move(msg), static_cast<const unsigned char*>(c.local) + off, piece);
                note_unanswered(rank);
            }
            continue;
        }
        for (std::uint64_t off = 0; off < c.len;) {
            const std::uint64_t piece = std::min<std::uint64_t>(kMaxMessage, c.len - off);
            if (bytes + piece > kMaxMessage || segs.size() == 256) send();
            segs.emplace_back(c.offset + off, piece);
            srcs.push_back(static_cast<const unsigned char*>(c.local) + off);
            bytes += piece;
            off += piece;
        }
    }
    send();
    return Post::done;
}

Post AmEndpoint::get(int rank, const Chunk* chunks, std::size_t n) {
    // One request per piece of at most a message, up to kGetWindow of them in flight: a
    // 1 MiB get is 16 requests answered back to back, not 16 round trips. Gets are
    // synchronous: the data is in place when this returns.
    constexpr std::size_t kGetWindow = 32;
    struct InFlight {
        MPI_Request reply, req;
        std::vector<unsigned char> msg;
    };
    std::vector<InFlight> fl;
    fl.reserve(kGetWindow);
    auto drain = [&] {
        for (auto& f : fl) {
            wait_serving(&f.reply);
            wait_by_test(&f.req);
        }
        fl.clear();
        unanswered_[std::size_t(rank)].store(0, std::memory_order_relaxed);
    };
    for (std::size_t i = 0; i < n; ++i) {
        for (std::uint64_t off = 0; off < chunks[i].len; off += kMaxMessage) {
            const std::uint64_t len = std::min<std::uint64_t>(kMaxMessage, chunks[i].len - off);
            InFlight f;
            f.msg.resize(sizeof(Header));
            Header h{kGet, 1, next_tag(), 0, 0, 0, 0, 0, 0, 0, 0};
            std::memcpy(f.msg.data(), &h, sizeof h);
            append(f.msg, std::uint64_t(chunks[i].offset + off));
            append(f.msg, len);
            PMPI_Irecv(static_cast<unsigned char*>(chunks[i].local) + off, int(len), MPI_BYTE, rank,
                       h.reply_tag, comm_, &f.reply);
            fl.push_back(std::move(f));
            InFlight& g = fl.back();
            PMPI_Isend(g.msg.data(), int(g.msg.size()), MPI_BYTE, rank, kTagRequest, comm_, &g.req);
            if (fl.size() == kGetWindow) drain();
        }
    }
    drain();
    return Post::done;
}

std::uint64_t AmEndpoint::atomic8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                                  std::uint64_t compare) {
    std::vector<unsigned char> msg(sizeof(Header));
    Header h{kAtomic8, 0, next_tag(), 0, 0, 0, word, operand, compare, std::uint32_t(op), 0};
    std::memcpy(msg.data(), &h, sizeof h);
    std::uint64_t old = 0;
    request(rank, msg, &old, sizeof old);
    return old;
}

Post AmEndpoint::accumulate(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                            std::uint64_t n, std::size_t elem_bytes, const void* src,
                            const void* compare, void* result) {
    std::vector<unsigned char> msg(sizeof(Header));
    const std::uint32_t flags = (result ? 1u : 0u) | (compare ? 2u : 0u) | (src ? 4u : 0u);
    Header h{kAccumulate, 0, result ? next_tag() : -1, op_id, type_id, rma_kind, toff, n, elem_bytes, flags, 0};
    std::memcpy(msg.data(), &h, sizeof h);
    if (src) append_bytes(msg, src, n * elem_bytes);
    if (compare) append_bytes(msg, compare, elem_bytes);
    if (result) {
        request(rank, msg, result, n * elem_bytes);
    } else {
        send_async(rank, std::move(msg));
        note_unanswered(rank);
    }
    return Post::done;
}

Post AmEndpoint::read_state(int rank, std::size_t word, std::size_t count, std::uint64_t* out) {
    std::vector<unsigned char> msg(sizeof(Header));
    Header h{kReadState, 0, next_tag(), 0, 0, 0, word, count, 0, 0, 0};
    std::memcpy(msg.data(), &h, sizeof h);
    request(rank, msg, out, count * 8);
    return Post::done;
}

void AmEndpoint::flush(int rank) {
    std::vector<unsigned char> msg(sizeof(Header));
    Header h{kFlush, 0, next_tag(), 0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(msg.data(), &h, sizeof h);
    char dummy;
    request(rank, msg, &dummy, 0);
    complete_sends(rank);  // answered: every earlier message of ours has arrived
}

// Serving may run inside the host's progress loop (host_progress.hpp), where a blocking
// MPI call would wait on a condition only that loop signals (Open MPI's sync_wait_mt:
// deadlock, seen). So the server completes its receives and replies by testing.
void AmEndpoint::wait_by_test(MPI_Request* rq) {
    for (int done = 0;;) {
        PMPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        __builtin_ia32_pause();
    }
}

bool AmEndpoint::poll() {
    std::unique_lock lk(serve_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    HostProgressGuard no_reentry;  // the MPI calls below progress the host, which calls us
    bool any = false;
    for (int batch = 0; batch < 64; ++batch) {
        int flag = 0;
        MPI_Message m;
        MPI_Status st;
        PMPI_Improbe(MPI_ANY_SOURCE, kTagRequest, comm_, &flag, &m, &st);
        if (!flag) break;
        int count = 0;
        PMPI_Get_count(&st, MPI_BYTE, &count);
        std::vector<unsigned char> buf(std::size_t(count > 0 ? count : 1));
        MPI_Request rq;
        PMPI_Imrecv(buf.data(), count, MPI_BYTE, &m, &rq);
        wait_by_test(&rq);
        serve(buf.data(), std::size_t(count), st.MPI_SOURCE);
        any = true;
    }
    return any;
}

void AmEndpoint::serve(const unsigned char* msg, std::size_t len, int source) {
    Header h;
    std::memcpy(&h, msg, sizeof h);
    const unsigned char* p = msg + sizeof h;
    auto reply = [&](const void* data, std::size_t n) {
        MPI_Request rq;
        PMPI_Isend(data, int(n), MPI_BYTE, source, h.reply_tag, comm_, &rq);
        wait_by_test(&rq);
    };
    switch (h.kind) {
    case kPut: {
        const unsigned char* data = p + h.nseg * 16;
        for (std::uint32_t s = 0; s < h.nseg; ++s) {
            std::uint64_t off, n;
            std::memcpy(&off, p + 16 * s, 8);
            std::memcpy(&n, p + 16 * s + 8, 8);
            std::memcpy(local_.base + off, data, n);  // dynamic windows: base null, off = address
            data += n;
        }
        break;
    }
    case kPutData: {
        MPI_Request rq;
        PMPI_Irecv(local_.base + h.a, int(h.b), MPI_BYTE, source, kTagData, comm_, &rq);
        wait_by_test(&rq);
        break;
    }
    case kGet: {
        std::uint64_t off, n;
        std::memcpy(&off, p, 8);
        std::memcpy(&n, p + 8, 8);
        reply(local_.base + off, n);
        break;
    }
    case kAtomic8: {
        std::uint64_t* w = local_.state + h.a;
        std::uint64_t old = 0;
        switch (AtomicOp(h.aop)) {
        case AtomicOp::fetch_add: old = __atomic_fetch_add(w, h.b, __ATOMIC_ACQ_REL); break;
        case AtomicOp::swap: old = __atomic_exchange_n(w, h.b, __ATOMIC_ACQ_REL); break;
        case AtomicOp::load: old = __atomic_load_n(w, __ATOMIC_ACQUIRE); break;
        case AtomicOp::fetch_or: old = __atomic_fetch_or(w, h.b, __ATOMIC_ACQ_REL); break;
        case AtomicOp::compare_swap:
            old = h.c;
            __atomic_compare_exchange_n(w, &old, h.b, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            break;
        }
        reply(&old, sizeof old);
        break;
    }
    case kAccumulate: {
        const std::uint64_t n = h.b, eb = h.c;
        const void* src = (h.aop & 4) ? p : nullptr;
        const void* cmp = (h.aop & 2) ? p + ((h.aop & 4) ? n * eb : 0) : nullptr;
        std::vector<unsigned char> result((h.aop & 1) ? n * eb : 0);
        local_.accumulate(h.rma_kind, h.op_id, h.type_id, h.a, n, src, cmp,
                          result.empty() ? nullptr : result.data());
        if (h.aop & 1) reply(result.data(), result.size());
        break;
    }
    case kReadState: {
        std::vector<std::uint64_t> words(h.b);
        for (std::uint64_t i = 0; i < h.b; ++i)
            words[i] = __atomic_load_n(local_.state + h.a + i, __ATOMIC_ACQUIRE);
        reply(words.data(), words.size() * 8);
        break;
    }
    case kFlush:
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        reply(nullptr, 0);
        break;
    }
    (void)len;
}

}  // namespace fastrma::detail
