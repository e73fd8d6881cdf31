// c_bindings.cpp — the MPI_ C entry points of libfastrma-mpi: every one-sided call of
// MPI-3.1 (chapter 11 and the window parts of chapters 6 and 8), plus MPI_Init*, MPI_Finalize,
// MPI_Query_thread, MPI_Alloc_mem / MPI_Free_mem, MPI_Errhandler_free and MPI_Error_string.
//
// Each one converts the window handle (dropin.hpp) and calls its FRMA_ counterpart, which
// validates, routes errors through the window's handler and returns the MPI error class.
// Nothing here calls an MPI_ symbol that this library defines; the host is reached through
// PMPI_ (and through fastrma, which uses PMPI_ only).
#include <mpi.h>

#include "mpi/dropin.hpp"

using namespace fastrma::dropin;

extern "C" {

// ---- initialisation, teardown, memory ----

int MPI_Init(int* argc, char*** argv) {
    int provided = 0;
    return init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    return init_thread(argc, argv, required, provided);
}

int MPI_Query_thread(int* provided) { return query_thread(provided); }

int MPI_Finalize(void) { return finalize(); }

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) { return FRMA_Alloc_mem(size, info, baseptr); }

int MPI_Free_mem(void* base) { return FRMA_Free_mem(base); }

// The class a fastrma call returned comes back as its own message (naming the call and the
// bad value): the calling thread's last fastrma error of that class. Other codes: the host's.
int MPI_Error_string(int errorcode, char* string, int* resultlen) { return error_string(errorcode, string, resultlen); }

// ---- window creation and destruction ----

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_create(base, size, disp_unit, info, comm, &w);
    if (rc == MPI_SUCCESS) window_created(w);
    if (win) *win = to_mpi(w);
    return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_allocate(size, disp_unit, info, comm, baseptr, &w);
    if (rc == MPI_SUCCESS) window_created(w);
    if (win) *win = to_mpi(w);
    return rc;
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_allocate_shared(size, disp_unit, info, comm, baseptr, &w);
    if (rc == MPI_SUCCESS) window_created(w);
    if (win) *win = to_mpi(w);
    return rc;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_create_dynamic(info, comm, &w);
    if (rc == MPI_SUCCESS) window_created(w);
    if (win) *win = to_mpi(w);
    return rc;
}

int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr) {
    return FRMA_Win_shared_query(to_frma(win), rank, size, disp_unit, baseptr);
}

int MPI_Win_attach(MPI_Win win, void* base, MPI_Aint size) { return FRMA_Win_attach(to_frma(win), base, size); }

int MPI_Win_detach(MPI_Win win, const void* base) { return FRMA_Win_detach(to_frma(win), base); }

int MPI_Win_free(MPI_Win* win) {
    if (!win) {
        FRMA_Win* none = nullptr;
        return FRMA_Win_free(none);  // fastrma reports the NULL argument
    }
    FRMA_Win w = to_frma(*win);
    int rc = FRMA_Win_free(&w);
    if (rc != MPI_SUCCESS) return rc;
    window_freed(to_frma(*win));
    *win = MPI_WIN_NULL;
    return MPI_SUCCESS;
}

// ---- handles across languages ----

// MPICH's mpi.h defines these two as macros (the identity: the drop-in keeps that true);
// the functions are still exported for callers that do not see the macros.
#undef MPI_Win_c2f
#undef MPI_Win_f2c
MPI_Fint MPI_Win_c2f(MPI_Win win) { return win_c2f(to_frma(win)); }
MPI_Win MPI_Win_f2c(MPI_Fint win) { return to_mpi(win_f2c(win)); }

// ---- window management: attributes, keyvals, group, name, info ----

int MPI_Win_get_attr(MPI_Win win, int win_keyval, void* attribute_val, int* flag) {
    return FRMA_Win_get_attr(to_frma(win), win_keyval, attribute_val, flag);
}

int MPI_Win_set_attr(MPI_Win win, int win_keyval, void* attribute_val) {
    return FRMA_Win_set_attr(to_frma(win), win_keyval, attribute_val);
}

int MPI_Win_delete_attr(MPI_Win win, int win_keyval) { return FRMA_Win_delete_attr(to_frma(win), win_keyval); }

int MPI_Win_create_keyval(MPI_Win_copy_attr_function* win_copy_attr_fn,
                          MPI_Win_delete_attr_function* win_delete_attr_fn, int* win_keyval, void* extra_state) {
    return create_keyval_c(win_copy_attr_fn, win_delete_attr_fn, win_keyval, extra_state);
}

int MPI_Win_free_keyval(int* win_keyval) { return free_keyval(win_keyval); }

int MPI_Win_get_group(MPI_Win win, MPI_Group* group) { return FRMA_Win_get_group(to_frma(win), group); }

int MPI_Win_set_name(MPI_Win win, const char* win_name) { return FRMA_Win_set_name(to_frma(win), win_name); }

int MPI_Win_get_name(MPI_Win win, char* win_name, int* resultlen) {
    return FRMA_Win_get_name(to_frma(win), win_name, resultlen);
}

int MPI_Win_set_info(MPI_Win win, MPI_Info info) { return FRMA_Win_set_info(to_frma(win), info); }

int MPI_Win_get_info(MPI_Win win, MPI_Info* info_used) { return FRMA_Win_get_info(to_frma(win), info_used); }

// ---- error handlers ----

namespace {
// Integer MPI_Win (MPICH's ABI): fastrma calls this with the FRMA_Win; it finds the
// window's C handler and calls it with the window's MPI_Win.
void c_errhandler_trampoline(FRMA_Win* win, int* code, ...) {
    MPI_Win_errhandler_function* fn = window_c_errhandler(*win);
    if (!fn) return;
    MPI_Win w = to_mpi(*win);
    fn(&w, code);
}
}  // namespace

int MPI_Win_create_errhandler(MPI_Win_errhandler_function* function, MPI_Errhandler* errhandler) {
    if constexpr (fastrma::detail::host_abi::kIntegerWinHandles) {
        int rc = FRMA_Win_create_errhandler(c_errhandler_trampoline, errhandler);
        if (rc == MPI_SUCCESS) errhandler_created(*errhandler, nullptr, function);
        return rc;
    }
    // Pointer MPI_Win (Open MPI's ABI): MPI_Win_errhandler_function takes MPI_Win*,
    // fastrma's takes FRMA_Win*: the same pointer-to-pointer ABI, and the MPI_Win value of
    // a fastrma window *is* its FRMA_Win (never MPI_WIN_NULL: handlers are only called on
    // valid windows).
    int rc = FRMA_Win_create_errhandler(reinterpret_cast<FRMA_Win_errhandler_function*>(function), errhandler);
    if (rc == MPI_SUCCESS) errhandler_created(*errhandler, nullptr);
    return rc;
}

int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler) { return set_errhandler(to_frma(win), errhandler); }

int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler) { return get_errhandler(to_frma(win), errhandler); }

int MPI_Win_call_errhandler(MPI_Win win, int errorcode) { return FRMA_Win_call_errhandler(to_frma(win), errorcode); }

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
    if (errhandler && errhandler_free(errhandler)) return MPI_SUCCESS;
    return PMPI_Errhandler_free(errhandler);
}

// ---- active-target synchronization ----

int MPI_Win_fence(int assert_, MPI_Win win) { return FRMA_Win_fence(assert_, to_frma(win)); }

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) { return FRMA_Win_post(group, assert_, to_frma(win)); }

int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) { return FRMA_Win_start(group, assert_, to_frma(win)); }

int MPI_Win_complete(MPI_Win win) { return FRMA_Win_complete(to_frma(win)); }
int MPI_Win_wait(MPI_Win win) { return FRMA_Win_wait(to_frma(win)); }
int MPI_Win_test(MPI_Win win, int* flag) { return FRMA_Win_test(to_frma(win), flag); }

// ---- passive-target synchronization ----

int MPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win) {
    return FRMA_Win_lock(lock_type, rank, assert_, to_frma(win));
}
int MPI_Win_unlock(int rank, MPI_Win win) { return FRMA_Win_unlock(rank, to_frma(win)); }
int MPI_Win_lock_all(int assert_, MPI_Win win) { return FRMA_Win_lock_all(assert_, to_frma(win)); }
int MPI_Win_unlock_all(MPI_Win win) { return FRMA_Win_unlock_all(to_frma(win)); }
int MPI_Win_flush(int rank, MPI_Win win) { return FRMA_Win_flush(rank, to_frma(win)); }
int MPI_Win_flush_all(MPI_Win win) { return FRMA_Win_flush_all(to_frma(win)); }
int MPI_Win_flush_local(int rank, MPI_Win win) { return FRMA_Win_flush_local(rank, to_frma(win)); }
int MPI_Win_flush_local_all(MPI_Win win) { return FRMA_Win_flush_local_all(to_frma(win)); }
int MPI_Win_sync(MPI_Win win) { return FRMA_Win_sync(to_frma(win)); }

// ---- communication ----

int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
    return FRMA_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype,
                    to_frma(win));
}

int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
            int target_count, MPI_Datatype target_datatype, MPI_Win win) {
    return FRMA_Get(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype,
                    to_frma(win));
}

int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
    return FRMA_Accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                           target_datatype, op, to_frma(win));
}

int MPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                       int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                       int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
    return FRMA_Get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                               target_rank, target_disp, target_count, target_datatype, op, to_frma(win));
}

int MPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
    return FRMA_Fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp, op, to_frma(win));
}

int MPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp, MPI_Win win) {
    return FRMA_Compare_and_swap(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp,
                                 to_frma(win));
}

// Request-based operations: fastrma's requests are host generalized requests, so the host's
// MPI_Wait / MPI_Test / MPI_Waitall ... complete them unchanged.

int MPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request* request) {
    return FRMA_Rput(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                     target_datatype, to_frma(win), request);
}

int MPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
             int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request* request) {
    return FRMA_Rget(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                     target_datatype, to_frma(win), request);
}

int MPI_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                    MPI_Request* request) {
    return FRMA_Raccumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                            target_datatype, op, to_frma(win), request);
}

int MPI_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                        int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                        int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request* request) {
    return FRMA_Rget_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                                target_rank, target_disp, target_count, target_datatype, op, to_frma(win), request);
}

}  // extern "C"
