// window_regions.cpp — what a window's processes expose and how peers find it: shared
// windows' parts (shared_query) and dynamic windows' regions (attach / detach, the region
// tables read in place on the node or cached over messages, refusals by targets).
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/errors.hpp"
#include "engine/window.hpp"

namespace fastrma::detail {

// Dynamic windows: the displacement is an address that must lie in one region the target
// has attached. The peer's table is re-read whenever its version moved, so a region that
// was detached (and whose memory may be reused) is never written.
int Window::dynamic_offset(const char* call, int r, std::uint64_t addr, std::uint64_t bytes) {
    if (bytes == 0 || dynamic_contains(r, addr, bytes)) return MPI_SUCCESS;
    return raise(MPI_ERR_RMA_RANGE, "%s: address %#llx + %llu bytes is not inside a region rank %d has attached", call,
                 static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes), r);
}

namespace {
// Whether the regions region(0..count) cover [addr, addr + bytes) together: one region, or
// adjacent ones (attached back to back; every byte is attached, so MPI allows the access).
// Regions never overlap, so the next piece starts exactly where the last one ended. No
// wrap-around: an access whose end overflows is never covered.
template <class Region>
bool regions_cover(std::uint64_t count, Region region, std::uint64_t addr, std::uint64_t bytes) {
    if (addr + bytes < addr) return false;
    const std::uint64_t end = addr + bytes;
    for (std::uint64_t cur = addr;;) {
        bool advanced = false;
        for (std::uint64_t i = 0; i < count; ++i) {
            const auto [base, size] = region(i);
            if (cur >= base && cur - base < size) {  // cur inside [base, base + size)
                if (end - base <= size) return true;
                cur = base + size;
                advanced = true;
                break;
            }
        }
        if (!advanced) return false;
    }
}

// Whether [addr, addr + bytes) lies in the regions of a dynamic-window table mapped here (the
// owner's words: version, count, then base/size pairs; the version is odd while the owner
// changes it). A seqlock read: no lock, nothing written.
bool table_covers(const std::uint64_t* table, std::size_t capacity, std::uint64_t addr, std::uint64_t bytes) {
    for (unsigned spins = 0;; ++spins) {
        const std::uint64_t v1 = __atomic_load_n(&table[0], __ATOMIC_ACQUIRE);
        if (v1 & 1) {  // attach/detach under way (the owner may be descheduled in it)
            if (spins > 64)
                sched_yield();
            else
                __builtin_ia32_pause();
            continue;
        }
        const std::uint64_t count = std::min<std::uint64_t>(__atomic_load_n(&table[1], __ATOMIC_ACQUIRE), capacity);
        const bool found = regions_cover(
            count,
            [&](std::uint64_t i) {
                return std::pair<std::uint64_t, std::uint64_t>{
                    __atomic_load_n(&table[kDynHeaderWords + 2 * i], __ATOMIC_RELAXED),
                    __atomic_load_n(&table[kDynHeaderWords + 2 * i + 1], __ATOMIC_RELAXED)};
            },
            addr, bytes);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&table[0], __ATOMIC_RELAXED) == v1) return found;
    }
}
}  // namespace

bool Window::dynamic_contains(int r, std::uint64_t addr, std::uint64_t bytes) {
    // A peer of this node: its table is mapped here, read in place (no cache, no lock:
    // threads posting to a dynamic window do not serialize here).
    if (r == rank_ || !remote_peer(r))
        return table_covers((r == rank_ ? my_state_ : state_of(r)) + dyn_word0_, dyn_capacity_, addr, bytes);
    std::lock_guard lk(dyn_mu_);
    RegionCache& c = dyn_cache_[r];
    auto inside = [&] {
        return regions_cover(
            c.regions.size(),
            [&](std::uint64_t i) {
                return std::pair<std::uint64_t, std::uint64_t>{c.regions[i].base, c.regions[i].size};
            },
            addr, bytes);
    };
    // Over am, reading the version is a round trip: a hit in the cached table goes, and the
    // target checks again when the request arrives (LocalTarget::attached; a refusal is
    // reported at the next completion point: completion_error). A miss re-reads the table.
    if (inside()) return true;
    for (;;) {
        std::uint64_t hdr[kDynHeaderWords];
        tp(r).read_state(peer(r), dyn_word0_, kDynHeaderWords, hdr);
        const std::uint64_t v1 = hdr[0];
        if (v1 == c.version) break;
        if (v1 & 1) {
            sched_yield();
            continue;
        }  // the owner is changing it
        const std::uint64_t count = std::min<std::uint64_t>(hdr[1], dyn_capacity_);
        std::vector<std::uint64_t> words(2 * count);
        if (count) tp(r).read_state(peer(r), dyn_word0_ + kDynHeaderWords, 2 * count, words.data());
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        std::uint64_t v2;
        tp(r).read_state(peer(r), dyn_word0_, 1, &v2);
        if (v2 != v1) continue;
        c.regions.resize(count);
        for (std::uint64_t i = 0; i < count; ++i) c.regions[i] = {words[2 * i], words[2 * i + 1]};
        c.version = v1;
        tp(r).learn_regions(peer(r), words.data(), std::size_t(count));  // (ofi: each region's key)
    }
    return inside();
}

bool Window::attached_here(std::uint64_t addr, std::uint64_t bytes) const {
    return table_covers(my_state_ + dyn_word0_, dyn_capacity_, addr, bytes);
}

int Window::completion_error(const char* call, int lo, int hi) {
    // What the node transport's flushes met (a batched or offloaded transfer that failed, a
    // dead node peer).
    if (int e = node_tp_->failed(PeerRegion{}, call)) return e;
    if (!remote_) return MPI_SUCCESS;
    // Operations that failed after they were posted (a network transport's failed
    // completion) or a failure of the medium itself (a host MPI call of am): the first one,
    // with the transport's message.
    for (int r = lo; r < hi; ++r)
        if (int e = tp(r).failed(peer(r), call)) return e;
    // Requests a target refused (am: its server checks every request against what it has),
    // on every flavor: the notices have arrived before the answers that completed the wait.
    remote_->collect_refusals();
    int first = -1;
    std::uint64_t total = 0;
    for (int r = lo; r < hi; ++r) {
        if (r == rank_) continue;
        if (const std::uint64_t n = tp(r).refused(peer(r))) {
            if (first < 0) first = r;
            total += n;
        }
    }
    if (!total) return MPI_SUCCESS;
    const char* why = flavor_ == MPI_WIN_FLAVOR_DYNAMIC
                          ? "their addresses were no longer inside a region the target had attached when they arrived "
                            "(detached after this process last read its regions)"
                          : "the target refused them (outside its part of the window, or malformed)";
    return raise(MPI_ERR_RMA_RANGE, "%s: %llu request(s) to rank %d%s were not applied: %s", call,
                 static_cast<unsigned long long>(total), first, total > 1 && hi - lo > 1 ? " and others" : "", why);
}

// MPI-4.1 §12.2.3: every flavor. A shared window's parts are all mapped here; on other
// flavors a part is returned where this process reaches it by load/store (its own part; node
// peers' parts of allocate windows over shared memory; create-window memory from
// FRMA_Alloc_mem's arena), else base NULL and size 0 — always on dynamic windows. A part of
// size 0 has base NULL (as MPICH answers, and Open MPI for non-contiguous shared windows).
int Window::shared_query(int rank, MPI_Aint* size, int* disp_unit, void** base) const {
    if (rank != MPI_PROC_NULL && (rank < 0 || rank >= nprocs_))
        return raise(MPI_ERR_RANK, "FRMA_Win_shared_query: rank %d is outside the window's group of %d", rank, nprocs_);
    const bool shared = flavor_ == MPI_WIN_FLAVOR_SHARED;
    auto reached = [&](int r) { return shared || (flavor_ != MPI_WIN_FLAVOR_DYNAMIC && peer(r).mapped); };
    if (rank == MPI_PROC_NULL) {  // the first process with a non-empty part reached here
        rank = -1;
        for (int r = 0; r < nprocs_ && rank < 0; ++r)
            if (peer(r).size && reached(r)) rank = r;
        if (rank < 0) {  // every part empty: size 0, base NULL (MPI-3.1 §11.2.3; Open MPI's answer)
            *size = 0;
            *disp_unit = int(disp_unit_of(0));
            *base = nullptr;
            return MPI_SUCCESS;
        }
    }
    *disp_unit = int(disp_unit_of(rank));
    if (!reached(rank) || peer(rank).size == 0) {
        *size = 0;
        *base = nullptr;
        return MPI_SUCCESS;
    }
    *size = MPI_Aint(peer(rank).size);
    *base = peer(rank).mapped;
    return MPI_SUCCESS;
}

int Window::attach(void* base, MPI_Aint size) {
    if (flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_RMA_FLAVOR, "FRMA_Win_attach: the window was not created with FRMA_Win_create_dynamic");
    if (size < 0) return raise(MPI_ERR_SIZE, "FRMA_Win_attach: size %ld is negative", long(size));
    if (!base && size > 0) return raise(MPI_ERR_ARG, "FRMA_Win_attach: base is NULL");
    std::lock_guard lk(dyn_table_mu_);
    std::uint64_t* table = my_word(dyn_word0_);
    std::uint64_t count = table[1];
    const std::uint64_t b = reinterpret_cast<std::uint64_t>(base), e = b + std::uint64_t(size);
    for (std::uint64_t i = 0; i < count; ++i) {
        std::uint64_t rb = table[kDynHeaderWords + 2 * i], re = rb + table[kDynHeaderWords + 2 * i + 1];
        if (b < re && rb < e)
            return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_attach: [%#llx, +%ld) overlaps an attached region",
                         static_cast<unsigned long long>(b), long(size));
    }
    if (count >= dyn_capacity_)
        return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_attach: %zu regions are attached already (FASTRMA_DYN_REGIONS)",
                     dyn_capacity_);
    // A network transport registers the region before any peer can read it in the table.
    if (remote_)
        if (int rc = remote_->expose_region(base, std::uint64_t(size))) return rc;
    __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);  // odd: changing
    __atomic_store_n(&table[kDynHeaderWords + 2 * count], b, __ATOMIC_RELAXED);
    __atomic_store_n(&table[kDynHeaderWords + 2 * count + 1], std::uint64_t(size), __ATOMIC_RELAXED);
    __atomic_store_n(&table[1], count + 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);  // even: stable
    return MPI_SUCCESS;
}

int Window::detach(const void* base) {
    if (flavor_ != MPI_WIN_FLAVOR_DYNAMIC)
        return raise(MPI_ERR_RMA_FLAVOR, "FRMA_Win_detach: the window was not created with FRMA_Win_create_dynamic");
    bool found = false;
    {
        std::lock_guard lk(dyn_table_mu_);
        std::uint64_t* table = my_word(dyn_word0_);
        std::uint64_t count = table[1];
        const std::uint64_t b = reinterpret_cast<std::uint64_t>(base);
        for (std::uint64_t i = 0; i < count && !found; ++i) {
            if (table[kDynHeaderWords + 2 * i] != b) continue;
            __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);
            __atomic_store_n(&table[kDynHeaderWords + 2 * i], table[kDynHeaderWords + 2 * (count - 1)],
                             __ATOMIC_RELAXED);
            __atomic_store_n(&table[kDynHeaderWords + 2 * i + 1], table[kDynHeaderWords + 2 * (count - 1) + 1],
                             __ATOMIC_RELAXED);
            __atomic_store_n(&table[1], count - 1, __ATOMIC_RELEASE);
            __atomic_fetch_add(&table[0], 1, __ATOMIC_ACQ_REL);
            found = true;
        }
    }
    if (!found) return raise(MPI_ERR_RMA_ATTACH, "FRMA_Win_detach: %p is not the base of an attached region", base);
    // Over am the server checked requests against the table it saw: once this returns,
    // none of them touches the region any more (the caller may free it). Over ofi the
    // region's registration closes.
    for (Transport* t : tps_) t->settle();
    if (remote_) remote_->withdraw_region(base);
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
