// am.hpp — the active-message transport: RMA over MPI two-sided messages, executed at the
// target by its progress thread (or by a sync call of the target that waits anyway).
//
// One AmEndpoint per window, on a private duplicate of the window's communicator. Requests
// go to the target with one tag; each request that needs an answer carries a fresh reply
// tag on which the origin has already posted its receive.
//   put       : segments (offset, length) + data, at most kMaxMessage bytes a message;
//               pieces of 16 KiB and more go as a header plus a second message straight
//               from the user's buffer, which the target receives in place (no packing,
//               no bounce buffer: above Open MPI's eager limit one copy in all);
//   get       : segments -> reply with the data;
//   atomic8   : one synchronization word of the target's state area -> reply old value;
//   accumulate: a run of n basic elements (op and type as portable ids) -> the target's
//               accumulate path, the same code and atomicity domain its local ops use;
//   flush     : -> empty reply, sent after every earlier request from this origin was
//               applied (MPI keeps the order of messages between two processes on a tag).
// Flow control: at most kMaxUnflushed requests without an answer per target; then the
// origin flushes, so a flood cannot make the target buffer without bound (nor the origin:
// requests without an answer are sent with MPI_Isend and their buffers kept until then).
// Needs MPI_THREAD_MULTIPLE (application threads and the progress thread both call MPI).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.hpp"

namespace fastrma::detail {

// What a target's endpoint needs to serve requests against its local part.
struct AmLocal {
    unsigned char* base = nullptr;    // my window data (dynamic: null, offsets are addresses)
    std::uint64_t* state = nullptr;   // my state words
    std::uint64_t state_words = 0;
    // Executes one accumulate run at my memory (the window's own accumulate path):
    // rma_kind, op id, type id, target offset, elements, origin data, compare (cas),
    // result buffer (may be null). Returns an MPI error class.
    std::function<int(int, int, int, std::uint64_t, std::uint64_t, const void*, const void*, void*)> accumulate;
};

class AmEndpoint {
public:
    static constexpr std::size_t kMaxMessage = 64 * 1024;
    static constexpr int kMaxUnflushed = 256;

    // comm is duplicated (collective over it).
    AmEndpoint(MPI_Comm comm, AmLocal local);
    ~AmEndpoint();
    int error() const { return err_; }

    // Origin side (called through AmTransport).
    Post put(int rank, const Chunk* chunks, std::size_t n);
    Post get(int rank, const Chunk* chunks, std::size_t n);
    std::uint64_t atomic8(int rank, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare);
    Post accumulate(int rank, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                    std::uint64_t n, std::size_t elem_bytes, const void* src, const void* compare,
                    void* result);
    Post read_state(int rank, std::size_t word, std::size_t count, std::uint64_t* out);
    void flush(int rank);

    // Target side: serve what has arrived (bounded batch). True if anything was served.
    bool poll();

private:
    struct Header;
    int next_tag();
    // Sends a request and, when reply != null, waits for reply_len bytes of answer,
    // serving incoming requests meanwhile (so two processes asking each other progress).
    void request(int rank, std::vector<unsigned char>& msg, void* reply, std::size_t reply_len);
    void note_unanswered(int rank);
    void serve(const unsigned char* msg, std::size_t len, int source);
    static void wait_by_test(MPI_Request* rq);  // the server's wait (no serving: no re-entry)
    void wait_serving(MPI_Request* rq);         // an origin's wait: serves requests meanwhile

    // Requests without an answer (put, accumulate) leave with MPI_Isend, so the origin goes
    // on while the target takes them; their buffers live here until flush(rank) completes
    // them (after the flush's answer every earlier message of ours has arrived).
    struct PendingSend {
        MPI_Request rq;
        std::vector<unsigned char> buf;
    };
    void send_async(int rank, std::vector<unsigned char>&& msg);
    void send_pair(int rank, std::vector<unsigned char>&& header, const void* data, std::size_t n);
    void complete_sends(int rank);
    std::mutex send_mu_;
    std::vector<std::vector<PendingSend>> pending_;  // per rank (send_mu_)

    MPI_Comm comm_ = MPI_COMM_NULL;
    AmLocal local_;
    int err_ = MPI_SUCCESS;
    std::atomic<int> tag_{0};
    std::mutex serve_mu_;  // one server at a time keeps requests in arrival order
    std::unique_ptr<std::atomic<int>[]> unanswered_;
    int nprocs_ = 0;
};

// The transport object: routes to the peer's endpoint (PeerRegion::am, PeerRegion::rank).
class AmTransport final : public Transport {
public:
    const char* name() const override { return "am"; }
    Caps caps(const PeerRegion&) const override { return {false, false, true}; }
    Post put(const PeerRegion& p, const Chunk* c, std::size_t n) override { return ep(p).put(p.rank, c, n); }
    Post get(const PeerRegion& p, const Chunk* c, std::size_t n) override { return ep(p).get(p.rank, c, n); }
    std::uint64_t atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override {
        return ep(p).atomic8(p.rank, word, op, operand, compare);
    }
    void flush(const PeerRegion& p) override { ep(p).flush(p.rank); }
    Post accumulate(const PeerRegion& p, int rma_kind, int op_id, int type_id, std::uint64_t toff,
                    std::uint64_t n, std::size_t elem_bytes, const void* src, const void* compare,
                    void* result) override {
        return ep(p).accumulate(p.rank, rma_kind, op_id, type_id, toff, n, elem_bytes, src, compare, result);
    }

private:
    static AmEndpoint& ep(const PeerRegion& p) { return *static_cast<AmEndpoint*>(p.am); }
};

AmTransport& am_transport();

}  // namespace fastrma::detail
