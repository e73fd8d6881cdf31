#!/bin/bash
# run_twohost.sh WHERE MODE PRELOAD NP TIMEOUT MPIEXEC [mpiexec flags...] -- PROGRAM [ARGS...]
#
# Runs one MPI program with NP ranks on two hosts and checks, beyond its exit code, which
# implementation served its windows (every rank prints FASTRMA_STATS's line at finalize).
#   WHERE    twohost: through scripts/twohost.sh run (this path): ranks 0..NP/2-1 on host A,
#                     the rest on host B, each host its own network and UTS namespace;
#            nodes:   on this machine, MPMD: the first NP/2 ranks with FASTRMA_NODE_NAME=a,
#                     the others with b (fastrma then treats them as two nodes; the host MPI
#                     still sees one).
#   MODE     am:   fastrma with FASTRMA_TRANSPORT left at auto: every rank must report
#                  windows > 0 and windows_am > 0 (peers on the other host by active messages);
#            ofi:  FASTRMA_TRANSPORT=shm+ofi over tcp;ofi_rxm bound to frma0 (twohost) or lo
#                  (nodes): peers on the other host by libfabric, on this one by shared
#                  memory with their words through libfabric; every rank must report
#                  windows_ofi > 0;
#            host: the host MPI alone: no fastrma line may appear.
#   PRELOAD  the drop-in (libfastrma-mpi.so, behind a sanitizer runtime if any) to preload
#            into the ranks, or "none" (a program linked with fastrma).
#   TIMEOUT  seconds for the whole run; the job is ended (and the hosts removed) 15 s
#            before, so that ctest's own limit never leaves namespaces behind.
# Variables reach the ranks only as mpiexec options (-x NAME=VALUE for Open MPI, or what
# TWOHOST_SETENV names, e.g. -genv for hydra), also on host B. LD_LIBRARY_PATH, when set,
# is passed on too. Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
where=$1 mode=$2 preload=$3 np=$4 limit=$5 mpiexec=$6
shift 6
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    flags+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "run_twohost.sh: no program given"; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
twohost=$here/../../scripts/twohost.sh
setenv_opt=${TWOHOST_SETENV:--x}

# The variables of one app context.
vars=()
setenv() {
    if [ "$setenv_opt" = -x ]; then vars+=(-x "$1=$2"); else vars+=("$setenv_opt" "$1" "$2"); fi
}
iface=frma0
[ "$where" = nodes ] && iface=lo
case "$mode" in
    am|ofi|host) ;;
    *) echo "run_twohost.sh: unknown mode $mode"; exit 2 ;;
esac
# DROPIN_MODE: which run a drop-in test program is in (tests/dropin/run_dropin.sh).
case "$mode" in
    am) setenv DROPIN_MODE fastrma ;;
    *) setenv DROPIN_MODE "$mode" ;;
esac
if [ "$mode" != host ]; then
    setenv FASTRMA_STATS 1
    [ "$preload" != none ] && setenv LD_PRELOAD "$preload"
fi
if [ "$mode" = ofi ]; then
    setenv FASTRMA_TRANSPORT shm+ofi
    setenv FASTRMA_OFI_PROVIDER 'tcp;ofi_rxm'
    setenv FI_TCP_IFACE $iface
    setenv FI_SOCKETS_IFACE $iface
fi
[ -n "${LD_LIBRARY_PATH:-}" ] && setenv LD_LIBRARY_PATH "$LD_LIBRARY_PATH"
# No idle yields in Open MPI, on the ranks themselves too: yielding threads starve the
# hosts' TCP here for up to a minute (scripts/twohost.sh; docs/twohost.md, "Yielding and
# the scheduler").
[ "$setenv_opt" = -x ] && setenv OMPI_MCA_mpi_yield_when_idle 0
for kv in ${TWOHOST_EXTRA_ENV:-}; do setenv "${kv%%=*}" "${kv#*=}"; done

inner=$((limit > 30 ? limit - 15 : limit))
if [ "$where" = twohost ]; then
    cmd=("$mpiexec" -n "$np" "${flags[@]}" "${vars[@]}" "$@")
    # A deadline, not a duration: waiting for another job's hosts counts against ctest's limit.
    run=(bash "$twohost" run --deadline "$(($(date +%s) + inner))")
    [ "$setenv_opt" = -x ] || run+=(--mpich)
    run+=(-- "${cmd[@]}")
elif [ "$where" = nodes ]; then
    half=$((np / 2))
    base=("${vars[@]}")
    vars=("${base[@]}")
    setenv FASTRMA_NODE_NAME a
    part_a=("${vars[@]}")
    vars=("${base[@]}")
    setenv FASTRMA_NODE_NAME b
    part_b=("${vars[@]}")
    cmd=("$mpiexec" "${flags[@]}" -n "$half" "${part_a[@]}" "$@" : -n "$((np - half))" "${part_b[@]}" "$@")
    run=(timeout -k 10 "$inner" "${cmd[@]}")
else
    echo "run_twohost.sh: WHERE is twohost or nodes, not $where"
    exit 2
fi

echo "run_twohost.sh: ${run[*]}"
out=$("${run[@]}" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 77 ] && [ "$where" = twohost ]; then
    echo "run_twohost.sh: SKIP: namespaces cannot be made here"
    exit 77
fi
if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "run_twohost.sh: the run did not end within $inner s"
    echo "run_twohost.sh: FAIL: exited with $rc"
    exit 1
fi

stats=$(printf '%s\n' "$out" | grep -o 'fastrma stats: windows=[0-9]* windows_am=[0-9]* windows_ofi=[0-9]*' || true)
lines=$(printf '%s\n' "$stats" | grep -c 'windows=' || true)
if [ "$mode" = host ]; then
    if [ "$lines" -ne 0 ]; then
        echo "run_twohost.sh: FAIL: fastrma served a host-only run"
        exit 1
    fi
    echo "run_twohost.sh: PASS (host MPI alone)"
    exit 0
fi
used=$(printf '%s\n' "$stats" | grep -c 'windows=[1-9]' || true)
if [ "$lines" -ne "$np" ] || [ "$used" -ne "$np" ]; then
    echo "run_twohost.sh: FAIL: expected $np stats lines with windows > 0, got $lines lines, $used with windows > 0"
    exit 1
fi
key=windows_am
[ "$mode" = ofi ] && key=windows_ofi
remote=$(printf '%s\n' "$stats" | grep -c "$key=[1-9]" || true)
if [ "$remote" -ne "$np" ]; then
    echo "run_twohost.sh: FAIL: expected $np ranks with $key > 0 (windows reaching the other host), got $remote"
    exit 1
fi
echo "run_twohost.sh: PASS (fastrma served all $np ranks, $key > 0 on each)"
exit 0
