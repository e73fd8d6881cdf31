#!/usr/bin/env bash
# test.sh — install what is missing, build, and run every test with ctest.
#
#   bash scripts/test.sh            setup.sh, build.sh, ctest on build/
#   bash scripts/test.sh --asan     the same on build-asan/ (ASan + UBSan)
#   bash scripts/test.sh --tsan     the same on build-tsan/ (TSan)
#
# Extra arguments after "--" go to ctest, e.g.  bash scripts/test.sh -- -R unit
# The exit status is ctest's (124 if the overall time limit below killed it).
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

supp_dir="$repo_root/tests/sanitizers"
launcher=()
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
    export ASAN_OPTIONS="suppressions=$supp_dir/asan.supp:detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    # fast_unwind_on_malloc=0: see the header of lsan.supp (Open MPI has no frame pointers).
    # use_tls=0: LeakSanitizer's record of a module's dynamic TLS turned into a bogus range
    # (docs/building.md) and its exit-time check crashed reading it. Without TLS as a root
    # it can only report more, never hide a leak.
    export LSAN_OPTIONS="suppressions=$supp_dir/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0:use_tls=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    ;;
  tsan)
    bash scripts/build.sh --tsan
    build_dir=build-tsan
    timeout_s=${FASTRMA_TEST_TIMEOUT:-10800}
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
    ;;
esac

if [[ $sanitizer != none ]]; then
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
fi

echo "test.sh: ctest on $build_dir/ (overall limit ${timeout_s}s)" >&2
# timeout(1) runs ctest in a process group of its own, so that on expiry it kills the whole
# tree (ctest, mpiexec, the ranks). That group does not get the terminal's Ctrl-C, hence
# the trap: INT/TERM/HUP are passed to timeout, which passes them to its group.
# stdin is /dev/null: nothing under ctest may wait for terminal input.
timeout --kill-after=60 "$timeout_s" \
  "${launcher[@]}" ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
  "${ctest_extra[@]}" </dev/null &
ctest_pid=$!
trap 'kill -TERM "$ctest_pid" 2>/dev/null || true' INT TERM HUP
rc=0
while :; do
  wait "$ctest_pid" && rc=0 || rc=$?
  # A trapped signal interrupts wait early; wait again until ctest is really gone.
  kill -0 "$ctest_pid" 2>/dev/null || break
done
trap - INT TERM HUP
if ((rc == 124)); then
  echo "test.sh: ctest did not finish within ${timeout_s}s (FASTRMA_TEST_TIMEOUT)" >&2
fi
exit "$rc"
