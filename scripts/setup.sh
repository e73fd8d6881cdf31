#!/usr/bin/env bash
# setup.sh — install what a fresh Debian 12 machine lacks to build, test and benchmark
# fastrma. Idempotent: when every package is already installed it touches nothing (no
# apt-get update, no root needed) and returns in well under a second.
#
# Runs apt-get as root, or through sudo when started as another user.
# Usage: bash scripts/setup.sh        (or: sudo bash scripts/setup.sh)
set -euo pipefail

# The packages, one per need:
#   compilers and build tools ... g++ cmake make pkg-config (gfortran: Fortran tests later)
#   host MPI (Open MPI 4.1) ..... libopenmpi-dev openmpi-bin
#   topology and NUMA ........... libhwloc-dev libnuma-dev
#   tests and benchmarks ........ libgtest-dev libgmock-dev libbenchmark-dev python3
#   verbs transport (later) ..... libibverbs-dev
#   example applications ........ libfftw3-dev (examples/fft3d), gnuplot-nox (the main job's plot)
#   benchmark suite ............. python3-matplotlib (plots), mpich libmpich-dev (the MPICH
#                                 peer; Open MPI keeps the mpi/mpirun alternatives: priority
#                                 50 against MPICH's 40, and the suite calls mpicxx.mpich and
#                                 mpiexec.mpich by name)
#   GA benchmark (bench/ga_pattern) libglobalarrays-dev libarmci-mpi-dev (Global Arrays over
#   and test (dropin_ga)          ARMCI-MPI, the PGAS stack measured), libscalapack-openmpi-dev
#                                 and libscalapack-mpich-dev (GA's archives link ScaLAPACK; the
#                                 MPICH tier runs dropin_ga too), linux-perf (profiles)
#   ofi transport ............... libfabric-dev libfabric-bin (libfabric 1.17: the network
#                                 transport, tested over tcp;ofi_rxm and sockets on loopback)
#   two hosts on one machine .... iproute2 (ip netns, veth: scripts/twohost.sh, tests/twohost)
#   osc component tests ......... python3-mpi4py (osc_mpi4py: a Python client on mca_osc_fastrma)
#   formatting check ............ clang-format (scripts/test.sh: the tree as .clang-format says)
#   stuck MPI tests ............. gdb (tests/mpi/mpi_main.cpp prints every thread's stack
#                                 before it aborts a test that ran past FASTRMA_TEST_STUCK_S)
PACKAGES=(
  g++ cmake make pkg-config gfortran
  libopenmpi-dev openmpi-bin
  libhwloc-dev libnuma-dev
  libgtest-dev libgmock-dev libbenchmark-dev python3
  libibverbs-dev
  libfftw3-dev gnuplot-nox
  python3-matplotlib mpich libmpich-dev
  libglobalarrays-dev libarmci-mpi-dev libscalapack-openmpi-dev libscalapack-mpich-dev linux-perf
  libfabric-dev libfabric-bin
  iproute2
  python3-mpi4py
  clang-format
  gdb
)

log() { printf 'setup.sh: %s\n' "$*" >&2; }

# "dpkg -s" also succeeds for a removed package whose configuration files remain
# (Status: deinstall ok config-files), so look at the Status line itself.
is_installed() {
  dpkg -s "$1" 2>/dev/null | grep -qx 'Status: install ok installed'
}

if ! command -v dpkg >/dev/null 2>&1; then
  log "dpkg not found: this script supports Debian 12 (bookworm) only"
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  log "all ${#PACKAGES[@]} packages already installed, nothing to do"
  exit 0
fi

if [[ -r /etc/os-release ]]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  if [[ "${ID:-}" != debian || "${VERSION_ID:-}" != 12 ]]; then
    log "warning: written for Debian 12, this is ${PRETTY_NAME:-unknown}; trying anyway"
  fi
fi

# env(1) passes DEBIAN_FRONTEND through sudo whatever sudoers says about the environment.
if ((EUID == 0)); then
  as_root=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
else
  log "missing packages: ${missing[*]}"
  log "not root and sudo not found: run this script as root"
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg (e.g. unattended-upgrades on a fresh VM) instead of failing.
apt_opts=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)

log "missing packages: ${missing[*]}"
"${as_root[@]}" apt-get "${apt_opts[@]}" update
"${as_root[@]}" apt-get "${apt_opts[@]}" install -y "${missing[@]}"

still_missing=()
for pkg in "${missing[@]}"; do
  is_installed "$pkg" || still_missing+=("$pkg")
done
if ((${#still_missing[@]} > 0)); then
  log "still not installed after apt-get: ${still_missing[*]}"
  exit 1
fi
for tool in g++ cmake make pkg-config mpicc mpiexec; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool not on PATH after install"; exit 1; }
done
log "installed: ${missing[*]}"
