// lock_protocol.cpp — see lock_protocol.hpp.
#include "epochs/lock_protocol.hpp"

#include "ops/state_words.hpp"

namespace fastrma::detail::lockproto {

namespace {
constexpr std::uint64_t kMinusOne = ~0ull;  // fetch-add of -1 (two's complement)
}

bool try_shared(Transport& tp, const PeerRegion& t) {
    std::uint64_t old = tp.atomic8(t, kLockLocal, AtomicOp::fetch_add, 1);
    if (!(old & kLocalExclusive)) return true;
    tp.atomic8(t, kLockLocal, AtomicOp::fetch_add, kMinusOne);
    return false;
}

bool try_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& t) {
    if (tm.caps(master).needs_target_cpu && tt.caps(t).needs_target_cpu) {
        // Both words behind a round trip (am, this process not the master): both atomics in
        // flight at once, one round trip instead of two. Mutual exclusion only needs both
        // to go through their words atomically; the order between them does not matter (a
        // transient exclusive bit on t only makes a concurrent shared locker retry).
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
    std::uint64_t g = tm.atomic8(master, kLockGlobal, AtomicOp::fetch_add, 1);
    if (g >> 32) {  // lock_all holders
        tm.atomic8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
        return false;
    }
    if (tt.atomic8(t, kLockLocal, AtomicOp::compare_swap, kLocalExclusive, 0) == 0) return true;
    tm.atomic8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
    return false;
}

bool try_lock_all(Transport& tp, const PeerRegion& master) {
    std::uint64_t g = tp.atomic8(master, kLockGlobal, AtomicOp::fetch_add, kGlobalLockAll);
    if ((g & kLow32) == 0) return true;
    tp.atomic8(master, kLockGlobal, AtomicOp::fetch_add, ~kGlobalLockAll + 1);
    return false;
}

void unlock_shared(Transport& tp, const PeerRegion& t) {
    tp.atomic8(t, kLockLocal, AtomicOp::fetch_add, kMinusOne);
}

// The target's release is answered (over am its answer is the remote completion of the
// epoch's ops); the master's count is only announced: one-way, since nothing of ours waits
// on it, and our own next attempt there is applied after it.
void unlock_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& t) {
    tt.atomic8(t, kLockLocal, AtomicOp::fetch_add, ~kLocalExclusive + 1);
    tm.notify8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
}

// The caller flushed every target first: one-way as above.
void unlock_all(Transport& tp, const PeerRegion& master) {
    tp.notify8(master, kLockGlobal, AtomicOp::fetch_add, ~kGlobalLockAll + 1);
}

}  // namespace fastrma::detail::lockproto
