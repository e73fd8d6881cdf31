#!/usr/bin/env bash
# mpich_progress.sh — am latency of fastrma's progress thread beside the host's waiting
# thread, MPICH against Open MPI (docs/performance.md, "MPICH as the host").
#
#   bash scripts/mpich_progress.sh [RUNS]    (default 5 runs per row)
#
# Needs build/ (Open MPI) and build-mpich/ (MPICH, with benchmarks) built. Each row runs
# bench/rma_bench --quick (2 ranks, allocate window, FASTRMA_TRANSPORT=am) RUNS times and
# prints, for 8-byte put / get / fetch_and_op + flush, the median of the runs' medians and
# their range in microseconds.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
B=(--quick --impl fastrma --flavor allocate)

# row LABEL DIR COMMAND...: RUNS runs of COMMAND in DIR, one summary line.
row() {
  local label=$1 dir=$2
  shift 2
  for ((i = 0; i < runs; ++i)); do
    (cd "$dir" && "$@" 2>&1) | grep -E " (put|get|fetch_and_op) +8 B" | awk '{print $7}' | paste -sd' '
  done | LABEL=$label python3 -c '
import os, statistics as st, sys
rows = [list(map(float, l.split())) for l in sys.stdin if len(l.split()) == 3]
out = [os.environ["LABEL"], "runs=%d" % len(rows)]
for name, col in zip(["put", "get", "fop"], zip(*rows)):
    out.append("%s %.1f us [%.1f..%.1f]" % (name, st.median(col) / 1e3, min(col) / 1e3, max(col) / 1e3))
print("  ".join(out))'
}

mpich=$repo_root/build-mpich/bench
ompi=$repo_root/build/bench
ompi_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 FASTRMA_TRANSPORT=am)
row "MPICH, target in MPI_Barrier" "$mpich" env FASTRMA_TRANSPORT=am mpiexec.mpich -n 2 ./rma_bench "${B[@]}"
row "MPICH, target sleeping" "$mpich" env FASTRMA_TRANSPORT=am mpiexec.mpich -n 2 ./rma_bench "${B[@]}" --target-wait sleep
row "MPICH, target in MPI_Barrier, FASTRMA_SPIN_US=0" "$mpich" env FASTRMA_SPIN_US=0 FASTRMA_TRANSPORT=am mpiexec.mpich -n 2 ./rma_bench "${B[@]}"
row "Open MPI, target in MPI_Barrier, host hook" "$ompi" "${ompi_env[@]}" mpiexec --oversubscribe --bind-to none -n 2 ./rma_bench "${B[@]}"
row "Open MPI, target in MPI_Barrier, FASTRMA_HOST_PROGRESS=0" "$ompi" "${ompi_env[@]}" FASTRMA_HOST_PROGRESS=0 mpiexec --oversubscribe --bind-to none -n 2 ./rma_bench "${B[@]}"
