#!/usr/bin/env bash
# main.sh — the main job: install what is missing, build (Release, build/), then run the
# RMA benchmarks, fastrma side by side with the host MPI's own RMA. Tables are printed and
# CSV files written under bench-results/ (see docs/benchmarks.md).
#
#   bash scripts/main.sh        (as root, or: sudo bash scripts/main.sh)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

bash scripts/setup.sh
bash scripts/build.sh

if [[ ! -f bench/run_bench.sh ]]; then
  echo "main.sh: bench/run_bench.sh does not exist yet" >&2
  exit 1
fi
# RMA_BENCH names the binary explicitly (run_bench.sh otherwise searches build*/ and could
# pick a sanitizer build); the positional arguments are the job's binary and output folder.
# Two passive-target situations, side by side with every Open MPI osc component:
#  1. the target waits inside MPI (spinning in MPI_Barrier): Open MPI's target-assisted
#     paths get all the help they can;
#  2. the target computes and calls MPI only every 20 us (--target-wait sleep): what a
#     passive target usually does. fastrma needs no target CPU in either case.
export RMA_BENCH="$repo_root/build/bench/rma_bench"
echo "== 1/3: idle cost of the progress thread"
mpiexec_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
"${mpiexec_env[@]}" mpiexec -n 2 --bind-to none build/bench/idle_cost 2 | tee bench-results-idle.txt
echo "== 2/3: target spinning inside MPI"
RMA_BENCH_TARGET_WAIT=barrier bash bench/run_bench.sh bench-results/target-in-mpi
echo "== 3/3: target computing (calls MPI every 20 us)"
RMA_BENCH_TARGET_WAIT=sleep bash bench/run_bench.sh --quick bench-results/target-computing
mkdir -p bench-results && mv bench-results-idle.txt bench-results/idle_cost.txt
echo "Results: bench-results/target-in-mpi/table.md, bench-results/target-computing/table.md, bench-results/idle_cost.txt"
