#!/usr/bin/env python3
"""suite_report.py — turn the benchmark suite's raw output into results.csv, plots and report.md.

usage: bench/suite_report.py OUTDIR        (scripts/bench_suite.sh calls it after suite_run.py)

Reads OUTDIR/raw (see bench/suite_run.py): every attempt's CSV and status CSV, attempts.csv,
limits.csv, win_memory.<p>.log, settings.txt, timing.csv. Writes in OUTDIR:
  results.csv   every measurement, one row each (rma_suite's columns; fastrma appears once per
                run it was measured in, the report takes the median over runs)
  status.csv    one row per run x implementation x flavor: ran / refused / partial (a phase
                crashed or hung: which, how) / op_failed / invalid, with the reason
  model.csv     the performance model: one fit P = a*x + b per series
  report.md     the headline table, the model table, the physical limits, the plots, statuses
  tables.md     every latency / bandwidth / sync / window number, per flavor and sync mode
  *.png         plots (with python3-matplotlib; without it the report says so and goes on)
How to read all of it: docs/performance.md.
"""
import csv
import glob
import math
import os
import re
import statistics
import sys
from collections import defaultdict

FASTRMA = "fastrma"
FASTRMA_ON_MPICH = "fastrma-mpich"  # fastrma built with MPICH as its host, run beside MPICH's RMA
PEER_ORDER = ["ompi-sm", "ompi-rdma", "ompi-ucx", "ompi-pt2pt", "mpich"]
PEER_NOTE = {"ompi-pt2pt": "ompi-pt2pt (MPI_THREAD_SERIALIZED)"}
FLAVORS = ["allocate", "create", "dynamic"]
SYNCS = ["flush", "lock", "fence", "pscw"]
LAT_OPS = ["put", "get", "acc", "get_acc", "fetch_and_op", "cas"]
SIZED_OPS = ["put", "get", "acc", "get_acc"]
SYNC_CALLS = ["fence", "pscw", "lock_excl", "lock_contended", "lock_shared", "lock_all", "flush", "flush_all", "sync"]
OP_TITLE = {"put": "MPI_Put", "get": "MPI_Get", "acc": "MPI_Accumulate (SUM, double)",
            "get_acc": "MPI_Get_accumulate (SUM, double)", "fetch_and_op": "MPI_Fetch_and_op (SUM, int64)",
            "cas": "MPI_Compare_and_swap (int64)"}
# Overlaps below this are noise around zero: no ratio against them.
OVERLAP_FLOOR = 0.02
SYNC_TITLE = {"flush": "lock_all + op + flush", "lock": "lock(excl) + op + unlock",
              "fence": "op + fence", "pscw": "start + op + complete / post + wait"}


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error):
        return []


def size_label(s):
    s = int(s)
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def fmt_ns(v):
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.0f} ns" if v >= 100 else f"{v:.1f} ns"


def fmt_bw(v):
    if v is None:
        return "—"
    return f"{v / 1e3:.2f} GB/s" if v >= 1000 else f"{v:.0f} MB/s"


def fmt_csv(v):
    return "" if v is None else f"{v:.6g}"


def fmt_num(v, digits=3):
    if v is None:
        return "—"
    return f"{v:.{digits}g}"


class Data:
    """All measurements, keyed for lookup; fastrma's repeated values folded to a median."""

    def __init__(self, out):
        self.out = out
        self.raw = os.path.join(out, "raw")
        self.rows = []
        for path in sorted(glob.glob(os.path.join(self.raw, "*.csv"))):
            base = os.path.basename(path)
            if base.endswith(".status.csv") or base in ("attempts.csv", "timing.csv"):
                continue
            self.rows += read_csv(path)
        self.status_rows = []
        for path in sorted(glob.glob(os.path.join(self.raw, "*.status.csv"))):
            self.status_rows += read_csv(path)
        self.attempts = read_csv(os.path.join(self.raw, "attempts.csv"))
        self.timing = read_csv(os.path.join(self.raw, "timing.csv"))
        # values[(impl, flavor, section, sync, op, size, ranks, threads, metric)] = [(value, lo, hi, run)]
        self.values = defaultdict(list)
        for r in self.rows + self.status_rows:
            # fastrma over another transport than shared memory is a line of its own.
            if r.get("impl") == FASTRMA and r.get("transport") not in ("auto", "shm", "-", None):
                r["impl"] = f"{FASTRMA}-{r['transport']}"
        for r in self.rows:
            try:
                key = (r["impl"], r["flavor"], r["section"], r["sync"], r["op"], int(r["size"]),
                       int(r["ranks"]), int(r["threads"]), r["metric"])
                self.values[key].append((float(r["value"]), float(r["lo"]), float(r["hi"]), r["run"]))
            except (KeyError, ValueError):
                continue
        self.size_index, self.rank_index = defaultdict(set), defaultdict(set)
        for k in self.values:
            series = (k[0], k[1], k[2], k[3], k[4], k[8])
            self.size_index[series].add(k[5])
            self.rank_index[series].add(k[6])
        impls = {k[0] for k in self.values}
        self.peers = [p for p in PEER_ORDER if p in impls] + sorted(
            i for i in impls if i not in PEER_ORDER and not i.startswith(FASTRMA) and i != "limit")
        # fastrma on MPICH (FASTRMA_ON_MPICH) has a section of its own, against MPICH only.
        self.impls = ([FASTRMA] if FASTRMA in impls else []) + sorted(
            i for i in impls if i.startswith(FASTRMA + "-") and i != FASTRMA_ON_MPICH) + self.peers
        self.winmem = self.read_win_memory()

    def get(self, impl, flavor, section, sync, op, size, metric, ranks=2, threads=1):
        v = self.values.get((impl, flavor, section, sync, op, size, ranks, threads, metric))
        if not v:
            return None
        return statistics.median(x[0] for x in v)

    def spread(self, impl, flavor, section, sync, op, size, metric, ranks=2, threads=1):
        """(min, max, number of runs) of the per-run medians, and the batch range within runs."""
        v = self.values.get((impl, flavor, section, sync, op, size, ranks, threads, metric))
        if not v:
            return None
        meds = [x[0] for x in v]
        return min(meds), max(meds), len(meds), min(x[1] for x in v), max(x[2] for x in v)

    def sizes(self, impl, flavor, section, sync, op, metric):
        return sorted(self.size_index.get((impl, flavor, section, sync, op, metric), ()))

    def ranks(self, impl, flavor, section, sync, op, metric):
        return sorted(self.rank_index.get((impl, flavor, section, sync, op, metric), ()))

    def read_win_memory(self):
        out = {}
        for path in glob.glob(os.path.join(self.raw, "win_memory.*.log")):
            with open(path, errors="replace") as f:
                for line in f:
                    if line.startswith("CSV,win_memory,"):
                        p = line.strip().split(",")
                        try:
                            out[(p[2], int(p[3]))] = {"metadata_bytes": float(p[4]), "mappings": float(p[5]),
                                                       "rss_kib": float(p[6]), "create_us": float(p[7])}
                        except (IndexError, ValueError):
                            pass
        return out


# ---------------------------------------------------------------- performance model

def fit_linear(xs, ys):
    """P(x) = a*x + b minimizing the squared *relative* error (weights 1/y^2), so that the small
    sizes, whose times are small, count as much as the large ones. a, b >= 0. Returns
    (a, b, max relative error) or None."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys) if y and y > 0]
    if not pts:
        return None
    if len(pts) == 1:
        return 0.0, pts[0][1], 0.0

    def solve(with_a, with_b):
        sw = sum(1 / y ** 2 for _, y in pts)
        swx = sum(x / y ** 2 for x, y in pts)
        swxx = sum(x * x / y ** 2 for x, y in pts)
        swy = sum(1 / y for _, y in pts)
        swxy = sum(x / y for x, y in pts)
        if with_a and with_b:
            det = sw * swxx - swx * swx
            if abs(det) < 1e-300:
                return None
            return (sw * swxy - swx * swy) / det, (swxx * swy - swx * swxy) / det
        if with_a:
            return swxy / swxx, 0.0
        return 0.0, swy / sw

    a, b = solve(True, True) or (0.0, 0.0)
    if b < 0:
        a, b = solve(True, False)
    if a < 0:
        a, b = solve(False, True)
    err = max(abs(a * x + b - y) / y for x, y in pts)
    return a, b, err


def model_text(a, b, xunit="s"):
    """foMPI style: '0.16 ns·s + 1.0 µs'."""
    parts = []
    if a:
        if xunit == "s":
            parts.append(f"{a:.3g} ns·s" if a >= 0.01 else f"{a * 1000:.3g} ps·s")
        else:
            parts.append(f"{fmt_ns(a)}·{xunit}")
    if b or not parts:
        parts.append(fmt_ns(b))
    return " + ".join(parts)


# ---------------------------------------------------------------- plots

class Plots:
    def __init__(self, data, out):
        self.d = data
        self.out = out
        self.files = []
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            import matplotlib.ticker as ticker
            self.plt = plt
            self.ticker = ticker
        except ImportError:
            self.plt = None

    def style(self, impl):
        if impl == FASTRMA:
            return dict(color="#d62728", lw=3.0, marker="o", ms=4, zorder=10, label="fastrma")
        if impl.startswith(FASTRMA):  # another transport or configuration: reds, thin, dotted
            color = {"fastrma-am": "#f08080", "fastrma-am-bound": "#ff7f0e", "fastrma-offload": "#c2185b"}.get(impl, "#e377c2")
            return dict(color=color, lw=1.5, ls=":", marker="x", ms=4, zorder=9, label=impl)
        palette = {"ompi-sm": "#1f77b4", "ompi-rdma": "#2ca02c", "ompi-ucx": "#9467bd",
                   "ompi-pt2pt": "#8c564b", "mpich": "#ff7f0e"}
        return dict(color=palette.get(impl, "#7f7f7f"), lw=1.4, marker=".", ms=5, zorder=5,
                    label=PEER_NOTE.get(impl, impl), alpha=0.9)

    def save(self, fig, name, caption):
        path = os.path.join(self.out, name)
        fig.savefig(path, dpi=90)
        self.plt.close(fig)
        self.files.append((name, caption))

    # Fixed margins and no minor ticks on log axes: tight_layout and minor ticks cost most of
    # the report's time (tens of seconds on a busy 2-core machine) for no gain in reading.
    @staticmethod
    def layout(fig, top):
        fig.subplots_adjust(left=0.05, right=0.99, bottom=0.08, top=top - 0.02, hspace=0.38, wspace=0.2)

    def log_y(self, ax):
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(self.ticker.NullLocator())

    def size_axis(self, ax, bytes_axis=True):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(self.ticker.NullLocator())
        ticks = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20]
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(t).replace(" ", "") for t in ticks], fontsize=7)
        ax.grid(True, which="major", alpha=0.3)

    def latency(self):
        d, plt = self.d, self.plt
        for sync in SYNCS:
            fig, axes = plt.subplots(len(FLAVORS), len(SIZED_OPS), figsize=(17, 11), squeeze=False)
            any_line = False
            for i, fl in enumerate(FLAVORS):
                for j, op in enumerate(SIZED_OPS):
                    ax = axes[i][j]
                    for impl in d.impls:
                        xs = d.sizes(impl, fl, "lat", sync, op, "ns")
                        if not xs:
                            continue
                        ys = [d.get(impl, fl, "lat", sync, op, x, "ns") / 1e3 for x in xs]
                        ax.plot(xs, ys, **self.style(impl))
                        any_line = True
                    self.size_axis(ax)
                    self.log_y(ax)
                    ax.set_title(f"{op} · {fl}", fontsize=10)
                    if j == 0:
                        ax.set_ylabel("µs per op + sync (median)")
                    if i == len(FLAVORS) - 1:
                        ax.set_xlabel("size")
            if not any_line:
                plt.close(fig)
                continue
            h, l = axes[0][0].get_legend_handles_labels()
            fig.legend(h, l, loc="upper center", ncol=7, fontsize=10)
            fig.suptitle(f"Latency vs size, {SYNC_TITLE[sync]} (log-log; lower is better)", y=0.955)
            self.layout(fig, 0.93)
            self.save(fig, f"latency_{sync}.png", f"Latency of put, get, accumulate, get_accumulate under {SYNC_TITLE[sync]}")

    def atomics(self):
        d, plt = self.d, self.plt
        fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), squeeze=False)
        for j, op in enumerate(["fetch_and_op", "cas"]):
            ax = axes[0][j]
            groups = [(fl, s) for fl in FLAVORS for s in SYNCS]
            impls = [i for i in d.impls if any(d.get(i, fl, "lat", s, op, 8, "ns") for fl, s in groups)]
            width = 0.8 / max(1, len(impls))
            for k, impl in enumerate(impls):
                xs, ys = [], []
                for g, (fl, s) in enumerate(groups):
                    v = d.get(impl, fl, "lat", s, op, 8, "ns")
                    if v:
                        xs.append(g + k * width)
                        ys.append(v / 1e3)
                st = self.style(impl)
                ax.bar(xs, ys, width=width, color=st["color"], label=st["label"],
                       edgecolor="black" if impl == FASTRMA else None, linewidth=1.5 if impl == FASTRMA else 0)
            self.log_y(ax)
            ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
            ax.set_xticklabels([f"{fl}\n{s}" for fl, s in groups], fontsize=7)
            ax.set_ylabel("µs per op + sync")
            ax.set_title(OP_TITLE[op])
            ax.grid(True, axis="y", alpha=0.3)
        h, l = axes[0][0].get_legend_handles_labels()
        fig.legend(h, l, loc="upper center", ncol=7, fontsize=10)
        self.layout(fig, 0.9)
        self.save(fig, "atomics.png", "fetch_and_op and compare_and_swap (8 B) per flavor and sync mode")

    def bandwidth(self):
        d, plt = self.d, self.plt
        cols = [("bw", "put"), ("bw", "get"), ("bw", "acc"), ("bibw", "put"), ("bibw", "get")]
        fig, axes = plt.subplots(len(FLAVORS), len(cols), figsize=(20, 11), squeeze=False)
        lim_x = d.sizes("limit", "-", "limit", "-", "copy_shared", "MB/s")
        lim_y = [d.spread("limit", "-", "limit", "-", "copy_shared", x, "MB/s")[4] / 1e3 for x in lim_x]  # best batch
        loc_x = d.sizes("limit", "-", "limit", "-", "memcpy_local", "MB/s")
        loc_y = [d.spread("limit", "-", "limit", "-", "memcpy_local", x, "MB/s")[4] / 1e3 for x in loc_x]
        for i, fl in enumerate(FLAVORS):
            for j, (sec, op) in enumerate(cols):
                ax = axes[i][j]
                for impl in d.impls:
                    xs = d.sizes(impl, fl, sec, "flush", op, "MB/s")
                    if xs:
                        ax.plot(xs, [d.get(impl, fl, sec, "flush", op, x, "MB/s") / 1e3 for x in xs], **self.style(impl))
                if lim_x and op in ("put", "get") and sec == "bw":
                    ax.plot(loc_x, loc_y, color="black", ls="--", lw=1.2, label="limit: memcpy in one process (best batch)")
                    ax.plot(lim_x, lim_y, color="gray", ls=":", lw=1.5, label="memcpy into a mapping the peer reads (best batch)")
                self.size_axis(ax)
                self.log_y(ax)
                ax.set_title(f"{'bidirectional ' if sec == 'bibw' else ''}{op} bandwidth · {fl}", fontsize=10)
                if j == 0:
                    ax.set_ylabel("GB/s (median; higher is better)")
        h, l = [], []
        for ax in axes.flat:
            for hh, ll in zip(*ax.get_legend_handles_labels()):
                if ll not in l:
                    h.append(hh)
                    l.append(ll)
        fig.legend(h, l, loc="upper center", ncol=8, fontsize=10)
        # The legend takes two rows here (the limits' labels): the title goes below it.
        fig.suptitle("Bandwidth vs size: n ops + one flush in a lock_all epoch (bidirectional: both ranks at once, sum of both directions)", y=0.93)
        self.layout(fig, 0.915)
        self.save(fig, "bandwidth.png", "Put, get, accumulate and bidirectional bandwidth vs size")

    def syncs(self):
        d, plt = self.d, self.plt
        fig, axes = plt.subplots(3, 3, figsize=(15, 12), squeeze=False)
        for n, call in enumerate(SYNC_CALLS):
            ax = axes[n // 3][n % 3]
            for impl in d.impls:
                xs = d.ranks(impl, "allocate", "sync", call, call, "ns")
                if xs:
                    ax.plot(xs, [d.get(impl, "allocate", "sync", call, call, 0, "ns", ranks=x) / 1e3 for x in xs], **self.style(impl))
            ax.set_xscale("log", base=2)
            ax.set_xticks([2, 4, 8, 16])
            ax.set_xticklabels(["2", "4", "8", "16"])
            self.log_y(ax)
            ax.set_title(call, fontsize=11)
            ax.grid(True, alpha=0.3)
            if n % 4 == 0:
                ax.set_ylabel("µs per call (slowest rank, median)")
            if n >= 4:
                ax.set_xlabel("ranks (2 cores: > 2 is oversubscribed)")
        h, l = axes[0][0].get_legend_handles_labels()
        fig.legend(h, l, loc="upper center", ncol=7, fontsize=10)
        fig.suptitle("Synchronization cost vs number of ranks (allocate windows; every rank calls at once)", y=0.955)
        self.layout(fig, 0.92)
        self.save(fig, "sync_vs_ranks.png", "Synchronization cost vs ranks")

    def windows(self):
        d, plt = self.d, self.plt
        flavors = ["allocate", "create", "dynamic", "shared"]
        fig, axes = plt.subplots(2, 4, figsize=(18, 8.5), squeeze=False)
        for j, fl in enumerate(flavors):
            for i, (op, metric, ylabel) in enumerate([("create", "us", "creation µs (median)"),
                                                      ("memory", "rss_kib", "RSS KiB per window per process")]):
                ax = axes[i][j]
                for impl in d.impls:
                    xs = d.ranks(impl, fl, "win", "-", op, metric)
                    if xs:
                        ax.plot(xs, [d.get(impl, fl, "win", "-", op, 4096, metric, ranks=x) for x in xs], **self.style(impl))
                ax.set_xscale("log", base=2)
                ax.set_xticks([2, 4, 8, 16])
                ax.set_xticklabels(["2", "4", "8", "16"])
                if metric == "us":
                    self.log_y(ax)
                ax.set_title(f"{fl}: {'creation time' if metric == 'us' else 'resident memory'}", fontsize=10)
                ax.grid(True, alpha=0.3)
                if j == 0:
                    ax.set_ylabel(ylabel)
        h, l = [], []
        for ax in axes.flat:
            for hh, ll in zip(*ax.get_legend_handles_labels()):
                if ll not in l:
                    h.append(hh)
                    l.append(ll)
        fig.legend(h, l, loc="upper center", ncol=7, fontsize=10)
        fig.suptitle("Window creation time and memory vs number of ranks (4 KiB windows)", y=0.955)
        self.layout(fig, 0.92)
        self.save(fig, "windows_vs_ranks.png", "Window creation time and memory per process vs ranks")

    def rate(self):
        d, plt = self.d, self.plt
        fig, axes = plt.subplots(1, 1, figsize=(12, 5.5), squeeze=False)
        ax = axes[0][0]
        groups = [(fl, t) for fl in FLAVORS for t in (1, 2, 4)]
        impls = [i for i in d.impls if any(d.get(i, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t) for fl, t in groups)]
        width = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            xs, ys = [], []
            for g, (fl, t) in enumerate(groups):
                v = d.get(impl, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t)
                if v:
                    xs.append(g + k * width)
                    ys.append(v)
            st = self.style(impl)
            ax.bar(xs, ys, width=width, color=st["color"], label=st["label"],
                   edgecolor="black" if impl == FASTRMA else None, linewidth=1.2 if impl == FASTRMA else 0)
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels([f"{fl}\n{t} thread{'s' if t > 1 else ''}" for fl, t in groups], fontsize=8)
        self.log_y(ax)
        ax.set_ylabel("million 8 B puts / s per rank (median; higher is better)")
        ax.set_title("Message rate: T threads of one rank, each 64 puts + flush (pt2pt: 1 thread only)", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        fig.legend(*ax.get_legend_handles_labels(), loc="upper center", ncol=7, fontsize=9)
        fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.84)
        self.save(fig, "rate.png", "Message rate with 1, 2, 4 threads per rank")

    def overlap(self):
        d, plt = self.d, self.plt
        ops = ("put", "get", "acc")
        flavors = [fl for fl in FLAVORS if any(d.sizes(i, fl, "overlap", "flush", op, "overlap") for i in d.impls for op in ops)]
        if not flavors:
            return
        fig, axes = plt.subplots(len(flavors), len(ops), figsize=(16, 3.6 * len(flavors) + 1.2), squeeze=False)
        for i, fl in enumerate(flavors):
            for j, op in enumerate(ops):
                ax = axes[i][j]
                for impl in d.impls:
                    xs = d.sizes(impl, fl, "overlap", "flush", op, "overlap")
                    if xs:
                        ax.plot(xs, [d.get(impl, fl, "overlap", "flush", op, x, "overlap") for x in xs], **self.style(impl))
                self.size_axis(ax)
                ax.set_xlim(6, 1.4 * (1 << 20))
                ax.set_ylim(-0.03, 1.03)
                ax.axhline(0.9, color="black", ls=":", lw=0.8)
                ax.set_title(f"{OP_TITLE[op].split(' ')[0]} · {fl}", fontsize=10)
                if j == 0:
                    ax.set_ylabel("fraction hidden (1 = all)")
                if i == len(flavors) - 1:
                    ax.set_xlabel("size")
        h, l = [], []
        for ax_ in axes.flat:
            for hh, ll in zip(*ax_.get_legend_handles_labels()):
                if ll not in l:
                    h.append(hh)
                    l.append(ll)
        fig.legend(h, l, loc="upper center", ncol=7, fontsize=9)
        fig.suptitle("Overlap: fraction of op + flush hidden behind the origin's computation while the target computes "
                     "without MPI calls (no line: needs target progress; dotted: 0.9)", fontsize=10,
                     y=1 - 0.55 / (3.6 * len(flavors) + 1.2))
        self.layout(fig, 1 - 1.0 / (3.6 * len(flavors) + 1.2))
        self.save(fig, "overlap.png", "Overlap of put, get and accumulate with computation, 8 B to 1 MiB")

    def all(self):
        if not self.plt:
            return
        for f in (self.latency, self.atomics, self.bandwidth, self.syncs, self.windows, self.rate, self.overlap):
            try:
                f()
            except Exception as e:  # a plot must never cost the report
                print(f"suite_report: plot {f.__name__} failed: {e}", file=sys.stderr)


# ---------------------------------------------------------------- report

class Report:
    def __init__(self, out):
        self.out = out
        self.d = Data(out)
        self.models = []  # model.csv rows

    def best_peer(self, getter, higher_better):
        best = None
        for p in self.d.peers:
            v = getter(p)
            if v is None:
                continue
            if best is None or (v > best[1] if higher_better else v < best[1]):
                best = (p, v)
        return best

    def comparison(self, which):
        """The headline table (which = "headline") or the rest (which = "more")."""
        d = self.d
        lines = []
        peers = d.peers
        head = "| measurement | fastrma | spread of fastrma (runs) | best peer | fastrma advantage | " + " | ".join(PEER_NOTE.get(p, p) for p in peers) + " |"
        lines += [head, "|" + "---|" * (5 + len(peers))]
        pmax = max([k[6] for k in d.values if k[2] in ("sync", "win")] or [2])

        def add(label, getter, formatter_, higher_better, spread=None, floor=0.0):
            def formatter(v):
                return "—" if v is None else formatter_(v)
            f = getter(FASTRMA)
            best = self.best_peer(getter, higher_better)
            if f is None and best is None:
                return
            adv = "—"
            if f is not None and best and higher_better and best[1] <= floor:
                # A peer at (about) zero: no ratio, say what happened instead.
                adv = "**∞** (best peer ≈ 0)" if f > floor else "— (both ≈ 0)"
            elif f is not None and best and best[1]:
                r = f / best[1] if higher_better else best[1] / f
                adv = f"**{r:.2f}×**" if r >= 1 else f"{r:.2f}×"
            sp = "—"
            if spread:
                s_ = spread()
                if s_ and s_[2] > 1:
                    sp = f"{formatter(s_[0])} – {formatter(s_[1])} ({s_[2]})"
            cells = [formatter(getter(p)) for p in peers]
            lines.append(f"| {label} | **{formatter(f)}** | {sp} | {best[0] if best else '—'} | {adv} | " + " | ".join(cells) + " |")

        def lat(fl, sync, op, size):
            add(f"{op} {size_label(size)}, {fl}, {sync}",
                lambda i: d.get(i, fl, "lat", sync, op, size, "ns"), fmt_ns, False,
                lambda: d.spread(FASTRMA, fl, "lat", sync, op, size, "ns"))

        def bw(fl, sec, op, size=1 << 20):
            add(f"{'bidirectional ' if sec == 'bibw' else ''}{op} bandwidth {size_label(size)}, {fl}",
                lambda i: d.get(i, fl, sec, "flush", op, size, "MB/s"), fmt_bw, True,
                lambda: d.spread(FASTRMA, fl, sec, "flush", op, size, "MB/s"))

        def rate(fl, t):
            add(f"message rate, {t} thread{'s' if t > 1 else ''}/rank, {fl}",
                lambda i: d.get(i, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t),
                lambda v: f"{v:.2f} M/s", True,
                lambda: d.spread(FASTRMA, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t))

        def overlap(fl, op="put", size=1 << 20):
            add(f"overlap, {op} {size_label(size)}, {fl}",
                lambda i: d.get(i, fl, "overlap", "flush", op, size, "overlap"), lambda v: f"{v:.2f}", True,
                floor=OVERLAP_FLOOR)

        def sync(call, p, fl="allocate"):
            add(f"{call}, {p} ranks{'' if fl == 'allocate' else ', ' + fl}",
                lambda i: d.get(i, fl, "sync", call, call, 0, "ns", ranks=p), fmt_ns, False)

        def win(fl, p, op="create", metric="us"):
            fm = (lambda v: f"{v:.0f} µs") if metric == "us" else (lambda v: f"{v:.1f} KiB")
            add(f"window {'creation' if op == 'create' else 'RSS per window'}, {p} ranks, {fl}",
                lambda i: d.get(i, fl, "win", "-", op, 4096, metric, ranks=p), fm, False)

        if which == "headline":
            for op in LAT_OPS:
                lat("allocate", "flush", op, 8)
            lat("allocate", "flush", "put", 65536)
            lat("allocate", "flush", "get", 65536)
            for s_ in ("lock", "fence", "pscw"):
                lat("allocate", s_, "put", 8)
            for sec, op in (("bw", "put"), ("bw", "get"), ("bw", "acc"), ("bibw", "put")):
                bw("allocate", sec, op)
            rate("allocate", 1)
            rate("allocate", 4)
            overlap("allocate")
            for op in ("put", "get", "fetch_and_op"):
                lat("create", "flush", op, 8)
            bw("create", "bw", "put")
            lat("dynamic", "flush", "put", 8)
            lat("dynamic", "flush", "fetch_and_op", 8)
            for call in ("fence", "pscw", "lock_excl", "lock_contended", "lock_all", "flush"):
                sync(call, 2)
                sync(call, pmax)
            win("allocate", pmax)
            win("create", pmax)
            win("allocate", pmax, "memory", "rss_kib")
            return lines
        for fl in FLAVORS:
            for sync_ in SYNCS:
                for op in LAT_OPS:
                    for size in ((8, 65536, 1 << 20) if op in SIZED_OPS else (8,)):
                        if (fl, sync_, size) == ("allocate", "flush", 8) or (fl, sync_, op, size) in (
                                ("allocate", "flush", "put", 65536), ("allocate", "flush", "get", 65536)):
                            continue
                        lat(fl, sync_, op, size)
            for sec, op in (("bw", "put"), ("bw", "get"), ("bw", "acc"), ("bibw", "put"), ("bibw", "get")):
                for size in (8, 4096, 1 << 20, 4 << 20):
                    bw(fl, sec, op, size)
            for t in (1, 2, 4):
                rate(fl, t)
            for op in ("put", "get", "acc"):
                for size in (65536, 1 << 20):
                    overlap(fl, op, size)
        ranks = sorted({k[6] for k in d.values if k[2] == "sync"})
        for call in SYNC_CALLS:
            for p in ranks:
                sync(call, p)
        for fl in ("allocate", "create", "dynamic", "shared"):
            for p in ranks:
                win(fl, p)
                win(fl, p, "memory", "rss_kib")
        return lines

    def model(self):
        d = self.d
        lines = []
        # Communication: P(s) = a*s + b per op (lock_all + flush), per flavor.
        lines.append("### Communication: P(s) = a·s + b (s in bytes; op + flush in a lock_all epoch)\n")
        lines.append("| implementation | flavor | " + " | ".join(f"P_{op}" for op in LAT_OPS) + " |")
        lines.append("|" + "---|" * (2 + len(LAT_OPS)))
        for impl in d.impls:
            for fl in FLAVORS:
                cells, anyv = [], False
                for op in LAT_OPS:
                    xs = d.sizes(impl, fl, "lat", "flush", op, "ns")
                    f = fit_linear(xs, [d.get(impl, fl, "lat", "flush", op, x, "ns") for x in xs]) if xs else None
                    if f:
                        anyv = True
                        a, b, err = f
                        cells.append(f"{model_text(a, b)} (±{err * 100:.0f}%)")
                        self.models.append([impl, fl, "lat", "flush", op, "size_bytes", f"{a:.6g}", f"{b:.6g}", f"{err:.3f}", len(xs)])
                    else:
                        cells.append("—")
                if anyv:
                    lines.append(f"| {'**fastrma**' if impl == FASTRMA else PEER_NOTE.get(impl, impl)} | {fl} | " + " | ".join(cells) + " |")
        # The other sync modes: fit too (model.csv), show the put column only.
        lines.append("\nPut under the other synchronization modes (the whole epoch per op):\n")
        lines.append("| implementation | flavor | " + " | ".join(f"P_put, {s}" for s in ("lock", "fence", "pscw")) + " |")
        lines.append("|---|---|---|---|---|")
        for impl in d.impls:
            for fl in FLAVORS:
                cells, anyv = [], False
                for sync in ("lock", "fence", "pscw"):
                    for op in LAT_OPS:
                        xs = d.sizes(impl, fl, "lat", sync, op, "ns")
                        f = fit_linear(xs, [d.get(impl, fl, "lat", sync, op, x, "ns") for x in xs]) if xs else None
                        if f:
                            self.models.append([impl, fl, "lat", sync, op, "size_bytes", f"{f[0]:.6g}", f"{f[1]:.6g}", f"{f[2]:.3f}", len(xs)])
                            if op == "put":
                                anyv = True
                                cells.append(f"{model_text(f[0], f[1])} (±{f[2] * 100:.0f}%)")
                        elif op == "put":
                            cells.append("—")
                if anyv:
                    lines.append(f"| {'**fastrma**' if impl == FASTRMA else PEER_NOTE.get(impl, impl)} | {fl} | " + " | ".join(cells) + " |")
        # Synchronization: P(p) = a*p + b.
        lines.append("\n### Synchronization: P(p) = a·p + b (p = ranks, 2..16, allocate windows; every rank calls at once)\n")
        lines.append("Past 2 ranks this machine is oversubscribed: a call that waits for another rank waits for the "
                     "scheduler, so costs jump rather than grow linearly and the fits are poor (large ±). The "
                     "measured cost at the smallest and largest p follows each fit.\n")
        lines.append("| implementation | " + " | ".join(f"P_{c}" for c in SYNC_CALLS) + " |")
        lines.append("|" + "---|" * (1 + len(SYNC_CALLS)))
        for impl in d.impls:
            cells, anyv = [], False
            for c in SYNC_CALLS:
                xs = d.ranks(impl, "allocate", "sync", c, c, "ns")
                f = fit_linear(xs, [d.get(impl, "allocate", "sync", c, c, 0, "ns", ranks=x) for x in xs]) if xs else None
                if f:
                    anyv = True
                    ends = f"{xs[0]}: {fmt_ns(d.get(impl, 'allocate', 'sync', c, c, 0, 'ns', ranks=xs[0]))}, " \
                           f"{xs[-1]}: {fmt_ns(d.get(impl, 'allocate', 'sync', c, c, 0, 'ns', ranks=xs[-1]))}"
                    cells.append(f"{model_text(f[0], f[1], 'p')} (±{f[2] * 100:.0f}%; {ends})")
                    self.models.append([impl, "allocate", "sync", c, c, "ranks", f"{f[0]:.6g}", f"{f[1]:.6g}", f"{f[2]:.3f}", len(xs)])
                else:
                    cells.append("—")
            if anyv:
                lines.append(f"| {'**fastrma**' if impl == FASTRMA else PEER_NOTE.get(impl, impl)} | " + " | ".join(cells) + " |")
        # Memory bound per flavor.
        lines.append("\n### Memory per window and process: M(p) = a·p + b (4 KiB windows, p = 2..16)\n")
        lines.append("RSS = resident memory added per window (pages touched); VmSize = address space added "
                     "(mappings, including the window memory of allocate/shared); fastrma's bookkeeping is the "
                     "engine's own count (`bench/win_memory`, `Window::metadata_bytes`).\n")
        lines.append("| implementation | flavor | RSS KiB | VmSize KiB | creation time | fastrma bookkeeping |")
        lines.append("|---|---|---|---|---|---|")
        for impl in d.impls:
            for fl in ("allocate", "create", "dynamic", "shared"):
                cells = []
                for op, metric, unit in (("memory", "rss_kib", ""), ("memory", "vmsize_kib", ""), ("create", "us", "µs")):
                    xs = d.ranks(impl, fl, "win", "-", op, metric)
                    ys = [d.get(impl, fl, "win", "-", op, 4096, metric, ranks=x) for x in xs]
                    if not xs:
                        cells.append("—")
                        continue
                    pos = [(x, y) for x, y in zip(xs, ys) if y and y > 0]
                    f = fit_linear([x for x, _ in pos], [y for _, y in pos]) if pos else None
                    self.models.append([impl, fl, "win", "-", f"{op}:{metric}", "ranks", f"{f[0]:.6g}" if f else "", f"{f[1]:.6g}" if f else "", f"{f[2]:.3f}" if f else "", len(xs)])
                    if not f:
                        cells.append("0 " + "(" + ", ".join(f"{y:.1f}" for y in ys) + ")")
                    else:
                        a, b, _ = f
                        if abs(b) < 1e-6 * max(abs(a), 1e-30):
                            b = 0.0
                        txt = (f"{a:.3g}·p" + (f" + {b:.3g}" if b else "") if a else f"{b:.3g}") + f" {unit}".rstrip()
                        cells.append(f"{txt} (p={xs[0]}: {ys[0]:.3g}, p={xs[-1]}: {ys[-1]:.3g})")
                extra = "—"
                if impl == FASTRMA:
                    pts = sorted((p, v["metadata_bytes"]) for (f2, p), v in d.winmem.items() if f2 == fl)
                    if pts:
                        f = fit_linear([p for p, _ in pts], [v for _, v in pts])
                        extra = (f"{f[0]:.3g}·p + {f[1]:.0f} B" if f and f[0] else f"{pts[0][1]:.0f} B (O(1))") + \
                                f" ({', '.join(f'p={p}: {v:.0f}' for p, v in pts)})"
                if any(c != "—" for c in cells):
                    lines.append(f"| {'**fastrma**' if impl == FASTRMA else PEER_NOTE.get(impl, impl)} | {fl} | " + " | ".join(cells) + f" | {extra} |")
        return lines

    # ------------------------------------------------------------ issue #4: progress and overlap

    def p2p_notes(self):
        """(impl, flavor) -> status detail text of the p2p runs, joined; and the refused pairs."""
        notes, refused = defaultdict(str), set()
        for r in self.d.status_rows:
            notes[(r["impl"], r["flavor"])] += " " + (r.get("detail") or "")
            if r.get("status") == "refused":
                refused.add((r["impl"], r["flavor"]))
        return notes, refused

    def mpich_host_section(self):
        """fastrma built with MPICH as the host (issue 24) against MPICH's own RMA, measured in the
        same launches (one rma_suite binary, --impl all under mpiexec.mpich)."""
        d = self.d
        if not any(k[0] == FASTRMA_ON_MPICH for k in d.values):
            return []
        L = ["## MPICH as the host: fastrma on MPICH against MPICH's own RMA\n",
             "One rma_suite binary built against MPICH (fastrma's MPICH build), run under mpiexec.mpich "
             "with both implementations in the same launch: MPICH's own RMA (ch4) and fastrma. "
             "*MPICH ÷ fastrma* = MPICH's time / fastrma's for latencies, fastrma's / MPICH's for "
             "bandwidth and rate: **> 1 means fastrma is better**.\n",
             "| measurement | flavor | MPICH | fastrma on MPICH | MPICH ÷ fastrma |", "|---|---|---|---|---|"]

        def row(label, fl, getter, fmt, higher_better):
            m, f = getter("mpich"), getter(FASTRMA_ON_MPICH)
            if m is None and f is None:
                return
            adv = "—"
            if m and f:
                r = f / m if higher_better else m / f
                adv = f"**{r:.2f}×**" if r >= 1 else f"{r:.2f}×"
            L.append(f"| {label} | {fl} | {fmt(m)} | {fmt(f)} | {adv} |")

        for fl in FLAVORS:
            for sync_ in SYNCS:
                for op in LAT_OPS:
                    for size in (8, 65536, 1 << 20):
                        row(f"{op} {size_label(size)} + {sync_}", fl,
                            lambda i: d.get(i, fl, "lat", sync_, op, size, "ns"), fmt_ns, False)
            for op in ("put", "get", "acc"):
                row(f"{op} bandwidth 1 MiB", fl, lambda i: d.get(i, fl, "bw", "flush", op, 1 << 20, "MB/s"),
                    fmt_bw, True)
            for t in (1, 4):
                row(f"message rate, {t} thread{'s' if t > 1 else ''}/rank", fl,
                    lambda i: d.get(i, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t),
                    lambda v: "—" if v is None else f"{v:.2f} M/s", True)
        return L

    def progress_section(self):
        """Issue #4's three tables (overlap, message rate, am latency), with ratios; also written
        as progress_overlap.csv, progress_rate.csv and progress_am_latency.csv."""
        d, out = self.d, self.out
        notes, refused = self.p2p_notes()
        impls = d.impls
        am = FASTRMA + "-am"
        variants = [i for i in impls if i.startswith(FASTRMA)]  # fastrma, fastrma-am, fastrma-offload
        pt2pt = "ompi-pt2pt"
        ops = ("put", "get", "acc")
        flavors = [fl for fl in FLAVORS if any(d.sizes(i, fl, "overlap", "flush", op, "overlap") for i in impls for op in ops)]

        def why_missing(impl, fl, what):
            n = notes.get((impl, fl), "")
            if (impl, fl) in refused:
                return "refused"
            if what == "overlap" and "overlap: not reported" in n:
                return "needs target progress"
            if what.startswith("rate.t") and f"{what}: not run" in n:
                return "not run (1 thread only)"
            return ""

        def ratio(f, best, floor=0.0):
            if f is None or best is None:
                return "—", ""
            if best[1] <= floor:
                return ("**∞** (peers ≈ 0)", "inf") if f > floor else ("— (all ≈ 0)", "")
            r = f / best[1]
            return (f"**{r:.2f}×**" if r >= 1 else f"{r:.2f}×"), f"{r:.4g}"

        L = ["## Progress and overlap (issue #4)\n",
             "Side by side with Open MPI's osc sm, rdma, ucx and pt2pt and with MPICH, from the same run. "
             "fastrma is measured over both transports: `fastrma` = shared memory (shm), `fastrma-am` = the "
             "active-message transport forced for node peers (`FASTRMA_TRANSPORT=am`, quick sizes"
             + (", allocate windows only" if not any(d.sizes(am, fl, "lat", "flush", "put", "ns") for fl in ("create", "dynamic")) else "")
             + ")" + ("; `fastrma-offload` = shared memory with `FASTRMA_OFFLOAD=on`, overlap only: the default "
                      "(`auto`) hands large put/get to the progress thread only when a process may run on more "
                      "cores than the window has ranks on the node, so on 2 cores the default runs do not offload"
                      if "fastrma-offload" in impls else "")
             + ("; `fastrma-am-bound` = am with each rank bound to one core (`--bind-to core`), overlap only: "
                "the target's progress thread then shares the target's core, not the origin's"
                if "fastrma-am-bound" in impls else "")
             + ". The same tables, every flavor: progress_overlap.csv, progress_rate.csv, progress_am_latency.csv.\n"]

        # ---- (a) overlap
        L.append("### Overlap: fraction of the origin's communication hidden behind computation\n")
        L.append("Origin, in each batch back to back: op + flush alone (t_comm), the same work alone (t_comp, "
                 "calibrated to t_comm), then op, work, flush (t_total); overlap = (t_comm + t_comp − t_total) "
                 "/ t_comm over the medians of the three parts, clamped to [0, 1]. The target "
                 "computes without calling MPI all the while. *needs target progress*: the ops did not complete "
                 "while the target computed (the origin's flush waited for the target to enter MPI), so nothing "
                 "is reported. Ratios are against the best peer; below "
                 f"{OVERLAP_FLOOR} an overlap is treated as zero. At small sizes t_comm is tens of nanoseconds "
                 "and the ratio is mostly noise: read the rows from 64 KiB up. The other fastrma columns show "
                 "overlap / their own t_comm: the fraction is of that t_comm, so a variant whose ops wait "
                 "longer for the target hides a larger fraction of a longer time (compare t_comm, too).\n")
        rows_csv = []
        ov_points = defaultdict(list)  # impl -> [(op, size, overlap)] for the goal check (allocate)
        for fl in flavors:
            sizes = sorted({x for i in impls for op in ops for x in d.sizes(i, fl, "overlap", "flush", op, "overlap")})
            if fl == "allocate":
                L.append(f"**{fl} windows** (fastrma measured in several runs: the median, and in brackets the range over runs)\n")
                L.append("| op | size | fastrma t_comm | " + " | ".join(PEER_NOTE.get(i, i).replace(" (MPI_THREAD_SERIALIZED)", "") for i in impls)
                         + " | best peer | " + " | ".join(f"{v} ÷ best peer" for v in variants) + " |")
                L.append("|" + "---|" * (4 + len(impls) + len(variants)))
            for op in ops:
                for s_ in sizes:
                    getter = lambda i: d.get(i, fl, "overlap", "flush", op, s_, "overlap")
                    best = self.best_peer(getter, True)
                    cells = []
                    for i in impls:
                        v = getter(i)
                        miss = why_missing(i, fl, "overlap")
                        cells.append(f"**{v:.2f}**" if v is not None and i == FASTRMA else f"{v:.2f}" if v is not None else (miss or "—"))
                        sp = d.spread(i, fl, "overlap", "flush", op, s_, "overlap") if i == FASTRMA else None
                        if sp and sp[2] > 1:  # fastrma measured in several runs: their range
                            cells[-1] += f" ({sp[0]:.2f}–{sp[1]:.2f})"
                        if v is not None and i.startswith(FASTRMA) and i != FASTRMA:
                            # A variant's own t_comm: a slower t_comm (waiting for the target)
                            # is easier to hide, so the fraction alone would flatter it.
                            cells[-1] += f" / {fmt_ns(d.get(i, fl, 'overlap', 'flush', op, s_, 'comm_ns'))}"
                        if v is not None:
                            ov_points[(i, fl)].append((op, s_, v))
                        if v is not None or miss:
                            r_txt, r_num = ratio(v, best, OVERLAP_FLOOR)
                            rows_csv.append([fl, op, s_, i, "" if v is None else f"{v:.4g}",
                                             fmt_csv(d.get(i, fl, "overlap", "flush", op, s_, "comm_ns")),
                                             fmt_csv(d.get(i, fl, "overlap", "flush", op, s_, "comp_ns")),
                                             fmt_csv(d.get(i, fl, "overlap", "flush", op, s_, "total_ns")),
                                             "measured" if v is not None else miss.replace(" ", "_"),
                                             best[0] if best else "", f"{best[1]:.4g}" if best else "", r_num])
                    if fl == "allocate":
                        L.append(f"| {op} | {size_label(s_)} | {fmt_ns(d.get(FASTRMA, fl, 'overlap', 'flush', op, s_, 'comm_ns'))} | "
                                 + " | ".join(cells) + f" | {best[0] + ' ' + format(best[1], '.2f') if best else '—'} | "
                                 + " | ".join(ratio(getter(v), best, OVERLAP_FLOOR)[0] for v in variants) + " |")
        others = [fl for fl in flavors if fl != "allocate"]
        if others:
            L.append("\n**create and dynamic windows** (64 KiB and 1 MiB; every size in progress_overlap.csv)\n")
            L.append("| flavor | op | size | " + " | ".join(variants) + " | best peer | fastrma ÷ best peer |")
            L.append("|" + "---|" * (5 + len(variants)))
            for fl in others:
                for op in ops:
                    for s_ in (65536, 1 << 20):
                        getter = lambda i: d.get(i, fl, "overlap", "flush", op, s_, "overlap")
                        vals = [getter(v) for v in variants]
                        best = self.best_peer(getter, True)
                        if all(v is None for v in vals) and best is None:
                            continue
                        cells = ["—" if v is None else (f"**{v:.2f}**" if n == FASTRMA else f"{v:.2f}")
                                 for n, v in zip(variants, vals)]
                        L.append(f"| {fl} | {op} | {size_label(s_)} | " + " | ".join(cells)
                                 + f" | {best[0] + ' ' + format(best[1], '.2f') if best else '—'} | "
                                 + ratio(getter(FASTRMA), best, OVERLAP_FLOOR)[0] + " |")
        with open(os.path.join(out, "progress_overlap.csv"), "w", newline="") as f_:
            w = csv.writer(f_)
            w.writerow(["flavor", "op", "size_bytes", "impl", "overlap", "comm_ns", "comp_ns", "total_ns", "status",
                        "best_peer", "best_peer_overlap", "ratio_to_best_peer"])
            w.writerows(rows_csv)

        # ---- (b) message rate: with the target idle inside MPI, then asleep
        def rate_table(sync, heading, intro, csv_name):
            rimpls = [i for i in impls if any(k[0] == i and k[2] == "rate" and k[3] == sync for k in d.values)]
            if not rimpls:
                return {}
            L.append(heading)
            L.append(intro)
            L.append("| flavor | threads | " + " | ".join(PEER_NOTE.get(i, i).replace(" (MPI_THREAD_SERIALIZED)", "") for i in rimpls)
                     + " | best peer | fastrma ÷ best peer |")
            L.append("|" + "---|" * (4 + len(rimpls)))
            rate_csv = []
            growth = {}
            at = lambda i, fl, t: d.get(i, fl, "rate", sync, "put", 8, "Mmsg/s", threads=t)
            for fl in FLAVORS:
                if not any(at(i, fl, 1) for i in rimpls):
                    continue
                for t in (1, 2, 4):
                    getter = lambda i: at(i, fl, t)
                    best = self.best_peer(getter, True)
                    cells = []
                    for i in rimpls:
                        v = getter(i)
                        cells.append("—" if v is None else f"**{v:.2f}**" if i == FASTRMA else f"{v:.2f}")
                        if v is None:
                            miss = why_missing(i, fl, f"rate.t{t}")
                            cells[-1] = miss or "—"
                        v1 = at(i, fl, 1)
                        if v is not None:
                            rate_csv.append([fl, t, i, f"{v:.4g}", f"{v / v1:.3g}" if v1 else "", best[0] if best else "",
                                             f"{best[1]:.4g}" if best else "", f"{v / best[1]:.4g}" if best and best[1] else ""])
                    L.append(f"| {fl} | {t} | " + " | ".join(cells) + f" | {best[0] + ' ' + format(best[1], '.2f') if best else '—'} | "
                             + ratio(getter(FASTRMA), best)[0] + " |")
                cells = []
                for i in rimpls:
                    v1, v4 = at(i, fl, 1), at(i, fl, 4)
                    g = v4 / v1 if v1 and v4 else None
                    growth[(i, fl)] = g
                    cells.append("—" if g is None else (f"**{g:.2f}×**" if i == FASTRMA else f"{g:.2f}×"))
                bestg = max(((i, growth[(i, fl)]) for i in d.peers if growth.get((i, fl))), key=lambda x: x[1], default=None)
                L.append(f"| {fl} | *growth 1 → 4* | " + " | ".join(cells) + f" | {bestg[0] + ' ' + format(bestg[1], '.2f') + '×' if bestg else '—'} | |")
            with open(os.path.join(out, csv_name), "w", newline="") as f_:
                w = csv.writer(f_)
                w.writerow(["flavor", "threads", "impl", "mmsg_per_s", "growth_vs_1_thread", "best_peer", "best_peer_mmsg_per_s",
                            "ratio_to_best_peer"])
                w.writerows(rate_csv)
            return growth

        growth = rate_table("flush", "\n### Message rate with 1, 2 and 4 threads per rank\n",
                   "Million 8-byte puts per second from one rank: T threads, each posting 64 puts to its own part of "
                   "the target and flushing, all threads counted together; the target idles in MPI_Barrier. "
                   "*growth* = rate with 4 threads ÷ rate with 1 (> 1: the rate grows with threads). osc pt2pt "
                   "refuses MPI_THREAD_MULTIPLE, so it runs one thread only. The machine has 2 cores: 4 threads "
                   "oversubscribe them, and the target's blocking MPI call spins on one of them.\n",
                   "progress_rate.csv")
        growth_asleep = rate_table("flush-asleep", "\n### Message rate with the target asleep\n",
                   "The same measurement with the target sleeping between MPI_Test calls every 200 µs "
                   "(`rma_suite --target-wait poll`): a target that computes, whose core the origin's threads may "
                   "use. An implementation that needs the target's MPI to make progress (osc pt2pt) waits for "
                   "its next MPI_Test; fastrma-am's progress thread serves without it.\n",
                   "progress_rate_asleep.csv")

        # ---- (c) am latency against osc pt2pt
        L.append("\n### Latency over active messages: fastrma-am against Open MPI osc pt2pt\n")
        L.append("osc pt2pt is Open MPI's active-message design (every operation is a message the target's MPI "
                 "progress engine serves); fastrma-am serves them on the target's progress thread. Allocate "
                 "windows; *pt2pt ÷ am* > 1 means fastrma-am is faster. fastrma over shared memory for "
                 "reference. Every flavor and sync mode: progress_am_latency.csv.\n")
        L.append("| op | size | am, flush | pt2pt, flush | pt2pt ÷ am | am, lock | pt2pt, lock | pt2pt ÷ am | fastrma (shm), flush |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        am_csv, am_cmp = [], []
        for fl in FLAVORS:
            for sync in SYNCS:
                for op in LAT_OPS:
                    for s_ in ((8, 65536, 1 << 20) if op in SIZED_OPS else (8,)):
                        a = d.get(am, fl, "lat", sync, op, s_, "ns")
                        p_ = d.get(pt2pt, fl, "lat", sync, op, s_, "ns")
                        if a is None and p_ is None:
                            continue
                        am_csv.append([fl, sync, op, s_, fmt_csv(a), fmt_csv(p_), f"{p_ / a:.4g}" if a and p_ else "",
                                       fmt_csv(d.get(FASTRMA, fl, "lat", sync, op, s_, "ns"))])
                        if a and p_ and fl == "allocate" and sync == "flush":
                            am_cmp.append((op, s_, p_ / a))
        for op in LAT_OPS:
            for s_ in ((8, 65536, 1 << 20) if op in SIZED_OPS else (8,)):
                cells = []
                for sync in ("flush", "lock"):
                    a = d.get(am, "allocate", "lat", sync, op, s_, "ns")
                    p_ = d.get(pt2pt, "allocate", "lat", sync, op, s_, "ns")
                    r = "—" if not (a and p_) else (f"**{p_ / a:.2f}×**" if p_ >= a else f"{p_ / a:.2f}×")
                    cells += [fmt_ns(a), fmt_ns(p_), r]
                L.append(f"| {op} | {size_label(s_)} | " + " | ".join(cells) + f" | {fmt_ns(d.get(FASTRMA, 'allocate', 'lat', 'flush', op, s_, 'ns'))} |")
        with open(os.path.join(out, "progress_am_latency.csv"), "w", newline="") as f_:
            w = csv.writer(f_)
            w.writerow(["flavor", "sync", "op", "size_bytes", "fastrma_am_ns", "ompi_pt2pt_ns", "pt2pt_over_am", "fastrma_shm_ns"])
            w.writerows(am_csv)

        # ---- the goals, checked
        L.append("\n### Issue #4 goals against this run (allocate windows)\n")
        for impl in [v for v in variants if any(k[0] == v for k in ov_points)] or [FASTRMA]:
            pts = [(op, s_, v) for op, s_, v in ov_points.get((impl, "allocate"), []) if s_ >= 65536]
            if not pts:
                L.append(f"- overlap > 90 % ({impl}): not measured")
                continue
            hit = [p for p in pts if p[2] > 0.9]
            peer_best = max((v for pr in d.peers for op, s_, v in ov_points.get((pr, "allocate"), []) if s_ >= 65536), default=None)
            L.append(f"- overlap > 90 % where peers show little ({impl}, put/get/acc at 64 KiB and above): "
                     f"{len(hit)} of {len(pts)} points (median {statistics.median(p[2] for p in pts):.2f}); "
                     + (f"the best peer reaches {peer_best:.2f} at these sizes" if peer_best is not None else "no peer measured")
                     + (" — **met**" if len(hit) == len(pts) else " — not met"))
        g = growth.get((FASTRMA, "allocate"))
        g2 = d.get(FASTRMA, "allocate", "rate", "flush", "put", 8, "Mmsg/s", threads=2)
        g1 = d.get(FASTRMA, "allocate", "rate", "flush", "put", 8, "Mmsg/s", threads=1)
        if g:
            L.append(f"- message rate grows with threads (fastrma): 1 → 2 threads {g2 / g1:.2f}×, 1 → 4 threads {g:.2f}×"
                     + (" — **met**" if g > 1.0 and g2 / g1 > 1.0 else " — not met"))
        asleep = [(fl, growth_asleep[(FASTRMA, fl)]) for fl in FLAVORS if growth_asleep.get((FASTRMA, fl))]
        if asleep:
            L.append("- the same with the target asleep (fastrma, 1 → 4 threads): "
                     + ", ".join(f"{fl} {x:.2f}×" for fl, x in asleep))
        if am_cmp:
            le = [c for c in am_cmp if c[2] >= 1.0]
            # The median, not a mean: one scheduler-tick outlier (12 ms for a 3 µs get) would own a mean.
            med = statistics.median(c[2] for c in am_cmp)
            worst = min(am_cmp, key=lambda c: c[2])
            L.append(f"- am latency ≤ pt2pt (lock_all + flush): {len(le)} of {len(am_cmp)} op × size points; median "
                     f"pt2pt ÷ am = {med:.2f}×; worst {worst[0]} {size_label(worst[1])} at {worst[2]:.2f}×"
                     + (" — **met**" if len(le) == len(am_cmp) else " — not met"))
        else:
            L.append("- am latency ≤ pt2pt: not measured (fastrma-am or ompi-pt2pt missing: see Status)")
        L.append("\nOn this 2-core machine the origin's computation, the target's computation and the progress "
                 "threads share two cores, so an implementation that offloads a transfer to a thread competes "
                 "with the computation it should hide behind; numbers move by tens of percent between runs.")
        return L

    def limits(self):
        d = self.d
        lines = []
        sp = d.spread("limit", "-", "limit", "-", "cacheline_rtt", 8, "ns")
        rtt = sp[3] if sp else None  # a limit is a best case: the best batch
        lines.append("A limit is a best case, so each is the best of many short batches (the median, in "
                     "results.csv, moves with the machine's load); the implementations' numbers are medians, "
                     "so the ratios below are conservative.\n")
        if rtt:
            lines.append(f"- **Cache-line round trip between two cores** (two processes ping-ponging one line of a shared "
                         f"mapping): **{rtt:.0f} ns** best batch (median {sp[0]:.0f} ns, worst batch {sp[4]:.0f} ns); one line "
                         f"transfer ≈ {rtt / 2:.0f} ns. An RMA call that needs an answer from the other core cannot beat one "
                         "transfer; one that only stores into the peer's mapping (put + flush) can, as the line moves later.")
        lines.append("")
        lines.append("The put bandwidth test leaves the data unread by the target, so the written lines stay in the "
                     "origin's cache: its ceiling is a memcpy inside one process. When the target does read what "
                     "it receives, the copy into the shared mapping is the ceiling (second column).\n")
        lines.append("| size | memcpy in one process (best batch) | memcpy into a mapping the other process reads (best batch) | "
                     "fastrma put bw (allocate) | fastrma / memcpy | best peer put bw (allocate) | peer / memcpy |")
        lines.append("|---|---|---|---|---|---|---|")
        for s_ in d.sizes("limit", "-", "limit", "-", "copy_shared", "MB/s"):
            if s_ not in (8, 512, 4096, 65536, 1 << 20, 4 << 20):
                continue
            shared = (d.spread("limit", "-", "limit", "-", "copy_shared", s_, "MB/s") or [None] * 5)[4]
            loc = (d.spread("limit", "-", "limit", "-", "memcpy_local", s_, "MB/s") or [None] * 5)[4]
            f = d.get(FASTRMA, "allocate", "bw", "flush", "put", s_, "MB/s")
            best = self.best_peer(lambda p: d.get(p, "allocate", "bw", "flush", "put", s_, "MB/s"), True)
            lines.append(f"| {size_label(s_)} | {fmt_bw(loc)} | {fmt_bw(shared)} | {fmt_bw(f)} | "
                         + (f"{f / loc:.2f}" if f and loc else "—") + " | "
                         + (f"{fmt_bw(best[1])} ({best[0]}) | {best[1] / loc:.2f} |" if best and loc else "— | — |"))
        if rtt:
            lines.append("")
            lines.append("| 8 B op, allocate, lock_all + flush | fastrma | in line transfers | best peer | in line transfers |")
            lines.append("|---|---|---|---|---|")
            for op in LAT_OPS:
                f = d.get(FASTRMA, "allocate", "lat", "flush", op, 8, "ns")
                best = self.best_peer(lambda p: d.get(p, "allocate", "lat", "flush", op, 8, "ns"), False)
                lines.append(f"| {op} | {fmt_ns(f)} | {f / (rtt / 2):.1f} |" if f else f"| {op} | — | — |")
                lines[-1] += (f" {fmt_ns(best[1])} ({best[0]}) | {best[1] / (rtt / 2):.1f} |" if best else " — | — |")
        return lines

    def statuses(self):
        """One row per run x impl x flavor; crashes and hangs from attempts.csv."""
        d = self.d
        st = {}
        for r in d.status_rows:
            key = (r["run"], r["impl"], r["flavor"], r.get("transport", "-"))
            prev = st.get(key)
            if prev and prev["status"] == "ran" and r["status"] != "ran":
                continue
            st[key] = {"status": r["status"], "detail": r["detail"]}
        for a in d.attempts:
            if a["outcome"] == "ok" or a["impl"] in ("-", ""):
                continue
            label = a["label"]
            for key in list(st) + [(label, a["impl"], a["flavor"], "?")]:
                if key[0] == label and key[1] == a["impl"] and key[2] == a["flavor"]:
                    e = st.setdefault(key, {"status": "partial", "detail": ""})
                    e["status"] = "partial" if e["status"] in ("ran", "op_failed", "partial") else e["status"]
                    note = f"p={a['ranks']}: {a['outcome']} in {a['phase']}"
                    if note not in e["detail"]:
                        e["detail"] = (e["detail"] + "; " if e["detail"] else "") + note
                    break
        return st

    def detail_tables(self):
        d = self.d
        out = ["# Benchmark suite: all numbers\n", "Medians over batches (fastrma: median over the runs it was measured in). "
               "See docs/performance.md.\n"]
        for fl in FLAVORS:
            for sync in SYNCS:
                out.append(f"\n## Latency, {fl} window, {SYNC_TITLE[sync]}\n")
                out.append("| op | size | " + " | ".join(d.impls) + " |")
                out.append("|" + "---|" * (2 + len(d.impls)))
                for op in LAT_OPS:
                    for s in sorted({x for i in d.impls for x in d.sizes(i, fl, "lat", sync, op, "ns")}):
                        out.append(f"| {op} | {size_label(s)} | " + " | ".join(fmt_ns(d.get(i, fl, "lat", sync, op, s, "ns")) for i in d.impls) + " |")
            out.append(f"\n## Bandwidth, {fl} window (n ops + flush)\n")
            out.append("| section | op | size | " + " | ".join(d.impls) + " |")
            out.append("|" + "---|" * (3 + len(d.impls)))
            for sec, op in (("bw", "put"), ("bw", "get"), ("bw", "acc"), ("bibw", "put"), ("bibw", "get")):
                for s in sorted({x for i in d.impls for x in d.sizes(i, fl, sec, "flush", op, "MB/s")}):
                    out.append(f"| {sec} | {op} | {size_label(s)} | " + " | ".join(fmt_bw(d.get(i, fl, sec, "flush", op, s, "MB/s")) for i in d.impls) + " |")
            out.append(f"\n## Message rate and overlap, {fl} window\n")
            out.append("| measurement | " + " | ".join(d.impls) + " |")
            out.append("|" + "---|" * (1 + len(d.impls)))
            for t in (1, 2, 4):
                out.append(f"| rate, {t} threads (M puts/s) | " + " | ".join(fmt_num(d.get(i, fl, "rate", "flush", "put", 8, "Mmsg/s", threads=t)) for i in d.impls) + " |")
            for op in ("put", "get", "acc"):
                for s in sorted({x for i in d.impls for x in d.sizes(i, fl, "overlap", "flush", op, "overlap")}):
                    cells = []
                    for i in d.impls:
                        ov = d.get(i, fl, "overlap", "flush", op, s, "overlap")
                        c = d.get(i, fl, "overlap", "flush", op, s, "comm_ns")
                        t = d.get(i, fl, "overlap", "flush", op, s, "total_ns")
                        cells.append("—" if ov is None else f"{ov:.2f} ({fmt_ns(c)} comm, {fmt_ns(t)} with work)")
                    out.append(f"| overlap {op} {size_label(s)} | " + " | ".join(cells) + " |")
        out.append("\n## Synchronization calls vs ranks (every rank calls at once)\n")
        for fl in FLAVORS:
            ranks = sorted({x for i in d.impls for c in SYNC_CALLS for x in d.ranks(i, fl, "sync", c, c, "ns")})
            if not ranks:
                continue
            out.append(f"\n### {fl} windows\n")
            out.append("| call | impl | " + " | ".join(f"p={p}" for p in ranks) + " |")
            out.append("|" + "---|" * (2 + len(ranks)))
            for c in SYNC_CALLS:
                for i in d.impls:
                    vals = [d.get(i, fl, "sync", c, c, 0, "ns", ranks=p) for p in ranks]
                    if any(v is not None for v in vals):
                        out.append(f"| {c} | {i} | " + " | ".join(fmt_ns(v) for v in vals) + " |")
        out.append("\n## Windows vs ranks (4 KiB windows; per window, per process)\n")
        ranks = sorted({k[6] for k in d.values if k[2] == "win"})
        out.append("| flavor | impl | metric | " + " | ".join(f"p={p}" for p in ranks) + " |")
        out.append("|" + "---|" * (3 + len(ranks)))
        for fl in ("allocate", "create", "dynamic", "shared"):
            for i in d.impls:
                for op, metric in (("create", "us"), ("free", "us"), ("memory", "rss_kib"), ("memory", "vmsize_kib"), ("memory", "mappings")):
                    vals = [d.get(i, fl, "win", "-", op, 4096, metric, ranks=p) for p in ranks]
                    if any(v is not None for v in vals):
                        out.append(f"| {fl} | {i} | {op} {metric} | " + " | ".join(fmt_num(v) for v in vals) + " |")
            pts = sorted((p, v) for (f2, p), v in d.winmem.items() if f2 == fl)
            if pts:
                out.append(f"| {fl} | fastrma (win_memory) | bookkeeping bytes | " + " | ".join(
                    fmt_num(dict(pts).get(p, {}).get("metadata_bytes")) for p in ranks) + " |")
        return out

    def settings(self):
        try:
            with open(os.path.join(self.d.raw, "settings.txt")) as f:
                return f.read().strip().splitlines()
        except OSError:
            return []

    def versions(self):
        seen = []
        for log in sorted(glob.glob(os.path.join(self.d.raw, "*.log"))):
            with open(log, errors="replace") as f:
                for line in f:
                    m = re.match(r"# rma_suite: (.*?); mode=", line)
                    if m and m.group(1) not in seen:
                        seen.append(m.group(1))
        return seen

    def write(self):
        d, out = self.d, self.out
        # results.csv and status.csv
        cols = ["run", "impl", "flavor", "transport", "section", "sync", "op", "size", "ranks", "threads", "metric", "value", "lo", "hi", "n"]
        with open(os.path.join(out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for r in d.rows:
                w.writerow(r)
        st = self.statuses()
        with open(os.path.join(out, "status.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["run", "impl", "flavor", "transport", "status", "detail"])
            for (run, impl, fl, tr), v in sorted(st.items()):
                w.writerow([run, impl, fl, tr, v["status"], v["detail"]])
        plots = Plots(d, out)
        plots.all()
        headline = self.comparison("headline")
        more = self.comparison("more")
        model = self.model()
        with open(os.path.join(out, "model.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["impl", "flavor", "section", "sync", "op", "x", "a_ns_per_x", "b_ns", "max_rel_err", "points"])
            w.writerows(self.models)
        limits = self.limits()
        progress = self.progress_section()
        with open(os.path.join(out, "tables.md"), "w") as f:
            f.write("\n".join(self.detail_tables()) + "\n")

        r = ["# fastrma benchmark suite\n"]
        r.append("How to read this report: [docs/performance.md](../docs/performance.md) in the repository. "
                 "Every number is the median over batches of repeated operations; fastrma's is also the median "
                 "over the runs it was measured in, and its spread over runs is shown where there were several.\n")
        r.append("## Run\n")
        for line in self.settings():
            r.append(f"- {line}")
        for v in self.versions():
            r.append(f"- MPI library: {v}")
        tot = [t for t in d.timing if t["step"] == "total (runs)"]
        if tot:
            r.append(f"- benchmark runs took {float(tot[0]['seconds']):.0f} s")
        r.append("\n**Noise.** This machine has 2 vCPUs shared with other work; both ranks spin, the "
                 "progress threads and the host MPI's own threads compete for the same 2 cores, and runs "
                 "with more than 2 ranks are oversubscribed. Treat ratios below ~1.5× as equal unless they "
                 "repeat across runs; the spread columns and the batch ranges in results.csv (lo, hi) show how "
                 "much numbers move.\n")
        r.append("## Headline: fastrma against its peers\n")
        r.append("*fastrma advantage* = best peer's time / fastrma's time for latencies and costs, fastrma's "
                 "bandwidth / best peer's for bandwidth, rate and overlap: **> 1 means fastrma is better**. "
                 "Peers: Open MPI 4.1 with one osc component forced per run (pt2pt at MPI_THREAD_SERIALIZED, "
                 "the level it accepts), MPICH when installed. — = not measured (refused, crashed or not "
                 "available: see Status).\n")
        r += headline
        r.append("\nEvery other comparison (all flavors, sync modes, sizes, thread counts and rank counts) is in "
                 "[More comparisons](#more-comparisons) below; every number in tables.md.\n")
        r.append("\n## Performance model\n")
        r.append("Fits of P = a·x + b minimizing the relative error over all measured sizes (or rank counts); "
                 "(±N%) is the largest relative deviation of a measured point from the fit. a is the cost per "
                 "byte (1/a is the asymptotic bandwidth: 0.1 ns·s ≈ 10 GB/s), b the cost of an empty operation. "
                 "All fits are in model.csv.\n")
        r += model
        r.append("\n## Physical limits of this machine (same run)\n")
        r += limits
        r.append("")
        r += progress
        r += self.mpich_host_section()
        if plots.files:
            r.append("\n## Plots\n")
            for name, caption in plots.files:
                r.append(f"**{caption}**\n\n![{caption}]({name})\n")
        elif not plots.plt:
            r.append("\n## Plots\n\nNot drawn: python3-matplotlib is not installed (scripts/setup.sh installs it).\n")
        r.append("\n## More comparisons\n")
        r += more
        r.append("\n## Status of every run\n")
        r.append("| run | implementation | flavor | transport | status | detail |")
        r.append("|---|---|---|---|---|---|")
        for (run, impl, fl, tr), v in sorted(st.items()):
            status = v["status"]
            if tr == "am" and status == "refused":
                status = "**not available**"
            r.append(f"| {run} | {impl} | {fl} | {tr} | {status} | {v['detail'][:300]} |")
        if d.timing:
            r.append("\n## Time per step\n")
            r.append("| step | seconds |")
            r.append("|---|---|")
            for t in d.timing:
                r.append(f"| {t['step']} | {t['seconds']} |")
        r.append("\nAll numbers per flavor, sync mode and size: [tables.md](tables.md); raw rows: results.csv.")
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write("\n".join(r) + "\n")
        print("\n".join(r[:0]))
        print(f"suite_report: wrote {out}/report.md, tables.md, results.csv, status.csv, model.csv and {len(plots.files)} plots")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    Report(sys.argv[1]).write()


if __name__ == "__main__":
    main()
