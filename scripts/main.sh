#!/usr/bin/env bash
# main.sh — the main job: install what is missing, build (Release, build/), then
#   1. the example applications (3D FFT, key/value store, dynamic sparse data exchange) on
#      4 ranks, each the same binary on every Open MPI one-sided component and on fastrma
#      (libfastrma-mpi.so preloaded), and — where MPICH is installed — built for MPICH, on
#      MPICH's own RMA and on fastrma's MPICH drop-in; results checked: tables, CSV and a
#      plot in bench-results/apps/ (docs/examples.md);
#   2. the idle cost of fastrma's progress thread;
#   3. the RMA micro-benchmarks, fastrma side by side with the host MPI's own RMA, with the
#      target waiting inside MPI and with the target computing (docs/benchmarks.md).
# About 5 minutes on a 2-core machine once built.
#
#   bash scripts/main.sh        (as root, or: sudo bash scripts/main.sh)
#
# Exit status: non-zero when a step fails, including a fastrma run of an application whose
# result check fails (the host MPI's own crashes are recorded in the table, not failures);
# the later steps still run.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

bash scripts/setup.sh
bash scripts/build.sh
# MPICH as a second host: the demo applications and the drop-in built for MPICH (step 1
# compares them with MPICH's own RMA too). A failed MPICH build leaves MPICH out, no more.
if command -v mpicc.mpich > /dev/null && command -v mpicxx.mpich > /dev/null; then
  FASTRMA_BUILD_DIR=build-mpich bash scripts/build.sh -- -DMPI_C_COMPILER=mpicc.mpich \
    -DMPI_CXX_COMPILER=mpicxx.mpich -DFASTRMA_BUILD_TESTS=OFF -DFASTRMA_BUILD_BENCH=OFF \
    || echo "main.sh: the MPICH build failed: the applications run on Open MPI only" >&2
fi

if [[ ! -f bench/run_bench.sh ]]; then
  echo "main.sh: bench/run_bench.sh does not exist yet" >&2
  exit 1
fi
start=$(date +%s)
mkdir -p bench-results

echo "== 1/4: applications, host MPI RMA vs fastrma (4 ranks)"
apps_rc=0
APPS_BUILD_DIR=build bash examples/run_apps.sh bench-results/apps || apps_rc=$?

# RMA_BENCH names the binary explicitly (run_bench.sh otherwise searches build*/ and could
# pick a sanitizer build); the positional arguments are the job's binary and output folder.
# Two passive-target situations, side by side with every Open MPI osc component:
#  1. the target waits inside MPI (spinning in MPI_Barrier): Open MPI's target-assisted
#     paths get all the help they can;
#  2. the target computes and calls MPI only every 20 us (--target-wait sleep): what a
#     passive target usually does. fastrma needs no target CPU in either case.
export RMA_BENCH="$repo_root/build/bench/rma_bench"
echo "== 2/4: idle cost of the progress thread"
mpiexec_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
"${mpiexec_env[@]}" mpiexec -n 2 --bind-to none build/bench/idle_cost 2 | tee bench-results/idle_cost.txt
echo "== 3/4: micro-benchmarks, target spinning inside MPI"
RMA_BENCH_TARGET_WAIT=barrier bash bench/run_bench.sh bench-results/target-in-mpi
echo "== 4/4: micro-benchmarks, target computing (calls MPI every 20 us)"
RMA_BENCH_TARGET_WAIT=sleep bash bench/run_bench.sh --quick bench-results/target-computing

echo "Results: bench-results/apps/table.md (+ apps.png, summary.csv), bench-results/target-in-mpi/table.md,"
echo "         bench-results/target-computing/table.md, bench-results/idle_cost.txt"
echo "main.sh: benchmarks took $(( $(date +%s) - start )) s"
if ((apps_rc != 0)); then
  echo "main.sh: the application step failed (exit $apps_rc): see bench-results/apps/" >&2
  exit "$apps_rc"
fi
