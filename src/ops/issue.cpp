// issue.cpp — see issue.hpp.
#include "ops/issue.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/errors.hpp"
#include "ops/reduce.hpp"
#include "ops/state_words.hpp"

namespace fastrma::detail {

std::uint64_t span_bytes(const TypeInfo& ti, std::size_t count) {
    if (count == 0) return 0;
    std::uint64_t last = ti.cls == TypeClass::pair ? ti.index_offset + ti.index_size : ti.size;
    return std::uint64_t(count - 1) * ti.extent + last;
}

namespace {

// Splits count elements into chunks that cover only data bytes and hands them to fn in
// bounded batches (no allocation proportional to count).
template <class Fn>
Post for_each_chunk(const TypeInfo& ti, void* local, std::uint64_t offset, std::size_t count,
                    Fn&& fn) {
    if (count == 0) return Post::done;
    auto* base = static_cast<unsigned char*>(local);
    if (ti.cls != TypeClass::pair || ti.size == ti.extent) {
        Chunk c{base, offset, std::size_t(span_bytes(ti, count))};
        return fn(&c, std::size_t(1));
    }
    constexpr std::size_t kBatch = 256;  // chunks per batch, two per element
    Chunk chunks[kBatch];
    std::size_t n = 0;
    for (std::size_t i = 0; i < count; ++i) {
        std::size_t e = i * ti.extent;
        chunks[n++] = {base + e, offset + e, ti.value_size};
        chunks[n++] = {base + e + ti.index_offset, offset + e + ti.index_offset, ti.index_size};
        if (n == kBatch) {
            if (Post p = fn(chunks, n); p != Post::done) return p;
            n = 0;
        }
    }
    return n ? fn(chunks, n) : Post::done;
}

int transfer(const IssueContext& ctx, bool is_put, const TypeInfo& ti, void* local,
             std::uint64_t offset, std::size_t count) {
    Post p = for_each_chunk(ti, local, offset, count, [&](const Chunk* c, std::size_t n) {
        return is_put ? ctx.tp.put(ctx.peer, c, n) : ctx.tp.get(ctx.peer, c, n);
    });
    return p == Post::done ? MPI_SUCCESS : MPI_ERR_OTHER;
}

// ---- acc_locked: the target's striped accumulate lock ----

class StripeGuard {
public:
    StripeGuard(const IssueContext& ctx, std::uint64_t offset, std::uint64_t bytes)
        : ctx_(ctx) {
        const int n = std::max(1, std::min(ctx.acc_stripes, kMaxAccStripes));
        std::uint64_t first = offset / 64, last = (offset + (bytes ? bytes - 1 : 0)) / 64;
        if (last - first + 1 >= std::uint64_t(n)) {
            for (int s = 0; s < n; ++s) mask_ |= 1ull << s;
        } else {
            for (std::uint64_t l = first; l <= last; ++l) mask_ |= 1ull << (l % n);
        }
        for (int s = 0; s < kMaxAccStripes; ++s)  // ascending order: no deadlock between origins
            if (mask_ >> s & 1) acquire(word(s));
    }
    ~StripeGuard() {
        for (int s = kMaxAccStripes - 1; s >= 0; --s)
            if (mask_ >> s & 1) ctx_.tp.atomic8(ctx_.peer, word(s), AtomicOp::swap, 0);
    }

private:
    static std::size_t word(int s) { return kAccStripe0 + std::size_t(s) * kWordsPerLine; }
    void acquire(std::size_t w) {
        for (unsigned spins = 0;; ++spins) {
            if (ctx_.tp.atomic8(ctx_.peer, w, AtomicOp::compare_swap, 1, 0) == 0) return;
            // The holder may be descheduled (oversubscribed ranks): yield soon.
            if (spins > 64) sched_yield(); else __builtin_ia32_pause();
        }
    }
    const IssueContext& ctx_;
    std::uint64_t mask_ = 0;
};

int acc_locked(const IssueContext& ctx, const Op& op, const TypeInfo& ti) {
    const std::uint64_t bytes = std::uint64_t(op.count) * ti.extent;
    StripeGuard guard(ctx, op.offset, bytes);
    if (ctx.peer.mapped) {  // in place
        unsigned char* dst = ctx.peer.mapped + op.offset;
        if (op.kind == RmaKind::cas) compare_and_swap(ti, dst, op.origin, op.compare, op.result);
        else reduce(op.op, ti, dst, op.origin, op.count, op.result);
        return MPI_SUCCESS;
    }
    // Through the transport, pipelined in bounded pieces of whole elements.
    const std::size_t per = std::max<std::size_t>(1, (64 * 1024) / ti.extent);
    std::vector<unsigned char> tmp(std::min(op.count, per) * ti.extent);
    for (std::size_t done = 0; done < op.count; done += per) {
        std::size_t n = std::min(per, op.count - done);
        std::uint64_t off = op.offset + done * ti.extent;
        if (int rc = transfer(ctx, false, ti, tmp.data(), off, n)) return rc;
        auto* res = op.result ? static_cast<unsigned char*>(op.result) + done * ti.extent : nullptr;
        if (op.kind == RmaKind::cas) {
            compare_and_swap(ti, tmp.data(), op.origin, op.compare, res);
        } else {
            auto* src = op.origin ? static_cast<const unsigned char*>(op.origin) + done * ti.extent
                                  : nullptr;
            if (op.op == MPI_NO_OP) {
                if (res) std::memcpy(res, tmp.data(), n * ti.extent);
                continue;
            }
            reduce(op.op, ti, tmp.data(), src, n, res);
        }
        if (int rc = transfer(ctx, true, ti, tmp.data(), off, n)) return rc;
    }
    return MPI_SUCCESS;
}

// ---- acc_native: CPU atomics on mapped memory ----

bool acc_native(const IssueContext& ctx, const Op& op, const TypeInfo& ti) {
    if (!ctx.cpu_atomics || !ctx.peer.mapped || !ti.native_atomic) return false;
    unsigned char* dst = ctx.peer.mapped + op.offset;
    if (op.kind == RmaKind::cas)
        return compare_and_swap_atomic(ti, dst, op.origin, op.compare, op.result);
    return reduce_atomic(op.op, ti, dst, op.origin, op.count, op.result);
}

}  // namespace

int issue_op(const IssueContext& ctx, const Op& op) {
    const TypeInfo& ti = *op.type;
    switch (op.kind) {
    case RmaKind::put:
        return transfer(ctx, true, ti, const_cast<void*>(op.origin), op.offset, op.count);
    case RmaKind::get:
        return transfer(ctx, false, ti, op.result, op.offset, op.count);
    case RmaKind::acc:
    case RmaKind::get_acc:
    case RmaKind::fop:
    case RmaKind::cas:
        if (acc_native(ctx, op, ti)) return MPI_SUCCESS;
        return acc_locked(ctx, op, ti);
    }
    return MPI_ERR_INTERN;
}

}  // namespace fastrma::detail
