// c_api_manage.cpp — window management entry points: names, info, user attributes and
// their keyvals. Keyval numbers come from the host MPI (MPI_Win_create_keyval), so they
// never collide with MPI_WIN_BASE and friends; the callbacks and values live here.
#include <fastrma/fastrma.h>

#include <cstring>
#include <map>
#include <mutex>

#include "base/errors.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"

using namespace fastrma::detail;

namespace {

// A keyval lives until it was freed and no attribute holds it any more: MPI lets attributes
// outlive MPI_Win_free_keyval, and their delete callbacks still run when they go. Until
// then the host's keyval number stays allocated, so a new keyval never reuses it (and never
// sees the old attribute as its own).
struct Keyval {
    FRMA_Win_copy_attr_function* copy_fn;
    FRMA_Win_delete_attr_function* delete_fn;
    void* extra;
    bool freed = false;  // FRMA_Win_free_keyval was called
    std::size_t attrs = 0;  // attributes set with it on live windows
};
std::mutex g_kv_mu;
std::map<int, Keyval>& keyvals() {
    static auto* m = new std::map<int, Keyval>;
    return *m;
}

bool predefined(int keyval) {
    return keyval == MPI_WIN_BASE || keyval == MPI_WIN_SIZE || keyval == MPI_WIN_DISP_UNIT ||
           keyval == MPI_WIN_CREATE_FLAVOR || keyval == MPI_WIN_MODEL;
}

// A usable keyval: created here and not freed (g_kv_mu held).
bool live_keyval(int keyval) {
    auto it = keyvals().find(keyval);
    return it != keyvals().end() && !it->second.freed;
}

// Calls the delete callback of (win, keyval) if set; returns its code.
int run_delete(FRMA_Win win, int keyval, void* value) {
    Keyval kv{};
    {
        std::lock_guard lk(g_kv_mu);
        auto it = keyvals().find(keyval);
        if (it == keyvals().end()) return MPI_SUCCESS;
        kv = it->second;
    }
    return kv.delete_fn ? kv.delete_fn(win, keyval, value, kv.extra) : MPI_SUCCESS;
}

// One attribute of keyval is gone; the last one of a freed keyval releases it (and the host's
// number).
void drop_attribute(int keyval) {
    {
        std::lock_guard lk(g_kv_mu);
        auto it = keyvals().find(keyval);
        if (it == keyvals().end()) return;
        if (--it->second.attrs > 0 || !it->second.freed) return;
        keyvals().erase(it);
    }
    PMPI_Win_free_keyval(&keyval);
}

const char* bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace

namespace fastrma::detail {

void delete_all_attributes(FRMA_Win win) {
    std::lock_guard al(win->attr_mu);
    std::map<int, void*> attrs;
    {
        std::lock_guard lk(win->meta_mu);
        attrs.swap(win->attrs);
    }
    for (auto& [k, v] : attrs) {
        run_delete(win, k, v);
        drop_attribute(k);
    }
}

bool user_attribute(FRMA_Win win, int keyval, void** value, int* flag) {
    {
        std::lock_guard lk(g_kv_mu);
        if (!live_keyval(keyval)) return false;
    }
    std::lock_guard lk(win->meta_mu);
    auto it = win->attrs.find(keyval);
    *flag = it != win->attrs.end();
    if (*flag) *value = it->second;
    return true;
}

}  // namespace fastrma::detail

extern "C" {

int FRMA_Win_create_keyval(FRMA_Win_copy_attr_function* copy_fn, FRMA_Win_delete_attr_function* delete_fn,
                           int* win_keyval, void* extra_state) {
    if (!win_keyval)
        return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_ARG, "FRMA_Win_create_keyval: win_keyval is NULL"));
    int rc = PMPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, win_keyval, nullptr);
    if (rc) return comm_error(MPI_COMM_WORLD, raise(rc, "FRMA_Win_create_keyval: the host MPI refused a keyval"));
    std::lock_guard lk(g_kv_mu);
    keyvals()[*win_keyval] = {copy_fn, delete_fn, extra_state};
    return MPI_SUCCESS;
}

int FRMA_Win_free_keyval(int* win_keyval) {
    if (!win_keyval) return comm_error(MPI_COMM_WORLD, raise(MPI_ERR_ARG, "FRMA_Win_free_keyval: win_keyval is NULL"));
    int number = *win_keyval;
    {
        std::lock_guard lk(g_kv_mu);
        auto it = keyvals().find(number);
        if (it == keyvals().end() || it->second.freed)
            return comm_error(
                MPI_COMM_WORLD,
                raise(MPI_ERR_KEYVAL, "FRMA_Win_free_keyval: keyval %d was not created with FRMA_Win_create_keyval",
                      number));
        // Attributes still set with it keep their values and their delete callback until
        // deleted or their window is freed (MPI-3.1 §6.7.2); the last one releases it.
        it->second.freed = true;
        if (it->second.attrs == 0)
            keyvals().erase(it);
        else
            number = MPI_KEYVAL_INVALID;
    }
    if (number != MPI_KEYVAL_INVALID) PMPI_Win_free_keyval(&number);
    *win_keyval = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

int FRMA_Win_set_attr(FRMA_Win win, int keyval, void* attribute_val) {
    FRMA_CHECK_WIN(win, "FRMA_Win_set_attr");
    if (predefined(keyval))
        return win_error(
            win, raise(MPI_ERR_KEYVAL, "FRMA_Win_set_attr: keyval %d is a predefined, read-only attribute", keyval));
    {
        std::lock_guard lk(g_kv_mu);
        if (!live_keyval(keyval))
            return win_error(
                win, raise(MPI_ERR_KEYVAL,
                           "FRMA_Win_set_attr: keyval %d was not created with FRMA_Win_create_keyval (or was freed)",
                           keyval));
    }
    // A value already set is deleted first (its callback runs outside every lock of ours
    // but attr_mu: it may call back into the window).
    std::lock_guard al(win->attr_mu);
    bool had = false;
    void* old = nullptr;
    {
        std::lock_guard lk(win->meta_mu);
        auto it = win->attrs.find(keyval);
        if ((had = it != win->attrs.end())) old = it->second;
    }
    if (had)
        if (int rc = run_delete(win, keyval, old))
            return win_error(win, raise(rc, "FRMA_Win_set_attr: the delete callback of keyval %d failed", keyval));
    bool added;
    {
        std::lock_guard lk(win->meta_mu);
        added = win->attrs.insert_or_assign(keyval, attribute_val).second;
    }
    if (added) {
        std::lock_guard lk(g_kv_mu);
        ++keyvals()[keyval].attrs;
    }
    return MPI_SUCCESS;
}

int FRMA_Win_delete_attr(FRMA_Win win, int keyval) {
    FRMA_CHECK_WIN(win, "FRMA_Win_delete_attr");
    std::lock_guard al(win->attr_mu);
    void* v = nullptr;
    {
        std::lock_guard lk(win->meta_mu);
        auto it = win->attrs.find(keyval);
        if (it == win->attrs.end())
            return win_error(win,
                             raise(MPI_ERR_KEYVAL, "FRMA_Win_delete_attr: no attribute is set for keyval %d", keyval));
        v = it->second;
    }
    if (int rc = run_delete(win, keyval, v))
        return win_error(win, raise(rc, "FRMA_Win_delete_attr: the delete callback of keyval %d failed", keyval));
    bool erased;
    {
        std::lock_guard lk(win->meta_mu);
        erased = win->attrs.erase(keyval) != 0;
    }
    if (erased) drop_attribute(keyval);
    return MPI_SUCCESS;
}

int FRMA_Win_set_name(FRMA_Win win, const char* win_name) {
    FRMA_CHECK_WIN(win, "FRMA_Win_set_name");
    if (!win_name) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_set_name: win_name is NULL"));
    std::lock_guard lk(win->meta_mu);
    win->w->name.assign(win_name, strnlen(win_name, MPI_MAX_OBJECT_NAME - 1));
    return MPI_SUCCESS;
}

int FRMA_Win_get_name(FRMA_Win win, char* win_name, int* resultlen) {
    FRMA_CHECK_WIN(win, "FRMA_Win_get_name");
    if (!win_name || !resultlen) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_get_name: NULL argument"));
    std::lock_guard lk(win->meta_mu);
    const std::string& n = win->w->name;
    std::memcpy(win_name, n.c_str(), n.size() + 1);
    *resultlen = int(n.size());
    return MPI_SUCCESS;
}

int FRMA_Win_set_info(FRMA_Win win, MPI_Info info) {
    FRMA_CHECK_WIN(win, "FRMA_Win_set_info");
    // Hints may change during a window's life except the layout chosen at creation.
    std::lock_guard lk(win->meta_mu);
    Window::Info i = win->w->info;
    if (info != MPI_INFO_NULL) {
        char buf[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        PMPI_Info_get(info, "accumulate_ordering", MPI_MAX_INFO_VAL, buf, &flag);
        if (flag) i.accumulate_ordering = buf;
        PMPI_Info_get(info, "accumulate_ops", MPI_MAX_INFO_VAL, buf, &flag);
        if (flag) i.accumulate_ops = buf;
        PMPI_Info_get(info, "no_locks", MPI_MAX_INFO_VAL, buf, &flag);
        if (flag) i.no_locks = std::strcmp(buf, "true") == 0;
    }
    win->w->info = i;
    win->w->info_changed();
    return MPI_SUCCESS;
}

int FRMA_Win_get_info(FRMA_Win win, MPI_Info* info_used) {
    FRMA_CHECK_WIN(win, "FRMA_Win_get_info");
    if (!info_used) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_get_info: info_used is NULL"));
    std::lock_guard lk(win->meta_mu);
    const Window::Info& i = win->w->info;
    PMPI_Info_create(info_used);
    PMPI_Info_set(*info_used, "no_locks", bool_str(i.no_locks));
    PMPI_Info_set(*info_used, "accumulate_ordering", i.accumulate_ordering.c_str());
    PMPI_Info_set(*info_used, "accumulate_ops", i.accumulate_ops.c_str());
    PMPI_Info_set(*info_used, "same_size", bool_str(i.same_size));
    PMPI_Info_set(*info_used, "same_disp_unit", bool_str(i.same_disp_unit));
    PMPI_Info_set(*info_used, "alloc_shared_noncontig", bool_str(i.alloc_shared_noncontig));
    PMPI_Info_set(*info_used, "fastrma_transport", win->w->transport_name());
    return MPI_SUCCESS;
}

}  // extern "C"
