/*
 * span_mpi.c — MPI-3.1 chapter 11 semantics on windows whose peers are partly on this host
 * and partly on another: where data lands, when it is there, and that accumulates and
 * atomics stay atomic whatever medium carries them. Plain MPI (it runs on fastrma through
 * the drop-in, LD_PRELOAD=libfastrma-mpi.so, or on the host MPI alone); any number of
 * ranks >= 2, meant for 2 hosts x 2 ranks (scripts/twohost.sh, or FASTRMA_NODE_NAME).
 *
 *   span_mpi init|single|funneled|serialized|multiple
 *
 * The argument picks MPI_Init or MPI_Init_thread at that level; at multiple (when
 * provided), a part runs with 2 threads per rank issuing operations at once.
 *
 * Per window flavor (allocate with disp_unit 8, create over malloc'd memory with
 * disp_unit 1, dynamic with an attached region whose address is exchanged):
 *   - every synchronization mode — fence (NOPRECEDE, NOSUCCEED), PSCW with wait and with
 *     test, lock shared and exclusive, lock_all, flush, flush_local, flush_all, win_sync —
 *     with contiguous and vector puts and gets to every rank, checked at origin and target;
 *   - request ops (Rput, Rget, Raccumulate, Rget_accumulate + MPI_Wait);
 *   - atomicity: accumulates (SUM on int64, double, int) from every rank onto the same
 *     elements of a target on each host, under lock_all and under shared locks; fetch_and_op
 *     tickets (each value seen once); a compare_and_swap spin lock guarding a get/put
 *     counter on the other host; exclusive-lock counters; lock_all epochs racing exclusive
 *     locks, read with get_accumulate(NO_OP); 1- and 4096-element accumulates overlapping.
 *
 * Any failure prints rank, host, what, expected and got, then MPI_Abort(MPI_COMM_WORLD, 1).
 * A rank still in one phase after SPAN_TIMEOUT seconds (default 150) says which and exits;
 * SPAN_VERBOSE=1 makes rank 0 print each phase's time. SPAN_ITERS scales the accumulate
 * counts (default 2000); SPAN_FLAVORS limits the flavors run (a comma-separated list; default allocate,create,dynamic).
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mpi/print_stacks.h"

static int rank, size;
static char host[256];
static long long checks;
static volatile const char* phase = "start";
static int iters = 2000;

enum { ALLOCATE, CREATE, DYNAMIC };
static const char* flavor_name[] = {"allocate", "create", "dynamic"};

/* ---- failure reporting -------------------------------------------------------------- */

static void fail(const char* what, long long expected, long long got, int line) {
    fprintf(stderr, "span_mpi: FAIL rank %d on %s (line %d, %s): %s: expected %lld, got %lld\n", rank, host, line,
            (const char*)phase, what, expected, got);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define EXPECT(what, expected, got)                                  \
    do {                                                             \
        long long e_ = (long long)(expected), g_ = (long long)(got); \
        if (e_ != g_) fail(what, e_, g_, __LINE__);                  \
        __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);            \
    } while (0)

#define MC(call)                                                                                                       \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char msg_[MPI_MAX_ERROR_STRING];                                                                           \
            int len_ = 0;                                                                                              \
            MPI_Error_string(rc_, msg_, &len_);                                                                        \
            fprintf(stderr, "span_mpi: FAIL rank %d on %s (line %d, %s): %s returned %d (%s)\n", rank, host, __LINE__, \
                    (const char*)phase, #call, rc_, msg_);                                                             \
            fflush(stderr);                                                                                            \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

static void on_alarm(int sig) {
    (void)sig;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "span_mpi: rank %d on %s: still in one phase after SPAN_TIMEOUT seconds: %s\n",
                     rank, host, (const char*)phase);
    if (n > 0) write(2, buf, (size_t)n);
    print_stacks_here();
    _exit(3);
}
static unsigned watchdog = 150;
static int verbose; /* SPAN_VERBOSE=1: rank 0 prints each phase's time */
static double phase_start;
static char phase_copy[128];
static void set_phase(const char* p) {
    if (verbose && rank == 0 && phase_start > 0)
        printf("span_mpi:   %-60s %7.3f s\n", phase_copy, MPI_Wtime() - phase_start);
    snprintf(phase_copy, sizeof phase_copy, "%s", p);
    phase_start = verbose ? MPI_Wtime() : 0;
    phase = p;
    alarm(watchdog);
}

/* ---- window layout (int64 elements) --------------------------------------------------
 * [0, size*SLOT)          put area: origin o writes only slot o
 * [GA, GA+GETN)           get area: G(owner, i), never written
 * [AT, AT+ATN)            counters of the atomicity tests (byte offsets below)
 * [TS, TS+size*2*4)       per (origin, thread) slots of the threaded part
 * [BA, BA+BIG)            the 4096-element accumulate area
 */
enum { SLOT = 32, GETN = 32, ATN = 64, BIG = 4096, NPUT = 8, NVEC = 4 };
static const int64_t SENT = 0x5A5A5A5A5A5A5A5ALL;
static MPI_Aint GA, AT, TS, BA, NELEM;
/* byte offsets inside the counter area */
enum {
    ACC_I64 = 0, /* 4 int64 */
    ACC_DBL = 32, /* 4 double */
    ACC_INT = 64, /* 4 int */
    FOP = 96, /* int64 ticket counter */
    CASLOCK = 104, /* int64 lock word */
    RMW = 112, /* int64 counter guarded by the CAS lock */
    EXCL = 120, /* int64 counter under exclusive locks */
    PAIR = 128, /* 2 int64 updated together under exclusive locks */
    ECNT = 144, /* int64 accumulated under lock_all */
    RACC = 152, /* int64 Raccumulate target */
    TACC = 160, /* int64 threads: accumulate */
    TFOP = 168, /* int64 threads: fetch_and_op */
};

static int64_t V(int r, int o, int t, int i) { return 1000000LL * r + 10000LL * o + 100LL * t + i + 1; }
static int64_t W(int r, int o, int t, int i) { return V(r, o, t, i) + 50; }
static int64_t G(int t, int i) { return 7000000LL + 1000LL * t + i; }

typedef struct {
    MPI_Win win;
    int flavor;
    int du; /* displacement unit */
    int64_t* mem; /* local window memory */
    MPI_Aint* addr; /* dynamic: each rank's region address */
} Win;

/* Displacement at rank t of byte offset `bytes` into the window memory. */
static MPI_Aint D(const Win* w, int t, MPI_Aint bytes) {
    if (w->flavor == DYNAMIC) return MPI_Aint_add(w->addr[t], bytes);
    return bytes / w->du;
}
static MPI_Aint E(MPI_Aint elem) { return elem * 8; }

static void win_open(Win* w, int flavor) {
    memset(w, 0, sizeof *w);
    w->flavor = flavor;
    MPI_Aint bytes = NELEM * 8;
    if (flavor == ALLOCATE) {
        w->du = 8;
        MC(MPI_Win_allocate(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &w->mem, &w->win));
    } else if (flavor == CREATE) {
        w->du = 1;
        if (posix_memalign((void**)&w->mem, 64, (size_t)bytes)) fail("posix_memalign", 0, 1, __LINE__);
        MC(MPI_Win_create(w->mem, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->win));
    } else {
        w->du = 1;
        if (posix_memalign((void**)&w->mem, 64, (size_t)bytes)) fail("posix_memalign", 0, 1, __LINE__);
        MC(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w->win));
        MC(MPI_Win_attach(w->win, w->mem, bytes));
        MPI_Aint mine;
        MC(MPI_Get_address(w->mem, &mine));
        w->addr = malloc(sizeof(MPI_Aint) * (size_t)size);
        MC(MPI_Allgather(&mine, 1, MPI_AINT, w->addr, 1, MPI_AINT, MPI_COMM_WORLD));
    }
    MC(MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN));
}

static void win_close(Win* w) {
    if (w->flavor == DYNAMIC) MC(MPI_Win_detach(w->win, w->mem));
    MC(MPI_Win_free(&w->win));
    if (w->flavor != ALLOCATE) free(w->mem);
    free(w->addr);
}

/* Own memory to its initial state (inside an exclusive lock on oneself), then a barrier. */
static void local_reset(Win* w) {
    MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
    for (MPI_Aint i = 0; i < NELEM; ++i) w->mem[i] = 0;
    for (MPI_Aint i = 0; i < size * SLOT; ++i) w->mem[i] = SENT;
    for (int i = 0; i < GETN; ++i) w->mem[GA + i] = G(rank, i);
    MC(MPI_Win_unlock(rank, w->win));
    MC(MPI_Barrier(MPI_COMM_WORLD));
}

static int64_t* at64(Win* w, int off) { return (int64_t*)((char*)(w->mem + AT) + off); }

/* ---- the put/get pattern of the synchronization tests ----------------------------------- */

static MPI_Datatype vec2, vec3; /* 4 x int64, stride 2 / stride 3 */
static int64_t *putbuf, *vecsrc, *getbuf, *getvec, *backbuf;

static void prepare(int r) {
    for (int t = 0; t < size; ++t) {
        for (int i = 0; i < NPUT; ++i) {
            putbuf[t * NPUT + i] = V(r, rank, t, i);
            getbuf[t * NPUT + i] = -7;
        }
        for (int i = 0; i < NVEC; ++i) {
            vecsrc[t * NVEC + i] = W(r, rank, t, i);
            getvec[t * NVEC + i] = -7;
        }
    }
}

static void issue(Win* w, int t) {
    MPI_Aint slot = E((MPI_Aint)rank * SLOT);
    MC(MPI_Put(putbuf + t * NPUT, NPUT, MPI_INT64_T, t, D(w, t, slot), NPUT, MPI_INT64_T, w->win));
    MC(MPI_Put(vecsrc + t * NVEC, NVEC, MPI_INT64_T, t, D(w, t, slot + E(NPUT)), 1, vec2, w->win));
    MC(MPI_Get(getbuf + t * NPUT, NPUT, MPI_INT64_T, t, D(w, t, E(GA)), NPUT, MPI_INT64_T, w->win));
    MC(MPI_Get(getvec + t * NVEC, NVEC, MPI_INT64_T, t, D(w, t, E(GA)), 1, vec3, w->win));
}

static void check_origin(int t) {
    for (int i = 0; i < NPUT; ++i) EXPECT("contiguous get", G(t, i), getbuf[t * NPUT + i]);
    for (int i = 0; i < NVEC; ++i) EXPECT("vector get (stride 3)", G(t, 3 * i), getvec[t * NVEC + i]);
}

/* What origin o's slot at this rank holds after round r (o wrote it iff `written`). */
static void check_slot(const int64_t* s, int r, int o, int written, int64_t extra16) {
    for (int i = 0; i < NPUT; ++i) EXPECT("contiguous put at target", written ? V(r, o, rank, i) : SENT, s[i]);
    for (int i = 0; i < NVEC; ++i) {
        EXPECT("vector put at target (stride 2)", written ? W(r, o, rank, i) : SENT, s[NPUT + 2 * i]);
        EXPECT("vector put gap untouched", SENT, s[NPUT + 2 * i + 1]);
    }
    EXPECT("slot element 16", SENT + (written ? extra16 : 0), s[16]);
    for (int i = 17; i < SLOT; ++i) EXPECT("slot tail untouched", SENT, s[i]);
}

/* All slots here after round r; origins in `from` (NULL: all) wrote theirs. */
static void check_target_mem(Win* w, int r, const int* from, int64_t extra16) {
    for (int o = 0; o < size; ++o) check_slot(w->mem + o * SLOT, r, o, from ? from[o] : 1, extra16);
    for (int i = 0; i < GETN; ++i) EXPECT("get area unchanged", G(rank, i), w->mem[GA + i]);
}
static void check_target(Win* w, int r, const int* from) {
    MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
    check_target_mem(w, r, from, 0);
    MC(MPI_Win_unlock(rank, w->win));
}
/* After a round: every origin done (barrier), each rank checks its own window, and nobody
   starts the next round before all have looked. */
static void targets_check(Win* w, int r) {
    MC(MPI_Barrier(MPI_COMM_WORLD));
    check_target(w, r, NULL);
    MC(MPI_Barrier(MPI_COMM_WORLD));
}

/* Read back this origin's slot at t (within an open passive epoch) and compare. */
static void read_back(Win* w, int t, int r) {
    int64_t got[SLOT];
    for (int i = 0; i < SLOT; ++i) got[i] = -7;
    MC(MPI_Get(got, SLOT, MPI_INT64_T, t, D(w, t, E((MPI_Aint)rank * SLOT)), SLOT, MPI_INT64_T, w->win));
    MC(MPI_Win_flush(t, w->win));
    for (int i = 0; i < NPUT; ++i) EXPECT("put read back after flush", V(r, rank, t, i), got[i]);
    for (int i = 0; i < NVEC; ++i) {
        EXPECT("vector put read back after flush", W(r, rank, t, i), got[NPUT + 2 * i]);
        EXPECT("vector gap read back", SENT, got[NPUT + 2 * i + 1]);
    }
}

static MPI_Group world_group;

static void sync_modes(Win* w) {
    int r = 0;
    char ph[128];
#define PHASE(name) (snprintf(ph, sizeof ph, "%s: %s", flavor_name[w->flavor], name), set_phase(ph))

    /* fence: two epochs, NOPRECEDE ... 0 ... NOSUCCEED */
    PHASE("fence");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->win));
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_fence(0, w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    check_target_mem(w, r, NULL, 0); /* local loads in the (empty) epoch fence(0) opened */
    MC(MPI_Barrier(MPI_COMM_WORLD));
    prepare(++r);
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_fence(MPI_MODE_NOSUCCEED, w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    check_target(w, r, NULL);
    MC(MPI_Barrier(MPI_COMM_WORLD));

    /* PSCW with every rank (self included), closed by MPI_Win_wait */
    PHASE("PSCW all + wait");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_post(world_group, 0, w->win));
    MC(MPI_Win_start(world_group, 0, w->win));
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_complete(w->win));
    MC(MPI_Win_wait(w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    check_target(w, r, NULL);
    MC(MPI_Barrier(MPI_COMM_WORLD));

    /* PSCW with the ring neighbours (on the same host and the other one), MPI_Win_test */
    PHASE("PSCW neighbours + test");
    local_reset(w);
    prepare(++r);
    {
        int nb[2] = {(rank + 1) % size, (rank + size - 1) % size};
        int nn = nb[0] == nb[1] ? 1 : 2;
        MPI_Group g;
        MC(MPI_Group_incl(world_group, nn, nb, &g));
        MC(MPI_Win_post(g, 0, w->win));
        MC(MPI_Win_start(g, 0, w->win));
        for (int k = 0; k < nn; ++k) issue(w, nb[k]);
        MC(MPI_Win_complete(w->win));
        int flag = 0;
        while (!flag) MC(MPI_Win_test(w->win, &flag));
        for (int k = 0; k < nn; ++k) check_origin(nb[k]);
        int* from = calloc((size_t)size, sizeof(int));
        for (int k = 0; k < nn; ++k) from[nb[k]] = 1;
        check_target(w, r, from);
        free(from);
        MC(MPI_Group_free(&g));
    }
    MC(MPI_Barrier(MPI_COMM_WORLD));

    /* lock / unlock, shared then exclusive, one target at a time */
    for (int excl = 0; excl < 2; ++excl) {
        PHASE(excl ? "lock exclusive" : "lock shared");
        local_reset(w);
        prepare(++r);
        for (int k = 0; k < size; ++k) {
            int t = (rank + k) % size;
            MC(MPI_Win_lock(excl ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, t, 0, w->win));
            issue(w, t);
            MC(MPI_Win_unlock(t, w->win));
            check_origin(t);
        }
        targets_check(w, r);
    }

    /* lock_all / unlock_all */
    PHASE("lock_all");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_unlock_all(w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    targets_check(w, r);

    /* flush: complete at origin and target per target, inside one lock_all epoch */
    PHASE("flush");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int k = 0; k < size; ++k) {
        int t = (rank + k) % size;
        issue(w, t);
        MC(MPI_Win_flush(t, w->win));
        check_origin(t);
        read_back(w, t, r);
    }
    MC(MPI_Win_unlock_all(w->win));
    targets_check(w, r);

    /* flush_local: origin buffers reusable (and gets done); target completion by flush */
    PHASE("flush_local");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int k = 0; k < size; ++k) {
        int t = (rank + k) % size;
        issue(w, t);
        MC(MPI_Win_flush_local(t, w->win));
        check_origin(t);
        for (int i = 0; i < NPUT; ++i) putbuf[t * NPUT + i] = -9;
        for (int i = 0; i < NVEC; ++i) vecsrc[t * NVEC + i] = -9;
        MC(MPI_Win_flush(t, w->win));
        read_back(w, t, r);
    }
    MC(MPI_Win_unlock_all(w->win));
    targets_check(w, r);

    /* flush_all */
    PHASE("flush_all");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_flush_all(w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    for (int t = 0; t < size; ++t) read_back(w, t, r);
    MC(MPI_Win_unlock_all(w->win));
    targets_check(w, r);

    /* win_sync: targets read their own memory inside the lock_all epoch */
    PHASE("win_sync");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int t = 0; t < size; ++t) issue(w, t);
    MC(MPI_Win_flush_all(w->win));
    for (int t = 0; t < size; ++t) check_origin(t);
    MC(MPI_Barrier(MPI_COMM_WORLD));
    MC(MPI_Win_sync(w->win));
    check_target_mem(w, r, NULL, 0);
    MC(MPI_Barrier(MPI_COMM_WORLD));
    MC(MPI_Win_unlock_all(w->win));
    MC(MPI_Barrier(MPI_COMM_WORLD));

    /* request-based operations */
    PHASE("requests");
    local_reset(w);
    prepare(++r);
    MC(MPI_Win_lock_all(0, w->win));
    for (int k = 0; k < size; ++k) {
        int t = (rank + k) % size;
        MPI_Aint slot = E((MPI_Aint)rank * SLOT);
        MPI_Request q;
        MC(MPI_Rput(putbuf + t * NPUT, NPUT, MPI_INT64_T, t, D(w, t, slot), NPUT, MPI_INT64_T, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MC(MPI_Rput(vecsrc + t * NVEC, NVEC, MPI_INT64_T, t, D(w, t, slot + E(NPUT)), 1, vec2, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MC(MPI_Rget(getbuf + t * NPUT, NPUT, MPI_INT64_T, t, D(w, t, E(GA)), NPUT, MPI_INT64_T, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int i = 0; i < NPUT; ++i) EXPECT("Rget after MPI_Wait", G(t, i), getbuf[t * NPUT + i]);
        MC(MPI_Rget(getvec + t * NVEC, NVEC, MPI_INT64_T, t, D(w, t, E(GA)), 1, vec3, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        check_origin(t);
        int64_t add = rank + 1, five = 5, fetched = -7, noop = -7, dummy = 0;
        MC(MPI_Raccumulate(&add, 1, MPI_INT64_T, t, D(w, t, E(AT) + RACC), 1, MPI_INT64_T, MPI_SUM, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MC(MPI_Rget_accumulate(&five, 1, MPI_INT64_T, &fetched, 1, MPI_INT64_T, t, D(w, t, slot + E(16)), 1,
                               MPI_INT64_T, MPI_SUM, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        EXPECT("Rget_accumulate fetched after MPI_Wait", SENT, fetched);
        /* accumulate ordering (default rar,raw,war,waw): the NO_OP read sees the sum */
        MC(MPI_Rget_accumulate(&dummy, 1, MPI_INT64_T, &noop, 1, MPI_INT64_T, t, D(w, t, slot + E(16)), 1, MPI_INT64_T,
                               MPI_NO_OP, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        EXPECT("Rget_accumulate(NO_OP) after Rget_accumulate(SUM)", SENT + 5, noop);
        MC(MPI_Win_flush(t, w->win));
        int64_t got = -7;
        MC(MPI_Rget(&got, 1, MPI_INT64_T, t, D(w, t, slot + E(16)), 1, MPI_INT64_T, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        EXPECT("Rget after flush sees Rget_accumulate's sum", SENT + 5, got);
    }
    MC(MPI_Win_unlock_all(w->win));
    MC(MPI_Barrier(MPI_COMM_WORLD));
    MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
    check_target_mem(w, r, NULL, 5);
    EXPECT("Raccumulate sum at target", (int64_t)size * (size + 1) / 2, *at64(w, RACC));
    MC(MPI_Win_unlock(rank, w->win));
    MC(MPI_Barrier(MPI_COMM_WORLD));
#undef PHASE
}

/* ---- atomicity -------------------------------------------------------------------------- */

static int tgt[2], ntgt; /* a target on rank 0's host and one on another host */

static void atom_accumulate(Win* w) {
    int64_t a64[4];
    double ad[4];
    int ai[4];
    for (int e = 0; e < 4; ++e) {
        a64[e] = (int64_t)(rank + 1) * (e + 1);
        ad[e] = (double)((rank + 1) * (e + 1));
        ai[e] = (rank + 1) * (e + 1);
    }
    local_reset(w);
    for (int variant = 0; variant < 2; ++variant) {
        set_phase(variant ? "accumulate under shared locks" : "accumulate under lock_all");
        if (variant == 0) MC(MPI_Win_lock_all(0, w->win));
        const int batch = 250;
        for (int k0 = 0; k0 < iters; k0 += batch) {
            for (int j = 0; j < ntgt; ++j) {
                int t = tgt[(j + rank) % ntgt];
                if (variant == 1) MC(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, w->win));
                for (int k = k0; k < k0 + batch && k < iters; ++k) {
                    MC(MPI_Accumulate(a64, 4, MPI_INT64_T, t, D(w, t, E(AT) + ACC_I64), 4, MPI_INT64_T, MPI_SUM,
                                      w->win));
                    MC(MPI_Accumulate(ad, 4, MPI_DOUBLE, t, D(w, t, E(AT) + ACC_DBL), 4, MPI_DOUBLE, MPI_SUM, w->win));
                    MC(MPI_Accumulate(ai, 4, MPI_INT, t, D(w, t, E(AT) + ACC_INT), 4, MPI_INT, MPI_SUM, w->win));
                }
                if (variant == 1) MC(MPI_Win_unlock(t, w->win));
            }
            if (variant == 0) MC(MPI_Win_flush_all(w->win));
        }
        if (variant == 0) MC(MPI_Win_unlock_all(w->win));
        MC(MPI_Barrier(MPI_COMM_WORLD));
        for (int j = 0; j < ntgt; ++j) {
            if (rank != tgt[j]) continue;
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            const long long per = (long long)iters * size * (size + 1) / 2 * (variant + 1);
            for (int e = 0; e < 4; ++e) {
                EXPECT("MPI_Accumulate SUM int64 total", per * (e + 1), at64(w, ACC_I64)[e]);
                EXPECT("MPI_Accumulate SUM double total", per * (e + 1), (long long)((double*)at64(w, ACC_DBL))[e]);
                EXPECT("MPI_Accumulate SUM double is integral", 1,
                       ((double*)at64(w, ACC_DBL))[e] == (double)(per * (e + 1)));
                EXPECT("MPI_Accumulate SUM int total", per * (e + 1), ((int*)at64(w, ACC_INT))[e]);
            }
            MC(MPI_Win_unlock(rank, w->win));
        }
        MC(MPI_Barrier(MPI_COMM_WORLD));
    }
}

static void atom_fetch_and_op(Win* w) {
    set_phase("fetch_and_op tickets");
    local_reset(w);
    const int K = iters / 20 > 10 ? iters / 20 : 10; /* round trips: fewer than accumulates */
    int64_t* mine = malloc(sizeof(int64_t) * (size_t)K * 2);
    MC(MPI_Win_lock_all(0, w->win));
    for (int k = 0; k < K; ++k)
        for (int j = 0; j < ntgt; ++j) {
            int t = tgt[j];
            int64_t one = 1;
            MC(MPI_Fetch_and_op(&one, &mine[j * K + k], MPI_INT64_T, t, D(w, t, E(AT) + FOP), MPI_SUM, w->win));
            MC(MPI_Win_flush(t, w->win));
        }
    MC(MPI_Win_unlock_all(w->win));
    for (int j = 0; j < ntgt; ++j) {
        int64_t* all = rank == 0 ? malloc(sizeof(int64_t) * (size_t)K * size) : NULL;
        MC(MPI_Gather(&mine[j * K], K, MPI_INT64_T, all, K, MPI_INT64_T, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            const int total = K * size;
            char* seen = calloc((size_t)total, 1);
            for (int i = 0; i < total; ++i) {
                if (all[i] < 0 || all[i] >= total) fail("fetch_and_op ticket in range", 0, all[i], __LINE__);
                EXPECT("fetch_and_op ticket seen once", 0, seen[all[i]]);
                seen[all[i]] = 1;
            }
            free(seen);
            free(all);
        }
    }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    for (int j = 0; j < ntgt; ++j)
        if (rank == tgt[j]) {
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("fetch_and_op counter total", (long long)K * size, *at64(w, FOP));
            MC(MPI_Win_unlock(rank, w->win));
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    free(mine);
}

/* A spin lock from compare_and_swap (0 -> rank+1) on one target, guarding a get / flush /
 * put / flush increment of a counter on another (the other host when there is one). */
static void atom_cas_lock(Win* w) {
    const int M = iters / 125 > 4 ? iters / 125 : 4;
    for (int v = 0; v < ntgt; ++v) {
        set_phase(v ? "CAS lock (lock on the 2nd host, counter on the 1st)"
                    : "CAS lock (lock on the 1st host, counter on the 2nd)");
        local_reset(w);
        int tl = tgt[v], tc = tgt[(v + 1) % ntgt];
        MC(MPI_Win_lock_all(0, w->win));
        for (int k = 0; k < M; ++k) {
            int64_t me = rank + 1, zero = 0, old = -1;
            for (int spins = 0;; ++spins) {
                MC(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT64_T, tl, D(w, tl, E(AT) + CASLOCK), w->win));
                MC(MPI_Win_flush(tl, w->win));
                if (old == 0) break;
                if (old < 1 || old > size) fail("CAS lock word holds a rank+1", 1, old, __LINE__);
                if (spins > 20) usleep(50);
            }
            int64_t c = -1;
            MC(MPI_Get(&c, 1, MPI_INT64_T, tc, D(w, tc, E(AT) + RMW), 1, MPI_INT64_T, w->win));
            MC(MPI_Win_flush(tc, w->win));
            ++c;
            MC(MPI_Put(&c, 1, MPI_INT64_T, tc, D(w, tc, E(AT) + RMW), 1, MPI_INT64_T, w->win));
            MC(MPI_Win_flush(tc, w->win));
            int64_t back = -1;
            MC(MPI_Compare_and_swap(&zero, &me, &back, MPI_INT64_T, tl, D(w, tl, E(AT) + CASLOCK), w->win));
            MC(MPI_Win_flush(tl, w->win));
            EXPECT("CAS lock released by its holder", rank + 1, back);
        }
        MC(MPI_Win_unlock_all(w->win));
        MC(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == tc) {
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("counter guarded by the CAS lock", (long long)M * size, *at64(w, RMW));
            MC(MPI_Win_unlock(rank, w->win));
        }
        if (rank == tl) {
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("CAS lock word free at the end", 0, *at64(w, CASLOCK));
            MC(MPI_Win_unlock(rank, w->win));
        }
        MC(MPI_Barrier(MPI_COMM_WORLD));
    }
}

static void atom_exclusive(Win* w) {
    set_phase("exclusive-lock counters");
    local_reset(w);
    const int M = iters / 100 > 4 ? iters / 100 : 4;
    for (int k = 0; k < M; ++k)
        for (int j = 0; j < ntgt; ++j) {
            int t = tgt[(j + rank) % ntgt];
            int64_t c = -1;
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w->win));
            MC(MPI_Get(&c, 1, MPI_INT64_T, t, D(w, t, E(AT) + EXCL), 1, MPI_INT64_T, w->win));
            MC(MPI_Win_flush(t, w->win));
            ++c;
            MC(MPI_Put(&c, 1, MPI_INT64_T, t, D(w, t, E(AT) + EXCL), 1, MPI_INT64_T, w->win));
            MC(MPI_Win_unlock(t, w->win));
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    for (int j = 0; j < ntgt; ++j)
        if (rank == tgt[j]) {
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("exclusive-lock counter", (long long)M * size, *at64(w, EXCL));
            MC(MPI_Win_unlock(rank, w->win));
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
}

/* Even ranks: lock_all epochs (accumulate a counter, read the pair with get_accumulate
 * NO_OP: both halves equal, as no exclusive epoch can overlap a shared one). Odd ranks:
 * exclusive epochs that update the pair with two puts. */
static void atom_lockall_vs_exclusive(Win* w) {
    set_phase("lock_all epochs racing exclusive locks");
    local_reset(w);
    const int M = iters / 100 > 4 ? iters / 100 : 4;
    for (int k = 0; k < M; ++k)
        for (int j = 0; j < ntgt; ++j) {
            int t = tgt[(j + rank) % ntgt];
            if (rank % 2 == 0) {
                int64_t one = 1, pair[2] = {-7, -7}, dummy[2] = {0, 0};
                MC(MPI_Win_lock_all(0, w->win));
                MC(MPI_Accumulate(&one, 1, MPI_INT64_T, t, D(w, t, E(AT) + ECNT), 1, MPI_INT64_T, MPI_SUM, w->win));
                MC(MPI_Get_accumulate(dummy, 2, MPI_INT64_T, pair, 2, MPI_INT64_T, t, D(w, t, E(AT) + PAIR), 2,
                                      MPI_INT64_T, MPI_NO_OP, w->win));
                MC(MPI_Win_unlock_all(w->win));
                EXPECT("pair read in a shared epoch is consistent", pair[0], pair[1]);
            } else {
                int64_t pair[2] = {-7, -7};
                MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w->win));
                MC(MPI_Get(pair, 2, MPI_INT64_T, t, D(w, t, E(AT) + PAIR), 2, MPI_INT64_T, w->win));
                MC(MPI_Win_flush(t, w->win));
                EXPECT("pair read in an exclusive epoch is consistent", pair[0], pair[1]);
                pair[0]++;
                MC(MPI_Put(&pair[0], 1, MPI_INT64_T, t, D(w, t, E(AT) + PAIR), 1, MPI_INT64_T, w->win));
                MC(MPI_Win_flush(t, w->win));
                pair[1]++;
                MC(MPI_Put(&pair[1], 1, MPI_INT64_T, t, D(w, t, E(AT) + PAIR + 8), 1, MPI_INT64_T, w->win));
                MC(MPI_Win_unlock(t, w->win));
            }
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    const int evens = (size + 1) / 2, odds = size / 2;
    for (int j = 0; j < ntgt; ++j)
        if (rank == tgt[j]) {
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("lock_all accumulate counter", (long long)M * evens, *at64(w, ECNT));
            EXPECT("exclusive pair, first", (long long)M * odds, at64(w, PAIR)[0]);
            EXPECT("exclusive pair, second", (long long)M * odds, at64(w, PAIR)[1]);
            MC(MPI_Win_unlock(rank, w->win));
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
}

/* 4096-element, 64-element and 1-element accumulates on overlapping ranges at once. */
static int small_pos(int r, int j, int s) { return (r * 131 + j * 1031 + s * 37) % BIG; }
static int mid_pos(int r, int j) { return (r * 577 + j * 251) % (BIG - 64); }
static void atom_mixed_sizes(Win* w) {
    set_phase("mixed-size accumulates");
    local_reset(w);
    const int J = 12, S = 24;
    int64_t* big = malloc(sizeof(int64_t) * BIG);
    for (int i = 0; i < BIG; ++i) big[i] = rank + 1;
    int64_t mid[64], thousand = 1000;
    for (int i = 0; i < 64; ++i) mid[i] = 7;
    MC(MPI_Win_lock_all(0, w->win));
    for (int j = 0; j < J; ++j)
        for (int k = 0; k < ntgt; ++k) {
            int t = tgt[(k + rank) % ntgt];
            MC(MPI_Accumulate(big, BIG, MPI_INT64_T, t, D(w, t, E(BA)), BIG, MPI_INT64_T, MPI_SUM, w->win));
            for (int s = 0; s < S; ++s)
                MC(MPI_Accumulate(&thousand, 1, MPI_INT64_T, t, D(w, t, E(BA + small_pos(rank, j, s))), 1, MPI_INT64_T,
                                  MPI_SUM, w->win));
            MC(MPI_Accumulate(mid, 64, MPI_INT64_T, t, D(w, t, E(BA + mid_pos(rank, j))), 64, MPI_INT64_T, MPI_SUM,
                              w->win));
        }
    MC(MPI_Win_unlock_all(w->win));
    MC(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < ntgt; ++k)
        if (rank == tgt[k]) {
            int64_t* exp = calloc(BIG, sizeof(int64_t));
            for (int r = 0; r < size; ++r)
                for (int j = 0; j < J; ++j) {
                    for (int i = 0; i < BIG; ++i) exp[i] += r + 1;
                    for (int s = 0; s < S; ++s) exp[small_pos(r, j, s)] += 1000;
                    for (int i = 0; i < 64; ++i) exp[mid_pos(r, j) + i] += 7;
                }
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            for (int i = 0; i < BIG; ++i) EXPECT("mixed-size accumulate element", exp[i], w->mem[BA + i]);
            MC(MPI_Win_unlock(rank, w->win));
            free(exp);
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    free(big);
}

/* ---- two threads per rank (MPI_THREAD_MULTIPLE) ----------------------------------------- */

typedef struct {
    Win* w;
    int id, K;
    int64_t* tickets;
} ThreadArg;

static void* thread_body(void* p) {
    ThreadArg* a = p;
    Win* w = a->w;
    for (int k = 0; k < a->K; ++k) {
        int t = tgt[(k + a->id + rank) % ntgt];
        int64_t one = 1;
        MC(MPI_Accumulate(&one, 1, MPI_INT64_T, t, D(w, t, E(AT) + TACC), 1, MPI_INT64_T, MPI_SUM, w->win));
        MC(MPI_Fetch_and_op(&one, &a->tickets[k], MPI_INT64_T, t, D(w, t, E(AT) + TFOP), MPI_SUM, w->win));
        MC(MPI_Win_flush(t, w->win));
        /* a private slot (origin, thread) at a rotating peer: put, flush, get back */
        int peer = (rank + k) % size;
        MPI_Aint slot = E(TS + ((MPI_Aint)rank * 2 + a->id) * 4);
        int64_t v[4], got[4] = {-7, -7, -7, -7};
        for (int i = 0; i < 4; ++i) v[i] = 100000LL * k + 1000 * rank + 10 * a->id + i;
        MC(MPI_Put(v, 4, MPI_INT64_T, peer, D(w, peer, slot), 4, MPI_INT64_T, w->win));
        MC(MPI_Win_flush(peer, w->win));
        MPI_Request q;
        MC(MPI_Rget(got, 4, MPI_INT64_T, peer, D(w, peer, slot), 4, MPI_INT64_T, w->win, &q));
        MC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int i = 0; i < 4; ++i) EXPECT("thread's put read back", v[i], got[i]);
    }
    return NULL;
}

static void threaded(Win* w) {
    set_phase("2 threads per rank");
    local_reset(w);
    const int K = iters / 33 > 10 ? iters / 33 : 10;
    ThreadArg a[2];
    pthread_t th[2];
    MC(MPI_Win_lock_all(0, w->win));
    for (int i = 0; i < 2; ++i) {
        a[i].w = w;
        a[i].id = i;
        a[i].K = K;
        a[i].tickets = malloc(sizeof(int64_t) * (size_t)K);
        if (pthread_create(&th[i], NULL, thread_body, &a[i])) fail("pthread_create", 0, 1, __LINE__);
    }
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    MC(MPI_Win_unlock_all(w->win));
    /* tickets per target: thread i's op k went to tgt[(k + i + rank) % ntgt] */
    for (int j = 0; j < ntgt; ++j) {
        int64_t* mine = malloc(sizeof(int64_t) * (size_t)K * 2);
        int n = 0;
        for (int i = 0; i < 2; ++i)
            for (int k = 0; k < K; ++k)
                if ((k + i + rank) % ntgt == j) mine[n++] = a[i].tickets[k];
        int* counts = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL;
        int* displs = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL;
        MC(MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        int total = 0;
        if (rank == 0)
            for (int r = 0; r < size; ++r) {
                displs[r] = total;
                total += counts[r];
            }
        int64_t* all = rank == 0 ? malloc(sizeof(int64_t) * (size_t)(total ? total : 1)) : NULL;
        MC(MPI_Gatherv(mine, n, MPI_INT64_T, all, counts, displs, MPI_INT64_T, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            char* seen = calloc((size_t)total + 1, 1);
            for (int i = 0; i < total; ++i) {
                if (all[i] < 0 || all[i] >= total) fail("threads' fetch_and_op ticket in range", 0, all[i], __LINE__);
                EXPECT("threads' fetch_and_op ticket seen once", 0, seen[all[i]]);
                seen[all[i]] = 1;
            }
            free(seen);
            free(all);
            free(counts);
            free(displs);
        }
        free(mine);
    }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    /* per target: every (rank, thread, k) with target j added 1 */
    for (int j = 0; j < ntgt; ++j)
        if (rank == tgt[j]) {
            long long expect = 0;
            for (int r = 0; r < size; ++r)
                for (int i = 0; i < 2; ++i)
                    for (int k = 0; k < K; ++k)
                        if ((k + i + r) % ntgt == j) ++expect;
            MC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win));
            EXPECT("threads' accumulate counter", expect, *at64(w, TACC));
            EXPECT("threads' fetch_and_op counter", expect, *at64(w, TFOP));
            MC(MPI_Win_unlock(rank, w->win));
        }
    MC(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 2; ++i) free(a[i].tickets);
}

/* ---- main ------------------------------------------------------------------------------ */

static const char* level_name(int l) {
    switch (l) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    default:
        return "?";
    }
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "init";
    int want = -1, provided = -1;
    if (!strcmp(how, "single"))
        want = MPI_THREAD_SINGLE;
    else if (!strcmp(how, "funneled"))
        want = MPI_THREAD_FUNNELED;
    else if (!strcmp(how, "serialized"))
        want = MPI_THREAD_SERIALIZED;
    else if (!strcmp(how, "multiple"))
        want = MPI_THREAD_MULTIPLE;
    else if (strcmp(how, "init")) {
        fprintf(stderr, "usage: span_mpi init|single|funneled|serialized|multiple\n");
        return 2;
    }
    gethostname(host, sizeof host - 1);
    if (getenv("SPAN_TIMEOUT")) watchdog = (unsigned)atoi(getenv("SPAN_TIMEOUT"));
    if (getenv("SPAN_ITERS")) iters = atoi(getenv("SPAN_ITERS"));
    if (getenv("SPAN_VERBOSE")) verbose = atoi(getenv("SPAN_VERBOSE"));
    if (iters < 1) iters = 1;
    signal(SIGALRM, on_alarm);
    phase = "MPI initialisation";
    alarm(watchdog);
    if (want < 0)
        MC(MPI_Init(&argc, &argv));
    else
        MC(MPI_Init_thread(&argc, &argv, want, &provided));
    MC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MC(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int queried = -1;
    MC(MPI_Query_thread(&queried));
    if (want >= 0) EXPECT("MPI_Query_thread returns the provided level", provided, queried);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "span_mpi: needs 2 or more ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* Which ranks share a host: the lowest world rank of each MPI_COMM_TYPE_SHARED group. */
    MPI_Comm node;
    int leader;
    MC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MC(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node));
    int* leaders = malloc(sizeof(int) * (size_t)size);
    MC(MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, MPI_COMM_WORLD));
    char* hosts = malloc((size_t)size * 64);
    char myhost[64] = {0};
    memcpy(myhost, host, sizeof myhost - 1);
    MC(MPI_Allgather(myhost, 64, MPI_CHAR, hosts, 64, MPI_CHAR, MPI_COMM_WORLD));
    /* Targets: rank 0, and the first rank on another host (else the last rank). */
    tgt[0] = 0;
    tgt[1] = size - 1;
    for (int r = 0; r < size; ++r)
        if (leaders[r] != leaders[0]) {
            tgt[1] = r;
            break;
        }
    ntgt = 2;

    if (rank == 0) {
        printf("span_mpi: %s: provided %s, %d ranks, atomicity targets %d and %d\n", how,
               want < 0 ? level_name(queried) : level_name(provided), size, tgt[0], tgt[1]);
        fflush(stdout);
    }

    GA = (MPI_Aint)size * SLOT;
    AT = GA + GETN;
    TS = AT + ATN;
    BA = TS + (MPI_Aint)size * 2 * 4;
    NELEM = BA + BIG;
    putbuf = malloc(sizeof(int64_t) * NPUT * (size_t)size);
    getbuf = malloc(sizeof(int64_t) * NPUT * (size_t)size);
    vecsrc = malloc(sizeof(int64_t) * NVEC * (size_t)size);
    getvec = malloc(sizeof(int64_t) * NVEC * (size_t)size);
    backbuf = malloc(sizeof(int64_t) * SLOT * (size_t)size);
    MC(MPI_Type_vector(NVEC, 1, 2, MPI_INT64_T, &vec2));
    MC(MPI_Type_commit(&vec2));
    MC(MPI_Type_vector(NVEC, 1, 3, MPI_INT64_T, &vec3));
    MC(MPI_Type_commit(&vec3));
    MC(MPI_Comm_group(MPI_COMM_WORLD, &world_group));

    const int threads = want == MPI_THREAD_MULTIPLE && provided == MPI_THREAD_MULTIPLE;
    const char* only = getenv("SPAN_FLAVORS"); /* e.g. "allocate,dynamic" (default: all three) */
    for (int f = ALLOCATE; f <= DYNAMIC; ++f) {
        if (only && *only && !strstr(only, flavor_name[f])) continue;
        Win w;
        set_phase(flavor_name[f]);
        win_open(&w, f);
        int model_flag = 0;
        int* model = NULL;
        MC(MPI_Win_get_attr(w.win, MPI_WIN_MODEL, &model, &model_flag));
        if (rank == 0) {
            printf("span_mpi: %s window, memory model %s\n", flavor_name[f],
                   model_flag ? (*model == MPI_WIN_UNIFIED ? "unified" : "separate") : "?");
            fflush(stdout);
        }
        sync_modes(&w);
        atom_accumulate(&w);
        atom_fetch_and_op(&w);
        atom_cas_lock(&w);
        atom_exclusive(&w);
        atom_lockall_vs_exclusive(&w);
        atom_mixed_sizes(&w);
        if (threads) threaded(&w);
        set_phase("MPI_Win_free");
        win_close(&w);
        if (rank == 0) {
            printf("span_mpi: %s window done\n", flavor_name[f]);
            fflush(stdout);
        }
    }
    if (want == MPI_THREAD_MULTIPLE && !threads && rank == 0)
        printf("span_mpi: MPI_THREAD_MULTIPLE not provided: the 2-thread part is skipped\n");

    set_phase("final reduction");
    long long total = 0, mine = __atomic_load_n(&checks, __ATOMIC_RELAXED);
    MC(MPI_Reduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("span_mpi: ranks sharing a host (MPI_COMM_TYPE_SHARED):");
        for (int l = 0; l < size; ++l) {
            if (leaders[l] != l) continue;
            printf(" {");
            for (int r = 0, first = 1; r < size; ++r)
                if (leaders[r] == l) {
                    printf(first ? "%d" : ",%d", r);
                    first = 0;
                }
            printf("} on %s", hosts + 64 * l);
        }
        printf("\nspan_mpi: %lld checks passed\n", total);
        fflush(stdout);
    }
    MC(MPI_Type_free(&vec2));
    MC(MPI_Type_free(&vec3));
    MC(MPI_Group_free(&world_group));
    MC(MPI_Comm_free(&node));
    alarm(0);
    MPI_Finalize();
    return 0;
}
