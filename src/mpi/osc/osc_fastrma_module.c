/*
 * osc_fastrma_module.c — the osc module of mca_osc_fastrma.so: each entry point Open MPI's
 * MPI_Win_* / MPI_Put / ... bindings call, forwarded to the window's FRMA_Win.
 *
 * Each is a tail call into the engine: its MPI error class goes back to Open MPI's binding,
 * which hands it to the MPI_Win's handler (the engine's own handler only prints its message,
 * osc_fastrma_component.c). Open MPI's handles are fastrma's MPI types (MPI_Datatype is
 * struct ompi_datatype_t*, MPI_Op, MPI_Group and MPI_Request likewise), so arguments pass
 * through unchanged. The
 * request operations hand out the engine's requests (generalized requests of Open MPI), which
 * Open MPI's MPI_Wait / MPI_Test complete.
 */
#include "osc_fastrma.h"

static int shared_query(struct ompi_win_t* win, int rank, size_t* size, int* disp_unit, void* baseptr) {
    MPI_Aint sz = 0;
    int rc = FRMA_Win_shared_query(ompi_osc_fastrma_win(win), rank, &sz, disp_unit, baseptr);
    if (rc == MPI_SUCCESS) *size = (size_t)sz;
    return rc;
}

static int attach(struct ompi_win_t* win, void* base, size_t size) {
    return FRMA_Win_attach(ompi_osc_fastrma_win(win), base, (MPI_Aint)size);
}

static int detach(struct ompi_win_t* win, const void* base) { return FRMA_Win_detach(ompi_osc_fastrma_win(win), base); }

/* Collective; the module goes with the engine's window. On failure the window stays usable,
 * as Open MPI keeps it. */
static int module_free(struct ompi_win_t* win) {
    ompi_osc_fastrma_module_t* module = (ompi_osc_fastrma_module_t*)win->w_osc_module;
    int rc = FRMA_Win_free(&module->win);
    if (rc != MPI_SUCCESS) return rc;
    win->w_osc_module = NULL;
    free(module);
    return OMPI_SUCCESS;
}

static int put(const void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp, int tcount,
               struct ompi_datatype_t* tdt, struct ompi_win_t* win) {
    return FRMA_Put(origin, ocount, odt, target, disp, tcount, tdt, ompi_osc_fastrma_win(win));
}

static int get(void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp, int tcount,
               struct ompi_datatype_t* tdt, struct ompi_win_t* win) {
    return FRMA_Get(origin, ocount, odt, target, disp, tcount, tdt, ompi_osc_fastrma_win(win));
}

static int accumulate(const void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp,
                      int tcount, struct ompi_datatype_t* tdt, struct ompi_op_t* op, struct ompi_win_t* win) {
    return FRMA_Accumulate(origin, ocount, odt, target, disp, tcount, tdt, op, ompi_osc_fastrma_win(win));
}

static int compare_and_swap(const void* origin, const void* compare, void* result, struct ompi_datatype_t* dt,
                            int target, ptrdiff_t disp, struct ompi_win_t* win) {
    return FRMA_Compare_and_swap(origin, compare, result, dt, target, disp, ompi_osc_fastrma_win(win));
}

static int fetch_and_op(const void* origin, void* result, struct ompi_datatype_t* dt, int target, ptrdiff_t disp,
                        struct ompi_op_t* op, struct ompi_win_t* win) {
    return FRMA_Fetch_and_op(origin, result, dt, target, disp, op, ompi_osc_fastrma_win(win));
}

static int get_accumulate(const void* origin, int ocount, struct ompi_datatype_t* odt, void* result, int rcount,
                          struct ompi_datatype_t* rdt, int target, ptrdiff_t disp, int tcount,
                          struct ompi_datatype_t* tdt, struct ompi_op_t* op, struct ompi_win_t* win) {
    return FRMA_Get_accumulate(origin, ocount, odt, result, rcount, rdt, target, disp, tcount, tdt, op,
                               ompi_osc_fastrma_win(win));
}

static int rput(const void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp, int tcount,
                struct ompi_datatype_t* tdt, struct ompi_win_t* win, struct ompi_request_t** request) {
    return FRMA_Rput(origin, ocount, odt, target, disp, tcount, tdt, ompi_osc_fastrma_win(win), request);
}

static int rget(void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp, int tcount,
                struct ompi_datatype_t* tdt, struct ompi_win_t* win, struct ompi_request_t** request) {
    return FRMA_Rget(origin, ocount, odt, target, disp, tcount, tdt, ompi_osc_fastrma_win(win), request);
}

static int raccumulate(const void* origin, int ocount, struct ompi_datatype_t* odt, int target, ptrdiff_t disp,
                       int tcount, struct ompi_datatype_t* tdt, struct ompi_op_t* op, struct ompi_win_t* win,
                       struct ompi_request_t** request) {
    return FRMA_Raccumulate(origin, ocount, odt, target, disp, tcount, tdt, op, ompi_osc_fastrma_win(win), request);
}

static int rget_accumulate(const void* origin, int ocount, struct ompi_datatype_t* odt, void* result, int rcount,
                           struct ompi_datatype_t* rdt, int target, ptrdiff_t disp, int tcount,
                           struct ompi_datatype_t* tdt, struct ompi_op_t* op, struct ompi_win_t* win,
                           struct ompi_request_t** request) {
    return FRMA_Rget_accumulate(origin, ocount, odt, result, rcount, rdt, target, disp, tcount, tdt, op,
                                ompi_osc_fastrma_win(win), request);
}

static int win_fence(int assert_, struct ompi_win_t* win) { return FRMA_Win_fence(assert_, ompi_osc_fastrma_win(win)); }

static int win_start(struct ompi_group_t* group, int assert_, struct ompi_win_t* win) {
    return FRMA_Win_start(group, assert_, ompi_osc_fastrma_win(win));
}

static int win_complete(struct ompi_win_t* win) { return FRMA_Win_complete(ompi_osc_fastrma_win(win)); }

static int win_post(struct ompi_group_t* group, int assert_, struct ompi_win_t* win) {
    return FRMA_Win_post(group, assert_, ompi_osc_fastrma_win(win));
}

static int win_wait(struct ompi_win_t* win) { return FRMA_Win_wait(ompi_osc_fastrma_win(win)); }

static int win_test(struct ompi_win_t* win, int* flag) { return FRMA_Win_test(ompi_osc_fastrma_win(win), flag); }

static int win_lock(int lock_type, int target, int assert_, struct ompi_win_t* win) {
    return FRMA_Win_lock(lock_type, target, assert_, ompi_osc_fastrma_win(win));
}

static int win_unlock(int target, struct ompi_win_t* win) { return FRMA_Win_unlock(target, ompi_osc_fastrma_win(win)); }

static int win_lock_all(int assert_, struct ompi_win_t* win) {
    return FRMA_Win_lock_all(assert_, ompi_osc_fastrma_win(win));
}

static int win_unlock_all(struct ompi_win_t* win) { return FRMA_Win_unlock_all(ompi_osc_fastrma_win(win)); }

static int win_sync(struct ompi_win_t* win) { return FRMA_Win_sync(ompi_osc_fastrma_win(win)); }

static int win_flush(int target, struct ompi_win_t* win) { return FRMA_Win_flush(target, ompi_osc_fastrma_win(win)); }

static int win_flush_all(struct ompi_win_t* win) { return FRMA_Win_flush_all(ompi_osc_fastrma_win(win)); }

static int win_flush_local(int target, struct ompi_win_t* win) {
    return FRMA_Win_flush_local(target, ompi_osc_fastrma_win(win));
}

static int win_flush_local_all(struct ompi_win_t* win) { return FRMA_Win_flush_local_all(ompi_osc_fastrma_win(win)); }

const ompi_osc_base_module_t ompi_osc_fastrma_module_template = {
    .osc_win_shared_query = shared_query,
    .osc_win_attach = attach,
    .osc_win_detach = detach,
    .osc_free = module_free,

    .osc_put = put,
    .osc_get = get,
    .osc_accumulate = accumulate,
    .osc_compare_and_swap = compare_and_swap,
    .osc_fetch_and_op = fetch_and_op,
    .osc_get_accumulate = get_accumulate,

    .osc_rput = rput,
    .osc_rget = rget,
    .osc_raccumulate = raccumulate,
    .osc_rget_accumulate = rget_accumulate,

    .osc_fence = win_fence,

    .osc_start = win_start,
    .osc_complete = win_complete,
    .osc_post = win_post,
    .osc_wait = win_wait,
    .osc_test = win_test,

    .osc_lock = win_lock,
    .osc_unlock = win_unlock,
    .osc_lock_all = win_lock_all,
    .osc_unlock_all = win_unlock_all,

    .osc_sync = win_sync,
    .osc_flush = win_flush,
    .osc_flush_all = win_flush_all,
    .osc_flush_local = win_flush_local,
    .osc_flush_local_all = win_flush_local_all,
};
