#!/usr/bin/env bash
# ga_bench.sh — the Global Arrays pattern (bench/ga_pattern) on Open MPI's own one-sided
# components and on fastrma (the same binary with libfastrma-mpi.so preloaded), in one run.
#
# The configurations are interleaved (rep 1: sm rdma pt2pt fastrma, rep 2: ...) so that the
# machine's noise hits all of them alike; the table gives the median of the repetitions per
# phase and the ratio "osc time / fastrma time" (> 1: fastrma is faster).
#
# usage: scripts/ga_bench.sh [-n RANKS] [-r REPS] [-s SCALE] [-c CONFIGS] [-o OUTDIR] [-- extra ga_pattern args]
#   -n RANKS    ranks (default 2; --oversubscribe is added beyond 2)
#   -r REPS     repetitions of each configuration (default 3)
#   -s SCALE    ga_pattern --scale (default 1)
#   -c CONFIGS  space-separated list of osc components, "fastrma" (this tree's build) and
#               LABEL=DIR (another fastrma build: DIR holds its libfastrma.so.0 and
#               libfastrma-mpi.so, both preloaded; for before/after figures)
#               (default "sm rdma pt2pt fastrma"); ratios are against "fastrma" when present,
#               else against the last LABEL=DIR
#   -o OUTDIR   results.csv, table.md and logs (default ./ga-bench-results)
# environment: GA_PATTERN (binary, default build/bench/ga_pattern), FASTRMA_MPI_LIB (default
# build/src/mpi/libfastrma-mpi.so), GA_BENCH_TIMEOUT seconds per run (default 600).
# A configuration that fails or times out is reported as such and left out of the table.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ranks=2 reps=3 scale=1 configs="sm rdma pt2pt fastrma" outdir=./ga-bench-results
while getopts "n:r:s:c:o:h" opt; do
  case $opt in
    n) ranks=$OPTARG ;; r) reps=$OPTARG ;; s) scale=$OPTARG ;; c) configs=$OPTARG ;;
    o) outdir=$OPTARG ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
extra=("$@")

bin=${GA_PATTERN:-$repo/build/bench/ga_pattern}
lib=${FASTRMA_MPI_LIB:-$repo/build/src/mpi/libfastrma-mpi.so}
[ -x "$bin" ] || { echo "ga_bench.sh: no $bin (install the GA packages: scripts/setup.sh, then build)" >&2; exit 2; }
case " $configs " in *" fastrma "*) [ -f "$lib" ] || { echo "ga_bench.sh: no $lib" >&2; exit 2; } ;; esac
labels=""
for cfg in $configs; do labels+="${cfg%%=*} "; done
timeout_s=${GA_BENCH_TIMEOUT:-600}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpiexec --bind-to none -n "$ranks")
[ "$ranks" -gt 2 ] && mpi+=(--oversubscribe)

mkdir -p "$outdir/logs"
csv=$outdir/results.csv
: > "$csv"
status=0
for ((rep = 1; rep <= reps; ++rep)); do
  for cfg in $configs; do
    name=${cfg%%=*}
    log=$outdir/logs/$name-np$ranks-rep$rep.log
    if [ "$cfg" = fastrma ]; then
      cmd=("${mpi[@]}" -x LD_PRELOAD="$lib" "$bin" --label fastrma)
    elif [ "$name" != "$cfg" ]; then
      dir=${cfg#*=}
      cmd=("${mpi[@]}" -x LD_PRELOAD="$dir/libfastrma.so.0:$dir/libfastrma-mpi.so" "$bin" --label "$name")
    else
      cmd=("${mpi[@]}" --mca osc "$cfg" "$bin" --label "$cfg")
    fi
    echo "ga_bench.sh: rep $rep/$reps $cfg: ${cmd[*]} --scale $scale --csv $csv ${extra[*]}" >&2
    if ! timeout "$timeout_s" "${cmd[@]}" --scale "$scale" --csv "$csv" "${extra[@]}" > "$log" 2>&1; then
      echo "ga_bench.sh: $cfg (rep $rep) failed or timed out, see $log" >&2
      status=1
    fi
  done
done

python3 - "$csv" "$labels" "$configs" > "$outdir/table.md" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.reader(open(sys.argv[1])))
configs = sys.argv[2].split()
specs = sys.argv[3].split()
ours = [c.split("=")[0] for c in specs if c == "fastrma" or "=" in c]
ref = "fastrma" if "fastrma" in ours else (ours[-1] if ours else None)
t = defaultdict(list)   # (label, phase, shape) -> us/call of each rep
order = []
for label, ranks, phase, shape, nbytes, calls, secs, us in rows:
    key = (phase, shape)
    if key not in order: order.append(key)
    t[(label,) + key].append(float(us) if phase != "total" else float(secs))
oscs = [c for c in configs if c != ref]
head = ["phase", "shape"] + [f"{c} us" for c in configs] + ([f"{o}/{ref}" for o in oscs] if ref else [])
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for phase, shape in order:
    med = {c: statistics.median(t[(c, phase, shape)]) for c in configs if t.get((c, phase, shape))}
    unit = " s" if phase == "total" else ""
    cells = [phase, shape] + [f"{med[c]:.2f}{unit}" if c in med else "-" for c in configs]
    if ref:
        for o in oscs:
            cells.append(f"{med[o] / med[ref]:.2f}" if o in med and med.get(ref) else "-")
    print("| " + " | ".join(cells) + " |")
EOF
cat "$outdir/table.md"
echo "ga_bench.sh: medians of $reps runs, $ranks ranks; rows in $csv" >&2
exit $status
