// epochs.hpp — a window's synchronization: its access and exposure state machines, the
// per-target queue of operations that cannot go yet, and the protocols of fence, PSCW,
// lock / lock_all and flush, written once against the Transport interface (each protocol
// in a file of its own: fence.cpp, pscw.cpp, lock.cpp, flush.cpp; the queue in queue.cpp).
//
// Every call checks the state against the one table of epoch_state.hpp first, then
// completes what must complete, then transitions. Every blocking call waits
// with wait_until() (one primitive: spin, then yield, then sleep on the doorbell, helping
// the progress engine and serving the window's requests meanwhile).
//
// The 3D queue: an op to a granted target with nothing queued before it is
// issued by the posting thread at once (no Op allocated); otherwise — its lock not granted
// yet, ops queued before it, or its transport full (Post::retry), in any synchronization
// mode — it is queued on its Target and issued by the progress thread (poll) or by the
// sync call that completes it (flush, unlock, unlock_all, fence, complete), which waits for
// the transport to take it. In window-wide epochs (fence, PSCW, lock_all) a Target is made
// only for such a queue (AccessState::open) and goes when it drained.
// Each Target counts the ops issued to it and keeps the first error of one issued by
// another thread (the progress thread, behind its lock grant), which the flush or unlock
// that completes them reports. What is outstanding at a target after issue is counted by
// its transport (Transport::flush waits until its completions reach its posts).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/config.hpp"
#include "base/pool.hpp"
#include "base/spin_lock.hpp"
#include "epochs/epoch_state.hpp"
#include "epochs/host.hpp"
#include "epochs/lock_protocol.hpp"
#include "epochs/slot_table.hpp"
#include "progress/progress.hpp"
#include "progress/spin_wait.hpp"
#include "transport/shm/node.hpp"

namespace fastrma::detail {

class Epochs {
public:
    Epochs(EpochHost& host, ProgressEngine& progress, const Config& cfg, Pool<Op>* global_ops,
           Pool<Target>* global_targets);
    ~Epochs();
    Epochs(const Epochs&) = delete;
    Epochs& operator=(const Epochs&) = delete;

    // Windows whose node peers' state words are mapped here and taken by every process with
    // CPU atomics (NodeTransport::state). Set once at creation, before any epoch; the locks
    // on those peers then take the words directly, and lock epochs keep no window-wide state
    // (held_, below).
    // - spanning false: every peer is a node peer (no message or network transport in the
    //   window): the one-word variant of lock_protocol.hpp.
    // - spanning true: a window that spans nodes, its off-node peers over a transport whose
    //   targets grant locks themselves on their own words (am): the node peers' words by the
    //   two-level rules with CPU atomics; a lock on an off-node peer is a Target as before.
    void map_states(NodeTransport* node, bool spanning) {
        states_ = node;
        spanning_ = spanning;
        held_ = std::make_unique<HeldWord[]>(std::size_t(nprocs_));
    }
    // Rank r's state words when mapped (above), else null.
    std::uint64_t* mapped_state(int r) const { return states_ ? states_->member_state(r) : nullptr; }
    // The same where every peer's are (the one-word variant), else null.
    std::uint64_t* one_word_state(int r) const { return spanning_ ? nullptr : mapped_state(r); }

    // The window's info no_locks=true: lock and lock_all are errors.
    void set_no_locks(bool yes) {
        no_locks_.store(yes, std::memory_order_relaxed);
        if (yes) fast_locks_.store(false, std::memory_order_seq_cst);  // the next lock asks under epoch_mu_
    }

    // Active target (groups as window ranks).
    int fence(int assert_);
    int post(const std::vector<int>& group, int assert_);  // MPI_Win_post
    int start(const std::vector<int>& group, int assert_);
    int complete();
    int wait();
    int test(bool* done);

    // Passive target. lock and unlock of a direct lock (mapped words) inline, below.
    inline int lock(int lock_type, int rank, int assert_);
    inline int unlock(int rank);
    int lock_all(int assert_);
    int unlock_all();
    int flush(int rank, bool local);
    int flush_all(bool local);

    // MPI_Win_free's check: no epoch open here (MPI_ERR_RMA_SYNC otherwise).
    int check_free();

    // An op (validated) to rank r: checks the epoch, then issues it now or queues it.
    // done: see Window::post. An MPI error class (raised) or MPI_SUCCESS.
    int submit(const char* call, int r, const Op& desc, Completion* done);

    // The fast paths' test: an op to rank may go straight to it now (a granted lock_all, a
    // fence epoch that has operations, a PSCW access epoch that includes it, or a granted
    // lock on it; each with nothing queued for rank before; a lock's Target counts the op
    // as issued).
    inline bool direct(int rank);
    // A lock epoch on rank is granted without a Target (mapped words: held_ is direct), so
    // a flush of rank is the transport's flush.
    bool lock_direct(int rank) const {
        return held_ && static_cast<unsigned>(rank) < static_cast<unsigned>(nprocs_) &&
               held_[rank].load(std::memory_order_acquire) >= kHeldDirect;
    }
    AccessMode mode() const { return mode_.load(std::memory_order_acquire); }
    // No Target of a window-wide epoch exists (nothing queued, no error of a queued op
    // waiting to be reported): a flush in lock_all has only the transports to complete.
    bool no_open_targets() const { return open_targets_.load(std::memory_order_acquire) == 0; }

    // The progress thread's pass: retries lock acquisitions whose time has come, issues the
    // queues of granted targets.
    Poll poll();

    // For tests and statistics.
    Pool<Op>& op_pool() { return op_pool_; }
    std::size_t queued_ops() const { return queued_.load(); }
    std::size_t metadata_bytes() const;

    // The one wait primitive: until done() holds, help progress (and serve the window's
    // requests), spinning, then yielding, then sleeping on the doorbell. lock_rank >= 0:
    // waiting for that rank's lock words (and the master's, if lock_excl): a long sleep
    // registers for the releaser's doorbell. MPI_SUCCESS, or the error class of a peer that
    // died meanwhile (EpochHost::peer_failure, asked every kAliveCheckNs of waiting, whether
    // the wait spins, progresses, sleeps or blocks in a transport).
    template <class Done>
    int wait_until(Done done, int lock_rank = -1, bool lock_excl = false) {
        for (WaitPace pace; !done();)
            if (int e = backoff(pace, lock_rank, lock_excl)) return e;
        return MPI_SUCCESS;
    }

private:
    struct WaitPace {
        SpinWait spin;  // the spin phase
        unsigned step = 0;  // yields, then sleeps, since the spin phase ended
        Every alive{kAliveCheckNs};  // when peers' liveness is asked (EpochHost::peer_failure)
    };
    int backoff(WaitPace& pace, int lock_rank = -1, bool lock_excl = false);
    // Takes a slot's lock for a waiter: only tries it, backing off meanwhile (the progress
    // thread may hold it across a provider round trip and retake it at once; a waiter that
    // blocked on it would never ask about dead peers). MPI_SUCCESS with sl owning s.mu, or
    // backoff's error.
    int take_slot(Slot& s, WaitPace& pace, std::unique_lock<SpinLock>& sl) {
        for (sl = std::unique_lock(s.mu, std::try_to_lock); !sl.owns_lock();
             sl = std::unique_lock(s.mu, std::try_to_lock))
            if (int e = backoff(pace)) return e;
        return MPI_SUCCESS;
    }

    Transport& tp(int r) const { return h_.tp(r); }
    PeerRegion peer(int r) const { return h_.peer(r); }
    std::uint64_t* my_word(std::size_t w) const { return h_.my_word(w); }
    bool in_start_group(int r) const { return std::binary_search(start_group_.begin(), start_group_.end(), r); }
    // MPI_SUCCESS when the table allows call now, else MPI_ERR_RMA_SYNC (raised). A
    // per_target mode with no lock held (mapped windows keep it after the last unlock) is
    // left for none first; only a call illegal in a lock epoch gets there, and every such
    // caller holds epoch_mu_ (lock_all, unlock_all, fence, start, complete, free).
    int sync_error(SyncCall call, const char* name, AccessMode m, bool exposed) {
        if (legal(call, m, exposed)) [[likely]]
            return MPI_SUCCESS;
        if (m == AccessMode::per_target && held_ && leave_idle_lock_mode() && legal(call, AccessMode::none, exposed))
            return MPI_SUCCESS;
        return sync_failure(call, name, mode_.load(), exposed);
    }
    int sync_failure(SyncCall call, const char* name, AccessMode m, bool exposed) const;

    // Locks (lock.cpp). The caller holds the target's slot mutex unless said otherwise.
    bool try_lock(Target* t);  // one attempt at t's lock words
    bool try_lock_all_once();  // one attempt at lock_all
    // A retry of a pending lock_all (epoch_mu_ held), paced: after a failure the next
    // attempt waits a randomised, doubling back-off (to poll_max_us) unless a releaser
    // kicked us. Each failed attempt sets bits that make others' locks fail: retrying at
    // every pass kept exclusive lockers out for seconds across two hosts.
    bool retry_lock_all(std::uint64_t now, bool kicked);
    bool try_acquire(Target* t);
    void release(Target* t);
    // lock and unlock past their inline paths (lock.cpp).
    int lock_general(int lock_type, int rank, int assert_);
    int unlock_general(int rank);
    // Mapped windows (held_): a lock without epoch_mu_ (kSlowLock: the gate is closed, ask
    // under epoch_mu_), the lock that must wait (a lock_called Target), the release of a
    // direct lock's word, and the way out of an idle per_target mode (epoch_mu_ held).
    static constexpr int kSlowLock = -1;
    inline int lock_mapped(int lock_type, int rank, int assert_);
    inline bool try_mapped(int rank, std::uint64_t* tw, bool shared);  // one attempt on mapped words
    // attempt: one try at the words now (a lock on an off-node peer, not tried yet).
    int lock_queued(int lock_type, int rank, int assert_, bool attempt);
    // A lock epoch's Target on rank, lock_called (the fields a lock sets); and what a lock
    // whose Target must wait does before it returns: on ourselves, wait for the grant (MPI
    // lets us load and store under it); remote, wake the progress thread to retry it.
    void set_lock_target(Target* t, int lock_type, int rank, int assert_);
    // A new lock Target's first attempt (slot mutex held): granted (true), or left as it was.
    bool try_acquire_new(Target* t);
    int no_lock_target(int rank);  // MPI_ERR_NO_MEM, raised
    int already_locked(int rank, bool busy);  // MPI_ERR_RMA_SYNC, raised (busy: another thread is at it)
    int finish_pending_lock(Target* t, int lock_type, int rank);
    inline void release_mapped(int rank, bool shared);
    void wake_parked_lock_requests();  // after releasing my own words (release, release_mapped)
    int unlock_held(int rank);
    bool leave_idle_lock_mode();
    bool any_lock_held() const;
    // After releasing a mapped lock word of rank's (state: its words): ring a waiter if
    // rank's waiter bitmap has one.
    void ring_lock_waiters_mapped(int rank, const std::uint64_t* state) {
        const std::uint64_t* words = state + lock_waiters_word0(nprocs_);
        const std::size_t nw = post_bitmap_words(nprocs_);
        for (std::size_t i = 0; i < nw; ++i)
            if (__atomic_load_n(&words[i], __ATOMIC_RELAXED)) {
                h_.ring_lock_waiters(rank);
                return;
            }
    }
    // A direct lock whose op must queue becomes a granted Target (under rank's slot mutex):
    // null when the lock is not direct (any more) or no Target is free.
    Target* materialize(int rank);
    int flush_direct(int rank, SyncFlag flag);  // flush of a direct lock (no Target)
    // Before a direct lock's word is released: the node transport's flush (every peer: no
    // PeerRegion to make on this path) and what it met; nothing but three loads when it
    // holds nothing (the word's release orders the epoch's stores).
    int unlock_direct_complete(int rank) {
        if (states_->idle()) [[likely]]
            return MPI_SUCCESS;
        states_->flush_all();
        return h_.completion_error("FRMA_Win_unlock", rank, rank + 1);
    }
    int ensure_lock_all();  // LOCK_ALL_CALLED -> GRANTED (blocking, helping progress)

    // Flush (flush.cpp): completion of everything issued to rank; unlock's core (remove:
    // the Target goes to *freed when given, else to its pool).
    int wait_target(int rank, SyncFlag flag, bool remove, Target** freed = nullptr);

    // The queue (queue.cpp).
    // Issues t's queued ops (granted or open) in order: an MPI error class, or kIssueRetry
    // when its transport refused the first one left (it stays queued).
    int drain(Target* t);
    // Window-wide epochs: issue every op queued for rank (or for every rank), waiting for
    // its transport; report the first error of one; free the emptied Targets.
    int drain_open(int rank, const char* call);
    int drain_open_all(const char* call);
    bool queued_for(int rank);  // ops wait in rank's queue (they go first)
    bool direct_slow(int rank, AccessMode m);  // direct() past its common case
    // One issue from the calling thread, with a request's tracking: an MPI error class
    // (raised) or kIssueRetry.
    int issue_now(const char* call, int r, const Op& desc, Completion* done);
    int issue_waiting(const char* call, int r, const Op& desc, Completion* done);  // ... until taken
    // A queued put's or accumulate's small origin data copied into it, up to the transport's
    // inline_max: the caller may reuse its buffer at once, as with a post.
    static void hold_origin(Op& op, std::size_t inline_max);
    Op* alloc_op();  // may collect garbage; never holds a slot mutex
    bool collect_garbage();
    int check_epoch_for_op(const char* call, int rank, AccessMode* m);
    void count_op(RmaKind k);

    EpochHost& h_;
    ProgressEngine& progress_;
    const Config& cfg_;
    const int rank_, nprocs_;
    std::atomic<bool> no_locks_{false};

    NodeTransport* states_ = nullptr;  // map_states()
    bool spanning_ = false;  // map_states()

    SpinLock epoch_mu_;  // held for a few dozen instructions (state checks, transitions)
    std::atomic<AccessMode> mode_{AccessMode::none};
    int n_locks_ = 0;  // per-target locks held (epoch_mu_; windows without held_)
    Target* spare_target_ = nullptr;  // the last unlocked target, for the next lock (epoch_mu_)
    int lock_all_assert_ = 0;
    bool lock_all_acquired_ = false;
    std::uint32_t lock_all_backoff_us_ = 0;  // retry_lock_all (epoch_mu_)
    std::uint64_t lock_all_next_try_ns_ = 0;
    std::uint64_t lock_all_jitter_ = 0x9e3779b97f4a7c15ull;
    std::atomic<std::uint64_t> kick_seen_{0};  // the last kLockKick value poll saw

    // PSCW: the access side's group, the exposure side's bookkeeping (epoch_mu_).
    std::vector<int> start_group_;  // sorted
    bool exposed_ = false;
    std::uint64_t expose_expected_ = 0, completes_seen_ = 0;
    // PSCW: the value of each target's bit in my post bitmap when I last saw its post (a
    // post flips the bit: start waits for it to differ, nothing is cleared).
    std::vector<std::uint64_t> posts_seen_;

    SlotTable slots_;
    Pool<Op> op_pool_;
    Pool<Target> target_pool_;
    std::atomic<std::size_t> queued_{0};  // ops waiting in Target queues
    std::atomic<int> open_targets_{0};  // Targets of window-wide epochs (AccessState::open)
    std::atomic<int> waiting_targets_{0};  // targets whose lock is not granted yet
    // Mapped windows: what this process holds at each rank (docs/epochs.md, Locks). Free,
    // busy (a lock or unlock of another thread is between states), queued (a Target in the
    // slot table has the lock) or direct (granted, no Target; the flags say which lock).
    // Only a CAS leaves free or direct; a thread that moved a word to busy is its only
    // writer until it stores the next state.
    static constexpr std::uint32_t kHeldFree = 0, kHeldBusy = 1, kHeldQueued = 2, kHeldDirect = 8, kHeldShared = 1,
                                   kHeldNocheck = 2;  // flags of a direct word
    // One cache line each: threads that lock different targets do not share a line.
    struct alignas(64) HeldWord : std::atomic<std::uint32_t> {};
    std::unique_ptr<HeldWord[]> held_;
    // A lock may claim held_ without epoch_mu_ (the mode is per_target); closed while
    // leave_idle_lock_mode reads held_.
    std::atomic<bool> fast_locks_{false};
};

inline int Epochs::lock_mapped(int lock_type, int rank, int assert_) {
    std::atomic<std::uint32_t>& h = held_[rank];
    std::uint32_t v = kHeldFree;
    // The process's claim on rank: one lock per rank, whichever thread asks.
    if (!h.compare_exchange_strong(v, kHeldBusy, std::memory_order_seq_cst, std::memory_order_relaxed)) [[unlikely]]
        return already_locked(rank, v == kHeldBusy);
    // Written held_ before reading the gate (leave_idle_lock_mode: the other way round).
    if (!fast_locks_.load(std::memory_order_seq_cst)) [[unlikely]] {
        h.store(kHeldFree, std::memory_order_release);
        return kSlowLock;
    }
    const bool shared = lock_type == MPI_LOCK_SHARED, nocheck = assert_ & MPI_MODE_NOCHECK;
    std::uint64_t* const tw = mapped_state(rank);
    if (!tw) [[unlikely]]
        return lock_queued(lock_type, rank, assert_, true);  // an off-node peer: a Target
    if (nocheck || try_mapped(rank, tw, shared)) [[likely]] {
        h.store(kHeldDirect | (shared ? kHeldShared : 0) | (nocheck ? kHeldNocheck : 0), std::memory_order_release);
        return MPI_SUCCESS;
    }
    return lock_queued(lock_type, rank, assert_, false);
}

inline bool Epochs::try_mapped(int rank, std::uint64_t* tw, bool shared) {
    if (spanning_) [[unlikely]]
        return shared ? lockproto::try_shared_two_level(tw)
                      : lockproto::try_exclusive_two_level(mapped_state(h_.lock_master(rank)), tw);
    return shared ? lockproto::try_shared_mapped(tw) : lockproto::try_exclusive_mapped(mapped_state(0), tw);
}

inline int Epochs::lock(int lock_type, int rank, int assert_) {
    // A lock on mapped words while the mode is per_target: lock_mapped, no window-wide state.
    if (held_ && static_cast<unsigned>(rank) < static_cast<unsigned>(nprocs_) &&
        (lock_type == MPI_LOCK_EXCLUSIVE || lock_type == MPI_LOCK_SHARED) && !(assert_ & ~MPI_MODE_NOCHECK) &&
        fast_locks_.load(std::memory_order_acquire)) [[likely]]
        if (int rc = lock_mapped(lock_type, rank, assert_); rc != kSlowLock) return rc;
    return lock_general(lock_type, rank, assert_);
}

inline void Epochs::release_mapped(int rank, bool shared) {
    std::uint64_t* const tw = mapped_state(rank);
    const int m = spanning_ ? h_.lock_master(rank) : 0;
    if (spanning_) [[unlikely]]
        lockproto::unlock_two_level(mapped_state(m), tw, shared);
    else if (shared)
        lockproto::unlock_shared_mapped(tw);
    else
        lockproto::unlock_exclusive_mapped(tw);
    // Waiters for this target's word, and (exclusive) lock_all waiters, who wait on the
    // master's bitmap; each bitmap read here first, rung only when someone registered.
    ring_lock_waiters_mapped(rank, tw);
    if (!shared && rank != m) ring_lock_waiters_mapped(m, mapped_state(m));
    // An off-node origin's request parked at my agent for these words may take them now.
    if (spanning_ && rank == rank_) [[unlikely]]
        wake_parked_lock_requests();
}

inline int Epochs::unlock(int rank) {
    // A direct lock (unlock_held, inline): take it back, complete what the window left
    // beside the transport, release the word (ordering the epoch before the next holder).
    if (held_ && static_cast<unsigned>(rank) < static_cast<unsigned>(nprocs_)) {
        std::atomic<std::uint32_t>& h = held_[rank];
        std::uint32_t v = h.load(std::memory_order_relaxed);
        if (v >= kHeldDirect &&
            h.compare_exchange_strong(v, kHeldBusy, std::memory_order_acquire, std::memory_order_relaxed)) [[likely]] {
            const int rc = unlock_direct_complete(rank);
            if (!(v & kHeldNocheck)) release_mapped(rank, v & kHeldShared);
            h.store(kHeldFree, std::memory_order_release);
            return rc;
        }
    }
    return unlock_general(rank);
}

inline bool Epochs::direct(int rank) {
    // The common case inline (a window-wide epoch with nothing queued anywhere): two loads.
    const AccessMode m = mode_.load(std::memory_order_acquire);
    if ((m == AccessMode::lock_all_granted || m == AccessMode::fence_active) &&
        queued_.load(std::memory_order_relaxed) == 0) [[likely]]
        return true;
    // A lock epoch's direct lock on shared memory (ops complete at issue there: no Target
    // counts them).
    if (m == AccessMode::per_target && lock_direct(rank)) return true;
    return direct_slow(rank, m);
}

}  // namespace fastrma::detail
