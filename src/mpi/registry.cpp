// registry.cpp — the drop-in layer's own state: Fortran window handles, references of
// window error handlers, keyval callback wrappers, the thread level the application asked
// for. See dropin.hpp for the handle scheme.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mpi/dropin.hpp"

namespace fastrma::dropin {

// ---------------------------------------------------------------------------------------
// Fortran window handles: index -> FRMA_Win in fixed chunks that never move, so that the
// hot path (every Fortran RMA call) reads one atomic without a lock.
namespace {

constexpr int kChunkBits = 10;
constexpr int kChunk = 1 << kChunkBits;
constexpr int kMaxChunks = 1 << 14;  // 16 M live Fortran handles

struct WinTable {
    std::array<std::atomic<std::atomic<FRMA_Win>*>, kMaxChunks> chunks{};
    std::mutex mu;  // the rest
    std::unordered_map<FRMA_Win, MPI_Fint> index;  // window -> handle
    std::vector<MPI_Fint> free_list;
    MPI_Fint next = 1;  // 0 is MPI_WIN_NULL

    std::atomic<FRMA_Win>* slot(MPI_Fint f) {
        auto* c = chunks[std::size_t(f >> kChunkBits)].load(std::memory_order_acquire);
        return c ? &c[f & (kChunk - 1)] : nullptr;
    }
};

WinTable& table() {
    static auto* t = new WinTable;  // never destroyed: callbacks may run during exit
    return *t;
}

}  // namespace

namespace {
// Table index <-> handle: the index itself (Open MPI) or the tagged integer (MPICH).
namespace abi = fastrma::detail::host_abi;
MPI_Fint handle_of_index(MPI_Fint f) {
    return abi::kIntegerWinHandles ? static_cast<MPI_Fint>(abi::kWinHandleTag | std::uint32_t(f)) : f;
}
// The index behind a handle, or 0 (no window) for anything else.
MPI_Fint index_of_handle(MPI_Fint h) {
    if (!abi::kIntegerWinHandles) return h;
    auto u = static_cast<std::uint32_t>(h);
    return (u & ~abi::kWinHandleIndexMask) == abi::kWinHandleTag ? MPI_Fint(u & abi::kWinHandleIndexMask) : 0;
}
}  // namespace

MPI_Fint win_c2f(FRMA_Win w) {
    if (w == FRMA_WIN_NULL) return abi::fortran_win_null();
    WinTable& t = table();
    std::lock_guard lk(t.mu);
    if (auto it = t.index.find(w); it != t.index.end()) return handle_of_index(it->second);
    MPI_Fint f;
    if (!t.free_list.empty()) {
        f = t.free_list.back();
        t.free_list.pop_back();
    } else {
        if (t.next >= kChunk * kMaxChunks) return abi::fortran_win_null();  // absurd; the window reads as null
        f = t.next++;
        auto& c = t.chunks[std::size_t(f >> kChunkBits)];
        if (!c.load(std::memory_order_relaxed)) c.store(new std::atomic<FRMA_Win>[kChunk](), std::memory_order_release);
    }
    t.slot(f)->store(w, std::memory_order_release);
    t.index.emplace(w, f);
    return handle_of_index(f);
}

FRMA_Win win_f2c(MPI_Fint h) {
    MPI_Fint f = index_of_handle(h);
    if (f <= 0 || f >= kChunk * kMaxChunks) return FRMA_WIN_NULL;
    auto* s = table().slot(f);
    return s ? s->load(std::memory_order_acquire) : FRMA_WIN_NULL;
}

void win_forget(FRMA_Win w) {
    WinTable& t = table();
    std::lock_guard lk(t.mu);
    auto it = t.index.find(w);
    if (it == t.index.end()) return;
    t.slot(it->second)->store(FRMA_WIN_NULL, std::memory_order_release);
    t.free_list.push_back(it->second);
    t.index.erase(it);
}

// ---------------------------------------------------------------------------------------
// Window error handlers. This layer remembers which user handler each window has (fastrma's
// own record answers MPI_Win_get_errhandler, but asking it about a window being freed, or an
// invalid one, would raise a second error), and counts the references of each user handler.
namespace {

struct Handler {
    int refs;
    FortranWinErrhandler* fortran_fn;
    MPI_Win_errhandler_function* c_fn;
};
struct Handlers {
    std::mutex mu;
    std::map<MPI_Errhandler, Handler> user;  // from MPI_Win_create_errhandler
    std::map<MPI_Errhandler, int> predefined_gets;  // MPI_ERRORS_* handed out by get
    std::unordered_map<FRMA_Win, MPI_Errhandler> of_window;  // windows with a user handler
};
Handlers& handlers() {
    static auto* h = new Handlers;
    return *h;
}

// Under the mutex: drop one reference of a user handler; true if it was the last one.
bool release_locked(Handlers& h, MPI_Errhandler eh) {
    auto it = h.user.find(eh);
    if (it == h.user.end()) return false;
    if (--it->second.refs > 0) return false;
    h.user.erase(it);
    return true;
}

void release(MPI_Errhandler eh) {
    bool last;
    {
        Handlers& h = handlers();
        std::lock_guard lk(h.mu);
        last = release_locked(h, eh);
    }
    if (last) FRMA_Errhandler_free(&eh);  // the host handle goes with the last reference
}

}  // namespace

void errhandler_created(MPI_Errhandler eh, FortranWinErrhandler* fortran_fn, MPI_Win_errhandler_function* c_fn) {
    Handlers& h = handlers();
    std::lock_guard lk(h.mu);
    h.user[eh] = Handler{1, fortran_fn, c_fn};
}

MPI_Win_errhandler_function* window_c_errhandler(FRMA_Win w) {
    Handlers& h = handlers();
    std::lock_guard lk(h.mu);
    auto wit = h.of_window.find(w);
    if (wit == h.of_window.end()) return nullptr;
    auto it = h.user.find(wit->second);
    return it == h.user.end() ? nullptr : it->second.c_fn;
}

FortranWinErrhandler* window_fortran_errhandler(FRMA_Win w) {
    Handlers& h = handlers();
    std::lock_guard lk(h.mu);
    auto wit = h.of_window.find(w);
    if (wit == h.of_window.end()) return nullptr;
    auto it = h.user.find(wit->second);
    return it == h.user.end() ? nullptr : it->second.fortran_fn;
}

bool errhandler_free(MPI_Errhandler* eh) {
    Handlers& h = handlers();
    bool last = false;
    {
        std::lock_guard lk(h.mu);
        if (h.user.count(*eh)) {
            last = release_locked(h, *eh);
        } else if (auto it = h.predefined_gets.find(*eh); it != h.predefined_gets.end() && it->second > 0) {
            --it->second;  // the reference MPI_Win_get_errhandler handed out
        } else {
            return false;  // the host's alone
        }
    }
    if (last) {
        MPI_Errhandler copy = *eh;
        FRMA_Errhandler_free(&copy);
    }
    *eh = MPI_ERRHANDLER_NULL;
    return true;
}

int set_errhandler(FRMA_Win w, MPI_Errhandler eh) {
    int rc = FRMA_Win_set_errhandler(w, eh);  // validates the window and the handler
    if (rc != MPI_SUCCESS) return rc;
    MPI_Errhandler old = MPI_ERRHANDLER_NULL;
    {
        Handlers& h = handlers();
        std::lock_guard lk(h.mu);
        if (auto it = h.of_window.find(w); it != h.of_window.end()) {
            old = it->second;
            h.of_window.erase(it);
        }
        if (auto it = h.user.find(eh); it != h.user.end()) {
            ++it->second.refs;
            h.of_window[w] = eh;
        }
    }
    if (old != MPI_ERRHANDLER_NULL) release(old);
    return MPI_SUCCESS;
}

int get_errhandler(FRMA_Win w, MPI_Errhandler* eh) {
    int rc = FRMA_Win_get_errhandler(w, eh);
    if (rc != MPI_SUCCESS) return rc;
    Handlers& h = handlers();
    std::lock_guard lk(h.mu);
    if (auto it = h.user.find(*eh); it != h.user.end())
        ++it->second.refs;
    else
        ++h.predefined_gets[*eh];
    return MPI_SUCCESS;
}

namespace {
std::atomic<long> g_live_windows{0};  // created through this layer and not yet freed
}

void window_created(FRMA_Win) { g_live_windows.fetch_add(1, std::memory_order_relaxed); }

void window_freed(FRMA_Win w) {
    g_live_windows.fetch_sub(1, std::memory_order_relaxed);
    win_forget(w);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    {
        Handlers& h = handlers();
        std::lock_guard lk(h.mu);
        if (auto it = h.of_window.find(w); it != h.of_window.end()) {
            eh = it->second;
            h.of_window.erase(it);
        }
    }
    if (eh != MPI_ERRHANDLER_NULL) release(eh);
}

// ---------------------------------------------------------------------------------------
// Keyvals: fastrma calls its callbacks with an FRMA_Win; the application's take an MPI_Win
// (C) or an INTEGER handle (Fortran). One record per keyval is the extra_state fastrma
// passes back to the wrappers.
namespace {

struct KeyvalRecord {
    bool fortran = false;
    MPI_Win_copy_attr_function* c_copy = nullptr;
    MPI_Win_delete_attr_function* c_delete = nullptr;
    void* c_extra = nullptr;
    FortranWinCopyAttr* f_copy = nullptr;
    FortranWinDeleteAttr* f_delete = nullptr;
    MPI_Aint f_extra = 0;
};
struct Keyvals {
    std::mutex mu;
    std::map<int, std::unique_ptr<KeyvalRecord>> records;
};
Keyvals& keyvals() {
    static auto* k = new Keyvals;
    return *k;
}

// fastrma never copies windows, so this only runs if a future fastrma does.
int copy_wrapper(FRMA_Win oldwin, int keyval, void* extra, void* in, void* out, int* flag) {
    auto* r = static_cast<KeyvalRecord*>(extra);
    if (!r->fortran) {
        if (!r->c_copy) {
            *flag = 0;
            return MPI_SUCCESS;
        }
        return r->c_copy(to_mpi(oldwin), keyval, r->c_extra, in, out, flag);
    }
    if (!r->f_copy) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    MPI_Fint fwin = win_c2f(oldwin), fkey = keyval, fflag = 0, ierr = MPI_SUCCESS;
    MPI_Aint fextra = r->f_extra, vin = reinterpret_cast<MPI_Aint>(in), vout = 0;
    r->f_copy(&fwin, &fkey, &fextra, &vin, &vout, &fflag, &ierr);
    *flag = fflag != 0;
    if (*flag) *static_cast<void**>(out) = reinterpret_cast<void*>(vout);
    return ierr;
}

int delete_wrapper(FRMA_Win win, int keyval, void* value, void* extra) {
    auto* r = static_cast<KeyvalRecord*>(extra);
    if (!r->fortran) return r->c_delete ? r->c_delete(to_mpi(win), keyval, value, r->c_extra) : MPI_SUCCESS;
    if (!r->f_delete) return MPI_SUCCESS;
    MPI_Fint fwin = win_c2f(win), fkey = keyval, ierr = MPI_SUCCESS;
    MPI_Aint fval = reinterpret_cast<MPI_Aint>(value), fextra = r->f_extra;
    r->f_delete(&fwin, &fkey, &fval, &fextra, &ierr);
    return ierr;
}

int create_keyval(std::unique_ptr<KeyvalRecord> r, int* keyval) {
    int rc = FRMA_Win_create_keyval(copy_wrapper, delete_wrapper, keyval, r.get());
    if (rc != MPI_SUCCESS) return rc;
    Keyvals& k = keyvals();
    std::lock_guard lk(k.mu);
    k.records[*keyval] = std::move(r);
    return MPI_SUCCESS;
}

}  // namespace

int create_keyval_c(MPI_Win_copy_attr_function* copy_fn, MPI_Win_delete_attr_function* delete_fn, int* keyval,
                    void* extra_state) {
    auto r = std::make_unique<KeyvalRecord>();
    r->c_copy = copy_fn;
    r->c_delete = delete_fn;
    r->c_extra = extra_state;
    return create_keyval(std::move(r), keyval);
}

int create_keyval_fortran(FortranWinCopyAttr* copy_fn, FortranWinDeleteAttr* delete_fn, int* keyval,
                          MPI_Aint extra_state) {
    auto r = std::make_unique<KeyvalRecord>();
    r->fortran = true;
    r->f_copy = copy_fn;
    r->f_delete = delete_fn;
    r->f_extra = extra_state;
    return create_keyval(std::move(r), keyval);
}

int free_keyval(int* keyval) {
    // The record stays: attributes set with the keyval outlive it, and their delete
    // callbacks (the wrappers, which get the record as extra state) still run when they go.
    // fastrma keeps the host's number until then, so the number comes back only after
    // that, and create_keyval then replaces the record.
    return FRMA_Win_free_keyval(keyval);
}

// ---------------------------------------------------------------------------------------
// Initialisation and teardown.
namespace {
std::atomic<int> g_app_level{-1};  // -1: MPI was not initialised through this layer
}

int init_thread(int* argc, char*** argv, int required, int* provided) {
    int host = MPI_THREAD_SINGLE;
    int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &host);
    if (rc != MPI_SUCCESS) return rc;
    const int level = std::min(required, host);
    g_app_level.store(level);
    if (provided) *provided = level;
    return MPI_SUCCESS;
}

int query_thread(int* provided) {
    const int level = g_app_level.load();
    if (level < 0) return PMPI_Query_thread(provided);
    int init = 0;
    PMPI_Initialized(&init);
    if (!init || !provided) return PMPI_Query_thread(provided);  // the host's error
    *provided = level;
    return MPI_SUCCESS;
}

int finalize() {
    // The engine first, while the host is fully alive: fastrma's own MPI_COMM_SELF hook,
    // which runs inside PMPI_Finalize, then finds nothing left to do. If windows are still
    // alive, the application may free them in its own MPI_COMM_SELF delete callbacks (MPI
    // allows it); those run inside PMPI_Finalize too, before fastrma's hook if they were set
    // after the engine started (reverse order of setting), so the hook does the teardown.
    if (g_live_windows.load() == 0) FRMA_Finalize();
    return PMPI_Finalize();
}

int error_string(int errorcode, char* string, int* resultlen) {
    if (errorcode == MPI_SUCCESS || errorcode != FRMA_Last_error_class() || !string || !resultlen)
        return PMPI_Error_string(errorcode, string, resultlen);
    const char* msg = FRMA_Last_error_message();
    const std::size_t n = std::min<std::size_t>(std::strlen(msg), MPI_MAX_ERROR_STRING - 1);
    std::memcpy(string, msg, n);
    string[n] = '\0';
    *resultlen = int(n);
    return MPI_SUCCESS;
}

}  // namespace fastrma::dropin
