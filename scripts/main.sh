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
RMA_BENCH="$repo_root/build/bench/rma_bench" \
  bash bench/run_bench.sh build/bench/rma_bench bench-results
