#!/usr/bin/env python3
"""report.py — merge rma_bench runs into results.csv, status.csv and a markdown table.

usage: bench/report.py OUTDIR      (run_bench.sh calls it; OUTDIR holds raw/ from that script)

Inputs in OUTDIR/raw: <label>.<attempt>.csv (results), <label>.<attempt>.status.csv,
<label>.<attempt>.log and attempts.csv (one row per attempt, with how it ended and, for a crash
or hang, the phase that did not finish). A run's label names the Open MPI osc component it
forced ("default" = Open MPI's own choice; "x@serialized" = component x under
MPI_THREAD_SERIALIZED).

Outputs: results.csv (all rows, impl,component,flavor,op,size,metric,value), status.csv (one
row per run x implementation x flavor: ran / partial / refused / crashed / timeout / op_failed /
invalid / not_run, which component served the window, why), table.md (printed too).

"Best Open MPI" is taken over the runs that forced one component at MPI_THREAD_MULTIPLE, the
level fastrma is measured at: "default" repeats one of them, and "@serialized" runs are not
comparable. The fastrma column is the median of fastrma's value over all runs (it is measured
in each), with the spread beside it; the fastrma/OpenMPI ratio pairs the two numbers of the
same run (same process, same moment), that of the best component, so that machine noise
between runs does not enter the ratio. Standard library only.
"""
import csv
import glob
import os
import re
import statistics
import sys

LAT_OPS = ["put", "get", "fetch_and_op", "compare_and_swap"]
MEASURED_OPS = LAT_OPS + ["put_bw"]
IMPLS = ["fastrma", "mpi"]
FLAVORS = ["allocate", "create"]
RUN_ORDER = ["default", "sm", "rdma", "pt2pt", "ucx"]


def size_label(s):
    s = int(s)
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def fmt(v, unit):
    if v is None:
        return "—"
    if unit == "ns":
        return f"{v:.1f}" if v < 100 else f"{v:.0f}"
    return f"{v:.0f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "—"


def attempt_key(path):
    m = re.search(r"\.(\d+)(?:\.status)?\.csv$", path)
    return int(m.group(1)) if m else 0


def label_of(path):
    return re.sub(r"\.\d+(?:\.status)?\.csv$", "", os.path.basename(path))


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error):
        return []


def open_mpi_messages(raw, label):
    """Open MPI's own explanations (show_help blocks between dashed lines) in a run's logs."""
    msgs = []
    for log in sorted(glob.glob(os.path.join(raw, f"{glob.escape(label)}.*.log"))):
        try:
            with open(log, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        block = None
        for line in lines:
            if re.fullmatch(r"-{20,}", line.strip()):
                if block is not None:
                    text = " ".join(l.strip() for l in block if l.strip())
                    boring = ("Primary job" in text or "mpiexec noticed" in text or
                              "terminated normally" in text or not text)
                    if not boring and text not in msgs:
                        msgs.append(text)
                    block = None
                else:
                    block = []
            elif block is not None:
                block.append(line)
    return msgs


def comparable(label):
    return label != "default" and "@" not in label


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    raw = os.path.join(out, "raw")

    # ---- results
    results = []
    for path in sorted(glob.glob(os.path.join(raw, "*.csv")), key=lambda p: (label_of(p), attempt_key(p))):
        if path.endswith(".status.csv") or os.path.basename(path) == "attempts.csv":
            continue
        for r in read_csv(path):
            try:
                r["value"] = float(r["value"])
                r["size"] = int(r["size"])
            except (KeyError, ValueError, TypeError):
                continue
            results.append(r)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["impl", "component", "flavor", "op", "size", "metric", "value"])
        for r in results:
            w.writerow([r["impl"], r["component"], r["flavor"], r["op"], r["size"], r["metric"], f"{r['value']:.6g}"])

    # ---- runs and their attempts
    attempts = read_csv(os.path.join(raw, "attempts.csv"))
    labels = []
    for a in attempts:
        if a["label"] not in labels:
            labels.append(a["label"])
    labels.sort(key=lambda l: (RUN_ORDER.index(l) if l in RUN_ORDER else len(RUN_ORDER), l))

    thread_provided = {}
    for label in labels:
        log = os.path.join(raw, f"{label}.1.log")
        try:
            with open(log, errors="replace") as f:
                m = re.search(r"# thread level: requested (\S+), provided (\S+)", f.read())
            if m:
                thread_provided[label] = f"{m.group(1).replace('MPI_THREAD_', '')}→{m.group(2).replace('MPI_THREAD_', '')}"
        except OSError:
            pass

    # ---- status per run x impl x flavor
    final_rows = {}  # (label, impl, flavor) -> last non-"started" row
    for path in sorted(glob.glob(os.path.join(raw, "*.status.csv")), key=attempt_key):
        for r in read_csv(path):
            if r.get("status") and r["status"] != "started":
                final_rows[(r["component"], r["impl"], r["flavor"])] = r
    failures = {}  # (label, impl, flavor) -> [(attempt, outcome, phase)]
    early_death = {}  # label -> outcome of an attempt that died before its first phase
    for a in attempts:
        if a["outcome"] == "ok":
            continue
        if a["impl"] in IMPLS and a["flavor"] in FLAVORS:
            failures.setdefault((a["label"], a["impl"], a["flavor"]), []).append((a["attempt"], a["outcome"], a["phase"]))
        elif a["impl"] == "-" or a["phase"] == "done":
            early_death[a["label"]] = a["outcome"] + (" at finalize" if a["phase"] == "done" else " before the first measurement")
        elif a["impl"] == "memcpy":
            early_death[a["label"]] = a["outcome"] + " in the memcpy reference"

    measured_ops = {}  # (label, impl, flavor) -> ops with at least one result row
    for r in results:
        measured_ops.setdefault((r["component"], r["impl"], r["flavor"]), set()).add(r["op"])

    status_rows = []
    served = {}  # (label, impl, flavor) -> component that served the window
    for label in labels:
        for impl in IMPLS:
            for flavor in FLAVORS:
                key = (label, impl, flavor)
                row = final_rows.get(key)
                fails = failures.get(key, [])
                detail_parts = []
                # rma_bench's own "skipped: ..." only tells what a retry left out; say instead
                # what was measured and what crashed (below).
                row_detail = re.sub(r"(^|; )skipped: [a-z_]+(; (put|get|fetch_and_op|compare_and_swap|put_bw)(?=;|$))*", "", row["detail"]).strip("; ") if row else ""
                if fails:
                    for att, outcome, phase in fails:
                        where = f"in {phase}" if phase in MEASURED_OPS else f"in phase {phase}"
                        kept = " (measurements kept, not verified)" if phase in ("final", "unlock_all", "verify", "win_free") else ""
                        detail_parts.append(f"attempt {att}: {outcome} {where}{kept}")
                    kinds = {("timeout" if o == "timeout" else "crashed") for _, o, _ in fails}
                    got = [op for op in MEASURED_OPS if op in measured_ops.get(key, set())]
                    if row and any(p in MEASURED_OPS for _, _, p in fails):
                        status = "partial"
                    else:
                        status = "timeout" if kinds == {"timeout"} else "crashed"
                    detail_parts.append("measured: " + (", ".join(got) if got else "nothing"))
                    if row:
                        detail_parts.append(f"last attempt: {row['status']}" + (f" ({row_detail})" if row_detail else ""))
                elif row:
                    status = row["status"]
                    if row_detail:
                        detail_parts.append(row_detail)
                else:
                    status = "not_run"
                    if label in early_death:
                        detail_parts.append(early_death[label])
                if status == "refused" and impl == "mpi":
                    detail_parts += [f"Open MPI says: {m}" for m in open_mpi_messages(raw, label)]
                srv = row["served_by"] if row else ""
                if srv:
                    served[key] = srv
                status_rows.append([label, impl, flavor, status, srv, "; ".join(detail_parts)])
    with open(os.path.join(out, "status.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["component", "impl", "flavor", "status", "served_by", "detail"])
        w.writerows(status_rows)

    # ---- values
    val = {}  # (impl, label, flavor, op, size, metric) -> value
    for r in results:
        val[(r["impl"], r["component"], r["flavor"], r["op"], r["size"], r["metric"])] = r["value"]

    def mpi_cols(flavor, op, size, metric):
        return {l: val.get(("mpi", l, flavor, op, size, metric)) for l in labels}

    def fastrma_stats(flavor, op, size, metric):
        vs = [val[k] for k in (("fastrma", l, flavor, op, size, metric) for l in labels) if k in val]
        if not vs:
            return None, ""
        med = statistics.median(vs)
        spread = f"{fmt(min(vs), metric)}–{fmt(max(vs), metric)} ({len(vs)} runs)" if len(vs) > 1 else "1 run"
        return med, spread

    def best(cols, lower_is_better):
        cands = [(v, l) for l, v in cols.items() if v is not None and comparable(l)]
        if not cands:
            return None, ""
        v, l = (min if lower_is_better else max)(cands)
        return v, l

    def same_run_ratio(flavor, op, size, metric, best_label, best_value):
        f = val.get(("fastrma", best_label, flavor, op, size, metric))
        return ratio(f, best_value)

    def header_label(l):
        srv = sorted({served[(l, "mpi", fl)] for fl in FLAVORS if (l, "mpi", fl) in served})
        if l == "default" and srv:
            return f"default (= {'/'.join(srv)})"
        return l

    lines = []
    try:
        with open(os.path.join(raw, "settings.txt")) as f:
            lines += [f"- {l.strip()}" for l in f if l.strip()] + [""]
    except OSError:
        pass
    lines.append("## Runs")
    lines.append("")
    lines.append("| run | thread level (requested→provided) | attempts | how they ended |")
    lines.append("|---|---|---|---|")
    for label in labels:
        atts = [a for a in attempts if a["label"] == label]
        ends = "; ".join(f"{a['attempt']}: {a['outcome']}" + (f" in {a['impl']}/{a['flavor']}/{a['phase']}" if a["outcome"] != "ok" else "") for a in atts)
        lines.append(f"| {label} | {thread_provided.get(label, '?')} | {len(atts)} | {ends} |")
    lines.append("")
    lines.append("## Status per run × implementation × window flavor")
    lines.append("")
    lines.append("| run | impl | flavor | status | served by | detail |")
    lines.append("|---|---|---|---|---|---|")
    for r in status_rows:
        lines.append("| " + " | ".join(x.replace("|", "/") for x in r) + " |")
    lines.append("")

    lines.append("## Latency (ns per op + flush, median of batches; lower is better)")
    lines.append("")
    hdr = ["op", "flavor", "size", "fastrma (median of runs)", "best Open MPI", "(component)", "fastrma/OpenMPI (same run)"] + [header_label(l) for l in labels] + ["fastrma spread over runs"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    for op in LAT_OPS:
        for flavor in FLAVORS:
            sizes = sorted({r["size"] for r in results if r["op"] == op and r["flavor"] == flavor and r["metric"] == "ns"})
            for size in sizes:
                cols = mpi_cols(flavor, op, size, "ns")
                fv, spread = fastrma_stats(flavor, op, size, "ns")
                bv, bl = best(cols, True)
                lines.append("| " + " | ".join([op, flavor, size_label(size), fmt(fv, "ns"), fmt(bv, "ns"), bl, same_run_ratio(flavor, op, size, "ns", bl, bv)] + [fmt(cols[l], "ns") for l in labels] + [spread]) + " |")
    lines.append("")

    memcpy = {}
    for r in results:
        if r["impl"] == "memcpy" and r["metric"] == "MB/s":
            memcpy.setdefault(r["size"], []).append(r["value"])
    lines.append("## Put bandwidth (MB/s, many puts then one flush; higher is better)")
    lines.append("")
    hdr = ["flavor", "size", "fastrma (median of runs)", "best Open MPI", "(component)", "fastrma/OpenMPI (same run)"] + [header_label(l) for l in labels] + ["memcpy", "fastrma/memcpy", "fastrma spread over runs"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    for flavor in FLAVORS:
        sizes = sorted({r["size"] for r in results if r["op"] == "put_bw" and r["flavor"] == flavor and r["metric"] == "MB/s"})
        for size in sizes:
            cols = mpi_cols(flavor, "put_bw", size, "MB/s")
            fv, spread = fastrma_stats(flavor, "put_bw", size, "MB/s")
            bv, bl = best(cols, False)
            mc = statistics.median(memcpy[size]) if size in memcpy else None
            lines.append("| " + " | ".join([flavor, size_label(size), fmt(fv, "MB/s"), fmt(bv, "MB/s"), bl, same_run_ratio(flavor, "put_bw", size, "MB/s", bl, bv)] + [fmt(cols[l], "MB/s") for l in labels] + [fmt(mc, "MB/s"), ratio(fv, mc), spread]) + " |")
    lines.append("")

    size = 1 << 20
    mc = statistics.median(memcpy[size]) if size in memcpy else None
    lines.append("## Put bandwidth at 1 MiB against memcpy")
    lines.append("")
    lines.append(f"memcpy of 1 MiB in one process: {fmt(mc, 'MB/s')} MB/s (median over runs)")
    lines.append("")
    lines.append("| flavor | fastrma MB/s | % of memcpy | best Open MPI MB/s | (component) | % of memcpy |")
    lines.append("|---|---|---|---|---|---|")
    for flavor in FLAVORS:
        fv, _ = fastrma_stats(flavor, "put_bw", size, "MB/s")
        bv, bl = best(mpi_cols(flavor, "put_bw", size, "MB/s"), False)
        pct = lambda v: f"{100 * v / mc:.0f}%" if v is not None and mc else "—"
        lines.append(f"| {flavor} | {fmt(fv, 'MB/s')} | {pct(fv)} | {fmt(bv, 'MB/s')} | {bl} | {pct(bv)} |")
    lines.append("")

    text = "\n".join(lines)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"(written: {os.path.join(out, 'results.csv')}, status.csv, table.md)")


if __name__ == "__main__":
    main()
