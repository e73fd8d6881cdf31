// lock_protocol.hpp — the two-level lock protocol of foMPI / osc rdma, written once
// against transport atomics, so it runs on every transport; and its one-word variant for
// windows on shared memory only (below).
//
// Words (ops/state_words.hpp): on the window's master (rank 0) the global word holds
// lock_all holders in its high 32 bits and exclusive holders in its low 32 bits; on every
// process the local word holds an exclusive bit and a shared count.
//   shared(t)    : fetch-add 1 on t.local; if the exclusive bit was set, undo -> retry later
//   exclusive(t) : fetch-add 1 on master.global (fails while lock_all holders exist), then
//                  CAS 0 -> EXCL on t.local; on failure undo both -> retry later
//   lock_all     : fetch-add 2^32 on master.global; if exclusive holders exist, undo
// Over a transport whose targets grant locks themselves (Caps::queues_locks: am), shared and
// exclusive become a request queued ahead of the epoch's ops (no round trip at lock time;
// the target holds our later requests until it could take the words above, see grant());
// an exclusive lock does so when the master's word is at hand (ours or a node peer's: its
// count is taken here first) or is the target's own.
// Every try_ function is one bounded attempt: callers own the back-off, so the progress
// thread and waiting sync calls can interleave attempts with other work.
#pragma once

#include "ops/state_words.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail::lockproto {

bool try_shared(Transport& tp, const PeerRegion& target);
// The master and the target may be reached by different transports (tm, tt).
// beside: the master is on the target's node, so a target that grants locks itself can
// take the master's word too (a master per node, EpochHost::lock_master).
bool try_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& target,
                   bool beside = false);
bool try_lock_all(Transport& tp, const PeerRegion& master);
// At a target: one attempt to take my own words for a queued request (me: my own region,
// through a transport that reaches it without my CPU).
// master: the words of my lock master (myself, or my node's first rank), reached by tp too.
bool grant(Transport& tp, const PeerRegion& me, const PeerRegion& master, Transport::LockRequest what);
void unlock_shared(Transport& tp, const PeerRegion& target);
void unlock_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& target);
void unlock_all(Transport& tp, const PeerRegion& master);

// Windows whose every peer is a node peer over shared memory (Epochs::map_states: no
// message or network transport anywhere in the window, so every process of it takes the
// words below with CPU atomics and none takes them through a transport) run a one-word
// variant, what osc sm costs: an exclusive lock is one CAS on the target's local word.
//   shared(t)    : CAS v -> v + 1 on t.local while v has no exclusive bit (never changes a
//                  word that has it, so the exclusive holder is its only writer)
//   exclusive(t) : CAS 0 -> EXCL on t.local, then read master.global: lock_all holders
//                  there -> store 0 back (undo) -> retry later
//   lock_all     : fetch-add 2^32 on master.global, then read every process's t.local: an
//                  exclusive bit anywhere -> undo -> retry later
//   unlock       : exclusive: a release store of 0 (no one else writes the word meanwhile);
//                  shared: fetch-add -1; lock_all: fetch-add -2^32 on master.global
// An exclusive locker writes its word then reads the master's, a lock_all writes the
// master's then reads every local word (both sequentially consistent): one of any two
// concurrent attempts sees the other, so they never both hold; both may retry. Neither
// waits while holding, so a process that holds exclusive locks while taking others cannot
// deadlock against a lock_all. The master's low 32 bits stay 0 in this variant.
inline bool try_shared_mapped(std::uint64_t* target) {
    std::uint64_t* const w = target + kLockLocal;
    std::uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (!(v & kLocalExclusive))
        if (__atomic_compare_exchange_n(w, &v, v + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return true;
    return false;
}

inline bool try_exclusive_mapped(std::uint64_t* master, std::uint64_t* target) {
    std::uint64_t* const w = target + kLockLocal;
    std::uint64_t v = 0;
    if (!__atomic_compare_exchange_n(w, &v, kLocalExclusive, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return false;
    if (!(__atomic_load_n(master + kLockGlobal, __ATOMIC_SEQ_CST) >> 32)) return true;
    __atomic_store_n(w, 0, __ATOMIC_RELEASE);  // a lock_all holds (or tries): it goes first
    return false;
}

// state(r): rank r's words, for r in [0, nprocs).
template <class StateOf>
bool try_lock_all_mapped(std::uint64_t* master, int nprocs, StateOf state) {
    __atomic_fetch_add(master + kLockGlobal, kGlobalLockAll, __ATOMIC_SEQ_CST);
    for (int r = 0; r < nprocs; ++r)
        if (__atomic_load_n(state(r) + kLockLocal, __ATOMIC_SEQ_CST) & kLocalExclusive) {
            __atomic_fetch_sub(master + kLockGlobal, kGlobalLockAll, __ATOMIC_SEQ_CST);
            return false;
        }
    return true;
}

inline void unlock_shared_mapped(std::uint64_t* target) {
    __atomic_fetch_sub(target + kLockLocal, 1, __ATOMIC_RELEASE);
}

inline void unlock_exclusive_mapped(std::uint64_t* target) {
    __atomic_store_n(target + kLockLocal, 0, __ATOMIC_RELEASE);
}

inline void unlock_all_mapped(std::uint64_t* master) {
    __atomic_fetch_sub(master + kLockGlobal, kGlobalLockAll, __ATOMIC_RELEASE);
}

// The two-level rules above on words mapped here, with CPU atomics: what a node peer of a
// window that spans nodes runs on its node's words (Epochs::map_states, spanning), which
// every other process of the node takes with CPU atomics too (through the node transport,
// or its agent granting an off-node origin's request), so both meet on the same words.
// Each first reads the word it would change: an attempt that would fail changes nothing (no
// transient count for a concurrent attempt of the other kind to fail on).
inline bool try_shared_two_level(std::uint64_t* target) {
    std::uint64_t* const w = target + kLockLocal;
    if (__atomic_load_n(w, __ATOMIC_SEQ_CST) & kLocalExclusive) return false;
    if (!(__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST) & kLocalExclusive)) return true;
    __atomic_fetch_sub(w, 1, __ATOMIC_SEQ_CST);
    return false;
}

inline bool try_exclusive_two_level(std::uint64_t* master, std::uint64_t* target) {
    std::uint64_t* const g = master + kLockGlobal;
    if (__atomic_load_n(target + kLockLocal, __ATOMIC_SEQ_CST) || (__atomic_load_n(g, __ATOMIC_SEQ_CST) >> 32))
        return false;
    if (__atomic_fetch_add(g, 1, __ATOMIC_SEQ_CST) >> 32) {
        __atomic_fetch_sub(g, 1, __ATOMIC_SEQ_CST);
        return false;
    }
    std::uint64_t v = 0;
    if (__atomic_compare_exchange_n(target + kLockLocal, &v, kLocalExclusive, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
        return true;
    __atomic_fetch_sub(g, 1, __ATOMIC_SEQ_CST);
    return false;
}

// Shared: the count goes; exclusive: the bit goes (shared lockers may have added and not yet
// taken back a count meanwhile), then the master's count.
inline void unlock_two_level(std::uint64_t* master, std::uint64_t* target, bool shared) {
    if (shared) {
        __atomic_fetch_sub(target + kLockLocal, 1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_fetch_sub(target + kLockLocal, kLocalExclusive, __ATOMIC_RELEASE);
    __atomic_fetch_sub(master + kLockGlobal, 1, __ATOMIC_RELEASE);
}

}  // namespace fastrma::detail::lockproto
