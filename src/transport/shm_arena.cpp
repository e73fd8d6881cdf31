// shm_arena.cpp — see shm_arena.hpp.
#include "transport/shm_arena.hpp"

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

#include "engine/errors.hpp"

namespace fastrma::detail {

namespace {
struct Entry {
    ShmSegment seg;  // owns the mapping and keeps the descriptor open for peers
    bool shared;     // false: plain malloc fallback
    std::size_t size;
};
std::mutex g_mu;
std::map<std::uintptr_t, Entry>& entries() {
    static auto* m = new std::map<std::uintptr_t, Entry>;
    return *m;
}
bool pidfd_method() {
    static const bool ok = [] {
        ShmSegment probe;
        if (probe.create(1, ShmMethod::automatic) != MPI_SUCCESS) return false;
        return probe.export_info().name[0] == '\0';  // anonymous: pidfd works here
    }();
    return ok;
}
}  // namespace

void* arena_alloc(std::size_t size, int* err) {
    *err = MPI_SUCCESS;
    Entry e;
    e.size = size;
    void* p = nullptr;
    if (pidfd_method()) {
        if ((*err = e.seg.create(size ? size : 1, ShmMethod::pidfd)) != MPI_SUCCESS) return nullptr;
        e.shared = true;
        p = e.seg.data();
    } else {
        p = std::malloc(size ? size : 1);
        if (!p) {
            *err = raise(MPI_ERR_NO_MEM, "FRMA_Alloc_mem: cannot allocate %zu bytes", size);
            return nullptr;
        }
        e.shared = false;
    }
    std::lock_guard lk(g_mu);
    entries().emplace(reinterpret_cast<std::uintptr_t>(p), std::move(e));
    return p;
}

int arena_free(void* base) {
    std::lock_guard lk(g_mu);
    auto it = entries().find(reinterpret_cast<std::uintptr_t>(base));
    if (it == entries().end())
        return raise(MPI_ERR_ARG, "FRMA_Free_mem: %p was not returned by FRMA_Alloc_mem", base);
    if (!it->second.shared) std::free(base);
    entries().erase(it);  // unmaps and closes the segment
    return MPI_SUCCESS;
}

bool arena_lookup(const void* base, std::size_t size, ArenaHit* hit) {
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    std::lock_guard lk(g_mu);
    auto& m = entries();
    auto it = m.upper_bound(b);
    if (it == m.begin()) return false;
    it = std::prev(it);
    const Entry& e = it->second;
    if (!e.shared || b + size > it->first + e.size) return false;
    hit->seg = e.seg.export_info();
    hit->offset = b - it->first;
    return true;
}

std::size_t arena_bytes() {
    std::lock_guard lk(g_mu);
    std::size_t n = 0;
    for (auto& [k, e] : entries()) n += e.size;
    return n;
}

}  // namespace fastrma::detail
