#!/usr/bin/env bash
# am_vs_pt2pt.sh [ROUNDS] [BASE_SUITE] — the am transport's latencies against Open MPI's osc
# pt2pt, in interleaved rounds on the current build (build/); with BASE_SUITE (another
# build's bench/rma_suite, e.g. an older commit's), that build's am rows run in the same
# rounds too, for a before/after from one run.
#
# Each round runs rma_suite's quick latency section (76 points: lock_all + flush 8 B .. 1 MiB,
# lock, fence, PSCW at 8 B / 64 KiB / 1 MiB) once over fastrma with FASTRMA_TRANSPORT=am and
# once over osc pt2pt (MPI_THREAD_SERIALIZED, the level it accepts), one right after the
# other, so that both see the same machine. Prints per point the median over the rounds and
# pt2pt time / am time (> 1: am faster), then the geometric mean per synchronization mode.
# The full suite (bench_suite.sh) runs its am phase late and loaded; on a shared 2-vCPU VM
# this interleaving is what makes a comparison of the two hold from run to run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-7}
base=${2:-}
suite=build/bench/rma_suite
[[ -z $base || -x $base ]] || { echo "am_vs_pt2pt.sh: $base is not an executable" >&2; exit 2; }
[[ -x $suite ]] || { echo "am_vs_pt2pt.sh: $suite not built (bash scripts/build.sh)" >&2; exit 2; }
mpiexec=$(command -v mpiexec.openmpi || command -v mpiexec)
flags=(-n 2 --bind-to none)
[[ $(id -u) == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 1; i <= rounds; ++i)); do
  "$mpiexec" "${flags[@]}" -x FASTRMA_TRANSPORT=am --mca osc sm "$suite" --mode p2p --quick \
    --impl fastrma --flavors allocate --sections lat > "$out/am_$i.txt" 2>&1
  "$mpiexec" "${flags[@]}" --mca osc pt2pt "$suite" --mode p2p --quick --impl mpi \
    --thread serialized --flavors allocate --sections lat > "$out/pt2pt_$i.txt" 2>&1
  if [[ -n $base ]]; then
    "$mpiexec" "${flags[@]}" -x FASTRMA_TRANSPORT=am --mca osc sm "$base" --mode p2p --quick \
      --impl fastrma --flavors allocate --sections lat > "$out/base_$i.txt" 2>&1
  fi
done
python3 - "$out" <<'EOF'
import collections, glob, math, statistics, sys
def load(kind):
    vals = collections.defaultdict(list)
    for fn in glob.glob(f"{sys.argv[1]}/{kind}_*.txt"):
        for line in open(fn):
            f = line.split()
            if len(f) > 10 and f[2] == "lat":  # impl flavor lat sync op size B rN tN value unit
                vals[(f[3], f[4], int(f[5]))].append(float(f[9]))
    return {k: statistics.median(v) for k, v in vals.items()}
am, pt, base = load("am"), load("pt2pt"), load("base")
keys = sorted(set(am) & set(pt))
if not keys:
    sys.exit("am_vs_pt2pt.sh: no latency lines (see the rma_suite output)")
per_sync = collections.defaultdict(list)
print(f"{'sync':6} {'op':13} {'bytes':>8} {'am us':>9} {'pt2pt us':>9} {'pt2pt/am':>8}")
for k in keys:
    r = pt[k] / am[k]
    per_sync[k[0]].append(math.log(r))
    print(f"{k[0]:6} {k[1]:13} {k[2]:>8} {am[k]/1e3:9.2f} {pt[k]/1e3:9.2f} {r:8.2f}")
wins = sum(pt[k] >= am[k] for k in keys)
gm = lambda v: math.exp(sum(v) / len(v))
print("geometric mean pt2pt/am: " + ", ".join(f"{s} {gm(v):.2f}" for s, v in sorted(per_sync.items()))
      + f"; am at or below pt2pt at {wins} of {len(keys)} points")
if base:
    bk = [k for k in keys if k in base]
    by = collections.defaultdict(list)
    for k in bk:
        by[k[0]].append((math.log(pt[k] / base[k]), math.log(base[k] / am[k])))
    print("base build, geometric mean pt2pt/am: " + ", ".join(f"{s} {gm([a for a, _ in v]):.2f}" for s, v in sorted(by.items())))
    print("base/current am time (> 1: current faster): " + ", ".join(f"{s} {gm([b for _, b in v]):.2f}" for s, v in sorted(by.items())))
EOF
