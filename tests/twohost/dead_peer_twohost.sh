#!/usr/bin/env bash
# dead_peer_twohost.sh MPIEXEC BINARY [MPIEXEC FLAGS...] — tests/mpi/dead_peer on the two
# hosts of scripts/twohost.sh: 4 ranks, 0 and 1 on host A, 2 and 3 on host B; the victim is
# rank 3. Under a launcher that lets the survivors live on (orte_enable_recovery), every
# survivor's waiting call must fail naming rank 3 within seconds: ranks 0 and 1 learn it
# through their connection to it closing (transport/peer_links.hpp: the hosts have their own
# host names, so their processes watch each other as processes on other hosts), rank 2 by
# its pid. Over am (peers on the other host by active messages) and over ofi (tcp;ofi_rxm):
# lock, lock_all, fence, PSCW and flush.
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
MPIEXEC=$1 BIN=$2
shift 2
FLAGS=("$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
twohost=$here/../../scripts/twohost.sh
fail=0
# run TRANSPORT MODE [again]: every survivor (ranks 0, 1, 2) prints PASS for the mode; in flush, the
# survivors on the victim's host aside (rank 2's put to its node peer is a store into memory
# they share, complete at once: the call succeeds).
run() {
  # (no idle yields in Open MPI: see run_twohost.sh)
  local transport=$1 mode=$2 env=(-x OMPI_MCA_mpi_yield_when_idle=0) out rc passes ranks=012 want=3
  [ "$mode" = flush ] && ranks=01 want=2
  [ "$transport" = ofi ] && env+=(-x FASTRMA_TRANSPORT=shm+ofi -x "FASTRMA_OFI_PROVIDER=tcp;ofi_rxm" -x FI_TCP_IFACE=frma0
    -x FI_SOCKETS_IFACE=frma0)
  # The survivors leave with _exit once they have a verdict (2 s after it); the launcher,
  # across the hosts, then does not end: the run is ended once every survivor gave its
  # verdict (or after 30 s: twohost.sh may hand the output over only at the end), and the
  # hosts removed with what still runs in them.
  local log
  log=$(mktemp)
  bash "$twohost" run --timeout 30 -- "$MPIEXEC" --mca orte_enable_recovery 1 -n 4 "${FLAGS[@]}" "${env[@]}" \
    "$BIN" "$mode" >"$log" 2>&1 &
  local job=$! verdicts
  while kill -0 "$job" 2>/dev/null; do
    verdicts=$(grep -cE "^(PASS|FAIL) rank [012] " "$log")
    [ "$verdicts" -ge 3 ] && break
    sleep 0.5
  done
  if kill -0 "$job" 2>/dev/null; then
    sleep 0.5
    bash "$twohost" down >/dev/null 2>&1
    kill "$job" 2>/dev/null
  fi
  wait "$job"
  rc=$?
  out=$(cat "$log")
  rm -f "$log"
  if [ "$rc" = 77 ]; then
    echo "dead_peer_twohost.sh: SKIP: namespaces cannot be made here"
    exit 77
  fi
  passes=$(grep -c "^PASS rank [$ranks] $mode:.*rank 3 " <<<"$out")
  grep -E "^(PASS|FAIL)" <<<"$out"
  if [ "$passes" != "$want" ] || grep -q "^FAIL rank [$ranks] " <<<"$out"; then
    # Open MPI 4.1 is not fault tolerant: after a peer's death it may end a survivor in its
    # own progress (seen once: rank 2 in MPI_Testsome, "*** End of error message ***"). That
    # is no verdict on fastrma's detection: the mode runs once more; twice fails.
    if [ "${3:-}" != again ] && grep -q "\*\*\* End of error message \*\*\*" <<<"$out"; then
      echo "note: $transport $mode: a survivor was ended inside the host MPI; running it once more"
      run "$transport" "$mode" again
      return
    fi
    echo "FAIL: $transport $mode: $passes of $want survivors passed (run status $rc)"
    grep -vE "^(PASS|FAIL)" <<<"$out" | tail -40  # (with the stacks of a survivor still waiting at 5 s)
    fail=1
  else
    echo "ok: $transport $mode"
  fi
}
for mode in lock lock_all fence pscw flush; do run am "$mode"; done
for mode in lock lock_all fence pscw flush; do run ofi "$mode"; done
bash "$twohost" down >/dev/null 2>&1
exit $fail
