// served_atomic.hpp — a fetch_and_op or compare_and_swap on a node peer's memory that this
// process cannot map (create windows over plain user memory, dynamic windows), applied by
// the peer's own CPU by load and store instead of two cross-memory syscalls from here.
//
// The peer's state page holds kServedSlots request slots (state_words.hpp). An origin
// claims a free slot, writes the request, marks it posted, and spins until the answer is
// there; the target takes posted slots with a CAS, applies the request through its
// window's own accumulate path (the striped accumulate lock, as a cross-memory origin
// does: one atomicity domain) and answers in the slot. Only a thread of the target that
// is inside the host MPI's progress loop serves promptly, so the target advertises it: the
// host-progress hook stores the time in kServedBeat at every pass. An origin posts only
// when the beat is fresh (the target waits in MPI) and withdraws its request if it is not
// taken within kServedWaitNs (the target left MPI meanwhile); either way it then applies
// the operation itself by cross-memory attach, which needs no target CPU (a target that
// computes is not woken up for it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "ops/spin_lock.hpp"

namespace fastrma::detail::served {

constexpr std::uint64_t kFreshNs = 10'000;  // a beat this recent: the target serves
// A post not taken by then is withdrawn: served, a request takes well under this; a target
// thread descheduled meanwhile (oversubscribed cores) comes back only after a time slice.
constexpr std::uint64_t kServedWaitNs = 4'000;

// What one slot asks: rma_kind (fop or cas), op id, type id, the element's target offset
// (dynamic windows: its address), element bytes (<= 8), operand and compare.
struct Request {
    int kind, op_id, type_id;
    std::uint64_t toff;
    std::size_t bytes;
    const void* origin;  // null for MPI_NO_OP
    const void* compare;  // cas only
};

// Origin: tries to have the peer whose state words are mapped at `state` apply req.
// True: applied there, the old value in *result and the peer's answer (an MPI error class)
// in *rc. False: not taken (no fresh beat, no free slot, or withdrawn): apply it yourself.
bool try_remote(std::uint64_t* state, const Request& req, void* result, int* rc);

// Target: applies one request to my memory (Window::apply_local's shape: kind, op id, type
// id, offset, count, origin, compare, result); an MPI error class, kRefused to leave it to
// the origin (an address not attached to my dynamic window any more).
using Apply = std::function<int(int, int, int, std::uint64_t, std::uint64_t, const void*, const void*, void*)>;
constexpr int kRefused = -1;

class Server {
public:
    // Serves what origins posted to my state words; beat: advertise this thread as a
    // prompt server (the host-progress hook; not the progress thread, which may doze).
    // True if a request was served. Safe from any thread (one serves at a time).
    bool poll(std::uint64_t* my_state, const Apply& apply, bool beat);

private:
    SpinLock mu_;
    std::atomic<std::uint64_t> seen_{0};  // kServedPosts at the last scan
};

}  // namespace fastrma::detail::served
