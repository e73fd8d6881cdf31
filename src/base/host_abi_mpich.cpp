// host_abi_mpich.cpp — host_abi.hpp for MPICH's ABI (integer handles, Fortran handle = C
// handle).
#include <cstdio>

#include "base/host_abi.hpp"

static_assert(std::is_integral_v<MPI_Datatype> && std::is_integral_v<MPI_Win>,
              "host_abi_mpich.cpp is for MPICH's ABI (CMake picks it from mpi.h)");

// MPICH's Fortran layer declares COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE,
// MPI_STATUS_IGNORE (mpif.h and `use mpi` alike): MPI_BOTTOM is the block's first word.
extern "C" char mpipriv1_[] __attribute__((weak));

namespace fastrma::detail::host_abi {

Family family() { return Family::mpich; }
const char* family_name() { return "MPICH"; }

std::string handle_text(std::uint64_t key) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(key & 0xffff'ffffu));
    return buf;
}

const void* fortran_bottom() { return mpipriv1_; }

MPI_Fint fortran_win_null() { return static_cast<MPI_Fint>(MPI_WIN_NULL); }

int keyval_f2c(MPI_Fint keyval) {
    static_assert(MPI_WIN_BASE == 0x66000001 && MPI_WIN_MODEL == 0x66000009, "MPICH's predefined window keyvals moved");
    // Fortran twins: the C keyval + 1 (MPICH's attribute kind bit).
    if (keyval >= MPI_WIN_BASE + 1 && keyval <= MPI_WIN_MODEL + 1 && (keyval - MPI_WIN_BASE) % 2 == 1)
        return keyval - 1;
    return keyval;
}

}  // namespace fastrma::detail::host_abi
