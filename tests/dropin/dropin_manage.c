/*
 * dropin_manage.c — window management through plain MPI: the thread level of
 * MPI_Init_thread / MPI_Query_thread, predefined attributes of every flavor, user keyvals
 * whose callbacks must see the application's MPI_Win, names, info, groups, error handlers
 * (MPI_ERRORS_RETURN giving MPI_ERR_RMA_RANGE, a user handler called with the window,
 * MPI_Win_call_errhandler, freeing a handler still in use), MPI_Win_c2f / MPI_Win_f2c.
 * Runs with 2 or more ranks.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

static int rank, size;

static void test_thread_level(int provided) {
    SECTION("MPI_Init_thread(SERIALIZED) / MPI_Query_thread / MPI_Is_thread_main");
    CHECK_EQ(provided, MPI_THREAD_SERIALIZED);
    int q = -1, main_thread = 0;
    MPI_OK(MPI_Query_thread(&q));
    CHECK_EQ(q, provided);
    MPI_OK(MPI_Is_thread_main(&main_thread));
    CHECK(main_thread, "the initialising thread is the main thread");
    /* Through the profiling interface: what the library under MPI_ was given. Under the
     * drop-in that is the host's MPI_THREAD_MULTIPLE; on the host alone, what we asked. */
    int host = -1;
    MPI_OK(PMPI_Query_thread(&host));
    CHECK(host >= provided, "the host level is at least the application's");
    if (rank == 0) printf("   application level %d, level under MPI_: %d\n", provided, host);
}

static void check_attrs(MPI_Win win, void* base, MPI_Aint size_bytes, int disp_unit, int flavor) {
    void* vbase = NULL;
    MPI_Aint* vsize = NULL;
    int *vdisp = NULL, *vflavor = NULL, *vmodel = NULL, flag = 0;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &vbase, &flag));
    CHECK(flag, "MPI_WIN_BASE is set");
    CHECK(vbase == base, "MPI_WIN_BASE is the window's base");
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &vsize, &flag));
    CHECK(flag, "MPI_WIN_SIZE is set");
    CHECK_EQ(*vsize, size_bytes);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &vdisp, &flag));
    CHECK(flag, "MPI_WIN_DISP_UNIT is set");
    CHECK_EQ(*vdisp, disp_unit);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &vflavor, &flag));
    CHECK(flag, "MPI_WIN_CREATE_FLAVOR is set");
    CHECK_EQ(*vflavor, flavor);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &vmodel, &flag));
    CHECK(flag, "MPI_WIN_MODEL is set");
    CHECK(*vmodel == MPI_WIN_UNIFIED || *vmodel == MPI_WIN_SEPARATE, "a memory model");
}

static void test_attributes(void) {
    SECTION("predefined attributes of create / allocate / allocate_shared / dynamic windows");
    MPI_Win win;
    int32_t* mem = malloc(40);
    MPI_OK(MPI_Win_create(mem, 40, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, mem, 40, 4, MPI_WIN_FLAVOR_CREATE);
    MPI_OK(MPI_Win_free(&win));
    free(mem);

    void* base = NULL;
    MPI_OK(MPI_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    check_attrs(win, base, 64, 8, MPI_WIN_FLAVOR_ALLOCATE);
    MPI_OK(MPI_Win_free(&win));

    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_OK(MPI_Win_allocate_shared(24, 1, MPI_INFO_NULL, node, &base, &win));
    check_attrs(win, base, 24, 1, MPI_WIN_FLAVOR_SHARED);
    int *vmodel = NULL, flag = 0;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &vmodel, &flag));
    CHECK_EQ(*vmodel, MPI_WIN_UNIFIED);
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Comm_free(&node));

    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, MPI_BOTTOM, 0, 1, MPI_WIN_FLAVOR_DYNAMIC);
    MPI_OK(MPI_Win_free(&win));
}

/* What the delete callback saw. */
static struct {
    int calls;
    MPI_Win win;
    int keyval;
    void* value;
    void* extra;
} seen;

static int delete_fn(MPI_Win win, int keyval, void* value, void* extra) {
    seen.calls++;
    seen.win = win;
    seen.keyval = keyval;
    seen.value = value;
    seen.extra = extra;
    return MPI_SUCCESS;
}

static int copy_fn(MPI_Win oldwin, int keyval, void* extra, void* in, void* out, int* flag) {
    (void)oldwin, (void)keyval, (void)extra;
    *(void**)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void test_keyvals(void) {
    SECTION("user keyvals: set / get / replace / delete / free window, callbacks get the MPI_Win");
    static int extra_state, v1, v2, v3;
    int keyval = MPI_KEYVAL_INVALID, null_keyval = MPI_KEYVAL_INVALID;
    MPI_OK(MPI_Win_create_keyval(copy_fn, delete_fn, &keyval, &extra_state));
    MPI_OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &null_keyval, NULL));
    CHECK(keyval != MPI_KEYVAL_INVALID, "a keyval");
    void* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));

    void* got = NULL;
    int flag = 1;
    MPI_OK(MPI_Win_get_attr(win, keyval, &got, &flag));
    CHECK(!flag, "no attribute yet");
    MPI_OK(MPI_Win_set_attr(win, keyval, &v1));
    MPI_OK(MPI_Win_set_attr(win, null_keyval, &v3));
    MPI_OK(MPI_Win_get_attr(win, keyval, &got, &flag));
    CHECK(flag && got == &v1, "get returns the value set");
    CHECK_EQ(seen.calls, 0);

    MPI_OK(MPI_Win_set_attr(win, keyval, &v2)); /* replaces: deletes v1 */
    CHECK_EQ(seen.calls, 1);
    CHECK(seen.win == win, "the delete callback gets the application's MPI_Win");
    CHECK(seen.value == &v1 && seen.extra == &extra_state && seen.keyval == keyval, "callback args");

    MPI_OK(MPI_Win_delete_attr(win, keyval));
    CHECK_EQ(seen.calls, 2);
    CHECK(seen.value == &v2 && seen.win == win, "delete_attr runs the callback");
    MPI_OK(MPI_Win_get_attr(win, keyval, &got, &flag));
    CHECK(!flag, "deleted");

    MPI_OK(MPI_Win_set_attr(win, keyval, &v3));
    const MPI_Win before = win;
    MPI_OK(MPI_Win_free(&win));
    CHECK_EQ(seen.calls, 3);
    CHECK(seen.win == before && seen.value == &v3, "MPI_Win_free deletes the attributes");

    MPI_OK(MPI_Win_free_keyval(&keyval));
    CHECK_EQ(keyval, MPI_KEYVAL_INVALID);
    MPI_OK(MPI_Win_free_keyval(&null_keyval));
}

static void test_name_info_group(void) {
    SECTION("names, info, group");
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "no_locks", "false"));
    MPI_OK(MPI_Info_set(info, "accumulate_ordering", "none"));
    void* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(16, 1, info, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Info_free(&info));

    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    MPI_OK(MPI_Win_set_name(win, "dropin window"));
    MPI_OK(MPI_Win_get_name(win, name, &len));
    CHECK(strcmp(name, "dropin window") == 0, "the name set");
    CHECK_EQ(len, strlen("dropin window"));

    MPI_Info used;
    MPI_OK(MPI_Win_get_info(win, &used));
    int nkeys = -1, flag = 0;
    MPI_OK(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys >= 0, "a valid info");
    char value[MPI_MAX_INFO_VAL + 1];
    MPI_OK(MPI_Info_get(used, "accumulate_ordering", MPI_MAX_INFO_VAL, value, &flag));
    if (flag) CHECK(strcmp(value, "none") == 0, "the accumulate_ordering hint given");
    MPI_OK(MPI_Info_free(&used));

    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "accumulate_ordering", "rar,raw"));
    MPI_OK(MPI_Win_set_info(win, info));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Win_get_info(win, &used));
    MPI_OK(MPI_Info_get(used, "accumulate_ordering", MPI_MAX_INFO_VAL, value, &flag));
    if (flag) CHECK(strcmp(value, "rar,raw") == 0 || strcmp(value, "none") == 0, "a hint value");
    MPI_OK(MPI_Info_free(&used));

    MPI_Group g, world;
    int result = -1;
    MPI_OK(MPI_Win_get_group(win, &g));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Group_compare(g, world, &result));
    CHECK_EQ(result, MPI_IDENT);
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Win_free(&win));
}

/* What the user error handler saw. */
static struct {
    int calls;
    MPI_Win win;
    int code;
} handled;

static void handler(MPI_Win* win, int* code, ...) {
    handled.calls++;
    handled.win = *win;
    handled.code = *code;
}

static void test_errhandlers(void) {
    SECTION("error handlers: default, MPI_ERRORS_RETURN, user handler, call_errhandler, free in use");
    int64_t* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(4 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "windows start with MPI_ERRORS_ARE_FATAL");
    MPI_OK(MPI_Errhandler_free(&eh));

    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Win_lock_all(0, win));
    int64_t v = 1;
    /* The error the user handler below must see: an out-of-range target displacement, or,
     * on a host that does not check ranges (MPICH alone), a target rank out of range. */
    const int range_checked = !host_run_on_mpich();
    const int bad_target = range_checked ? (rank + 1) % size : size + 5;
    const int bad_class = range_checked ? MPI_ERR_RMA_RANGE : MPI_ERR_RANK;
    int rc, cls = -1;
    if (range_checked) {
        rc = MPI_Put(&v, 1, MPI_INT64_T, (rank + 1) % size, 4, 1, MPI_INT64_T, win);
        MPI_OK(MPI_Error_class(rc, &cls));
        CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
        CHECK_EQ(base[0], base[0]); /* the process is still alive */
    }
    rc = MPI_Put(&v, 1, MPI_INT64_T, size + 3, 0, 1, MPI_INT64_T, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK_EQ(cls, MPI_ERR_RANK);
    MPI_OK(MPI_Win_unlock_all(win));

    MPI_Errhandler user;
    MPI_OK(MPI_Win_create_errhandler(handler, &user));
    MPI_OK(MPI_Win_set_errhandler(win, user));
    MPI_OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == user, "get returns the handler set");
    MPI_OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "MPI_Errhandler_free resets the handle");

    MPI_OK(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK_EQ(handled.calls, 1);
    CHECK(handled.win == win, "the handler gets the application's MPI_Win");
    CHECK_EQ(handled.code, MPI_ERR_OTHER);

    /* Freed while in use: the window keeps its handler (MPI-3.1 §8.3.4). */
    MPI_OK(MPI_Errhandler_free(&user));
    MPI_OK(MPI_Win_lock_all(0, win));
    rc = MPI_Put(&v, 1, MPI_INT64_T, bad_target, range_checked ? 100 : 0, 1, MPI_INT64_T, win);
    CHECK(rc != MPI_SUCCESS, "an out-of-range put fails");
    CHECK_EQ(handled.calls, 2);
    CHECK(handled.win == win, "the handler gets the application's MPI_Win");
    MPI_OK(MPI_Error_class(handled.code, &cls));
    CHECK_EQ(cls, bad_class);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Win_free(&win));
}

/* Errors raised without a usable window go to the communicator's handler. */
static void test_bad_handles(void) {
    SECTION("MPI_WIN_NULL and epoch misuse under MPI_ERRORS_RETURN");
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls = -1;
    MPI_Win none = MPI_WIN_NULL;
    MPI_OK(MPI_Error_class(MPI_Win_fence(0, MPI_WIN_NULL), &cls));
    CHECK_EQ(cls, MPI_ERR_WIN);
    MPI_OK(MPI_Error_class(MPI_Win_free(&none), &cls));
    CHECK_EQ(cls, MPI_ERR_WIN);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    void* base = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Error_class(MPI_Win_unlock((rank + 1) % size, win), &cls));
    CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Win_free(&win));
}

static void test_handles(void) {
    SECTION("MPI_Win_c2f / MPI_Win_f2c");
    void* base = NULL;
    MPI_Win a, b;
    MPI_OK(MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &a));
    MPI_OK(MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &b));
    MPI_Fint fa = MPI_Win_c2f(a), fb = MPI_Win_c2f(b);
    CHECK(fa != fb, "distinct Fortran handles");
    CHECK(MPI_Win_f2c(fa) == a && MPI_Win_f2c(fb) == b, "f2c inverts c2f");
    CHECK(MPI_Win_c2f(a) == fa, "c2f is stable");
    CHECK(MPI_Win_f2c(MPI_Win_c2f(MPI_WIN_NULL)) == MPI_WIN_NULL, "MPI_WIN_NULL round trip");
    /* A window reached through its Fortran handle works. */
    MPI_Win via = MPI_Win_f2c(fb);
    MPI_OK(MPI_Win_fence(0, via));
    MPI_OK(MPI_Win_fence(0, via));
    MPI_OK(MPI_Win_free(&a));
    MPI_OK(MPI_Win_free(&b));
}

int main(int argc, char** argv) {
    int provided = -1;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) FAIL("run with 2 or more ranks");
    test_thread_level(provided);
    test_attributes();
    test_keyvals();
    test_name_info_group();
    test_errhandlers();
    test_bad_handles();
    test_handles();
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    SECTION("all passed");
    MPI_OK(MPI_Finalize());
    return 0;
}
