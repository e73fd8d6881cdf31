// pscw.cpp — post / start / complete / wait / test (see epochs.hpp).
//
// post: flips the poster's bit in each origin's post bitmap (an 8-byte fetch_xor through the
// transport), or opens the gate of a transport that gates access epochs; start: waits
// locally until the bit of every target of its group differs from the value it saw at its
// last start with that target (a target posts again only after its wait, which needs this
// origin's complete: at most one post per pair is outstanding, so one flip is one post and
// nothing needs clearing — no write to the origin's own word, which over a network would
// be an atomic through its own endpoint); complete: every op of the epoch complete at
// the origin, then an increment of each target's complete counter that the target applies
// after those ops (Transport::complete_notify8); wait/test: the counter has grown by the
// size of the origin group since the last epoch.
#include <algorithm>

#include "base/errors.hpp"
#include "epochs/epochs.hpp"
#include "ops/state_words.hpp"

namespace fastrma::detail {

namespace {
// The arguments post and start share: assertion bits within allowed (named in the
// message), every member of the group in the window's group.
int check_arguments(const char* call, int assert_, int allowed, const char* allowed_names,
                    const std::vector<int>& group, int nprocs) {
    if (assert_ & ~allowed)
        return raise(MPI_ERR_ASSERT, "%s: assert %#x has bits other than %s", call, assert_, allowed_names);
    for (int g : group)
        if (g < 0 || g >= nprocs)
            return raise(MPI_ERR_GROUP, "%s: the group holds a process (%d) that is not in the window's group", call,
                         g);
    return MPI_SUCCESS;
}
}  // namespace

int Epochs::post(const std::vector<int>& group, int assert_) {
    if (int rc = check_arguments("FRMA_Win_post", assert_, MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT,
                                 "NOCHECK, NOSTORE, NOPUT", group, nprocs_))
        return rc;
    {
        std::lock_guard lk(epoch_mu_);
        if (int rc = sync_error(SyncCall::post, "FRMA_Win_post", mode_.load(), exposed_)) return rc;
        exposed_ = true;
        expose_expected_ = group.size();
        if (mode_.load() == AccessMode::fence_called) mode_.store(AccessMode::none);
    }
    // Local stores before the post must be visible to the origins that start after it.
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!(assert_ & MPI_MODE_NOCHECK))
        for (int g : group) {
            const PeerRegion p = peer(g);
            if (tp(g).caps(p).gates_access)
                tp(g).open_gate(p);
            else
                tp(g).notify8(p, kPostBitmap0 + std::size_t(rank_) / 64, AtomicOp::fetch_xor, 1ull << (rank_ % 64));
        }
    return MPI_SUCCESS;
}

int Epochs::start(const std::vector<int>& group, int assert_) {
    if (int rc = check_arguments("FRMA_Win_start", assert_, MPI_MODE_NOCHECK, "MPI_MODE_NOCHECK", group, nprocs_))
        return rc;
    {
        std::lock_guard lk(epoch_mu_);
        if (int rc = sync_error(SyncCall::start, "FRMA_Win_start", mode_.load(), exposed_)) return rc;
        start_group_ = group;
        std::sort(start_group_.begin(), start_group_.end());
        mode_.store(AccessMode::pscw, std::memory_order_release);
    }
    if (assert_ & MPI_MODE_NOCHECK) return MPI_SUCCESS;
    // Wait until every target of the group has posted; consume exactly one post of each,
    // so an early post for a later epoch stays for that epoch. Over a transport that gates
    // access epochs (Caps::gates_access), only until the gate of the previous epoch with it
    // has opened: the target itself holds this epoch's requests until its post.
    if (posts_seen_.empty()) posts_seen_.assign(post_bitmap_words(nprocs_), 0);
    for (int g : group) {
        const PeerRegion p = peer(g);
        if (tp(g).caps(p).gates_access) {
            if (int e = wait_until([&] { return tp(g).gate_ready(p); })) return e;
            tp(g).enter_gate(p);
            continue;
        }
        const std::size_t w = kPostBitmap0 + std::size_t(g) / 64;
        const std::uint64_t bit = 1ull << (g % 64);
        std::uint64_t& seen = posts_seen_[std::size_t(g) / 64];
        if (int e = wait_until([&] { return ((__atomic_load_n(my_word(w), __ATOMIC_ACQUIRE) ^ seen) & bit) != 0; }))
            return e;
        seen ^= bit;
    }
    return MPI_SUCCESS;
}

int Epochs::complete() {
    int off_rc = drain_open_all("FRMA_Win_complete");  // ops a full transport refused
    std::vector<int> group;
    {
        std::lock_guard lk(epoch_mu_);
        if (int rc = sync_error(SyncCall::complete, "FRMA_Win_complete", mode_.load(), exposed_)) return rc;
        group.swap(start_group_);
        mode_.store(AccessMode::none, std::memory_order_release);
    }
    // The ops complete at the target before it counts the signal (its wait is where MPI
    // wants them complete there); at the origin, local completion is all complete owes.
    for (int g : group) tp(g).complete_notify8(peer(g), kPscwComplete, AtomicOp::fetch_add, 1);
    // A transport that gates access epochs holds the epoch's requests at the target until its
    // post: complete waits for that post's notice (start did not), so that an epoch whose
    // target died before posting fails here rather than dropping its ops unseen.
    for (int g : group) {
        const PeerRegion p = peer(g);
        if (tp(g).caps(p).gates_access)
            if (int e = wait_until([&] { return tp(g).gate_ready(p); })) return e;
    }
    // (No answer comes back: refusals of this epoch's requests that arrive later are
    // reported at the next completion point.)
    if (int e = h_.completion_error("FRMA_Win_complete", 0, nprocs_); e && !off_rc) return e;
    return off_rc;
}

int Epochs::test(bool* done) {
    std::lock_guard lk(epoch_mu_);
    if (int rc = sync_error(SyncCall::wait, "FRMA_Win_wait/test", mode_.load(), exposed_)) return rc;
    // Completes are counted, never matched by rank: an origin can complete epoch k+1
    // only after our post k+1, which comes after this wait, so counts cannot mix.
    std::uint64_t got = __atomic_load_n(my_word(kPscwComplete), __ATOMIC_ACQUIRE);
    *done = got - completes_seen_ >= expose_expected_;
    if (*done) {
        completes_seen_ += expose_expected_;
        exposed_ = false;
    }
    return MPI_SUCCESS;
}

int Epochs::wait() {
    int rc = MPI_SUCCESS;
    const int dead = wait_until([&] {
        bool done = false;
        rc = test(&done);
        return rc != MPI_SUCCESS || done;
    });
    return dead ? dead : rc;
}

}  // namespace fastrma::detail
