#!/usr/bin/env bash
# segment_cleanup.sh MPIEXEC BINARY [MPIEXEC FLAGS...] — no fastrma segment outlives a job, also when a rank
# is killed: with memfd segments (default) nothing ever has a name; with named shm_open
# segments a rank killed mid-creation leaves a name that the next engine start on the node
# removes. The test fails if any /dev/shm/fastrma-* of ours remains where it should not.
set -u
MPIEXEC=$1 BIN=$2
shift 2
FLAGS=("$@")  # the host's (FASTRMA_MPIEXEC_FLAGS: Open MPI's oversubscribe/bind flags)
run() { "$MPIEXEC" -n 2 "${FLAGS[@]}" "$BIN" "$@" >/dev/null 2>&1; }
# Names whose creator is dead: what a job leaves behind. (Names of live processes belong to
# other jobs running on this machine at the same time and are none of this test's business.)
ours() {
  local n=0 f pid
  for f in /dev/shm/fastrma-"$(id -u)"-*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f" | cut -d- -f3)
    kill -0 "$pid" 2>/dev/null || n=$((n + 1))
  done
  echo "$n"
}
fail() { echo "FAIL: $*"; ls -l /dev/shm; exit 1; }

run clean || fail "a clean job failed"
[ "$(ours)" = 0 ] || fail "clean job left segments"

for method in pidfd shm_open; do
  FASTRMA_SHM_METHOD=$method run after && fail "$method: the killed job reported success"
  [ "$(ours)" = 0 ] || fail "$method: a rank killed after creation left segments"
done

FASTRMA_SHM_METHOD=pidfd FASTRMA_FAULT=kill_after_segment run during && fail "fault injection did not kill"
[ "$(ours)" = 0 ] || fail "pidfd: a rank killed during creation left a segment"

FASTRMA_SHM_METHOD=shm_open FASTRMA_FAULT=kill_after_segment run during && fail "fault injection did not kill"
# mpiexec may return before the surviving ranks have finished dying: wait for them.
for f in /dev/shm/fastrma-"$(id -u)"-*; do
  [ -e "$f" ] || continue
  pid=$(basename "$f" | cut -d- -f3)
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
left=$(ours)
echo "shm_open: $left name(s) left by the job killed mid-creation"
[ "$left" -ge 1 ] || fail "expected the named segment of the killed rank to exist until the sweep (test is not testing)"
FASTRMA_SHM_METHOD=shm_open run clean || fail "job after the crash failed"
[ "$(ours)" = 0 ] || fail "the next engine start did not sweep the stale names"
echo "segment cleanup: ok"
