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

void unlock_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& t) {
    tt.atomic8(t, kLockLocal, AtomicOp::fetch_add, ~kLocalExclusive + 1);
    tm.atomic8(master, kLockGlobal, AtomicOp::fetch_add, kMinusOne);
}

void unlock_all(Transport& tp, const PeerRegion& master) {
    tp.atomic8(master, kLockGlobal, AtomicOp::fetch_add, ~kGlobalLockAll + 1);
}

}  // namespace fastrma::detail::lockproto
