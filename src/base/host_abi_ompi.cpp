// host_abi_ompi.cpp — host_abi.hpp for Open MPI (pointer handles, Fortran index tables).
#include <cstdio>

#include "base/host_abi.hpp"

static_assert(std::is_pointer_v<MPI_Datatype> && std::is_pointer_v<MPI_Win>,
              "host_abi_ompi.cpp is for Open MPI's ABI (CMake picks it from mpi.h)");

// Open MPI's Fortran MPI_BOTTOM: the address of this common block (0 in C).
extern "C" char mpi_fortran_bottom_[] __attribute__((weak));

namespace fastrma::detail::host_abi {

Family family() { return Family::open_mpi; }
const char* family_name() { return "Open MPI"; }

std::string handle_text(std::uint64_t key) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", reinterpret_cast<void*>(static_cast<std::uintptr_t>(key)));
    return buf;
}

const void* fortran_bottom() { return mpi_fortran_bottom_; }

MPI_Fint fortran_win_null() { return 0; }

int keyval_f2c(MPI_Fint keyval) { return keyval; }

}  // namespace fastrma::detail::host_abi
