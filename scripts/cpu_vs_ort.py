#!/usr/bin/env python3
"""brrr (Session, fused) vs ONNX Runtime on the CPU: same machine, same thread count, same run.

Each round runs `brrr bench MODEL --reps N --json F` and then ONNX Runtime (N timed runs after a
warm-up) on the same model, interleaved model by model, so that load from other processes hits both
alike. The table reports the median over rounds of each side's per-round median, and the ratio as
the median of the rounds' own ratios (each round's two sides ran seconds apart, so a machine that
speeds up or slows down between rounds moves both), with the rounds' range.

Needs a python with onnxruntime and numpy. setup.sh does not install onnxruntime; install it with
    .venv/bin/pip install onnxruntime
and run this script with that python (or pass --python to re-run under another interpreter):
    .venv/bin/python scripts/cpu_vs_ort.py
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp_tiny", "bert_tiny", "mobilenet_v3_small", "squeezenet1_1"]


def ort_inputs(sess, np):
    # The same kind of data brrr bench feeds: ints 0/1, floats uniform in [-1, 1].
    rng = np.random.default_rng(42)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if "int" in i.type:
            dt = np.int64 if "int64" in i.type else np.int32
            feed[i.name] = rng.integers(0, 2, size=shape).astype(dt)
        elif "bool" in i.type:
            feed[i.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            feed[i.name] = rng.uniform(-1, 1, size=shape).astype(np.float32)
    return feed


def time_ort(sess, feed, reps):
    for _ in range(10):
        sess.run(None, feed)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, feed)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def time_brrr(brrr, model, reps, threads, spin):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), BRRR_THREADS=str(threads))
    if not spin:
        # brrr's threads are OpenMP (libgomp). Spinning at barriers is catastrophic when the cores
        # are shared (a run of squeezenet went from ~5 ms to ~300 ms on a loaded 2-core machine):
        # sleep at barriers instead. libgomp reads this when it loads, so it must come from here.
        env.setdefault("OMP_WAIT_POLICY", "passive")
    subprocess.run([brrr, "bench", model, "--reps", str(reps), "--json", path], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    with open(path) as f:
        recs = json.load(f)
    os.unlink(path)
    return next(r["ms"] for r in recs if r["variant"] == "fused")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", help="model names under examples/ or .onnx paths")
    ap.add_argument("--brrr", default=os.path.join(ROOT, "build", "brrr"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=50, help="timed runs per round (>= 50)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved brrr/ORT rounds")
    ap.add_argument("--passive", action="store_true",
                    help="run brrr with OMP_WAIT_POLICY=passive (steadier on a busy machine; "
                         "slower on an idle one). Default: libgomp's own policy, as users get")
    ap.add_argument("--python", help="re-run this script under that python (one with onnxruntime)")
    a = ap.parse_args()
    if a.python and os.path.realpath(a.python) != os.path.realpath(sys.executable):
        argv, args = sys.argv[1:], []
        while argv:
            x = argv.pop(0)
            if x == "--python":
                argv.pop(0)
            elif not x.startswith("--python="):
                args.append(x)
        os.execv(a.python, [a.python, os.path.abspath(__file__)] + args)
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        sys.exit(f"{e}: this python ({sys.executable}) lacks onnxruntime; install it with\n"
                 f"    .venv/bin/pip install onnxruntime\nand run .venv/bin/python {sys.argv[0]}")
    if not os.access(a.brrr, os.X_OK):
        sys.exit(f"{a.brrr} not found: build first (cmake -S . -B build -G Ninja && ninja -C build)")
    reps = max(a.reps, 50)
    models = a.models or MODELS
    rows = []
    for m in models:
        path = m if m.endswith(".onnx") else os.path.join(ROOT, "examples", m, "model.onnx")
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = ort_inputs(sess, np)
        b, o = [], []
        for _ in range(a.rounds):
            b.append(time_brrr(a.brrr, path, reps, a.threads, not a.passive))
            o.append(time_ort(sess, feed, reps))
        bm, om = statistics.median(b), statistics.median(o)
        ratios = [x / y for x, y in zip(b, o)]
        rows.append((os.path.basename(os.path.dirname(path)) if not a.models else m, bm, om,
                     statistics.median(ratios), min(ratios), max(ratios)))
        print(f"  {rows[-1][0]}: brrr {[round(x, 3) for x in b]} ort {[round(x, 3) for x in o]}",
              file=sys.stderr)
    print(f"threads={a.threads}, median of {reps} runs per round, median over {a.rounds} "
          f"interleaved rounds; onnxruntime {ort.__version__}; brrr OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', 'default') if not a.passive else os.environ.get('OMP_WAIT_POLICY', 'passive')}")
    print(f"{'model':<22} {'brrr ms':>10} {'ORT ms':>10} {'ratio':>8}  rounds' ratios")
    for name, bm, om, r, lo, hi in rows:
        print(f"{name:<22} {bm:>10.3f} {om:>10.3f} {r:>7.2f}x  {lo:.2f}-{hi:.2f}")


if __name__ == "__main__":
    main()
