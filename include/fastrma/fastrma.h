/*
 * fastrma.h — the C API of fastrma, an MPI-3 RMA engine that runs beside the host MPI.
 *
 * Every FRMA_ function has the signature of its MPI-3.1 counterpart and uses MPI's own types
 * (MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Aint, MPI_Group, MPI_Request,
 * MPI_Errhandler), except for the window handle, which is the opaque FRMA_Win.
 *
 * No explicit initialisation is needed: the engine starts at the first FRMA call made after
 * MPI_Init and is torn down inside MPI_Finalize. FRMA_Init/FRMA_Finalize give explicit control.
 *
 * Every function returns MPI_SUCCESS or an MPI error class. Window calls invoke the window's
 * error handler first (MPI_ERRORS_ARE_FATAL by default; MPI_ERRORS_RETURN honored).
 */
#ifndef FASTRMA_FASTRMA_H
#define FASTRMA_FASTRMA_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fastrma_window* FRMA_Win;
#define FRMA_WIN_NULL ((FRMA_Win)0)

/* Window error handler function: like MPI_Win_errhandler_function, on FRMA_Win. */
typedef void FRMA_Win_errhandler_function(FRMA_Win* win, int* error_code, ...);

/* Values of the FRMA_Win_get_attr keyvals (the MPI_WIN_* keyvals are accepted too). */
#define FRMA_WIN_FLAVOR_CREATE MPI_WIN_FLAVOR_CREATE
#define FRMA_WIN_FLAVOR_ALLOCATE MPI_WIN_FLAVOR_ALLOCATE
#define FRMA_WIN_FLAVOR_SHARED MPI_WIN_FLAVOR_SHARED
#define FRMA_WIN_FLAVOR_DYNAMIC MPI_WIN_FLAVOR_DYNAMIC

/* ---- engine ---- */
int FRMA_Init(void); /* optional: start the engine now (after MPI_Init) */
int FRMA_Finalize(void); /* optional: stop it now (every window must be freed) */
int FRMA_Initialized(int* flag);
/* The message of the last error raised on the calling thread ("" if none). */
const char* FRMA_Last_error_message(void);
/* Its MPI error class (MPI_SUCCESS if none). */
int FRMA_Last_error_class(void);
/* Print the engine's statistics counters to stderr (also at finalize when FASTRMA_STATS=1). */
int FRMA_Print_stats(void);

/* ---- memory ----
 * Memory from FRMA_Alloc_mem lives in a shared segment: a create window over it is reached
 * by node peers with load/store and CPU atomics, like an allocate window. */
int FRMA_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr);
int FRMA_Free_mem(void* base);

/* ---- windows ---- */
/* FRMA_Win_allocate's memory is page-aligned on shared memory; a window that uses the am
 * transport starts half a page in (page offset 2048), where the host MPI's copies between it
 * and page-aligned or malloc'ed buffers run at full speed (docs/transports.md). MPI promises
 * no alignment; both are 64-byte aligned. */
int FRMA_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, FRMA_Win* win);
int FRMA_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, FRMA_Win* win);
int FRMA_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, FRMA_Win* win);
int FRMA_Win_shared_query(FRMA_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr);
int FRMA_Win_create_dynamic(MPI_Info info, MPI_Comm comm, FRMA_Win* win);
int FRMA_Win_attach(FRMA_Win win, void* base, MPI_Aint size);
int FRMA_Win_detach(FRMA_Win win, const void* base);
int FRMA_Win_free(FRMA_Win* win);

/* ---- window management ---- */
int FRMA_Win_get_attr(FRMA_Win win, int win_keyval, void* attribute_val, int* flag);
int FRMA_Win_set_attr(FRMA_Win win, int win_keyval, void* attribute_val);
int FRMA_Win_delete_attr(FRMA_Win win, int win_keyval);
/* Keyvals for FRMA windows. The copy function is never called (windows are not copied). */
typedef int FRMA_Win_copy_attr_function(FRMA_Win oldwin, int win_keyval, void* extra_state, void* attribute_val_in,
                                        void* attribute_val_out, int* flag);
typedef int FRMA_Win_delete_attr_function(FRMA_Win win, int win_keyval, void* attribute_val, void* extra_state);
int FRMA_Win_create_keyval(FRMA_Win_copy_attr_function* copy_fn, FRMA_Win_delete_attr_function* delete_fn,
                           int* win_keyval, void* extra_state);
int FRMA_Win_free_keyval(int* win_keyval);
int FRMA_Win_get_group(FRMA_Win win, MPI_Group* group);
int FRMA_Win_set_name(FRMA_Win win, const char* win_name);
int FRMA_Win_get_name(FRMA_Win win, char* win_name, int* resultlen);
int FRMA_Win_set_info(FRMA_Win win, MPI_Info info);
int FRMA_Win_get_info(FRMA_Win win, MPI_Info* info_used);

/* ---- active-target synchronization ---- */
int FRMA_Win_fence(int assert_, FRMA_Win win);
int FRMA_Win_post(MPI_Group group, int assert_, FRMA_Win win);
int FRMA_Win_start(MPI_Group group, int assert_, FRMA_Win win);
int FRMA_Win_complete(FRMA_Win win);
int FRMA_Win_wait(FRMA_Win win);
int FRMA_Win_test(FRMA_Win win, int* flag);

/* ---- passive-target synchronization ---- */
int FRMA_Win_lock(int lock_type, int rank, int assert_, FRMA_Win win);
int FRMA_Win_unlock(int rank, FRMA_Win win);
int FRMA_Win_lock_all(int assert_, FRMA_Win win);
int FRMA_Win_unlock_all(FRMA_Win win);
int FRMA_Win_flush(int rank, FRMA_Win win);
int FRMA_Win_flush_all(FRMA_Win win);
int FRMA_Win_flush_local(int rank, FRMA_Win win);
int FRMA_Win_flush_local_all(FRMA_Win win);
int FRMA_Win_sync(FRMA_Win win);

/* ---- communication ---- */
int FRMA_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, FRMA_Win win);
int FRMA_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
             int target_count, MPI_Datatype target_datatype, FRMA_Win win);
int FRMA_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win);
int FRMA_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                        int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                        int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win);
int FRMA_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                      MPI_Aint target_disp, MPI_Op op, FRMA_Win win);
int FRMA_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr, MPI_Datatype datatype,
                          int target_rank, MPI_Aint target_disp, FRMA_Win win);

/* ---- request-based operations (passive-target epochs only) ----
 * The requests are ordinary MPI requests (generalized requests of the host MPI): complete
 * them with MPI_Wait / MPI_Test / MPI_Waitall. fastrma completes them itself (locally, as
 * MPI-3.1 specifies), also when the progress thread is off. */
int FRMA_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
              MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, FRMA_Win win, MPI_Request* request);
int FRMA_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
              int target_count, MPI_Datatype target_datatype, FRMA_Win win, MPI_Request* request);
int FRMA_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                     MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win,
                     MPI_Request* request);
int FRMA_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                         int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                         int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win, MPI_Request* request);

/* ---- error handling ---- */
int FRMA_Win_create_errhandler(FRMA_Win_errhandler_function* fn, MPI_Errhandler* errhandler);
int FRMA_Win_set_errhandler(FRMA_Win win, MPI_Errhandler errhandler);
int FRMA_Win_get_errhandler(FRMA_Win win, MPI_Errhandler* errhandler);
int FRMA_Win_call_errhandler(FRMA_Win win, int errorcode);
int FRMA_Errhandler_free(MPI_Errhandler* errhandler);

#ifdef __cplusplus
}
#endif

#endif /* FASTRMA_FASTRMA_H */
