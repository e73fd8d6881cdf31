#!/bin/bash
# run_dropin.sh MODE PRELOAD MPIEXEC NP_FLAG NP [mpiexec flags...] -- PROGRAM [ARGS...]
#
# Runs one drop-in test program under mpiexec with FASTRMA_STATS=1 and checks, beyond the
# program's own exit code, which implementation served its RMA:
#   MODE=host     the host MPI alone: no "fastrma stats:" line may appear;
#   MODE=fastrma  PRELOAD (libfastrma-mpi.so, possibly behind a sanitizer runtime) is
#                 preloaded into the ranks (mpiexec -x / -genv): every rank must print
#                 "fastrma stats: windows=N" with N > 0, i.e. its windows were fastrma's;
#   MODE=linked   the program was linked with -lfastrma-mpi before -lmpi (PRELOAD unused):
#                 the same check as fastrma;
#   MODE=osc      Open MPI's osc component mca_osc_fastrma.so serves the windows (no preload):
#                 mpiexec gets --mca osc fastrma and --mca mca_component_path PRELOAD (the
#                 build's component directory and Open MPI's own); the same check as fastrma;
#   MODE=ofi      as fastrma, over the network transport (FASTRMA_TRANSPORT=ofi, libfabric's
#                 default provider here tcp;ofi_rxm, bound to the loopback interface): every
#                 rank must also report windows_ofi=N, N > 0.
set -u
mode=$1 preload=$2 mpiexec=$3 np_flag=$4 np=$5
shift 5
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    flags+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "run_dropin.sh: no program given"; exit 2; }

# DROPIN_MODE tells a program which run it is in, only so that it can skip a check the host
# MPI is known to fail (see dropin_fortran.f90); the programs check the same values otherwise.
# RUN_DROPIN_HOST_ENV: NAME=VALUE words set in the host-alone run only.
# RUN_DROPIN_SETENV: how this mpiexec sets a variable in the ranks: -x NAME=VALUE (Open
# MPI, the default) or -genv NAME VALUE (hydra: MPICH).
setenv() {
    if [ "${RUN_DROPIN_SETENV:--x}" = -x ]; then cmd+=(-x "$1=$2"); else cmd+=("$RUN_DROPIN_SETENV" "$1" "$2"); fi
}
cmd=("$mpiexec" "$np_flag" "$np" "${flags[@]}")
setenv FASTRMA_STATS 1
setenv DROPIN_MODE "$mode"
case "$mode" in
    host) for kv in ${RUN_DROPIN_HOST_ENV:-}; do setenv "${kv%%=*}" "${kv#*=}"; done ;;
    fastrma) setenv LD_PRELOAD "$preload" ;;
    ofi)
        setenv LD_PRELOAD "$preload"
        setenv FASTRMA_TRANSPORT ofi
        setenv FI_TCP_IFACE lo
        setenv FI_SOCKETS_IFACE lo
        ;;
    linked) ;;
    osc) cmd+=(--mca osc fastrma --mca mca_component_path "$preload") ;;
    *) echo "run_dropin.sh: unknown mode $mode"; exit 2 ;;
esac
cmd+=("$@")

echo "run_dropin.sh: ${cmd[*]}"
out=$(FASTRMA_STATS=1 DROPIN_MODE=$mode "${cmd[@]}" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
    echo "run_dropin.sh: FAIL: the program exited with $rc"
    exit 1
fi

stats=$(printf '%s\n' "$out" | grep -o 'fastrma stats: windows=[0-9]*' || true)
if [ "$mode" = host ]; then
    if [ -n "$stats" ]; then
        echo "run_dropin.sh: FAIL: fastrma served a host-only run"
        exit 1
    fi
    echo "run_dropin.sh: PASS (host MPI alone)"
    exit 0
fi
lines=$(printf '%s\n' "$stats" | grep -c . || true)
used=$(printf '%s\n' "$stats" | grep -c 'windows=[1-9]' || true)
if [ "$lines" -ne "$np" ] || [ "$used" -ne "$np" ]; then
    echo "run_dropin.sh: FAIL: expected $np stats lines with windows > 0, got $lines lines, $used with windows > 0"
    exit 1
fi
if [ "$mode" = ofi ]; then
    ofi=$(printf '%s\n' "$out" | grep -c 'windows_ofi=[1-9]' || true)
    if [ "$ofi" -ne "$np" ]; then
        echo "run_dropin.sh: FAIL: expected $np ranks with windows_ofi > 0, got $ofi"
        exit 1
    fi
fi
echo "run_dropin.sh: PASS (fastrma served all $np ranks)"
exit 0
