#!/usr/bin/env bash
# dead_peer.sh MPIEXEC BINARY [MPIEXEC FLAGS...] — a rank dies mid-epoch (dead_peer.c says
# where). Under a launcher that lets the survivors live on (Open MPI:
# orte_enable_recovery), each survivor's call must fail with the expected class naming the
# dead rank within seconds: every survivor prints PASS (over shm, and over am for the waits
# it covers: lock, lock_all, flush, fence; over ofi: those and pscw). Over am, the default
# launcher must end the job (Open MPI's mpiexec kills every rank once one dies) instead of
# letting it hang.
set -u
MPIEXEC=$1 BIN=$2
shift 2
FLAGS=("$@")
fail=0
# run TRANSPORT MODE: the mode under orte_enable_recovery over the transport (shm: the
# default); every survivor that waits for the victim must print PASS.
run() {
  local transport=$1 mode=$2 want=2
  case $mode in stripe | served*) want=1 ;; esac  # only rank 1 waits for the dead holder or server
  local start out rc secs passes
  start=$(date +%s.%N)
  if [ "$transport" != shm ]; then
    out=$(FASTRMA_TRANSPORT=$transport FI_TCP_IFACE=lo timeout 60 "$MPIEXEC" --mca orte_enable_recovery 1 -n 3 \
      "${FLAGS[@]}" "$BIN" "$mode" 2>&1)
  else
    out=$(timeout 60 "$MPIEXEC" --mca orte_enable_recovery 1 -n 3 "${FLAGS[@]}" "$BIN" "$mode" 2>&1)
  fi
  rc=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  passes=$(grep -c "^PASS rank [01] $mode:" <<<"$out")
  grep -E "^(PASS|FAIL)" <<<"$out"
  if [ "$rc" = 124 ] || [ "$passes" != "$want" ]; then
    echo "FAIL: $transport $mode: $passes of $want survivors passed (mpiexec status $rc after ${secs}s)"
    grep -vE "^(PASS|FAIL)" <<<"$out" | tail -20
    fail=1
  else
    echo "ok: $transport $mode (job ${secs}s)"
  fi
}
for mode in lock lock_all fence pscw stripe served served_bulk; do run shm "$mode"; done
# am: a survivor's lock, flush, unlock and fence waiting for a dead peer on this host fail
# within seconds as well (its pid is watched; peers on other hosts are not).
for mode in lock lock_all flush fence pscw; do run am "$mode"; done
# ofi (tcp;ofi_rxm): every mode but those of shared memory's own paths.
for mode in lock lock_all fence pscw flush; do run ofi "$mode"; done
# am, the default launcher: the job ends, with the launcher's report of the killed rank.
start=$(date +%s.%N)
out=$(FASTRMA_TRANSPORT=am timeout 60 "$MPIEXEC" -n 3 "${FLAGS[@]}" "$BIN" lock 2>&1)
rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
if [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q "signal 9" <<<"$out"; then
  echo "FAIL: am under the default launcher: status $rc after ${secs}s"
  tail -20 <<<"$out"
  fail=1
else
  echo "ok: am, default launcher: the job ended (status $rc) after ${secs}s"
fi
exit $fail
