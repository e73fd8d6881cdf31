#!/usr/bin/env bash
# bench_suite.sh — build and run the whole benchmark suite on local ranks: fastrma against
# Open MPI's osc components and MPICH, latency, bandwidth, message rate, overlap,
# synchronization and window costs vs ranks, the machine's physical limits, a performance
# model; CSV, PNG plots and a markdown report in one folder (docs/performance.md).
#
#   bash scripts/bench_suite.sh [--quick] [OUTDIR]     default OUTDIR: bench-results/suite
#
# Full: 5 minutes on a quiet 2-core machine, 8-10 with builds running beside it; --quick:
# 1.5 minutes, 2-2.5 loaded (fewer sizes, shorter batches, fastrma measured in one run
# instead of three). Add the build when the library changed (a full rebuild: a few minutes). Assumes scripts/setup.sh has run
# (g++, cmake, Open MPI; python3-matplotlib for the plots; mpich for the MPICH peer —
# without it the MPICH column is left out).
# Environment: BENCH_SUITE_BUILD_DIR (default build-suite), FASTRMA_BUILD_JOBS (default 2).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

quick=()
outdir=bench-results/suite
while (($# > 0)); do
  case "$1" in
    --quick) quick=(--quick) ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "bench_suite.sh: unknown option $1" >&2; exit 2 ;;
    *) outdir=$1 ;;
  esac
  shift
done
build=${BENCH_SUITE_BUILD_DIR:-build-suite}
jobs=${FASTRMA_BUILD_JOBS:-2}
start=$(date +%s)

echo "bench_suite.sh: building in $build/ (Release)" >&2
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFASTRMA_BUILD_BENCH=ON > "$build/suite-configure.log" 2>&1 \
  || { cat "$build/suite-configure.log" >&2; exit 1; }
# The drop-in and, where it is built, the osc component: the dropin-fastrma and osc-fastrma peers.
targets=(rma_suite phys_limits win_memory fastrma-mpi)
grep -q '^FASTRMA_BUILD_OSC:BOOL=ON' "$build/CMakeCache.txt" && targets+=(mca_osc_fastrma)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# The MPICH peer: rma_suite of fastrma's MPICH build (build-mpich/, MPICH as the host), which
# measures MPICH's own RMA and fastrma on MPICH in the same launch; if that build fails, the
# same source compiled against MPICH alone. mpicxx.mpich and mpiexec.mpich by name, so Open
# MPI stays the default MPI.
mpich_bin= mpich_fastrma_bin=
mpich_build=${BENCH_SUITE_MPICH_BUILD_DIR:-build-mpich}
if command -v mpicxx.mpich > /dev/null && command -v mpiexec.mpich > /dev/null; then
  echo "bench_suite.sh: building fastrma with MPICH as the host in $mpich_build/" >&2
  if cmake -S . -B "$mpich_build" -DCMAKE_BUILD_TYPE=Release -DMPI_C_COMPILER=mpicc.mpich \
       -DMPI_CXX_COMPILER=mpicxx.mpich -DFASTRMA_BUILD_BENCH=ON > "$build/suite-mpich-configure.log" 2>&1 &&
     cmake --build "$mpich_build" -j "$jobs" --target rma_suite > "$build/suite-mpich-build.log" 2>&1; then
    mpich_fastrma_bin=$mpich_build/bench/rma_suite
  else
    echo "bench_suite.sh: fastrma's MPICH build failed ($build/suite-mpich-*.log): MPICH alone" >&2
    mpich_bin=$build/bench/rma_suite_mpich
    if [[ ! -x $mpich_bin || bench/rma_suite.cpp -nt $mpich_bin ]]; then
      mpicxx.mpich -O2 -std=c++20 -pthread -DRMA_SUITE_NO_FASTRMA bench/rma_suite.cpp -o "$mpich_bin"
    fi
  fi
else
  echo "bench_suite.sh: MPICH not installed (Debian package mpich): the MPICH peer is left out" >&2
fi
built=$(date +%s)

# The plots need matplotlib: Debian's python3-matplotlib lives in /usr/bin/python3, which
# another python3 first on PATH (pyenv, a venv) does not see.
py=python3
if ! python3 -c 'import matplotlib' 2> /dev/null && /usr/bin/python3 -c 'import matplotlib' 2> /dev/null; then
  py=/usr/bin/python3
fi

mkdir -p "$outdir"
{
  echo "fastrma commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
} > "$outdir/commit.txt"
"$py" bench/suite_run.py "${quick[@]}" --build "$build" ${mpich_bin:+--mpich-bin "$mpich_bin"} \
  ${mpich_fastrma_bin:+--mpich-fastrma-bin "$mpich_fastrma_bin"} "$outdir"
cat "$outdir/commit.txt" >> "$outdir/raw/settings.txt"
echo "build: $((built - start)) s" >> "$outdir/raw/settings.txt"
"$py" bench/suite_report.py "$outdir"
echo "bench_suite.sh: done in $(( $(date +%s) - start )) s (build $((built - start)) s): $outdir/report.md" >&2
