/* cma_iovec.c — what cross-memory attach costs per iovec and per byte (the density rule of
 * transport/shm/cma_batch.hpp rests on it): process_vm_readv / process_vm_writev of 65,536 4-byte
 * pieces at stride 8 into another process (a forked child with memory of its own), at 1 to
 * 1024 iovecs a call, and single-iovec reads of 4 KiB to 512 KiB. Best of 5 (20) passes.
 * No MPI: `cmake --build build --target cma_iovec && build/bench/cma_iovec`. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    enum { N = 65536 };
    int p[2], q[2];
    if (pipe(p) || pipe(q)) return 1;
    pid_t child = fork();
    if (child == 0) { /* the target: its own memory, its address through a pipe */
        int* mem = malloc(sizeof(int) * 2 * N);
        memset(mem, 1, sizeof(int) * 2 * N);
        if (write(q[1], &mem, sizeof mem) != sizeof mem) _exit(1);
        char c;
        if (read(p[0], &c, 1) < 0) _exit(1);
        _exit(0);
    }
    int* remote = NULL;
    if (read(q[0], &remote, sizeof remote) != sizeof remote) return 1;
    int* src = malloc(sizeof(int) * N);
    unsigned char* buf = malloc(sizeof(int) * 2 * N);
    struct iovec* l = malloc(sizeof(struct iovec) * N);
    struct iovec* r = malloc(sizeof(struct iovec) * N);
    for (int i = 0; i < N; ++i) {
        l[i].iov_base = src + i, l[i].iov_len = 4;
        r[i].iov_base = remote + 2 * i, r[i].iov_len = 4;
    }
    const int per[] = {1, 16, 128, 512, 1024};
    for (int w = 0; w < 2; ++w)
        for (int k = 0; k < 5; ++k) {
            double best = 1e9;
            for (int rep = 0; rep < 5; ++rep) {
                const double t0 = now();
                for (int i = 0; i < N; i += per[k]) {
                    const ssize_t n =
                        w ? process_vm_writev(child, l + i, (unsigned long)per[k], r + i, (unsigned long)per[k], 0)
                          : process_vm_readv(child, l + i, (unsigned long)per[k], r + i, (unsigned long)per[k], 0);
                    if (n != 4 * per[k]) {
                        perror("process_vm_*v");
                        return 1;
                    }
                }
                const double dt = now() - t0;
                if (dt < best) best = dt;
            }
            printf("%s, %4d iovecs a call: %5.0f ns an iovec\n", w ? "write" : "read ", per[k], 1e9 * best / N);
        }
    for (size_t sz = 4096; sz <= 512 * 1024; sz *= 2) {
        double best = 1e9;
        for (int rep = 0; rep < 20; ++rep) {
            struct iovec a = {buf, sz}, b = {remote, sz};
            const double t0 = now();
            if (process_vm_readv(child, &a, 1, &b, 1, 0) != (ssize_t)sz) {
                perror("process_vm_readv");
                return 1;
            }
            const double dt = now() - t0;
            if (dt < best) best = dt;
        }
        printf("one read of %6zu B: %6.1f us (%.3f ns a byte)\n", sz, 1e6 * best, 1e9 * best / (double)sz);
    }
    if (write(p[1], "x", 1) != 1) return 1;
    waitpid(child, NULL, 0);
    return 0;
}
