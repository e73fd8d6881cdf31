/*
 * check.h — the few macros the drop-in test programs share. The programs are plain MPI
 * (only <mpi.h>): ctest runs each on the host MPI alone and again with libfastrma-mpi
 * preloaded, and both runs must pass. A wrong value or a failed call aborts the job with
 * a message naming the rank, the line and the values, so mpiexec exits non-zero.
 */
#ifndef FASTRMA_DROPIN_CHECK_H
#define FASTRMA_DROPIN_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_rank(void) {
    int r = -1, init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

#define FAIL(...)                                                                  \
    do {                                                                           \
        fprintf(stderr, "FAIL rank %d %s:%d: ", check_rank(), __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                              \
        fprintf(stderr, "\n");                                                     \
        fflush(stderr);                                                            \
        MPI_Abort(MPI_COMM_WORLD, 1);                                              \
        exit(1);                                                                   \
    } while (0)

/* An MPI call that must succeed. */
#define MPI_OK(call)                                       \
    do {                                                   \
        int rc_ = (call);                                  \
        if (rc_ != MPI_SUCCESS) {                          \
            char msg_[MPI_MAX_ERROR_STRING];               \
            int len_ = 0;                                  \
            MPI_Error_string(rc_, msg_, &len_);            \
            FAIL("%s returned %d (%s)", #call, rc_, msg_); \
        }                                                  \
    } while (0)

#define CHECK(cond, what)                                        \
    do {                                                         \
        if (!(cond)) FAIL("check failed: %s (%s)", #cond, what); \
    } while (0)

/* Integer equality with both values in the message. */
#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_) FAIL("%s == %lld, expected %s == %lld", #a, a_, #b, b_); \
    } while (0)

/* 1 in the run on the host MPI alone (DROPIN_MODE=host, set by run_dropin.sh) when the host
 * is MPICH (MPI_Get_library_version names it). MPICH 4.0 (ch4:ucx) does not check target
 * ranges (no MPI_ERR_RMA_RANGE: the put lands out of bounds) nor refuse windows on an
 * intercommunicator; those runs use errors it does detect instead (docs/dropin.md). */
static inline int host_run_on_mpich(void) {
    const char* mode = getenv("DROPIN_MODE");
    if (!mode || strcmp(mode, "host") != 0) return 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    return strstr(version, "MPICH") != NULL;
}

/* Printed by rank 0 at the end, so a log says which sections ran. */
#define SECTION(name)                \
    do {                             \
        if (check_rank() == 0) {     \
            printf("-- %s\n", name); \
            fflush(stdout);          \
        }                            \
    } while (0)

#endif
