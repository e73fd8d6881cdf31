/* derived_large.c — large transfers with derived datatypes against a contiguous transfer of
 * the same bytes (issue 26, item 8): put, get, accumulate and get_accumulate (gacc; both
 * MPI_SUM) of COUNT MPI_INTs (or doubles: -e) whose target is a vector (stride 2) or an
 * indexed type (blocks of one element, stride 2), or COUNT contiguous ones, on allocate, create and
 * dynamic windows, under lock + flush, lock + flush_local, lock_all + flush_all, lock_all + flush,
 * fence and PSCW. Every rank is an origin, to rank + 1 (a ring), REPS times per case. A plain MPI
 * program: run it on Open MPI alone and with libfastrma-mpi.so preloaded (and FASTRMA_TRANSPORT=am
 * for the am path).
 *
 * Usage: derived_large [-c COUNT (65530)] [-r REPS (16)] [-f allocate,create,dynamic]
 *                      [-s lock,lock_local,lockall,lockall_flush,fence,pscw] [-o put,get,acc,gacc]
 *                      [-t contig,vector,indexed] [-e int|double]
 * (-e: the basic type, MPI_INT by default; on mapped windows MPI_DOUBLE accumulates take
 * the target's accumulate-lock stripes where MPI_INT ones use CPU atomics.)
 * Prints (rank 0) one CSV row per case: ranks,flavor,sync,op,type,count,reps,ms_per_rep,
 * x_contig (the time over the contiguous case's with the same flavor, sync and op: the
 * contiguous type must be in -t, and before the others, for this column). The time of a
 * case is the slowest rank's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kFlavors[] = {"allocate", "create", "dynamic"};
static const char* kSyncs[] = {"lock", "lock_local", "lockall", "lockall_flush", "fence", "pscw"};
static const char* kOps[] = {"put", "get", "acc", "gacc"};
static const char* kTypes[] = {"contig", "vector", "indexed"};

/* Is name in the comma-separated list (NULL: every name)? */
static int picked(const char* list, const char* name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char* p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

static MPI_Datatype et; /* -e: MPI_INT (default) or MPI_DOUBLE */
static void* result; /* gacc's old values */

static void op_once(int op, void* origin, int count, MPI_Datatype ttype, int tcount, int target, MPI_Aint disp,
                    MPI_Win win) {
    if (op == 0) MPI_Put(origin, count, et, target, disp, tcount, ttype, win);
    if (op == 1) MPI_Get(origin, count, et, target, disp, tcount, ttype, win);
    if (op == 2) MPI_Accumulate(origin, count, et, target, disp, tcount, ttype, MPI_SUM, win);
    if (op == 3) MPI_Get_accumulate(origin, count, et, result, count, et, target, disp, tcount, ttype, MPI_SUM, win);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int count = 65530, reps = 16;
    et = MPI_INT;
    const char *flavors = NULL, *syncs = NULL, *ops = NULL, *types = NULL;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            if (me == 0)
                printf(
                    "usage: derived_large [-c COUNT (65530)] [-r REPS (16)] [-f allocate,create,dynamic]\n"
                    "                     [-s lock,lock_local,lockall,lockall_flush,fence,pscw] [-o put,get,acc,gacc]\n"
                    "                     [-t contig,vector,indexed] [-e int|double]\n"
                    "One CSV row per case (rank 0); each list picks cases (default: all).\n");
            MPI_Finalize();
            return 0;
        }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-c")) count = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-f")) flavors = argv[i + 1];
        if (!strcmp(argv[i], "-s")) syncs = argv[i + 1];
        if (!strcmp(argv[i], "-o")) ops = argv[i + 1];
        if (!strcmp(argv[i], "-t")) types = argv[i + 1];
        if (!strcmp(argv[i], "-e")) et = strcmp(argv[i + 1], "double") ? MPI_INT : MPI_DOUBLE;
    }
    const int target = (me + 1) % np, from = (me + np - 1) % np;
    MPI_Group world, to_grp, from_grp;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &target, &to_grp);
    MPI_Group_incl(world, 1, &from, &from_grp);

    MPI_Datatype vec, idx;
    const size_t es = et == MPI_INT ? sizeof(int) : sizeof(double);
    MPI_Type_vector(count, 1, 2, et, &vec);
    MPI_Type_commit(&vec);
    int* lens = malloc(sizeof(int) * (size_t)count);
    int* disps = malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; ++i) lens[i] = 1, disps[i] = 2 * i;
    MPI_Type_indexed(count, lens, disps, et, &idx);
    MPI_Type_commit(&idx);
    void* origin = malloc(es * (size_t)count);
    result = malloc(es * (size_t)count);
    for (int i = 0; i < count; ++i)
        if (et == MPI_INT)
            ((int*)origin)[i] = i;
        else
            ((double*)origin)[i] = i;
    const size_t bytes = 2 * es * (size_t)count;

    if (me == 0) printf("ranks,flavor,sync,op,type,count,reps,ms_per_rep,x_contig\n");
    for (int f = 0; f < 3; ++f) {
        if (!picked(flavors, kFlavors[f])) continue;
        MPI_Win win;
        void* base = NULL;
        MPI_Aint disp0 = 0;
        if (f == 0) {
            MPI_Win_allocate((MPI_Aint)bytes, (int)es, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        } else if (f == 1) {
            base = malloc(bytes);
            MPI_Win_create(base, (MPI_Aint)bytes, (int)es, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        } else {
            base = malloc(bytes);
            MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
            MPI_Win_attach(win, base, (MPI_Aint)bytes);
            MPI_Aint mine, *all = malloc(sizeof(MPI_Aint) * (size_t)np);
            MPI_Get_address(base, &mine);
            MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD);
            disp0 = all[target];
            free(all);
        }
        memset(base, 0, bytes);
        for (int s = 0; s < 6; ++s) {
            if (!picked(syncs, kSyncs[s])) continue;
            for (int o = 0; o < 4; ++o) {
                if (!picked(ops, kOps[o])) continue;
                double contig = 0;
                for (int t = 0; t < 3; ++t) {
                    if (!picked(types, kTypes[t])) continue;
                    MPI_Datatype tt = t == 0 ? et : t == 1 ? vec : idx;
                    const int tc = t == 0 ? count : 1;
                    MPI_Barrier(MPI_COMM_WORLD);
                    const double t0 = MPI_Wtime();
                    if (s <= 1) {
                        MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
                        for (int r = 0; r < reps; ++r) {
                            op_once(o, origin, count, tt, tc, target, disp0, win);
                            if (s == 0)
                                MPI_Win_flush(target, win);
                            else
                                MPI_Win_flush_local(target, win);
                        }
                        MPI_Win_unlock(target, win);
                    } else if (s <= 3) {
                        MPI_Win_lock_all(0, win);
                        for (int r = 0; r < reps; ++r) {
                            op_once(o, origin, count, tt, tc, target, disp0, win);
                            if (s == 2)
                                MPI_Win_flush_all(win);
                            else
                                MPI_Win_flush(target, win);
                        }
                        MPI_Win_unlock_all(win);
                    } else if (s == 4) {
                        MPI_Win_fence(0, win);
                        for (int r = 0; r < reps; ++r) {
                            op_once(o, origin, count, tt, tc, target, disp0, win);
                            MPI_Win_fence(0, win);
                        }
                        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
                    } else {
                        for (int r = 0; r < reps; ++r) {
                            MPI_Win_post(from_grp, 0, win);
                            MPI_Win_start(to_grp, 0, win);
                            op_once(o, origin, count, tt, tc, target, disp0, win);
                            MPI_Win_complete(win);
                            MPI_Win_wait(win);
                        }
                    }
                    double dt = MPI_Wtime() - t0, slowest;
                    MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                    if (t == 0) contig = slowest;
                    if (me == 0)
                        printf("%d,%s,%s,%s,%s,%d,%d,%.3f,%.1f\n", np, kFlavors[f], kSyncs[s], kOps[o], kTypes[t],
                               count, reps, 1e3 * slowest / reps, contig > 0 ? slowest / contig : 0.0);
                    fflush(stdout);
                }
            }
        }
        MPI_Barrier(MPI_COMM_WORLD); /* every origin's last epoch has ended before the region goes */
        if (f == 2) MPI_Win_detach(win, base);
        MPI_Win_free(&win);
        if (f != 0) free(base);
    }
    MPI_Type_free(&idx);
    MPI_Type_free(&vec);
    MPI_Group_free(&to_grp);
    MPI_Group_free(&from_grp);
    MPI_Group_free(&world);
    free(origin);
    free(result);
    free(lens);
    free(disps);
    MPI_Finalize();
    return 0;
}
