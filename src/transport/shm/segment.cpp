// segment.cpp — see segment.hpp.
#include "transport/shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/errors.hpp"
#include "transport/shm/cma.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace fastrma::detail {

namespace {
std::size_t page_round(std::size_t n) {
    const std::size_t pg = std::size_t(sysconf(_SC_PAGESIZE));
    return (n + pg - 1) / pg * pg;
}

int memfd(const char* name) { return int(syscall(SYS_memfd_create, name, MFD_CLOEXEC)); }

int fetch_peer_fd(pid_t pid, int fd) {
    int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return -1;
    int got = int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    int saved = errno;
    close(pidfd);
    errno = saved;
    return got;
}

// Does the kernel offer memfd and pidfd_getfd? Probed on ourselves, which the ptrace rules
// always allow: whether a peer lets us in is attach_probe()'s question (windows ask it).
bool pidfd_usable() {
    static const bool usable = [] {  // thread-safe one-time probe
        int fd = memfd("fastrma-probe");
        int got = fd >= 0 ? fetch_peer_fd(getpid(), fd) : -1;
        if (got >= 0) close(got);
        if (fd >= 0) close(fd);
        return got >= 0;
    }();
    return usable;
}
}  // namespace

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
    if (this != &o) {
        reset();
        addr_ = std::exchange(o.addr_, nullptr);
        len_ = std::exchange(o.len_, 0);
        fd_ = std::exchange(o.fd_, -1);
        owner_ = std::exchange(o.owner_, false);
        ex_ = o.ex_;
        o.ex_ = SegmentExport{};
    }
    return *this;
}

int ShmSegment::create(std::size_t size, ShmMethod method, bool reserve) {
    reset();
    len_ = page_round(size ? size : 1);
    owner_ = true;
    ex_.pid = getpid();
    ex_.size = len_;
    bool use_pidfd = method == ShmMethod::pidfd || (method == ShmMethod::automatic && pidfd_usable());
    if (use_pidfd) {
        fd_ = memfd("fastrma");
        if (fd_ < 0) return raise(MPI_ERR_NO_MEM, "memfd_create: %s", std::strerror(errno));
        ex_.fd = fd_;
    } else {
        std::uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
            return raise(MPI_ERR_OTHER, "getrandom: %s", std::strerror(errno));
        std::snprintf(ex_.name, sizeof ex_.name, "/fastrma-%u-%d-%016llx", unsigned(getuid()), int(getpid()),
                      static_cast<unsigned long long>(rnd));
        fd_ = shm_open(ex_.name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd_ < 0) return raise(MPI_ERR_NO_MEM, "shm_open(%s): %s", ex_.name, std::strerror(errno));
    }
    if (ftruncate(fd_, off_t(len_)) != 0) {
        int e = errno;
        reset();
        return raise(MPI_ERR_NO_MEM, "ftruncate(%zu): %s", len_, std::strerror(e));
    }
    if (int e = reserve ? posix_fallocate(fd_, 0, off_t(len_)) : 0; e != 0) {
        reset();
        return raise(MPI_ERR_NO_MEM, "cannot reserve %zu bytes of shared memory: %s", len_, std::strerror(e));
    }
    addr_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (addr_ == MAP_FAILED) {
        addr_ = nullptr;
        int e = errno;
        reset();
        return raise(MPI_ERR_NO_MEM, "mmap(%zu): %s", len_, std::strerror(e));
    }
    return MPI_SUCCESS;
}

namespace {
int reserve_fd(int fd, std::size_t off, std::size_t len) {
    if (len == 0) return MPI_SUCCESS;
    if (int e = posix_fallocate(fd, off_t(off), off_t(len)); e != 0)
        return raise(MPI_ERR_NO_MEM, "cannot reserve %zu bytes of shared memory: %s", len, std::strerror(e));
    return MPI_SUCCESS;
}
}  // namespace

int ShmSegment::reserve_range(std::size_t off, std::size_t len) { return reserve_fd(fd_, off, len); }

int ShmSegment::map_peer(const SegmentExport& ex, std::size_t reserve_off, std::size_t reserve_len) {
    reset();
    int fd = -1;
    if (ex.name[0]) {
        fd = shm_open(ex.name, O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) return raise(MPI_ERR_OTHER, "shm_open(%s) of a peer's segment: %s", ex.name, std::strerror(errno));
    } else {
        fd = fetch_peer_fd(ex.pid, ex.fd);
        if (fd < 0)
            return raise(MPI_ERR_OTHER, "pidfd_getfd(pid %d, fd %d): %s (set FASTRMA_SHM_METHOD=shm_open)", int(ex.pid),
                         ex.fd, std::strerror(errno));
    }
    if (int rc = reserve_fd(fd, reserve_off, reserve_len)) {
        close(fd);
        return rc;
    }
    addr_ = mmap(nullptr, ex.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (addr_ == MAP_FAILED) {
        addr_ = nullptr;
        return raise(MPI_ERR_NO_MEM, "mmap of a peer's segment (%llu bytes): %s",
                     static_cast<unsigned long long>(ex.size), std::strerror(e));
    }
    len_ = ex.size;
    ex_ = ex;
    return MPI_SUCCESS;
}

void ShmSegment::seal() {
    if (!owner_) return;
    if (ex_.name[0]) shm_unlink(ex_.name);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    ex_.name[0] = '\0';
}

void ShmSegment::reset() {
    if (addr_) munmap(addr_, len_);
    if (owner_) seal();
    if (fd_ >= 0) close(fd_);
    addr_ = nullptr;
    len_ = 0;
    fd_ = -1;
    owner_ = false;
    ex_ = SegmentExport{};
}

int sweep_stale_segments() {
    DIR* d = opendir("/dev/shm");
    if (!d) return 0;
    int removed = 0;
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "fastrma-%u-", unsigned(getuid()));
    while (dirent* e = readdir(d)) {
        if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) != 0) continue;
        int pid = std::atoi(e->d_name + std::strlen(prefix));
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
            std::string name = std::string("/") + e->d_name;
            if (shm_unlink(name.c_str()) == 0) ++removed;
        }
    }
    closedir(d);
    return removed;
}

AttachProbe attach_probe_self() {
    static const int fd = memfd("fastrma-attach-probe");  // open for the process's life
    static const unsigned char byte = 1;
    AttachProbe p;
    p.pid = getpid();
    p.fd = fd;
    p.addr = reinterpret_cast<std::uint64_t>(&byte);
    return p;
}

int attach_probe(const AttachProbe& peer) {
    if (peer.fd >= 0) {
        const int got = fetch_peer_fd(peer.pid, peer.fd);
        if (got < 0) return errno ? errno : EPERM;
        close(got);
    }
    return cma_probe(peer.pid, peer.addr);
}

void allow_peer_attach() {
    static const bool done = [] {
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // EINVAL without Yama: nothing to do
        return true;
    }();
    (void)done;
}

}  // namespace fastrma::detail
