// errors.hpp — MPI error classes with a message that names the call and the bad value.
//
// Internal functions return an MPI error class (int) and, on failure, leave a message in
// a thread-local buffer via raise(). The C API passes the class to the window's error
// handler; FRMA_Last_error_message() returns the message.
#pragma once

#include <mpi.h>

#include <string>

namespace fastrma::detail {

// Record the message (printf-style) for this thread and return cls.
int raise(int cls, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const std::string& last_error_message();
int last_error_class();  // of that message (MPI_SUCCESS: none yet)
const char* error_class_name(int cls);

}  // namespace fastrma::detail
