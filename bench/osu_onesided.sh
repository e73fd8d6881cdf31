#!/usr/bin/env bash
# osu_onesided.sh — OSU 7.4's one-sided benchmarks (built by the user from OSU's own release,
# which this repository does not carry) at 2 ranks, under the drop-in and Open MPI's own
# components in one session, ROUNDS times alternating, and a table of medians and ratios.
#
# usage: bash bench/osu_onesided.sh OSU_ONESIDED_DIR [BUILD_DIR] [ROUNDS]
#   OSU_ONESIDED_DIR  the built c/mpi/one-sided folder of OSU 7.4 (./configure CC=mpicc.openmpi
#                     CXX=mpicxx.openmpi && make -C c/util && make -C c/mpi/one-sided)
#   BUILD_DIR         default build (needs src/mpi/libfastrma-mpi.so); ROUNDS default 3
# Environment:
#   OSU_SHAPES  space-separated shapes BENCH:WIN:SYNC[:TYPE] (default: the issue-37 table:
#               put/get latency and bandwidth, allocate and create, flush and lock; acc
#               latency MPI_CHAR and mpi_int; fop and cas latency)
#   OSU_SIZES   -m argument (default 8:1048576, latency-only benches of 8 bytes ignore it)
#   OSU_ITERS   -i argument (default OSU's own); IMPLS (default "dropin default sm"; add
#               osc for fastrma's Open MPI component, --mca osc fastrma, printed beside the
#               drop-in with osc / dropin)
# Prints each run's points, then per shape and size the median over rounds of each
# implementation, its range, and dropin / best of Open MPI's (time; bandwidth inverted, so
# < 1 always means fastrma is ahead). osc sm serves allocate windows only.
set -u -o pipefail

osu=${1:?usage: osu_onesided.sh OSU_ONESIDED_DIR [BUILD_DIR] [ROUNDS]}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${2:-$repo/build}
rounds=${3:-3}
lib=$build/src/mpi/libfastrma-mpi.so
[ -x "$osu/osu_put_bw" ] || { echo "osu_onesided.sh: $osu/osu_put_bw not built" >&2; exit 2; }
[ -f "$lib" ] || { echo "osu_onesided.sh: $lib not built" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=("${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none)
sizes=${OSU_SIZES:-8:1048576}
shapes=${OSU_SHAPES:-"put_latency:allocate:flush put_latency:create:flush get_latency:allocate:flush
get_latency:create:flush put_bw:allocate:flush put_bw:create:flush get_bw:allocate:flush
get_bw:create:flush put_bw:allocate:lock get_bw:allocate:lock acc_latency:allocate:flush
acc_latency:allocate:flush:mpi_int acc_latency:allocate:lock acc_latency:create:flush
fop_latency:allocate:flush fop_latency:create:flush cas_latency:allocate:flush:mpi_int
cas_latency:allocate:lock:mpi_int cas_latency:allocate:lock cas_latency:create:flush"}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; ++r)); do
    for shape in $shapes; do
        IFS=: read -r bench win sync type <<<"$shape"
        args=(-w "$win" -s "$sync")
        case $bench in fop_latency | cas_latency) ;; *) args+=(-m "$sizes") ;; esac
        [ -n "$type" ] && args+=(-T "$type")
        [ -n "${OSU_ITERS:-}" ] && args+=(-i "$OSU_ITERS")
        for impl in ${IMPLS:-dropin default sm}; do
            extra=()
            case $impl in
                dropin) extra=(-x "LD_PRELOAD=$lib") ;;
                sm) [ "$win" = allocate ] || continue; extra=(--mca osc sm) ;;
                osc)
                    ompi_dir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
                    extra=(--mca osc fastrma --mca mca_component_path "$build/src/mpi/osc:$ompi_dir") ;;
            esac
            if ! out=$(timeout 600 "${launch[@]}" "${extra[@]}" "$osu/osu_$bench" "${args[@]}" 2>&1); then
                echo "osu_onesided.sh: round $r, $impl, $shape failed:" >&2
                printf '%s\n' "$out" | tail -3 >&2
                continue
            fi
            printf '%s\n' "$out" | awk -v s="$shape" -v i="$impl" '/^[0-9]+ +[0-9.]+$/ {print "osu," i "," s "," $1 "," $2}' |
                tee -a "$results"
        done
    done
done

echo
echo "median over $rounds rounds (us, or MB/s for *_bw) [range]; dropin/best: fastrma's time / best Open MPI time"
python3 - "$results" <<'PY'
import sys, statistics
from collections import defaultdict
v = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    _, impl, shape, size, val = line.strip().split(",")
    key = (shape, int(size))
    if key not in order:
        order.append(key)
    v[key + (impl,)].append(float(val))
def cell(k):
    x = v.get(k)
    if not x:
        return "-", None
    m = statistics.median(x)
    return f"{m:.3g} [{min(x):.3g}-{max(x):.3g}]", m
has_osc = any(k[2] == "osc" for k in v)
print(f"{'shape':36} {'bytes':>8} {'dropin':>24} {'default':>24} {'sm':>24} {'dropin/best':>11}"
      + (f" {'osc':>24} {'osc/dropin':>10}" if has_osc else ""))
for shape, size in order:
    bw = shape.split(":")[0].endswith("_bw")
    cells = {i: cell((shape, size, i)) for i in ("dropin", "default", "sm")}
    others = [m for i, (_, m) in cells.items() if i != "dropin" and m]  # (Open MPI's own)
    ratio = "-"
    if cells["dropin"][1] and others:
        d = cells["dropin"][1]
        ratio = f"{(max(others) / d if bw else d / min(others)):.2f}"
    line = f"{shape:36} {size:>8} {cells['dropin'][0]:>24} {cells['default'][0]:>24} {cells['sm'][0]:>24} {ratio:>11}"
    if has_osc:
        o, om = cell((shape, size, "osc"))
        d = cells["dropin"][1]
        line += f" {o:>24} {((d / om if bw else om / d) if om and d else float('nan')):>10.2f}"
    print(line)
PY
