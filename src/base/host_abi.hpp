// host_abi.hpp — the one place that knows how the host MPI represents its handles.
//
// Two ABI families exist. Open MPI: every handle (MPI_Datatype, MPI_Op, MPI_Win, ...) is a
// pointer, predefined handles are addresses of globals in libmpi, Fortran INTEGER handles
// are indices into per-kind tables (MPI_Win_c2f/f2c). MPICH and its derivatives (Intel MPI,
// Cray MPICH, MVAPICH): every handle is a 32-bit int that encodes its kind, predefined
// handles are compile-time constants, and a Fortran handle equals the C handle.
//
// Everything above this header treats handles as opaque values compared with ==; what
// needs more (a hash key, a printable form, the drop-in's window handles, the host's
// Fortran constants) asks here. The family is fixed at build time: CMake detects the
// host's mpi.h and compiles host_abi_ompi.cpp or host_abi_mpich.cpp.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace fastrma::detail::host_abi {

enum class Family { open_mpi, mpich };

// The family this build was compiled for, and its name for messages ("Open MPI", "MPICH").
Family family();
const char* family_name();

// A handle as 64 bits: the address (Open MPI) or the integer (MPICH). Equal handles give
// equal keys; predefined handles give keys fixed for the life of the process.
template <class Handle>
inline std::uint64_t handle_key(Handle h) {
    if constexpr (std::is_pointer_v<Handle>) {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(h));
    } else {
        static_assert(std::is_integral_v<Handle>, "MPI handles are pointers or integers");
        return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<Handle>>(h));
    }
}

// A handle for error messages: "0x7f..." (address) or "0x8c000003" (integer).
std::string handle_text(std::uint64_t key);
template <class Handle>
inline std::string handle_text(Handle h) {
    return handle_text(handle_key(h));
}

// The address the host's Fortran layer passes for MPI_BOTTOM (a common block; nullptr
// when the Fortran layer is not loaded).
const void* fortran_bottom();

// ---- window handles of the drop-in (libfastrma-mpi) ----
// True when MPI_Win is an integer: the drop-in then hands out integer handles from its
// window table (win_handle_of_index) instead of passing fastrma's pointer through.
inline constexpr bool kIntegerWinHandles = !std::is_pointer_v<MPI_Win>;

// MPICH encodes a handle as kind (bits 30-31: invalid, builtin, direct, indirect) | object
// type (bits 26-29; windows are 0x8) | index. The host never creates a builtin window, so
// "builtin window" handles (0x6000'0000 | index) cannot collide with any of its own; the
// host rejects them as invalid should one ever reach it.
inline constexpr std::uint32_t kWinHandleTag = 0x6000'0000u;
inline constexpr std::uint32_t kWinHandleIndexMask = 0x03ff'ffffu;

// The Fortran INTEGER value of MPI_WIN_NULL: 0 (Open MPI) or the C handle (MPICH).
MPI_Fint fortran_win_null();

// The C keyval behind a Fortran one. Open MPI: the same. MPICH gives the predefined window
// attributes one number per language (C MPI_WIN_BASE 0x66000001, Fortran 0x66000002, ...):
// a Fortran predefined keyval maps to its C twin; user keyvals are the same in both.
int keyval_f2c(MPI_Fint keyval);

}  // namespace fastrma::detail::host_abi
