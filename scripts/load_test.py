#!/usr/bin/env python3
"""Quiet and loaded CPU latency of brrr and ONNX Runtime, side by side (issue 14, item 11).

"Loaded" means one CPU hog (a `while 1: pass` python process) per CPU of this process's affinity
mask, started and killed by this script. Each round runs, per model: brrr quiet, ORT quiet, then
the hogs start, brrr loaded, ORT loaded, and the hogs stop; so load from other processes hits both
sides alike. brrr runs as `brrr run MODEL --reps N` (the median it prints; synthetic inputs, the
kernel cache's code); ORT in this process with intra_op_num_threads = --threads. The table shows the median over rounds of each round's median,
and each side's loaded/quiet ratio (median of the rounds' own ratios, with their range).

--variant NAME=ENV compares brrr builds of the environment in the same rounds (interleaved): e.g.
`--variant default= --variant off=BRRR_NO_LOAD_ADAPTIVE=1` (ENV: space-separated VAR=VALUE pairs,
added to this script's own environment, which every brrr run inherits; the pair bin=PATH runs
another brrr binary instead, e.g. one built before a change).

The hogs are killed on every exit path (and die with this script even on SIGKILL: PDEATHSIG).
Run time is bounded: each timed loop stops after --budget seconds, whatever --reps says.

    .venv/bin/pip install onnxruntime
    .venv/bin/python scripts/load_test.py [MODEL ...] [--rounds 3] [--threads N] [--variant NAME=ENV]
"""
import argparse
import ctypes
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_ort import Model, read_inputs  # noqa: E402  (the inputs cpu_vs_ort feeds ORT)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp_tiny", "bert_tiny", "mobilenet_v3_small", "squeezenet1_1"]
HOGS = []
CTX = []  # (voluntary, involuntary) context switches per timed run of each brrr measurement


def die_with_parent():
    # Linux prctl(PR_SET_PDEATHSIG, SIGKILL): a hog never outlives this script.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def start_hogs(n):
    for _ in range(n):
        HOGS.append(subprocess.Popen([sys.executable, "-c", "while 1: pass"],
                                     preexec_fn=die_with_parent))
    time.sleep(0.3)  # let the scheduler see them before timing starts


def stop_hogs():
    while HOGS:
        p = HOGS.pop()
        p.kill()
        p.wait()


def on_signal(sig, _frame):
    stop_hogs()
    sys.exit(128 + sig)


def time_ort(sess, feed, reps, budget):
    for _ in range(3):
        sess.run(None, feed)
    t, end = [], time.perf_counter() + budget
    while len(t) < reps and (len(t) < 5 or time.perf_counter() < end):
        t0 = time.perf_counter()
        sess.run(None, feed)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def time_brrr(brrr, model, reps, threads, budget, quiet_ms, extra_env):
    # brrr run has a fixed rep count: size it from the quiet time so a collapse stays bounded.
    # It takes the kernel cache's code (warm), so no measurement pays a compile.
    if quiet_ms:
        reps = max(5, min(reps, int(budget * 1e3 / max(quiet_ms, 1e-3) / 20)))
    env = dict(os.environ, BRRR_THREADS=str(threads), **extra_env)
    env.pop("bin", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([extra_env.get("bin", brrr), "run", model, "--reps", str(reps)],
                         check=True, capture_output=True, text=True, env=env, timeout=600).stdout
    # Context switches of the whole brrr process (load included), per timed run: involuntary
    # ones say how often the OS took a core away; voluntary ones count futex sleeps.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CTX.append((round((after.ru_nvcsw - before.ru_nvcsw) / reps),
                round((after.ru_nivcsw - before.ru_nivcsw) / reps)))
    m = re.search(r", run ([0-9.e+-]+) ms \(median of", out)
    if not m:
        sys.exit(f"no run time in brrr's output:\n{out}")
    return float(m.group(1))


def parse_variant(text):
    name, _, pairs = text.partition("=")
    env = {}
    for pair in pairs.split():
        var, eq, value = pair.partition("=")
        if not var or not eq:
            raise argparse.ArgumentTypeError(f"--variant {text!r}: expected NAME=VAR=VALUE ...")
        env[var] = value
    if not name:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: the name is empty")
    return name, env


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", help="model names under examples/ or .onnx paths")
    ap.add_argument("--brrr", default=os.path.join(ROOT, "build", "brrr"))
    ncpu = len(os.sched_getaffinity(0))
    ap.add_argument("--threads", type=int, default=ncpu, help="brrr and ORT threads (default: "
                    "the CPUs of the affinity mask)")
    ap.add_argument("--hogs", type=int, default=ncpu, help="CPU hogs when loaded (default: one "
                    "per CPU)")
    ap.add_argument("--reps", type=int, default=50, help="timed runs per measurement (at most)")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per timed loop (about)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--variant", type=parse_variant, action="append", default=[],
                    help="NAME=ENV: a brrr run with these extra variables (repeatable; default: "
                    "one variant, 'brrr', with none)")
    a = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        sys.exit(f"{e}: this python ({sys.executable}) lacks onnxruntime; install it with\n"
                 f"    .venv/bin/pip install onnxruntime\nand run .venv/bin/python {sys.argv[0]}")
    if not os.access(a.brrr, os.X_OK):
        sys.exit(f"{a.brrr} not found: build first (cmake -S . -B build -G Ninja && ninja -C build)")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    models = a.models or MODELS
    rows, loads = [], [loadavg()]
    try:
        for m in models:
            path = m if m.endswith(".onnx") else os.path.join(ROOT, "examples", m, "model.onnx")
            name = os.path.basename(os.path.dirname(path)) if not m.endswith(".onnx") else m
            so = ort.SessionOptions()
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            synthetic = Model(name, path)
            synthetic.data = None  # the kind of data brrr run feeds: floats in [-1, 1], ints 0/1
            feed = read_inputs(synthetic, sess, np)
            variants = a.variant or [("brrr", {})]
            bq = {v: [] for v, _ in variants}
            bl = {v: [] for v, _ in variants}
            oq, ol = [], []
            CTX.clear()
            for _ in range(a.rounds):
                for v, env in variants:
                    bq[v].append(time_brrr(a.brrr, path, a.reps, a.threads, a.budget, None, env))
                oq.append(time_ort(sess, feed, a.reps, a.budget))
                start_hogs(a.hogs)
                try:
                    for v, env in variants:
                        bl[v].append(time_brrr(a.brrr, path, a.reps, a.threads, a.budget,
                                               bq[v][-1], env))
                    ol.append(time_ort(sess, feed, a.reps, a.budget))
                finally:
                    stop_hogs()
            loads.append(loadavg())
            med = statistics.median
            orr = [y / x for x, y in zip(oq, ol)]
            for v, _ in variants:
                br = [y / x for x, y in zip(bq[v], bl[v])]
                label = name if len(variants) == 1 else f"{name} [{v}]"
                rows.append((label, med(bq[v]), med(bl[v]), med(br), min(br), max(br), med(oq),
                             med(ol), med(orr), min(orr), max(orr)))
                print(f"  {label}: brrr quiet {[round(x, 3) for x in bq[v]]} loaded "
                      f"{[round(x, 3) for x in bl[v]]}", file=sys.stderr)
            print(f"  {name}: brrr context switches per run (voluntary, involuntary), in the "
                  f"order measured: {CTX}", file=sys.stderr)
            print(f"  {name}: ORT quiet {[round(x, 3) for x in oq]} loaded "
                  f"{[round(x, 3) for x in ol]}", file=sys.stderr)
    finally:
        stop_hogs()
    print(f"threads={a.threads}, hogs={a.hogs} when loaded, {a.rounds} interleaved rounds, "
          f"median ms per measurement; onnxruntime {ort.__version__}; "
          f"loadavg (1/5/15 min) before and after each model: {' | '.join(loads)}")
    print(f"{'model':<32} {'brrr quiet':>10} {'loaded':>9} {'ratio':>6} {'(range)':>11}  "
          f"{'ORT quiet':>9} {'loaded':>9} {'ratio':>6} {'(range)':>11}")
    for n, q, l, r, rlo, rhi, oqm, olm, orm, olo, ohi in rows:
        print(f"{n:<32} {q:>10.3f} {l:>9.3f} {r:>5.1f}x {f'{rlo:.1f}-{rhi:.1f}':>11}  "
              f"{oqm:>9.3f} {olm:>9.3f} {orm:>5.1f}x {f'{olo:.1f}-{ohi:.1f}':>11}")


if __name__ == "__main__":
    main()
