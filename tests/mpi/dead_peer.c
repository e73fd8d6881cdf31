/* dead_peer.c — a rank dies mid-epoch (issue 26 item 12); the survivors' calls must fail
 * with an error class and a message naming it, within seconds, instead of waiting for ever.
 * dead_peer.sh runs it under a launcher that lets survivors live on (Open MPI's
 * orte_enable_recovery). The last rank is the victim; argv[1] says where it dies:
 *   lock      holding an exclusive lock on rank 0: rank 0 locks itself, the others lock
 *             rank 0, put and unlock
 *   lock_all  holding an exclusive lock on rank 0: the others lock_all, put and unlock_all
 *   fence     instead of entering a fence the others wait in
 *   pscw      before posting to rank 0 (which waits in start) and before completing at
 *             rank 1 (which waits in wait)
 *   stripe    holding an accumulate stripe of rank 0 (FASTRMA_FAULT=kill_holding_stripe in
 *             the victim; a create window, whose accumulates take the stripes); rank 1
 *             accumulates to the same place and flushes (the process that takes the stripe
 *             over learns of the death: only one survivor may wait for it, so rank 0 idles)
 *   served    while serving a node peer's request (FASTRMA_FAULT=kill_serving in the victim, a
 *             create window): it waits in MPI_Barrier, serving, and dies once it took rank 1's
 *             fetch_and_op from its served slots, before answering (rank 0 idles)
 *   served_bulk  the same with rank 1's 8 KiB put, which goes through the victim's bulk area
 *   flush     (over am: dead_peer.sh runs it with FASTRMA_TRANSPORT=am) after the victim died,
 *             the others put to it and flush: the answers never come
 * Each survivor prints "PASS rank R MODE" when its first failing call gave the expected
 * class (MPI_ERR_OTHER; MPIX_ERR_PROC_FAILED where the host defines it) with a message that
 * names the victim, within 10 s; then it leaves with _exit (MPI_Finalize needs the victim). */
#include <fastrma/fastrma.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "print_stacks.h"

#ifdef MPIX_ERR_PROC_FAILED
#define EXPECTED_CLASS MPIX_ERR_PROC_FAILED
#else
#define EXPECTED_CLASS MPI_ERR_OTHER
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rank, size, victim;
static double t0;

/* The first failing call decides: right class, names the victim, in time. */
static void report(const char* mode, const char* call, int rc) {
    const double dt = now() - t0;
    alarm(0);
    char want[32];
    snprintf(want, sizeof want, "rank %d ", victim);
    const char* msg = FRMA_Last_error_message();
    const int ok = rc == EXPECTED_CLASS && strstr(msg, want) != NULL && dt < 10.0;
    printf("%s rank %d %s: %s returned %d after %.3f s (from %.3f): %s\n", ok ? "PASS" : "FAIL", rank, mode, call, rc,
           dt, t0, msg);
    fflush(stdout);
    sleep(2); /* the other survivor may still be looking: it must find the victim dead, not us */
    _exit(ok ? 0 : 1);
}
#define TRY(mode, call)                                   \
    do {                                                  \
        int rc_ = (call);                                 \
        if (rc_ != MPI_SUCCESS) report(mode, #call, rc_); \
    } while (0)

/* No verdict DEAD_PEER_STACKS_S (default 5) s after t0: every thread's stack on stderr, one
 * line each (scripts/stacks.sh; nothing without gdb), then the wait goes on (the verdict is
 * still judged at 10 s). */
static void on_slow(int sig) {
    (void)sig;
    char buf[96];
    const int n =
        snprintf(buf, sizeof buf, "dead_peer: rank %d has no verdict after %.1f s; its stacks:\n", rank, now() - t0);
    if (n > 0 && write(2, buf, (size_t)n) < 0) return;
    print_stacks_here();
}
static void start_clock(void) {
    t0 = now();
    const char* s = getenv("DEAD_PEER_STACKS_S");
    signal(SIGALRM, on_slow);
    alarm(s && atoi(s) > 0 ? (unsigned)atoi(s) : 5u);
}

/* The victim says when it dies (CLOCK_MONOTONIC: one clock for every process of the machine,
 * also across the namespace hosts of scripts/twohost.sh), the survivors when they began to wait. */
static void die(void) {
    printf("victim rank %d dies at %.3f\n", rank, now());
    fflush(stdout);
    raise(SIGKILL);
}

int main(int argc, char** argv) {
    int provided;
    const char* mode = argc > 1 ? argv[1] : "lock";
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    victim = size - 1;
    const int served = !strcmp(mode, "served") || !strcmp(mode, "served_bulk");
    if (!strcmp(mode, "stripe") && rank == victim) setenv("FASTRMA_FAULT", "kill_holding_stripe", 1);
    if (served && rank == victim) setenv("FASTRMA_FAULT", "kill_serving", 1);
    static int64_t user[2048];
    int64_t* base = user;
    FRMA_Win win;
    if (!strcmp(mode, "stripe") || served)
        FRMA_Win_create(user, sizeof user, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    else
        FRMA_Win_allocate(sizeof user, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    FRMA_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int64_t v = 1 + rank;
    /* Every pair's host connection made now (Open MPI's tcp BTL connects a pair at its first
     * message, and the connection needs both sides in MPI): the victim's last barrier then
     * ends at once, not when a survivor that left it, waiting in fastrma over ofi, next
     * calls into MPI. */
    {
        int out[64] = {0}, in[64];
        if (size <= 64) MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
    }

    if (!strcmp(mode, "lock") || !strcmp(mode, "lock_all")) {
        if (rank == victim) {
            FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            FRMA_Put(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win);
            FRMA_Win_flush(0, win);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the victim holds the lock */
        if (rank == victim) die();
        start_clock();
        if (!strcmp(mode, "lock_all")) {
            TRY(mode, FRMA_Win_lock_all(0, win));
            TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win));
            TRY(mode, FRMA_Win_unlock_all(win));
        } else {
            TRY(mode, FRMA_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
            TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, 0, 1 + rank, 1, MPI_INT64_T, win));
            TRY(mode, FRMA_Win_unlock(0, win));
        }
    } else if (!strcmp(mode, "fence")) {
        TRY(mode, FRMA_Win_fence(0, win));
        TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, (rank + 1) % size, 0, 1, MPI_INT64_T, win));
        TRY(mode, FRMA_Win_fence(0, win));
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) die();
        start_clock();
        TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, (rank + 1) % size, 1, 1, MPI_INT64_T, win));
        TRY(mode, FRMA_Win_fence(0, win));
    } else if (!strcmp(mode, "pscw")) {
        MPI_Group world, one;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &victim, &one);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) die();
        start_clock();
        if (rank == 0) { /* an access epoch to the victim: start waits for its post */
            TRY(mode, FRMA_Win_start(one, 0, win));
            TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, victim, 0, 1, MPI_INT64_T, win));
            TRY(mode, FRMA_Win_complete(win));
        } else { /* an exposure epoch for the victim: wait waits for its complete */
            TRY(mode, FRMA_Win_post(one, 0, win));
            TRY(mode, FRMA_Win_wait(win));
        }
    } else if (!strcmp(mode, "stripe")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) { /* dies inside the flush, holding rank 0's stripe */
            FRMA_Win_lock_all(0, win);
            FRMA_Accumulate(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
            FRMA_Win_flush(0, win);
            printf("FAIL rank %d stripe: the fault did not kill the victim\n", rank);
            _exit(1);
        }
        usleep(500 * 1000); /* the victim is dead by now, its stripe taken */
        if (rank == 0) { /* only one survivor waits for the stripe (see the header) */
            printf("IDLE rank 0 stripe\n");
            fflush(stdout);
            sleep(3);
            _exit(0);
        }
        start_clock();
        TRY(mode, FRMA_Win_lock_all(0, win));
        TRY(mode, FRMA_Accumulate(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win));
        TRY(mode, FRMA_Win_flush(0, win));
        TRY(mode, FRMA_Win_unlock_all(win));
    } else if (!strcmp(mode, "flush")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) die();
        usleep(100 * 1000);
        start_clock();
        TRY(mode, FRMA_Win_lock_all(0, win));
        TRY(mode, FRMA_Put(&v, 1, MPI_INT64_T, victim, rank, 1, MPI_INT64_T, win));
        TRY(mode, FRMA_Get(&v, 1, MPI_INT64_T, victim, 8, 1, MPI_INT64_T, win));
        TRY(mode, FRMA_Win_flush(victim, win));
        TRY(mode, FRMA_Win_unlock_all(win));
    } else if (served) {
        static int64_t big[1024];
        for (int i = 0; i < 1024; ++i) big[i] = i;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) { /* serves from inside MPI until the fault kills it */
            MPI_Barrier(MPI_COMM_WORLD);
            printf("FAIL rank %d %s: the fault did not kill the victim\n", rank, mode);
            _exit(1);
        }
        if (rank == 0) { /* only one survivor is served (see the header) */
            printf("IDLE rank 0 %s\n", mode);
            fflush(stdout);
            sleep(3);
            _exit(0);
        }
        usleep(200 * 1000); /* the victim waits in its barrier by now */
        TRY(mode, FRMA_Win_lock_all(0, win));
        /* Again and again: an op goes by cross-memory attach while the victim's beat is stale
         * (it is off its core); the first it takes kills it, and that op must end in an error. */
        for (const double end = now() + 5.0; now() < end;) {
            start_clock();
            if (!strcmp(mode, "served")) {
                int64_t old = 0;
                TRY(mode, FRMA_Fetch_and_op(&v, &old, MPI_INT64_T, victim, 0, MPI_SUM, win));
            } else {
                TRY(mode, FRMA_Put(big, 1024, MPI_INT64_T, victim, 0, 1024, MPI_INT64_T, win));
            }
            TRY(mode, FRMA_Win_flush(victim, win));
        }
        TRY(mode, FRMA_Win_unlock_all(win));
    } else {
        fprintf(stderr, "dead_peer: unknown mode %s\n", mode);
        _exit(2);
    }
    printf("FAIL rank %d %s: every call succeeded although rank %d died\n", rank, mode, victim);
    fflush(stdout);
    sleep(2); /* as report(): the other survivor must find the victim dead, not us */
    _exit(1);
}
