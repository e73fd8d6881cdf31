// served.cpp — see served.hpp.
#include "transport/shm/served.hpp"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include <mpi.h>

#include "base/clock.hpp"
#include "base/stats.hpp"
#include "ops/op.hpp"
#include "transport/shm/liveness.hpp"

namespace fastrma::detail::served {

namespace {
// kDesc: kind | op << 8 | type << 16 | bytes << 32 | has origin << 48 (no bit above).
constexpr std::uint64_t kHasOrigin = 1ull << 48;

std::uint64_t* slot(std::uint64_t* state, std::size_t i) { return state + kServedSlot0 + i * kServedSlotWords; }

bool cas(std::uint64_t* w, std::uint64_t from, std::uint64_t to) {
    return __atomic_compare_exchange_n(w, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// Bytes a slot carries for a kind: one element for fetch_and_op / compare_and_swap (an
// operand and a compare word), up to kMaxBytes of data otherwise.
std::size_t max_bytes(int kind) { return kind == int(RmaKind::fop) || kind == int(RmaKind::cas) ? 8 : kMaxBytes; }

// After a post: the flag word, unless the target's passes read the slots (Server::posted:
// the fence pairs with the target's when it stops reading them).
void announce(std::uint64_t* state) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!__atomic_load_n(state + kServedScanning, __ATOMIC_RELAXED))
        __atomic_store_n(state + kServedPosted, 1, __ATOMIC_RELEASE);
}

// An answer as the origin takes it: kRefused, MPI_SUCCESS or an MPI error class (anything
// else a peer wrote: MPI_ERR_OTHER).
int sane_answer(std::uint64_t word) {
    const std::int64_t a = std::int64_t(word);
    return a == kRefused || (a >= 0 && a <= MPI_ERR_LASTCODE) ? int(a) : int(MPI_ERR_OTHER);
}

// A request as the target decoded it: the header words read once, checked.
struct Decoded {
    int kind, op_id, type_id;
    std::uint64_t toff, bytes;
    bool has_origin;
};

// A slot's header: MPI_SUCCESS, or MPI_ERR_OTHER (malformed: never applied).
int decode_slot(std::uint64_t d, std::uint64_t toff, Decoded* r) {
    r->kind = int(d & 0xff), r->op_id = int((d >> 8) & 0xff), r->type_id = int((d >> 16) & 0xffff);
    r->bytes = (d >> 32) & 0xffff, r->has_origin = (d & kHasOrigin) != 0, r->toff = toff;
    if (d >> 49) return MPI_ERR_OTHER;
    const bool transfer = r->kind == int(RmaKind::put) || r->kind == int(RmaKind::get);
    const bool acc = r->kind == int(RmaKind::acc) || r->kind == int(RmaKind::get_acc);
    const bool atomic = r->kind == int(RmaKind::fop) || r->kind == int(RmaKind::cas);
    if (!transfer && !acc && !atomic) return MPI_ERR_OTHER;
    if (r->bytes == 0 || r->bytes > max_bytes(r->kind) || r->type_id > 255) return MPI_ERR_OTHER;
    if (transfer && (r->op_id || r->type_id || r->has_origin != (r->kind == int(RmaKind::put)))) return MPI_ERR_OTHER;
    if (r->kind == int(RmaKind::cas) && !r->has_origin) return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

thread_local unsigned t_first_slot = unsigned(reinterpret_cast<std::uintptr_t>(&t_first_slot) >> 6);
}  // namespace

bool fresh(const std::uint64_t* state, std::uint64_t within_ns, std::uint64_t* at) {
    const std::uint64_t beat = __atomic_load_n(state + kServedBeat, __ATOMIC_ACQUIRE);
    if (!beat) return false;
    const std::uint64_t t = now_ns();
    if (at) *at = t;
    return t - beat <= within_ns || beat - t <= within_ns;  // (either order of clocks)
}

bool post(std::uint64_t* state, const Request& req, Posted* p, std::uint64_t t0) {
    if (req.bytes > max_bytes(req.kind)) return false;
    std::uint64_t* s = nullptr;
    for (std::size_t k = 0; k < kServedSlots && !s; ++k) {
        std::uint64_t* c = slot(state, (t_first_slot + k) % kServedSlots);
        if (__atomic_load_n(c + kState, __ATOMIC_RELAXED) == kFree && cas(c + kState, kFree, kClaimed)) s = c;
    }
    if (!s) return false;
    ++t_first_slot;  // the next post of this thread starts at the next slot
    if (req.kind == int(RmaKind::put) ||
        ((req.kind == int(RmaKind::acc) || req.kind == int(RmaKind::get_acc)) && req.origin)) {
        std::memcpy(s + kData, req.origin, req.bytes);
    } else if (req.kind == int(RmaKind::fop) || req.kind == int(RmaKind::cas)) {
        s[kData] = s[kData + 1] = 0;
        if (req.origin) std::memcpy(s + kData, req.origin, req.bytes);
        if (req.compare) std::memcpy(s + kData + 1, req.compare, req.bytes);
    }
    s[kDesc] = std::uint64_t(req.kind) | std::uint64_t(req.op_id) << 8 | std::uint64_t(req.type_id) << 16 |
               std::uint64_t(req.bytes) << 32 | (req.origin ? kHasOrigin : 0);
    s[kToff] = req.toff;
    p->slot = s;
    p->bytes = req.bytes;
    p->pid = pid_t(__atomic_load_n(state + kInfoPid, __ATOMIC_RELAXED));
    p->t0 = t0 ? t0 : now_ns();
    __atomic_store_n(s + kState, kPosted, __ATOMIC_RELEASE);
    announce(state);
    return true;
}

Outcome finish(Posted& p, void* result, int* rc) {
    std::uint64_t* const s = p.slot;
    Every alive{kLivenessEveryNs};  // when the target's process is checked
    for (unsigned spins = 0;; ++spins) {
        const std::uint64_t st = __atomic_load_n(s + kState, __ATOMIC_ACQUIRE);
        if (st == kAnswered) break;
        // Withdrawn only if still posted: the target's CAS posted -> taken and this one
        // cannot both succeed.
        if (st == kPosted && (spins & 63) == 63 && now_ns() - p.t0 > kServedWaitNs && cas(s + kState, kPosted, kFree))
            return Outcome::withdrawn;
        if (spins > 4096 && st == kTaken) {
            sched_yield();  // taken: the answer comes unless the target's process is gone
            if (alive.due() && pid_exited(p.pid)) return Outcome::refused;
        } else if (st != kPosted && st != kTaken) {
            return Outcome::refused;  // (a peer rewrote the slot's state)
        } else {
            __builtin_ia32_pause();
        }
    }
    const int answer = sane_answer(s[kAnswer]);
    if (answer == kRefused) {
        __atomic_store_n(s + kState, kFree, __ATOMIC_RELEASE);
        return Outcome::refused;
    }
    if (result) std::memcpy(result, s + kData, p.bytes);
    *rc = answer;
    __atomic_store_n(s + kState, kFree, __ATOMIC_RELEASE);
    return Outcome::answered;
}

bool try_remote(std::uint64_t* state, const Request& req, void* result, int* rc) {
    Posted p;
    std::uint64_t t0 = 0;
    if (!fresh(state, kFreshNs, &t0) || !post(state, req, &p, t0)) return false;
    const Outcome o = finish(p, result, rc);
    if (o == Outcome::answered) bump(Stat::atomics_served);
    if (o == Outcome::withdrawn) bump(Stat::atomics_withdrawn);
    return o == Outcome::answered;
}

// ---- Bulk ----------------------------------------------------------------------------

namespace {
// The bulk area: line 0 the owner word (0: free), lines 1 and 2 the buffers' headers, then
// the two halves of data. A buffer's kBState runs as a slot's kState (kFree, kPosted, kTaken,
// kAnswered; the origin holds the area, so there is no kClaimed).
enum BulkWord : std::size_t { kBState, kBDesc, kBToff, kBStride, kBPiece, kBCount, kBAnswer };
constexpr std::size_t kBulkHead = 3 * kWordsPerLine;  // words before the data
constexpr std::size_t kBulkMinData = 2 * 1024;  // smaller areas are not made
constexpr unsigned kBulkReposts = 8;  // withdrawn parts posted again, per run

std::size_t bulk_half(std::uint64_t total_bytes) {
    if (total_bytes < kBulkHead * 8 + kBulkMinData) return 0;
    return std::size_t((total_bytes - kBulkHead * 8) / 2) & ~std::size_t(63);
}
std::uint64_t* bulk_header(std::uint64_t* area, int b) { return area + (1 + b) * kWordsPerLine; }
unsigned char* bulk_data(std::uint64_t* area, std::size_t half, int b) {
    return reinterpret_cast<unsigned char*>(area + kBulkHead) + std::size_t(b) * half;
}
}  // namespace

std::size_t bulk_words(std::size_t bytes) { return bulk_half(bytes) ? (bytes + 7) / 8 : 0; }

namespace {
// The node peers' bulk areas as this process laid them out (register_bulk_areas).
struct Areas {
    std::uint64_t* first;
    std::size_t page_words, members, word, half;
};
SpinLock g_areas_mu;
std::vector<Areas>& areas() {
    static auto* v = new std::vector<Areas>;  // never destroyed: origins may claim during exit
    return *v;
}
// The registered area of the state page at `state`: its first word and half, or false.
bool registered_area(std::uint64_t* state, std::uint64_t** area, std::size_t* half) {
    std::lock_guard lk(g_areas_mu);
    const auto at = reinterpret_cast<std::uintptr_t>(state);
    for (const Areas& a : areas()) {
        const auto first = reinterpret_cast<std::uintptr_t>(a.first);
        if (at < first) continue;
        const std::size_t d = std::size_t(at - first) / 8;
        if ((at - first) % 8 || d >= a.page_words * a.members || d % a.page_words) continue;
        *area = state + a.word, *half = a.half;
        return true;
    }
    return false;
}
// An origin's tag in a bulk area's owner word.
std::uint64_t my_tag() {
    static const std::uint64_t me = std::uint64_t(getpid());  // (getpid is a syscall)
    return me;
}
// Waits until the target is done with both buffers of an area taken over from an origin that
// died, then frees them. False: the target's process is gone too.
bool reset_buffers(std::uint64_t* area, pid_t target) {
    Every alive{kLivenessEveryNs};
    for (int b = 0; b < 2; ++b) {
        std::uint64_t* h = bulk_header(area, b);
        while (__atomic_load_n(h, __ATOMIC_ACQUIRE) == kTaken) {
            sched_yield();
            if (alive.due() && pid_exited(target)) return false;
        }
        // Posted by the dead origin: withdrawn if the target has not taken it (else it is
        // applied: what the dead origin left half-done stays so).
        std::uint64_t st = __atomic_load_n(h, __ATOMIC_ACQUIRE);
        if (st == kPosted && !cas(h, kPosted, kFree)) {
            --b;  // taken meanwhile: wait for its answer
            continue;
        }
        __atomic_store_n(h, kFree, __ATOMIC_RELEASE);
    }
    return true;
}
}  // namespace

bool register_bulk_areas(std::uint64_t* first, std::size_t page_words, std::size_t members, std::size_t word,
                         std::size_t bytes) {
    const std::size_t half = bulk_half(bytes);
    if (!first || !members || !half || word < kServedBulkWord + kWordsPerLine || word > page_words ||
        bulk_words(bytes) > page_words - word)
        return false;
    std::lock_guard lk(g_areas_mu);
    areas().push_back(Areas{first, page_words, members, word, half});
    return true;
}

void unregister_bulk_areas(std::uint64_t* first) {
    std::lock_guard lk(g_areas_mu);
    auto& v = areas();
    v.erase(std::remove_if(v.begin(), v.end(), [first](const Areas& a) { return a.first == first; }), v.end());
}

bool BulkChannel::claim(std::uint64_t* state, std::uint64_t wait_ns, std::uint64_t patience_ns) {
    std::uint64_t* a = nullptr;
    std::size_t half = 0;
    if (!registered_area(state, &a, &half)) return false;
    const pid_t target = pid_t(__atomic_load_n(state + kInfoPid, __ATOMIC_RELAXED));
    const std::uint64_t me = my_tag();
    const std::uint64_t t0 = wait_ns ? now_ns() : 0;
    for (unsigned spins = 0;; ++spins) {
        if (fresh(state, std::max(kFreshNs, patience_ns))) {
            std::uint64_t holder = __atomic_load_n(a, __ATOMIC_RELAXED);
            if (holder == 0 && cas(a, 0, me)) break;
            // An owner whose process exited: taken over, once the target is done with its parts.
            if (holder != 0 && holder != me && (spins & 255) == 0 && pid_exited(pid_t(holder)) && cas(a, holder, me)) {
                if (reset_buffers(a, target)) break;
                __atomic_store_n(a, 0, __ATOMIC_RELEASE);
                return false;
            }
        }
        if (!wait_ns || now_ns() - t0 > wait_ns) return false;
        if (serve_ && (spins & 15) == 15) serve_(serve_arg_);
        __builtin_ia32_pause();
    }
    state_ = state, area_ = a, half_ = half, pid_ = target;
    fresh_ns_ = std::max(kFreshNs, patience_ns);
    wait_ns_ = std::max(kServedWaitNs, patience_ns);
    return true;
}

BulkChannel::~BulkChannel() {
    if (area_) __atomic_store_n(area_, 0, __ATOMIC_RELEASE);
}

int BulkChannel::run(const BulkRun& r, const std::function<void(std::uint64_t, std::uint64_t, unsigned char*)>& pack,
                     const std::function<void(std::uint64_t, std::uint64_t, const unsigned char*)>& unpack,
                     const std::function<int(std::uint64_t, std::uint64_t)>& fallback) {
    const std::uint64_t per = r.piece && r.piece <= half_ ? half_ / r.piece : 0;
    if (!area_ || stop_ || !per) return r.count ? fallback(0, r.count) : MPI_SUCCESS;
    struct Part {
        std::uint64_t first, n;
        int buf;
    };
    Part fly[2];
    int nfly = 0, next_buf = 0, err = MPI_SUCCESS;
    std::uint64_t next = 0;
    auto post = [&](const Part& p) {
        std::uint64_t* h = bulk_header(area_, p.buf);
        if (r.has_origin) pack(p.first, p.n, bulk_data(area_, half_, p.buf));
        h[kBDesc] = std::uint64_t(r.kind) | std::uint64_t(r.op_id) << 8 | std::uint64_t(r.type_id) << 16 |
                    (r.has_origin ? 1ull << 48 : 0);
        h[kBToff] = r.toff + std::uint64_t(std::int64_t(p.first) * r.stride);
        h[kBStride] = std::uint64_t(r.stride);
        h[kBPiece] = r.piece;
        h[kBCount] = p.n;
        __atomic_store_n(h + kBState, kPosted, __ATOMIC_RELEASE);
        announce(state_);
    };
    // Answered (and unpacked), withdrawn or refused; the last two not applied there.
    auto wait = [&](const Part& p) {
        std::uint64_t* h = bulk_header(area_, p.buf);
        const std::uint64_t* other = bulk_header(area_, p.buf ^ 1);
        std::uint64_t t0 = now_ns();
        Every alive{kLivenessEveryNs};
        for (unsigned spins = 0;; ++spins) {
            const std::uint64_t st = __atomic_load_n(h + kBState, __ATOMIC_ACQUIRE);
            if (st == kAnswered) break;
            if (st != kPosted && st != kTaken) return Outcome::refused;  // (a peer rewrote the buffer's state)
            // Taken (or the other part taken) by a target whose process has exited: given up
            // (the fallback then finds it gone); the area stays ours until the channel goes.
            if ((spins & 63) == 63 && alive.due() && pid_exited(pid_)) {
                stop_ = true;
                return Outcome::refused;
            }
            if (st == kPosted && (spins & 63) == 63) {
                // The target applying our other part counts as progress: it takes this one
                // next; so does the time spent serving the target's own requests here.
                if (__atomic_load_n(other + kBState, __ATOMIC_ACQUIRE) == kTaken || (serve_ && serve_(serve_arg_)))
                    t0 = now_ns();
                else if (now_ns() - t0 > wait_ns_ && cas(h + kBState, kPosted, kFree))
                    return Outcome::withdrawn;
            }
            if (st == kTaken && (spins & 63) == 63 && serve_) serve_(serve_arg_);
            // (the target may need this core: ranks oversubscribe the machine)
            if (spins > 4096)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
        const int answer = sane_answer(h[kBAnswer]);
        if (answer != kRefused) {
            if (unpack && answer == MPI_SUCCESS) unpack(p.first, p.n, bulk_data(area_, half_, p.buf));
            if (answer && !err) err = answer;
        }
        __atomic_store_n(h + kBState, kFree, __ATOMIC_RELEASE);
        return answer == kRefused ? Outcome::refused : Outcome::answered;
    };
    unsigned reposts = 0;
    for (;;) {
        while (nfly < 2 && next < r.count && !stop_) {
            const Part p{next, std::min(per, r.count - next), next_buf};
            next_buf ^= 1;
            post(p);
            fly[nfly++] = p;
            next += p.n;
        }
        if (nfly == 0) break;
        const Part p = fly[0];
        fly[0] = fly[1];
        --nfly;
        const Outcome o = wait(p);
        if (o == Outcome::answered) {
            bump(Stat::bulk_served);
            continue;
        }
        // Withdrawn while the target's beat is recent (it waits in MPI but was off its core):
        // posted again, a few times, before its pieces go by fallback (which costs far more).
        if (o == Outcome::withdrawn && reposts < kBulkReposts && fresh(state_, fresh_ns_)) {
            ++reposts;
            post(p);
            fly[nfly++] = p;
            next_buf = p.buf ^ 1;
            continue;
        }
        bump(Stat::bulk_withdrawn);
        if (int e = fallback(p.first, p.n); e && !err) err = e;
        stop_ = stop_ || !fresh(state_, fresh_ns_);  // the target left MPI (or died): the rest goes by fallback too
    }
    if (next < r.count)
        if (int e = fallback(next, r.count - next); e && !err) err = e;
    return err;
}

Server::Server(std::size_t bulk_word, std::size_t bulk_bytes)
    : bulk_word_(bulk_half(bulk_bytes) ? bulk_word : 0), half_(bulk_word_ ? bulk_half(bulk_bytes) : 0) {}

namespace {
// A bulk buffer's header: MPI_SUCCESS, or MPI_ERR_OTHER (malformed: never applied). half:
// the buffer's data bytes, which piece * count must fit.
int decode_bulk(std::uint64_t d, std::uint64_t piece, std::uint64_t count, std::size_t half, Decoded* r) {
    r->kind = int(d & 0xff), r->op_id = int((d >> 8) & 0xff), r->type_id = int((d >> 16) & 0xffff);
    r->bytes = piece, r->has_origin = (d & kHasOrigin) != 0;
    if ((d >> 32) != (r->has_origin ? kHasOrigin >> 32 : 0)) return MPI_ERR_OTHER;  // (no bytes field, no bit above)
    const bool transfer = r->kind == int(RmaKind::put) || r->kind == int(RmaKind::get);
    if (!transfer && r->kind != int(RmaKind::acc) && r->kind != int(RmaKind::get_acc)) return MPI_ERR_OTHER;
    if (transfer && (r->op_id || r->type_id || r->has_origin != (r->kind == int(RmaKind::put)))) return MPI_ERR_OTHER;
    if (r->type_id > 255 || piece == 0 || count == 0 || piece > half || count > half / piece) return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}
}  // namespace

bool Server::poll_bulk(std::uint64_t* my_state, const ApplyBulk& apply_bulk) {
    if (!half_) return false;
    std::uint64_t* const area = my_state + bulk_word_;
    bool served = false;
    for (int b = 0; b < 2; ++b) {
        std::uint64_t* h = bulk_header(area, b);
        if (__atomic_load_n(h + kBState, __ATOMIC_ACQUIRE) != kPosted || !cas(h + kBState, kPosted, kTaken)) continue;
        if (g_fault_kill_serving.load(std::memory_order_relaxed)) kill(getpid(), SIGKILL);
        // The header read once: the origin (or any node peer) may write it while this applies.
        const std::uint64_t d = __atomic_load_n(h + kBDesc, __ATOMIC_RELAXED);
        const std::uint64_t toff = __atomic_load_n(h + kBToff, __ATOMIC_RELAXED);
        std::int64_t stride = std::int64_t(__atomic_load_n(h + kBStride, __ATOMIC_RELAXED));
        const std::uint64_t piece = __atomic_load_n(h + kBPiece, __ATOMIC_RELAXED);
        const std::uint64_t count = __atomic_load_n(h + kBCount, __ATOMIC_RELAXED);
        unsigned char* data = bulk_data(area, half_, b);
        Decoded r;
        int rc = decode_bulk(d, piece, count, half_, &r);
        if (count == 1) stride = std::int64_t(piece);  // (one piece: its stride means nothing)
        if (rc == MPI_SUCCESS) {
            const bool answers = r.kind == int(RmaKind::get) || r.kind == int(RmaKind::get_acc);
            const void* src = r.has_origin ? data : nullptr;
            if (r.kind == int(RmaKind::get_acc) && r.has_origin) {
                // The operand out of the buffer first: the old values replace it there.
                if (operand_bytes_ < half_) {
                    operand_ = std::make_unique<unsigned char[]>(half_);
                    operand_bytes_ = half_;
                }
                std::memcpy(operand_.get(), data, piece * count);
                src = operand_.get();
            }
            rc = apply_bulk(r.kind, r.op_id, r.type_id, toff, stride, piece, count, src, answers ? data : nullptr);
        }
        h[kBAnswer] = std::uint64_t(std::int64_t(rc));
        __atomic_store_n(h + kBState, kAnswered, __ATOMIC_RELEASE);
        served = true;
    }
    return served;
}

void Server::beat_now(std::uint64_t* my_state) {
    // (A plain load and store: two threads passing at once may skip a count.)
    const unsigned passes = beat_passes_.load(std::memory_order_relaxed);
    beat_passes_.store(passes + 1, std::memory_order_relaxed);
    if (passes % kBeatPasses != 0) return;
    const std::uint64_t t = now_ns();
    if (t - __atomic_load_n(my_state + kServedBeat, __ATOMIC_RELAXED) >= kBeatEveryNs)
        __atomic_store_n(my_state + kServedBeat, t, __ATOMIC_RELEASE);
}

bool Server::slots_posted(const std::uint64_t* my_state) const {
    bool any = false;
    for (std::size_t i = 0; i < kServedSlots; ++i)
        any |= __atomic_load_n(slot(const_cast<std::uint64_t*>(my_state), i) + kState, __ATOMIC_RELAXED) == kPosted;
    if (half_)
        for (int b = 0; b < 2; ++b)
            any |= __atomic_load_n(bulk_header(const_cast<std::uint64_t*>(my_state) + bulk_word_, b) + kBState,
                                   __ATOMIC_RELAXED) == kPosted;
    return any;
}

bool Server::posted(std::uint64_t* my_state) {
    const unsigned hot = hot_.load(std::memory_order_relaxed);
    if (hot) {
        if (slots_posted(my_state)) return true;
        if (hot > 1) {
            hot_.store(hot - 1, std::memory_order_relaxed);  // (racing passes may skip a count)
        } else {
            // Going cold, under mu_ as serve() goes hot (so kServedScanning is never left set
            // with hot_ at 0): origins set the flag word again from here on; a post that saw
            // the scanning word still set is in the slots, read once more after the fence.
            std::unique_lock lk(mu_, std::try_to_lock);
            if (lk.owns_lock() && hot_.load(std::memory_order_relaxed) == 1) {
                hot_.store(0, std::memory_order_relaxed);
                __atomic_store_n(my_state + kServedScanning, 0, __ATOMIC_RELAXED);
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
                if (slots_posted(my_state)) return true;
            }
        }
    }
    return __atomic_load_n(my_state + kServedPosted, __ATOMIC_RELAXED) != 0;
}

bool Server::poll(std::uint64_t* my_state, const Apply& apply, const ApplyBulk& apply_bulk, bool beat) {
    if (beat) beat_now(my_state);
    return posted(my_state) && serve(my_state, apply, apply_bulk);
}

std::atomic<bool> g_fault_kill_serving{false};

void Server::serve_slot(std::uint64_t* s, const Apply& apply) {
    if (g_fault_kill_serving.load(std::memory_order_relaxed)) kill(getpid(), SIGKILL);
    // The header read once, the data copied out before it is applied: node peers may write
    // the slot meanwhile.
    Decoded r;
    int rc =
        decode_slot(__atomic_load_n(s + kDesc, __ATOMIC_RELAXED), __atomic_load_n(s + kToff, __ATOMIC_RELAXED), &r);
    if (rc == MPI_SUCCESS) {
        std::uint64_t in[kMaxBytes / 8], out[kMaxBytes / 8];  // origin data (operand, compare); the answer
        std::memcpy(in, s + kData, kMaxBytes);
        const bool answers = r.kind != int(RmaKind::put) && r.kind != int(RmaKind::acc);
        if (r.kind == int(RmaKind::put) || r.kind == int(RmaKind::get)) {
            rc = apply(r.kind, 0, 0, r.toff, r.bytes, r.has_origin ? in : nullptr, nullptr, out);
        } else if (r.kind == int(RmaKind::acc) || r.kind == int(RmaKind::get_acc)) {
            rc = apply(r.kind, r.op_id, r.type_id, r.toff, r.bytes, r.has_origin ? in : nullptr, nullptr,
                       r.kind == int(RmaKind::get_acc) ? out : nullptr);
        } else {  // fetch_and_op, compare_and_swap: an operand word and a compare word
            out[0] = 0;
            rc = apply(r.kind, r.op_id, r.type_id, r.toff, r.bytes, r.has_origin ? in : nullptr,
                       r.kind == int(RmaKind::cas) ? in + 1 : nullptr, out);
        }
        if (rc == MPI_SUCCESS && answers) std::memcpy(s + kData, out, r.bytes);
    }
    s[kAnswer] = std::uint64_t(std::int64_t(rc));
    __atomic_store_n(s + kState, kAnswered, __ATOMIC_RELEASE);
}

bool Server::serve(std::uint64_t* my_state, const Apply& apply, const ApplyBulk& apply_bulk) {
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;  // another thread serves them
    // The flag cleared before the scan: a post after this sets it again for the next pass.
    if (__atomic_load_n(my_state + kServedPosted, __ATOMIC_RELAXED))
        __atomic_exchange_n(my_state + kServedPosted, 0, __ATOMIC_SEQ_CST);
    bool served = false;
    for (std::size_t i = 0; i < kServedSlots; ++i) {
        std::uint64_t* s = slot(my_state, i);
        if (__atomic_load_n(s + kState, __ATOMIC_RELAXED) != kPosted || !cas(s + kState, kPosted, kTaken)) continue;
        serve_slot(s, apply);
        served = true;
    }
    if (apply_bulk && poll_bulk(my_state, apply_bulk)) served = true;
    if (served) {  // (under mu_, as going cold in posted())
        hot_.store(kHotPasses, std::memory_order_relaxed);
        if (!__atomic_load_n(my_state + kServedScanning, __ATOMIC_RELAXED))
            __atomic_store_n(my_state + kServedScanning, 1, __ATOMIC_RELAXED);
    }
    return served;
}

}  // namespace fastrma::detail::served
