// ofi.hpp — the network transport: one-sided RMA and 8-byte atomics over libfabric.
//
// One OfiTransport per window: its own fabric, domain, address vector, completion queue
// and two FI_EP_RDM endpoints (one posts this process's operations, the other is where
// peers' operations arrive: a connection carries one direction only), opened at window
// creation and closed at free. Per window because
// everything it registers (the window's data part, its state words, a scratch area for
// atomic operands) lives and dies with the window, and a window's endpoint is progressed
// by that window's poller only: nothing is shared between windows, so no lock or lifetime
// crosses them. The price is a fabric open and (rxm) a connection per peer and window.
//
// Memory registration follows the provider's mr_mode: FI_MR_VIRT_ADDR (remote addresses
// are the owner's virtual addresses, else offsets into the registration), FI_MR_PROV_KEY
// (keys from fi_mr_key, else the fixed keys we ask for), FI_MR_ENDPOINT (registrations
// bound to the endpoint and enabled), FI_MR_ALLOCATED (window memory is always allocated),
// FI_MR_LOCAL (origin buffers registered per transfer, closed once the transfer completed;
// atomic operands and results always live in the registered scratch area). Endpoint names,
// addresses and keys travel through one Bootstrap allgather.
//
// put = fi_writemsg (FI_DELIVERY_COMPLETE: the completion means the data is at the target),
// get = fi_readmsg, chunk lists cut to the provider's iov_limit / rma_iov_limit /
// max_msg_size (plan_rma). Every such operation is counted per peer (issued) and its
// completion too (completed, from the CQ: the context names the peer and the bytes), so
// flush(peer) is "completed == issued". atomic8 = fi_fetch_atomic / fi_compare_atomic on
// the peer's registered state words (FI_UINT64), waited for. An operation whose first
// message the provider will not take (-FI_EAGAIN) or that would pass the per-peer window on
// messages in flight (FASTRMA_OFI_WINDOW; over sockets also their 32 KiB, room()) is
// refused whole (Post::retry: the epochs queue it); its later messages wait in place,
// bounded (post_message). A posting error is an MPI error class with fi_strerror's text
// (raise()). A failed completion (fi_cq_readerr), of a transfer or of a synchronization
// atomic, is kept per peer with the provider's text (fi_cq_strerror) and returned by
// failed() to the completion point that asks next; it also marks the peer's connection
// broken, and the next operation to it waits (refused) until a probe read of the
// peer's state went through (tcp;ofi_rxm closes a connection on a refused key; since that
// connection carries only the refused origin's operations, the target's own are untouched).
//
// Dynamic windows: each attached region is registered at attach under the key of its base
// address (providers that hand out their own keys, FI_MR_PROV_KEY, leave dynamic windows on
// am: ofi_dynamic_supported), so an origin names it from the peer's region table it read
// (learn_regions); detach closes the registration, then sends one atomic to each peer
// behind any read answer still leaving from the region.
//
// The target's CPU is never asked to act, but manual-progress providers (tcp, sockets as
// we open it, rxm's emulated atomics) move data only while somebody reads the CQ:
// progress()/serve() do, called by the window's poller, by waiting threads and by the host
// MPI's progress hook; and a fence's or free's barrier, when neither of the first and last
// runs (set_served_elsewhere(false)), is non-blocking and reads the CQ until it completes.
#pragma once

#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.hpp"
#include "transport/transport.hpp"

namespace fastrma::detail {

class Bootstrap;

// What a window exposes through its network transport.
struct NetworkPart {
    void* data = nullptr;  // my window memory (null: none)
    std::uint64_t data_size = 0;
    std::uint64_t* state = nullptr;  // my state words (lock words, PSCW, stripes)
    std::size_t state_bytes = 0;
    // A dynamic window: no data part; each attached region is registered on its own
    // (expose_region) under a key peers derive from its base address.
    bool dynamic = false;
};

struct OfiOptions {
    std::string provider = "tcp;ofi_rxm";  // FASTRMA_OFI_PROVIDER
    bool force_mr_local = false;  // FASTRMA_OFI_MR_LOCAL: register origin buffers
    int window = 256;  // FASTRMA_OFI_WINDOW: messages in flight to one peer before posts retry
    bool trust_order = true;  // FASTRMA_OFI_ORDERED=0: act as if the provider ordered no atomics
};

// Collective over group. Null and *err (an MPI error class, raised) on failure anywhere.
std::unique_ptr<Transport> make_ofi_transport(Bootstrap& group, const NetworkPart& part, const OfiOptions& opt,
                                              const char* call, int* err);

// Whether dynamic windows can go over ofi with this provider (empty: the first hardware
// one): the provider takes the keys we ask for (no FI_MR_PROV_KEY), so that an origin names
// an attached region's registration by the region's base address alone. Probed once per name.
bool ofi_dynamic_supported(const std::string& provider);

// Whether libfabric offers an RDM provider with RMA and atomics on real hardware (not tcp,
// sockets, udp, shm): FASTRMA_TRANSPORT=auto then sends other nodes' peers over ofi.
// Probed once.
bool ofi_hardware_present();

namespace ofi {
// A libfabric error (a negative or positive fi_errno) as an MPI error class.
int error_class(int fi_err);

// Error injection for tests: the next n puts and gets to another process name a key its
// peer never registered (key; 0: the right key with its bits flipped), so the provider fails
// them (at the target, reported in the origin's completion queue).
void inject_bad_keys(int n, std::uint64_t key = 0);
// The keys of the data and state words of the last window this process opened an ofi
// transport for (tests: random, different from window to window).
void last_window_keys(std::uint64_t* data, std::uint64_t* state);
// ... and the next n one-way synchronization atomics (notify8: lock releases, PSCW posts)
// are not sent but handled as if their completion said they never left (-FI_ENOTCONN):
// the transport sends them again.
void inject_lost_notifies(int n);

// Provider limits that cut a chunk list into messages.
struct Limits {
    std::size_t max_msg = ~std::size_t(0);  // bytes of one message
    std::size_t iov = 1;  // local iovecs of one message
    std::size_t rma_iov = 1;  // remote iovecs of one message
};
// One piece of a message: a local buffer and its offset at the peer.
struct Piece {
    void* local;
    std::uint64_t offset;
    std::size_t len;
};
// Cuts chunks into messages of at most min(iov, rma_iov) pieces and max_msg bytes (a chunk
// longer than max_msg becomes several pieces; zero-length chunks are dropped) and calls
// emit(pieces, k) for each in order; stops and returns false when emit does.
template <class Emit>
bool plan_rma(const Chunk* chunks, std::size_t n, const Limits& lim, Emit emit) {
    constexpr std::size_t kMaxPieces = 16;
    Piece msg[kMaxPieces];
    std::size_t k = 0, bytes = 0;
    std::size_t per = lim.iov < lim.rma_iov ? lim.iov : lim.rma_iov;
    if (per == 0) per = 1;
    if (per > kMaxPieces) per = kMaxPieces;
    const std::size_t max_msg = lim.max_msg ? lim.max_msg : 1;
    for (std::size_t i = 0; i < n; ++i) {
        auto* local = static_cast<unsigned char*>(chunks[i].local);
        std::uint64_t off = chunks[i].offset;
        std::size_t left = chunks[i].len;
        while (left) {
            if (k == per || bytes == max_msg) {
                if (!emit(static_cast<const Piece*>(msg), k)) return false;
                k = 0;
                bytes = 0;
            }
            const std::size_t room = max_msg - bytes;
            const std::size_t len = left < room ? left : room;
            msg[k++] = Piece{local, off, len};
            bytes += len;
            local += len;
            off += len;
            left -= len;
        }
    }
    return k == 0 || emit(static_cast<const Piece*>(msg), k);
}

// What post_message() returns when it refused the first message of an operation (nothing of
// the operation was posted: the transport answers Post::retry). Positive: never a libfabric
// return value.
constexpr ssize_t kRefused = 1;
// A message that waited in place longer than its patience with nothing completing.
constexpr ssize_t kStuck = -FI_ETIMEDOUT;
// A message whose in-place wait was given up because a process is known dead (post_message's gone()).
constexpr ssize_t kGone = -FI_ECONNABORTED;

// Posts one message of an operation to one peer. post() is the libfabric call (0, -FI_EAGAIN
// or an error); drive() reads the CQ once (true: something completed); room(started) says
// whether the peer's bound on messages in flight lets a message go (the first of an
// operation: below the bound; a later one: below twice the bound).
// The first message of an operation (started false) waits for nothing: when the bound is
// reached or the provider answers -FI_EAGAIN, the CQ is read once and the message tried once
// more; then it is refused (kRefused) and the caller hands the whole operation back.
// A later message of an operation already under way is retried in place, reading the CQ,
// until it is taken or fails, or until `patience` passed with nothing completing (kStuck), or
// until gone() — asked every kAliveCheckNs of waiting, whatever the passes do — says the
// peer (for a synchronization atomic: any process of the window) died (kGone).
template <class PostFn, class DriveFn, class RoomFn, class GoneFn>
ssize_t post_message(PostFn post, DriveFn drive, RoomFn room, bool started, std::chrono::nanoseconds patience,
                     GoneFn gone) {
    using clock = std::chrono::steady_clock;
    auto deadline = clock::now() + patience;
    unsigned idle = 0;
    bool dead = false;
    Every alive{kAliveCheckNs};
    auto wait = [&] {  // one pass of the in-place retry; false when patience ran out or gone()
        if (alive.due() && gone()) {
            dead = true;
            return false;
        }
        if (drive()) {
            deadline = clock::now() + patience;
            idle = 0;
            return true;
        }
        if (++idle > 64) sched_yield();
        return clock::now() < deadline;
    };
    if (!room(started)) {
        drive();
        while (!room(started)) {
            if (!started) return kRefused;
            if (!wait()) return dead ? kGone : kStuck;
        }
    }
    ssize_t rc = post();
    if (rc != -FI_EAGAIN) return rc;
    drive();
    rc = post();
    if (rc != -FI_EAGAIN) return rc;
    if (!started) return kRefused;
    while (rc == -FI_EAGAIN) {
        if (!wait()) return dead ? kGone : kStuck;
        rc = post();
    }
    return rc;
}
template <class PostFn, class DriveFn, class RoomFn>
ssize_t post_message(PostFn post, DriveFn drive, RoomFn room, bool started, std::chrono::nanoseconds patience) {
    return post_message(post, drive, room, started, patience, [] { return false; });
}

// The address a peer's operation names: its registration's published base (its virtual
// address under FI_MR_VIRT_ADDR, else 0) plus the offset.
inline std::uint64_t remote_address(std::uint64_t published_base, std::uint64_t offset) {
    return published_base + offset;
}
// What a registration publishes as its base: the virtual address, or 0 (offsets).
inline std::uint64_t published_base(bool virt_addr, const void* buf) {
    return virt_addr ? reinterpret_cast<std::uint64_t>(buf) : 0;
}
}  // namespace ofi

}  // namespace fastrma::detail
