/*
 * wire_rtt — the floor of the wire between two ranks, measured in the same run as the
 * network benchmarks (scripts/ofi_bench.sh): no RMA operation that waits for an answer from
 * its target can take less than one round trip of the medium it uses.
 *
 *   mpi_pingpong   8-byte MPI_Send / MPI_Recv ping-pong on MPI_COMM_WORLD (the host MPI's
 *                  own wire: run it with the pml/btl the am transport and osc pt2pt use).
 *   ofi_send       8-byte fi_send / fi_recv ping-pong on an RDM endpoint of the provider
 *                  (FASTRMA_OFI_PROVIDER, default tcp), both sides reading their CQ without
 *                  pause (manual progress: the reader drives the provider).
 *   ofi_fetch_add  fi_fetch_atomic (FI_SUM, uint64) + wait for its completion, rank 1 reading
 *                  its CQ without pause (for rxm: an emulated atomic, applied by the target's
 *                  provider when its queue is read).
 *   ofi_write      8-byte fi_write with FI_DELIVERY_COMPLETE + wait for its completion (what
 *                  a put + flush costs at least on this provider).
 *   ofi_read       8-byte fi_read + wait for its completion (a get + flush's floor).
 * Each: round trips in batches of 200, median batch mean in microseconds (min and max beside
 * it). Rank 0 prints "CSV,wire_rtt,<what>,<median>,<min>,<max>". Two ranks exactly.
 *
 * usage: mpiexec -n 2 wire_rtt [BATCHES]
 */
#include <mpi.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBatch = 200 };

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static void report(int rank, const char* what, double* us, int n) {
    if (rank != 0) return;
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    printf("CSV,wire_rtt,%s,%.2f,%.2f,%.2f\n", what, us[n / 2], us[0], us[n - 1]);
    fflush(stdout);
}

static void die(const char* what, int rc) {
    fprintf(stderr, "wire_rtt: %s: %s\n", what, fi_strerror(-rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static struct fid_cq* g_cq;
static long g_banked; /* completions read while a post was retried, not yet waited for */

/* Reads the CQ until one completion arrived (an error completion aborts). */
static void wait_one(void) {
    struct fi_cq_entry e;
    if (g_banked > 0) {
        --g_banked;
        return;
    }
    for (;;) {
        ssize_t n = fi_cq_read(g_cq, &e, 1);
        if (n == 1) return;
        if (n == -FI_EAGAIN) continue;
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(g_cq, &err, 0);
            die("completion", -err.err);
        }
        die("fi_cq_read", (int)n);
    }
}

/* Posts with retry on -FI_EAGAIN (the provider's queue is full until someone reads the CQ). */
#define POST(call)                                         \
    do {                                                   \
        ssize_t rc_;                                       \
        while ((rc_ = (call)) == -FI_EAGAIN) {             \
            struct fi_cq_entry e_;                         \
            if (fi_cq_read(g_cq, &e_, 1) == 1) ++g_banked; \
        }                                                  \
        if (rc_) die(#call, (int)rc_);                     \
    } while (0)

int main(int argc, char** argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "wire_rtt: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int batches = argc > 1 ? atoi(argv[1]) : 25;
    double* us = calloc((size_t)batches, sizeof *us);
    const int peer = 1 - rank;
    uint64_t buf = 0;

    /* The host MPI's wire. */
    for (int b = -2; b < batches; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < kBatch; ++i) {
            if (rank == 0) {
                MPI_Send(&buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
                MPI_Recv(&buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            }
        }
        if (b >= 0) us[b] = (MPI_Wtime() - t0) / kBatch * 1e6;
    }
    report(rank, "mpi_pingpong", us, batches);

    /* libfabric: one RDM endpoint each, addresses exchanged through MPI. */
    const char* prov = getenv("FASTRMA_OFI_PROVIDER");
    struct fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG | FI_RMA | FI_ATOMIC;
    hints->ep_attr->type = FI_EP_RDM;
    hints->mode = 0;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp");
    struct fi_info* info = NULL;
    int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
    if (rc) die("fi_getinfo", rc);
    struct fid_fabric* fabric;
    struct fid_domain* domain;
    struct fid_ep* ep;
    struct fid_av* av;
    if ((rc = fi_fabric(info->fabric_attr, &fabric, NULL))) die("fi_fabric", rc);
    if ((rc = fi_domain(fabric, info, &domain, NULL))) die("fi_domain", rc);
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 1024};
    if ((rc = fi_cq_open(domain, &cqa, &g_cq, NULL))) die("fi_cq_open", rc);
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    if ((rc = fi_av_open(domain, &ava, &av, NULL))) die("fi_av_open", rc);
    if ((rc = fi_endpoint(domain, info, &ep, NULL))) die("fi_endpoint", rc);
    if ((rc = fi_ep_bind(ep, &av->fid, 0))) die("fi_ep_bind av", rc);
    if ((rc = fi_ep_bind(ep, &g_cq->fid, FI_TRANSMIT | FI_RECV))) die("fi_ep_bind cq", rc);
    if ((rc = fi_enable(ep))) die("fi_enable", rc);
    char name[256], peer_name[256];
    size_t len = sizeof name;
    if ((rc = fi_getname(&ep->fid, name, &len))) die("fi_getname", rc);
    MPI_Sendrecv(name, (int)sizeof name, MPI_BYTE, peer, 1, peer_name, (int)sizeof peer_name, MPI_BYTE, peer, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fi_addr_t addr;
    if (fi_av_insert(av, peer_name, 1, &addr, 0, NULL) != 1) die("fi_av_insert", -FI_EINVAL);
    /* Memory: 4 words (target word, operand, result, message), registered for everything. */
    static uint64_t mem[4];
    struct fid_mr* mr;
    if ((rc = fi_mr_reg(domain, mem, sizeof mem,
                        FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL)))
        die("fi_mr_reg", rc);
    void* desc = fi_mr_desc(mr);
    uint64_t mine[2] = {(uint64_t)(uintptr_t)mem, fi_mr_key(mr)}, theirs[2];
    if (!(info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)) mine[0] = 0;
    MPI_Sendrecv(mine, 2, MPI_UINT64_T, peer, 2, theirs, 2, MPI_UINT64_T, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Send / receive ping-pong. The first message also sets the connection up. */
    for (int b = -2; b < batches; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < kBatch; ++i) {
            if (rank == 0) {
                POST(fi_recv(ep, &mem[3], 8, desc, addr, NULL));
                POST(fi_send(ep, &mem[1], 8, desc, addr, NULL));
                wait_one();
                wait_one();
            } else {
                POST(fi_recv(ep, &mem[3], 8, desc, addr, NULL));
                wait_one();
                POST(fi_send(ep, &mem[1], 8, desc, addr, NULL));
                wait_one();
            }
        }
        if (b >= 0) us[b] = (MPI_Wtime() - t0) / kBatch * 1e6;
    }
    report(rank, "ofi_send", us, batches);

    /* One-sided: rank 0 issues, rank 1 reads its CQ until rank 0 says stop (a 0-byte send). */
    for (int kind = 0; kind < 3; ++kind) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            POST(fi_recv(ep, &mem[3], 8, desc, addr, NULL));
            wait_one(); /* the stop message; the provider served rank 0's operations meanwhile */
        } else {
            for (int b = -2; b < batches; ++b) {
                const double t0 = MPI_Wtime();
                for (int i = 0; i < kBatch; ++i) {
                    mem[1] = 1;
                    if (kind == 0)
                        POST(fi_fetch_atomic(ep, &mem[1], 1, desc, &mem[2], desc, addr, theirs[0], theirs[1], FI_UINT64,
                                             FI_SUM, NULL));
                    else if (kind == 1)
                        POST(fi_write(ep, &mem[1], 8, desc, addr, theirs[0], theirs[1], NULL));
                    else
                        POST(fi_read(ep, &mem[2], 8, desc, addr, theirs[0], theirs[1], NULL));
                    wait_one();
                }
                if (b >= 0) us[b] = (MPI_Wtime() - t0) / kBatch * 1e6;
            }
            POST(fi_send(ep, &mem[1], 8, desc, addr, NULL));
            wait_one();
        }
        report(rank, kind == 0 ? "ofi_fetch_add" : kind == 1 ? "ofi_write" : "ofi_read", us, batches);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    fi_close(&ep->fid);
    fi_close(&mr->fid);
    fi_close(&av->fid);
    fi_close(&g_cq->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    free(us);
    MPI_Finalize();
    return 0;
}
