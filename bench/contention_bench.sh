#!/usr/bin/env bash
# contention_bench.sh — how fastrma's waiting holds up when the cores are taken: 4 ranks of
# bench/contended_wait (lock_all + put + flush, fence, exclusive-lock and contended-lock
# loops) at nice NICE beside HOGS busy processes at nice 0, under the drop-in and under Open
# MPI's own RMA (default osc and osc sm), ROUNDS times interleaved, in one run.
#
# usage: bash bench/contention_bench.sh [BUILD_DIR] [ROUNDS] [ITERS]
#   BUILD_DIR  default build (needs bench/contended_wait and src/mpi/libfastrma-mpi.so)
#   ROUNDS     default 3; ITERS default 20000 (fence and lock phases run ITERS/8)
#   HOGS (env) busy processes beside the ranks, default 2 (0: a quiet machine)
#   NICE (env) the ranks' nice value, default 10
#   PROGRAMS (env) plain MPI programs also run, whole, under each implementation in each
#              round (e.g. build/tests/dropin/dropin_sync): phase run:NAME, its wall time in
#              microseconds (a program that fails under an implementation is reported, not timed)
# Prints every run's CSV lines (contended_wait,IMPL,PHASE,US: microseconds per iteration of the
# phase, slowest rank), then per phase the median
# over rounds for each implementation and dropin / the better of Open MPI's two.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
rounds=${2:-3}
iters=${3:-20000}
hogs=${HOGS:-2}
nice_value=${NICE:-10}
bin=$build/bench/contended_wait
lib=$build/src/mpi/libfastrma-mpi.so
[ -x "$bin" ] || { echo "contention_bench.sh: $bin not built" >&2; exit 2; }
[ -f "$lib" ] || { echo "contention_bench.sh: $lib not built" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=(nice -n "$nice_value" "${MPIEXEC:-mpiexec}" -n 4 --oversubscribe --bind-to none)

hog_pids=()
results=$(mktemp)
cleanup() {
    [ ${#hog_pids[@]} -gt 0 ] && kill "${hog_pids[@]}" 2>/dev/null
    rm -f "$results"
}
trap cleanup EXIT
for ((h = 0; h < hogs; ++h)); do
    bash -c 'while :; do :; done' &
    hog_pids+=($!)
done

args_of() {
    case $1 in
        dropin) echo "-x LD_PRELOAD=$lib" ;;
        ompi-default) echo "" ;;
        ompi-sm) echo "--mca osc sm" ;;
    esac
}

for ((r = 1; r <= rounds; ++r)); do
    for impl in dropin ompi-default ompi-sm; do
        # shellcheck disable=SC2046
        if ! out=$(timeout 900 "${launch[@]}" $(args_of "$impl") "$bin" "$impl" "$iters" 2>&1); then
            echo "contention_bench.sh: round $r, $impl failed:" >&2
            printf '%s\n' "$out" | tail -5 >&2
            continue
        fi
        printf '%s\n' "$out" | grep '^contended_wait,' | tee -a "$results"
        for prog in ${PROGRAMS:-}; do
            t0=$(date +%s%N)
            # shellcheck disable=SC2046
            if ! out=$(timeout 900 "${launch[@]}" $(args_of "$impl") "$prog" 2>&1); then
                echo "contention_bench.sh: round $r, $impl, $prog failed:" >&2
                printf '%s\n' "$out" | tail -3 >&2
                continue
            fi
            echo "contended_wait,$impl,run:$(basename "$prog"),$((($(date +%s%N) - t0) / 1000))" | tee -a "$results"
        done
    done
done

echo
echo "HOGS=$hogs NICE=$nice_value ITERS=$iters: median over $rounds rounds (us per iteration), dropin / best of Open MPI's:"
awk -F, '
    { v[$3 "," $2] = v[$3 "," $2] " " $4; phases[$3] = 1 }
    function median(list,   a, n, i, j, t) {
        n = split(list, a, " ")
        if (n == 0) return -1
        for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        printf "%-14s %10s %12s %10s %8s\n", "phase", "dropin", "ompi-default", "ompi-sm", "ratio"
        for (p in phases) {
            d = median(v[p ",dropin"]); o = median(v[p ",ompi-default"]); s = median(v[p ",ompi-sm"])
            best = (o < 0 || (s >= 0 && s < o)) ? s : o
            printf "%-14s %10.2f %12.2f %10.2f %8.2f\n", p, d, o, s, (best > 0 && d >= 0) ? d / best : -1
        }
    }' "$results"
