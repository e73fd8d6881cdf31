// fortran_bindings.cpp — the Fortran (mpif.h and `use mpi`) symbols of the same entry points
// as c_bindings.cpp.
//
// Open MPI's Fortran layer (libmpi_mpifh) calls PMPI_ directly, so without these a Fortran
// program would hand fastrma windows to the host (or create host windows fastrma never
// sees). Each routine here converts the Fortran arguments — INTEGER handles through the
// host's MPI_*_f2c and this library's window table, INTEGER(KIND=MPI_ADDRESS_KIND) as
// MPI_Aint, LOGICAL as 0/1 (gfortran), CHARACTER with its hidden length — and calls the
// FRMA_ function; IERROR receives the MPI error class.
//
// Every routine is exported under the four manglings Open MPI itself exports
// (mpi_x_, mpi_x, mpi_x__, MPI_X); the *_cptr variants that `use mpi` selects for
// TYPE(C_PTR) base pointers have the same ABI (a C_PTR by reference is an 8-byte address)
// and are aliases. `use mpi_f08` (Open MPI's *_f08 symbols) is not covered.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "mpi/dropin.hpp"

using namespace fastrma::dropin;

namespace {

constexpr MPI_Fint kTrue = 1;  // gfortran's .TRUE.
constexpr MPI_Fint kFalse = 0;

inline void set_ierr(MPI_Fint* ierr, int rc) {
    if (ierr) *ierr = rc;
}
inline FRMA_Win W(const MPI_Fint* win) { return win_f2c(*win); }
inline MPI_Datatype T(const MPI_Fint* type) { return MPI_Type_f2c(*type); }
inline MPI_Op O(const MPI_Fint* op) { return MPI_Op_f2c(*op); }
inline MPI_Info I(const MPI_Fint* info) { return MPI_Info_f2c(*info); }
inline MPI_Comm C(const MPI_Fint* comm) { return MPI_Comm_f2c(*comm); }
inline MPI_Group G(const MPI_Fint* group) { return MPI_Group_f2c(*group); }

}  // namespace
namespace {
// A Fortran buffer argument as C sees it: the host's Fortran MPI_BOTTOM (the address of a
// common block: host_abi::fortran_bottom) becomes the C MPI_BOTTOM (NULL), so that a
// datatype of absolute addresses (MPI_Get_address) finds its data.
template <class P>
inline P* B(P* buf) {
    static const void* const bottom = fastrma::detail::host_abi::fortran_bottom();
    return bottom && static_cast<const void*>(buf) == bottom ? nullptr : buf;
}

// A Fortran CHARACTER argument without its trailing blanks.
std::string from_fortran(const char* s, std::size_t len) {
    while (len > 0 && s[len - 1] == ' ') --len;
    return std::string(s, len);
}

// Called by fastrma for a handler made by MPI_WIN_CREATE_ERRHANDLER: find the window's
// handler and call its Fortran subroutine with the window's INTEGER handle.
void fortran_errhandler_trampoline(FRMA_Win* win, int* code, ...) {
    FortranWinErrhandler* fn = window_fortran_errhandler(*win);
    if (!fn) return;
    MPI_Fint fwin = win_c2f(*win), fcode = *code;
    fn(&fwin, &fcode);
}

// Window creation: the new window's Fortran handle (MPI_WIN_NULL on failure).
void return_window(int rc, FRMA_Win w, MPI_Fint* win, MPI_Fint* ierr) {
    if (rc == MPI_SUCCESS) window_created(w);
    *win = rc == MPI_SUCCESS ? win_c2f(w) : fastrma::detail::host_abi::fortran_win_null();
    set_ierr(ierr, rc);
}

}  // namespace

// Define `lower_` with the body that follows, and export it also as lower, lower__, UPPER.
#define FRMA_F_ALIAS(target, name, params) void name params __attribute__((alias(#target)));
#define FRMA_FORTRAN(lower, UPPER, params)    \
    void lower##_ params;                     \
    FRMA_F_ALIAS(lower##_, lower, params)     \
    FRMA_F_ALIAS(lower##_, lower##__, params) \
    FRMA_F_ALIAS(lower##_, UPPER, params)     \
    void lower##_ params
// The same routine under another name's four manglings (the _cptr variants).
#define FRMA_FORTRAN_SAME(target, lower, UPPER, params) \
    FRMA_F_ALIAS(target##_, lower##_, params)           \
    FRMA_F_ALIAS(target##_, lower, params)              \
    FRMA_F_ALIAS(target##_, lower##__, params)          \
    FRMA_F_ALIAS(target##_, UPPER, params)

extern "C" {

// ---- initialisation, teardown, memory ----

FRMA_FORTRAN(mpi_init, MPI_INIT, (MPI_Fint * ierr)) {
    int provided = 0;
    set_ierr(ierr, init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided));
}

FRMA_FORTRAN(mpi_init_thread, MPI_INIT_THREAD, (MPI_Fint * required, MPI_Fint* provided, MPI_Fint* ierr)) {
    int p = 0;
    int rc = init_thread(nullptr, nullptr, *required, &p);
    if (rc == MPI_SUCCESS) *provided = p;
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_query_thread, MPI_QUERY_THREAD, (MPI_Fint * provided, MPI_Fint* ierr)) {
    int p = 0;
    int rc = query_thread(&p);
    if (rc == MPI_SUCCESS) *provided = p;
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_finalize, MPI_FINALIZE, (MPI_Fint * ierr)) { set_ierr(ierr, finalize()); }

// MPI_F_SYNC_REG(buf) (MPI-3.1 §17.1.19; no IERROR): an external call the compiler cannot see
// through, so buf is reloaded from memory after it. Defined here because MPICH 4.0.2's
// stores through an IERROR argument that does not exist.
FRMA_FORTRAN(mpi_f_sync_reg, MPI_F_SYNC_REG, (void* buf)) { asm volatile("" : : "r"(buf) : "memory"); }

#define FRMA_ALLOC_MEM_PARAMS (MPI_Aint * size, MPI_Fint * info, MPI_Aint * baseptr, MPI_Fint * ierr)
FRMA_FORTRAN(mpi_alloc_mem, MPI_ALLOC_MEM, FRMA_ALLOC_MEM_PARAMS) {
    void* p = nullptr;
    int rc = FRMA_Alloc_mem(*size, I(info), &p);
    if (rc == MPI_SUCCESS) *baseptr = reinterpret_cast<MPI_Aint>(p);
    set_ierr(ierr, rc);
}
FRMA_FORTRAN_SAME(mpi_alloc_mem, mpi_alloc_mem_cptr, MPI_ALLOC_MEM_CPTR, FRMA_ALLOC_MEM_PARAMS)

FRMA_FORTRAN(mpi_free_mem, MPI_FREE_MEM, (char* base, MPI_Fint* ierr)) { set_ierr(ierr, FRMA_Free_mem(base)); }

// ---- window creation and destruction ----

FRMA_FORTRAN(mpi_win_create, MPI_WIN_CREATE,
             (char* base, MPI_Aint* size, MPI_Fint* disp_unit, MPI_Fint* info, MPI_Fint* comm, MPI_Fint* win,
              MPI_Fint* ierr)) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_create(base, *size, *disp_unit, I(info), C(comm), &w);
    return_window(rc, w, win, ierr);
}

#define FRMA_WIN_ALLOCATE_PARAMS                                                                                  \
    (MPI_Aint * size, MPI_Fint * disp_unit, MPI_Fint * info, MPI_Fint * comm, MPI_Aint * baseptr, MPI_Fint * win, \
     MPI_Fint * ierr)
FRMA_FORTRAN(mpi_win_allocate, MPI_WIN_ALLOCATE, FRMA_WIN_ALLOCATE_PARAMS) {
    FRMA_Win w = FRMA_WIN_NULL;
    void* base = nullptr;
    int rc = FRMA_Win_allocate(*size, *disp_unit, I(info), C(comm), &base, &w);
    if (rc == MPI_SUCCESS) *baseptr = reinterpret_cast<MPI_Aint>(base);
    return_window(rc, w, win, ierr);
}
FRMA_FORTRAN_SAME(mpi_win_allocate, mpi_win_allocate_cptr, MPI_WIN_ALLOCATE_CPTR, FRMA_WIN_ALLOCATE_PARAMS)

FRMA_FORTRAN(mpi_win_allocate_shared, MPI_WIN_ALLOCATE_SHARED, FRMA_WIN_ALLOCATE_PARAMS) {
    FRMA_Win w = FRMA_WIN_NULL;
    void* base = nullptr;
    int rc = FRMA_Win_allocate_shared(*size, *disp_unit, I(info), C(comm), &base, &w);
    if (rc == MPI_SUCCESS) *baseptr = reinterpret_cast<MPI_Aint>(base);
    return_window(rc, w, win, ierr);
}
FRMA_FORTRAN_SAME(mpi_win_allocate_shared, mpi_win_allocate_shared_cptr, MPI_WIN_ALLOCATE_SHARED_CPTR,
                  FRMA_WIN_ALLOCATE_PARAMS)

#define FRMA_SHARED_QUERY_PARAMS \
    (MPI_Fint * win, MPI_Fint * rank, MPI_Aint * size, MPI_Fint * disp_unit, MPI_Aint * baseptr, MPI_Fint * ierr)
FRMA_FORTRAN(mpi_win_shared_query, MPI_WIN_SHARED_QUERY, FRMA_SHARED_QUERY_PARAMS) {
    MPI_Aint sz = 0;
    int du = 0;
    void* base = nullptr;
    int rc = FRMA_Win_shared_query(W(win), *rank, &sz, &du, &base);
    if (rc == MPI_SUCCESS) {
        *size = sz;
        *disp_unit = du;
        *baseptr = reinterpret_cast<MPI_Aint>(base);
    }
    set_ierr(ierr, rc);
}
FRMA_FORTRAN_SAME(mpi_win_shared_query, mpi_win_shared_query_cptr, MPI_WIN_SHARED_QUERY_CPTR, FRMA_SHARED_QUERY_PARAMS)

FRMA_FORTRAN(mpi_win_create_dynamic, MPI_WIN_CREATE_DYNAMIC,
             (MPI_Fint * info, MPI_Fint* comm, MPI_Fint* win, MPI_Fint* ierr)) {
    FRMA_Win w = FRMA_WIN_NULL;
    int rc = FRMA_Win_create_dynamic(I(info), C(comm), &w);
    return_window(rc, w, win, ierr);
}

FRMA_FORTRAN(mpi_win_attach, MPI_WIN_ATTACH, (MPI_Fint * win, char* base, MPI_Aint* size, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_attach(W(win), base, *size));
}

FRMA_FORTRAN(mpi_win_detach, MPI_WIN_DETACH, (MPI_Fint * win, char* base, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_detach(W(win), base));
}

FRMA_FORTRAN(mpi_win_free, MPI_WIN_FREE, (MPI_Fint * win, MPI_Fint* ierr)) {
    FRMA_Win w = W(win);
    const FRMA_Win freed = w;
    int rc = FRMA_Win_free(&w);
    if (rc == MPI_SUCCESS) {
        window_freed(freed);
        *win = fastrma::detail::host_abi::fortran_win_null();
    }
    set_ierr(ierr, rc);
}

// ---- window management ----

FRMA_FORTRAN(mpi_win_get_attr, MPI_WIN_GET_ATTR,
             (MPI_Fint * win, MPI_Fint* keyval, MPI_Aint* attribute_val, MPI_Fint* flag, MPI_Fint* ierr)) {
    void* v = nullptr;
    int f = 0;
    const int key = fastrma::detail::host_abi::keyval_f2c(*keyval);
    int rc = FRMA_Win_get_attr(W(win), key, &v, &f);
    if (rc == MPI_SUCCESS) {
        *flag = f ? kTrue : kFalse;
        // Fortran gets values, C gets pointers to them (MPI-3.1 §11.2.6); user attributes
        // and MPI_WIN_BASE are address-sized values in both languages.
        if (f) {
            if (key == MPI_WIN_SIZE)
                *attribute_val = *static_cast<MPI_Aint*>(v);
            else if (key == MPI_WIN_DISP_UNIT || key == MPI_WIN_CREATE_FLAVOR || key == MPI_WIN_MODEL)
                *attribute_val = *static_cast<int*>(v);
            else
                *attribute_val = reinterpret_cast<MPI_Aint>(v);
        }
    }
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_set_attr, MPI_WIN_SET_ATTR,
             (MPI_Fint * win, MPI_Fint* keyval, MPI_Aint* attribute_val, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_set_attr(W(win), *keyval, reinterpret_cast<void*>(*attribute_val)));
}

FRMA_FORTRAN(mpi_win_delete_attr, MPI_WIN_DELETE_ATTR, (MPI_Fint * win, MPI_Fint* keyval, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_delete_attr(W(win), *keyval));
}

FRMA_FORTRAN(mpi_win_create_keyval, MPI_WIN_CREATE_KEYVAL,
             (FortranWinCopyAttr * copy_fn, FortranWinDeleteAttr* delete_fn, MPI_Fint* keyval, MPI_Aint* extra_state,
              MPI_Fint* ierr)) {
    int k = MPI_KEYVAL_INVALID;
    int rc = create_keyval_fortran(copy_fn, delete_fn, &k, *extra_state);
    if (rc == MPI_SUCCESS) *keyval = k;
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_free_keyval, MPI_WIN_FREE_KEYVAL, (MPI_Fint * keyval, MPI_Fint* ierr)) {
    int k = *keyval;
    int rc = free_keyval(&k);
    if (rc == MPI_SUCCESS) *keyval = k;
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_get_group, MPI_WIN_GET_GROUP, (MPI_Fint * win, MPI_Fint* group, MPI_Fint* ierr)) {
    MPI_Group g = MPI_GROUP_NULL;
    int rc = FRMA_Win_get_group(W(win), &g);
    if (rc == MPI_SUCCESS) *group = MPI_Group_c2f(g);
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_set_name, MPI_WIN_SET_NAME,
             (MPI_Fint * win, char* win_name, MPI_Fint* ierr, std::size_t name_len)) {
    const std::string name = from_fortran(win_name, name_len);
    set_ierr(ierr, FRMA_Win_set_name(W(win), name.c_str()));
}

FRMA_FORTRAN(mpi_win_get_name, MPI_WIN_GET_NAME,
             (MPI_Fint * win, char* win_name, MPI_Fint* resultlen, MPI_Fint* ierr, std::size_t name_len)) {
    char buf[MPI_MAX_OBJECT_NAME + 1] = {};
    int len = 0;
    int rc = FRMA_Win_get_name(W(win), buf, &len);
    if (rc == MPI_SUCCESS) {
        const std::size_t n = std::min<std::size_t>(std::size_t(len), name_len);
        std::memcpy(win_name, buf, n);
        std::memset(win_name + n, ' ', name_len - n);
        *resultlen = MPI_Fint(n);
    }
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_set_info, MPI_WIN_SET_INFO, (MPI_Fint * win, MPI_Fint* info, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_set_info(W(win), I(info)));
}

FRMA_FORTRAN(mpi_win_get_info, MPI_WIN_GET_INFO, (MPI_Fint * win, MPI_Fint* info_used, MPI_Fint* ierr)) {
    MPI_Info i = MPI_INFO_NULL;
    int rc = FRMA_Win_get_info(W(win), &i);
    if (rc == MPI_SUCCESS) *info_used = MPI_Info_c2f(i);
    set_ierr(ierr, rc);
}

// ---- error handlers ----

FRMA_FORTRAN(mpi_win_create_errhandler, MPI_WIN_CREATE_ERRHANDLER,
             (FortranWinErrhandler * function, MPI_Fint* errhandler, MPI_Fint* ierr)) {
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int rc = FRMA_Win_create_errhandler(fortran_errhandler_trampoline, &eh);
    if (rc == MPI_SUCCESS) {
        errhandler_created(eh, function);
        *errhandler = MPI_Errhandler_c2f(eh);
    }
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_set_errhandler, MPI_WIN_SET_ERRHANDLER, (MPI_Fint * win, MPI_Fint* errhandler, MPI_Fint* ierr)) {
    set_ierr(ierr, set_errhandler(W(win), MPI_Errhandler_f2c(*errhandler)));
}

FRMA_FORTRAN(mpi_win_get_errhandler, MPI_WIN_GET_ERRHANDLER, (MPI_Fint * win, MPI_Fint* errhandler, MPI_Fint* ierr)) {
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int rc = get_errhandler(W(win), &eh);
    if (rc == MPI_SUCCESS) *errhandler = MPI_Errhandler_c2f(eh);
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_win_call_errhandler, MPI_WIN_CALL_ERRHANDLER, (MPI_Fint * win, MPI_Fint* errorcode, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_call_errhandler(W(win), *errorcode));
}

FRMA_FORTRAN(mpi_errhandler_free, MPI_ERRHANDLER_FREE, (MPI_Fint * errhandler, MPI_Fint* ierr)) {
    MPI_Errhandler eh = MPI_Errhandler_f2c(*errhandler);
    int rc = MPI_SUCCESS;
    if (!errhandler_free(&eh)) rc = PMPI_Errhandler_free(&eh);
    if (rc == MPI_SUCCESS) *errhandler = MPI_Errhandler_c2f(eh);
    set_ierr(ierr, rc);
}

// ---- synchronization ----

FRMA_FORTRAN(mpi_win_fence, MPI_WIN_FENCE, (MPI_Fint * assert_, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_fence(*assert_, W(win)));
}
FRMA_FORTRAN(mpi_win_post, MPI_WIN_POST, (MPI_Fint * group, MPI_Fint* assert_, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_post(G(group), *assert_, W(win)));
}
FRMA_FORTRAN(mpi_win_start, MPI_WIN_START, (MPI_Fint * group, MPI_Fint* assert_, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_start(G(group), *assert_, W(win)));
}
FRMA_FORTRAN(mpi_win_complete, MPI_WIN_COMPLETE, (MPI_Fint * win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_complete(W(win)));
}
FRMA_FORTRAN(mpi_win_wait, MPI_WIN_WAIT, (MPI_Fint * win, MPI_Fint* ierr)) { set_ierr(ierr, FRMA_Win_wait(W(win))); }
FRMA_FORTRAN(mpi_win_test, MPI_WIN_TEST, (MPI_Fint * win, MPI_Fint* flag, MPI_Fint* ierr)) {
    int f = 0;
    int rc = FRMA_Win_test(W(win), &f);
    if (rc == MPI_SUCCESS) *flag = f ? kTrue : kFalse;
    set_ierr(ierr, rc);
}
FRMA_FORTRAN(mpi_win_lock, MPI_WIN_LOCK,
             (MPI_Fint * lock_type, MPI_Fint* rank, MPI_Fint* assert_, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_lock(*lock_type, *rank, *assert_, W(win)));
}
FRMA_FORTRAN(mpi_win_unlock, MPI_WIN_UNLOCK, (MPI_Fint * rank, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_unlock(*rank, W(win)));
}
FRMA_FORTRAN(mpi_win_lock_all, MPI_WIN_LOCK_ALL, (MPI_Fint * assert_, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_lock_all(*assert_, W(win)));
}
FRMA_FORTRAN(mpi_win_unlock_all, MPI_WIN_UNLOCK_ALL, (MPI_Fint * win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_unlock_all(W(win)));
}
FRMA_FORTRAN(mpi_win_flush, MPI_WIN_FLUSH, (MPI_Fint * rank, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_flush(*rank, W(win)));
}
FRMA_FORTRAN(mpi_win_flush_all, MPI_WIN_FLUSH_ALL, (MPI_Fint * win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_flush_all(W(win)));
}
FRMA_FORTRAN(mpi_win_flush_local, MPI_WIN_FLUSH_LOCAL, (MPI_Fint * rank, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_flush_local(*rank, W(win)));
}
FRMA_FORTRAN(mpi_win_flush_local_all, MPI_WIN_FLUSH_LOCAL_ALL, (MPI_Fint * win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Win_flush_local_all(W(win)));
}
FRMA_FORTRAN(mpi_win_sync, MPI_WIN_SYNC, (MPI_Fint * win, MPI_Fint* ierr)) { set_ierr(ierr, FRMA_Win_sync(W(win))); }

// ---- communication ----

FRMA_FORTRAN(mpi_put, MPI_PUT,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* win,
              MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Put(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp,
                            *target_count, T(target_datatype), W(win)));
}

FRMA_FORTRAN(mpi_get, MPI_GET,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* win,
              MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Get(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp,
                            *target_count, T(target_datatype), W(win)));
}

FRMA_FORTRAN(mpi_accumulate, MPI_ACCUMULATE,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* op, MPI_Fint* win,
              MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Accumulate(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp,
                                   *target_count, T(target_datatype), O(op), W(win)));
}

FRMA_FORTRAN(mpi_get_accumulate, MPI_GET_ACCUMULATE,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, char* result_addr,
              MPI_Fint* result_count, MPI_Fint* result_datatype, MPI_Fint* target_rank, MPI_Aint* target_disp,
              MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* op, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Get_accumulate(B(origin_addr), *origin_count, T(origin_datatype), B(result_addr), *result_count,
                                       T(result_datatype), *target_rank, *target_disp, *target_count,
                                       T(target_datatype), O(op), W(win)));
}

FRMA_FORTRAN(mpi_fetch_and_op, MPI_FETCH_AND_OP,
             (char* origin_addr, char* result_addr, MPI_Fint* datatype, MPI_Fint* target_rank, MPI_Aint* target_disp,
              MPI_Fint* op, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr,
             FRMA_Fetch_and_op(B(origin_addr), B(result_addr), T(datatype), *target_rank, *target_disp, O(op), W(win)));
}

FRMA_FORTRAN(mpi_compare_and_swap, MPI_COMPARE_AND_SWAP,
             (char* origin_addr, char* compare_addr, char* result_addr, MPI_Fint* datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* win, MPI_Fint* ierr)) {
    set_ierr(ierr, FRMA_Compare_and_swap(B(origin_addr), B(compare_addr), B(result_addr), T(datatype), *target_rank,
                                         *target_disp, W(win)));
}

FRMA_FORTRAN(mpi_rput, MPI_RPUT,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* win,
              MPI_Fint* request, MPI_Fint* ierr)) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = FRMA_Rput(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp, *target_count,
                       T(target_datatype), W(win), &r);
    if (rc == MPI_SUCCESS) *request = MPI_Request_c2f(r);
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_rget, MPI_RGET,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* win,
              MPI_Fint* request, MPI_Fint* ierr)) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = FRMA_Rget(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp, *target_count,
                       T(target_datatype), W(win), &r);
    if (rc == MPI_SUCCESS) *request = MPI_Request_c2f(r);
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_raccumulate, MPI_RACCUMULATE,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, MPI_Fint* target_rank,
              MPI_Aint* target_disp, MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* op, MPI_Fint* win,
              MPI_Fint* request, MPI_Fint* ierr)) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = FRMA_Raccumulate(B(origin_addr), *origin_count, T(origin_datatype), *target_rank, *target_disp,
                              *target_count, T(target_datatype), O(op), W(win), &r);
    if (rc == MPI_SUCCESS) *request = MPI_Request_c2f(r);
    set_ierr(ierr, rc);
}

FRMA_FORTRAN(mpi_rget_accumulate, MPI_RGET_ACCUMULATE,
             (char* origin_addr, MPI_Fint* origin_count, MPI_Fint* origin_datatype, char* result_addr,
              MPI_Fint* result_count, MPI_Fint* result_datatype, MPI_Fint* target_rank, MPI_Aint* target_disp,
              MPI_Fint* target_count, MPI_Fint* target_datatype, MPI_Fint* op, MPI_Fint* win, MPI_Fint* request,
              MPI_Fint* ierr)) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = FRMA_Rget_accumulate(B(origin_addr), *origin_count, T(origin_datatype), B(result_addr), *result_count,
                                  T(result_datatype), *target_rank, *target_disp, *target_count, T(target_datatype),
                                  O(op), W(win), &r);
    if (rc == MPI_SUCCESS) *request = MPI_Request_c2f(r);
    set_ierr(ierr, rc);
}

}  // extern "C"
