// dropin.hpp — what the translation units of libfastrma-mpi share.
//
// libfastrma-mpi defines the MPI_ (and Fortran mpi_*_) one-sided entry points on top of the
// FRMA_ C API, so that an unmodified MPI program runs its RMA on fastrma, either preloaded
// (LD_PRELOAD) or linked before -lmpi. Everything else stays with the host MPI, which the
// engine itself only ever calls through PMPI_ symbols.
//
// Handle scheme (docs/dropin.md):
// - Fortran INTEGER window handles are entries of a table of FRMA_Win. Lookups are
//   lock-free (fixed chunks of atomic slots); creation and release take a mutex.
// - The C MPI_Win depends on the host's ABI (base/host_abi.hpp). Open MPI (MPI_Win is a
//   pointer): the FRMA_Win itself travels as the MPI_Win; the host's MPI_WIN_NULL (the
//   address of a host object) and FRMA_WIN_NULL (0) map to each other; the Fortran handle
//   is the table index, 0 = MPI_WIN_NULL. MPICH (MPI_Win is an int): the C handle and the
//   Fortran handle are one integer, host_abi::kWinHandleTag | table index, a value MPICH
//   never gives its own windows; the host's MPI_WIN_NULL maps to FRMA_WIN_NULL.
// In both, nothing of the host ever receives a fastrma window.
// - Window error handlers are real host MPI_Errhandler handles (FRMA_Win_create_errhandler);
//   this layer counts their references (creation, windows using them, handles returned by
//   MPI_Win_get_errhandler) so that MPI_Errhandler_free behaves as MPI says: the handler
//   lives until the last window using it is freed.
#pragma once

#include <fastrma/fastrma.h>

#include <type_traits>

#include "base/host_abi.hpp"

namespace fastrma::dropin {

// ---- Fortran window handles ----
// The Fortran handle of w (allocated on first use; the host's Fortran MPI_WIN_NULL for
// FRMA_WIN_NULL).
MPI_Fint win_c2f(FRMA_Win w);
// The window behind a Fortran handle; FRMA_WIN_NULL for MPI_WIN_NULL or an unknown handle
// (the FRMA call it is passed to then reports MPI_ERR_WIN).
FRMA_Win win_f2c(MPI_Fint f);
// Forget the Fortran handle of a freed window (its index is reused).
void win_forget(FRMA_Win w);

// ---- C window handles (the scheme above) ----
namespace detail {
template <class Win>
inline FRMA_Win to_frma(Win w) {
    if constexpr (std::is_pointer_v<Win>) {
        return w == MPI_WIN_NULL ? FRMA_WIN_NULL : reinterpret_cast<FRMA_Win>(w);
    } else {
        return win_f2c(static_cast<MPI_Fint>(w));  // the C handle is the Fortran handle
    }
}
template <class Win>
inline Win to_mpi(FRMA_Win w) {
    if constexpr (std::is_pointer_v<Win>) {
        return w == FRMA_WIN_NULL ? MPI_WIN_NULL : reinterpret_cast<Win>(w);
    } else {
        return static_cast<Win>(win_c2f(w));
    }
}
}  // namespace detail
inline FRMA_Win to_frma(MPI_Win w) { return detail::to_frma<MPI_Win>(w); }
inline MPI_Win to_mpi(FRMA_Win w) { return detail::to_mpi<MPI_Win>(w); }

// ---- window error handlers ----
// A handler that came from MPI_Win_create_errhandler / MPI_WIN_CREATE_ERRHANDLER: one
// reference, held by the handle the application got. fortran_fn is the Fortran subroutine
// for handlers created from Fortran (nullptr for C).
// c_fn is the C function of handlers created from C where the host's MPI_Win is not the
// FRMA_Win (integer handles: a trampoline passes the window's MPI_Win); nullptr otherwise.
typedef void FortranWinErrhandler(MPI_Fint* win, MPI_Fint* error_code);
void errhandler_created(MPI_Errhandler eh, FortranWinErrhandler* fortran_fn,
                        MPI_Win_errhandler_function* c_fn = nullptr);
// The Fortran subroutine of w's handler if it was created from Fortran (nullptr otherwise).
FortranWinErrhandler* window_fortran_errhandler(FRMA_Win w);
// The C function of w's handler if it was recorded as c_fn (nullptr otherwise).
MPI_Win_errhandler_function* window_c_errhandler(FRMA_Win w);
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
typedef void FortranWinCopyAttr(MPI_Fint* oldwin, MPI_Fint* keyval, MPI_Aint* extra_state, MPI_Aint* attribute_val_in,
                                MPI_Aint* attribute_val_out, MPI_Fint* flag, MPI_Fint* ierror);
typedef void FortranWinDeleteAttr(MPI_Fint* win, MPI_Fint* keyval, MPI_Aint* attribute_val, MPI_Aint* extra_state,
                                  MPI_Fint* ierror);
int create_keyval_c(MPI_Win_copy_attr_function* copy_fn, MPI_Win_delete_attr_function* delete_fn, int* keyval,
                    void* extra_state);
int create_keyval_fortran(FortranWinCopyAttr* copy_fn, FortranWinDeleteAttr* delete_fn, int* keyval,
                          MPI_Aint extra_state);
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
// MPI_Error_string: errorcode is the class of the calling thread's last fastrma error (what
// fastrma calls return: classes): that error's message; any other code: the host's string.
int error_string(int errorcode, char* string, int* resultlen);

}  // namespace fastrma::dropin
