// split.hpp — a node peer of a window whose other peers are on the network: its data moves
// by the node's shared memory (load/store, cross-memory attach), its synchronization words
// and accumulates by the network transport. Every atomic on the peer's memory then stays in
// the network's atomicity domain, which off-node origins use for the same words (never CPU
// and NIC atomics on one location: docs/accumulate.md), while puts and gets cost a copy.
//
// The data side completes at post (Post::done), so completion is the network side's: flush,
// mark/reached and failed go there, after a memory fence for the data side. A put or get
// issued after an accumulate or atomic that is still on the network to the same peer waits
// for it first (a flush of that peer), so that it does not overtake it.
#pragma once

#include <atomic>
#include <memory>

#include "transport/transport.hpp"

namespace fastrma::detail {

class SplitTransport final : public Transport {
public:
    // data: the node transport; sync: the window's network transport. Neither is owned.
    SplitTransport(Transport& data, Transport& sync, int nprocs)
        : data_(data), sync_(sync), pending_(std::make_unique<std::atomic<bool>[]>(std::size_t(nprocs))) {}
    const char* name() const override { return "shm+ofi"; }
    Caps caps(const PeerRegion& p) const override {
        Caps c = sync_.caps(p);
        c.load_store = data_.caps(p).load_store;  // puts and gets by copy where mapped
        c.native_atomics = false;  // element atomics only through accumulate() (native_type)
        c.strided_piece_max = 0;
        // inline_max stays the network's: an accumulate goes there, and a put that must queue
        // keeps its origin data up to it (Epochs::hold_origin), as on the network.
        return c;
    }
    Post put(const PeerRegion& p, const Chunk* c, std::size_t n) override {
        after_network(p);
        return data_.put(p, c, n);
    }
    Post get(const PeerRegion& p, const Chunk* c, std::size_t n) override {
        after_network(p);
        return data_.get(p, c, n);
    }
    std::uint64_t atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);  // data stores before the word changes
        return sync_.atomic8(p, word, op, operand, compare);
    }
    std::uint64_t atomic8_start(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                                std::uint64_t compare, std::uint64_t* old) override {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return sync_.atomic8_start(p, word, op, operand, compare, old);
    }
    void atomic8_finish(const PeerRegion& p, std::uint64_t token) override { sync_.atomic8_finish(p, token); }
    void notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        sync_.notify8(p, word, op, operand);
    }
    void complete_notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override {
        flush(p);
        sync_.notify8(p, word, op, operand);
    }
    std::uint64_t mark(const PeerRegion& p) override { return sync_.mark(p); }
    bool reached(const PeerRegion& p, std::uint64_t token) override { return sync_.reached(p, token); }
    void flush(const PeerRegion& p) override {
        data_.flush(p);
        pending_[std::size_t(p.rank)].store(false, std::memory_order_relaxed);
        sync_.flush(p);
    }
    void flush_local(const PeerRegion& p) override {
        data_.flush_local(p);
        sync_.flush_local(p);
    }
    Post accumulate(const PeerRegion& p, int kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n,
                    std::size_t elem_bytes, const void* src, const void* compare, void* result) override {
        pending_[std::size_t(p.rank)].store(true, std::memory_order_relaxed);
        return sync_.accumulate(p, kind, op_id, type_id, toff, n, elem_bytes, src, compare, result);
    }
    bool native_type(int type_id) const override { return sync_.native_type(type_id); }
    int failed(const PeerRegion& p, const char* call) override { return sync_.failed(p, call); }
    bool data_must_wait(const PeerRegion& p) const override {
        return pending_[std::size_t(p.rank)].load(std::memory_order_relaxed);
    }

private:
    // An accumulate to p may still be on the network: complete it before data moves.
    void after_network(const PeerRegion& p) {
        if (pending_[std::size_t(p.rank)].load(std::memory_order_relaxed)) flush(p);
    }
    Transport& data_;
    Transport& sync_;
    std::unique_ptr<std::atomic<bool>[]> pending_;  // per rank: an accumulate went since its last flush
};

}  // namespace fastrma::detail
