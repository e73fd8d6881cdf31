#!/bin/bash
# run_example.sh MODE PRELOAD MPIEXEC [mpiexec flags...] -- PROGRAM [ARGS...]
#
# Runs one example application under mpiexec (ctest's runner, examples/CMakeLists.txt) and
# passes only when
#   - the job exits with 0,
#   - rank 0 printed a line "RESULT ... check=PASS",
#   - the RMA named in that line is the one MODE asks for:
#       host     the host MPI alone ("rma=host:..."; nothing is preloaded),
#       fastrma  PRELOAD (libfastrma-mpi.so, possibly behind a sanitizer runtime) is
#                preloaded into the ranks with -x LD_PRELOAD and must serve MPI_Win_*
#                ("rma=fastrma"),
#       any      whatever the program reports (kvstore_cxx, linked with fastrma itself).
set -u
mode=$1 preload=$2 mpiexec=$3
shift 3
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    flags+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "run_example.sh: no program given"; exit 2; }

cmd=("$mpiexec" "${flags[@]}")
case "$mode" in
    host|any) ;;
    fastrma) cmd+=(-x "LD_PRELOAD=$preload") ;;
    *) echo "run_example.sh: unknown mode $mode"; exit 2 ;;
esac
cmd+=("$@")

echo "run_example.sh: ${cmd[*]}"
out=$("${cmd[@]}" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
    echo "run_example.sh: FAIL: the job exited with $rc"
    exit 1
fi
result=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
if [ -z "$result" ]; then
    echo "run_example.sh: FAIL: no RESULT line"
    exit 1
fi
case "$result" in
    *" check=PASS"*) ;;
    *) echo "run_example.sh: FAIL: the result check did not pass"; exit 1 ;;
esac
case "$mode" in
    host)
        case "$result" in *" rma=host:"*) ;; *) echo "run_example.sh: FAIL: not served by the host MPI"; exit 1 ;; esac ;;
    fastrma)
        case "$result" in *" rma=fastrma"*) ;; *) echo "run_example.sh: FAIL: the preloaded fastrma did not serve MPI_Win_*"; exit 1 ;; esac ;;
esac
echo "run_example.sh: PASS ($mode)"
exit 0
