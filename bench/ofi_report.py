#!/usr/bin/env python3
"""ofi_report.py OUTDIR — the tables of scripts/ofi_bench.sh (markdown on stdout).

Reads OUTDIR/<impl>_<round>.txt (rma_suite's human lines: impl flavor section sync op size B
rN tN value metric [lo .. hi]), takes per point the median over the rounds, and prints
fastrma-ofi against each peer on the same wire: latency (peer / ofi: > 1 means ofi is
faster), bandwidth and message rate (ofi / peer: > 1 means ofi is faster), and op + flush
with the target computing (overlap section, comm_ns) against the target waiting in MPI
(lat.flush), per implementation.
"""
import collections
import glob
import math
import os
import statistics
import sys

OFI = "fastrma-ofi"
PEERS = ["fastrma-am", "ompi-ucx", "mpich-ucx", "ompi-pt2pt"]
SHORT = {"fastrma-ofi": "ofi", "fastrma-am": "am", "ompi-ucx": "ompi ucx", "mpich-ucx": "mpich ucx",
         "ompi-pt2pt": "pt2pt"}


def load(outdir):
    vals = collections.defaultdict(lambda: collections.defaultdict(list))
    rounds = collections.Counter()
    for fn in sorted(glob.glob(os.path.join(outdir, "*_*.txt"))):
        impl = os.path.basename(fn).rsplit("_", 1)[0]
        if impl == "wire-rtt":
            continue
        rounds[impl] += 1
        for line in open(fn, errors="replace"):
            f = line.split()
            if len(f) < 11 or f[6] != "B" or not f[8].startswith("t"):
                continue
            try:
                key = (f[2], f[3], f[4], int(f[5]), int(f[8][1:]), f[10])
                vals[impl][key].append(float(f[9]))
            except ValueError:
                continue
    med = {i: {k: statistics.median(v) for k, v in d.items()} for i, d in vals.items()}
    return med, rounds


def load_wire(outdir):
    """wire_rtt's rows (CSV,wire_rtt,what,median,min,max) of every round: the best batch of all
    (as phys_limits' limits: a floor, which a busy core only ever raises)."""
    vals = collections.defaultdict(list)
    for fn in sorted(glob.glob(os.path.join(outdir, "wire-rtt_*.txt"))):
        for line in open(fn, errors="replace"):
            f = line.strip().split(",")
            if len(f) == 6 and f[:2] == ["CSV", "wire_rtt"]:
                vals[f[2]].append(float(f[4]))
    return {k: min(v) for k, v in vals.items()}


# The round trip each implementation's 8-byte op + flush needs at least, by wire_rtt's name:
# ofi's put, get and fetch_and_op are one libfabric write, read and fetch atomic; everyone
# else's go over the host MPI's TCP wire (ucx included: its own TCP stack, the same sockets).
def floor_of(impl, op):
    if impl == OFI:
        return {"put": "ofi_write", "get": "ofi_read", "fetch_and_op": "ofi_fetch_add",
                "compare_and_swap": "ofi_fetch_add", "acc": "ofi_fetch_add"}.get(op)
    return "mpi_pingpong"


def size_label(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 and b % (1 << 20) == 0 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"


def fmt(v, unit_div=1.0, digits=2):
    return "—" if v is None else f"{v / unit_div:.{digits}f}"


def main():
    outdir = sys.argv[1]
    d, rounds = load(outdir)
    if OFI not in d:
        sys.exit(f"ofi_report.py: no {OFI} results in {outdir}")
    peers = [p for p in PEERS if p in d]
    print(f"Rounds per implementation: " + ", ".join(f"{i} {n}" for i, n in sorted(rounds.items()))
          + "; values are medians over the rounds.\n")

    wire = load_wire(outdir)
    if wire:
        print("### The wire's floor (wire_rtt: µs per round trip, 8 B, best batch of 200 over all rounds)\n")
        print("| " + " | ".join(sorted(wire)) + " |")
        print("|" + "---|" * len(wire))
        print("| " + " | ".join(f"{wire[k]:.2f}" for k in sorted(wire)) + " |")
        print("\n8-byte op + flush (lock_all) in round trips of its own wire (1.00: nothing but the wire):\n")
        ops = ["put", "get", "acc", "fetch_and_op", "compare_and_swap"]
        impls_w = [OFI] + peers
        print("| op | " + " | ".join(SHORT[i] for i in impls_w) + " |")
        print("|" + "---|" * (1 + len(impls_w)))
        for op in ops:
            cells = []
            for i in impls_w:
                v = d[i].get(("lat", "flush", op, 8, 1, "ns"))
                f = wire.get(floor_of(i, op) or "")
                cells.append("—" if v is None or not f else f"{v / 1e3 / f:.2f}")
            print(f"| {op} | " + " | ".join(cells) + " |")
        print()

    # Latency.
    lat = sorted(k for k in d[OFI] if k[0] == "lat" and k[5] == "ns")
    order = {"flush": 0, "lock": 1, "fence": 2, "pscw": 3}
    lat.sort(key=lambda k: (order.get(k[1], 9), k[2], k[3]))
    print("### Latency (µs; ratio = peer ÷ ofi, > 1: ofi faster)\n")
    print("| sync | op | size | " + " | ".join(SHORT[i] for i in [OFI] + peers) + " | "
          + " | ".join(f"{SHORT[p]}/ofi" for p in peers) + " |")
    print("|" + "---|" * (3 + 1 + 2 * len(peers)))
    logs = collections.defaultdict(list)
    wins = collections.Counter()
    npts = collections.Counter()
    for k in lat:
        o = d[OFI][k]
        cells = [fmt(o, 1e3)] + [fmt(d[p].get(k), 1e3) for p in peers]
        ratios = []
        for p in peers:
            v = d[p].get(k)
            if v is None:
                ratios.append("—")
                continue
            r = v / o
            logs[(p, k[1])].append(math.log(r))
            npts[p] += 1
            wins[p] += r >= 1
            ratios.append(f"{r:.2f}")
        print(f"| {k[1]} | {k[2]} | {size_label(k[3])} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print("\nGeometric mean of peer ÷ ofi per synchronization mode, and points where ofi is at or below the peer:\n")
    print("| peer | " + " | ".join(sorted(order, key=order.get)) + " | ofi at or below |")
    print("|---|" + "---|" * (len(order) + 1))
    for p in peers:
        gm = [logs.get((p, s)) for s in sorted(order, key=order.get)]
        print(f"| {SHORT[p]} | " + " | ".join(f"{math.exp(sum(g) / len(g)):.2f}" if g else "—" for g in gm)
              + f" | {wins[p]} of {npts[p]} |")

    # Bandwidth and message rate.
    for section, title in (("bw", "Bandwidth (MB/s, n ops + one flush; ratio = ofi ÷ peer, > 1: ofi faster)"),
                           ("rate", "Message rate (ratio = ofi ÷ peer, > 1: ofi faster)")):
        keys = sorted(k for k in d[OFI] if k[0] == section)
        if not keys:
            continue
        print(f"\n### {title}\n")
        print("| op | size | threads | unit | " + " | ".join(SHORT[i] for i in [OFI] + peers) + " | "
              + " | ".join(f"ofi/{SHORT[p]}" for p in peers) + " |")
        print("|" + "---|" * (4 + 1 + 2 * len(peers)))
        for k in keys:
            o = d[OFI][k]
            cells = [f"{o:.3g}"] + [("—" if d[p].get(k) is None else f"{d[p][k]:.3g}") for p in peers]
            ratios = [("—" if not d[p].get(k) else f"{o / d[p][k]:.2f}") for p in peers]
            print(f"| {k[2]} | {size_label(k[3])} | {k[4]} | {k[5]} | " + " | ".join(cells) + " | "
                  + " | ".join(ratios) + " |")

    # Target computing vs target in MPI.
    print("\n### Target computing (no MPI calls) against target in MPI_Barrier: op + flush\n")
    print("Per implementation: op + flush (µs) with the target computing (overlap section, comm_ns), "
          "and ÷ the same op + flush with the target in MPI_Barrier (lat.flush). "
          "— : the origin's op did not complete while the target computed (the target gave up after 1 s "
          "without a heartbeat), or no row.\n")
    impls = [OFI] + peers
    comm = sorted({(k[2], k[3]) for i in impls for k in d[i] if k[0] == "overlap" and k[5] == "comm_ns"},
                  key=lambda x: ({"put": 0, "get": 1, "acc": 2, "fetch_and_op": 3}.get(x[0], 9), x[1]))
    print("| op | size | " + " | ".join(f"{SHORT[i]} µs | {SHORT[i]} ÷ in-MPI" for i in impls) + " |")
    print("|" + "---|" * (2 + 2 * len(impls)))
    for op, size in comm:
        cells = []
        for i in impls:
            c = d[i].get(("overlap", "flush", op, size, 1, "comm_ns"))
            base = d[i].get(("lat", "flush", op, size, 1, "ns"))
            cells.append(fmt(c, 1e3))
            cells.append("—" if c is None or not base else f"{c / base:.2f}")
        print(f"| {op} | {size_label(size)} | " + " | ".join(cells) + " |")
    print("\n### Overlap (fraction of op + flush hidden behind the origin's work, target computing)\n")
    ov = sorted({(k[2], k[3]) for i in impls for k in d[i] if k[0] == "overlap" and k[5] == "overlap"},
                key=lambda x: ({"put": 0, "get": 1, "acc": 2, "fetch_and_op": 3}.get(x[0], 9), x[1]))
    print("| op | size | " + " | ".join(SHORT[i] for i in impls) + " |")
    print("|" + "---|" * (2 + len(impls)))
    for op, size in ov:
        print(f"| {op} | {size_label(size)} | "
              + " | ".join(fmt(d[i].get(("overlap", "flush", op, size, 1, "overlap"))) for i in impls) + " |")


if __name__ == "__main__":
    main()
