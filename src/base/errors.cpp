// errors.cpp — see errors.hpp.
#include "base/errors.hpp"

#include <cstdarg>
#include <cstdio>

namespace fastrma::detail {

namespace {
thread_local std::string t_last;
thread_local int t_last_class = MPI_SUCCESS;
}  // namespace

int raise(int cls, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t_last.assign(error_class_name(cls));  // (not operator+: GCC 12 warns falsely)
    t_last.append(": ");
    t_last.append(buf);
    t_last_class = cls;
    return cls;
}

const std::string& last_error_message() { return t_last; }

int last_error_class() { return t_last_class; }

const char* error_class_name(int cls) {
    switch (cls) {
    case MPI_SUCCESS:
        return "MPI_SUCCESS";
    case MPI_ERR_WIN:
        return "MPI_ERR_WIN";
    case MPI_ERR_RANK:
        return "MPI_ERR_RANK";
    case MPI_ERR_COUNT:
        return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE:
        return "MPI_ERR_TYPE";
    case MPI_ERR_OP:
        return "MPI_ERR_OP";
    case MPI_ERR_ARG:
        return "MPI_ERR_ARG";
    case MPI_ERR_COMM:
        return "MPI_ERR_COMM";
    case MPI_ERR_INFO:
        return "MPI_ERR_INFO";
    case MPI_ERR_DISP:
        return "MPI_ERR_DISP";
    case MPI_ERR_SIZE:
        return "MPI_ERR_SIZE";
    case MPI_ERR_LOCKTYPE:
        return "MPI_ERR_LOCKTYPE";
    case MPI_ERR_ASSERT:
        return "MPI_ERR_ASSERT";
    case MPI_ERR_NO_MEM:
        return "MPI_ERR_NO_MEM";
    case MPI_ERR_RMA_RANGE:
        return "MPI_ERR_RMA_RANGE";
    case MPI_ERR_RMA_SYNC:
        return "MPI_ERR_RMA_SYNC";
    case MPI_ERR_RMA_CONFLICT:
        return "MPI_ERR_RMA_CONFLICT";
    case MPI_ERR_RMA_ATTACH:
        return "MPI_ERR_RMA_ATTACH";
    case MPI_ERR_RMA_SHARED:
        return "MPI_ERR_RMA_SHARED";
    case MPI_ERR_RMA_FLAVOR:
        return "MPI_ERR_RMA_FLAVOR";
    case MPI_ERR_UNSUPPORTED_OPERATION:
        return "MPI_ERR_UNSUPPORTED_OPERATION";
    case MPI_ERR_KEYVAL:
        return "MPI_ERR_KEYVAL";
    case MPI_ERR_GROUP:
        return "MPI_ERR_GROUP";
    case MPI_ERR_OTHER:
        return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN:
        return "MPI_ERR_INTERN";
    default:
        return "MPI_ERR_UNKNOWN";
    }
}

}  // namespace fastrma::detail
