// arena.cpp — see arena.hpp.
//
// Free space is kept twice: per chunk by offset (to merge a freed block with its free
// neighbours) and across chunks by (length, chunk, offset) (best fit: the smallest free
// block that holds the request, lowest chunk and offset first, so reserved pages are reused
// before new ones are reserved). Blocks are carved from the low end of the free block
// chosen, so a chunk fills from offset 0 upward and its reserved pages are always the
// prefix [0, reserved): a block reaching past it reserves the difference.
#include "transport/shm/arena.hpp"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "base/errors.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace fastrma::detail {

namespace {
constexpr std::size_t kSmallAlign = 64;
constexpr std::uint32_t kDedicated = ~0u;  // Live::chunk of a block with its own segment
constexpr std::uint32_t kMalloc = ~0u - 1;  // Live::chunk of the malloc fallback

std::size_t page_size() {
    static const std::size_t pg = std::size_t(sysconf(_SC_PAGESIZE));
    return pg;
}
std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

struct Chunk {
    ShmSegment seg;
    std::size_t reserved = 0;  // [0, reserved) has its pages reserved
};

struct Live {
    std::uint32_t chunk;  // index into chunks, or kDedicated / kMalloc
    std::size_t off;  // block offset in its chunk
    std::size_t len;  // block length (what goes back to the free lists)
    std::size_t size;  // requested size
    std::unique_ptr<ShmSegment> own;  // kDedicated
};

}  // namespace

struct ShmArena::Impl {
    std::size_t chunk_bytes, dedicated_bytes;
    std::mutex mu;
    std::vector<std::unique_ptr<Chunk>> chunks;
    std::vector<std::map<std::size_t, std::size_t>> free_by_off;  // per chunk: off -> len
    std::set<std::tuple<std::size_t, std::uint32_t, std::size_t>> free_by_len;  // (len, chunk, off)
    std::map<std::uintptr_t, Live> live;  // by address
    std::size_t live_bytes = 0;
    std::size_t dedicated = 0;
    std::uint64_t id_base = 0;  // random high half of chunk ids (pids may be reused)
    std::uint32_t next_id = 1;

    void add_free(std::uint32_t c, std::size_t off, std::size_t len) {
        free_by_off[c].emplace(off, len);
        free_by_len.emplace(len, c, off);
    }
    void remove_free(std::uint32_t c, std::map<std::size_t, std::size_t>::iterator it) {
        free_by_len.erase({it->second, c, it->first});
        free_by_off[c].erase(it);
    }
    // Gives [off, off + len) of chunk c back, merged with free neighbours.
    void release(std::uint32_t c, std::size_t off, std::size_t len) {
        auto& m = free_by_off[c];
        auto next = m.find(off + len);
        if (next != m.end()) {
            len += next->second;
            remove_free(c, next);
        }
        auto after = m.lower_bound(off);
        if (after != m.begin()) {
            auto prev = std::prev(after);
            if (prev->first + prev->second == off) {
                off = prev->first;
                len += prev->second;
                remove_free(c, prev);
            }
        }
        add_free(c, off, len);
    }
    // The best-fitting free block for len bytes at alignment align: (chunk, offset), carved
    // out; false if none.
    bool take(std::size_t len, std::size_t align, std::uint32_t* c, std::size_t* off) {
        int tries = 0;
        for (auto it = free_by_len.lower_bound({len, 0, 0}); it != free_by_len.end() && tries < 64; ++it, ++tries) {
            const auto [flen, fc, foff] = *it;
            const std::size_t a = round_up(foff, align);
            if (a + len > foff + flen) continue;
            remove_free(fc, free_by_off[fc].find(foff));
            if (a > foff) add_free(fc, foff, a - foff);
            if (a + len < foff + flen) add_free(fc, a + len, foff + flen - a - len);
            *c = fc;
            *off = a;
            return true;
        }
        return false;
    }
    int new_chunk() {
        if (id_base == 0) {
            std::uint64_t rnd = 0;
            if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = std::uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
            id_base = rnd << 32 | 1;  // never 0
        }
        auto ch = std::make_unique<Chunk>();
        if (int rc = ch->seg.create(chunk_bytes, ShmMethod::pidfd, false)) return rc;
        ch->seg.set_export_id(id_base + (std::uint64_t(next_id++) << 1));
        chunks.push_back(std::move(ch));
        free_by_off.emplace_back();
        add_free(std::uint32_t(chunks.size() - 1), 0, chunk_bytes);
        return MPI_SUCCESS;
    }
    // Reserves the pages of chunk c up to `end` (and a step beyond), and maps them in.
    int reserve(std::uint32_t c, std::size_t end) {
        Chunk& ch = *chunks[c];
        if (end <= ch.reserved) return MPI_SUCCESS;
        std::size_t to = std::min(chunk_bytes, round_up(std::max(end, ch.reserved + kCommitStep), kCommitStep));
        if (ch.seg.reserve_range(ch.reserved, to - ch.reserved) != MPI_SUCCESS) {
            to = round_up(end, page_size());  // a tight tmpfs: only what this block needs
            if (int rc = ch.seg.reserve_range(ch.reserved, to - ch.reserved)) return rc;
        }
        // Fill the page tables now, in one call, instead of one fault per page later.
        madvise(ch.seg.data() + ch.reserved, to - ch.reserved, MADV_POPULATE_WRITE);
        ch.reserved = to;
        return MPI_SUCCESS;
    }
};

namespace {
bool pidfd_method() {
    static const bool ok = [] {
        ShmSegment probe;
        if (probe.create(1, ShmMethod::automatic) != MPI_SUCCESS) return false;
        return probe.export_info().name[0] == '\0';  // anonymous: pidfd works here
    }();
    return ok;
}

// Peers' chunks mapped in this process: (pid, id) -> mapping, for the life of the process.
struct PeerChunks {
    std::mutex mu;
    std::map<std::pair<pid_t, std::uint64_t>, ShmSegment> maps;
};
PeerChunks& peer_chunks() {
    static auto* p = new PeerChunks;
    return *p;
}
}  // namespace

ShmArena::ShmArena(std::size_t chunk_bytes, std::size_t dedicated_bytes) : impl_(new Impl) {
    impl_->chunk_bytes = chunk_bytes;
    impl_->dedicated_bytes = dedicated_bytes;
}

ShmArena::~ShmArena() {
    for (auto& [p, e] : impl_->live)
        if (e.chunk == kMalloc) std::free(reinterpret_cast<void*>(p));
}

void* ShmArena::alloc(std::size_t size, int* err) {
    *err = MPI_SUCCESS;
    Impl& A = *impl_;
    const std::size_t pg = page_size();
    const std::size_t align = size >= pg ? pg : kSmallAlign;
    const std::size_t len = round_up(size ? size : 1, align);
    Live e{0, 0, len, size, nullptr};
    void* p = nullptr;
    std::lock_guard lk(A.mu);
    if (!pidfd_method()) {
        p = std::malloc(size ? size : 1);
        if (!p) {
            *err = raise(MPI_ERR_NO_MEM, "FRMA_Alloc_mem: cannot allocate %zu bytes", size);
            return nullptr;
        }
        e.chunk = kMalloc;
    } else if (len > A.dedicated_bytes) {
        e.own = std::make_unique<ShmSegment>();
        if ((*err = e.own->create(len, ShmMethod::pidfd)) != MPI_SUCCESS) return nullptr;
        e.chunk = kDedicated;
        p = e.own->data();
        ++A.dedicated;
    } else {
        std::uint32_t c = 0;
        std::size_t off = 0;
        if (!A.take(len, align, &c, &off)) {
            if ((*err = A.new_chunk()) != MPI_SUCCESS) return nullptr;
            if (!A.take(len, align, &c, &off)) {  // cannot happen: a new chunk holds any len
                *err = raise(MPI_ERR_NO_MEM, "FRMA_Alloc_mem: cannot place %zu bytes", size);
                return nullptr;
            }
        }
        if ((*err = A.reserve(c, off + len)) != MPI_SUCCESS) {
            A.release(c, off, len);
            return nullptr;
        }
        e.chunk = c;
        e.off = off;
        p = A.chunks[c]->seg.data() + off;
    }
    A.live_bytes += size;
    A.live.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(e));
    return p;
}

int ShmArena::free(void* base) {
    Impl& A = *impl_;
    std::unique_ptr<ShmSegment> own;  // unmapped after the lock is dropped
    {
        std::lock_guard lk(A.mu);
        auto it = A.live.find(reinterpret_cast<std::uintptr_t>(base));
        if (it == A.live.end())
            return raise(MPI_ERR_ARG, "FRMA_Free_mem: %p was not returned by FRMA_Alloc_mem (or is already free)",
                         base);
        Live& e = it->second;
        if (e.chunk == kMalloc)
            std::free(base);
        else if (e.chunk == kDedicated) {
            own = std::move(e.own);
            --A.dedicated;
        } else
            A.release(e.chunk, e.off, e.len);
        A.live_bytes -= e.size;
        A.live.erase(it);
    }
    return MPI_SUCCESS;
}

bool ShmArena::lookup(const void* base, std::size_t size, ArenaHit* hit) {
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    Impl& A = *impl_;
    std::lock_guard lk(A.mu);
    auto it = A.live.upper_bound(b);
    if (it == A.live.begin()) return false;
    it = std::prev(it);
    const Live& e = it->second;
    if (e.chunk == kMalloc || b + size > it->first + e.size) return false;
    if (e.chunk == kDedicated) {
        hit->seg = e.own->export_info();
        hit->offset = b - it->first;
    } else {
        hit->seg = A.chunks[e.chunk]->seg.export_info();
        hit->offset = e.off + (b - it->first);
    }
    return true;
}

ArenaStats ShmArena::stats() {
    Impl& A = *impl_;
    ArenaStats s;
    s.shared = pidfd_method();
    std::lock_guard lk(A.mu);
    s.live_allocs = A.live.size();
    s.live_bytes = A.live_bytes;
    s.segments = A.chunks.size() + A.dedicated;
    for (auto& c : A.chunks) s.reserved_bytes += c->reserved;
    for (auto& [k, e] : A.live)
        if (e.chunk == kDedicated) s.reserved_bytes += e.len;
    return s;
}

namespace {
ShmArena& process_arena() {
    static auto* a = new ShmArena;  // never destroyed: Free_mem may run during static destruction
    return *a;
}
}  // namespace

void* arena_alloc(std::size_t size, int* err) { return process_arena().alloc(size, err); }
int arena_free(void* base) { return process_arena().free(base); }
bool arena_lookup(const void* base, std::size_t size, ArenaHit* hit) { return process_arena().lookup(base, size, hit); }
ArenaStats arena_stats() { return process_arena().stats(); }
std::size_t arena_bytes() { return arena_stats().live_bytes; }

int ArenaPeerMap::map_peer(const SegmentExport& ex) {
    if (ex.id == 0) {
        int rc = own_.map_peer(ex);
        data_ = rc ? nullptr : own_.data();
        return rc;
    }
    PeerChunks& P = peer_chunks();
    std::lock_guard lk(P.mu);
    auto [it, fresh] = P.maps.try_emplace({ex.pid, ex.id});
    if (fresh) {
        if (int rc = it->second.map_peer(ex)) {
            P.maps.erase(it);
            data_ = nullptr;
            return rc;
        }
    }
    data_ = it->second.data();
    return MPI_SUCCESS;
}

}  // namespace fastrma::detail
