// served.cpp — see served.hpp.
#include "ops/served.hpp"

#include <sched.h>
#include <time.h>

#include <cstring>
#include <mutex>

#include "engine/stats.hpp"
#include "ops/op.hpp"

namespace fastrma::detail::served {

namespace {
// kDesc: kind | op << 8 | type << 16 | bytes << 32 | has origin << 48.
// kState: free -> claimed (the origin writes) -> posted -> taken (the target applies) ->
// answered -> free (the origin read it); posted -> free when the origin withdraws.
enum : std::uint64_t { kFree, kClaimed, kPosted, kTaken, kAnswered };

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
std::size_t max_bytes(int kind) {
    return kind == int(RmaKind::fop) || kind == int(RmaKind::cas) ? 8 : kMaxBytes;
}

thread_local unsigned t_first_slot = unsigned(reinterpret_cast<std::uintptr_t>(&t_first_slot) >> 6);
}  // namespace

bool fresh(const std::uint64_t* state) {
    const std::uint64_t beat = __atomic_load_n(state + kServedBeat, __ATOMIC_ACQUIRE);
    if (!beat) return false;
    const std::uint64_t t = now();
    return t - beat <= kFreshNs || beat - t <= kFreshNs;  // (either order of clocks)
}

bool post(std::uint64_t* state, const Request& req, Posted* p) {
    if (req.bytes > max_bytes(req.kind)) return false;
    std::uint64_t* s = nullptr;
    for (std::size_t k = 0; k < kServedSlots && !s; ++k) {
        std::uint64_t* c = slot(state, (t_first_slot + k) % kServedSlots);
        if (__atomic_load_n(c + kState, __ATOMIC_RELAXED) == kFree && cas(c + kState, kFree, kClaimed)) s = c;
    }
    if (!s) return false;
    ++t_first_slot;  // the next post of this thread starts at the next slot
    if (req.kind == int(RmaKind::put) || ((req.kind == int(RmaKind::acc) || req.kind == int(RmaKind::get_acc)) && req.origin)) {
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
    p->t0 = now();
    __atomic_store_n(s + kState, kPosted, __ATOMIC_RELEASE);
    __atomic_fetch_add(state + kServedPosts, 1, __ATOMIC_RELEASE);
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
    if (!fresh(state) || !post(state, req, &p)) return false;
    const Outcome o = finish(p, result, rc);
    if (o == Outcome::answered) bump(Stat::atomics_served);
    if (o == Outcome::withdrawn) bump(Stat::atomics_withdrawn);
    return o == Outcome::answered;
}

bool Server::poll(std::uint64_t* my_state, const Apply& apply, bool beat) {
    if (beat) __atomic_store_n(my_state + kServedBeat, now(), __ATOMIC_RELEASE);
    const std::uint64_t posts = __atomic_load_n(my_state + kServedPosts, __ATOMIC_ACQUIRE);
    if (posts == seen_.load(std::memory_order_relaxed)) return false;
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;  // another thread serves them
    seen_.store(posts, std::memory_order_relaxed);
    bool served = false;
    for (std::size_t i = 0; i < kServedSlots; ++i) {
        std::uint64_t* s = slot(my_state, i);
        if (__atomic_load_n(s + kState, __ATOMIC_ACQUIRE) != kPosted || !cas(s + kState, kPosted, kTaken)) continue;
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
    return served;
}

}  // namespace fastrma::detail::served
