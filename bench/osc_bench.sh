#!/usr/bin/env bash
# osc_bench.sh — the osc component's per-call cost against the drop-in and Open MPI's own
# components: bench/osc_latency (8-byte put + flush, get + flush, bare put, rank 0 to rank 1
# on an allocate window in a lock_all epoch) under each implementation in turn, ROUNDS times
# interleaved, in one run.
#
# usage: bash bench/osc_bench.sh [BUILD_DIR] [ROUNDS] [ITERATIONS]
#   BUILD_DIR   default build (needs osc_latency, mca_osc_fastrma, fastrma-mpi built)
#   ROUNDS      default 5; ITERATIONS per op and run, default 20000
# Prints every run's CSV line (osc_latency,IMPL,OP,MIN_NS,MEDIAN_NS), then per op the median
# over rounds of each implementation's median and the ratios to the component's.
# Implementations: osc (--mca osc fastrma), osc-nocheck (the same with --mca mpi_param_check 0:
# Open MPI's bindings skip their argument checks), dropin (libfastrma-mpi.so preloaded), sm,
# rdma, ucx (--mca osc NAME). MPIEXEC (default mpiexec) launches; as root it allows it.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
rounds=${2:-5}
iterations=${3:-20000}
bin=$build/bench/osc_latency
[ -x "$bin" ] || { echo "osc_bench.sh: $bin not built" >&2; exit 2; }
ompi_dir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[ -n "$ompi_dir" ] || ompi_dir=$(ompi_info --path pkglibdir | sed 's/.*: *//')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=("${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none)

args_of() {
    case $1 in
        osc) echo "--mca osc fastrma --mca mca_component_path $build/src/mpi/osc:$ompi_dir" ;;
        osc-nocheck) echo "$(args_of osc) --mca mpi_param_check 0" ;;
        dropin) echo "-x LD_PRELOAD=$build/src/mpi/libfastrma-mpi.so" ;;
        *) echo "--mca osc $1" ;;
    esac
}

impls=(osc osc-nocheck dropin sm rdma ucx)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; ++r)); do
    for impl in "${impls[@]}"; do
        # shellcheck disable=SC2046
        if ! out=$(timeout 120 "${launch[@]}" $(args_of "$impl") "$bin" "$impl" "$iterations" 2>&1); then
            echo "osc_bench.sh: round $r, $impl failed:" >&2
            printf '%s\n' "$out" | tail -5 >&2
            continue
        fi
        printf '%s\n' "$out" | grep '^osc_latency,' | tee -a "$results"
    done
done

echo
echo "median over $rounds rounds of each run's median (ns), and implementation / osc:"
awk -F, '
    { v[$3 "," $2] = v[$3 "," $2] " " $5; ops[$3] = 1; impls[$2] = 1 }
    function median(list,   a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        n_impls = split("osc osc-nocheck dropin sm rdma ucx", order, " ")
        printf "%-10s", "op"
        for (k = 1; k <= n_impls; ++k) if (order[k] in impls) printf " %16s", order[k]
        printf "\n"
        for (op in ops) {
            base = median(v[op ",osc"])
            printf "%-10s", op
            for (k = 1; k <= n_impls; ++k) {
                if (!(order[k] in impls)) continue
                m = median(v[op "," order[k]])
                printf " %8.1f (%4.2fx)", m, (base > 0 ? m / base : 0)
            }
            printf "\n"
        }
    }' "$results"
