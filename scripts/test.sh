#!/usr/bin/env bash
# test.sh — install what is missing, build, and run every test with ctest.
#
#   bash scripts/test.sh            setup.sh, build.sh, ctest on build/
#   bash scripts/test.sh --asan     the same on build-asan/ (ASan + UBSan)
#   bash scripts/test.sh --tsan     the same on build-tsan/ (TSan)
#
# Extra arguments after "--" go to ctest, e.g.  bash scripts/test.sh -- -R unit
# The exit status is ctest's (124 if the overall time limit below killed it).
# The plain run (no sanitizer, no ctest arguments) then builds build-mpich/ against MPICH
# (when mpicc.mpich is installed) and runs the MPICH_TESTS tiers there; the exit status is
# then the first non-zero of the two. FASTRMA_TEST_MPICH=0 skips that pass, =1 requires it.
# Then every tier (the unit tier whole, subsets of the MPI and drop-in tiers: ASAN_MPI_TESTS)
# under AddressSanitizer + UBSan: build-asan/ with only their targets, ctest -R
# "$ASAN_MPI_TESTS" there; FASTRMA_TEST_ASAN=0 skips it. Then a subset (TSAN_TESTS) under
# ThreadSanitizer on build-tsan/ the same way; FASTRMA_TEST_TSAN=0 skips it.
# FASTRMA_TEST_TIMEOUT: overall limit in seconds for the ctest run (default 3600, three
# times that for sanitizer builds); every test also has its own TIMEOUT in CMake.
# Sanitizer runs export ASAN_OPTIONS / LSAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS with the
# suppressions in tests/sanitizers/; options already set in the environment are appended
# and win. See docs/building.md.
set -euo pipefail

# Prints the comment block at the top of this file.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# This run's start: the failure digest at the end reads only ctest logs newer than it.
run_stamp=$(mktemp)
trap 'rm -f "$run_stamp"' EXIT

sanitizer=none
ctest_extra=()
while (($# > 0)); do
  case "$1" in
    --asan) [[ $sanitizer == none || $sanitizer == asan ]] || { echo "test.sh: --asan and --tsan exclude each other" >&2; exit 2; }
            sanitizer=asan ;;
    --tsan) [[ $sanitizer == none || $sanitizer == tsan ]] || { echo "test.sh: --asan and --tsan exclude each other" >&2; exit 2; }
            sanitizer=tsan ;;
    -h|--help) usage; exit 0 ;;
    --) shift; ctest_extra=("$@"); break ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

bash scripts/setup.sh

# The tree is formatted as .clang-format says (a plain run only: sanitizer and filtered runs
# are for code, not style).
if [[ $sanitizer == none && ${#ctest_extra[@]} == 0 ]]; then
  unformatted=()
  while IFS= read -r f; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
  done < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' 2>/dev/null)
  if ((${#unformatted[@]})); then
    echo "test.sh: not formatted as .clang-format says (clang-format -i them): ${unformatted[*]}" >&2
    exit 1
  fi
fi

supp_dir="$repo_root/tests/sanitizers"
launcher=()
# The AddressSanitizer + UBSan run's environment (docs/building.md, "Sanitizer builds").
asan_env() {
  # fast_unwind_on_malloc=0 (in both: ASan's allocator records the stacks LSan reports): see
  # the header of lsan.supp (Open MPI has no frame pointers).
  export ASAN_OPTIONS="suppressions=$supp_dir/asan.supp:detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  # use_tls=0: LeakSanitizer's record of a module's dynamic TLS turned into a bogus range
  # (docs/building.md) and its exit-time check crashed reading it. Without TLS as a root
  # it can only report more, never hide a leak.
  export LSAN_OPTIONS="suppressions=$supp_dir/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0:use_tls=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  sanitizer_host_env
}
# Under any sanitizer: the host libraries' hooks off.
sanitizer_host_env() {
  # Open MPI's memory patcher rewrites libc entry points that the sanitizer runtimes
  # intercept too; Open MPI's developers advise turning it off under sanitizers
  # (open-mpi/ompi#12819, #13069). It only matters for RDMA registration caches.
  export OMPI_MCA_memory="${OMPI_MCA_memory:-^patcher}"
  # UCX (osc ucx, which the drop-in tests' host runs use) hooks mmap/madvise through libucm
  # for the same purpose; glibc calls madvise on a thread's stack as the thread exits,
  # after TSan has torn the thread's state down, and the hook's rwlock then segfaults in
  # TSan's interceptor (seen: dropin_ops, host and fastrma runs alike, at MPI_Finalize).
  export UCX_MEM_MMAP_HOOK_MODE="${UCX_MEM_MMAP_HOOK_MODE:-none}"
  export UCX_MEM_MALLOC_HOOKS="${UCX_MEM_MALLOC_HOOKS:-no}"
}
# The ThreadSanitizer run's environment (docs/building.md, "Sanitizer builds").
tsan_env() {
  # history_size=7: enough history to restore the stack of the earlier access, so that the
  # suppressions (which match frames) apply: with the default, a write by the am server
  # is reported with "[failed to restore the stack]" and nothing can match it.
  # ignore_noninstrumented_modules=1: interceptors called from uninstrumented code (Open
  # MPI's dlopen()ed components copy message data with memcpy) are not tracked. A receive
  # completed inside MPI by one of our threads and read by the thread that then saw the
  # request complete is ordered by Open MPI's own atomics, which TSan cannot see; when the
  # writer's stack had fallen out of the history even at history_size=7, no race: line
  # could match it (seen: test_passive, a get answer's tail). called_from_lib cannot cover
  # those components: Open MPI dlclose()s them and TSan aborts on that.
  export TSAN_OPTIONS="suppressions=$supp_dir/tsan.supp:second_deadlock_stack=1:history_size=7:ignore_noninstrumented_modules=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  # GCC 12's TSan cannot map its shadow memory when the kernel randomises mmap with more
  # than 28 bits ("FATAL: ThreadSanitizer: unexpected memory mapping"); running without
  # ASLR avoids that. Some container seccomp profiles forbid it: then run as is.
  if setarch "$(uname -m)" -R true >/dev/null 2>&1; then
    launcher=(setarch "$(uname -m)" -R)
  fi
  sanitizer_host_env
}
case "$sanitizer" in
  none)
    bash scripts/build.sh
    build_dir=build
    timeout_s=${FASTRMA_TEST_TIMEOUT:-3600}
    ;;
  asan)
    bash scripts/build.sh --asan
    build_dir=build-asan
    timeout_s=${FASTRMA_TEST_TIMEOUT:-10800}
    asan_env
    ;;
  tsan)
    bash scripts/build.sh --tsan
    build_dir=build-tsan
    timeout_s=${FASTRMA_TEST_TIMEOUT:-10800}
    tsan_env
    ;;
esac


# run_ctest DIR LIMIT [ctest args...]: ctest on DIR under an overall limit; returns its status.
# timeout(1) runs ctest in a process group of its own, so that on expiry it kills the whole
# tree (ctest, mpiexec, the ranks). That group does not get the terminal's Ctrl-C, hence
# the trap: INT/TERM/HUP are passed to timeout, which passes them to its group.
# stdin is /dev/null: nothing under ctest may wait for terminal input.
run_ctest() {
  local dir=$1 limit=$2
  shift 2
  echo "test.sh: ctest on $dir/ (overall limit ${limit}s)" >&2
  timeout --kill-after=60 "$limit" \
    "${launcher[@]}" ctest --test-dir "$dir" --output-on-failure --no-tests=error "$@" </dev/null &
  local pid=$!
  trap 'kill -TERM "'"$pid"'" 2>/dev/null || true' INT TERM HUP
  local status=0
  while :; do
    wait "$pid" && status=0 || status=$?
    # A trapped signal interrupts wait early; wait again until ctest is really gone.
    kill -0 "$pid" 2>/dev/null || break
  done
  trap - INT TERM HUP
  if ((status == 124)); then
    echo "test.sh: ctest on $dir/ did not finish within ${limit}s (FASTRMA_TEST_TIMEOUT)" >&2
  fi
  return "$status"
}

rc=0
run_ctest "$build_dir" "$timeout_s" "${ctest_extra[@]}" || rc=$?
((rc == 130 || rc == 143)) && exit "$rc"  # stopped by the user

# The second host: MPICH's ABI (docs/building.md, "MPICH as the host"): the MPI suites and
# the drop-in programs preloaded, at 2-4 ranks over shm and am, on fake nodes too; only the
# targets they need. The unit tier and the host-alone drop-in runs exercise nothing of the
# host's ABI and run in the Open MPI pass only. The passive suite runs over shm only: over
# am its flood cases stall behind MPICH's global lock while the target blocks in MPICH
# (docs/building.md, "MPICH as the host").
MPICH_TARGETS='test_passive test_active test_matrix test_progress test_host_progress test_harden test_span fastrma-mpi dropin_sync dropin_ops dropin_datatypes dropin_manage dropin_finalize dropin_harden dropin_fortran dropin_armci dropin_ga'
MPICH_TESTS='^mpi_(passive|active|matrix)_np3$|^mpi_(active|matrix)_np3_am$|^mpi_(passive|matrix)_np4$|^mpi_host_progress_np2$|^mpi_progress_np3_am$|^mpi_harden_np2(_am)?$|^mpi_span_nodes2x2_am$|^mpi_matrix_nodes2x2_am$|^dropin_(sync|ops|datatypes|manage|finalize|harden|fortran|armci|ga)_np2_fastrma$|^dropin_ga_np3_fastrma$'
if [[ $sanitizer == none && ${#ctest_extra[@]} == 0 && ${FASTRMA_TEST_MPICH:-auto} != 0 ]]; then
  if command -v mpicc.mpich >/dev/null && command -v mpicxx.mpich >/dev/null; then
    mpich_rc=0
    FASTRMA_BUILD_DIR=build-mpich FASTRMA_BUILD_TARGETS=$MPICH_TARGETS bash scripts/build.sh -- \
      -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich -DFASTRMA_BUILD_TESTS=ON \
      -DFASTRMA_BUILD_BENCH=OFF || mpich_rc=$?
    if ((mpich_rc == 0)); then
      run_ctest build-mpich "${FASTRMA_TEST_TIMEOUT:-1800}" -R "$MPICH_TESTS" || mpich_rc=$?
    fi
    ((rc == 0)) && rc=$mpich_rc
  elif [[ ${FASTRMA_TEST_MPICH:-auto} == 1 ]]; then
    echo "test.sh: FASTRMA_TEST_MPICH=1 but mpicc.mpich / mpicxx.mpich are not installed" >&2
    ((rc == 0)) && rc=1
  else
    echo "test.sh: MPICH not installed (mpicc.mpich): the MPICH pass is skipped" >&2
  fi
fi
# Every tier under AddressSanitizer + UBSan (docs/building.md, "What CI runs"): the unit tier
# whole (with the served decoders' fuzzer); of the MPI tier a subset that runs every suite over shm and am (and the matrix over
# ofi) plus the hardening, bounds, host-error and fuzz tests; the drop-in tier's programs
# preloaded at 2 ranks (the host-alone runs exercise no fastrma code); only the targets these
# need. The whole MPI tier under ASan took 700 s here; bash scripts/test.sh --asan -- -R
# '^mpi_' runs it all.
ASAN_MPI_TARGETS='fastrma_unit test_passive test_active test_matrix test_progress test_harden test_am_bounds test_am_errors test_am_fuzz test_span fastrma-mpi dropin_sync dropin_ops dropin_datatypes dropin_manage dropin_finalize dropin_harden dropin_armci dropin_ga'
ASAN_MPI_TESTS='^unit$|^mpi_(passive|active|matrix)_np3(_am)?$|^mpi_matrix_np2_(am|ofi)$|^mpi_progress_np(2|3_am)$|^mpi_harden_np2(_am)?$|^mpi_am_(bounds|errors)_np2$|^mpi_am_fuzz_np1$|^mpi_pool_flood_np3$|^mpi_span_nodes2x(2|1)_am$|^dropin_(sync|ops|datatypes|manage|finalize|harden|armci|ga)(_create)?_np2_fastrma$'
if [[ $sanitizer == none && ${#ctest_extra[@]} == 0 && ${FASTRMA_TEST_ASAN:-1} != 0 ]]; then
  asan_rc=0
  FASTRMA_BUILD_TARGETS=$ASAN_MPI_TARGETS bash scripts/build.sh --asan -- -DFASTRMA_BUILD_BENCH=OFF || asan_rc=$?
  if ((asan_rc == 0)); then
    (asan_env && run_ctest build-asan "${FASTRMA_TEST_TIMEOUT:-3600}" -R "$ASAN_MPI_TESTS") || asan_rc=$?
  fi
  ((rc == 0)) && rc=$asan_rc
fi
# A representative subset under ThreadSanitizer (docs/building.md, "What CI runs"): the unit
# tier (the lanes, pools, progress thread and lock protocol under several threads) and the
# MPI suites whose threads meet the most: passive target over am (its shm paths run in the
# unit tier's lock and lane tests and beside am on fake nodes), a window that
# spans two (fake) nodes, the progress thread over am. FASTRMA_TEST_TSAN=0 skips it.
TSAN_TARGETS='fastrma_unit test_passive test_span test_progress'
TSAN_TESTS='^unit$|^mpi_passive_np3_am$|^mpi_span_nodes2x2_am$|^mpi_progress_np3_am$'
if [[ $sanitizer == none && ${#ctest_extra[@]} == 0 && ${FASTRMA_TEST_TSAN:-1} != 0 ]]; then
  tsan_rc=0
  FASTRMA_BUILD_TARGETS=$TSAN_TARGETS bash scripts/build.sh --tsan -- -DFASTRMA_BUILD_BENCH=OFF || tsan_rc=$?
  if ((tsan_rc == 0)); then
    (tsan_env && run_ctest build-tsan "${FASTRMA_TEST_TIMEOUT:-3600}" -R "$TSAN_TESTS") || tsan_rc=$?
  fi
  ((rc == 0)) && rc=$tsan_rc
fi
# The failed tests' last output lines, once more at the very end (a CI log shown in part
# shows its end): from each build directory's LastTest.log of this run.
if ((rc != 0)); then
  for dir in "$build_dir" build-mpich build-asan build-tsan; do
    failed=$dir/Testing/Temporary/LastTestsFailed.log
    [[ -s $failed && $failed -nt $run_stamp ]] || continue
    while IFS=: read -r _ name; do
      echo "test.sh: the end of $dir/ $name's output:" >&2
      awk -v t="$name" '$2 == "Testing:" && $3 == t { on = 1; next } on && /^<end of output>/ { exit } on' \
        "$dir/Testing/Temporary/LastTest.log" | tail -40 >&2
    done <"$failed"
  done
fi
exit "$rc"
