#!/usr/bin/env bash
# build.sh — configure and build fastrma with CMake.
#
#   bash scripts/build.sh           Release build in build/
#   bash scripts/build.sh --asan    AddressSanitizer + UBSan build in build-asan/
#   bash scripts/build.sh --tsan    ThreadSanitizer build in build-tsan/
#
# Extra arguments after "--" go to the CMake configure step, e.g.
#   bash scripts/build.sh -- -DFASTRMA_BUILD_BENCH=OFF
# FASTRMA_BUILD_JOBS sets the parallel build level (default 2: the target machines have
# 2 cores). FASTRMA_BUILD_DIR replaces build/ for the plain build (scripts/test.sh builds
# build-mpich/ against MPICH with it). FASTRMA_BUILD_TARGETS builds only the targets it
# names (space-separated; scripts/test.sh's sanitizer pass builds the MPI tier's).
# Assumes the toolchain is installed (scripts/setup.sh).
set -euo pipefail

# Prints the comment block at the top of this file.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

sanitizer=none
cmake_extra=()
while (($# > 0)); do
  case "$1" in
    --asan) [[ $sanitizer == none || $sanitizer == asan ]] || { echo "build.sh: --asan and --tsan exclude each other" >&2; exit 2; }
            sanitizer=asan ;;
    --tsan) [[ $sanitizer == none || $sanitizer == tsan ]] || { echo "build.sh: --asan and --tsan exclude each other" >&2; exit 2; }
            sanitizer=tsan ;;
    -h|--help) usage; exit 0 ;;
    --) shift; cmake_extra=("$@"); break ;;
    *) echo "build.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

jobs=${FASTRMA_BUILD_JOBS:-2}

# Sanitizer builds keep -O2 but add -g (RelWithDebInfo) so reports name source lines.
case "$sanitizer" in
  none) build_dir=${FASTRMA_BUILD_DIR:-build}
        opts=(-DCMAKE_BUILD_TYPE=Release
              -DFASTRMA_SANITIZE_ADDRESS=OFF -DFASTRMA_SANITIZE_THREAD=OFF) ;;
  asan) build_dir=build-asan
        opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
              -DFASTRMA_SANITIZE_ADDRESS=ON -DFASTRMA_SANITIZE_THREAD=OFF) ;;
  tsan) build_dir=build-tsan
        opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
              -DFASTRMA_SANITIZE_ADDRESS=OFF -DFASTRMA_SANITIZE_THREAD=ON) ;;
esac

# FASTRMA_BUILD_TARGETS: only these targets (space-separated; default: all), as one target
# (fastrma_selected, CMakeLists.txt) so that make compiles their files in parallel: given
# as several goals, make builds one target after another.
targets=()
[[ -n ${FASTRMA_BUILD_TARGETS:-} ]] && read -r -a targets <<<"$FASTRMA_BUILD_TARGETS"
selected=$(IFS=';'; echo "${targets[*]}")
opts+=("-DFASTRMA_SELECTED_TARGETS=$selected")
echo "build.sh: configuring $build_dir/ (${opts[*]} ${cmake_extra[*]})" >&2
cmake -S . -B "$build_dir" "${opts[@]}" "${cmake_extra[@]}"
echo "build.sh: building $build_dir/ with -j$jobs" >&2
cmake --build "$build_dir" -j "$jobs" ${targets[@]+--target fastrma_selected}
