// lock_protocol.cpp — see lock_protocol.hpp.
#include "epochs/lock_protocol.hpp"

#include "ops/state_words.hpp"

namespace fastrma::detail::lockproto {

namespace {
constexpr std::uint64_t kMinusOne = ~0ull;  // fetch-add of -1 (two's complement)

// A process's lock words, as the two-level rules reach them: through a transport's atomics.
struct ByTransport {
    Transport& tp;
    const PeerRegion& p;
    std::uint64_t rmw(std::size_t w, AtomicOp op, std::uint64_t x, std::uint64_t c = 0) const {
        return tp.atomic8(p, w, op, x, c);
    }
    // True when the word is mapped here and shows bits in mask (a fetch-add of 0: the value
    // stays): an attempt that would fail goes no further and leaves no transient count for
    // others' attempts to trip on. Behind a round trip it looks at nothing (false).
    bool shows(std::size_t w, std::uint64_t mask) const {
        return tp.caps(p).load_store && (tp.atomic8(p, w, AtomicOp::fetch_add, 0) & mask);
    }
};

template <class W>
bool take_shared(const W& t) {
    if (t.shows(kLockLocal, kLocalExclusive)) return false;
    std::uint64_t old = t.rmw(kLockLocal, AtomicOp::fetch_add, 1);
    if (!(old & kLocalExclusive)) return true;
    t.rmw(kLockLocal, AtomicOp::fetch_add, kMinusOne);
    return false;
}

template <class W>
bool take_exclusive_target(const W& t) {
    return t.rmw(kLockLocal, AtomicOp::compare_swap, kLocalExclusive, 0) == 0;
}

// An exclusive holder's count on the master; fails (undone) while lock_all holders exist.
template <class W>
bool take_master(const W& master) {
    if (master.shows(kLockGlobal, ~kLow32)) return false;
    if (!(master.rmw(kLockGlobal, AtomicOp::fetch_add, 1) >> 32)) return true;
    master.rmw(kLockGlobal, AtomicOp::fetch_add, kMinusOne);
    return false;
}

// Both words one after the other: the master's count, then the target's bit.
template <class M, class T>
bool take_exclusive(const M& master, const T& t) {
    if (t.shows(kLockLocal, ~0ull) || !take_master(master)) return false;
    if (take_exclusive_target(t)) return true;
    master.rmw(kLockGlobal, AtomicOp::fetch_add, kMinusOne);
    return false;
}

bool take_shared(Transport& tp, const PeerRegion& t) { return take_shared(ByTransport{tp, t}); }
bool take_master(Transport& tm, const PeerRegion& master) { return take_master(ByTransport{tm, master}); }

bool same_peer(const PeerRegion& a, const PeerRegion& b) { return a.rank >= 0 && a.rank == b.rank; }
}  // namespace

bool try_shared(Transport& tp, const PeerRegion& t) {
    if (tp.caps(t).queues_locks) {
        tp.lock_request(t, Transport::LockRequest::shared);
        return true;
    }
    return take_shared(tp, t);
}

bool try_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& t, bool beside) {
    const bool master_remote = tm.caps(master).needs_target_cpu;
    if (tt.caps(t).queues_locks && (!master_remote || beside || (&tm == &tt && same_peer(master, t)))) {
        // The target grants it (am): no round trip here, the epoch's ops follow the request.
        if (master_remote) {  // the master is the target or beside it: the target takes both words
            tt.lock_request(t, Transport::LockRequest::exclusive_with_master);
            return true;
        }
        // The master's count here (our own or a node peer's word), the target's bit there.
        if (!take_master(tm, master)) return false;
        tt.lock_request(t, Transport::LockRequest::exclusive);
        return true;
    }
    if (!tt.caps(t).load_store) {
        // The target's word behind a round trip (am with this process not the master, ofi):
        // both atomics in flight at once, one round trip instead of two. Mutual exclusion
        // only needs both to go through their words atomically; the order between them does
        // not matter (a transient exclusive bit on t only makes a concurrent shared locker
        // retry).
        std::uint64_t g = 0, l = 0;
        const std::uint64_t tg = tm.atomic8_start(master, kLockGlobal, AtomicOp::fetch_add, 1, 0, &g);
        const std::uint64_t tl = tt.atomic8_start(t, kLockLocal, AtomicOp::compare_swap, kLocalExclusive, 0, &l);
        tm.atomic8_finish(master, tg);
        tt.atomic8_finish(t, tl);
        const bool no_lock_all = !(g >> 32), mine = l == 0;
        if (no_lock_all && mine) return true;
        // Undo what we got; one-way (applied before our next attempt: requests to one peer
        // apply in order).
        if (mine) tt.notify8(t, kLockLocal, AtomicOp::fetch_add, ~kLocalExclusive + 1);
        tm.notify8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
        return false;
    }
    return take_exclusive(ByTransport{tm, master}, ByTransport{tt, t});
}

bool grant(Transport& tp, const PeerRegion& me, const PeerRegion& master, Transport::LockRequest what) {
    switch (what) {
    case Transport::LockRequest::shared:
        return take_shared(tp, me);
    case Transport::LockRequest::exclusive:
        return take_exclusive_target(ByTransport{tp, me});
    case Transport::LockRequest::exclusive_with_master:
        return take_exclusive(ByTransport{tp, master}, ByTransport{tp, me});
    }
    return false;
}

bool try_lock_all(Transport& tp, const PeerRegion& master) {
    if (ByTransport{tp, master}.shows(kLockGlobal, kLow32)) return false;
    std::uint64_t g = tp.atomic8(master, kLockGlobal, AtomicOp::fetch_add, kGlobalLockAll);
    if ((g & kLow32) == 0) return true;
    tp.atomic8(master, kLockGlobal, AtomicOp::fetch_add, ~kGlobalLockAll + 1);
    return false;
}

void unlock_shared(Transport& tp, const PeerRegion& t) {
    const Transport::Release r{kLockLocal, AtomicOp::fetch_add, kMinusOne};
    tp.release(t, &r, 1);
}

// The target's release completes the epoch (Transport::release); the master's count is
// only announced: one-way, since nothing of ours waits on it, and our own next attempt
// there is applied after it. A master that is the target takes both in one message.
void unlock_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& t) {
    const Transport::Release r[2] = {{kLockLocal, AtomicOp::fetch_add, ~kLocalExclusive + 1},
                                     {kLockGlobal, AtomicOp::fetch_add, kMinusOne}};
    if (&tm == &tt && same_peer(master, t)) {
        tt.release(t, r, 2);
        return;
    }
    tt.release(t, r, 1);
    tm.notify8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
}

// The caller flushed every target first: one-way as above.
void unlock_all(Transport& tp, const PeerRegion& master) {
    tp.notify8(master, kLockGlobal, AtomicOp::fetch_add, ~kGlobalLockAll + 1);
}

}  // namespace fastrma::detail::lockproto
