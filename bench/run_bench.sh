#!/usr/bin/env bash
# run_bench.sh — run rma_bench once per Open MPI osc component and merge the results.
#
# Open MPI picks its one-sided (osc) component per process, so the same binary runs once per
# component with `--mca osc <c>`; fastrma is measured in every run. Each run is bounded by
# `timeout`. A run that crashes or hangs is not lost: rma_bench writes its results and a
# progress line ("impl flavor phase") row by row, so the phase that did not finish is known;
# the run is repeated without that phase and without everything that already finished, until
# it ends cleanly (at most RMA_BENCH_ATTEMPTS times). Every crash and hang is recorded.
#
# usage: bench/run_bench.sh [--quick] [OUTDIR] [-- extra rma_bench args]
#   OUTDIR                 default ./bench-results
# environment:
#   RMA_BENCH              the binary (default: build/bench/rma_bench, then build-*/bench/rma_bench)
#   RMA_BENCH_RUNS         runs as label:component[:thread], space separated; component "-"
#                          means Open MPI's own choice (default below)
#   RMA_BENCH_TIMEOUT      seconds per attempt (default 90, 45 with --quick)
#   RMA_BENCH_ATTEMPTS     attempts per run (default 8)
#   RMA_BENCH_TARGET_WAIT  barrier (default: the target spins in MPI_Barrier), yield (it polls
#                          an MPI_Ibarrier and yields between polls) or sleep (polls every 20 us):
#                          try these when ranks + progress threads outnumber cores
#   MPIEXEC                default mpiexec; MPIEXEC_EXTRA_ARGS are added to its command line
# outputs in OUTDIR: results.csv, status.csv, table.md (also printed), raw/ (per attempt:
# .csv, .status.csv, .progress, .log) and raw/attempts.csv.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

quick=()
outdir=./bench-results
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "run_bench.sh: unknown option $1" >&2; exit 2 ;;
    *) outdir=$1; shift ;;
  esac
done

bin=${RMA_BENCH:-}
if [ -z "$bin" ]; then
  for cand in "$repo/build/bench/rma_bench" "$repo"/build*/bench/rma_bench; do
    if [ -x "$cand" ]; then bin=$cand; break; fi
  done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "run_bench.sh: no rma_bench binary (set RMA_BENCH or build the rma_bench target)" >&2
  exit 2
fi

# default: Open MPI's own choice, each component alone, and pt2pt again below
# MPI_THREAD_MULTIPLE (Open MPI 4.1's osc pt2pt refuses MULTIPLE).
runs=${RMA_BENCH_RUNS:-"default:- sm:sm rdma:rdma pt2pt:pt2pt ucx:ucx pt2pt@serialized:pt2pt:serialized"}
if [ ${#quick[@]} -gt 0 ]; then def_timeout=45; else def_timeout=90; fi
timeout_s=${RMA_BENCH_TIMEOUT:-$def_timeout}
max_attempts=${RMA_BENCH_ATTEMPTS:-8}
mpiexec=${MPIEXEC:-mpiexec}
read -r -a mpiexec_extra <<< "${MPIEXEC_EXTRA_ARGS:-}"
# Not mpi_yield_when_idle: it makes the origin yield inside every flush too (put 8 B under
# osc rdma went from ~80 ns to 1-3 us); rma_bench's --target-wait yield yields on the target only.
target_wait=${RMA_BENCH_TARGET_WAIT:-barrier}
# Running as root in a container needs these; oversubscription is harmless with 2 ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$outdir/raw"
outdir=$(cd "$outdir" && pwd)
raw=$outdir/raw
rm -f "$raw"/*
echo "label,attempt,rc,outcome,impl,flavor,phase,skips" > "$raw/attempts.csv"

{
  echo "binary: $bin"
  echo "mpiexec: $mpiexec -n 2 --bind-to none ${mpiexec_extra[*]} (plus --mca osc <component> per run)"
  echo "mode: ${quick[*]:-full}; target waits in: $target_wait; timeout per attempt ${timeout_s} s; $(nproc) cores; $(uname -srm)"
  echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
} > "$raw/settings.txt"
sed 's/^/# /' "$raw/settings.txt"

# Why an attempt ended, from its exit code and log.
outcome_of() {  # rc log
  local rc=$1 log=$2 sig
  if [ "$rc" -eq 0 ]; then echo ok; return; fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && grep -q "^TIMEOUT" "$log"; then echo timeout; return; fi
  sig=$(grep -o "exited on signal [0-9]* ([A-Za-z ]*)" "$log" | head -n1 | sed 's/exited on //')
  if [ -n "$sig" ]; then echo "crash: $sig"; return; fi
  if grep -q "MPI_ABORT\|MPI_ERRORS_ARE_FATAL" "$log"; then echo "abort (rc $rc)"; return; fi
  echo "failed (rc $rc)"
}

for run in $runs; do
  IFS=: read -r label component thread <<< "$run"
  mca=()
  [ "$component" != "-" ] && mca=(--mca osc "$component")
  targs=()
  [ -n "${thread:-}" ] && targs=(--thread "$thread")
  skips=()
  echo
  echo "## run $label (${mca[*]:-Open MPI default selection}${thread:+, thread level $thread})"
  attempt=1
  while [ "$attempt" -le "$max_attempts" ]; do
    base=$raw/$label.$attempt
    start=$(date +%s)
    timeout -k 10 "$timeout_s" "$mpiexec" -n 2 --bind-to none "${mca[@]}" "${mpiexec_extra[@]}" \
      "$bin" "${quick[@]}" --component "$label" "${targs[@]}" --target-wait "$target_wait" \
      --csv "$base.csv" --status-csv "$base.status.csv" --progress "$base.progress" \
      "${skips[@]}" "${extra[@]}" > "$base.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "TIMEOUT after ${timeout_s}s" >> "$base.log"
    outcome=$(outcome_of "$rc" "$base.log")
    grep -E "^(STATUS|# thread)" "$base.log" | grep -v "status=started" | sed 's/^/  /'
    last=$(tail -n1 "$base.progress" 2>/dev/null || true)
    read -r impl flavor phase <<< "${last:-- - -}"
    echo "$label,$attempt,$rc,$outcome,$impl,$flavor,$phase,${skips[*]:-}" >> "$raw/attempts.csv"
    echo "  attempt $attempt: $outcome in $(( $(date +%s) - start )) s${last:+ (last phase: $last)}"
    [ "$rc" -eq 0 ] && break
    if [ -z "$last" ] || [ "$phase" = "done" ]; then
      tail -n 15 "$base.log" | sed 's/^/  | /'
      break  # died before the first phase (or after the last): nothing to skip
    fi
    echo "  $outcome during $impl/$flavor/$phase; log tail:"
    grep -v "^\(fastrma\|mpi \|memcpy\|STATUS\)" "$base.log" | tail -n 8 | sed 's/^/  | /'
    # Skip what finished in this attempt and the phase that did not.
    if [ -s "$base.csv" ]; then
      while read -r spec; do skips+=(--skip "$spec"); done < <(
        awk -F, -v i="$impl" -v f="$flavor" 'NR>1 && $1=="memcpy" {print "memcpy:*:*"}
            NR>1 && $1==i && $3==f {print i":"f":"$4}' "$base.csv" | sort -u)
    fi
    if [ -s "$base.status.csv" ]; then
      while read -r spec; do skips+=(--skip "$spec"); done < <(
        awk -F, 'NR>1 && $4!="started" {print $1":"$3":*"}' "$base.status.csv" | sort -u)
    fi
    case "$phase" in
      put|get|fetch_and_op|compare_and_swap|put_bw) skips+=(--skip "$impl:$flavor:$phase") ;;
      memcpy) skips+=(--skip "memcpy:*:*") ;;
      *) skips+=(--skip "$impl:$flavor:*") ;;  # window setup/teardown: the pair is done for
    esac
    attempt=$((attempt + 1))
  done
done

echo
python3 "$here/report.py" "$outdir"
