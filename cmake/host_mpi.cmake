# host_mpi.cmake — which MPI is the host, and how to launch it. Included after
# find_package(MPI). Sets:
#   FASTRMA_HOST_MPI          OpenMPI or MPICH (MPICH's ABI: MPICH, Intel MPI, MVAPICH, ...)
#   FASTRMA_HOST_ABI_SOURCE   src/base/host_abi_ompi.cpp or host_abi_mpich.cpp
#   FASTRMA_MPIEXEC_FLAGS / FASTRMA_MPIEXEC_ENV   what every test launch adds (per host)
#   FASTRMA_MPI_C_COMPILER_PATH  MPI_C_COMPILER as an absolute path
#   FASTRMA_MPIEXEC_SETENV    the option that sets one variable for one launch: "-x" (Open
#                             MPI: -x NAME=VALUE) or "-genv" (hydra: -genv NAME VALUE)
# and, for MPICH, points MPIEXEC_EXECUTABLE at hydra and the Fortran compiler at MPICH's
# when FindMPI picked the system default (Open MPI's, where both are installed).
include(CheckSymbolExists)

set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
set(CMAKE_REQUIRED_DEFINITIONS -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1)
check_symbol_exists(OMPI_MAJOR_VERSION "mpi.h" FASTRMA_HAVE_OMPI_MAJOR_VERSION)
check_symbol_exists(MPICH_VERSION "mpi.h" FASTRMA_HAVE_MPICH_VERSION)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_DEFINITIONS)

if(FASTRMA_HAVE_OMPI_MAJOR_VERSION)
  set(FASTRMA_HOST_MPI OpenMPI)
  set(FASTRMA_HOST_ABI_SOURCE src/base/host_abi_ompi.cpp)
elseif(FASTRMA_HAVE_MPICH_VERSION)
  set(FASTRMA_HOST_MPI MPICH)
  set(FASTRMA_HOST_ABI_SOURCE src/base/host_abi_mpich.cpp)
else()
  message(FATAL_ERROR "fastrma: mpi.h (${MPI_C_INCLUDE_DIRS}) is neither Open MPI's nor MPICH's")
endif()

if(FASTRMA_HOST_MPI STREQUAL "MPICH")
  get_filename_component(_mpi_bindir ${MPI_C_COMPILER} DIRECTORY)
  # FindMPI searches plain "mpiexec", which is Open MPI's where both are installed.
  set(_hydra FALSE)
  if(MPIEXEC_EXECUTABLE)
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _v ERROR_QUIET TIMEOUT 20)
    if(_v MATCHES "HYDRA|MPICH|Intel")
      set(_hydra TRUE)
    endif()
  endif()
  if(NOT _hydra)
    find_program(FASTRMA_MPICH_MPIEXEC NAMES mpiexec.mpich mpiexec.hydra mpiexec
                 HINTS ${_mpi_bindir} NO_DEFAULT_PATH)
    if(NOT FASTRMA_MPICH_MPIEXEC)
      message(FATAL_ERROR "fastrma: MPICH host but no hydra mpiexec found; set MPIEXEC_EXECUTABLE")
    endif()
    set(MPIEXEC_EXECUTABLE ${FASTRMA_MPICH_MPIEXEC} CACHE FILEPATH "Executable for running MPI programs." FORCE)
  endif()
  if(NOT MPI_Fortran_COMPILER)
    find_program(MPI_Fortran_COMPILER NAMES mpifort.mpich mpif90.mpich mpifort mpif90
                 HINTS ${_mpi_bindir} NO_DEFAULT_PATH)
  endif()
  # Hydra needs no root or oversubscription flags and does not bind by default; it passes
  # the whole environment to the ranks.
  set(FASTRMA_MPIEXEC_FLAGS "")
  set(FASTRMA_MPIEXEC_ENV "")
  set(FASTRMA_MPIEXEC_SETENV -genv)
else()
  set(FASTRMA_MPIEXEC_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none)
  set(FASTRMA_MPIEXEC_FLAGS --oversubscribe --bind-to none)
  set(FASTRMA_MPIEXEC_SETENV -x)
endif()
# The compiler wrapper as an absolute path, for the installed fastrmaConfig.cmake (the
# command line may have named it bare: -DMPI_C_COMPILER=mpicc.mpich).
get_filename_component(FASTRMA_MPI_C_COMPILER_PATH "${MPI_C_COMPILER}" PROGRAM)
message(STATUS "fastrma: host MPI ${FASTRMA_HOST_MPI} (${FASTRMA_HOST_ABI_SOURCE}), mpiexec ${MPIEXEC_EXECUTABLE}")
