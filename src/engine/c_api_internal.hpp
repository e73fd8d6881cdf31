// c_api_internal.hpp — what the C API's translation units share: the handle behind
// FRMA_Win, the error routing (window handler / communicator handler), and test hooks.
#pragma once

#include <fastrma/fastrma.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace fastrma::detail {
class Window;
class Engine;
}  // namespace fastrma::detail

struct fastrma_window {
    static constexpr std::uint64_t kMagic = 0x66726d6177696e21ull;  // "frmawin!"
    std::uint64_t magic = kMagic;
    std::unique_ptr<fastrma::detail::Window> w;
    MPI_Group group = MPI_GROUP_NULL;  // the window's group, for translating PSCW groups
    std::map<int, void*> attrs;  // user attributes by keyval (meta_mu)
    std::mutex meta_mu;  // attributes, name and info: MPI_THREAD_MULTIPLE callers
    // Held across a whole set / delete of an attribute, its delete callback included, so
    // that two threads changing one keyval's attribute each delete what the other set
    // (never the same value twice, never none). Recursive: a callback may change the
    // window's attributes itself.
    std::recursive_mutex attr_mu;
};

namespace fastrma::detail {

// A live window handle (inline: every call checks it).
inline bool valid(FRMA_Win win) { return win && win->magic == fastrma_window::kMagic && win->w; }
// Route a failure: the window's error handler (fatal: print the message, MPI_Abort).
// Inline for the success every call returns through (one compare).
int win_failure(FRMA_Win win, int rc);
inline int win_error(FRMA_Win win, int rc) { return rc == MPI_SUCCESS ? rc : win_failure(win, rc); }
// A failure without a usable window goes to the communicator's handler.
int comm_error(MPI_Comm comm, int rc);

// Runs the delete callbacks of every user attribute of win (at free).
void delete_all_attributes(FRMA_Win win);
// The value of a user attribute; false if keyval is not a user keyval set on win.
bool user_attribute(FRMA_Win win, int keyval, void** value, int* flag);

// Test hooks: reach the Window and Engine behind the C handles.
Window* window_of(FRMA_Win win);
Engine* current_engine();

}  // namespace fastrma::detail

#define FRMA_CHECK_WIN(win, call)                                                                                      \
    do {                                                                                                               \
        if (!::fastrma::detail::valid(win))                                                                            \
            return ::fastrma::detail::comm_error(                                                                      \
                MPI_COMM_WORLD,                                                                                        \
                ::fastrma::detail::raise(MPI_ERR_WIN, "%s: invalid window handle %p", call, static_cast<void*>(win))); \
    } while (0)
