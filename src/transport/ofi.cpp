// ofi.cpp — see ofi.hpp.
#include "transport/ofi.hpp"

#include <mpi.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sched.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/bootstrap.hpp"
#include "base/errors.hpp"
#include "base/stats.hpp"

namespace fastrma::detail {

namespace ofi {
namespace {
std::atomic<int> g_bad_keys{0};
std::atomic<std::uint64_t> g_forced_key{0};  // the injected key (0: the right one with its bits flipped)
std::atomic<std::uint64_t> g_last_data_key{0}, g_last_state_key{0};
// Whether this operation takes one of the injected bad keys.
bool take_bad_key() {
    for (int n = g_bad_keys.load(std::memory_order_relaxed); n > 0;)
        if (g_bad_keys.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return true;
    return false;
}
// The key an operation that took a bad key names instead of key.
std::uint64_t bad_key_for(std::uint64_t key) {
    const std::uint64_t k = g_forced_key.load(std::memory_order_relaxed);
    return k ? k : ~key;
}
// ... given back by an operation that was refused (Post::retry: it goes again later).
void give_back_bad_key() { g_bad_keys.fetch_add(1, std::memory_order_relaxed); }
std::atomic<int> g_lost_notifies{0};
bool take_lost_notify() {
    for (int n = g_lost_notifies.load(std::memory_order_relaxed); n > 0;)
        if (g_lost_notifies.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return true;
    return false;
}
}  // namespace

void inject_bad_keys(int n, std::uint64_t key) {
    g_forced_key.store(key, std::memory_order_relaxed);
    g_bad_keys.store(n, std::memory_order_relaxed);
}
void last_window_keys(std::uint64_t* data, std::uint64_t* state) {
    *data = g_last_data_key.load(std::memory_order_relaxed);
    *state = g_last_state_key.load(std::memory_order_relaxed);
}
void inject_lost_notifies(int n) { g_lost_notifies.store(n, std::memory_order_relaxed); }

int error_class(int fi_err) {
    switch (fi_err < 0 ? -fi_err : fi_err) {
    case FI_SUCCESS:
        return MPI_SUCCESS;
    case FI_ENOMEM:
        return MPI_ERR_NO_MEM;
    case FI_EINVAL:
        return MPI_ERR_ARG;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
    case FI_ENODATA:  // fi_getinfo: no provider matches
        return MPI_ERR_UNSUPPORTED_OPERATION;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED:
    case FI_EFAULT:
        return MPI_ERR_RMA_RANGE;  // the peer refused the key or the range
    case FI_ETRUNC:
    case FI_ETOOSMALL:
    case FI_EMSGSIZE:
        return MPI_ERR_TRUNCATE;
    default:
        return MPI_ERR_OTHER;
    }
}
}  // namespace ofi

namespace {

constexpr int kApiVersion = FI_VERSION(1, 9);
constexpr std::size_t kMaxName = 256;  // endpoint name bytes exchanged per rank
constexpr int kScratchSlots = 128;  // atomic8 operations in flight at once
// Keys asked for when the provider does not hand keys out (no FI_MR_PROV_KEY): the window's
// data and state words under random 64-bit keys, exchanged with its peers only at creation, so
// that whoever else reaches the endpoint cannot name them; a dynamic region's key its base
// mixed with a random secret of the window's (region_key), which its peers received at
// creation; registrations of origin buffers (local access only) from a random start.
std::uint64_t random_key() {
    std::uint64_t k = 0;
    while (k == 0 || k == ~0ull)
        if (getrandom(&k, sizeof k, 0) != ssize_t(sizeof k)) {
            // (no getrandom: the clock and the address space's layout, mixed)
            k = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                reinterpret_cast<std::uint64_t>(&k);
            k ^= k >> 31, k *= 0x9E3779B97F4A7C15ull, k ^= k >> 29;
        }
    return k;
}
// splitmix64's finalizer: a bijection that spreads every input bit.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
std::uint64_t region_key(std::uint64_t secret, std::uint64_t base) { return mix(secret ^ mix(base)); }

std::uint64_t supported_mr_mode() {
    return FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
}

fi_info* hints_for(const char* provider) {
    fi_info* h = fi_allocinfo();
    if (!h) return nullptr;
    h->caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    h->ep_attr->type = FI_EP_RDM;
    h->mode = 0;  // no FI_CONTEXT: a completion's context only names the peer or the waiter
    h->domain_attr->mr_mode = int(supported_mr_mode());
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    if (provider && *provider) h->fabric_attr->prov_name = strdup(provider);
    // sockets offers both progress models; its automatic one runs a provider thread per
    // domain (here: per window and process) that spins FI_SOCKETS_PE_WAITTIME (10 ms) after
    // every event, taking the cores from the ranks and from our own progress thread, which
    // reads the CQ anyway. Manual: the CQ reads make the progress, as with tcp.
    if (provider && std::strcmp(provider, "sockets") == 0) h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    return h;
}

bool is_software(const char* prov) {
    for (const char* s : {"tcp", "sockets", "udp", "shm", "net", "rxd"})
        if (std::strstr(prov, s)) return true;
    return false;
}

// One synchronization atomic's operands and result, in registered memory.
struct alignas(32) Scratch {
    std::uint64_t operand, compare, result, pad;
};

// A CQ context that is a pointer (even address) starts with its kind.
enum : int { kWaiterCtx = 0, kHoldCtx = 1, kProbeCtx = 2 };

// How long a message of an operation already under way (or a synchronization atomic) waits
// in place for the provider to take it, and a peer whose connection failed for a working
// one, with nothing completing meanwhile, before it is given up as an error.
constexpr std::chrono::seconds kPatience{30};
// Least time between two probes of a peer whose connection failed (rxm notices a closed
// connection on its own connection-management pass, every 10 ms by default).
constexpr std::chrono::milliseconds kProbeGap{2};
// The sockets provider's bound on the bytes of the messages in flight to one peer
// (OfiTransport::open; a larger message goes alone).
constexpr std::uint64_t kSocketsBytes = 32 * 1024;

// A thread waiting for one operation's completion.
struct alignas(8) Waiter {
    int kind = kWaiterCtx;
    std::atomic<bool> done{false};
    int err = 0;
    std::string msg;  // the provider's text of a failed completion
};

class OfiTransport final : public Transport {
public:
    ~OfiTransport() override;
    int open(Bootstrap& group, const NetworkPart& part, const OfiOptions& opt, const char* call);
    // What open() does, step by step.
    struct Card {
        int err;
        std::uint32_t name_len;
        std::uint64_t data_base, data_key, data_size, state_base, state_key, region_secret;
        unsigned char name[kMaxName];
    };
    int pick_provider(const OfiOptions& opt, const char* call);
    int open_endpoints(const char* call);
    int register_part(const NetworkPart& part, Card* card, int err, const char* call);
    int exchange_cards(Bootstrap& group, Card& card, int err, const char* call);
    // step(rc, what): records the first failure of a sequence in err (fail()); true while
    // none has happened.
    auto stepper(int& err, const char* call) {
        return [this, &err, call](int rc, const char* what) {
            if (rc && !err) err = fail(rc, call, what);
            return err == MPI_SUCCESS;
        };
    }

    const char* name() const override { return "ofi"; }
    Caps caps(const PeerRegion& p) const override {
        Caps c{p.rank == me_, false, false};
        c.inline_max = kBounceMax;  // puts up to it are copied at post: the buffer is free at once
        return c;
    }
    Post put(const PeerRegion& p, const Chunk* c, std::size_t n) override { return rma(p.rank, c, n, true); }
    Post get(const PeerRegion& p, const Chunk* c, std::size_t n) override { return rma(p.rank, c, n, false); }
    std::uint64_t atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                          std::uint64_t compare) override;
    std::uint64_t atomic8_start(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                                std::uint64_t compare, std::uint64_t* old) override;
    void atomic8_finish(const PeerRegion& p, std::uint64_t token) override;
    void notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) override;
    std::uint64_t mark(const PeerRegion& p) override {
        Peer& q = peers_[std::size_t(p.rank)];
        const std::uint64_t issued = q.issued.load(std::memory_order_acquire);
        return q.completed.load(std::memory_order_acquire) >= issued ? 0 : issued;
    }
    bool reached(const PeerRegion& p, std::uint64_t token) override {
        drive();
        return peers_[std::size_t(p.rank)].completed.load(std::memory_order_acquire) >= token;
    }
    void flush(const PeerRegion& p) override { wait_peer(p.rank); }
    void flush_all() override {
        for (int r = 0; r < n_; ++r) wait_peer(r);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    int fence_sync(Bootstrap& group) override {
        flush_all();
        return barrier(group);
    }
    int close_sync(Bootstrap& group) override { return fence_sync(group); }
    int failed(const PeerRegion& p, const char* call) override;
    void set_served_elsewhere(bool yes) override { served_elsewhere_ = yes; }
    int wait_fd() const override { return wait_fd_; }
    void set_on_wait(std::function<void()> f) override { on_wait_ = std::move(f); }
    void set_peer_gone(std::function<int(int)> gone) override { gone_ = std::move(gone); }
    int expose_region(void* base, std::uint64_t size) override;
    void withdraw_region(const void* base) override;
    void learn_regions(const PeerRegion& p, const std::uint64_t* pairs, std::size_t count) override;
    bool declare_native_type(int type_id, ElemKind kind, std::uint32_t op_bits, bool cas) override;
    void enable_native_type(int type_id) override { native_[std::size_t(type_id) & 255] = true; }
    bool native_type(int type_id) const override { return native_[std::size_t(type_id) & 255]; }
    Post accumulate(const PeerRegion& p, int rma_kind, int op_id, int type_id, std::uint64_t toff, std::uint64_t n,
                    std::size_t elem_bytes, const void* src, const void* compare, void* result) override;
    // A thread in the host's progress loop or waiting elsewhere: reading the CQ serves
    // (the provider makes its progress there); whether passive traffic arrived matters only
    // to the progress thread's back-off (progress()), and asking costs two system calls.
    bool serve() override {
        const bool any = drive();
        if (redo_pending_.load(std::memory_order_acquire)) resend_lost(false);
        return any;
    }
    bool progress() override {
        const bool traffic = arrived();
        return serve() || traffic;
    }
    void sync_served() override {
        drive();
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }

private:
    // What one operation in flight holds — its origin buffers' registrations (FI_MR_LOCAL),
    // a small put's copy — as its CQ context: released by its own completion (completions
    // come in any order), which also counts for its peer.
    struct Hold {
        int kind = kHoldCtx;
        int rank = 0;
        std::uint32_t bytes = 0;  // as counted for its peer (counted_bytes)
        std::unique_ptr<unsigned char[]> bounce;
        // A notify8 in flight: its scratch slot (given back at completion) and what it does,
        // to send it again if it never left (-FI_ENOTCONN).
        Scratch* scratch = nullptr;
        std::size_t word = 0;
        AtomicOp op = AtomicOp::load;
        std::uint64_t operand = 0;
        fid_mr* mrs[16] = {};
        void release() {
            for (fid_mr* m : mrs)
                if (m) fi_close(&m->fid);
        }
    };
    struct alignas(64) Peer {
        fi_addr_t addr = FI_ADDR_UNSPEC;
        std::uint64_t data_base = 0, data_key = 0, data_size = 0;
        std::uint64_t state_base = 0, state_key = 0;
        std::uint64_t region_secret = 0;  // its dynamic regions' keys (region_key)
        std::atomic<std::uint64_t> issued{0}, completed{0};
        // The same messages' bytes (counted_bytes), for the byte bound (byte_budget_).
        std::atomic<std::uint64_t> bytes_issued{0}, bytes_completed{0};
        // The first failure since failed() last looked: a libfabric error and the
        // provider's text (under err_mu).
        std::atomic<int> error{0};
        std::mutex err_mu;
        std::string err_msg;
        // Dynamic windows: the peer's attached regions as this process last read them
        // (base -> size; the base is also the registration's key), under regions_mu.
        std::mutex regions_mu;
        std::map<std::uint64_t, std::uint64_t> regions;
        // The connection: healthy; broken (an operation to the peer failed: the next one
        // first sends a probe, a read of the peer's state word 0, because tcp;ofi_rxm closes
        // a connection when the target refuses a key and fails everything on it until it
        // noticed; the probe's success reconnects and proves it); probing (the probe is out).
        // Times in steady-clock ns: when it broke, when the last probe left.
        std::atomic<int> health{0};
        std::atomic<std::int64_t> broken_at{0}, probed_at{0};
        struct Probe {
            int kind = kProbeCtx;
            int rank = 0;
        } probe;
        // What the last operation posted to the peer was (kRma, kAtomic): one origin's
        // operations to a peer apply in order (an accumulate after a get of the same bytes,
        // a put after an accumulate), and the provider does not order RMA and atomics
        // among themselves, so switching kinds waits for what is outstanding.
        std::atomic<int> last_kind{0};
        // Accumulates to q (acc_mu held from the ordering check to the post): the window
        // offsets [acc_lo, acc_hi) spanned by those posted since q last had nothing in flight.
        // One that overlaps waits for them (MPI's per-location order); one outside goes at once.
        std::mutex acc_mu;
        std::uint64_t acc_lo = 0, acc_hi = 0;
        // notify8s posted and not completed (counted in issued/completed too): what of
        // `outstanding` is not a transfer.
        std::atomic<std::int64_t> notifies{0};
    };
    // Transfers and accumulates to q in flight (notifies left out). Read in this order, and
    // counted in the opposite one (complete(): notifies, then completed; notify8: issued,
    // then notifies), a race only overstates it.
    static std::int64_t transfers_out(const Peer& q) {
        const std::int64_t all = outstanding(q);
        return all - q.notifies.load(std::memory_order_acquire);
    }
    // Notifies whose completion said they never left (-FI_ENOTCONN): sent again, in order,
    // by the next progress(), wait_peer() or notify8() (not from inside drive()).
    struct Redo {
        int rank;
        std::size_t word;
        AtomicOp op;
        std::uint64_t operand;
    };
    std::mutex redo_mu_;
    std::vector<Redo> redo_;
    std::atomic<bool> redo_pending_{false};
    std::atomic<bool> resending_{false};
    // may_wait false (the progress thread): only those whose peer takes them now without
    // waiting (connection working, nothing of ours to it in flight); the rest stay.
    void resend_lost(bool may_wait = true);
    // Waits until q's connection works (a probe goes out if it broke); false when the peer
    // has been unreachable for kPatience.
    // Also false once any process of the window is known dead (any_dead, every
    // kAliveCheckNs: *died, the thread's last error message says which).
    bool wait_usable(int r, bool* died = nullptr) {
        bool lost = false;
        Every alive{kAliveCheckNs};
        for (unsigned spins = 0; !usable(r, &lost) && !lost; ++spins) {
            if (alive.due() && any_dead()) {
                if (died) *died = true;
                return false;
            }
            if (spins > 64) sched_yield();
        }
        return !lost;
    }
    // Posts one 8-byte atomic on state word `word` of q (operands in s), its completion to ctx.
    ssize_t post_atomic8(const Peer& q, Scratch* s, std::size_t word, AtomicOp op, void* ctx);
    // The same with its operands put into s first, waiting in place for the provider to take
    // it (the caller waits for its answer at w).
    ssize_t post_waited_atomic8(const Peer& q, Scratch* s, std::size_t word, AtomicOp op, std::uint64_t operand,
                                std::uint64_t compare, Waiter* w) {
        s->operand = operand;
        s->compare = compare;
        s->result = 0;
        return ofi::post_message([&] { return post_atomic8(q, s, word, op, w); }, [this] { return drive(); },
                                 [](bool) { return true; }, true, kPatience, [this] { return any_dead(); });
    }
    // A notify8 that never left: kept for resend_lost, its peer's connection marked broken.
    void keep_lost(int r, std::size_t word, AtomicOp op, std::uint64_t operand) {
        mark_broken(r);
        std::lock_guard lk(redo_mu_);
        redo_.push_back(Redo{r, word, op, operand});
        redo_pending_.store(true, std::memory_order_release);
    }
    // A synchronization atomic on `word` of r that failed (err a libfabric error): recorded
    // for the next completion point (atomic8 and notify8 have no error path).
    void note_sync_failure(int r, int err, std::size_t word, const std::string& what) {
        note_failure(r, err < 0 ? -err : err, "8-byte atomic on state word " + std::to_string(word) + ": " + what);
    }
    // A post's failure as text (kStuck: the provider kept answering -FI_EAGAIN).
    static std::string post_error(ssize_t rc) {
        return rc == ofi::kStuck  ? std::string("the provider took nothing for 30 s (-FI_EAGAIN)")
               : rc == ofi::kGone ? last_error_message()
                                  : std::string(fi_strerror(int(rc < 0 ? -rc : rc)));
    }
    // Whether r's process (or another of the window's on this host) is known dead
    // (Transport::set_peer_gone); its error is then the thread's last error message.
    bool dead(int r) {
        if (!gone_ || !gone_(r)) return false;
        peer_died_.store(true, std::memory_order_relaxed);
        return true;
    }
    // Whether any process of the window is known dead: no verdict on one rank's connection
    // (peer_died_ stays as it is); the thread's last error message says which.
    bool any_dead() { return gone_ && gone_(-1); }

    int fail(int rc, const char* call, const char* what) {
        return raise(ofi::error_class(rc), "%s: ofi (%s): %s failed: %s", call, prov_.c_str(), what,
                     fi_strerror(rc < 0 ? -rc : rc));
    }
    int reg(void* buf, std::size_t len, std::uint64_t access, std::uint64_t key, fid_mr** mr);
    // A registration for peers under a random key (FI_MR_PROV_KEY: the provider's), in *key.
    int reg_random(void* buf, std::size_t len, std::uint64_t access, fid_mr** mr, std::uint64_t* key);
    // FI_MR_LOCAL: a registration of an origin buffer, and its desc (null without FI_MR_LOCAL).
    int reg_local(const void* buf, std::size_t len, fid_mr** mr, void** desc) {
        *mr = nullptr;
        *desc = nullptr;
        if (!mr_local_ || !buf || !len) return 0;
        const int rc = reg(const_cast<void*>(buf), len, FI_READ | FI_WRITE | FI_SEND | FI_RECV,
                           next_key_.fetch_add(1, std::memory_order_relaxed), mr);
        if (!rc) *desc = fi_mr_desc(*mr);
        return rc;
    }

    Post rma(int r, const Chunk* c, std::size_t n, bool write);
    // Messages to q posted and not completed.
    static std::int64_t outstanding(const Peer& q) {
        const std::int64_t d =
            std::int64_t(q.issued.load(std::memory_order_acquire) - q.completed.load(std::memory_order_acquire));
        return d > 0 ? d : 0;
    }
    // Whether the window on messages in flight to q lets one more (of `bytes`) go: the first
    // message of an operation below the bound, a later one below twice the bound; and, where
    // a byte bound is set, its bytes within it or nothing in flight.
    bool room(const Peer& q, bool started, std::uint64_t bytes = 0) const {
        if (outstanding(q) >= (started ? 2 * std::int64_t(window_) : std::int64_t(window_))) return false;
        if (!byte_budget_) return true;
        const std::uint64_t out =
            q.bytes_issued.load(std::memory_order_acquire) - q.bytes_completed.load(std::memory_order_acquire);
        return out == 0 || out + counted_bytes(bytes) <= byte_budget_;
    }
    // A message's bytes as the per-peer counters hold them (they travel in 32 bits of its
    // CQ context).
    static std::uint64_t counted_bytes(std::uint64_t bytes) { return std::min<std::uint64_t>(bytes, 0xffffffffu); }
    // The CQ context of a message to r of `bytes` that holds nothing (else its Hold).
    static void* peer_ctx(int r, std::uint64_t bytes) {
        return reinterpret_cast<void*>((std::uintptr_t(counted_bytes(bytes)) << 32) | (std::uintptr_t(r) << 1) | 1);
    }
    // Bytes of messages in flight to one peer before another waits (0: no bound).
    std::uint64_t byte_budget_ = 0;
    // One message to r through ofi::post_message (see ofi.hpp). Each attempt is counted as
    // issued before it is made (its completion may be counted by another thread before the
    // call returns), and one the provider did not take as completed at once: both counters
    // only grow, so a flush that read `issued` meanwhile waits for nothing that never comes.
    // Its wait in place ends once r or any other process of the window is known dead: r may
    // be alive and no longer completing what was sent to it.
    template <class Fn>
    ssize_t post_counted(int r, bool started, std::uint64_t bytes, Fn fn) {
        Peer& q = peers_[std::size_t(r)];
        const std::uint64_t b = counted_bytes(bytes);
        return ofi::post_message(
            [&] {
                q.bytes_issued.fetch_add(b, std::memory_order_acq_rel);
                q.issued.fetch_add(1, std::memory_order_acq_rel);
                const ssize_t rc = fn();
                if (rc != 0) {
                    q.bytes_completed.fetch_add(b, std::memory_order_acq_rel);
                    q.completed.fetch_add(1, std::memory_order_acq_rel);
                }
                return rc;
            },
            [this] { return drive(); }, [&](bool st) { return room(q, st, b); }, started, kPatience,
            [&] { return dead(r) || any_dead(); });
    }
    // Whether operations may go to r now: its connection is healthy, or a probe just proved
    // it working again (else the probe is sent or awaited; *lost: the peer has been
    // unreachable for kPatience).
    bool usable(int r, bool* lost);
    std::function<int(int)> gone_;  // Transport::set_peer_gone
    std::atomic<bool> peer_died_{false};  // gone_ said so: a connection in doubt is lost at once
    // Why r's connection counts as lost (the messages of the operations refused for it).
    std::string lost_why() const {
        return peer_died_.load(std::memory_order_relaxed)
                   ? std::string("has died")
                   : "has been unreachable for " + std::to_string(kPatience.count()) + "s";
    }
    // A failed completion for r: its connection may be gone (see Peer::health).
    void mark_broken(int r);
    std::size_t window_ = 256;
    static Post refuse() {
        bump(Stat::retries);
        return Post::retry;
    }
    // An operation to r the provider did not take (its connection still being made): handed
    // back, unless a process of the window on this host has died (asked every 256 refusals;
    // rxm keeps reconnecting to a dead peer): then an error.
    Post refuse_unless_dead(int r, const char* call) {
        if (!gone_ || (refusals_.fetch_add(1, std::memory_order_relaxed) & 255) != 255) return refuse();
        if (!gone_(r)) return refuse();
        peer_died_.store(true, std::memory_order_relaxed);
        const std::string why = last_error_message();
        raise(MPI_ERR_OTHER, "%s: ofi (%s): rank %d not reached: %s", call, prov_.c_str(), r, why.c_str());
        return Post::error;
    }
    std::atomic<unsigned> refusals_{0};
    bool drive();  // one pass over the CQ: completions counted, waiters woken
    // Whether something arrived for the provider (fi_trywait refuses, or the CQ's wait fd
    // is readable): passive-target traffic, which gives this process no completion, counts
    // as work for the progress thread, which otherwise backs off to FASTRMA_POLL_IDLE_US
    // while peers wait on it. False where the CQ has no wait fd.
    // The fd first: fi_trywait may itself serve what arrived (a peer's RMA write or read
    // gives this side no completion) and then report nothing pending, so a pass that served
    // a put would look idle and the thread would go on backing off (docs/performance.md).
    // fi_trywait every time: it clears the fd's signal.
    bool arrived() {
        if (wait_fd_ < 0) return false;
        pollfd p{wait_fd_, POLLIN, 0};
        const bool readable = ::poll(&p, 1, 0) > 0;
        fid* f = &cq_->fid;
        return fi_trywait(fabric_, &f, 1) != FI_SUCCESS || readable;
    }
    int wait_fd_ = -1;
    // Called on every pass of an application thread waiting here (it reads the CQ without
    // pause): the progress thread stands down meanwhile instead of contending for the CQ's
    // locks and the cores (set by the window where the host's progress hook serves too).
    std::function<void()> on_wait_;
    // One pass of a thread waiting for a completion: true if something completed.
    bool wait_pass(unsigned& spins) {
        if (on_wait_) on_wait_();
        const bool any = drive();
        if (!any && ++spins > 64) sched_yield();
        return any;
    }
    // Waits (wait_pass) until done(); false once a process of the window is known dead
    // (any_dead, asked every kAliveCheckNs of waiting, whatever the passes do): a completion from or
    // through it may never come (rxm does not fail an emulated atomic whose target left), and
    // the window is unusable anyway. What was waited for is then abandoned: the caller leaves
    // its context and buffers to the provider (never freed).
    // After that, abandoned_: no synchronization atomic leaves any more (each records the
    // failure and gives refused_old), so that an atomic that may or may not have been
    // applied is never undone or released on the strength of a made-up old value.
    template <class Done>
    bool wait_or_gone(Done done) {
        Every alive{kAliveCheckNs};
        for (unsigned spins = 0; !done();) {
            wait_pass(spins);
            if (alive.due() && any_dead()) {
                abandoned_.store(true, std::memory_order_release);
                return false;
            }
        }
        return true;
    }
    std::atomic<bool> abandoned_{false};
    // After abandoned_: records that a synchronization atomic or notify to rank on word was
    // not sent, and says so (true).
    bool refuse_if_abandoned(int rank, std::size_t word) {
        if (!abandoned_.load(std::memory_order_acquire)) return false;
        note_sync_failure(rank, FI_EHOSTUNREACH, word, "not sent: a process of the window has died");
        return true;
    }
    // The old value an abandoned atomic reports: one that grants nothing (a compare-and-swap
    // that did not swap; a fetch whose every bit says "taken").
    static std::uint64_t refused_old(AtomicOp op, std::uint64_t compare) {
        return op == AtomicOp::compare_swap ? ~compare : ~std::uint64_t(0);
    }
    struct Pending;  // an atomic8_start's atomic
    void complete(void* ctx, int err, const char* msg);
    void note_failure(int r, int err, const std::string& msg);
    void wait_peer(int r);
    int barrier(Bootstrap& group);
    Scratch* take_scratch();
    void give_scratch(Scratch* s);

    std::string prov_;
    int me_ = 0, n_ = 0;
    // Whether a progress thread or the host's progress hook reads the CQ while an
    // application thread blocks in a group collective; if not, barrier() reads it itself.
    bool served_elsewhere_ = true;
    // A dynamic window: my attached regions' registrations (base -> mr) under mine_mu_.
    bool dynamic_ = false;
    std::mutex mine_mu_;
    struct MyRegion {
        fid_mr* mr;
        std::uint64_t size;
    };
    std::map<std::uint64_t, MyRegion> mine_;
    // Dynamic windows: the region of peer r (its own table for me_) holding addr: its base
    // and the bytes left in it from addr; false if none.
    bool region_at(int r, std::uint64_t addr, std::uint64_t* base, std::uint64_t* left);
    // The remote address and key of [addr, ...) at peer q (r): the window's data part, or
    // (dynamic) the region holding addr, whose registration's key is its base; *left: the
    // bytes one operation may cover from there. False: no registration holds addr.
    bool target_of(int r, std::uint64_t addr, std::uint64_t* raddr, std::uint64_t* key, std::uint64_t* left);
    fi_info* info_ = nullptr;
    fid_fabric* fabric_ = nullptr;
    fid_domain* domain_ = nullptr;
    fid_av* av_ = nullptr;
    fid_cq* cq_ = nullptr;
    // Two endpoints: ep_ posts every operation of this process; target_ep_ is the one whose
    // name peers learn, so their operations to this process arrive on it. A connection
    // carries one direction's operations only: when a provider drops a connection because
    // this process refused a peer's key (tcp;ofi_rxm does), only that peer's operations to
    // this process are hit, never this process's own operations to the peer — which would
    // fail with it (ECONNRESET) or, an emulated atomic whose request had left, never
    // complete (rxm drops the answer it waits for, without an error completion).
    fid_ep* ep_ = nullptr;
    fid_ep* target_ep_ = nullptr;
    fid_mr* data_mr_ = nullptr;
    fid_mr* state_mr_ = nullptr;
    fid_mr* scratch_mr_ = nullptr;
    std::uint64_t mr_mode_ = 0;
    bool mr_local_ = false;
    ofi::Limits lim_;
    unsigned char* my_data_ = nullptr;
    std::unique_ptr<Peer[]> peers_;
    std::unique_ptr<Scratch[]> scratch_;
    std::mutex scratch_mu_;
    std::vector<int> scratch_free_;
    std::atomic<std::uint64_t> next_key_{random_key()};
    std::uint64_t region_secret_ = random_key();  // my dynamic regions' keys (region_key)
    // Native accumulates per type id: the libfabric type, the largest count of one message
    // (the smallest fi_query_atomic count over the type's ops), whether enabled.
    std::array<int, 256> dt_{};
    std::array<std::size_t, 256> max_count_{};
    std::array<bool, 256> native_{};
    // Puts up to this many bytes are copied at post (as over am): the caller may reuse its
    // buffer at once, as over shm and am (MPI would make it wait for the flush; codes rely on
    // it). FI_INJECT would do the same, but the sockets provider read such a buffer after
    // fi_writemsg returned.
    static constexpr std::size_t kBounceMax = 1024;
    bool acc_ordered_ = false;  // the provider orders atomics (RAR, RAW, WAR, WAW) to one peer
    // The provider applies an atomic after the atomics posted before it to the same peer
    // (RAW, WAW): a lock attempt then sees our own release that left just before it.
    bool sync_ordered_ = false;
    // Before a synchronization atomic to q: what it must not overtake completes — our own
    // transfers (see atomic8) and, where the provider does not order atomics, our notifies.
    void before_sync(int r) {
        const Peer& q = peers_[std::size_t(r)];
        if (transfers_out(q) > 0 || (!sync_ordered_ && q.notifies.load(std::memory_order_acquire) > 0)) wait_peer(r);
    }
    static constexpr int kRma = 1, kAtomic = 2;
    // Before a transfer to r: after an accumulate, what is in flight completes (see Peer).
    void order_transfer(int r) {
        Peer& q = peers_[std::size_t(r)];
        const int last = q.last_kind.exchange(kRma, std::memory_order_relaxed);
        if (last != kRma && busy(q)) wait_peer(r);
    }
    static bool busy(const Peer& q) {
        return q.completed.load(std::memory_order_acquire) < q.issued.load(std::memory_order_acquire);
    }
    // Before an accumulate to [lo, hi) of r's window (q.acc_mu held): where the provider does
    // not order atomics, only what overlaps the accumulates in flight waits for them, and
    // anything after a transfer waits as order_transfer does.
    void order_accumulate(int r, std::uint64_t lo, std::uint64_t hi) {
        Peer& q = peers_[std::size_t(r)];
        const int last = q.last_kind.exchange(kAtomic, std::memory_order_relaxed);
        const bool in_flight = busy(q);
        if (in_flight && (last != kAtomic || (!acc_ordered_ && lo < q.acc_hi && q.acc_lo < hi))) {
            wait_peer(r);
        } else if (in_flight) {
            q.acc_lo = std::min(q.acc_lo, lo);
            q.acc_hi = std::max(q.acc_hi, hi);
            return;
        }
        q.acc_lo = lo;
        q.acc_hi = hi;
    }
};

int fi_type_of(ElemKind k) {
    switch (k) {
    case ElemKind::i8:
        return FI_INT8;
    case ElemKind::i16:
        return FI_INT16;
    case ElemKind::i32:
        return FI_INT32;
    case ElemKind::i64:
        return FI_INT64;
    case ElemKind::u8:
        return FI_UINT8;
    case ElemKind::u16:
        return FI_UINT16;
    case ElemKind::u32:
        return FI_UINT32;
    case ElemKind::u64:
        return FI_UINT64;
    case ElemKind::f32:
        return FI_FLOAT;
    case ElemKind::f64:
        return FI_DOUBLE;
    case ElemKind::f_long:
        return FI_LONG_DOUBLE;
    case ElemKind::c32:
        return FI_FLOAT_COMPLEX;
    case ElemKind::c64:
        return FI_DOUBLE_COMPLEX;
    case ElemKind::c_long:
        return FI_LONG_DOUBLE_COMPLEX;
    case ElemKind::none:
        break;
    }
    return -1;
}

// OpKind (ops/reduce.hpp: max, min, sum, prod, land, band, lor, bor, lxor, bxor, maxloc,
// minloc, replace, no_op) as a libfabric op; -1: none (maxloc, minloc: pair types).
int fi_op_of(int op_id) {
    static constexpr int ops[] = {FI_MAX, FI_MIN,  FI_SUM,  FI_PROD, FI_LAND, FI_BAND,         FI_LOR,
                                  FI_BOR, FI_LXOR, FI_BXOR, -1,      -1,      FI_ATOMIC_WRITE, FI_ATOMIC_READ};
    return op_id >= 0 && op_id < int(std::size(ops)) ? ops[op_id] : -1;
}
constexpr int kOpNoOp = 13;

bool OfiTransport::declare_native_type(int type_id, ElemKind kind, std::uint32_t op_bits, bool cas) {
    const int dt = fi_type_of(kind);
    if (dt < 0 || type_id < 0 || type_id > 255) return false;
    std::size_t count = ~std::size_t(0);
    auto ok = [&](int op, std::uint64_t flags) {
        fi_atomic_attr a{};
        if (fi_query_atomic(domain_, fi_datatype(dt), fi_op(op), &a, flags) != 0 || a.count == 0) return false;
        count = std::min(count, a.count);
        return true;
    };
    for (int k = 0; k < 32; ++k) {
        if (!(op_bits & (1u << k))) continue;
        const int op = fi_op_of(k);
        if (op < 0) return false;
        if (k != kOpNoOp && !ok(op, 0)) return false;  // accumulate
        if (!ok(op, FI_FETCH_ATOMIC)) return false;  // get_accumulate, fetch_and_op
    }
    if (cas && !ok(FI_CSWAP, FI_COMPARE_ATOMIC)) return false;
    dt_[std::size_t(type_id)] = dt;
    max_count_[std::size_t(type_id)] = count;
    return true;
}

Post OfiTransport::accumulate(const PeerRegion& p, int /*rma_kind*/, int op_id, int type_id, std::uint64_t toff,
                              std::uint64_t n, std::size_t elem_bytes, const void* src, const void* compare,
                              void* result) {
    if (!native_type(type_id)) return Post::error;
    Peer& q = peers_[std::size_t(p.rank)];
    const auto dt = fi_datatype(dt_[std::size_t(type_id)]);
    const int op = fi_op_of(op_id);
    if (op < 0) return Post::error;
    if (!result && op == FI_ATOMIC_READ) return Post::done;  // an accumulate with MPI_NO_OP
    if (bool lost = false; !usable(p.rank, &lost)) {
        if (!lost) return refuse();  // a probe of the connection is out: nothing taken
        raise(MPI_ERR_OTHER, "accumulate: ofi (%s): rank %d %s", prov_.c_str(), p.rank, lost_why().c_str());
        return Post::error;
    }
    if (!room(q, false)) {  // (before the ordering wait: a refused operation waits for nothing)
        drive();
        if (!room(q, false)) return refuse();
    }
    // MPI orders one origin's accumulates to a location (accumulate_ordering's default):
    // where the provider does not, the previous ones that overlap complete first.
    std::unique_lock acc_lock(q.acc_mu);
    order_accumulate(p.rank, toff, toff + n * elem_bytes);
    if (q.health.load(std::memory_order_acquire) != 0) return refuse();  // (as in rma())
    const std::size_t per = compare ? 1 : std::max<std::size_t>(1, max_count_[std::size_t(type_id)]);
    ssize_t rc = 0;
    bool posted = false;
    for (std::uint64_t i = 0; i < n && rc == 0;) {
        std::size_t k = std::size_t(std::min<std::uint64_t>(per, n - i));
        const std::uint64_t at = i * elem_bytes, bytes = k * elem_bytes;
        // (FI_ATOMIC_READ ignores its operand; it is given the result buffer, never null.)
        const void* in = src ? static_cast<const unsigned char*>(src) + at : static_cast<unsigned char*>(result) + at;
        void* out = result ? static_cast<unsigned char*>(result) + at : nullptr;
        const void* cmp = compare ? static_cast<const unsigned char*>(compare) + at : nullptr;
        // An accumulate without result of up to kBounceMax bytes: its operand is copied, as
        // Caps::inline_max promises (the caller's buffer is free at once; the epochs layer
        // returns a queued op's copy of it to its pool once the op is issued). The provider
        // may read the operand after the call returns (sockets does, from its progress
        // engine).
        std::unique_ptr<unsigned char[]> bounce;
        if (src && !out && !cmp && bytes <= kBounceMax) {
            bounce.reset(new unsigned char[bytes]);
            std::memcpy(bounce.get(), in, bytes);
            in = bounce.get();
        }
        fid_mr* mrs[3] = {};
        void* desc[3] = {};
        rc = reg_local(in, bytes, &mrs[0], &desc[0]);
        if (!rc) rc = reg_local(out, bytes, &mrs[1], &desc[1]);
        if (!rc) rc = reg_local(cmp, bytes, &mrs[2], &desc[2]);
        std::uint64_t addr = 0, key = 0, left = 0;
        if (!target_of(p.rank, toff + at, &addr, &key, &left) || left < elem_bytes) {
            rc = -FI_EINVAL;  // (the window checked the range: a region detached meanwhile)
            for (fid_mr* m : mrs)
                if (m) fi_close(&m->fid);
            break;
        }
        if (left < bytes) k = std::size_t(left / elem_bytes);  // the rest goes in the next round
        const std::uint64_t sent = k * elem_bytes;
        Hold* hold = nullptr;
        if (mrs[0] || mrs[1] || mrs[2] || bounce) {  // released by this operation's own completion
            hold = new Hold;
            hold->rank = p.rank;
            hold->bytes = std::uint32_t(counted_bytes(sent));
            hold->bounce = std::move(bounce);
            for (int j = 0; j < 3; ++j) hold->mrs[j] = mrs[j];
        }
        void* const octx = hold ? static_cast<void*>(hold) : peer_ctx(p.rank, sent);
        if (!rc)
            rc = post_counted(p.rank, posted, sent, [&] {
                if (cmp)
                    return fi_compare_atomic(ep_, in, 1, desc[0], cmp, desc[2], out, desc[1], q.addr, addr, key, dt,
                                             FI_CSWAP, octx);
                if (out)
                    return fi_fetch_atomic(ep_, in, k, desc[0], out, desc[1], q.addr, addr, key, dt, fi_op(op), octx);
                return fi_atomic(ep_, in, k, desc[0], q.addr, addr, key, dt, fi_op(op), octx);
            });
        if (rc) {
            for (fid_mr* m : mrs)
                if (m) fi_close(&m->fid);
            delete hold;
            break;
        }
        posted = true;
        i += k;
    }
    if (rc == ofi::kRefused) return refuse_unless_dead(p.rank, "accumulate");  // (nothing was posted)
    if (rc) {
        fail(int(rc), "accumulate",
             rc == ofi::kStuck ? "the provider took no message for 30 s (-FI_EAGAIN)"
             : compare         ? "fi_compare_atomic"
             : result          ? "fi_fetch_atomic"
                               : "fi_atomic");
        return Post::error;
    }
    return Post::posted;
}

int OfiTransport::reg_random(void* buf, std::size_t len, std::uint64_t access, fid_mr** mr, std::uint64_t* key) {
    const bool prov_key = mr_mode_ & FI_MR_PROV_KEY;
    int rc = -FI_ENOKEY;
    for (int tries = 0; rc == -FI_ENOKEY && tries < 8; ++tries)  // (a key already in use: another)
        rc = reg(buf, len, access, *key = random_key(), mr);
    if (!rc && prov_key) *key = fi_mr_key(*mr);
    return rc;
}

int OfiTransport::reg(void* buf, std::size_t len, std::uint64_t access, std::uint64_t key, fid_mr** mr) {
    int rc = fi_mr_reg(domain_, buf, len, access, 0, key, 0, mr, nullptr);
    if (rc) return rc;
    if (mr_mode_ & FI_MR_ENDPOINT) {  // peers reach it through target_ep_; our own buffers go out by ep_
        fid_ep* ep = (access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) ? target_ep_ : ep_;
        if ((rc = fi_mr_bind(*mr, &ep->fid, 0)) == 0) rc = fi_mr_enable(*mr);
        if (rc) {
            fi_close(&(*mr)->fid);
            *mr = nullptr;
        }
    }
    return rc;
}

int OfiTransport::open(Bootstrap& group, const NetworkPart& part, const OfiOptions& opt, const char* call) {
    me_ = group.rank();
    n_ = group.size();
    prov_ = opt.provider;
    peers_.reset(new Peer[std::size_t(n_)]);
    for (int r = 0; r < n_; ++r) peers_[std::size_t(r)].probe.rank = r;
    window_ = std::size_t(std::max(1, opt.window));
    my_data_ = static_cast<unsigned char*>(part.data);
    dynamic_ = part.dynamic;
    // Everything local first; the verdict travels with the card, so a failure anywhere fails
    // the window everywhere instead of leaving peers in the exchange.
    Card card{};
    int err = pick_provider(opt, call);
    if (!err) err = open_endpoints(call);
    err = register_part(part, &card, err, call);
    return exchange_cards(group, card, err, call);
}

// The provider (FASTRMA_OFI_PROVIDER, or the first hardware one) and what it offers.
int OfiTransport::pick_provider(const OfiOptions& opt, const char* call) {
    int err = MPI_SUCCESS;
    auto step = stepper(err, call);
    fi_info* hints = hints_for(opt.provider.c_str());
    if (!hints) step(-FI_ENOMEM, "fi_allocinfo");
    if (!err) {
        const int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info_);
        if (rc == -FI_ENODATA)
            err = raise(MPI_ERR_UNSUPPORTED_OPERATION,
                        "%s: ofi: no provider \"%s\" with RDM endpoints, RMA, atomics and delivery-complete "
                        "(FASTRMA_OFI_PROVIDER; fi_info -l lists the providers)",
                        call, prov_.c_str());
        else
            step(rc, "fi_getinfo");
    }
    if (hints) fi_freeinfo(hints);
    if (!err && opt.provider.empty()) {  // auto: the first hardware provider
        fi_info* pick = nullptr;
        for (fi_info* i = info_; i && !pick; i = i->next)
            if (i->fabric_attr && i->fabric_attr->prov_name && !is_software(i->fabric_attr->prov_name)) pick = i;
        fi_info* dup = pick ? fi_dupinfo(pick) : nullptr;
        fi_freeinfo(info_);
        info_ = dup;
        if (!info_) err = raise(MPI_ERR_UNSUPPORTED_OPERATION, "%s: ofi: no hardware provider", call);
    }
    if (!err) {
        prov_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : prov_;
        mr_mode_ = std::uint64_t(info_->domain_attr->mr_mode);
        if (info_->domain_attr->mr_mode == FI_MR_BASIC) mr_mode_ = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
        mr_local_ = (mr_mode_ & FI_MR_LOCAL) || opt.force_mr_local;
        lim_.max_msg = info_->ep_attr->max_msg_size ? std::size_t(info_->ep_attr->max_msg_size) : lim_.max_msg;
        lim_.iov = info_->tx_attr->iov_limit ? info_->tx_attr->iov_limit : 1;
        lim_.rma_iov = info_->tx_attr->rma_iov_limit ? info_->tx_attr->rma_iov_limit : 1;
        // sockets reads a message's header off its TCP socket only once the whole header is
        // there (MSG_PEEK), and Linux advertises a zero window while the free receive buffer
        // is below the receive MSS (about 62 KiB over loopback): a header whose first bytes
        // end a filled receive buffer is never read and its rest never sent, in either
        // direction (requests to the target, answers to the origin). At most kSocketsBytes
        // of messages in flight to a peer (or one larger message alone: no header follows
        // it) keep what one connection queues far below the 128 KiB a socket starts with.
        if (prov_ == "sockets") byte_budget_ = kSocketsBytes;
        const std::uint64_t order =
            FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
        const std::uint64_t given = opt.trust_order ? info_->tx_attr->msg_order : 0;
        acc_ordered_ = (given & order) == order;
        const std::uint64_t after_write = FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAW;
        sync_ordered_ = (given & after_write) == after_write;
        if (info_->domain_attr->mr_key_size > 8)
            err = raise(MPI_ERR_UNSUPPORTED_OPERATION, "%s: ofi (%s): keys of %zu bytes (FI_MR_RAW) are not supported",
                        call, prov_.c_str(), info_->domain_attr->mr_key_size);
    }
    return err;
}

// Fabric, domain, address vector, CQ and the two endpoints.
int OfiTransport::open_endpoints(const char* call) {
    int err = MPI_SUCCESS;
    auto step = stepper(err, call);
    step(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    if (!err) step(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    // Lock words, PSCW counters and stripes need these five on FI_UINT64.
    if (!err) {
        fi_atomic_attr a{};
        for (fi_op op : {FI_SUM, FI_ATOMIC_WRITE, FI_ATOMIC_READ, FI_BXOR})
            if (!step(fi_query_atomic(domain_, FI_UINT64, op, &a, FI_FETCH_ATOMIC),
                      "fi_query_atomic (8-byte fetching atomics)"))
                break;
        if (!err)
            step(fi_query_atomic(domain_, FI_UINT64, FI_CSWAP, &a, FI_COMPARE_ATOMIC),
                 "fi_query_atomic (8-byte compare-and-swap)");
    }
    if (!err) {
        fi_av_attr av{};
        av.type = FI_AV_TABLE;
        av.count = std::size_t(n_);
        step(fi_av_open(domain_, &av, &av_, nullptr), "fi_av_open");
    }
    if (!err) {
        fi_cq_attr cq{};
        cq.format = FI_CQ_FORMAT_CONTEXT;
        cq.size = info_->tx_attr->size ? info_->tx_attr->size * 4 : 2048;  // (two endpoints)
        // A wait fd where the provider has one (arrived()); else none.
        cq.wait_obj = FI_WAIT_FD;
        if (fi_cq_open(domain_, &cq, &cq_, nullptr) != 0) {
            cq.wait_obj = FI_WAIT_NONE;
            step(fi_cq_open(domain_, &cq, &cq_, nullptr), "fi_cq_open");
        } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
            wait_fd_ = -1;
        }
    }
    // Both endpoints share the address vector and the CQ: drive() progresses both (rxm
    // serves a peer's emulated atomic on target_ep_ while it reads the CQ).
    for (fid_ep** ep : {&ep_, &target_ep_}) {
        if (!err) step(fi_endpoint(domain_, info_, ep, nullptr), "fi_endpoint");
        if (!err) step(fi_ep_bind(*ep, &av_->fid, 0), "fi_ep_bind (av)");
        if (!err) step(fi_ep_bind(*ep, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (cq)");
        if (!err) step(fi_enable(*ep), "fi_enable");
    }
    return err;
}

// Registrations: data and state for peers (their keys and bases into card), the scratch
// area for our own atomics; the endpoint's name. Nothing is registered after an earlier
// failure (err, returned unchanged then).
int OfiTransport::register_part(const NetworkPart& part, Card* card_out, int err, const char* call) {
    Card& card = *card_out;
    auto step = stepper(err, call);
    const bool virt = mr_mode_ & FI_MR_VIRT_ADDR;
    const std::uint64_t remote = FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE;
    if (!err && part.data && part.data_size) {
        if (step(reg_random(part.data, part.data_size, remote, &data_mr_, &card.data_key), "fi_mr_reg (window data)"))
            card.data_base = ofi::published_base(virt, part.data);
    }
    card.data_size = part.data ? part.data_size : 0;
    if (!err &&
        step(reg_random(part.state, part.state_bytes, remote, &state_mr_, &card.state_key), "fi_mr_reg (state words)"))
        card.state_base = ofi::published_base(virt, part.state);
    card.region_secret = region_secret_;
    ofi::g_last_data_key.store(card.data_key, std::memory_order_relaxed);
    ofi::g_last_state_key.store(card.state_key, std::memory_order_relaxed);
    if (!err) {
        // kScratchSlots for atomic8, then one per peer for its connection probe (usable()).
        const std::size_t slots = std::size_t(kScratchSlots + n_);
        scratch_.reset(new Scratch[slots]);
        for (int i = kScratchSlots - 1; i >= 0; --i) scratch_free_.push_back(i);
        step(reg(scratch_.get(), sizeof(Scratch) * slots, FI_READ | FI_WRITE | FI_SEND | FI_RECV,
                 next_key_.fetch_add(1, std::memory_order_relaxed), &scratch_mr_),
             "fi_mr_reg (atomic operands)");
    }
    if (!err) {
        std::size_t len = kMaxName;
        if (step(fi_getname(&target_ep_->fid, card.name, &len), "fi_getname")) card.name_len = std::uint32_t(len);
    }
    return err;
}

// The cards of every rank (each one's verdict with it), then the addresses inserted and
// their verdicts exchanged: the window fails everywhere or nowhere.
int OfiTransport::exchange_cards(Bootstrap& group, Card& card, int err, const char* call) {
    card.err = err;
    std::string msg = err ? last_error_message() : std::string();
    std::vector<Card> cards(static_cast<std::size_t>(n_));
    group.allgather(&card, sizeof card, cards.data());
    if (err) return raise(err, "%s", msg.c_str());
    for (int r = 0; r < n_; ++r)
        if (cards[std::size_t(r)].err)
            return raise(cards[std::size_t(r)].err, "%s: ofi: the transport failed at rank %d", call, r);
    for (int r = 0; r < n_ && !err; ++r) {
        const Card& c = cards[std::size_t(r)];
        Peer& q = peers_[std::size_t(r)];
        q.data_base = c.data_base;
        q.data_key = c.data_key;
        q.data_size = c.data_size;
        q.state_base = c.state_base;
        q.state_key = c.state_key;
        q.region_secret = c.region_secret;
        const int got = fi_av_insert(av_, c.name, 1, &q.addr, 0, nullptr);
        if (got != 1) err = fail(got < 0 ? got : -FI_EINVAL, call, "fi_av_insert");
    }
    msg = err ? last_error_message() : std::string();
    int any = err;
    std::vector<int> errs(static_cast<std::size_t>(n_));
    group.allgather(&any, sizeof any, errs.data());
    if (err) return raise(err, "%s", msg.c_str());
    for (int r = 0; r < n_; ++r)
        if (errs[std::size_t(r)])
            return raise(errs[std::size_t(r)], "%s: ofi: address exchange failed at rank %d", call, r);
    return MPI_SUCCESS;
}

OfiTransport::~OfiTransport() {
    for (fid_ep* ep : {ep_, target_ep_})
        if (ep) fi_close(&ep->fid);
    for (auto& [b, m] : mine_) fi_close(&m.mr->fid);
    for (fid_mr* m : {data_mr_, state_mr_, scratch_mr_})
        if (m) fi_close(&m->fid);
    if (av_) fi_close(&av_->fid);
    if (cq_) fi_close(&cq_->fid);
    if (domain_) fi_close(&domain_->fid);
    if (fabric_) fi_close(&fabric_->fid);
    if (info_) fi_freeinfo(info_);
}

void OfiTransport::complete(void* ctx, int err, const char* msg) {
    // No context: none of ours (rxm reports errors of its own operations, e.g. when a
    // connection drops, with a null context); what of ours it took fails on its own.
    if (!ctx) return;
    auto v = reinterpret_cast<std::uintptr_t>(ctx);
    if (!(v & 1) && *static_cast<int*>(ctx) == kProbeCtx) {  // a connection probe (usable())
        Peer& q = peers_[std::size_t(static_cast<Peer::Probe*>(ctx)->rank)];
        if (err) q.probed_at.store(std::int64_t(now_ns()), std::memory_order_relaxed);
        q.health.store(err ? 1 : 0, std::memory_order_release);
        return;
    }
    if (!(v & 1) && *static_cast<int*>(ctx) == kHoldCtx) {
        auto* h = static_cast<Hold*>(ctx);
        h->release();
        v = reinterpret_cast<std::uintptr_t>(peer_ctx(h->rank, h->bytes));
        if (h->scratch) {  // a notify8
            give_scratch(h->scratch);
            Peer& q = peers_[std::size_t(h->rank)];
            if (err == FI_ENOTCONN) {  // it never left: sent again once the connection works
                keep_lost(h->rank, h->word, h->op, h->operand);
                err = 0;
            }
            q.notifies.fetch_sub(1, std::memory_order_acq_rel);
        }
        delete h;
    }
    if (v & 1) {
        const int r = int((v >> 1) & 0x7fffffffu);
        if (err) note_failure(r, err, msg ? msg : fi_strerror(err));
        Peer& q = peers_[std::size_t(r)];
        q.bytes_completed.fetch_add(v >> 32, std::memory_order_acq_rel);
        q.completed.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    auto* w = static_cast<Waiter*>(ctx);
    w->err = err;  // (atomic8 marks the peer broken: note_failure, or before it goes again)
    if (err) w->msg = msg ? msg : fi_strerror(err);
    w->done.store(true, std::memory_order_release);  // the last touch: the waiter may return
}

void OfiTransport::note_failure(int r, int err, const std::string& msg) {
    mark_broken(r);
    Peer& q = peers_[std::size_t(r)];
    std::lock_guard lk(q.err_mu);
    if (q.error.load(std::memory_order_relaxed)) return;  // the first one is reported
    q.err_msg = msg;
    q.error.store(err, std::memory_order_release);
}

int OfiTransport::failed(const PeerRegion& p, const char* call) {
    Peer& q = peers_[std::size_t(p.rank)];
    if (!q.error.load(std::memory_order_acquire)) return MPI_SUCCESS;
    std::lock_guard lk(q.err_mu);
    const int e = q.error.exchange(0);
    // On a dynamic window the origin checked the address against its copy of the peer's
    // region table, so a refusal means the region was detached since: MPI_ERR_RMA_RANGE, as
    // over am (tcp;ofi_rxm reports an unknown key as a cancelled operation).
    if (dynamic_)
        return raise(MPI_ERR_RMA_RANGE,
                     "%s: ofi (%s): an operation to rank %d was not applied (a region the target detached after "
                     "this process last read its regions?): %s",
                     call, prov_.c_str(), p.rank, q.err_msg.c_str());
    return raise(ofi::error_class(e), "%s: ofi (%s): an operation to rank %d failed: %s", call, prov_.c_str(), p.rank,
                 q.err_msg.c_str());
}

int OfiTransport::barrier(Bootstrap& group) {
    // Without a progress thread or the host hook, a peer still flushing in its fence waits
    // for this process to read its CQ (a manual-progress provider moves the peer's data
    // into our memory only then), so the barrier is non-blocking and the CQ read meanwhile.
    // So is it where peers are watched for death (gone_): a blocking barrier with a dead
    // member never returns; this one is left behind (the window is unusable from then on).
    const MPI_Comm comm = group.mpi_comm();
    if ((served_elsewhere_ && !gone_) || comm == MPI_COMM_NULL) {
        group.barrier();
        return MPI_SUCCESS;
    }
    MPI_Request rq;
    if (PMPI_Ibarrier(comm, &rq) != MPI_SUCCESS) return MPI_ERR_INTERN;
    for (unsigned spins = 0;; ++spins) {
        int done = 0;
        if (PMPI_Test(&rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return MPI_ERR_INTERN;
        if (done) return MPI_SUCCESS;
        if (!drive() && spins > 64) {
            if (gone_ && (spins & 255) == 0)
                if (int e = gone_(-1)) {
                    peer_died_.store(true, std::memory_order_relaxed);
                    return e;
                }
            sched_yield();
        }
    }
}

bool OfiTransport::drive() {
    bool any = false;
    fi_cq_entry e[16];
    for (;;) {
        const ssize_t got = fi_cq_read(cq_, e, 16);
        if (got > 0) {
            for (ssize_t i = 0; i < got; ++i) complete(e[i].op_context, 0, nullptr);
            any = true;
            continue;
        }
        if (got == -FI_EAVAIL) {
            fi_cq_err_entry ee{};
            if (fi_cq_readerr(cq_, &ee, 0) > 0) {
                const int e = ee.err ? ee.err : FI_EOTHER;
                char buf[256];
                const char* prov = fi_cq_strerror(cq_, ee.prov_errno, ee.err_data, buf, sizeof buf);
                std::string msg = fi_strerror(e);
                if (prov && *prov) msg += std::string(" (provider: ") + prov + ")";
                complete(ee.op_context, e, msg.c_str());
                any = true;
                continue;
            }
        }
        break;  // -FI_EAGAIN: nothing more now
    }
    return any;
}

void OfiTransport::wait_peer(int r) {
    Peer& q = peers_[std::size_t(r)];
    do {
        if (redo_pending_.load(std::memory_order_acquire)) resend_lost();
        const std::uint64_t target = q.issued.load(std::memory_order_acquire);
        if (!wait_or_gone([&] { return q.completed.load(std::memory_order_acquire) >= target; })) {
            note_failure(r, FI_EHOSTUNREACH, last_error_message());
            return;
        }
    } while (redo_pending_.load(std::memory_order_acquire) && !resending_.load(std::memory_order_acquire));
    // A failure is left for failed(): the completion point that called us reports it.
}

Post OfiTransport::rma(int r, const Chunk* c, std::size_t n, bool write) {
    if (r == me_ && my_data_) {  // my own memory: a copy (the window's data is mapped here)
        for (std::size_t i = 0; i < n; ++i) {
            if (!c[i].len) continue;
            if (write)
                std::memcpy(my_data_ + c[i].offset, c[i].local, c[i].len);
            else
                std::memcpy(c[i].local, my_data_ + c[i].offset, c[i].len);
        }
        return Post::done;
    }
    if (r == me_ && dynamic_) {  // my own attached memory: offsets are addresses here
        for (std::size_t i = 0; i < n; ++i) {
            if (!c[i].len) continue;
            auto* at = reinterpret_cast<unsigned char*>(c[i].offset);
            if (write)
                std::memcpy(at, c[i].local, c[i].len);
            else
                std::memcpy(c[i].local, at, c[i].len);
        }
        return Post::done;
    }
    // Dynamic windows: each piece within one region (an access may span regions attached
    // back to back, each a registration of its own).
    std::vector<Chunk> split;
    if (dynamic_) {
        for (std::size_t i = 0; i < n; ++i) {
            std::uint64_t off = c[i].offset, left = 0, base = 0;
            auto* local = static_cast<unsigned char*>(c[i].local);
            for (std::size_t len = c[i].len; len;) {
                if (!region_at(r, off, &base, &left)) {
                    raise(MPI_ERR_RMA_RANGE, "%s: ofi: address %#llx is in no region rank %d has attached",
                          write ? "FRMA_Put" : "FRMA_Get", static_cast<unsigned long long>(off), r);
                    return Post::error;
                }
                const std::size_t piece = std::size_t(std::min<std::uint64_t>(len, left));
                split.push_back(Chunk{local, off, piece});
                local += piece;
                off += piece;
                len -= piece;
            }
        }
        c = split.data();
        n = split.size();
    }
    Peer& q = peers_[std::size_t(r)];
    const char* call = write ? "FRMA_Put" : "FRMA_Get";
    if (bool lost = false; !usable(r, &lost)) {
        if (!lost) return refuse();  // a probe of the connection is out: nothing taken
        raise(MPI_ERR_OTHER, "%s: ofi (%s): rank %d %s", call, prov_.c_str(), r, lost_why().c_str());
        return Post::error;
    }
    // The first message waits for nothing (refused: Post::retry, nothing taken), so the
    // window on messages in flight is checked before the ordering wait below.
    if (!room(q, false)) {
        drive();
        if (!room(q, false)) return refuse();
    }
    order_transfer(r);
    // The ordering wait may have seen an earlier operation fail: then the connection is in
    // doubt and this one waits for the probe (usable()) instead of failing behind it.
    if (q.health.load(std::memory_order_acquire) != 0) return refuse();
    const bool bad_key = ofi::take_bad_key();
    bool posted = false, refused = false;
    ssize_t rc = 0;
    const bool ok = ofi::plan_rma(c, n, lim_, [&](const ofi::Piece* p, std::size_t k) {
        iovec iov[16];
        fi_rma_iov riov[16];
        void* desc[16] = {};
        fid_mr* local[16] = {};
        std::size_t bytes = 0;
        for (std::size_t i = 0; i < k; ++i) bytes += p[i].len;
        std::unique_ptr<unsigned char[]> bounce;
        if (write && bytes <= kBounceMax) bounce.reset(new unsigned char[bytes]);
        for (std::size_t i = 0, at = 0; i < k; ++i) {
            iov[i] = iovec{p[i].local, p[i].len};
            if (bounce) {
                std::memcpy(bounce.get() + at, p[i].local, p[i].len);
                iov[i].iov_base = bounce.get() + at;
                at += p[i].len;
            }
            std::uint64_t raddr = 0, key = 0, left = 0;
            target_of(r, p[i].offset, &raddr, &key, &left);  // (found above for dynamic windows)
            riov[i] = fi_rma_iov{raddr, p[i].len, bad_key ? ofi::bad_key_for(key) : key};
            if (mr_local_) {
                rc = reg(iov[i].iov_base, p[i].len, write ? FI_WRITE | FI_SEND : FI_READ | FI_RECV,
                         next_key_.fetch_add(1, std::memory_order_relaxed), &local[i]);
                if (rc) {
                    for (std::size_t j = 0; j < i; ++j) fi_close(&local[j]->fid);
                    return false;
                }
                desc[i] = fi_mr_desc(local[i]);
            }
        }
        fi_msg_rma msg{};
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = k;
        msg.addr = q.addr;
        msg.rma_iov = riov;
        msg.rma_iov_count = k;
        Hold* hold = nullptr;
        if (mr_local_ || bounce) {  // released by this message's own completion
            hold = new Hold;
            hold->rank = r;
            hold->bytes = std::uint32_t(counted_bytes(bytes));
            hold->bounce = std::move(bounce);
            for (std::size_t j = 0; j < k; ++j) hold->mrs[j] = local[j];
        }
        msg.context = hold ? static_cast<void*>(hold) : peer_ctx(r, bytes);
        rc = post_counted(r, posted, bytes, [&] {
            return write ? fi_writemsg(ep_, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION)
                         : fi_readmsg(ep_, &msg, FI_COMPLETION);
        });
        if (rc) {
            for (std::size_t j = 0; j < k; ++j)
                if (local[j]) fi_close(&local[j]->fid);
            delete hold;  // (its registrations were just closed: mrs not released twice)
            refused = rc == ofi::kRefused;
            return false;
        }
        posted = true;
        return true;
    });
    if (refused) {  // (only ever the first message: nothing was posted)
        if (bad_key) ofi::give_back_bad_key();
        return refuse_unless_dead(r, call);
    }
    if (!ok) {
        fail(int(rc), call,
             rc == ofi::kStuck ? "the provider took no message for 30 s (-FI_EAGAIN)"
             : mr_local_       ? "fi_writemsg/fi_readmsg (or fi_mr_reg of the origin buffer)"
             : write           ? "fi_writemsg"
                               : "fi_readmsg");
        return Post::error;
    }
    return posted ? Post::posted : Post::done;
}

bool OfiTransport::region_at(int r, std::uint64_t addr, std::uint64_t* base, std::uint64_t* left) {
    auto find = [&](const auto& map, auto size_of) {
        auto it = map.upper_bound(addr);
        if (it == map.begin()) return false;
        --it;
        const std::uint64_t size = size_of(it->second);
        if (addr - it->first >= size) return false;
        *base = it->first;
        *left = size - (addr - it->first);
        return true;
    };
    if (r == me_) {
        std::lock_guard lk(mine_mu_);
        return find(mine_, [](const MyRegion& m) { return m.size; });
    }
    Peer& q = peers_[std::size_t(r)];
    std::lock_guard lk(q.regions_mu);
    return find(q.regions, [](std::uint64_t size) { return size; });
}

bool OfiTransport::target_of(int r, std::uint64_t addr, std::uint64_t* raddr, std::uint64_t* key, std::uint64_t* left) {
    const Peer& q = peers_[std::size_t(r)];
    if (!dynamic_) {
        *raddr = ofi::remote_address(q.data_base, addr);
        *key = q.data_key;
        *left = ~std::uint64_t(0);
        return true;
    }
    std::uint64_t base = 0;
    if (!region_at(r, addr, &base, left)) return false;
    *raddr = (mr_mode_ & FI_MR_VIRT_ADDR) ? addr : addr - base;
    *key = region_key(q.region_secret, base);
    return true;
}

int OfiTransport::expose_region(void* base, std::uint64_t size) {
    if (!dynamic_ || !size) return MPI_SUCCESS;  // (an empty region: nothing to reach)
    const std::uint64_t b = reinterpret_cast<std::uint64_t>(base);
    fid_mr* mr = nullptr;
    if (const int rc =
            reg(base, size, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE, region_key(region_secret_, b), &mr))
        return fail(rc, "FRMA_Win_attach", "fi_mr_reg (attached region)");
    std::lock_guard lk(mine_mu_);
    mine_[b] = MyRegion{mr, size};
    return MPI_SUCCESS;
}

void OfiTransport::withdraw_region(const void* base) {
    if (!dynamic_) return;
    // My own operations on the region (atomics through my endpoint) complete first; a
    // peer's arriving after the registration is closed fail at the provider and are
    // reported to that peer.
    wait_peer(me_);
    fid_mr* mr = nullptr;
    {
        std::lock_guard lk(mine_mu_);
        auto it = mine_.find(reinterpret_cast<std::uint64_t>(base));
        if (it == mine_.end()) return;
        mr = it->second.mr;
        mine_.erase(it);
    }
    fi_close(&mr->fid);
    // An answer to a peer's read that was served before the close may still be leaving
    // from the region (a software provider sends it from there). One atomic to each peer
    // goes out behind it on the same connection: when it is answered, what was queued
    // before it has left, and the caller may reuse the memory.
    for (int r = 0; r < n_; ++r)
        if (r != me_) (void)atomic8(PeerRegion{.rank = r}, 0, AtomicOp::load, 0, 0);
}

void OfiTransport::learn_regions(const PeerRegion& p, const std::uint64_t* pairs, std::size_t count) {
    if (!dynamic_ || p.rank == me_) return;
    Peer& q = peers_[std::size_t(p.rank)];
    std::lock_guard lk(q.regions_mu);
    q.regions.clear();
    for (std::size_t i = 0; i < count; ++i)
        if (pairs[2 * i + 1]) q.regions[pairs[2 * i]] = pairs[2 * i + 1];
}

Scratch* OfiTransport::take_scratch() {
    for (;;) {
        {
            std::lock_guard lk(scratch_mu_);
            if (!scratch_free_.empty()) {
                const int i = scratch_free_.back();
                scratch_free_.pop_back();
                return &scratch_[std::size_t(i)];
            }
        }
        drive();
        sched_yield();
    }
}

void OfiTransport::give_scratch(Scratch* s) {
    std::lock_guard lk(scratch_mu_);
    scratch_free_.push_back(int(s - scratch_.get()));
}

ssize_t OfiTransport::post_atomic8(const Peer& q, Scratch* s, std::size_t word, AtomicOp op, void* ctx) {
    fi_op fop = FI_CSWAP;
    switch (op) {
    case AtomicOp::fetch_add:
        fop = FI_SUM;
        break;
    case AtomicOp::swap:
        fop = FI_ATOMIC_WRITE;
        break;
    case AtomicOp::load:
        fop = FI_ATOMIC_READ;
        break;
    case AtomicOp::fetch_xor:
        fop = FI_BXOR;
        break;
    case AtomicOp::compare_swap:
        break;
    }
    void* desc = mr_local_ ? fi_mr_desc(scratch_mr_) : nullptr;
    const std::uint64_t addr = ofi::remote_address(q.state_base, word * 8);
    if (op == AtomicOp::compare_swap)
        return fi_compare_atomic(ep_, &s->operand, 1, desc, &s->compare, desc, &s->result, desc, q.addr, addr,
                                 q.state_key, FI_UINT64, FI_CSWAP, ctx);
    return fi_fetch_atomic(ep_, &s->operand, 1, desc, &s->result, desc, q.addr, addr, q.state_key, FI_UINT64, fop, ctx);
}

std::uint64_t OfiTransport::atomic8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                                    std::uint64_t compare) {
    if (refuse_if_abandoned(p.rank, word)) return refused_old(op, compare);
    const Peer& q = peers_[std::size_t(p.rank)];
    Scratch* s = take_scratch();
    std::uint64_t old = 0;
    ssize_t rc = 0;
    std::string msg;
    bool abandoned = false;  // wait_or_gone gave up on it
    bool died = false;  // not sent: a process of the window is known dead
    // A synchronization atomic waits in place (the caller waits for its old value anyway):
    // for a connection that failed to work again (a lock release after a refused operation),
    // and for the provider to take it. One that failed because its connection was found
    // closed (-FI_ENOTCONN: it never left) goes again once the connection works.
    for (int attempt = 0;; ++attempt) {
        // Not behind this process's own transfers to the peer either (before_sync): a
        // refused one closes the connection under an emulated atomic that follows it, and
        // rxm then never completes that atomic. Their completions (failed ones included)
        // come back.
        before_sync(p.rank);
        if (!wait_usable(p.rank, &died)) {
            rc = -FI_EHOSTUNREACH;
            msg = died ? last_error_message() : "rank unreachable (its connection failed and did not come back)";
            break;
        }
        auto w = std::make_unique<Waiter>();
        rc = post_waited_atomic8(q, s, word, op, operand, compare, w.get());
        if (rc) {
            msg = post_error(rc);
            died = rc == ofi::kGone;
            break;
        }
        if (!wait_or_gone([&] { return w->done.load(std::memory_order_acquire); })) {
            (void)w.release();  // (the provider may still complete into it and into s)
            abandoned = true;
            rc = FI_EHOSTUNREACH;
            msg = last_error_message();
            break;
        }
        if (w->err == FI_ENOTCONN && attempt < 8) {
            mark_broken(p.rank);
            continue;
        }
        old = s->result;
        rc = w->err;
        msg = w->msg;
        break;
    }
    if (abandoned) {  // (s stays the provider's)
        note_sync_failure(p.rank, int(rc), word, msg);
        return refused_old(op, compare);
    }
    give_scratch(s);
    if (rc) {
        // atomic8 returns the old value and has no error path: the failure is recorded for
        // the peer and reported by the next completion point (flush, unlock, fence,
        // complete) that asks failed(); the old value reads as 0, or, when a death stopped
        // it, as one that grants nothing.
        note_sync_failure(p.rank, int(rc), word, msg);
        return died ? refused_old(op, compare) : 0;
    }
    return old;
}

// One atomic in flight, between atomic8_start and atomic8_finish (the token is its address).
struct OfiTransport::Pending {
    Waiter w;
    Scratch* s = nullptr;
    std::size_t word = 0;
    AtomicOp op = AtomicOp::load;
    std::uint64_t operand = 0, compare = 0;
    std::uint64_t* old = nullptr;
    bool posted = false;
};

std::uint64_t OfiTransport::atomic8_start(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand,
                                          std::uint64_t compare, std::uint64_t* old) {
    const Peer& q = peers_[std::size_t(p.rank)];
    auto* a = new Pending;
    a->word = word;
    a->op = op;
    a->operand = operand;
    a->compare = compare;
    a->old = old;
    // The same preconditions as atomic8; anything unusual is left to atomic8_finish, which
    // then does it all in place.
    before_sync(p.rank);
    if (q.health.load(std::memory_order_acquire) == 0) {
        a->s = take_scratch();
        a->posted = post_waited_atomic8(q, a->s, word, op, operand, compare, &a->w) == 0;
        if (!a->posted) {
            give_scratch(a->s);
            a->s = nullptr;
        }
    }
    return reinterpret_cast<std::uint64_t>(a);
}

void OfiTransport::atomic8_finish(const PeerRegion& p, std::uint64_t token) {
    auto* a = reinterpret_cast<Pending*>(token);
    if (a->posted) {
        if (!wait_or_gone([&] { return a->w.done.load(std::memory_order_acquire); })) {
            note_sync_failure(p.rank, FI_EHOSTUNREACH, a->word, last_error_message());
            *a->old = refused_old(a->op, a->compare);
            return;  // a and its scratch stay the provider's (never freed)
        }
        if (a->w.err == 0) {
            *a->old = a->s->result;
        } else if (a->w.err == FI_ENOTCONN) {  // it never left: once more, in place
            mark_broken(p.rank);
            a->posted = false;
        } else {
            note_sync_failure(p.rank, a->w.err, a->word, a->w.msg);
            *a->old = 0;
        }
        give_scratch(a->s);
    }
    if (!a->posted) *a->old = atomic8(p, a->word, a->op, a->operand, a->compare);
    delete a;
}

void OfiTransport::notify8(const PeerRegion& p, std::size_t word, AtomicOp op, std::uint64_t operand) {
    if (op == AtomicOp::load) return;  // (changes nothing)
    if (refuse_if_abandoned(p.rank, word)) return;
    if (redo_pending_.load(std::memory_order_acquire)) resend_lost();  // (the earlier ones first)
    Peer& q = peers_[std::size_t(p.rank)];
    // As atomic8: behind what it must not overtake, and on a working connection. It leaves
    // without waiting: counted for the peer (flush waits for it), its slot given back by its
    // completion.
    before_sync(p.rank);
    if (!wait_usable(p.rank)) {
        note_sync_failure(p.rank, FI_EHOSTUNREACH, word,
                          "rank unreachable (its connection failed and did not come back)");
        return;
    }
    if (ofi::take_lost_notify()) {  // (tests) as if its completion had said -FI_ENOTCONN
        keep_lost(p.rank, word, op, operand);
        return;
    }
    Scratch* s = take_scratch();
    s->operand = operand;
    s->compare = 0;
    auto* h = new Hold;
    h->rank = p.rank;
    h->scratch = s;
    h->word = word;
    h->op = op;
    h->operand = operand;
    const ssize_t rc = post_counted(p.rank, true, 0, [&] { return post_atomic8(q, s, word, op, h); });
    if (rc) {
        delete h;
        give_scratch(s);
        note_sync_failure(p.rank, int(rc), word, post_error(rc));
        return;
    }
    q.notifies.fetch_add(1, std::memory_order_acq_rel);
}

void OfiTransport::resend_lost(bool may_wait) {
    bool idle = false;
    if (!resending_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) return;
    std::vector<Redo> lost, later;
    {
        std::lock_guard lk(redo_mu_);
        lost.swap(redo_);
        redo_pending_.store(false, std::memory_order_release);
    }
    for (const Redo& r : lost) {
        if (!may_wait) {
            bool lost = false;
            const Peer& q = peers_[std::size_t(r.rank)];
            if (!later.empty() || outstanding(q) > 0 || (!usable(r.rank, &lost) && !lost)) {
                later.push_back(r);  // (in order: nothing after one that waits goes first)
                continue;
            }
        }
        notify8(PeerRegion{.rank = r.rank}, r.word, r.op, r.operand);
    }
    if (!later.empty()) {
        std::lock_guard lk(redo_mu_);
        redo_.insert(redo_.begin(), later.begin(), later.end());
        redo_pending_.store(true, std::memory_order_release);
    }
    resending_.store(false, std::memory_order_release);
}

bool OfiTransport::usable(int r, bool* lost) {
    Peer& q = peers_[std::size_t(r)];
    *lost = false;
    int h = q.health.load(std::memory_order_acquire);
    if (h == 0) return true;
    drive();  // (the probe's completion, if it came)
    h = q.health.load(std::memory_order_acquire);
    if (h == 0) return true;
    const std::int64_t now = std::int64_t(now_ns());
    // A connection in doubt to a process on this host that has exited: lost now, not after
    // kPatience.
    if (gone_ && gone_(r)) peer_died_.store(true, std::memory_order_relaxed);
    if (peer_died_.load(std::memory_order_relaxed) ||
        now - q.broken_at.load(std::memory_order_relaxed) >
            std::chrono::duration_cast<std::chrono::nanoseconds>(kPatience).count()) {
        *lost = true;
        return false;
    }
    if (h == 1 && now - q.probed_at.load(std::memory_order_relaxed) >=
                      std::chrono::duration_cast<std::chrono::nanoseconds>(kProbeGap).count()) {
        int expected = 1;
        if (q.health.compare_exchange_strong(expected, 2, std::memory_order_acq_rel)) {
            q.probed_at.store(now, std::memory_order_relaxed);
            // The probe reads the peer's state word 0 into this peer's own scratch slot.
            Scratch& slot = scratch_[std::size_t(kScratchSlots + r)];
            void* desc = mr_local_ ? fi_mr_desc(scratch_mr_) : nullptr;
            const ssize_t rc = fi_read(ep_, &slot.result, 8, desc, q.addr, ofi::remote_address(q.state_base, 0),
                                       q.state_key, &q.probe);
            if (rc) q.health.store(1, std::memory_order_release);  // (-FI_EAGAIN: connecting; again later)
        }
    }
    return false;
}

void OfiTransport::mark_broken(int r) {
    Peer& q = peers_[std::size_t(r)];
    int expected = 0;
    if (q.health.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        q.broken_at.store(std::int64_t(now_ns()), std::memory_order_relaxed);
        q.probed_at.store(0, std::memory_order_relaxed);
    }
}

}  // namespace

std::unique_ptr<Transport> make_ofi_transport(Bootstrap& group, const NetworkPart& part, const OfiOptions& opt,
                                              const char* call, int* err) {
    auto t = std::make_unique<OfiTransport>();
    *err = t->open(group, part, opt, call);  // collective
    if (*err) return nullptr;
    return t;
}

bool ofi_dynamic_supported(const std::string& provider) {
    static std::mutex mu;
    static std::map<std::string, bool> known;
    std::lock_guard lk(mu);
    if (auto it = known.find(provider); it != known.end()) return it->second;
    bool ok = false;
    if (fi_info* hints = hints_for(provider.c_str())) {
        fi_info* list = nullptr;
        if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
            for (fi_info* i = list; i; i = i->next) {
                const char* name = i->fabric_attr ? i->fabric_attr->prov_name : nullptr;
                if (provider.empty() && (!name || is_software(name))) continue;  // auto: hardware only
                const auto mode = std::uint64_t(i->domain_attr->mr_mode);
                ok = mode != FI_MR_BASIC && !(mode & FI_MR_PROV_KEY) && i->domain_attr->mr_key_size <= 8;
                break;
            }
            fi_freeinfo(list);
        }
        fi_freeinfo(hints);
    }
    known[provider] = ok;
    return ok;
}

bool ofi_hardware_present() {
    static const bool present = [] {
        fi_info* hints = hints_for(nullptr);
        if (!hints) return false;
        fi_info* list = nullptr;
        bool found = false;
        if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
            for (fi_info* i = list; i && !found; i = i->next)
                found = i->fabric_attr && i->fabric_attr->prov_name && !is_software(i->fabric_attr->prov_name);
            fi_freeinfo(list);
        }
        fi_freeinfo(hints);
        return found;
    }();
    return present;
}

}  // namespace fastrma::detail
