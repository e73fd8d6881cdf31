// lock_protocol.hpp — the two-level lock protocol of foMPI / osc rdma, written once
// against transport atomics, so it runs on every transport.
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

#include "transport/transport.hpp"

namespace fastrma::detail::lockproto {

bool try_shared(Transport& tp, const PeerRegion& target);
// The master and the target may be reached by different transports (tm, tt).
bool try_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& target);
bool try_lock_all(Transport& tp, const PeerRegion& master);
// At a target: one attempt to take my own words for a queued request (me: my own region,
// through a transport that reaches it without my CPU).
bool grant(Transport& tp, const PeerRegion& me, Transport::LockRequest what);
void unlock_shared(Transport& tp, const PeerRegion& target);
void unlock_exclusive(Transport& tm, const PeerRegion& master, Transport& tt, const PeerRegion& target);
void unlock_all(Transport& tp, const PeerRegion& master);

// The same rules on words mapped here and updated with CPU atomics (EpochHost::mapped_state:
// node peers over shared memory), without a transport call: the lock fast path.
bool try_shared_mapped(std::uint64_t* target);
bool try_exclusive_mapped(std::uint64_t* master, std::uint64_t* target);
void unlock_shared_mapped(std::uint64_t* target);
void unlock_exclusive_mapped(std::uint64_t* master, std::uint64_t* target);

}  // namespace fastrma::detail::lockproto
