#!/usr/bin/env python3
"""suite_run.py — run the benchmark suite's binaries and collect their output (no building).

usage: bench/suite_run.py [--quick] --build DIR [--mpich-bin FILE] [--mpich-fastrma-bin FILE] OUTDIR
       (scripts/bench_suite.sh builds, then calls this, then bench/suite_report.py)

What runs, in this order (docs/performance.md):
  1. phys_limits                     the machine's own limits (no MPI)
  2. rma_suite --mode p2p, 2 ranks,  once per peer: Open MPI with each osc component forced
                                     (sm, rdma, ucx at MPI_THREAD_MULTIPLE, pt2pt at
                                     MPI_THREAD_SERIALIZED, the level it accepts), MPICH when
                                     its binary exists (with fastrma's MPICH build: fastrma on
                                     MPICH in the same launch, fastrma-mpich), and fastrma alone with
                                     FASTRMA_TRANSPORT=am (its active-message transport forced
                                     for node peers; quick sizes, every section but bibw).
                                     fastrma-offload: fastrma with FASTRMA_OFFLOAD=on, overlap
                                     only (the default, auto, does not offload on 2 cores).
                                     osc-fastrma and dropin-fastrma: the MPI calls on fastrma
                                     through Open MPI's osc component and through the drop-in.
                                     fastrma is measured in the sm run, and also in the rdma
                                     and ucx runs in full mode, so its spread over runs shows
                                     the machine's noise.
  3. rma_suite --mode scale          at 2, 4, 8 and 16 ranks (oversubscribed past 2 cores),
     and win_memory                  once per peer; fastrma in the rdma run only. --quick:
                                     allocate windows only from 8 ranks on.

Each launch is watched: rma_suite writes "impl flavor phase [size]" to a progress file before
every phase and size, so a launch that crashes, or makes no progress for a while (a hang),
is killed and started again with --skip-file naming what already finished and the phase that
failed, until it ends cleanly. raw/attempts.csv records every attempt and how it ended.

Outputs in OUTDIR/raw: <label>.<p2p|scale-pN>.<attempt>.csv / .status.csv / .progress / .log
/ .skips per attempt,
limits.csv, win_memory.<p>.log, attempts.csv, settings.txt, timing.csv (seconds per step).
Standard library only.
"""
import argparse
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
WHOLE_PAIR_PHASES = {"setup", "check", "final", "free"}


def log(msg):
    print(msg, flush=True)


def outcome_of(rc, logtext, killed_why):
    if killed_why:
        return killed_why
    if rc == 0:
        return "ok"
    m = re.search(r"exited on signal (\d+) \(([^)]*)\)", logtext)  # Open MPI
    if m:
        return f"crash: signal {m.group(1)} ({m.group(2)})"
    m = re.search(r"KILLED BY SIGNAL: (\d+) \(([^)]*)\)", logtext)  # MPICH hydra
    if m:
        return f"crash: signal {m.group(1)} ({m.group(2)})"
    m = re.search(r"EXIT CODE: (\d+)", logtext)
    if m and int(m.group(1)) > 128:
        return f"crash: signal {int(m.group(1)) - 128}"
    if "MPI_ABORT" in logtext or "MPI_ERRORS_ARE_FATAL" in logtext:
        return f"abort (rc {rc})"
    return f"failed (rc {rc})"


class Runner:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.outdir)
        self.raw = os.path.join(self.out, "raw")
        os.makedirs(self.raw, exist_ok=True)
        for f in os.listdir(self.raw):
            os.remove(os.path.join(self.raw, f))
        self.attempts = open(os.path.join(self.raw, "attempts.csv"), "w", newline="")
        self.aw = csv.writer(self.attempts)
        self.aw.writerow(["label", "ranks", "attempt", "rc", "outcome", "impl", "flavor", "phase", "seconds", "skips"])
        self.timing = open(os.path.join(self.raw, "timing.csv"), "w", newline="")
        self.tw = csv.writer(self.timing)
        self.tw.writerow(["step", "seconds"])
        q = args.quick
        self.stall_s = 15 if q else 30          # no progress line for this long: a hang
        self.attempt_s = 150 if q else 400      # one attempt, whatever happens
        self.max_attempts = 8

    def step_time(self, step, seconds):
        self.tw.writerow([step, f"{seconds:.1f}"])
        self.timing.flush()

    @staticmethod
    def descendants(pid):
        """Every process below `pid` (the launcher's ranks may sit in process groups of
        their own, out of reach of killpg)."""
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [pid]
        while todo:
            for c in children.get(todo.pop(), []):
                out.append(c)
                todo.append(c)
        return out

    def kill_tree(self, p):
        """End a launch we started: its process group, then every process below it, by pid."""
        pids = self.descendants(p.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=3)
                if sig == signal.SIGTERM and not any(os.path.exists(f"/proc/{x}") and
                                                     open(f"/proc/{x}/stat").read().split(") ")[1][0] != "Z"
                                                     for x in pids if os.path.exists(f"/proc/{x}")):
                    return
            except subprocess.TimeoutExpired:
                pass
            except OSError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    # One launch, watched. Returns (rc, outcome, seconds).
    def launch(self, cmd, env, logpath, progress):
        t0 = time.time()
        with open(logpath, "w") as lf:
            lf.write("# " + " ".join(cmd) + "\n")
            lf.flush()
            p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            last_change, last_size, killed_why = time.time(), -1, None
            while p.poll() is None:
                time.sleep(0.25)
                try:
                    size = os.path.getsize(progress) if progress else 0
                except OSError:
                    size = 0
                now = time.time()
                if size != last_size:
                    last_size, last_change = size, now
                if progress and now - last_change > self.stall_s:
                    killed_why = f"hang: no progress for {self.stall_s} s"
                elif now - t0 > self.attempt_s:
                    killed_why = f"timeout after {self.attempt_s} s"
                if killed_why:
                    self.kill_tree(p)
                    break
            rc = p.returncode
        with open(logpath, errors="replace") as lf:
            text = lf.read()
        return rc, outcome_of(rc, text, killed_why), time.time() - t0

    # A benchmark launch with crash / hang recovery.
    def run_suite(self, label, ranks, launcher, args_, env_extra=None, stall_s=None, max_attempts=None, skips=None):
        kind = "p2p" if "p2p" in args_ else f"scale-p{ranks}"
        env = dict(os.environ, **ROOT_ENV, **(env_extra or {}))
        saved = self.stall_s
        self.stall_s = stall_s or saved
        skips, done = list(skips or []), set()
        t_start = time.time()
        for attempt in range(1, (max_attempts or self.max_attempts) + 1):
            base = os.path.join(self.raw, f"{label}.{kind}.{attempt}")
            skipfile = base + ".skips"
            with open(skipfile, "w") as f:
                f.write("".join(s + "\n" for s in skips))
            cmd = launcher + args_ + ["--run", label, "--csv", base + ".csv", "--status-csv", base + ".status.csv",
                                      "--progress", base + ".progress", "--skip-file", skipfile]
            rc, outcome, secs = self.launch(cmd, env, base + ".log", base + ".progress")
            lines = []
            try:
                with open(base + ".progress") as f:
                    lines = [l.split() for l in f if l.strip()]
            except OSError:
                pass
            last = lines[-1] if lines else ["-", "-", "-"]
            impl, flavor, phase = (last + ["-", "-", "-"])[:3]
            self.aw.writerow([label, ranks, attempt, rc, outcome, impl, flavor, phase, f"{secs:.1f}", " ".join(skips)])
            self.attempts.flush()
            log(f"  {label} p={ranks} attempt {attempt}: {outcome} in {secs:.1f} s"
                + ("" if outcome == "ok" else f" (in {impl} {flavor} {phase})"))
            if outcome == "ok" or not lines or phase == "done":
                if outcome != "ok":
                    with open(base + ".log", errors="replace") as f:
                        tail = f.read().splitlines()[-12:]
                    log("\n".join("  | " + l for l in tail))
                break
            # Skip what finished and the phase that failed.
            for l in lines[:-1]:
                i, fl, ph = (l + ["-", "-", "-"])[:3]
                if ph not in WHOLE_PAIR_PHASES and ph != "sync.setup":
                    done.add(f"{i}:{fl}:{ph}")
            if phase in WHOLE_PAIR_PHASES:
                failed = f"{impl}:{flavor}:*"
            elif phase == "sync.setup":
                failed = f"{impl}:{flavor}:sync.*"
            else:
                failed = f"{impl}:{flavor}:{phase}"
            skips = sorted(done | {failed} | set(skips))
        self.stall_s = saved
        self.step_time(f"{label} p={ranks}", time.time() - t_start)

    def fastrma_in_ompi(self, build, mpiexec):
        """(label, 2-rank launch) of fastrma behind Open MPI's MPI calls: osc-fastrma (the osc
        component, when built) and dropin-fastrma (libfastrma-mpi.so preloaded)."""
        base = [mpiexec, "-n", "2", "--oversubscribe", "--bind-to", "none"]
        ways = []
        component_dir = os.path.join(build, "src", "mpi", "osc")
        if os.path.exists(os.path.join(component_dir, "mca_osc_fastrma.so")):
            out = subprocess.run(["ompi_info", "--path", "pkglibdir"], capture_output=True, text=True).stdout
            ompi_dir = out.split(":", 1)[1].strip() if ":" in out else ""
            ways.append(("osc-fastrma", base + ["--mca", "osc", "fastrma", "--mca", "mca_component_path",
                                                f"{component_dir}:{ompi_dir}"]))
        else:
            log("== osc-fastrma: mca_osc_fastrma.so not built (FASTRMA_BUILD_OSC): not measured")
        dropin = os.path.join(build, "src", "mpi", "libfastrma-mpi.so")
        if os.path.exists(dropin):
            ways.append(("dropin-fastrma", base + ["-x", f"LD_PRELOAD={dropin}"]))
        return ways

    def run(self):
        a = self.args
        build = os.path.abspath(a.build)
        suite = os.path.join(build, "bench", "rma_suite")
        limits = os.path.join(build, "bench", "phys_limits")
        win_memory = os.path.join(build, "bench", "win_memory")
        quick = ["--quick"] if a.quick else []
        mpiexec = shutil.which("mpiexec.openmpi") or "mpiexec"
        t_all = time.time()
        with open(os.path.join(self.raw, "settings.txt"), "w") as f:
            f.write(f"mode: {'quick' if a.quick else 'full'}\nbuild: {build}\nmpich binary: {a.mpich_bin or '-'}\n")
            f.write(f"cores: {os.cpu_count()}\nuname: {' '.join(os.uname())}\n")
            f.write(f"started: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")
            try:
                f.write(f"load average at start: {open('/proc/loadavg').read().split()[:3]}\n")
            except OSError:
                pass

        log("== physical limits (phys_limits)")
        t0 = time.time()
        rc, outcome, secs = self.launch([limits] + quick + ["--csv", os.path.join(self.raw, "limits.csv")],
                                        dict(os.environ), os.path.join(self.raw, "limits.log"), None)
        log(f"  phys_limits: {outcome} in {secs:.1f} s")
        self.step_time("limits", time.time() - t0)

        def ompi(ranks, component, bind="none"):
            return [mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", bind, "--mca", "osc", component]

        def mpich(ranks):
            return ["mpiexec.mpich", "-n", str(ranks)]

        have_mpich = bool(a.mpich_bin) and os.access(a.mpich_bin, os.X_OK) and shutil.which("mpiexec.mpich")
        # Full: three runs, so that fastrma's value (the median over runs) is one of them: the
        # median of two is their mean, which on a loaded machine is often a value neither run
        # saw (one fence run at 0.8 µs, the other stuck at 8 ms scheduler ticks: "4 ms").
        fastrma_runs = {"ompi-sm"} if a.quick else {"ompi-sm", "ompi-rdma", "ompi-ucx"}
        shm = {"FASTRMA_TRANSPORT": "shm"}
        peers = [  # label, launcher(ranks), extra args, env
            ("ompi-sm", lambda n: ompi(n, "sm"), ["--mpi-label", "ompi-sm"], shm),
            ("ompi-rdma", lambda n: ompi(n, "rdma"), ["--mpi-label", "ompi-rdma"], shm),
            ("ompi-ucx", lambda n: ompi(n, "ucx"), ["--mpi-label", "ompi-ucx"], shm),
            ("ompi-pt2pt", lambda n: ompi(n, "pt2pt"), ["--mpi-label", "ompi-pt2pt", "--thread", "serialized"], shm),
        ]
        # With fastrma's MPICH build (--mpich-fastrma-bin), the MPICH run is that binary with
        # both implementations: MPICH's RMA and fastrma on MPICH (fastrma-mpich), same launch.
        mpich_fastrma = bool(a.mpich_fastrma_bin) and os.access(a.mpich_fastrma_bin, os.X_OK)
        if mpich_fastrma and shutil.which("mpiexec.mpich"):
            have_mpich = True
            a.mpich_bin = a.mpich_fastrma_bin
        if have_mpich:
            peers.append(("mpich", mpich, ["--mpi-label", "mpich"] +
                          (["--fastrma-label", "fastrma-mpich"] if mpich_fastrma else []), {}))
        else:
            log("== MPICH: not installed (mpich package, mpicxx.mpich): no MPICH peer")

        # osc rdma's compare_and_swap on an allocate window segfaults the target
        # (open-mpi/ompi#11349), in every sync mode: four crashes and relaunches. The full run
        # goes through them (and would see a fixed Open MPI); --quick skips them up front.
        known_crashes = {"ompi-rdma": [f"ompi-rdma:allocate:lat.{s}.cas" for s in ("flush", "lock", "fence", "pscw")]}
        if a.quick:
            with open(os.path.join(self.raw, "settings.txt"), "a") as f:
                f.write("skipped up front (--quick): ompi-rdma compare_and_swap on allocate windows "
                        "(segfaults the target, open-mpi/ompi#11349; the full run measures whether it still does)\n")

        log("== point to point (2 ranks)")
        for label, launcher, extra, env in peers:
            binary = a.mpich_bin if label == "mpich" else suite
            impl = "all" if label in fastrma_runs or (label == "mpich" and mpich_fastrma) else "mpi"
            self.run_suite(label, 2, launcher(2), [binary, "--mode", "p2p", "--impl", impl] + quick + extra, env,
                           skips=known_crashes.get(label, []) if a.quick else [])
        # fastrma inside Open MPI (issue 38): the same binary's MPI calls on the osc component
        # (--mca osc fastrma) and on the drop-in (preloaded), beside the peers above.
        for label, cmd in self.fastrma_in_ompi(build, mpiexec):
            self.run_suite(label, 2, cmd, [suite, "--mode", "p2p", "--impl", "mpi", "--mpi-label", label] + quick,
                           shm, skips=[])
        am_flavors = ["--flavors", "allocate"] if a.quick else []  # (quick: allocate windows only)
        # Message rate with the target asleep (--target-wait poll: it calls MPI_Test every 200 µs
        # and sleeps between): the origin's threads may then use both cores, which a target
        # spinning inside a blocking MPI call keeps for itself. Rows tagged sync "flush-asleep".
        for label, launcher, extra, env in peers:
            if label in ("ompi-ucx", "mpich"):
                continue
            impl = "all" if label == "ompi-sm" else "mpi"
            self.run_suite(label + "-asleep", 2, launcher(2),
                           [suite, "--mode", "p2p", "--impl", impl, "--sections", "rate", "--target-wait", "poll"]
                           + quick + extra, env, skips=[])
        self.run_suite("fastrma-am-asleep", 2, ompi(2, "sm"),
                       [suite, "--mode", "p2p", "--impl", "fastrma", "--quick", "--sections", "rate",
                        "--target-wait", "poll"] + am_flavors,
                       {"FASTRMA_TRANSPORT": "am"}, stall_s=10, max_attempts=3)
        # fastrma's other transport, am (for peers on other nodes; here forced for node peers):
        # latency (against osc pt2pt, Open MPI's active-message design), bandwidth, message
        # rate and overlap (issue #4 compares both transports), at quick sizes, which hold the
        # 8 B, 64 KiB and 1 MiB points the report compares, but the overlap at the run's own
        # sizes (the overlap table lists every implementation size for size). If the transport refuses windows
        # the report says "not available".
        self.run_suite("fastrma-am", 2, ompi(2, "sm"), [suite, "--mode", "p2p", "--impl", "fastrma", "--quick",
                                                        "--overlap-sizes", "quick" if a.quick else "full",
                                                        "--sections", "lat,bw,rate,overlap"] + am_flavors,
                       {"FASTRMA_TRANSPORT": "am"}, stall_s=10, max_attempts=5)
        # The same overlap over am with each rank bound to one core (mpirun's default for small
        # jobs, and how a cluster runs it): the target's progress thread then takes its time
        # from the target's computation, not from whichever thread the scheduler put beside it
        # (unbound, often the origin's: the overlap is then a coin toss). Labelled
        # fastrma-am-bound; the peers' overlap does not depend on it (they have no thread).
        self.run_suite("fastrma-am-bound", 2, ompi(2, "sm", bind="core"),
                       [suite, "--mode", "p2p", "--impl", "fastrma", "--sections", "overlap",
                        "--overlap-sizes", "quick" if a.quick else "full",
                        "--fastrma-label", "fastrma-am-bound"] + quick + am_flavors,
                       {"FASTRMA_TRANSPORT": "am"}, stall_s=10, max_attempts=3)
        # FASTRMA_OFFLOAD=auto (the default) hands large put/get to the progress thread only
        # when the process may run on more cores than the window has ranks on the node: not
        # with 2 ranks on 2 cores, so the default runs above show no offload here. This run
        # forces it (overlap only, labelled fastrma-offload) to show what the mechanism hides
        # when the progress thread has to share a core with the computation.
        self.run_suite("fastrma-offload", 2, ompi(2, "sm"),
                       [suite, "--mode", "p2p", "--impl", "fastrma", "--sections", "overlap",
                        "--fastrma-label", "fastrma-offload"] + quick + am_flavors,
                       {"FASTRMA_TRANSPORT": "shm", "FASTRMA_OFFLOAD": "on"}, stall_s=10, max_attempts=3)

        log("== scaling: window creation and memory, synchronization (2..16 ranks)")
        for ranks in (2, 4, 8, 16):
            # Quick: every flavor at 2 and 4 ranks, allocate windows only from 8 on (MPICH
            # oversubscribed 8-fold needs about a second per window: half the quick budget).
            flavors = ["--flavors", "allocate"] if a.quick and ranks >= 8 else []
            for label, launcher, extra, env in peers:
                binary = a.mpich_bin if label == "mpich" else suite
                impl = "all" if label == "ompi-rdma" else "mpi"
                self.run_suite(label, ranks, launcher(ranks), [binary, "--mode", "scale", "--impl", impl] + quick + flavors + extra, env)
            t0 = time.time()
            rc, outcome, secs = self.launch(ompi(ranks, "sm")[:-3] + [win_memory, "4" if a.quick else "10"],
                                            dict(os.environ, **ROOT_ENV), os.path.join(self.raw, f"win_memory.{ranks}.log"), None)
            log(f"  win_memory p={ranks}: {outcome} in {secs:.1f} s")
            self.step_time(f"win_memory p={ranks}", time.time() - t0)

        self.step_time("total (runs)", time.time() - t_all)
        try:
            with open(os.path.join(self.raw, "settings.txt"), "a") as f:
                f.write(f"load average at end: {open('/proc/loadavg').read().split()[:3]}\n")
                f.write(f"runs took: {time.time() - t_all:.0f} s\n")
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", required=True)
    ap.add_argument("--mpich-bin", default="")
    ap.add_argument("--mpich-fastrma-bin", default="",
                    help="rma_suite of fastrma's MPICH build: the MPICH run then measures fastrma on MPICH too")
    ap.add_argument("outdir")
    Runner(ap.parse_args()).run()


if __name__ == "__main__":
    main()
