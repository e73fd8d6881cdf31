// host.hpp — what the epochs need of the window they synchronize (its peers, its
// transports, its ops). Window implements it; the unit tests implement it over a fake
// transport with ranks as threads (tests/unit/test_epochs.cpp).
#pragma once

#include <vector>

#include <cstddef>
#include <cstdint>

#include "base/bootstrap.hpp"
#include "epochs/completion.hpp"
#include "ops/op.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

class EpochHost {
public:
    virtual int host_rank() const = 0;
    virtual int host_size() const = 0;
    // The transport serving rank r and how it reaches r (one place decides: the window).
    virtual Transport& tp(int r) const = 0;
    virtual PeerRegion peer(int r) const = 0;
    // This process's own state words (lock words, PSCW counters, bitmaps), mapped here.
    virtual std::uint64_t* my_word(std::size_t w) const = 0;
    // The group's synchronization (fence_sync), its members, and the transport whose
    // target side serves this process's part (null when no transport needs this CPU).
    virtual Transport& group_tp() const = 0;
    virtual Bootstrap& group() = 0;
    virtual Transport* serving_tp() const = 0;

    // Ops: perform op at rank r now (an MPI error class, or kIssueRetry when the transport
    // took nothing of it); after an op of a request was issued, signal or track its
    // completion (non-zero: an error, done not signalled).
    virtual int issue(int r, const Op& op) = 0;
    virtual int track_request(int r, Completion* done) = 0;
    // Whether a request's completion may be signalled after its post returned (someone
    // polls for it, and it may be signalled from another thread); if not, its op is
    // completed before the post returns.
    virtual bool completes_later(const Completion& done) const = 0;
    // Remote completion at every target (each transport's flush_all).
    virtual void flush_every_target() = 0;
    // The group's side of a fence (collective): when it returns at any member, everything
    // any member posted before it is complete at its target, also for a node peer that
    // reads that target by load/store. An MPI error class.
    virtual int fence_sync() { return group_tp().fence_sync(group()); }
    // The lock master of rank r (lock_protocol.hpp: the word counting lock_all and
    // exclusive holders that a lock on r consults): rank 0, or on a window that spans
    // nodes the first rank of r's node, so that a lock on a node peer stays on the node;
    // lock_masters() lists them all (null: rank 0 alone).
    virtual int lock_master(int /*r*/) const { return 0; }
    virtual const std::vector<int>* lock_masters() const { return nullptr; }
    // After a completion: what the transports' flushes met (Transport::failed: a failed
    // transfer, a failure of the medium, a dead node peer) or requests to ranks [lo, hi)
    // that targets refused (dynamic windows) since the last look, as an MPI error class
    // (raised, naming call), or MPI_SUCCESS.
    virtual int completion_error(const char* call, int lo, int hi) = 0;

    // Lock-wait doorbells (peers whose state is mapped here): my bit in rank's waiter
    // bitmap before a long sleep; after releasing a lock word of rank's, ring a waiter.
    virtual void register_lock_wait(int rank) = 0;
    virtual void ring_lock_waiters(int rank) = 0;

    // A peer that died (docs/guarantees.md): an MPI error class (raised, naming the rank)
    // once a process of the group has exited, else MPI_SUCCESS. Asked by long waits only.
    virtual int peer_failure() { return MPI_SUCCESS; }

    // A thread of this process waits in a sync call: serve what node peers posted to this
    // process's served slots and advertise the waiting thread (transport/shm/served.hpp), as a thread
    // waiting in the host MPI does through its progress hook. True: something was served.
    virtual bool serve_while_waiting() { return false; }

protected:
    ~EpochHost() = default;
};

}  // namespace fastrma::detail
