// dropin.hpp — what the translation units of libfastrma-mpi share.
//
// libfastrma-mpi defines the MPI_ (and Fortran mpi_*_) one-sided entry points on top of the
// FRMA_ C API, so that an unmodified MPI program runs its RMA on fastrma, either preloaded
// (LD_PRELOAD) or linked before -lmpi. Everything else stays with the host MPI, which the
// engine itself only ever calls through PMPI_ symbols.
//
// Handle scheme (docs/dropin.md):
// - A window is an FRMA_Win travelling as an MPI_Win (both are pointer types). The host's
//   MPI_WIN_NULL (the address of a host object) and FRMA_WIN_NULL (0) map to each other;
//   nothing of the host ever receives a fastrma window.
// - Fortran INTEGER window handles are indices into a table of FRMA_Win, 0 = MPI_WIN_NULL.
//   Lookups are lock-free (fixed chunks of atomic slots); creation and release take a mutex.
// - Window error handlers are real host MPI_Errhandler handles (FRMA_Win_create_errhandler);
//   this layer counts their references (creation, windows using them, handles returned by
//   MPI_Win_get_errhandler) so that MPI_Errhandler_free behaves as MPI says: the handler
//   lives until the last window using it is freed.
#pragma once

#include <fastrma/fastrma.h>

namespace fastrma::dropin {

inline FRMA_Win to_frma(MPI_Win w) {
    return w == MPI_WIN_NULL ? FRMA_WIN_NULL : reinterpret_cast<FRMA_Win>(w);
}
inline MPI_Win to_mpi(FRMA_Win w) {
    return w == FRMA_WIN_NULL ? MPI_WIN_NULL : reinterpret_cast<MPI_Win>(w);
}

// ---- Fortran window handles ----
// The Fortran handle of w (allocated on first use; 0 for FRMA_WIN_NULL).
MPI_Fint win_c2f(FRMA_Win w);
// The window behind a Fortran handle; FRMA_WIN_NULL for 0 or an unknown index (the FRMA
// call it is passed to then reports MPI_ERR_WIN).
FRMA_Win win_f2c(MPI_Fint f);
// Forget the Fortran handle of a freed window (its index is reused).
void win_forget(FRMA_Win w);

// ---- window error handlers ----
// A handler that came from MPI_Win_create_errhandler / MPI_WIN_CREATE_ERRHANDLER: one
// reference, held by the handle the application got. fortran_fn is the Fortran subroutine
// for handlers created from Fortran (nullptr for C).
typedef void FortranWinErrhandler(MPI_Fint* win, MPI_Fint* error_code);
void errhandler_created(MPI_Errhandler eh, FortranWinErrhandler* fortran_fn);
// The Fortran subroutine of w's handler if it was created from Fortran (nullptr otherwise).
FortranWinErrhandler* window_fortran_errhandler(FRMA_Win w);
// MPI_Errhandler_free: true if eh was one of ours (a reference was dropped and *eh reset);
// false if it belongs to the host alone.
bool errhandler_free(MPI_Errhandler* eh);
// MPI_Win_set_errhandler: the window holds a reference to its user handler.
int set_errhandler(FRMA_Win w, MPI_Errhandler eh);
// MPI_Win_get_errhandler: a new reference the application frees with MPI_Errhandler_free.
int get_errhandler(FRMA_Win w, MPI_Errhandler* eh);
// After a successful window creation (counts the live windows, for finalize()).
void window_created(FRMA_Win w);
// After a successful FRMA_Win_free: forget w's Fortran handle and drop its handler's reference.
void window_freed(FRMA_Win w);

// ---- keyvals ----
// Fortran attribute callbacks (MPI-3.1 §6.7.3, Fortran binding).
typedef void FortranWinCopyAttr(MPI_Fint* oldwin, MPI_Fint* keyval, MPI_Aint* extra_state,
                                MPI_Aint* attribute_val_in, MPI_Aint* attribute_val_out,
                                MPI_Fint* flag, MPI_Fint* ierror);
typedef void FortranWinDeleteAttr(MPI_Fint* win, MPI_Fint* keyval, MPI_Aint* attribute_val,
                                  MPI_Aint* extra_state, MPI_Fint* ierror);
int create_keyval_c(MPI_Win_copy_attr_function* copy_fn, MPI_Win_delete_attr_function* delete_fn,
                    int* keyval, void* extra_state);
int create_keyval_fortran(FortranWinCopyAttr* copy_fn, FortranWinDeleteAttr* delete_fn,
                          int* keyval, MPI_Aint extra_state);
int free_keyval(int* keyval);

// ---- initialisation ----
// MPI_Init / MPI_Init_thread: the host gets MPI_THREAD_MULTIPLE (what fastrma's progress
// thread needs), the application sees min(required, what the host gave).
int init_thread(int* argc, char*** argv, int required, int* provided);
// MPI_Query_thread: the level the application was given.
int query_thread(int* provided);
// MPI_Finalize: fastrma first (every window's memory, the progress thread), then the host.
// With windows still alive (an application may free them in MPI_COMM_SELF delete callbacks,
// which run inside PMPI_Finalize), fastrma's own MPI_COMM_SELF hook tears it down instead.
int finalize();

}  // namespace fastrma::dropin
