// served.cpp — see served.hpp.
#include "transport/shm/served.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <mpi.h>

#include "engine/stats.hpp"
#include "ops/op.hpp"

namespace fastrma::detail::served {

namespace {
// kDesc: kind | op << 8 | type << 16 | bytes << 32 | has origin << 48.

std::uint64_t now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

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

thread_local unsigned t_first_slot = unsigned(reinterpret_cast<std::uintptr_t>(&t_first_slot) >> 6);
}  // namespace

bool fresh(const std::uint64_t* state, std::uint64_t within_ns, std::uint64_t* at) {
    const std::uint64_t beat = __atomic_load_n(state + kServedBeat, __ATOMIC_ACQUIRE);
    if (!beat) return false;
    const std::uint64_t t = now();
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
               std::uint64_t(req.bytes) << 32 | (req.origin ? 1ull << 48 : 0);
    s[kToff] = req.toff;
    p->slot = s;
    p->bytes = req.bytes;
    p->t0 = t0 ? t0 : now();
    __atomic_store_n(s + kState, kPosted, __ATOMIC_RELEASE);
    announce(state);
    return true;
}

Outcome finish(Posted& p, void* result, int* rc) {
    std::uint64_t* const s = p.slot;
    for (unsigned spins = 0;; ++spins) {
        const std::uint64_t st = __atomic_load_n(s + kState, __ATOMIC_ACQUIRE);
        if (st == kAnswered) break;
        // Withdrawn only if still posted: the target's CAS posted -> taken and this one
        // cannot both succeed.
        if (st == kPosted && (spins & 63) == 63 && now() - p.t0 > kServedWaitNs && cas(s + kState, kPosted, kFree))
            return Outcome::withdrawn;
        if (spins > 4096 && st == kTaken)
            sched_yield();  // taken: the answer is certain, only its thread may be descheduled
        else
            __builtin_ia32_pause();
    }
    const int answer = int(std::int64_t(s[kAnswer]));
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

bool BulkChannel::claim(std::uint64_t* state, std::uint64_t wait_ns, std::uint64_t patience_ns) {
    const std::uint64_t word = __atomic_load_n(state + kServedBulkWord, __ATOMIC_ACQUIRE);
    const std::size_t half = bulk_half(state[kServedBulkBytes]);
    if (!word || !half) return false;
    std::uint64_t* a = state + word;
    const std::uint64_t t0 = wait_ns ? now() : 0;
    for (unsigned spins = 0;; ++spins) {
        if (fresh(state, std::max(kFreshNs, patience_ns)) && __atomic_load_n(a, __ATOMIC_RELAXED) == 0 && cas(a, 0, 1))
            break;
        if (!wait_ns || now() - t0 > wait_ns) return false;
        if (serve_ && (spins & 15) == 15) serve_(serve_arg_);
        __builtin_ia32_pause();
    }
    state_ = state, area_ = a, half_ = half;
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
        std::uint64_t t0 = now();
        for (unsigned spins = 0;; ++spins) {
            const std::uint64_t st = __atomic_load_n(h + kBState, __ATOMIC_ACQUIRE);
            if (st == kAnswered) break;
            if (st == kPosted && (spins & 63) == 63) {
                // The target applying our other part counts as progress: it takes this one
                // next; so does the time spent serving the target's own requests here.
                if (__atomic_load_n(other + kBState, __ATOMIC_ACQUIRE) == kTaken || (serve_ && serve_(serve_arg_)))
                    t0 = now();
                else if (now() - t0 > wait_ns_ && cas(h + kBState, kPosted, kFree))
                    return Outcome::withdrawn;
            }
            if (st == kTaken && (spins & 63) == 63 && serve_) serve_(serve_arg_);
            // (the target may need this core: ranks oversubscribe the machine)
            if (spins > 4096)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
        const int answer = int(std::int64_t(h[kBAnswer]));
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
        stop_ = !fresh(state_, fresh_ns_);  // the target left MPI: the rest goes by fallback too
    }
    if (next < r.count)
        if (int e = fallback(next, r.count - next); e && !err) err = e;
    return err;
}

bool Server::poll_bulk(std::uint64_t* my_state, const ApplyBulk& apply_bulk) {
    const std::uint64_t word = my_state[kServedBulkWord];
    const std::size_t half = bulk_half(my_state[kServedBulkBytes]);
    if (!word || !half) return false;
    std::uint64_t* const area = my_state + word;
    bool served = false;
    for (int b = 0; b < 2; ++b) {
        std::uint64_t* h = bulk_header(area, b);
        if (__atomic_load_n(h + kBState, __ATOMIC_ACQUIRE) != kPosted || !cas(h + kBState, kPosted, kTaken)) continue;
        const std::uint64_t d = h[kBDesc];
        const int kind = int(d & 0xff), op_id = int((d >> 8) & 0xff), type_id = int((d >> 16) & 0xffff);
        const bool has_origin = (d >> 48) & 1;
        const std::uint64_t piece = h[kBPiece], count = h[kBCount];
        unsigned char* data = bulk_data(area, half, b);
        int rc = kRefused;
        const bool known = kind == int(RmaKind::put) || kind == int(RmaKind::get) || kind == int(RmaKind::acc) ||
                           kind == int(RmaKind::get_acc);
        const bool answers = kind == int(RmaKind::get) || kind == int(RmaKind::get_acc);
        if (known && (kind != int(RmaKind::put) || has_origin) && piece != 0 && count != 0 && piece <= half &&
            count <= half / piece) {
            const void* src = has_origin ? data : nullptr;
            if (kind == int(RmaKind::get_acc) && has_origin) {
                // The operand out of the buffer first: the old values replace it there.
                if (operand_bytes_ < half) {
                    operand_ = std::make_unique<unsigned char[]>(half);
                    operand_bytes_ = half;
                }
                std::memcpy(operand_.get(), data, piece * count);
                src = operand_.get();
            }
            rc = apply_bulk(kind, op_id, type_id, h[kBToff], std::int64_t(h[kBStride]), piece, count, src,
                            answers ? data : nullptr);
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
    const std::uint64_t t = now();
    if (t - __atomic_load_n(my_state + kServedBeat, __ATOMIC_RELAXED) >= kBeatEveryNs)
        __atomic_store_n(my_state + kServedBeat, t, __ATOMIC_RELEASE);
}

bool Server::slots_posted(const std::uint64_t* my_state) {
    bool any = false;
    for (std::size_t i = 0; i < kServedSlots; ++i)
        any |= __atomic_load_n(slot(const_cast<std::uint64_t*>(my_state), i) + kState, __ATOMIC_RELAXED) == kPosted;
    if (const std::uint64_t word = __atomic_load_n(my_state + kServedBulkWord, __ATOMIC_RELAXED))
        for (int b = 0; b < 2; ++b)
            any |= __atomic_load_n(bulk_header(const_cast<std::uint64_t*>(my_state) + word, b) + kBState,
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
        const std::uint64_t d = s[kDesc];
        const int kind = int(d & 0xff), op_id = int((d >> 8) & 0xff), type_id = int((d >> 16) & 0xffff);
        const std::uint64_t bytes = (d >> 32) & 0xffff;
        int rc;
        if (kind == int(RmaKind::put)) {
            rc = apply(kind, 0, 0, s[kToff], bytes, s + kData, nullptr, nullptr);
        } else if (kind == int(RmaKind::get)) {
            rc = apply(kind, 0, 0, s[kToff], bytes, nullptr, nullptr, s + kData);
        } else if (kind == int(RmaKind::acc) || kind == int(RmaKind::get_acc)) {
            // The operand out of the slot first: get_accumulate's old values replace it there.
            std::uint64_t operand[kMaxBytes / 8];
            if ((d >> 48) & 1) std::memcpy(operand, s + kData, bytes);
            rc = apply(kind, op_id, type_id, s[kToff], bytes, (d >> 48) & 1 ? operand : nullptr, nullptr,
                       kind == int(RmaKind::get_acc) ? s + kData : nullptr);
        } else {
            const std::uint64_t operand = s[kData], compare = s[kData + 1];
            std::uint64_t old = 0;
            rc = apply(kind, op_id, type_id, s[kToff], bytes, (d >> 48) & 1 ? &operand : nullptr,
                       kind == int(RmaKind::cas) ? &compare : nullptr, &old);
            s[kData] = old;
        }
        s[kAnswer] = std::uint64_t(std::int64_t(rc));
        __atomic_store_n(s + kState, kAnswered, __ATOMIC_RELEASE);
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
