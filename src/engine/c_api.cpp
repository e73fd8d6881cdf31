// c_api.cpp — the FRMA_ C entry points (include/fastrma/fastrma.h).
//
// Each entry point validates its handle, calls into the Window, and routes a failure
// through the window's error handler (MPI_ERRORS_ARE_FATAL by default, MPI_ERRORS_RETURN
// honored, user handlers called with the window). The process-wide engine is created at
// the first call after MPI_Init and destroyed inside MPI_Finalize by the delete callback
// of an attribute on MPI_COMM_SELF (MPI-3.1 §8.7.1 guarantees those run first).
#include <fastrma/fastrma.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "engine/bootstrap_mpi.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/engine.hpp"
#include "engine/window.hpp"
#include "progress/host_progress.hpp"
#include "transport/shm/arena.hpp"

using namespace fastrma::detail;

namespace {

std::mutex g_mu;
std::atomic<Engine*> g_engine{nullptr};
int g_keyval = MPI_KEYVAL_INVALID;
// Window error handlers made by FRMA_Win_create_errhandler, with their references: the
// handle the application holds until FRMA_Errhandler_free, and each window using it. The
// host's handle is freed with the last one (MPI-3.1 §8.3.4), so it is never reused while a
// window may still call the function.
struct Handler {
    FRMA_Win_errhandler_function* fn;
    int refs;
};
std::map<MPI_Errhandler, Handler> g_handlers;  // under g_mu

// Drops one reference of a user handler (g_mu held); true: the caller frees the host's handle.
bool unref_handler_locked(MPI_Errhandler eh) {
    auto it = g_handlers.find(eh);
    if (it == g_handlers.end() || --it->second.refs > 0) return false;
    g_handlers.erase(it);
    return true;
}
void unref_handler(MPI_Errhandler eh) {
    bool last;
    {
        std::lock_guard lk(g_mu);
        last = unref_handler_locked(eh);
    }
    if (last) PMPI_Errhandler_free(&eh);
}

// This process's position among its node's ranks, and their number, as launchers export
// them (Open MPI, MPICH's hydra, PMI); 0 and 1 when none does.
int from_env(std::initializer_list<const char*> names, int dflt) {
    for (const char* v : names)
        if (const char* s = std::getenv(v)) return std::atoi(s);
    return dflt;
}
int local_index_from_env() { return from_env({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0); }
int local_size_from_env() { return from_env({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}, 1); }

int finalize_locked();

int on_self_delete(MPI_Comm, int, void*, void*) {
    std::lock_guard lk(g_mu);
    finalize_locked();
    return MPI_SUCCESS;
}

int init_locked() {
    if (g_engine.load()) return MPI_SUCCESS;
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (!init || fin)
        return raise(MPI_ERR_OTHER, "fastrma needs an initialised MPI (call MPI_Init first; not after MPI_Finalize)");
    g_engine.store(new Engine(Config::from_env(), local_index_from_env(), local_size_from_env()));
    if (g_keyval == MPI_KEYVAL_INVALID) {
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_self_delete, &g_keyval, nullptr);
        PMPI_Comm_set_attr(MPI_COMM_SELF, g_keyval, nullptr);
    }
    return MPI_SUCCESS;
}

int finalize_locked() {
    Engine* e = g_engine.exchange(nullptr);
    if (!e) return MPI_SUCCESS;
    if (e->live_windows().load() > 0) {
        // Windows the application never freed still point at the engine: stop its thread
        // (drained) but keep the memory, rather than leave them dangling.
        std::fprintf(stderr, "fastrma: %d window(s) not freed before finalize\n", e->live_windows().load());
        e->progress().stop();
        return MPI_SUCCESS;
    }
    delete e;
    return MPI_SUCCESS;
}

Engine* engine(int* rc) {
    if (Engine* e = g_engine.load(std::memory_order_acquire)) return e;
    std::lock_guard lk(g_mu);
    *rc = init_locked();
    return g_engine.load();
}

// Info keys MPI defines for windows; unknown keys are ignored, as MPI allows.
void parse_info(MPI_Info info, Window::Info* out) {
    if (info == MPI_INFO_NULL) return;
    auto get = [&](const char* key, std::string* v) {
        char buf[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, buf, &flag);
        if (flag) *v = buf;
        return flag != 0;
    };
    std::string v;
    if (get("no_locks", &v)) out->no_locks = v == "true";
    if (get("accumulate_ordering", &v)) out->accumulate_ordering = v;
    if (get("accumulate_ops", &v)) out->accumulate_ops = v;
    if (get("same_size", &v)) out->same_size = v == "true";
    if (get("same_disp_unit", &v)) out->same_disp_unit = v == "true";
    if (get("alloc_shared_noncontig", &v)) out->alloc_shared_noncontig = v == "true";
}

// Over am a target's requests are served by its progress thread or by the host MPI's
// progress hook; with neither (FASTRMA_PROGRESS=0 and FASTRMA_HOST_PROGRESS=0, or a host
// without the hook: MPICH) a process serves only inside its own fastrma calls, which is
// enough for fence and PSCW (they serve while they wait) but not for passive target: an
// origin would wait for ever for a target sitting in a host MPI call. Such a window is
// refused unless its info says no_locks=true (active target only). Collective over comm;
// every process returns the same verdict.
int check_am_served(const char* call, MPI_Comm comm, Engine& e, const Window& w) {
    if (std::strcmp(w.transport_name(), "am") != 0) return MPI_SUCCESS;  // (agreed: the same everywhere)
    const bool served =
        e.progress().running() || (e.config().host_progress && std::strcmp(host_progress_kind(), "opal_progress") == 0);
    const int mine = !served && !w.info.no_locks;
    int n = 0, me = 0;
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_rank(comm, &me);
    std::vector<int> all(static_cast<std::size_t>(n));
    if (PMPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm) != MPI_SUCCESS)
        return raise(MPI_ERR_INTERN, "%s: the group's exchange of its am servers failed", call);
    int bad = mine ? me : -1;
    for (int r = 0; r < n && bad < 0; ++r)
        if (all[std::size_t(r)]) bad = r;
    if (bad < 0) return MPI_SUCCESS;
    return raise(MPI_ERR_UNSUPPORTED_OPERATION,
                 "%s: nothing would serve passive-target requests to rank %d%s over the am transport (no progress "
                 "thread and no host progress hook: FASTRMA_PROGRESS=0 and FASTRMA_HOST_PROGRESS=0, or a host MPI "
                 "without the hook); run the progress thread or the hook there, or create the window with info "
                 "no_locks=true (active target only: fence and PSCW serve while they wait)",
                 call, bad, bad == me ? " (this process)" : "");
}

int create_window(const char* call, MPI_Comm comm, MPI_Info info, FRMA_Win* win,
                  const std::function<int(Engine&, std::unique_ptr<Bootstrap>, std::unique_ptr<Window>*)>& make) {
    if (!win) return comm_error(comm, raise(MPI_ERR_ARG, "%s: win is NULL", call));
    *win = FRMA_WIN_NULL;
    int rc = MPI_SUCCESS;
    Engine* e = engine(&rc);
    if (!e) return comm_error(comm, rc);
    if (comm == MPI_COMM_NULL) return comm_error(comm, raise(MPI_ERR_COMM, "%s: comm is MPI_COMM_NULL", call));
    // Windows live on intracommunicators (MPI-3.1 §11.2): every member's part is in one group.
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return comm_error(comm, raise(MPI_ERR_COMM, "%s: comm is not a valid communicator", call));
    if (inter)
        return comm_error(
            comm, raise(MPI_ERR_COMM, "%s: comm is an intercommunicator; windows need an intracommunicator", call));
    auto bs = std::make_unique<MpiBootstrap>(comm);
    if (bs->error()) return comm_error(comm, raise(MPI_ERR_COMM, "%s: cannot duplicate the communicator", call));
    MPI_Group group = MPI_GROUP_NULL;
    PMPI_Comm_group(bs->comm(), &group);
    std::unique_ptr<Window> w;
    rc = make(*e, std::move(bs), &w);
    if (rc) {
        PMPI_Group_free(&group);
        return comm_error(comm, rc);
    }
    const bool noncontig = w->info.alloc_shared_noncontig;
    parse_info(info, &w->info);
    w->info.alloc_shared_noncontig = noncontig;  // what was done, not what was asked
    w->info_changed();
    if (int err = check_am_served(call, comm, *e, *w)) {
        const std::string msg = last_error_message();
        w->free_collective();
        w.reset();
        PMPI_Group_free(&group);
        raise(err, "%s", msg.c_str() + std::min(msg.size(), msg.find(": ") + 2));  // (not the free's message)
        return comm_error(comm, err);
    }
    auto* h = new fastrma_window;
    h->w = std::move(w);
    h->group = group;
    *win = h;
    return MPI_SUCCESS;
}

bool info_flag(MPI_Info info, const char* key) {
    Window::Info i;
    parse_info(info, &i);
    return std::string(key) == "alloc_shared_noncontig" && i.alloc_shared_noncontig;
}

}  // namespace

namespace fastrma::detail {

static bool is_fatal(MPI_Errhandler eh) { return eh == MPI_ERRORS_ARE_FATAL; }

// An error without a usable window: MPI routes it to the communicator's handler.
int comm_error(MPI_Comm comm, int rc) {
    if (rc == MPI_SUCCESS) return rc;
    if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
    MPI_Errhandler eh = MPI_ERRORS_ARE_FATAL;
    PMPI_Comm_get_errhandler(comm, &eh);
    bool fatal = is_fatal(eh);
    if (eh != MPI_ERRORS_ARE_FATAL && eh != MPI_ERRORS_RETURN) PMPI_Errhandler_free(&eh);
    if (fatal) {
        int r = -1;
        PMPI_Comm_rank(MPI_COMM_WORLD, &r);
        std::fprintf(stderr, "fastrma: rank %d: %s\n", r, last_error_message().c_str());
        std::fflush(stderr);
        PMPI_Abort(comm, rc);
    }
    if (eh != MPI_ERRORS_RETURN) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

int win_failure(FRMA_Win win, int rc) {
    MPI_Errhandler eh = win->w->errhandler;
    if (eh == MPI_ERRORS_RETURN) return rc;
    if (is_fatal(eh)) {
        std::fprintf(stderr, "fastrma: rank %d: %s\n", win->w->rank(), last_error_message().c_str());
        std::fflush(stderr);
        PMPI_Abort(MPI_COMM_WORLD, rc);
        return rc;
    }
    FRMA_Win_errhandler_function* fn = nullptr;
    {
        std::lock_guard lk(g_mu);
        auto it = g_handlers.find(eh);
        if (it != g_handlers.end()) fn = it->second.fn;
    }
    if (fn) {
        FRMA_Win h = win;
        int code = rc;
        fn(&h, &code);
    }
    return rc;
}

}  // namespace fastrma::detail

extern "C" {

int FRMA_Init(void) {
    std::lock_guard lk(g_mu);
    return comm_error(MPI_COMM_WORLD, init_locked());
}

int FRMA_Finalize(void) {
    std::lock_guard lk(g_mu);
    return finalize_locked();
}

int FRMA_Initialized(int* flag) {
    if (!flag) return MPI_ERR_ARG;
    *flag = g_engine.load() != nullptr;
    return MPI_SUCCESS;
}

const char* FRMA_Last_error_message(void) { return last_error_message().c_str(); }

int FRMA_Last_error_class(void) { return last_error_class(); }

int FRMA_Print_stats(void) {
    if (Engine* e = g_engine.load()) std::fprintf(stderr, "%s", e->stats_report().c_str());
    return MPI_SUCCESS;
}

int FRMA_Alloc_mem(MPI_Aint size, MPI_Info, void* baseptr) {
    if (!baseptr) return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_ARG, "FRMA_Alloc_mem: baseptr is NULL"));
    if (size < 0)
        return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_SIZE, "FRMA_Alloc_mem: size %ld is negative", long(size)));
    int rc = MPI_SUCCESS;
    void* p = arena_alloc(std::size_t(size), &rc);
    if (!p) return comm_error(MPI_COMM_WORLD, rc);
    *static_cast<void**>(baseptr) = p;
    return MPI_SUCCESS;
}

int FRMA_Free_mem(void* base) {
    if (!base) return MPI_SUCCESS;
    return comm_error(MPI_COMM_WORLD, arena_free(base));
}

int FRMA_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, FRMA_Win* win) {
    if (!baseptr) return comm_error(comm, raise(MPI_ERR_ARG, "FRMA_Win_allocate: baseptr is NULL"));
    return create_window("FRMA_Win_allocate", comm, info, win, [&](Engine& e, auto bs, auto* w) {
        return Window::allocate(e, std::move(bs), size, disp_unit, static_cast<void**>(baseptr), w);
    });
}

int FRMA_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, FRMA_Win* win) {
    if (!baseptr) return comm_error(comm, raise(MPI_ERR_ARG, "FRMA_Win_allocate_shared: baseptr is NULL"));
    const bool noncontig = info_flag(info, "alloc_shared_noncontig");
    return create_window("FRMA_Win_allocate_shared", comm, info, win, [&](Engine& e, auto bs, auto* w) {
        return Window::allocate_shared(e, std::move(bs), size, disp_unit, noncontig, static_cast<void**>(baseptr), w);
    });
}

int FRMA_Win_create_dynamic(MPI_Info info, MPI_Comm comm, FRMA_Win* win) {
    return create_window("FRMA_Win_create_dynamic", comm, info, win,
                         [&](Engine& e, auto bs, auto* w) { return Window::create_dynamic(e, std::move(bs), w); });
}

int FRMA_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, FRMA_Win* win) {
    return create_window("FRMA_Win_create", comm, info, win, [&](Engine& e, auto bs, auto* w) {
        return Window::create(e, std::move(bs), base, size, disp_unit, w);
    });
}

int FRMA_Win_free(FRMA_Win* win) {
    if (!win) return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_ARG, "FRMA_Win_free: win is NULL"));
    FRMA_CHECK_WIN(*win, "FRMA_Win_free");
    if (int rc = (*win)->w->free_collective()) return win_error(*win, rc);
    delete_all_attributes(*win);
    unref_handler((*win)->w->errhandler);
    if ((*win)->group != MPI_GROUP_NULL) PMPI_Group_free(&(*win)->group);
    (*win)->magic = 0;
    (*win)->w.reset();
    delete *win;
    *win = FRMA_WIN_NULL;
    return MPI_SUCCESS;
}

int FRMA_Win_get_attr(FRMA_Win win, int keyval, void* attribute_val, int* flag) {
    FRMA_CHECK_WIN(win, "FRMA_Win_get_attr");
    if (!attribute_val || !flag) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_get_attr: NULL argument"));
    Window& w = *win->w;
    void** out = static_cast<void**>(attribute_val);
    *flag = 1;
    if (keyval == MPI_WIN_BASE)
        *out = w.base();
    else if (keyval == MPI_WIN_SIZE)
        *out = &w.attr_size_;
    else if (keyval == MPI_WIN_DISP_UNIT)
        *out = &w.attr_disp_unit_;
    else if (keyval == MPI_WIN_CREATE_FLAVOR)
        *out = &w.attr_flavor_;
    else if (keyval == MPI_WIN_MODEL)
        *out = &w.attr_model_;
    else if (!user_attribute(win, keyval, out, flag))
        return win_error(
            win,
            raise(MPI_ERR_KEYVAL, "FRMA_Win_get_attr: keyval %d was not created with FRMA_Win_create_keyval", keyval));
    return MPI_SUCCESS;
}

int FRMA_Win_get_group(FRMA_Win win, MPI_Group* group) {
    FRMA_CHECK_WIN(win, "FRMA_Win_get_group");
    if (!group) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_get_group: group is NULL"));
    auto* bs = dynamic_cast<MpiBootstrap*>(&win->w->bootstrap());
    if (!bs) return win_error(win, raise(MPI_ERR_WIN, "FRMA_Win_get_group: window has no MPI group"));
    return win_error(win, PMPI_Comm_group(bs->comm(), group));
}

int FRMA_Win_lock(int lock_type, int rank, int assert_, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_lock");
    return win_error(win, win->w->lock(lock_type, rank, assert_));
}
int FRMA_Win_unlock(int rank, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_unlock");
    return win_error(win, win->w->unlock(rank));
}
int FRMA_Win_lock_all(int assert_, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_lock_all");
    return win_error(win, win->w->lock_all(assert_));
}
int FRMA_Win_unlock_all(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_unlock_all");
    return win_error(win, win->w->unlock_all());
}
int FRMA_Win_flush(int rank, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_flush");
    if (int rc = win->w->fast_flush(rank); rc != Window::kSlowPath) return rc ? win_error(win, rc) : rc;
    return win_error(win, win->w->flush(rank, false));
}
int FRMA_Win_flush_all(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_flush_all");
    if (int rc = win->w->fast_flush_all(); rc != Window::kSlowPath) return rc ? win_error(win, rc) : rc;
    return win_error(win, win->w->flush_all(false));
}
int FRMA_Win_flush_local(int rank, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_flush_local");
    if (int rc = win->w->fast_flush(rank); rc != Window::kSlowPath) return rc ? win_error(win, rc) : rc;
    return win_error(win, win->w->flush(rank, true));
}
int FRMA_Win_flush_local_all(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_flush_local_all");
    if (int rc = win->w->fast_flush_all(); rc != Window::kSlowPath) return rc ? win_error(win, rc) : rc;
    return win_error(win, win->w->flush_all(true));
}
int FRMA_Win_sync(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_sync");
    return win_error(win, win->w->sync());
}

int FRMA_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Put");
    if (int rc = win->w->fast_put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                                  target_datatype);
        rc != Window::kSlowPath)
        return rc;
    return win_error(win, win->w->post(OpRequest::make(RmaKind::put, "FRMA_Put", origin_addr, origin_count,
                                                       origin_datatype, nullptr, 0, MPI_DATATYPE_NULL, target_rank,
                                                       target_disp, target_count, target_datatype)));
}

int FRMA_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
             int target_count, MPI_Datatype target_datatype, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Get");
    if (int rc = win->w->fast_get(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                                  target_datatype);
        rc != Window::kSlowPath)
        return rc;
    return win_error(win, win->w->post(OpRequest::make(RmaKind::get, "FRMA_Get", origin_addr, origin_count,
                                                       origin_datatype, nullptr, 0, MPI_DATATYPE_NULL, target_rank,
                                                       target_disp, target_count, target_datatype)));
}

int FRMA_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Accumulate");
    if (int rc = win->w->fast_accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                                         target_count, target_datatype, op);
        rc != Window::kSlowPath)
        return rc;
    return win_error(win, win->w->post(OpRequest::make(RmaKind::acc, "FRMA_Accumulate", origin_addr, origin_count,
                                                       origin_datatype, nullptr, 0, MPI_DATATYPE_NULL, target_rank,
                                                       target_disp, target_count, target_datatype, op)));
}

int FRMA_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                        int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                        int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Get_accumulate");
    if (int rc =
            win->w->fast_get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count,
                                        result_datatype, target_rank, target_disp, target_count, target_datatype, op);
        rc != Window::kSlowPath)
        return rc;
    return win_error(
        win, win->w->post(OpRequest::make(RmaKind::get_acc, "FRMA_Get_accumulate", origin_addr, origin_count,
                                          origin_datatype, result_addr, result_count, result_datatype, target_rank,
                                          target_disp, target_count, target_datatype, op)));
}

int FRMA_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                      MPI_Aint target_disp, MPI_Op op, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Fetch_and_op");
    if (int rc = win->w->fast_fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp, op);
        rc != Window::kSlowPath)
        return rc;
    return win_error(
        win, win->w->post(OpRequest::make(RmaKind::fop, "FRMA_Fetch_and_op", origin_addr, 1, datatype, result_addr, 1,
                                          datatype, target_rank, target_disp, 1, datatype, op)));
}

int FRMA_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr, MPI_Datatype datatype,
                          int target_rank, MPI_Aint target_disp, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Compare_and_swap");
    if (int rc =
            win->w->fast_compare_and_swap(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp);
        rc != Window::kSlowPath)
        return rc;
    return win_error(win, win->w->post(OpRequest::make(RmaKind::cas, "FRMA_Compare_and_swap", origin_addr, 1, datatype,
                                                       result_addr, 1, datatype, target_rank, target_disp, 1, datatype,
                                                       MPI_OP_NULL, compare_addr)));
}

namespace {
void placeholder_handler(MPI_Win*, int*, ...) {}
}  // namespace

int FRMA_Win_create_errhandler(FRMA_Win_errhandler_function* fn, MPI_Errhandler* errhandler) {
    if (!fn || !errhandler)
        return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_ARG, "FRMA_Win_create_errhandler: NULL argument"));
    // A real host handle, so that the application holds an ordinary MPI_Errhandler; the
    // function it stands for is kept here.
    int rc = PMPI_Win_create_errhandler(placeholder_handler, errhandler);
    if (rc) return comm_error(MPI_COMM_WORLD, raise(rc, "FRMA_Win_create_errhandler: the host MPI refused"));
    std::lock_guard lk(g_mu);
    g_handlers[*errhandler] = Handler{fn, 1};
    return MPI_SUCCESS;
}

int FRMA_Errhandler_free(MPI_Errhandler* errhandler) {
    if (!errhandler) return MPI_ERR_ARG;
    bool ours, last = false;
    {
        std::lock_guard lk(g_mu);
        ours = g_handlers.count(*errhandler) != 0;
        if (ours) last = unref_handler_locked(*errhandler);
    }
    if (!ours || last) return PMPI_Errhandler_free(errhandler);
    *errhandler = MPI_ERRHANDLER_NULL;  // windows still use it: freed with the last one
    return MPI_SUCCESS;
}

int FRMA_Win_set_errhandler(FRMA_Win win, MPI_Errhandler errhandler) {
    FRMA_CHECK_WIN(win, "FRMA_Win_set_errhandler");
    MPI_Errhandler old;
    {
        std::lock_guard lk(g_mu);
        if (errhandler != MPI_ERRORS_ARE_FATAL && errhandler != MPI_ERRORS_RETURN) {
            auto it = g_handlers.find(errhandler);
            if (it == g_handlers.end()) {
                raise(
                    MPI_ERR_ARG,
                    "FRMA_Win_set_errhandler: not a window error handler (create it with FRMA_Win_create_errhandler)");
                return MPI_ERR_ARG;
            }
            ++it->second.refs;  // the window's reference
        }
        old = win->w->errhandler;
        win->w->errhandler = errhandler;
    }
    unref_handler(old);  // (predefined handlers are not counted)
    return MPI_SUCCESS;
}

int FRMA_Win_get_errhandler(FRMA_Win win, MPI_Errhandler* errhandler) {
    FRMA_CHECK_WIN(win, "FRMA_Win_get_errhandler");
    if (!errhandler) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_get_errhandler: NULL"));
    *errhandler = win->w->errhandler;
    return MPI_SUCCESS;
}

int FRMA_Win_call_errhandler(FRMA_Win win, int errorcode) {
    FRMA_CHECK_WIN(win, "FRMA_Win_call_errhandler");
    raise(errorcode, "FRMA_Win_call_errhandler: raised by the application");
    win_error(win, errorcode);
    return MPI_SUCCESS;
}

}  // extern "C"

namespace fastrma::detail {
Window* window_of(FRMA_Win win) { return valid(win) ? win->w.get() : nullptr; }
Engine* current_engine() { return g_engine.load(); }
}  // namespace fastrma::detail
