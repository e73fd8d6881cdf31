// c_api_epochs.cpp — the active-target entry points (fence, post/start/complete/wait/
// test), shared and dynamic window access, and request-based operations.
//
// Requests are generalized requests of the host MPI, so MPI_Wait/Test/Waitall complete
// them. The request is handed out as soon as its operation is posted; its Completion marks
// it complete (MPI_Grequest_complete) when the operation is complete at the origin — at
// once when it completed at post (shared memory), else from the progress thread or from
// the host MPI's progress loop (the host-progress hook) running inside the caller's own
// MPI_Wait/Test. Where neither polls, or the host MPI is not at MPI_THREAD_MULTIPLE (the
// completion would call MPI from another thread), the operation completes before the
// request is handed out. The error the operation met is the status's MPI_ERROR.
#include <fastrma/fastrma.h>

#include <numeric>
#include <vector>

#include "base/errors.hpp"
#include "engine/c_api_internal.hpp"
#include "engine/window.hpp"

using namespace fastrma::detail;

namespace {

int to_window_ranks(FRMA_Win win, MPI_Group group, const char* call, std::vector<int>* out) {
    if (group == MPI_GROUP_NULL) return raise(MPI_ERR_GROUP, "%s: group is MPI_GROUP_NULL", call);
    int n = 0;
    PMPI_Group_size(group, &n);
    std::vector<int> in(static_cast<std::size_t>(n));
    std::iota(in.begin(), in.end(), 0);
    out->assign(static_cast<std::size_t>(n), MPI_UNDEFINED);
    if (n && PMPI_Group_translate_ranks(group, n, in.data(), win->group, out->data()) != MPI_SUCCESS)
        return raise(MPI_ERR_GROUP, "%s: cannot translate the group to the window's group", call);
    for (int i = 0; i < n; ++i)
        if ((*out)[std::size_t(i)] == MPI_UNDEFINED)
            return raise(MPI_ERR_GROUP, "%s: member %d of the group is not in the window's group", call, i);
    return MPI_SUCCESS;
}

// The state of one request: its handle, and the error its operation met.
class RequestCompletion final : public Completion {
public:
    MPI_Request rq = MPI_REQUEST_NULL;
    int err = MPI_SUCCESS;
    void signal(int e) override {
        err = e;
        PMPI_Grequest_complete(rq);
    }
    bool any_thread() const override {
        static const bool multiple = [] {
            int level = MPI_THREAD_SINGLE;
            PMPI_Query_thread(&level);
            return level == MPI_THREAD_MULTIPLE;
        }();
        return multiple;
    }
};

int query_fn(void* state, MPI_Status* status) {
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = static_cast<RequestCompletion*>(state)->err;
    return static_cast<RequestCompletion*>(state)->err;
}
int free_fn(void* state) {
    delete static_cast<RequestCompletion*>(state);
    return MPI_SUCCESS;
}
int cancel_fn(void*, int) { return MPI_SUCCESS; }

// Starts the request, posts op with it, hands it out.
int post_request(FRMA_Win win, const OpRequest& op, MPI_Request* request) {
    auto* c = new RequestCompletion;
    if (int e = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, c, &c->rq)) {
        delete c;
        *request = MPI_REQUEST_NULL;
        return win_error(win, raise(e, "%s: the host MPI refused a generalized request", op.call));
    }
    *request = c->rq;  // before the post: a completion on another thread may come first
    if (int rc = win->w->post(op, c)) {
        MPI_Request rq = c->rq;
        PMPI_Grequest_complete(rq);
        PMPI_Request_free(&rq);  // frees c
        *request = MPI_REQUEST_NULL;
        return win_error(win, rc);
    }
    return MPI_SUCCESS;
}

#define FRMA_CHECK_REQUEST(win, request, call)                                                  \
    do {                                                                                        \
        FRMA_CHECK_WIN(win, call);                                                              \
        if (!(request)) return win_error(win, raise(MPI_ERR_ARG, "%s: request is NULL", call)); \
    } while (0)

}  // namespace

extern "C" {

int FRMA_Win_fence(int assert_, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_fence");
    return win_error(win, win->w->fence(assert_));
}

int FRMA_Win_post(MPI_Group group, int assert_, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_post");
    std::vector<int> ranks;
    if (int rc = to_window_ranks(win, group, "FRMA_Win_post", &ranks)) return win_error(win, rc);
    return win_error(win, win->w->expose(ranks, assert_));
}

int FRMA_Win_start(MPI_Group group, int assert_, FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_start");
    std::vector<int> ranks;
    if (int rc = to_window_ranks(win, group, "FRMA_Win_start", &ranks)) return win_error(win, rc);
    return win_error(win, win->w->start(ranks, assert_));
}

int FRMA_Win_complete(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_complete");
    return win_error(win, win->w->complete());
}

int FRMA_Win_wait(FRMA_Win win) {
    FRMA_CHECK_WIN(win, "FRMA_Win_wait");
    return win_error(win, win->w->wait_exposure());
}

int FRMA_Win_test(FRMA_Win win, int* flag) {
    FRMA_CHECK_WIN(win, "FRMA_Win_test");
    if (!flag) return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_test: flag is NULL"));
    bool done = false;
    int rc = win->w->test_exposure(&done);
    *flag = done;
    return win_error(win, rc);
}

int FRMA_Win_shared_query(FRMA_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr) {
    FRMA_CHECK_WIN(win, "FRMA_Win_shared_query");
    if (!size || !disp_unit || !baseptr)
        return win_error(win, raise(MPI_ERR_ARG, "FRMA_Win_shared_query: NULL argument"));
    return win_error(win, win->w->shared_query(rank, size, disp_unit, static_cast<void**>(baseptr)));
}

int FRMA_Win_attach(FRMA_Win win, void* base, MPI_Aint size) {
    FRMA_CHECK_WIN(win, "FRMA_Win_attach");
    return win_error(win, win->w->attach(base, size));
}

int FRMA_Win_detach(FRMA_Win win, const void* base) {
    FRMA_CHECK_WIN(win, "FRMA_Win_detach");
    return win_error(win, win->w->detach(base));
}

int FRMA_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
              MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, FRMA_Win win,
              MPI_Request* request) {
    FRMA_CHECK_REQUEST(win, request, "FRMA_Rput");
    return post_request(win,
                        OpRequest::make(RmaKind::put, "FRMA_Rput", origin_addr, origin_count, origin_datatype, nullptr,
                                        0, MPI_DATATYPE_NULL, target_rank, target_disp, target_count, target_datatype),
                        request);
}

int FRMA_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
              int target_count, MPI_Datatype target_datatype, FRMA_Win win, MPI_Request* request) {
    FRMA_CHECK_REQUEST(win, request, "FRMA_Rget");
    return post_request(win,
                        OpRequest::make(RmaKind::get, "FRMA_Rget", origin_addr, origin_count, origin_datatype, nullptr,
                                        0, MPI_DATATYPE_NULL, target_rank, target_disp, target_count, target_datatype),
                        request);
}

int FRMA_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                     MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win,
                     MPI_Request* request) {
    FRMA_CHECK_REQUEST(win, request, "FRMA_Raccumulate");
    return post_request(
        win,
        OpRequest::make(RmaKind::acc, "FRMA_Raccumulate", origin_addr, origin_count, origin_datatype, nullptr, 0,
                        MPI_DATATYPE_NULL, target_rank, target_disp, target_count, target_datatype, op),
        request);
}

int FRMA_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                         int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                         int target_count, MPI_Datatype target_datatype, MPI_Op op, FRMA_Win win,
                         MPI_Request* request) {
    FRMA_CHECK_REQUEST(win, request, "FRMA_Rget_accumulate");
    return post_request(win,
                        OpRequest::make(RmaKind::get_acc, "FRMA_Rget_accumulate", origin_addr, origin_count,
                                        origin_datatype, result_addr, result_count, result_datatype, target_rank,
                                        target_disp, target_count, target_datatype, op),
                        request);
}

}  // extern "C"
