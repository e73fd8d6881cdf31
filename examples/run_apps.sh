#!/usr/bin/env bash
# run_apps.sh — the application benchmark of the main job: every example application on 4
# local ranks, the same binary once per Open MPI one-sided component (the host MPI's own RMA)
# and once with libfastrma-mpi.so preloaded (fastrma), each run checked; then one table,
# CSV files and a plot (examples/apps_report.py).
#
#   bash examples/run_apps.sh [--quick] [OUTDIR]       (default OUTDIR: bench-results/apps)
#
# Every run is repeated APPS_REPS times (3; 1 with --quick), the implementations taking
# turns, and the report takes the median: this machine's load drifts (other jobs, 4 ranks
# on 2 cores), and taking turns spreads the drift over all of them. A component that
# crashed or timed out is not tried again.
#
# With MPICH as a second host (issue 24): where APPS_MPICH_BUILD_DIR (default build-mpich,
# built against MPICH: scripts/main.sh does it) has the examples, the same applications
# built for MPICH run under mpiexec.mpich alone ("mpich": MPICH's own RMA, ch4) and with the
# MPICH build of libfastrma-mpi.so preloaded ("fastrma-mpich"); the report compares those
# two in a table of their own, on APPS_MPICH_RANKS (2) ranks.
#
# Environment: APPS_BUILD_DIR (default build), APPS_RANKS (4), APPS_TIMEOUT (s per run, 60),
# APPS_IMPLS (default "default rdma sm ucx fastrma", plus "mpich fastrma-mpich" when the
# MPICH build is there: "default" is Open MPI's own choice, a name is --mca osc NAME,
# "fastrma" the preloaded drop-in; add pt2pt to try osc pt2pt, which serves only the runs
# with one thread per rank), APPS_MPICH_BUILD_DIR, APPS_MPICH_RANKS, MPIEXEC (mpiexec).
# Exit status: 1 when a fastrma run failed its check or did not finish (the host MPI's
# crashes are recorded in the table, not treated as failures of this job), 2 on bad usage.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

quick=0
out=bench-results/apps
while (($# > 0)); do
  case "$1" in
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_apps.sh: unknown flag '$1'" >&2; usage >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done

build=${APPS_BUILD_DIR:-build}
ranks=${APPS_RANKS:-4}
timeout_s=${APPS_TIMEOUT:-60}
mpich_build=${APPS_MPICH_BUILD_DIR:-build-mpich}
# MPICH's progress engine spins while a rank waits: oversubscribed (4 ranks on 2 cores) its
# own runs of kvstore and dsde do not finish in minutes. The MPICH pair runs on
# APPS_MPICH_RANKS (2) ranks.
mpich_ranks=${APPS_MPICH_RANKS:-2}
mpich_bin="$repo_root/$mpich_build/examples"
mpich_preload="$repo_root/$mpich_build/src/mpi/libfastrma-mpi.so"
default_impls="default rdma sm ucx fastrma"
if command -v mpiexec.mpich > /dev/null && [[ -x $mpich_bin/fft3d ]]; then
  default_impls+=" mpich fastrma-mpich"
fi
impls=(${APPS_IMPLS:-$default_impls})
mpiexec=${MPIEXEC:-mpiexec}
preload="$repo_root/$build/src/mpi/libfastrma-mpi.so"
bin="$repo_root/$build/examples"

for exe in fft3d kvstore dsde; do
  if [[ ! -x $bin/$exe ]]; then
    echo "run_apps.sh: $bin/$exe not built (is examples/ added to the top-level CMakeLists.txt?)" >&2
    exit 1
  fi
done

# The runs: label | program | arguments | timeout (s; empty: APPS_TIMEOUT). Sizes chosen so
# that every run of the main job takes seconds on 2 cores; --quick is for trying the script.
# kvstore gets a shorter limit: osc ucx serves MPI_Compare_and_swap in software, at a few
# thousand per second, and would spend minutes on it (it is reported as a timeout).
if ((quick)); then
  fft_args="--n 64 --iters 5"
  kv_args="--slots 16K --threads 2 --iters 3"
  dsde_rounds=500
  reps=${APPS_REPS:-1}
else
  fft_args="--n 128 --iters 12"
  kv_args="--slots 64K --threads 2 --iters 5"
  dsde_rounds=5000
  reps=${APPS_REPS:-3}
fi
runs=(
  "fft3d|fft3d|$fft_args --sync lock"
  "kvstore|kvstore|$kv_args|30"
  "dsde_barrier|dsde|--rounds $dsde_rounds --term barrier"
  "dsde_counter|dsde|--rounds $dsde_rounds --term counter"
)
cxx_run=""
[[ -x $bin/kvstore_cxx ]] && cxx_run="kvstore_cxx|kvstore_cxx|$kv_args"

mkdir -p "$out/raw"
rm -f "$out"/raw/*.log
runs_tsv="$out/raw/runs.tsv"
printf 'label\timpl\trep\trc\tseconds\tlog\tcommand\n' > "$runs_tsv"
{
  echo "host: $(uname -srm), $(nproc) cores"
  echo "mpi: $("$mpiexec" --version 2>/dev/null | head -n 1)"
  echo "ranks: $ranks, repetitions: $reps, timeout per run: ${timeout_s}s, quick: $quick"
  echo "drop-in: $([[ -e $preload ]] && echo "$preload" || echo "not built")"
  if [[ " ${impls[*]} " == *" mpich "* ]]; then
    echo "mpich: $(mpiexec.mpich --version 2>/dev/null | grep -m1 -i version | tr -s ' '), binaries $mpich_bin"
    echo "drop-in for MPICH: $([[ -e $mpich_preload ]] && echo "$mpich_preload" || echo "not built"), ranks: $mpich_ranks"
  fi
  echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
} > "$out/raw/settings.txt"

mpiexec_base=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
              "$mpiexec" -n "$ranks" --oversubscribe --bind-to none)

declare -A given_up=()  # label.impl -> why (crash, timeout, missing library)

# run_one LABEL IMPL REP TIMEOUT PROGRAM ARGS...
run_one() {
  local label=$1 impl=$2 rep=$3 limit=$4 prog=$5
  shift 5
  [[ -n ${given_up[$label.$impl]:-} ]] && return
  local log="$out/raw/$label.$impl.$rep.log"
  local cmd=("${mpiexec_base[@]}") dir=$bin lib=$preload
  case "$impl" in
    mpich | fastrma-mpich)
      # MPICH's launcher (hydra): no Open MPI options; it oversubscribes by itself.
      cmd=(mpiexec.mpich -n "$mpich_ranks")
      dir=$mpich_bin lib=$mpich_preload ;;
  esac
  case "$impl" in
    mpich) ;;
    fastrma-mpich)
      if [[ ! -e $lib ]]; then
        printf '%s\t%s\t%s\t%s\t0\t%s\t%s\n' "$label" "$impl" "$rep" "missing" "$log" "-" >> "$runs_tsv"
        echo "drop-in library for MPICH not built: $lib" > "$log"
        given_up[$label.$impl]=missing
        return
      fi
      cmd+=(-genv LD_PRELOAD "$lib") ;;
    fastrma)
      if [[ ! -e $preload ]]; then
        printf '%s\t%s\t%s\t%s\t0\t%s\t%s\n' "$label" "$impl" "$rep" "missing" "$log" "-" >> "$runs_tsv"
        echo "drop-in library not built: $preload" > "$log"
        given_up[$label.$impl]=missing
        return
      fi
      cmd+=(-x "LD_PRELOAD=$preload") ;;
    any|default) ;;
    *) cmd+=(--mca osc "$impl") ;;
  esac
  cmd+=("$dir/$prog" "$@")
  printf '  %-13s %-8s #%s ' "$label" "$impl" "$rep"
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "${cmd[@]}" > "$log" 2>&1 < /dev/null || rc=$?
  t1=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local result
  result=$(grep -m1 '^RESULT ' "$log" | grep -o 'check=[A-Z]*' || true)
  echo "rc=$rc ${result:-no result} (${secs}s)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$impl" "$rep" "$rc" "$secs" "$log" "${cmd[*]}" >> "$runs_tsv"
  # A crash (signal), a timeout or a refusal will not go away on the next try.
  if ((rc == 124 || rc == 137 || rc > 128)) || grep -q 'does not support MPI_THREAD_MULTIPLE' "$log"; then
    given_up[$label.$impl]=rc$rc
  fi
}

echo "run_apps.sh: $ranks ranks, implementations: ${impls[*]}; logs in $out/raw/"
for ((rep = 1; rep <= reps; ++rep)); do
  for spec in "${runs[@]}"; do
    IFS='|' read -r label prog args limit <<< "$spec"
    for impl in "${impls[@]}"; do
      # shellcheck disable=SC2086  # args is a word list on purpose
      run_one "$label" "$impl" "$rep" "${limit:-$timeout_s}" "$prog" $args
    done
  done
  if [[ -n $cxx_run ]]; then
    IFS='|' read -r label prog args limit <<< "$cxx_run"
    # shellcheck disable=SC2086
    run_one "$label" any "$rep" "${limit:-$timeout_s}" "$prog" $args
  fi
done

python3 "$repo_root/examples/apps_report.py" "$out"
