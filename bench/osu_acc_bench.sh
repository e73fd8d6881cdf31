#!/usr/bin/env bash
# osu_acc_bench.sh — OSU 7.4's osu_acc_latency shapes (default MPI_CHAR and -T mpi_int;
# allocate and create windows; -s flush and -s lock; 8 B, 4 KiB, 64 KiB, 1 MiB) and an
# 8-byte fetch_and_op + flush, measured by bench/osu_acc under the drop-in and Open MPI's own
# components in one run, ROUNDS times alternating.
#
# usage: bash bench/osu_acc_bench.sh [BUILD_DIR] [ROUNDS] [ITER_SCALE]
#   BUILD_DIR   default build (needs bench/osu_acc and src/mpi/libfastrma-mpi.so)
#   ROUNDS      default 3; ITER_SCALE multiplies osu_acc's iteration counts (default 1)
# Implementations (IMPLS, default "dropin default sm"): dropin (libfastrma-mpi.so preloaded),
# default (Open MPI's own choice), sm (--mca osc sm; allocate windows only: osc sm serves no
# create window), before (the drop-in in BEFORE_DIR, with its libfastrma.so.0 beside it: an
# earlier build, for before/after tables). Prints every
# run's CSV line (osu_acc,IMPL,SHAPE,BYTES,MEDIAN_US,MIN_US), then per point the median over
# rounds of each implementation's median, its range, and before's and dropin's / best of
# Open MPI's (< 1: fastrma faster).
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
rounds=${2:-3}
scale=${3:-1}
bin=$build/bench/osu_acc
lib=$build/src/mpi/libfastrma-mpi.so
[ -x "$bin" ] || { echo "osu_acc_bench.sh: $bin not built" >&2; exit 2; }
[ -f "$lib" ] || { echo "osu_acc_bench.sh: $lib not built" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=("${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none)

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; ++r)); do
    for impl in ${IMPLS:-dropin default sm}; do
        args=()
        case $impl in
            dropin) args=(-x "LD_PRELOAD=$lib") ;;
            before) args=(-x "LD_PRELOAD=$BEFORE_DIR/libfastrma-mpi.so" -x "LD_LIBRARY_PATH=$BEFORE_DIR") ;;
            sm) args=(--mca osc sm -x OSU_ACC_WINDOWS=allocate) ;;
        esac
        if ! out=$(timeout 600 "${launch[@]}" "${args[@]}" "$bin" "$impl" "$scale" 2>&1); then
            echo "osu_acc_bench.sh: round $r, $impl failed:" >&2
            printf '%s\n' "$out" | tail -5 >&2
            continue
        fi
        printf '%s\n' "$out" | grep '^osu_acc,' | tee -a "$results"
    done
done

echo
echo "median over $rounds rounds of each run's median (us) [range], and dropin / best of default, sm:"
python3 - "$results" <<'PY'
import sys, statistics
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    _, impl, shape, size, med, _min = line.strip().split(",")
    v[(shape, int(size), impl)].append(float(med))
points = sorted({(s, b) for s, b, _ in v}, key=lambda p: (p[0].split("-")[0], p[0], p[1]))
print(f"{'shape':28} {'bytes':>8} {'before':>22} {'dropin':>22} {'default':>22} {'sm':>22} {'before/best':>11} {'dropin/best':>11}")
def cell(k):
    if k not in v: return f"{'-':>22}", None
    m = statistics.median(v[k])
    return f"{m:9.3f} [{min(v[k]):.3f}-{max(v[k]):.3f}]".rjust(22), m
for s, b in points:
    p, pm = cell((s, b, "before"))
    d, dm = cell((s, b, "dropin"))
    o, om = cell((s, b, "default"))
    m, mm = cell((s, b, "sm"))
    best = min(x for x in (om, mm) if x is not None) if (om or mm) else None
    ratio = lambda x: f"{x / best:11.2f}" if x and best else f"{'-':>11}"
    print(f"{s:28} {b:8d} {p} {d} {o} {m} {ratio(pm)} {ratio(dm)}")
PY
