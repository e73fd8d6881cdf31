// stats.hpp — the engine's counters, cheap enough for the hot path.
//
// Each thread counts into its own shard (a relaxed load and store, no locked RMW, no
// shared cache line), so many threads posting at once do not contend on a counter.
// Totals sum the shards; a shard outlives its thread so nothing counted is lost.
#pragma once

#include <atomic>
#include <cstdint>

namespace fastrma::detail {

enum class Stat : int {
    puts,
    gets,
    accs,
    fops,
    cases,
    direct,
    queued,
    gc_runs,
    lock_retries,
    windows_created,
    bells_rung,
    locks_parked,  // am: origins' lock requests that waited at this target (taken)
    cma_batched,  // small puts/gets to unmapped peers that joined a CmaBatch
    cma_drains,  // process_vm_writev/readv calls that moved batches (a batch, a side)
    atomics_served,  // fetch_and_op, compare_and_swap, small accumulates applied by a node peer's CPU (served.hpp)
    atomics_withdrawn,  // ... posted to it, not taken in time, applied by cross-memory attach
    transfers_served,  // small puts and gets of a CmaBatch moved by the peer's CPU (transport/shm/served.hpp)
    transfers_withdrawn,  // ... posted to it, not taken in time, moved by cross-memory attach
    bulk_served,  // parts of large or strided transfers applied by a node peer's CPU (served.hpp, bulk)
    bulk_withdrawn,  // ... not taken in time or refused, moved by cross-memory attach
    bulk_declined,  // contiguous transfers the area could move sent by one syscall, cheaper lately (path_costs.hpp)
    windows_am,  // windows whose remote peers went over am (the rest of windows_created: shm)
    windows_ofi,  // ... over ofi
    retries,  // posts a transport refused (full: Post::retry); the op queued and went later
    count_
};

struct alignas(64) StatShard {  // one cache line per thread: no false sharing between threads
    std::atomic<std::uint64_t> v[int(Stat::count_)] = {};
};

StatShard* register_stat_shard();

// The calling thread's shard, made on its first count. Initial-exec TLS: one load off the
// thread pointer. A dynamically initialized thread_local in a shared library costs a call
// to __tls_get_addr and a guard check per access.
[[gnu::tls_model("initial-exec")]] inline thread_local StatShard* t_stat_shard = nullptr;

inline void bump(Stat s, std::uint64_t n = 1) {
    StatShard* shard = t_stat_shard;
    if (!shard) [[unlikely]]
        shard = t_stat_shard = register_stat_shard();
    auto& a = shard->v[int(s)];
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

std::uint64_t stat_total(Stat s);

}  // namespace fastrma::detail
