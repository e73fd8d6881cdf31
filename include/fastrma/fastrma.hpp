// fastrma.hpp — the C++20 API of fastrma: typed windows, RAII epochs, exceptions.
//
// A header-only layer over the C API (fastrma.h); it adds no state of its own beyond the
// handles it owns. docs/cxx_api.md has the tour and a complete example.
//
// Invariants the layer keeps:
//  - Every Window<T> is created with disp_unit = sizeof(T), so an index is a displacement
//    (dynamic windows excepted: there the displacement is an address, see remote_address).
//  - Every Window<T> gets MPI_ERRORS_RETURN at creation, and every failed call throws
//    fastrma::Error carrying the MPI error class and the engine's message. Errors raised
//    while a window is being created go to the communicator's error handler first, as in
//    MPI (MPI_COMM_WORLD's default aborts); when it returns, Error is thrown.
//  - Destructors never throw. A destructor that has to end something (unlock, complete,
//    wait, free) and fails prints the message and calls MPI_Abort, like
//    MPI_ERRORS_ARE_FATAL. Call the explicit member (unlock(), free(), ...) to get an
//    exception instead.
//  - Window<T>'s destructor calls FRMA_Win_free, which is collective: every rank of the
//    window must reach it (or call free()). Epoch objects must die before their window.
//  - Origin and result buffers are the caller's: fastrma copies nothing, so a span passed
//    to put/get/accumulate must stay alive and untouched until the operation completes
//    (Completion::wait(), a flush, the end of the epoch, or Request::wait()).
#ifndef FASTRMA_FASTRMA_HPP
#define FASTRMA_FASTRMA_HPP

#include <fastrma/fastrma.h>
#include <mpi.h>

#include <climits>
#include <complex>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fastrma {

// ---- errors ------------------------------------------------------------------------------

// A failed fastrma (or MPI) call: the MPI error class and a message naming the call.
class Error : public std::runtime_error {
public:
    Error(int error_class, const std::string& message) : std::runtime_error(message), class_(error_class) {}
    int error_class() const noexcept { return class_; }

private:
    int class_;
};

// The message of the last error fastrma raised on this thread ("" if none).
inline std::string last_error_message() { return FRMA_Last_error_message(); }

namespace detail {

inline std::string mpi_error_string(int code) {
    char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(buf, std::size_t(len));
}

// The engine's per-thread message starts with (the error class and) "FRMA_Xxx: ". When it
// does not name `call`, it is older than the error at hand, and the MPI error string is
// used instead.
inline std::string message_for(int rc, const char* call) {
    std::string msg = FRMA_Last_error_message();
    if (msg.find(std::string(call) + ": ") == std::string::npos) msg = std::string(call) + ": " + mpi_error_string(rc);
    return msg;
}

// A FRMA_ call returned rc (an error class).
[[noreturn]] inline void throw_frma(int rc, const char* call) { throw Error(rc, message_for(rc, call)); }

inline void check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) [[unlikely]]
        throw_frma(rc, call);
}

// A host MPI call returned rc (an error code, not necessarily a class).
inline void check_mpi(int rc, const char* call) {
    if (rc == MPI_SUCCESS) [[likely]]
        return;
    int cls = rc;
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = MPI_ERR_OTHER;
    throw Error(cls, std::string(call) + ": " + mpi_error_string(rc));
}

inline bool mpi_finalized() noexcept {
    int fin = 0;
    MPI_Finalized(&fin);
    return fin != 0;
}

// What a destructor does with a failure: what MPI_ERRORS_ARE_FATAL would do.
inline void fatal_in_destructor(int rc, const char* call) noexcept {
    if (rc == MPI_SUCCESS) [[likely]]
        return;
    const bool finalized = mpi_finalized();
    int rank = -1;
    if (!finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const std::string msg =
        finalized ? std::string(call) + ": error class " + std::to_string(rc) : message_for(rc, call);
    std::fprintf(stderr, "fastrma: rank %d: in a destructor: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    if (!finalized) MPI_Abort(MPI_COMM_WORLD, rc);
    std::abort();
}

inline int to_count(std::size_t n, const char* call) {
    if (n > std::size_t(INT_MAX))
        throw Error(MPI_ERR_COUNT,
                    std::string(call) + ": " + std::to_string(n) + " elements do not fit MPI's int count");
    return int(n);
}

}  // namespace detail

// ---- engine --------------------------------------------------------------------------------

// Optional: the engine starts at the first window. init() starts it now (after MPI_Init);
// finalize() stops it (every window freed); otherwise MPI_Finalize does.
inline void init() { detail::check(FRMA_Init(), "FRMA_Init"); }
inline void finalize() { detail::check(FRMA_Finalize(), "FRMA_Finalize"); }
inline bool initialized() {
    int flag = 0;
    detail::check(FRMA_Initialized(&flag), "FRMA_Initialized");
    return flag != 0;
}
// The engine's statistics counters, to stderr.
inline void print_stats() { detail::check(FRMA_Print_stats(), "FRMA_Print_stats"); }

// ---- datatypes -------------------------------------------------------------------------------

// The element of a MAXLOC / MINLOC pair, laid out like MPI_DOUBLE_INT and friends.
template <class V>
struct value_index {
    V value;
    int index;
    friend bool operator==(const value_index&, const value_index&) = default;
};

// datatype_of<T>::get() is the MPI datatype of one T. For a struct of your own, specialize
// it to return a committed datatype whose extent is sizeof(T) (derived datatypes: see
// docs/datatypes.md; accumulates need every element to be of one predefined type).
template <class T>
struct datatype_of {};

#define FASTRMA_DATATYPE(T, handle)                           \
    template <>                                               \
    struct datatype_of<T> {                                   \
        static MPI_Datatype get() noexcept { return handle; } \
    }
// Integers by their C name (std::int32_t is int, std::int64_t is long, ... on LP64).
FASTRMA_DATATYPE(char, MPI_CHAR);  // a C integer for accumulates (docs/accumulate.md); int8_t is signed char
FASTRMA_DATATYPE(signed char, MPI_SIGNED_CHAR);
FASTRMA_DATATYPE(unsigned char, MPI_UNSIGNED_CHAR);
FASTRMA_DATATYPE(short, MPI_SHORT);
FASTRMA_DATATYPE(unsigned short, MPI_UNSIGNED_SHORT);
FASTRMA_DATATYPE(int, MPI_INT);
FASTRMA_DATATYPE(unsigned, MPI_UNSIGNED);
FASTRMA_DATATYPE(long, MPI_LONG);
FASTRMA_DATATYPE(unsigned long, MPI_UNSIGNED_LONG);
FASTRMA_DATATYPE(long long, MPI_LONG_LONG);
FASTRMA_DATATYPE(unsigned long long, MPI_UNSIGNED_LONG_LONG);
FASTRMA_DATATYPE(wchar_t, MPI_WCHAR);
FASTRMA_DATATYPE(bool, MPI_CXX_BOOL);
FASTRMA_DATATYPE(float, MPI_FLOAT);
FASTRMA_DATATYPE(double, MPI_DOUBLE);
FASTRMA_DATATYPE(long double, MPI_LONG_DOUBLE);
FASTRMA_DATATYPE(std::complex<float>, MPI_CXX_FLOAT_COMPLEX);
FASTRMA_DATATYPE(std::complex<double>, MPI_CXX_DOUBLE_COMPLEX);
FASTRMA_DATATYPE(std::complex<long double>, MPI_CXX_LONG_DOUBLE_COMPLEX);
FASTRMA_DATATYPE(std::byte, MPI_BYTE);
FASTRMA_DATATYPE(value_index<float>, MPI_FLOAT_INT);
FASTRMA_DATATYPE(value_index<double>, MPI_DOUBLE_INT);
FASTRMA_DATATYPE(value_index<long double>, MPI_LONG_DOUBLE_INT);
FASTRMA_DATATYPE(value_index<long>, MPI_LONG_INT);
FASTRMA_DATATYPE(value_index<int>, MPI_2INT);
FASTRMA_DATATYPE(value_index<short>, MPI_SHORT_INT);
#undef FASTRMA_DATATYPE

// A type a window can hold: it has an MPI datatype (datatype_of) and is copied as bytes.
template <class T>
concept Element = std::is_same_v<T, std::remove_cv_t<T>> && std::is_trivially_copyable_v<T> && requires {
    { datatype_of<T>::get() } -> std::same_as<MPI_Datatype>;
};

template <Element T>
MPI_Datatype mpi_type() noexcept {
    return datatype_of<T>::get();
}

template <Element T>
class Window;

// ---- ops, lock types, assertions ---------------------------------------------------------

enum class op { sum, prod, min, max, land, lor, lxor, band, bor, bxor, maxloc, minloc, replace, no_op };

inline MPI_Op to_mpi(op o) noexcept {
    switch (o) {
    case op::sum:
        return MPI_SUM;
    case op::prod:
        return MPI_PROD;
    case op::min:
        return MPI_MIN;
    case op::max:
        return MPI_MAX;
    case op::land:
        return MPI_LAND;
    case op::lor:
        return MPI_LOR;
    case op::lxor:
        return MPI_LXOR;
    case op::band:
        return MPI_BAND;
    case op::bor:
        return MPI_BOR;
    case op::bxor:
        return MPI_BXOR;
    case op::maxloc:
        return MPI_MAXLOC;
    case op::minloc:
        return MPI_MINLOC;
    case op::replace:
        return MPI_REPLACE;
    case op::no_op:
        return MPI_NO_OP;
    }
    return MPI_OP_NULL;
}

enum class lock_type { exclusive, shared };
inline constexpr lock_type exclusive = lock_type::exclusive;
inline constexpr lock_type shared = lock_type::shared;

// Assertions (MPI_MODE_*), combined with |.
enum class mode : int {
    none = 0,
    nocheck = MPI_MODE_NOCHECK,
    nostore = MPI_MODE_NOSTORE,
    noput = MPI_MODE_NOPUT,
    noprecede = MPI_MODE_NOPRECEDE,
    nosucceed = MPI_MODE_NOSUCCEED,
};
constexpr mode operator|(mode a, mode b) noexcept { return mode(int(a) | int(b)); }
inline constexpr mode nocheck = mode::nocheck;

// ---- MPI handles the API hands out -----------------------------------------------------

// An owned MPI_Group (freed on destruction). Converts to MPI_Group where one is expected.
class Group {
public:
    Group() noexcept = default;
    explicit Group(MPI_Group g) noexcept : g_(g) {}  // takes ownership
    // The members of comm with these ranks (in comm), in this order.
    static Group of(MPI_Comm comm, std::span<const int> ranks) {
        MPI_Group all = MPI_GROUP_NULL;
        detail::check_mpi(MPI_Comm_group(comm, &all), "MPI_Comm_group");
        Group whole(all);
        return whole.incl(ranks);
    }
    Group(Group&& o) noexcept : g_(std::exchange(o.g_, MPI_GROUP_NULL)) {}
    Group& operator=(Group&& o) noexcept {
        if (this != &o) {
            reset();
            g_ = std::exchange(o.g_, MPI_GROUP_NULL);
        }
        return *this;
    }
    ~Group() { reset(); }

    Group incl(std::span<const int> ranks) const {
        MPI_Group g = MPI_GROUP_NULL;
        detail::check_mpi(MPI_Group_incl(g_, detail::to_count(ranks.size(), "MPI_Group_incl"), ranks.data(), &g),
                          "MPI_Group_incl");
        return Group(g);
    }
    int size() const {
        int n = 0;
        detail::check_mpi(MPI_Group_size(g_, &n), "MPI_Group_size");
        return n;
    }
    MPI_Group get() const noexcept { return g_; }
    operator MPI_Group() const noexcept { return g_; }
    MPI_Group release() noexcept { return std::exchange(g_, MPI_GROUP_NULL); }

private:
    void reset() noexcept {
        if (g_ != MPI_GROUP_NULL && g_ != MPI_GROUP_EMPTY && !detail::mpi_finalized()) MPI_Group_free(&g_);
        g_ = MPI_GROUP_NULL;
    }
    MPI_Group g_ = MPI_GROUP_NULL;
};

// An owned MPI_Info (freed on destruction).
class Info {
public:
    Info() { detail::check_mpi(MPI_Info_create(&i_), "MPI_Info_create"); }
    explicit Info(MPI_Info i) noexcept : i_(i) {}  // takes ownership
    Info(Info&& o) noexcept : i_(std::exchange(o.i_, MPI_INFO_NULL)) {}
    Info& operator=(Info&& o) noexcept {
        if (this != &o) {
            reset();
            i_ = std::exchange(o.i_, MPI_INFO_NULL);
        }
        return *this;
    }
    ~Info() { reset(); }

    Info& set(const std::string& key, const std::string& value) {
        detail::check_mpi(MPI_Info_set(i_, key.c_str(), value.c_str()), "MPI_Info_set");
        return *this;
    }
    std::optional<std::string> get(const std::string& key) const {
        int len = 0, flag = 0;
        detail::check_mpi(MPI_Info_get_valuelen(i_, key.c_str(), &len, &flag), "MPI_Info_get_valuelen");
        if (!flag) return std::nullopt;
        std::string v(std::size_t(len) + 1, '\0');
        detail::check_mpi(MPI_Info_get(i_, key.c_str(), len + 1, v.data(), &flag), "MPI_Info_get");
        v.resize(std::size_t(len));
        return v;
    }
    MPI_Info get() const noexcept { return i_; }
    operator MPI_Info() const noexcept { return i_; }
    MPI_Info release() noexcept { return std::exchange(i_, MPI_INFO_NULL); }

private:
    void reset() noexcept {
        if (i_ != MPI_INFO_NULL && !detail::mpi_finalized()) MPI_Info_free(&i_);
        i_ = MPI_INFO_NULL;
    }
    MPI_Info i_ = MPI_INFO_NULL;
};

// A window error handler made from a function (FRMA_Win_create_errhandler), freed on
// destruction. Window<T> throws after the handler returns.
class Errhandler {
public:
    explicit Errhandler(FRMA_Win_errhandler_function* fn) {
        detail::check(FRMA_Win_create_errhandler(fn, &h_), "FRMA_Win_create_errhandler");
    }
    Errhandler(Errhandler&& o) noexcept : h_(std::exchange(o.h_, MPI_ERRHANDLER_NULL)) {}
    Errhandler& operator=(Errhandler&& o) noexcept {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, MPI_ERRHANDLER_NULL);
        }
        return *this;
    }
    ~Errhandler() { reset(); }
    MPI_Errhandler get() const noexcept { return h_; }
    operator MPI_Errhandler() const noexcept { return h_; }

private:
    void reset() noexcept {
        if (h_ != MPI_ERRHANDLER_NULL && !detail::mpi_finalized()) FRMA_Errhandler_free(&h_);
        h_ = MPI_ERRHANDLER_NULL;
    }
    MPI_Errhandler h_ = MPI_ERRHANDLER_NULL;
};

// A window attribute key (FRMA_Win_create_keyval), freed on destruction. The delete
// function runs when an attribute with this key is deleted or its window freed.
class Keyval {
public:
    explicit Keyval(FRMA_Win_delete_attr_function* on_delete = nullptr, void* extra_state = nullptr) {
        detail::check(FRMA_Win_create_keyval(nullptr, on_delete, &k_, extra_state), "FRMA_Win_create_keyval");
    }
    Keyval(Keyval&& o) noexcept : k_(std::exchange(o.k_, MPI_KEYVAL_INVALID)) {}
    Keyval& operator=(Keyval&& o) noexcept {
        if (this != &o) {
            reset();
            k_ = std::exchange(o.k_, MPI_KEYVAL_INVALID);
        }
        return *this;
    }
    ~Keyval() { reset(); }
    int get() const noexcept { return k_; }
    operator int() const noexcept { return k_; }

private:
    void reset() noexcept {
        if (k_ != MPI_KEYVAL_INVALID && !detail::mpi_finalized()) FRMA_Win_free_keyval(&k_);
        k_ = MPI_KEYVAL_INVALID;
    }
    int k_ = MPI_KEYVAL_INVALID;
};

// ---- completion ------------------------------------------------------------------------------

// What put/get/accumulate return: a way to complete the operation on its target (and every
// other operation this process issued to that target in the same epoch). Only valid
// inside the passive-target epoch the operation was issued in; under fence or PSCW,
// operations complete at the next fence / complete() instead.
class Completion {
public:
    Completion(FRMA_Win win, int rank) noexcept : win_(win), rank_(rank) {}
    // Local completion (FRMA_Win_flush_local): the origin buffer may be reused, a get's
    // data has arrived.
    void wait() const { detail::check(FRMA_Win_flush_local(rank_, win_), "FRMA_Win_flush_local"); }
    // Remote completion too (FRMA_Win_flush): the target's memory holds the result.
    void flush() const { detail::check(FRMA_Win_flush(rank_, win_), "FRMA_Win_flush"); }
    int rank() const noexcept { return rank_; }

private:
    FRMA_Win win_;
    int rank_;
};

// An owned MPI_Request of a request-based operation (rput, rget, ...). The destructor waits
// for it (the buffers are in use until then); release() hands it to MPI_Waitall & co.
class [[nodiscard]] Request {
public:
    Request() noexcept = default;
    explicit Request(MPI_Request r) noexcept : r_(r) {}
    Request(Request&& o) noexcept : r_(std::exchange(o.r_, MPI_REQUEST_NULL)) {}
    Request& operator=(Request&& o) noexcept {
        if (this != &o) {
            finish_in_destructor();
            r_ = std::exchange(o.r_, MPI_REQUEST_NULL);
        }
        return *this;
    }
    ~Request() { finish_in_destructor(); }

    void wait() {
        if (r_ == MPI_REQUEST_NULL) return;
        MPI_Status st;
        detail::check_mpi(MPI_Wait(&r_, &st), "MPI_Wait");
    }
    // True once complete (then the request is gone, like after wait()).
    bool test() {
        if (r_ == MPI_REQUEST_NULL) return true;
        int flag = 0;
        MPI_Status st;
        detail::check_mpi(MPI_Test(&r_, &flag, &st), "MPI_Test");
        return flag != 0;
    }
    bool active() const noexcept { return r_ != MPI_REQUEST_NULL; }
    MPI_Request get() const noexcept { return r_; }
    MPI_Request release() noexcept { return std::exchange(r_, MPI_REQUEST_NULL); }

private:
    void finish_in_destructor() noexcept {
        if (r_ == MPI_REQUEST_NULL || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(MPI_Wait(&r_, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    MPI_Request r_ = MPI_REQUEST_NULL;
};

// MPI_Waitall over Request objects.
inline void wait_all(std::span<Request> reqs) {
    std::vector<MPI_Request> raw;
    raw.reserve(reqs.size());
    for (Request& r : reqs) raw.push_back(r.release());
    detail::check_mpi(MPI_Waitall(detail::to_count(raw.size(), "MPI_Waitall"), raw.data(), MPI_STATUSES_IGNORE),
                      "MPI_Waitall");
}

// ---- epochs ----------------------------------------------------------------------------------
// Each epoch object ends its epoch when it goes out of scope (destructor: fatal on failure),
// or earlier through its explicit member (throws Error; the object is empty afterwards,
// whether it succeeded or not). Movable, not copyable.

namespace detail {
// Move-only holder of the window handle an epoch object ends. (FRMA_Win is a pointer: this
// header writes FRMA_WIN_NULL as nullptr, which -Wold-style-cast users can include.)
class EpochBase {
public:
    EpochBase(const EpochBase&) = delete;
    EpochBase& operator=(const EpochBase&) = delete;
    bool active() const noexcept { return win_ != nullptr; }

protected:
    explicit EpochBase(FRMA_Win w) noexcept : win_(w) {}
    EpochBase(EpochBase&& o) noexcept : win_(std::exchange(o.win_, nullptr)) {}
    FRMA_Win take() noexcept { return std::exchange(win_, nullptr); }
    FRMA_Win win_;
};
}  // namespace detail

// lock(rank): a passive-target epoch on one target.
class [[nodiscard]] LockEpoch : public detail::EpochBase {
public:
    LockEpoch(LockEpoch&& o) noexcept : EpochBase(std::move(o)), rank_(o.rank_) {}
    LockEpoch& operator=(LockEpoch&& o) noexcept {
        if (this != &o) {
            end_in_destructor();
            win_ = o.take();
            rank_ = o.rank_;
        }
        return *this;
    }
    ~LockEpoch() { end_in_destructor(); }

    void flush() const { detail::check(FRMA_Win_flush(rank_, win_), "FRMA_Win_flush"); }
    void flush_local() const { detail::check(FRMA_Win_flush_local(rank_, win_), "FRMA_Win_flush_local"); }
    void unlock() { detail::check(FRMA_Win_unlock(rank_, take()), "FRMA_Win_unlock"); }
    int rank() const noexcept { return rank_; }

private:
    template <Element>
    friend class Window;
    LockEpoch(FRMA_Win w, int rank) noexcept : EpochBase(w), rank_(rank) {}
    void end_in_destructor() noexcept {
        if (win_ == nullptr || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(FRMA_Win_unlock(rank_, take()), "FRMA_Win_unlock");
    }
    int rank_;
};

// lock_all(): a passive-target epoch on every rank of the window.
class [[nodiscard]] LockAllEpoch : public detail::EpochBase {
public:
    LockAllEpoch(LockAllEpoch&&) noexcept = default;
    LockAllEpoch& operator=(LockAllEpoch&& o) noexcept {
        if (this != &o) {
            end_in_destructor();
            win_ = o.take();
        }
        return *this;
    }
    ~LockAllEpoch() { end_in_destructor(); }

    void flush() const { detail::check(FRMA_Win_flush_all(win_), "FRMA_Win_flush_all"); }
    void flush(int rank) const { detail::check(FRMA_Win_flush(rank, win_), "FRMA_Win_flush"); }
    void flush_local() const { detail::check(FRMA_Win_flush_local_all(win_), "FRMA_Win_flush_local_all"); }
    void flush_local(int rank) const { detail::check(FRMA_Win_flush_local(rank, win_), "FRMA_Win_flush_local"); }
    void sync() const { detail::check(FRMA_Win_sync(win_), "FRMA_Win_sync"); }
    void unlock() { detail::check(FRMA_Win_unlock_all(take()), "FRMA_Win_unlock_all"); }

private:
    template <Element>
    friend class Window;
    explicit LockAllEpoch(FRMA_Win w) noexcept : EpochBase(w) {}
    void end_in_destructor() noexcept {
        if (win_ == nullptr || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(FRMA_Win_unlock_all(take()), "FRMA_Win_unlock_all");
    }
};

// start(group): a PSCW access epoch; complete() at scope end.
class [[nodiscard]] AccessEpoch : public detail::EpochBase {
public:
    AccessEpoch(AccessEpoch&&) noexcept = default;
    AccessEpoch& operator=(AccessEpoch&& o) noexcept {
        if (this != &o) {
            end_in_destructor();
            win_ = o.take();
        }
        return *this;
    }
    ~AccessEpoch() { end_in_destructor(); }
    void complete() { detail::check(FRMA_Win_complete(take()), "FRMA_Win_complete"); }

private:
    template <Element>
    friend class Window;
    explicit AccessEpoch(FRMA_Win w) noexcept : EpochBase(w) {}
    void end_in_destructor() noexcept {
        if (win_ == nullptr || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(FRMA_Win_complete(take()), "FRMA_Win_complete");
    }
};

// post(group): a PSCW exposure epoch; wait() at scope end (blocks until every origin in
// the group has called complete()).
class [[nodiscard]] ExposureEpoch : public detail::EpochBase {
public:
    ExposureEpoch(ExposureEpoch&&) noexcept = default;
    ExposureEpoch& operator=(ExposureEpoch&& o) noexcept {
        if (this != &o) {
            end_in_destructor();
            win_ = o.take();
        }
        return *this;
    }
    ~ExposureEpoch() { end_in_destructor(); }
    void wait() { detail::check(FRMA_Win_wait(take()), "FRMA_Win_wait"); }
    // FRMA_Win_test: true when the epoch has ended (then the object is empty).
    bool test() {
        if (win_ == nullptr) return true;
        int flag = 0;
        detail::check(FRMA_Win_test(win_, &flag), "FRMA_Win_test");
        if (flag) win_ = nullptr;
        return flag != 0;
    }

private:
    template <Element>
    friend class Window;
    explicit ExposureEpoch(FRMA_Win w) noexcept : EpochBase(w) {}
    void end_in_destructor() noexcept {
        if (win_ == nullptr || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(FRMA_Win_wait(take()), "FRMA_Win_wait");
    }
};

// ---- displacements -------------------------------------------------------------------------

// An address in a dynamic window (what attach() returns; MPI_Get_address of the memory).
// Send it to the origins; `+ n` moves n elements of T.
template <class T>
struct remote_address {
    MPI_Aint value = 0;
    remote_address operator+(std::ptrdiff_t n) const noexcept { return {MPI_Aint(value + n * MPI_Aint(sizeof(T)))}; }
    friend bool operator==(const remote_address&, const remote_address&) = default;
};

template <class T>
remote_address<T> address_of(const T* p) {
    MPI_Aint a = 0;
    detail::check_mpi(MPI_Get_address(p, &a), "MPI_Get_address");
    return {a};
}

// Where an operation lands in the target's part: an element index (allocate, create and
// shared windows) or a remote_address (dynamic windows). Converts implicitly from both.
template <class T>
class target_disp {
public:
    target_disp(std::size_t index) noexcept : disp_(MPI_Aint(index)), is_address_(false) {}
    target_disp(remote_address<T> a) noexcept : disp_(a.value), is_address_(true) {}
    MPI_Aint disp() const noexcept { return disp_; }
    bool is_address() const noexcept { return is_address_; }

private:
    MPI_Aint disp_;
    bool is_address_;
};

// ---- windows -------------------------------------------------------------------------------

// A window of elements of T, owning its FRMA_Win. Move-only. A handle: const members may be
// called from many threads at once (the engine is MPI_THREAD_MULTIPLE).
//
// The destructor frees the window, and FRMA_Win_free is collective: every rank must destroy
// (or free()) its Window at the same point, with no epoch open. An exception that leaves the
// window's scope on one rank only will make the other ranks wait; catch it inside the scope.
template <Element T>
class Window {
public:
    using value_type = T;

    Window() noexcept = default;

    // FRMA_Win_allocate: count elements per rank, in memory fastrma places (shared with the
    // node's peers, so they use loads/stores and CPU atomics).
    static Window allocate(MPI_Comm comm, std::size_t count, MPI_Info info = MPI_INFO_NULL) {
        Window w;
        T* base = nullptr;
        detail::check(
            FRMA_Win_allocate(bytes_of(count, "FRMA_Win_allocate"), int(sizeof(T)), info, comm, &base, &w.win_),
            "FRMA_Win_allocate");
        w.init(comm, MPI_WIN_FLAVOR_ALLOCATE, base, count);
        return w;
    }
    // FRMA_Win_create: expose memory the caller owns (it must outlive the window).
    static Window create(MPI_Comm comm, std::span<T> memory, MPI_Info info = MPI_INFO_NULL) {
        Window w;
        detail::check(FRMA_Win_create(memory.data(), bytes_of(memory.size(), "FRMA_Win_create"), int(sizeof(T)), info,
                                      comm, &w.win_),
                      "FRMA_Win_create");
        w.init(comm, MPI_WIN_FLAVOR_CREATE, memory.data(), memory.size());
        return w;
    }
    // FRMA_Win_allocate_shared: every rank of comm (one node) can reach every part with
    // loads and stores through shared_query(rank).
    static Window allocate_shared(MPI_Comm comm, std::size_t count, MPI_Info info = MPI_INFO_NULL) {
        Window w;
        T* base = nullptr;
        detail::check(FRMA_Win_allocate_shared(bytes_of(count, "FRMA_Win_allocate_shared"), int(sizeof(T)), info, comm,
                                               &base, &w.win_),
                      "FRMA_Win_allocate_shared");
        w.init(comm, MPI_WIN_FLAVOR_SHARED, base, count);
        return w;
    }
    // FRMA_Win_create_dynamic: no memory until attach(); operations address it with the
    // remote_address attach() returns.
    static Window create_dynamic(MPI_Comm comm, MPI_Info info = MPI_INFO_NULL) {
        Window w;
        detail::check(FRMA_Win_create_dynamic(info, comm, &w.win_), "FRMA_Win_create_dynamic");
        w.init(comm, MPI_WIN_FLAVOR_DYNAMIC, nullptr, 0);
        return w;
    }

    Window(Window&& o) noexcept
        : win_(std::exchange(o.win_, nullptr)),
          base_(std::exchange(o.base_, nullptr)),
          count_(std::exchange(o.count_, 0)),
          rank_(o.rank_),
          size_(o.size_),
          flavor_(o.flavor_) {}
    // Frees the window this one held (collective, fatal on failure) and takes o's.
    Window& operator=(Window&& o) noexcept {
        if (this != &o) {
            free_in_destructor();
            win_ = std::exchange(o.win_, nullptr);
            base_ = std::exchange(o.base_, nullptr);
            count_ = std::exchange(o.count_, 0);
            rank_ = o.rank_;
            size_ = o.size_;
            flavor_ = o.flavor_;
        }
        return *this;
    }
    ~Window() { free_in_destructor(); }

    // FRMA_Win_free (collective). Throws Error and keeps the window if it fails (e.g. an
    // epoch is still open); empty afterwards. Nothing to do on an empty window.
    void free() {
        if (win_ == nullptr) return;
        detail::check(FRMA_Win_free(&win_), "FRMA_Win_free");
        base_ = nullptr;
        count_ = 0;
    }
    // Gives up ownership: the caller frees the handle.
    FRMA_Win release() noexcept {
        base_ = nullptr;
        count_ = 0;
        return std::exchange(win_, nullptr);
    }

    FRMA_Win handle() const noexcept { return win_; }
    explicit operator bool() const noexcept { return win_ != nullptr; }
    int rank() const noexcept { return rank_; }  // in the window's group (= comm's ranks)
    int size() const noexcept { return size_; }
    int flavor() const noexcept { return flavor_; }  // MPI_WIN_FLAVOR_*

    // This rank's part (empty for dynamic windows).
    std::span<T> local() const noexcept { return {base_, count_}; }
    // FRMA_Win_shared_query: rank's part of a shared window, for loads and stores
    // (MPI_PROC_NULL: the first non-empty part).
    std::span<T> shared_query(int rank) const {
        MPI_Aint bytes = 0;
        int disp_unit = 0;
        T* base = nullptr;
        detail::check(FRMA_Win_shared_query(win_, rank, &bytes, &disp_unit, &base), "FRMA_Win_shared_query");
        return {base, std::size_t(bytes) / sizeof(T)};
    }

    // ---- dynamic windows ----
    // FRMA_Win_attach: memory stays the caller's and must outlive the attachment.
    remote_address<T> attach(std::span<T> memory) const {
        detail::check(FRMA_Win_attach(win_, memory.data(), bytes_of(memory.size(), "FRMA_Win_attach")),
                      "FRMA_Win_attach");
        return address_of(memory.data());
    }
    void detach(std::span<T> memory) const { detach(memory.data()); }
    void detach(const T* base) const { detail::check(FRMA_Win_detach(win_, base), "FRMA_Win_detach"); }

    // ---- management ----
    Group group() const {
        MPI_Group g = MPI_GROUP_NULL;
        detail::check(FRMA_Win_get_group(win_, &g), "FRMA_Win_get_group");
        return Group(g);
    }
    void set_name(const std::string& name) const {
        detail::check(FRMA_Win_set_name(win_, name.c_str()), "FRMA_Win_set_name");
    }
    std::string name() const {
        char buf[MPI_MAX_OBJECT_NAME] = {};
        int len = 0;
        detail::check(FRMA_Win_get_name(win_, buf, &len), "FRMA_Win_get_name");
        return std::string(buf, std::size_t(len));
    }
    void set_info(MPI_Info info) const { detail::check(FRMA_Win_set_info(win_, info), "FRMA_Win_set_info"); }
    Info info() const {
        MPI_Info i = MPI_INFO_NULL;
        detail::check(FRMA_Win_get_info(win_, &i), "FRMA_Win_get_info");
        return Info(i);
    }
    // Attributes: the pointer stored under keyval (nullopt when none is set).
    std::optional<void*> get_attr(int keyval) const {
        void* v = nullptr;
        int flag = 0;
        detail::check(FRMA_Win_get_attr(win_, keyval, &v, &flag), "FRMA_Win_get_attr");
        if (!flag) return std::nullopt;
        return v;
    }
    void set_attr(int keyval, void* value) const {
        detail::check(FRMA_Win_set_attr(win_, keyval, value), "FRMA_Win_set_attr");
    }
    void delete_attr(int keyval) const { detail::check(FRMA_Win_delete_attr(win_, keyval), "FRMA_Win_delete_attr"); }
    // The predefined attributes.
    MPI_Aint size_bytes() const { return *static_cast<MPI_Aint*>(predefined(MPI_WIN_SIZE)); }
    int disp_unit() const { return *static_cast<int*>(predefined(MPI_WIN_DISP_UNIT)); }
    int model() const { return *static_cast<int*>(predefined(MPI_WIN_MODEL)); }  // MPI_WIN_UNIFIED

    // Error handlers. Window<T> throws after whichever handler is installed returns; with
    // MPI_ERRORS_ARE_FATAL it never returns.
    void set_errhandler(MPI_Errhandler eh) const {
        detail::check(FRMA_Win_set_errhandler(win_, eh), "FRMA_Win_set_errhandler");
    }
    MPI_Errhandler errhandler() const {
        MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
        detail::check(FRMA_Win_get_errhandler(win_, &eh), "FRMA_Win_get_errhandler");
        return eh;
    }
    // FRMA_Win_call_errhandler: runs the handler; returns normally (no throw).
    void call_errhandler(int error_code) const { FRMA_Win_call_errhandler(win_, error_code); }

    // ---- synchronization ----
    LockEpoch lock(int rank, lock_type type = exclusive, mode assert_ = mode::none) const {
        detail::check(FRMA_Win_lock(type == lock_type::exclusive ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, rank,
                                    int(assert_), win_),
                      "FRMA_Win_lock");
        return LockEpoch(win_, rank);
    }
    LockAllEpoch lock_all(mode assert_ = mode::none) const {
        detail::check(FRMA_Win_lock_all(int(assert_), win_), "FRMA_Win_lock_all");
        return LockAllEpoch(win_);
    }
    // FRMA_Win_fence (collective): ends the previous fence epoch, opens the next.
    void fence(mode assert_ = mode::none) const { detail::check(FRMA_Win_fence(int(assert_), win_), "FRMA_Win_fence"); }
    AccessEpoch start(MPI_Group targets, mode assert_ = mode::none) const {
        detail::check(FRMA_Win_start(targets, int(assert_), win_), "FRMA_Win_start");
        return AccessEpoch(win_);
    }
    ExposureEpoch post(MPI_Group origins, mode assert_ = mode::none) const {
        detail::check(FRMA_Win_post(origins, int(assert_), win_), "FRMA_Win_post");
        return ExposureEpoch(win_);
    }
    // Passive-target completion without an epoch object at hand.
    void flush(int rank) const { detail::check(FRMA_Win_flush(rank, win_), "FRMA_Win_flush"); }
    void flush_all() const { detail::check(FRMA_Win_flush_all(win_), "FRMA_Win_flush_all"); }
    void flush_local(int rank) const { detail::check(FRMA_Win_flush_local(rank, win_), "FRMA_Win_flush_local"); }
    void flush_local_all() const { detail::check(FRMA_Win_flush_local_all(win_), "FRMA_Win_flush_local_all"); }
    void sync() const { detail::check(FRMA_Win_sync(win_), "FRMA_Win_sync"); }

    // ---- communication: the buffers must stay valid until completion ----
    Completion put(int rank, target_disp<T> at, std::span<const T> src) const {
        const int n = detail::to_count(src.size(), "FRMA_Put");
        detail::check(FRMA_Put(src.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Put"), n, mpi_type<T>(), win_),
                      "FRMA_Put");
        return {win_, rank};
    }
    Completion get(int rank, target_disp<T> at, std::span<T> dst) const {
        const int n = detail::to_count(dst.size(), "FRMA_Get");
        detail::check(FRMA_Get(dst.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Get"), n, mpi_type<T>(), win_),
                      "FRMA_Get");
        return {win_, rank};
    }
    Completion accumulate(int rank, target_disp<T> at, std::span<const T> src, op o) const {
        const int n = detail::to_count(src.size(), "FRMA_Accumulate");
        detail::check(FRMA_Accumulate(src.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Accumulate"), n, mpi_type<T>(),
                                      to_mpi(o), win_),
                      "FRMA_Accumulate");
        return {win_, rank};
    }
    // result receives the target's previous values; src is ignored for op::no_op (any size).
    Completion get_accumulate(int rank, target_disp<T> at, std::span<const T> src, std::span<T> result, op o) const {
        const int n = get_acc_count(src, result, o, "FRMA_Get_accumulate");
        detail::check(
            FRMA_Get_accumulate(src.data(), o == op::no_op ? 0 : n, mpi_type<T>(), result.data(), n, mpi_type<T>(),
                                rank, disp(at, "FRMA_Get_accumulate"), n, mpi_type<T>(), to_mpi(o), win_),
            "FRMA_Get_accumulate");
        return {win_, rank};
    }
    // One element, result left in `result` (valid after completion): for fence / PSCW
    // epochs, or to batch several before one flush.
    Completion fetch_and_op(int rank, target_disp<T> at, const T& value, op o, T& result) const {
        detail::check(
            FRMA_Fetch_and_op(&value, &result, mpi_type<T>(), rank, disp(at, "FRMA_Fetch_and_op"), to_mpi(o), win_),
            "FRMA_Fetch_and_op");
        return {win_, rank};
    }
    Completion compare_and_swap(int rank, target_disp<T> at, const T& expected, const T& desired, T& result) const {
        detail::check(FRMA_Compare_and_swap(&desired, &expected, &result, mpi_type<T>(), rank,
                                            disp(at, "FRMA_Compare_and_swap"), win_),
                      "FRMA_Compare_and_swap");
        return {win_, rank};
    }

    // ---- typed atomics: complete before returning ----
    // Each one issues one element-wise atomic operation and then FRMA_Win_flush(rank): the
    // returned value is the target's old value and the update is visible at the target.
    // Passive-target epochs only (flush is erroneous under fence / PSCW: use the
    // Completion-returning overloads above there).
    T fetch_and_op(int rank, target_disp<T> at, T value, op o) const {
        T result{};
        fetch_and_op(rank, at, value, o, result);
        flush(rank);
        return result;
    }
    T fetch_add(int rank, target_disp<T> at, T value) const { return fetch_and_op(rank, at, value, op::sum); }
    // Returns the old value: equal to `expected` when the swap happened.
    T compare_and_swap(int rank, target_disp<T> at, T expected, T desired) const {
        T result{};
        compare_and_swap(rank, at, expected, desired, result);
        flush(rank);
        return result;
    }
    T atomic_load(int rank, target_disp<T> at) const {
        T result{};
        detail::check(
            FRMA_Fetch_and_op(nullptr, &result, mpi_type<T>(), rank, disp(at, "FRMA_Fetch_and_op"), MPI_NO_OP, win_),
            "FRMA_Fetch_and_op");
        flush(rank);
        return result;
    }
    void atomic_store(int rank, target_disp<T> at, T value) const {
        accumulate(rank, at, std::span<const T>(&value, 1), op::replace);
        flush(rank);
    }
    T atomic_swap(int rank, target_disp<T> at, T value) const { return fetch_and_op(rank, at, value, op::replace); }

    // ---- request-based (passive-target epochs): complete with Request::wait / wait_all ----
    Request rput(int rank, target_disp<T> at, std::span<const T> src) const {
        const int n = detail::to_count(src.size(), "FRMA_Rput");
        MPI_Request r = MPI_REQUEST_NULL;
        detail::check(FRMA_Rput(src.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Rput"), n, mpi_type<T>(), win_, &r),
                      "FRMA_Rput");
        return Request(r);
    }
    Request rget(int rank, target_disp<T> at, std::span<T> dst) const {
        const int n = detail::to_count(dst.size(), "FRMA_Rget");
        MPI_Request r = MPI_REQUEST_NULL;
        detail::check(FRMA_Rget(dst.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Rget"), n, mpi_type<T>(), win_, &r),
                      "FRMA_Rget");
        return Request(r);
    }
    Request raccumulate(int rank, target_disp<T> at, std::span<const T> src, op o) const {
        const int n = detail::to_count(src.size(), "FRMA_Raccumulate");
        MPI_Request r = MPI_REQUEST_NULL;
        detail::check(FRMA_Raccumulate(src.data(), n, mpi_type<T>(), rank, disp(at, "FRMA_Raccumulate"), n,
                                       mpi_type<T>(), to_mpi(o), win_, &r),
                      "FRMA_Raccumulate");
        return Request(r);
    }
    Request rget_accumulate(int rank, target_disp<T> at, std::span<const T> src, std::span<T> result, op o) const {
        const int n = get_acc_count(src, result, o, "FRMA_Rget_accumulate");
        MPI_Request r = MPI_REQUEST_NULL;
        detail::check(
            FRMA_Rget_accumulate(src.data(), o == op::no_op ? 0 : n, mpi_type<T>(), result.data(), n, mpi_type<T>(),
                                 rank, disp(at, "FRMA_Rget_accumulate"), n, mpi_type<T>(), to_mpi(o), win_, &r),
            "FRMA_Rget_accumulate");
        return Request(r);
    }

private:
    static MPI_Aint bytes_of(std::size_t count, const char* call) {
        if (count > std::size_t(PTRDIFF_MAX) / sizeof(T))
            throw Error(MPI_ERR_SIZE, std::string(call) + ": " + std::to_string(count) + " elements overflow MPI_Aint");
        return MPI_Aint(count * sizeof(T));
    }

    // After the C call succeeded: errors return from now on; remember what local() needs.
    void init(MPI_Comm comm, int flavor, T* base, std::size_t count) {
        base_ = base;
        count_ = count;
        flavor_ = flavor;
        detail::check(FRMA_Win_set_errhandler(win_, MPI_ERRORS_RETURN), "FRMA_Win_set_errhandler");
        detail::check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
        detail::check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    }

    // The engine cannot tell an index from an address (both are integers), so the mix-up
    // is caught here.
    MPI_Aint disp(const target_disp<T>& at, const char* call) const {
        if (at.is_address() != (flavor_ == MPI_WIN_FLAVOR_DYNAMIC))
            throw Error(MPI_ERR_DISP, std::string(call) +
                                          (at.is_address() ? ": a remote_address is only meaningful on a dynamic window"
                                                           : ": a dynamic window takes a remote_address (from attach), "
                                                             "not an index"));
        return at.disp();
    }

    static int get_acc_count(std::span<const T> src, std::span<T> result, op o, const char* call) {
        const int n = detail::to_count(result.size(), call);
        if (o != op::no_op && src.size() != result.size())  // MPI_NO_OP ignores the origin
            throw Error(MPI_ERR_COUNT, std::string(call) + ": " + std::to_string(src.size()) + " origin and " +
                                           std::to_string(result.size()) + " result elements");
        return n;
    }

    void* predefined(int keyval) const {
        std::optional<void*> v = get_attr(keyval);
        if (!v) throw Error(MPI_ERR_KEYVAL, "FRMA_Win_get_attr: predefined attribute missing");
        return *v;
    }

    void free_in_destructor() noexcept {
        if (win_ == nullptr || detail::mpi_finalized()) return;
        detail::fatal_in_destructor(FRMA_Win_free(&win_), "FRMA_Win_free");
        base_ = nullptr;
        count_ = 0;
    }

    FRMA_Win win_ = nullptr;
    T* base_ = nullptr;
    std::size_t count_ = 0;
    int rank_ = MPI_PROC_NULL;
    int size_ = 0;
    int flavor_ = 0;
};

}  // namespace fastrma

#endif  // FASTRMA_FASTRMA_HPP
