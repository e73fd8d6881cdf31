// shm.cpp — see shm.hpp.
#include "transport/shm/shm.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/errors.hpp"
#include "ops/copy.hpp"

namespace fastrma::detail {

namespace {
bool cma_direct(pid_t pid, bool write, unsigned char* local, std::uintptr_t remote, std::size_t len) {
    for (std::size_t done = 0; done < len;) {
        iovec l{local + done, len - done}, r{reinterpret_cast<void*>(remote + done), len - done};
        const ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n == 0) errno = EFAULT;
            return false;
        }
        done += std::size_t(n);
    }
    return true;
}
}  // namespace

bool cma_copy(pid_t pid, bool write, void* local, std::uintptr_t remote, std::size_t len) {
    auto* l = static_cast<unsigned char*>(local);
    const bool slow = write ? slow_distance(remote, reinterpret_cast<std::uintptr_t>(l))
                            : slow_distance(reinterpret_cast<std::uintptr_t>(l), remote);
    if (len < kPageOffsetMin || !slow) return cma_direct(pid, write, l, remote, len);
    // The kernel copies through a buffer at the remote side's page offset (distance 0); our
    // copy between it and the caller's buffer is copy_bytes, which does not mind the distance.
    constexpr std::size_t kPiece = 256 * 1024;
    thread_local PageOffsetBuffer bounce(kPiece, 0);
    for (std::size_t off = 0; off < len; off += kPiece) {
        const std::size_t n = std::min(kPiece, len - off);
        bounce.place((remote + off) & 4095);
        if (write) copy_bytes(bounce.data(), l + off, n);
        if (!cma_direct(pid, write, bounce.data(), remote + off, n)) return false;
        if (!write) copy_bytes(l + off, bounce.data(), n);
    }
    return true;
}

bool cma_vec(pid_t pid, bool write, const iovec* l, const iovec* r, std::size_t n) {
    constexpr std::size_t kMaxVec = 512;  // < IOV_MAX
    int first_err = 0;  // an item that fails is skipped: the others still move
    for (std::size_t i = 0; i < n;) {
        const std::size_t k = std::min(kMaxVec, n - i);
        std::size_t want = 0;
        for (std::size_t j = 0; j < k; ++j) want += l[i + j].iov_len;
        const ssize_t got =
            write ? process_vm_writev(pid, l + i, k, r + i, k, 0) : process_vm_readv(pid, l + i, k, r + i, k, 0);
        if (got >= 0 && std::size_t(got) == want) {
            i += k;
            continue;
        }
        // Partial or failed (the kernel stops at a page it cannot take): skip what moved,
        // finish the item where it stopped on its own, go on with the next ones.
        std::size_t done = got > 0 ? std::size_t(got) : 0;
        while (i < n && done >= l[i].iov_len && l[i].iov_len) done -= l[i++].iov_len;
        if (i == n) break;
        auto* local = static_cast<unsigned char*>(l[i].iov_base) + done;
        const auto remote = reinterpret_cast<std::uintptr_t>(r[i].iov_base) + done;
        if (!cma_copy(pid, write, local, remote, l[i].iov_len - done) && !first_err) first_err = errno ? errno : EFAULT;
        ++i;
    }
    if (first_err) errno = first_err;
    return first_err == 0;
}

namespace {
// Moves chunks with process_vm_{writev,readv}, many per syscall.
Post cma(const PeerRegion& peer, const Chunk* chunks, std::size_t n, bool write) {
    auto fail = [&] {
        raise(MPI_ERR_OTHER, "%s on pid %d: %s", write ? "process_vm_writev" : "process_vm_readv", int(peer.pid),
              std::strerror(errno));
        return Post::error;
    };
    if (n == 1) {  // one chunk: the distance-aware copy
        const Chunk& c = chunks[0];
        return cma_copy(peer.pid, write, c.local, peer.remote_addr + c.offset, c.len) ? Post::done : fail();
    }
    constexpr std::size_t kBatch = 512;
    iovec liov[kBatch], riov[kBatch];
    for (std::size_t i = 0; i < n;) {
        const std::size_t k = std::min(kBatch, n - i);
        for (std::size_t j = 0; j < k; ++j) {
            const Chunk& c = chunks[i + j];
            liov[j] = {c.local, c.len};
            riov[j] = {reinterpret_cast<void*>(peer.remote_addr + c.offset), c.len};
        }
        if (!cma_vec(peer.pid, write, liov, riov, k)) return fail();
        i += k;
    }
    return Post::done;
}
}  // namespace

Post ShmTransport::put(const PeerRegion& peer, const Chunk* chunks, std::size_t n) {
    if (peer.mapped) {
        for (std::size_t i = 0; i < n; ++i) copy_bytes(peer.mapped + chunks[i].offset, chunks[i].local, chunks[i].len);
        return Post::done;
    }
    return cma(peer, chunks, n, true);
}

Post ShmTransport::get(const PeerRegion& peer, const Chunk* chunks, std::size_t n) {
    if (peer.mapped) {
        for (std::size_t i = 0; i < n; ++i) copy_bytes(chunks[i].local, peer.mapped + chunks[i].offset, chunks[i].len);
        return Post::done;
    }
    return cma(peer, chunks, n, false);
}

std::uint64_t ShmTransport::atomic8(const PeerRegion& peer, std::size_t word, AtomicOp op, std::uint64_t operand,
                                    std::uint64_t compare) {
    return apply_atomic8(peer.state + word, op, operand, compare);
}

int cma_probe(pid_t pid, std::uint64_t addr) {
    char byte;
    iovec l{&byte, 1}, r{reinterpret_cast<void*>(addr), 1};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == 1 ? 0 : errno;
}

}  // namespace fastrma::detail
