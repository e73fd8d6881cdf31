#!/bin/bash
# span_bench.sh — windows that span two hosts: bench/span_bench (4 ranks, 2 per host; rank 0
# the origin, rank 1 a same-host target, rank 2 an other-host target) on every implementation
# that runs across the two hosts of scripts/twohost.sh, interleaved round by round, beside the
# one-host reference (the same program, 4 ranks on this machine, fastrma preloaded) and a
# fake-two-node run (one machine, FASTRMA_NODE_NAME=a/b). docs/performance.md, *Windows that
# span two hosts*.
#
#   bash scripts/span_bench.sh [--quick] [ROUNDS] [OUTDIR]
#   bash scripts/span_bench.sh --report [ROUNDS] [OUTDIR]   report.md again from OUTDIR/raw
#       ROUNDS  interleaved rounds (default 3; 1 with --quick)
#       OUTDIR  default bench-results/span: span.csv (every number of every round),
#               status.csv (every launch: rc, seconds, rows, first error line),
#               report.md (medians over rounds, ranges, ratios), logs/ (each launch's output)
#
# Builds nothing of fastrma: expects build/bench/span_bench and build/src/mpi/libfastrma-mpi.so
# (SPAN_BENCH_BUILD=DIR for another build tree). The MPICH column needs an MPICH binary: the
# one source file is compiled with mpicc.mpich into OUTDIR/bin (skipped without MPICH).
#
# Runs (LABEL: launch), each bounded by timeout (SPAN_BENCH_TIMEOUT s, default 240, 150 quick;
# mpich: SPAN_BENCH_MPICH_TIMEOUT, 120 or 90):
#   fastrma-shm+am     two hosts, LD_PRELOAD=libfastrma-mpi.so FASTRMA_TRANSPORT=shm+am
#   fastrma-shm+ofi    two hosts, FASTRMA_TRANSPORT=shm+ofi, tcp;ofi_rxm on the veth (frma0)
#   ompi-pt2pt         two hosts, Open MPI alone, --mca osc pt2pt, MPI_Init (thread single)
#   ompi-rdma          two hosts, --mca osc rdma
#   ompi-ucx           two hosts, --mca osc ucx, UCX's own choice of transports
#   ompi-ucx-tcp       two hosts, --mca osc ucx, UCX_TLS=tcp,self
#   mpich              two hosts (twohost.sh --mpich), MPICH's own RMA, UCX_TLS=tcp,self
#   fastrma-onehost    one host, 4 ranks, fastrma preloaded, FASTRMA_TRANSPORT default (auto)
#   fastrma-fakenodes  one host, 4 ranks, FASTRMA_NODE_NAME=a (ranks 0,1) / b (2,3), auto
# Every Open MPI launch gets --mca mpi_yield_when_idle 1: the 4 ranks share the machine's 2
# cores, and that is what Open MPI picks itself when it knows it is oversubscribed (the
# one-host run); without it osc pt2pt's op + flush takes 12-24 ms (scheduler ticks).
# A run that fails without a number in round 1 is recorded (status.csv, report) and not
# tried again. SPAN_BENCH_RUNS="label ..." restricts the list.
set -u
quick=0
report_only=0
rounds=""
out=""
for a in "$@"; do
    case "$a" in
        --quick) quick=1 ;;
        --report) report_only=1 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) rounds=$a ;;
        *) out=$a ;;
    esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -n "$rounds" ] || { [ $quick = 1 ] && rounds=1 || rounds=3; }
out=${out:-$root/bench-results/span}
build=${SPAN_BENCH_BUILD:-$root/build}
bin=$build/bench/span_bench
lib=$build/src/mpi/libfastrma-mpi.so
twohost=$root/scripts/twohost.sh
limit=${SPAN_BENCH_TIMEOUT:-$([ $quick = 1 ] && echo 150 || echo 240)}
# MPICH's launch hangs at the end across the two hosts (after its numbers): a shorter bound
mlimit=${SPAN_BENCH_MPICH_TIMEOUT:-$([ $quick = 1 ] && echo 90 || echo 120)}
q=()
[ $quick = 1 ] && q=(--quick)
say() { echo "span_bench.sh: $*" >&2; }

if [ $report_only = 0 ]; then
[ -x "$bin" ] || { say "no $bin: cmake --build $build --target span_bench"; exit 2; }
[ -e "$lib" ] || { say "no $lib: build the drop-in first"; exit 2; }
mkdir -p "$out/logs" "$out/raw" "$out/bin"
rm -f "$out"/raw/*.csv "$out"/logs/*.log
echo "round,label,rc,seconds,rows,note" > "$out/status.csv"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
Y=(--mca mpi_yield_when_idle 1)

# MPICH: the same source, compiled for MPICH's ABI.
mpich_bin=""
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
    if mpicc.mpich -O2 -o "$out/bin/span_bench.mpich" "$root/bench/span_bench.c" 2> "$out/logs/mpich-build.log"; then
        mpich_bin=$out/bin/span_bench.mpich
    else
        say "mpicc.mpich failed (logs/mpich-build.log): no MPICH column"
    fi
fi

all="fastrma-shm+am fastrma-shm+ofi ompi-pt2pt ompi-rdma ompi-ucx ompi-ucx-tcp mpich fastrma-onehost fastrma-fakenodes"
runs=${SPAN_BENCH_RUNS:-$all}
[ -n "$mpich_bin" ] || runs=$(echo " $runs " | sed 's/ mpich / /')
skip=" "

# The hosts stay up for the whole session (twohost.sh run then neither makes nor removes
# them); removed at the end if this script made them.
made=0
if ! bash "$twohost" status >/dev/null 2>&1; then
    bash "$twohost" up || { say "twohost.sh up failed: no two-host runs"; }
    made=1
fi
cleanup() { [ $made = 1 ] && bash "$twohost" down; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# launch LABEL CSV LOG: one run; exit status of the launcher.
launch() {
    local label=$1 csv=$2 log=$3 t=(timeout -k 10 "$limit")
    local two=(bash "$twohost" run --timeout $((limit + 30)) --)
    local fr=(-x LD_PRELOAD="$lib")
    case "$label" in
        fastrma-shm+am)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" "${fr[@]}" -x FASTRMA_TRANSPORT=shm+am -x FASTRMA_STATS=1 \
                "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        fastrma-shm+ofi)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" "${fr[@]}" -x FASTRMA_TRANSPORT=shm+ofi -x FASTRMA_STATS=1 \
                -x 'FASTRMA_OFI_PROVIDER=tcp;ofi_rxm' -x FI_TCP_IFACE=frma0 "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        ompi-pt2pt)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" --mca osc pt2pt "$bin" single "${q[@]}" --impl "$label" --csv "$csv" ;;
        ompi-rdma)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" --mca osc rdma "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        ompi-ucx)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" --mca osc ucx "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        ompi-ucx-tcp)
            "${two[@]}" "${t[@]}" mpiexec -n 4 "${Y[@]}" --mca osc ucx -x UCX_TLS=tcp,self \
                "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        mpich)
            bash "$twohost" run --mpich --timeout $((mlimit + 30)) -- timeout -k 10 "$mlimit" mpiexec.mpich -n 4 -genv UCX_TLS tcp,self \
                "$mpich_bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        fastrma-onehost)
            "${t[@]}" mpiexec -n 4 --oversubscribe --bind-to none "${Y[@]}" "${fr[@]}" -x FASTRMA_STATS=1 \
                "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        fastrma-fakenodes)
            "${t[@]}" mpiexec --oversubscribe --bind-to none "${Y[@]}" \
                -n 2 "${fr[@]}" -x FASTRMA_STATS=1 -x FASTRMA_NODE_NAME=a "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" : \
                -n 2 "${fr[@]}" -x FASTRMA_STATS=1 -x FASTRMA_NODE_NAME=b "$bin" multiple "${q[@]}" --impl "$label" --csv "$csv" ;;
        *) say "unknown run $label"; return 2 ;;
    esac > "$log" 2>&1
}

{
    echo "fastrma: $(git -C "$root" log -1 --format='%h %s' | cut -c1-80); drop-in $(stat -c '%y' "$(readlink -f "$lib")" | cut -c1-19) (at the start)"
    echo
} > "$out/version.txt"
set -- $runs
n=$#
start=$(date +%s)
for ((r = 1; r <= rounds; ++r)); do
    # rotate the order each round, so that no run always follows the same one
    order=("$@")
    k=$(((r - 1) % n))
    order=("${order[@]:k}" "${order[@]:0:k}")
    for label in "${order[@]}"; do
        case "$skip" in *" $label "*) continue ;; esac
        csv=$out/raw/$label.r$r.csv
        log=$out/logs/$label.r$r.log
        t0=$(date +%s.%N)
        say "round $r/$rounds: $label (load $(cut -d' ' -f1 /proc/loadavg))"
        launch "$label" "$csv" "$log"
        rc=$?
        secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        rows=0
        [ -f "$csv" ] && rows=$(wc -l < "$csv")
        note=""
        if [ $rc -ne 0 ]; then
            [ $rc -eq 124 ] && note="timed out after $([ $label = mpich ] && echo $mlimit || echo $limit) s; "
            note+=$(grep -m1 -E 'error|Error|ERR_|failed|abort|Abort|BAD TERMINATION|Segmentation|not available|No components' "$log" |
                    tr ',"' ';'"'" | cut -c1-200)
            [ $rows -eq 0 ] && [ $r -eq 1 ] && skip+="$label "
        fi
        grep -q WRONG "$log" && note="WRONG VALUE; $note"
        printf '%s,%s,%s,%.1f,%s,"%s"\n' "$r" "$label" "$rc" "$secs" "$rows" "$note" >> "$out/status.csv"
        say "  rc $rc, $rows numbers, ${secs%.*} s${note:+: $note}"
    done
done
say "all runs: $(($(date +%s) - start)) s"
fi

{
    echo "round,impl,level,section,target,bytes,usec"
    for f in "$out"/raw/*.csv; do
        [ -f "$f" ] || continue
        r=${f##*.r}
        r=${r%.csv}
        sed "s/^/$r,/" "$f"
    done
} > "$out/span.csv"

python3 - "$out" "$rounds" "$quick" "$(uptime)" <<'EOF'
import csv, statistics, sys, os
out, rounds, quick, up = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
rows = list(csv.DictReader(open(os.path.join(out, "span.csv"))))
status = list(csv.DictReader(open(os.path.join(out, "status.csv"))))
vals = {}
for r in rows:
    vals.setdefault((r["impl"], r["section"], r["target"], int(r["bytes"])), []).append(float(r["usec"]))
impls = [i for i in ["fastrma-shm+am", "fastrma-shm+ofi", "ompi-pt2pt", "ompi-rdma", "ompi-ucx", "ompi-ucx-tcp",
                     "mpich", "fastrma-onehost", "fastrma-fakenodes"] if any(k[0] == i for k in vals)]
keys = []
for k in vals:
    if (k[1], k[2], k[3]) not in keys:
        keys.append((k[1], k[2], k[3]))
order = ["put", "get", "acc", "fetch_and_op", "cas", "bw_put", "bw_get", "lock_excl_put", "lock_shared_put",
         "fence_put", "pscw_put"]
keys.sort(key=lambda k: (k[1] != "same", order.index(k[0]) if k[0] in order else 99, k[2]))
# osc ucx with UCX's own transports does not see the namespaces as two hosts: its other-host
# numbers go over shared memory, so they are not a network figure and do not count as "best".
def eligible(impl, target):
    return impl.startswith("ompi-") and not (impl == "ompi-ucx" and target == "other")
def med(impl, k):
    v = vals.get((impl,) + k)
    return (statistics.median(v), min(v), max(v), len(v)) if v else None
def show(m, k):
    if not m: return "—"
    bw = k[0].startswith("bw_")
    f = (lambda u: f"{k[2] / u:.0f}") if bw else (lambda u: f"{u:.3g}" if u < 100 else f"{u:.0f}")
    if m[3] == 1: return f(m[0])
    lo, hi = (m[2], m[1]) if bw else (m[1], m[2])
    return f"{f(m[0])} ({f(lo)}–{f(hi)})"
def ratio(x):
    return f"{x:.2f}" if 0.1 <= x < 100 else f"{x:.2g}" if x < 0.1 else f"{x:.0f}"
def name(k):
    s = {"bw_put": "put bw", "bw_get": "get bw", "lock_excl_put": "lock excl + put + unlock",
         "lock_shared_put": "lock shared + put + unlock", "fence_put": "fence + put epoch",
         "pscw_put": "PSCW + put epoch"}.get(k[0], k[0] + " + flush")
    size = f"{k[2] >> 20} MiB" if k[2] >= 1 << 20 else f"{k[2] >> 10} KiB" if k[2] >= 1024 else f"{k[2]} B"
    return f"{s} {size}" + (" (MB/s)" if k[0].startswith("bw_") else "")
L = []
L.append(f"# span_bench: windows that span two hosts\n")
L.append(f"{rounds} interleaved round(s){' (--quick)' if quick else ''}; report written at: {up.strip()}\n")
vf = os.path.join(out, "version.txt")
if os.path.exists(vf): L.append(open(vf).read())
L.append("Values: µs per operation or epoch (bandwidth rows: MB/s), median over rounds of each round's "
         "median over batches, (range over rounds). Target `same` = rank 1 (same host as the origin), "
         "`other` = rank 2 (the other host). Ratios are of times (bandwidth rows: time per byte): < 1 means "
         "fastrma is faster. best = the fastest Open MPI component for the row that runs across the hosts "
         "(ompi-ucx's other-host rows excluded: marked *, they go over shared memory).\n")
head = "| op | tgt | " + " | ".join(impls) + " |"
L.append(head)
L.append("|" + "---|" * (len(impls) + 2))
for k in keys:
    cells = []
    for i in impls:
        c = show(med(i, k), k)
        if i == "ompi-ucx" and k[1] == "other" and c != "—": c += " *"
        cells.append(c)
    L.append(f"| {name(k)} | {k[1]} | " + " | ".join(cells) + " |")
L.append("")
L.append("Ratios (median ÷ median):\n")
fr = [i for i in ["fastrma-shm+am", "fastrma-shm+ofi"] if i in impls]
cols = [f"{i} ÷ best ompi" for i in fr] + ["best ompi"] + \
       [f"{i} ÷ onehost (same)" for i in fr + (["fastrma-fakenodes"] if "fastrma-fakenodes" in impls else [])]
L.append("| op | tgt | " + " | ".join(cols) + " |")
L.append("|" + "---|" * (len(cols) + 2))
for k in keys:
    best = None
    for i in impls:
        m = med(i, k)
        if m and eligible(i, k[1]) and (best is None or m[0] < best[1]): best = (i, m[0])
    cells = []
    for i in fr:
        m = med(i, k)
        cells.append(ratio(m[0] / best[1]) if m and best else "—")
    cells.append(best[0] if best else "—")
    one = med("fastrma-onehost", k)
    for i in fr + (["fastrma-fakenodes"] if "fastrma-fakenodes" in impls else []):
        m = med(i, k)
        cells.append(ratio(m[0] / one[0]) if m and one and k[1] == "same" else "—")
    L.append(f"| {name(k)} | {k[1]} | " + " | ".join(cells) + " |")
L.append("")
L.append("Runs (status.csv): label, rounds run, failures and the first error line\n")
L.append("| run | launches | ok | numbers | note |")
L.append("|---|---|---|---|---|")
for lab in dict.fromkeys(s["label"] for s in status):
    ss = [s for s in status if s["label"] == lab]
    ok = sum(s["rc"] == "0" for s in ss)
    notes = "; ".join(sorted({f"rc {s['rc']}: {s['note']}" for s in ss if s["rc"] != "0"}))
    L.append(f"| {lab} | {len(ss)} | {ok} | {sum(int(s['rows']) for s in ss)} | {notes} |")
open(os.path.join(out, "report.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
