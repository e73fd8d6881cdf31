#!/usr/bin/env python3
"""apps_report.py OUTDIR — the report of examples/run_apps.sh.

Reads OUTDIR/raw/runs.tsv (one line per run: label, implementation, repetition, exit
code, wall seconds, log file) and each run's log, where the application printed one line
"RESULT key=value ...". The repetitions of a (label, implementation) pair are merged: each
figure is the median over the repetitions that passed (a run hit by a burst of load from
other jobs does not count); the pair passed if all of them did. Writes
  OUTDIR/results.csv   one row per run (every repetition): status and every RESULT field
  OUTDIR/summary.csv   one row per application: the host MPI's best component, fastrma, speed-up
  OUTDIR/table.md      the summary table, the per-run details and the settings
  OUTDIR/apps.png      time of every implementation relative to the best host component
                       (gnuplot; skipped with a note when gnuplot is missing)
and prints the summary table. Exit status 1 when a fastrma run did not pass its check.
"""
import csv
import math
import os
import re
import shutil
import subprocess
import sys

# The host implementations in the order they are shown; only those that ran appear.
HOST_ORDER = ["default", "rdma", "sm", "ucx", "pt2pt"]
HOST_IMPLS = []
# MPICH as the host: its own RMA and the drop-in built for it, compared in a table of their own.
MPICH_IMPLS = {"mpich", "fastrma-mpich"}

# The rows of the summary: (row name, run label, RESULT field timed, what it is).
ROWS = [
    ("fft3d (overlap)", "fft3d", "time_overlap_s", "s per 3D FFT"),
    ("fft3d (no overlap)", "fft3d", "time_nooverlap_s", "s per 3D FFT"),
    ("kvstore", "kvstore", "time_s", "s per insert+lookup cycle"),
    ("kvstore_cxx", "kvstore_cxx", "time_s", "s per insert+lookup cycle"),
    ("dsde (barrier)", "dsde_barrier", "time_s", "s for all rounds"),
    ("dsde (counter)", "dsde_counter", "time_s", "s for all rounds"),
]


def parse_result(log_text):
    for line in log_text.splitlines():
        if line.startswith("RESULT "):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return None


def status_of(rc, log_text, result):
    if rc == "missing":
        return "not built"
    rc = int(rc)
    if rc in (124, 137):
        return "timeout"
    if result is not None and result.get("check") == "FAIL":
        return "FAIL"
    if "does not support MPI_THREAD_MULTIPLE" in log_text:
        return "refused (no MPI_THREAD_MULTIPLE)"
    m = re.search(r"exited on signal (\d+) \(([^)]*)\)", log_text)
    if m:
        return "crash (%s)" % m.group(2)
    if rc == 0 and result is not None and result.get("check") in ("PASS", "SKIPPED"):
        return "ok"
    return "error (exit %d)" % rc


def merge_repetitions(runs):
    """(label, impl) -> one merged run: median figures, one status for all repetitions."""
    groups = {}
    for r in runs:
        groups.setdefault((r["label"], r["impl"]), []).append(r)
    merged = {}
    for key, reps in groups.items():
        passed = [r for r in reps if r["status"] == "ok"]
        bad = [r["status"] for r in reps if r["status"] != "ok"]
        if not bad:
            status = "ok" if len(reps) == 1 else "ok (%d runs)" % len(reps)
        elif passed:
            status = "%s in %d of %d runs" % (bad[0], len(bad), len(reps))
        else:
            status = bad[0]
        result = {}
        source = passed or reps
        for k in source[0]["result"]:
            vals = [r["result"].get(k) for r in source if k in r["result"]]
            try:
                nums = [float(v) for v in vals]
            except ValueError:
                result[k] = vals[0]
                continue
            if k == "rel_err":
                result[k] = "%.6g" % max(nums)  # the worst error
                continue
            nums.sort()
            n = len(nums)
            result[k] = "%.6g" % (nums[n // 2] if n % 2 else 0.5 * (nums[n // 2 - 1] + nums[n // 2]))
        merged[key] = {"label": key[0], "impl": key[1], "status": status, "ok": not bad,
                       "result": result if passed else {}, "size_result": source[0]["result"],
                       "seconds": sum(float(r["seconds"]) for r in reps)}
    return merged


def fmt_time(v):
    if v is None:
        return "—"
    return "%.3g" % v


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    runs = []
    with open(os.path.join(out, "raw", "runs.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            try:
                # Logs sit beside runs.tsv; the path recorded may be relative to elsewhere.
                with open(os.path.join(out, "raw", os.path.basename(row["log"])), errors="replace") as lf:
                    text = lf.read()
            except OSError:
                text = ""
            result = parse_result(text)
            row["result"] = result or {}
            row["status"] = status_of(row["rc"], text, result)
            runs.append(row)

    # results.csv: every run, every RESULT field.
    fields = []
    for r in runs:
        for k in r["result"]:
            if k not in fields:
                fields.append(k)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "impl", "rep", "status", "rc", "wall_s"] + fields)
        for r in runs:
            w.writerow([r["label"], r["impl"], r["rep"], r["status"], r["rc"], r["seconds"]] +
                       [r["result"].get(k, "") for k in fields])

    merged = merge_repetitions(runs)
    ran = {r["impl"] for r in runs}
    HOST_IMPLS[:] = [i for i in HOST_ORDER if i in ran] + sorted(ran - set(HOST_ORDER) - {"fastrma", "any"} - MPICH_IMPLS)

    def run_of(label, impl):
        return merged.get((label, impl))

    def time_of(r, field):
        if r is None or not r["ok"] or field not in r["result"]:
            return None
        return float(r["result"][field])

    summary = []
    failed_fastrma = ["%s: %s" % (m["label"], m["status"]) for m in merged.values()
                      if m["impl"] in ("fastrma", "any", "fastrma-mpich") and not m["ok"]]
    for name, label, field, what in ROWS:
        is_cxx = label == "kvstore_cxx"
        fr = run_of(label, "any" if is_cxx else "fastrma")
        if fr is None:
            continue
        host_label = "kvstore" if is_cxx else label  # the C++ API version is compared with kvstore's host runs
        host = [(time_of(run_of(host_label, i), field if not is_cxx else "time_s"), i) for i in HOST_IMPLS]
        ok_host = [(t, i) for t, i in host if t is not None]
        best = min(ok_host) if ok_host else (None, None)
        ft = time_of(fr, field)
        size = fr["size_result"].get("size", "")
        host_checks = ", ".join("%s %s" % (i, run_of(host_label, i)["status"]) for i in HOST_IMPLS if run_of(host_label, i))
        summary.append({
            "app": name,
            "label": label,
            "size": size,
            "timed": what,
            "host_best_s": best[0],
            "host_component": best[1],
            "fastrma_s": ft,
            "speedup": (best[0] / ft) if (best[0] is not None and ft) else None,
            "host_checks": host_checks,
            "fastrma_check": fr["status"],
            "host_times": {i: t for t, i in host},
            # why a host bar is missing: "crash", "timeout", ... (first word of the status)
            "host_missing": {i: run_of(host_label, i)["status"].split()[0] for i in HOST_IMPLS
                             if run_of(host_label, i) and not run_of(host_label, i)["ok"]},
            "cxx": is_cxx,
        })

    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["app", "size", "timed", "host_best_s", "host_component", "fastrma_s", "speedup", "host_status", "fastrma_status"])
        for s in summary:
            w.writerow([s["app"], s["size"], s["timed"], s["host_best_s"] if s["host_best_s"] is not None else "",
                        s["host_component"] or "", s["fastrma_s"] if s["fastrma_s"] is not None else "",
                        "%.3f" % s["speedup"] if s["speedup"] else "", s["host_checks"], s["fastrma_check"]])

    ranks = next((r["result"].get("ranks") for r in runs if r["result"].get("ranks")), "?")
    table = []
    table.append("| app | size | timed | host MPI, best osc component | fastrma | speed-up | check: host (per component) | check: fastrma |")
    table.append("|---|---|---|---|---|---|---|---|")
    for s in summary:
        host = "%s (%s)" % (fmt_time(s["host_best_s"]), s["host_component"]) if s["host_best_s"] is not None else "— (none passed)"
        if s["cxx"]:
            host += " ¹"
        sp = "%.2fx" % s["speedup"] if s["speedup"] else "—"
        table.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (s["app"], s["size"], s["timed"], host, fmt_time(s["fastrma_s"]), sp,
                                                           s["host_checks"], s["fastrma_check"]))
    notes = ["speed-up = best host time / fastrma time (above 1: fastrma faster); %s ranks on this machine." % ranks]

    # MPICH as the host: the same applications built for MPICH, alone and preloaded.
    mpich_table = []
    if any(i in ran for i in MPICH_IMPLS):
        mpich_table = ["| app | timed | MPICH (its own RMA) | fastrma on MPICH | speed-up | check: MPICH | check: fastrma |",
                       "|---|---|---|---|---|---|---|"]
        for name, label, field, what in ROWS:
            mr, fr = run_of(label, "mpich"), run_of(label, "fastrma-mpich")
            if mr is None and fr is None:
                continue
            mt, ft = time_of(mr, field), time_of(fr, field)
            sp = "%.2fx" % (mt / ft) if (mt is not None and ft) else "—"
            mpich_table.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, what, fmt_time(mt), fmt_time(ft), sp, mr["status"] if mr else "not run",
                fr["status"] if fr else "not run"))
    if any(s["cxx"] for s in summary):
        notes.append("¹ kvstore_cxx is written on fastrma's C++ API and always runs on fastrma; its host column is kvstore's (same work).")

    # Details: every run.
    details = ["| run | impl | status | wall s (sum) | key figures (median of the passed repetitions) |",
               "|---|---|---|---|---|"]
    keys = ["time_s", "time_overlap_s", "time_nooverlap_s", "put_s", "complete_s", "inserts_per_s", "lookups_per_s",
            "round_us", "msgs_per_s", "rel_err"]
    for m in merged.values():
        figs = ", ".join("%s=%s" % (k, m["result"][k]) for k in keys if k in m["result"])
        details.append("| %s | %s | %s | %.1f | %s |" % (m["label"], m["impl"], m["status"], m["seconds"], figs))
    overlap = []
    for impl in HOST_IMPLS + ["fastrma"]:
        r = run_of("fft3d", impl)
        a, b = time_of(r, "time_overlap_s"), time_of(r, "time_nooverlap_s")
        if a and b:
            overlap.append("%s %.1f %%" % (impl, 100.0 * (1 - a / b)))
    if overlap:
        notes.append("fft3d overlap gain (1 - overlapped / not overlapped): " + ", ".join(overlap) + ".")

    settings = ""
    try:
        with open(os.path.join(out, "raw", "settings.txt")) as f:
            settings = f.read()
    except OSError:
        pass

    plot_note = make_plot(out, summary, ranks)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("# Applications: host MPI RMA vs fastrma\n\n")
        f.write("```\n" + settings + "```\n\n")
        f.write("\n".join(table) + "\n\n")
        for n in notes:
            f.write("- " + n + "\n")
        if mpich_table:
            f.write("\n## MPICH as the host\n\nThe same applications built for MPICH, under mpiexec.mpich "
                    "(on the ranks settings.txt names): "
                    "MPICH's own RMA against the MPICH build of libfastrma-mpi.so preloaded (speed-up = MPICH "
                    "time / fastrma time).\n\n" + "\n".join(mpich_table) + "\n")
        if plot_note:
            f.write("- " + plot_note + "\n")
        f.write("\n## Every run\n\n" + "\n".join(details) + "\n")

    print()
    print("\n".join(table))
    print()
    for n in notes:
        print("- " + n)
    if mpich_table:
        print("\nMPICH as the host (mpiexec.mpich; MPICH's RMA vs the drop-in built for MPICH):")
        print("\n".join(mpich_table))
    if plot_note:
        print("- " + plot_note)
    print("Files: %s/table.md, summary.csv, results.csv, apps.png; logs in %s/raw/" % (out, out))
    if failed_fastrma:
        print("apps_report.py: fastrma runs that did not pass: " + "; ".join(failed_fastrma), file=sys.stderr)
        return 1
    return 0


def make_plot(out, summary, ranks):
    """apps.png: per application, each implementation's time relative to the best host one."""
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        return "no plot: gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)"
    impls = HOST_IMPLS + ["fastrma"]
    dat = os.path.join(out, "apps.dat")
    nrows, lowest = 0, 1.0
    missing = []  # (row, column, why): a label where the bar would be
    with open(dat, "w") as f:
        f.write("# app " + " ".join(impls) + "\n")
        for s in summary:
            base = s["host_best_s"]
            if not base:
                continue
            vals = []
            for col, i in enumerate(HOST_IMPLS):
                if not s["cxx"] and i in s["host_missing"]:
                    missing.append((nrows, col, s["host_missing"][i]))
                t = s["host_times"].get(i)
                vals.append("%.4g" % (t / base) if (t and not s["cxx"]) else "?")
            vals.append("%.4g" % (s["fastrma_s"] / base) if s["fastrma_s"] else "?")
            lowest = min([lowest] + [float(v) for v in vals if v != "?"])
            nrows += 1
            f.write('"%s" %s\n' % (s["app"], " ".join(vals)))
    png = os.path.join(out, "apps.png")
    plots = ", ".join(
        ("'%s' using %d:xtic(1)" % (dat, col + 2) if col == 0 else "'' using %d" % (col + 2)) +
        (" title 'fastrma' lc rgb '#d62728'" if impl == "fastrma" else " title 'osc %s'" % impl)
        for col, impl in enumerate(impls))
    ybottom = 10 ** math.floor(math.log10(lowest * 0.8))
    ncol, gap = len(impls), 1
    labels = "\n".join(
        "set label '%s' at %g,%g rotate by 90 font ',8' tc rgb '#555555'"
        % (why, row + (col - (ncol - 1) / 2.0) / (ncol + gap), ybottom * 1.3)
        for row, col, why in missing)
    script = """
set terminal pngcairo noenhanced size 1100,520 font ",10"
set output '%s'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [%g:*]
set xrange [-0.6:%g]
set ylabel "time / best host component (lower is better)"
set title "Applications, %s: host MPI one-sided components vs fastrma (same binary, LD_PRELOAD)"
set key top left
%s
set grid ytics
set xtics rotate by -15 scale 0
plot %s, 1 with lines dt 2 lc rgb 'black' notitle
""" % (png, ybottom, nrows - 0.4, "%s ranks" % ranks, labels, plots)
    try:
        subprocess.run([gnuplot], input=script, text=True, check=True, capture_output=True, timeout=60)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        return "no plot: gnuplot failed (%s)" % (getattr(e, "stderr", "") or e)
    return "plot: %s (missing bars: the run crashed, timed out or was not made)" % png


if __name__ == "__main__":
    sys.exit(main())
