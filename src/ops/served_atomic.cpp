// served_atomic.cpp — see served_atomic.hpp.
#include "ops/served_atomic.hpp"

#include <sched.h>
#include <time.h>

#include <cstring>
#include <mutex>

#include "engine/stats.hpp"
#include "ops/op.hpp"
#include "ops/state_words.hpp"

namespace fastrma::detail::served {

namespace {
// A slot's words (from its first): state, request (kind | op << 8 | type << 16 | bytes <<
// 32), target offset, operand, compare, old value, answer (MPI error class).
enum : std::size_t { kState, kDesc, kToff, kOperand, kCompare, kResult, kAnswer };
// kState: free -> claimed (the origin writes) -> posted -> taken (the target applies) ->
// answered -> free (the origin read it); posted -> free when the origin withdraws.
enum : std::uint64_t { kFree, kClaimed, kPosted, kTaken, kAnswered };

std::uint64_t now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

std::uint64_t* slot(std::uint64_t* state, std::size_t i) { return state + kServedSlot0 + i * kWordsPerLine; }

bool cas(std::uint64_t* w, std::uint64_t from, std::uint64_t to) {
    return __atomic_compare_exchange_n(w, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

thread_local unsigned t_first_slot = unsigned(reinterpret_cast<std::uintptr_t>(&t_first_slot) >> 6);
}  // namespace

bool try_remote(std::uint64_t* state, const Request& req, void* result, int* rc) {
    const std::uint64_t beat = __atomic_load_n(state + kServedBeat, __ATOMIC_ACQUIRE);
    if (!beat || req.bytes > 8) return false;
    const std::uint64_t t0 = now();
    if (t0 - beat > kFreshNs && beat - t0 > kFreshNs) return false;  // (either order of clocks)
    std::uint64_t* s = nullptr;
    for (std::size_t k = 0; k < kServedSlots && !s; ++k) {
        std::uint64_t* c = slot(state, (t_first_slot + k) % kServedSlots);
        if (__atomic_load_n(c + kState, __ATOMIC_RELAXED) == kFree && cas(c + kState, kFree, kClaimed)) s = c;
    }
    if (!s) return false;
    std::uint64_t operand = 0, compare = 0;
    if (req.origin) std::memcpy(&operand, req.origin, req.bytes);
    if (req.compare) std::memcpy(&compare, req.compare, req.bytes);
    s[kDesc] = std::uint64_t(req.kind) | std::uint64_t(req.op_id) << 8 | std::uint64_t(req.type_id) << 16 |
               std::uint64_t(req.bytes) << 32 | (req.origin ? 1ull << 48 : 0);
    s[kToff] = req.toff;
    s[kOperand] = operand;
    s[kCompare] = compare;
    __atomic_store_n(s + kState, kPosted, __ATOMIC_RELEASE);
    __atomic_fetch_add(state + kServedPosts, 1, __ATOMIC_RELEASE);
    for (unsigned spins = 0;; ++spins) {
        const std::uint64_t st = __atomic_load_n(s + kState, __ATOMIC_ACQUIRE);
        if (st == kAnswered) break;
        if (st == kPosted && (spins & 63) == 63 && now() - t0 > kServedWaitNs && cas(s + kState, kPosted, kFree)) {
            bump(Stat::atomics_withdrawn);
            return false;  // withdrawn before anyone took it
        }
        if (spins > 4096 && st == kTaken)
            sched_yield();  // taken: the answer is certain, only its thread may be descheduled
        else
            __builtin_ia32_pause();
    }
    const int answer = int(std::int64_t(s[kAnswer]));
    if (answer == kRefused) {
        __atomic_store_n(s + kState, kFree, __ATOMIC_RELEASE);
        return false;
    }
    std::memcpy(result, &s[kResult], req.bytes);
    *rc = answer;
    bump(Stat::atomics_served);
    __atomic_store_n(s + kState, kFree, __ATOMIC_RELEASE);
    return true;
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
        const std::uint64_t operand = s[kOperand], compare = s[kCompare];
        std::uint64_t old = 0;
        const int kind = int(d & 0xff), op_id = int((d >> 8) & 0xff), type_id = int((d >> 16) & 0xffff);
        const int rc = apply(kind, op_id, type_id, s[kToff], 1, (d >> 48) & 1 ? &operand : nullptr,
                             kind == int(RmaKind::cas) ? &compare : nullptr, &old);
        s[kResult] = old;
        s[kAnswer] = std::uint64_t(std::int64_t(rc));
        __atomic_store_n(s + kState, kAnswered, __ATOMIC_RELEASE);
        served = true;
    }
    return served;
}

}  // namespace fastrma::detail::served
