#!/usr/bin/env python3
"""brrr (Session, fused) vs ONNX Runtime (and PyTorch eager) on the CPU: same machine, same
thread count, same inputs, same run.

Models: the four examples (default), .onnx paths, and with --models DIR the fp32 exports of the
model suite (scripts/models/export.py) found there. Each model's inputs are its test_data_set_0
when it has one (the suite's token ids must lie in the vocabulary), else ints 0/1 and floats
uniform in [-1, 1] for both sides.

Each round runs `brrr run MODEL --reps N` (its steady-state median: the runs after the first,
wall clock per run, the same Session::run loop bench times) and then ONNX Runtime (N timed runs
after a warm-up) and, for suite models when torch is importable, PyTorch eager on the same seeded
model rebuilt in code (torch.no_grad, N timed runs after a warm-up), interleaved model by model so
that load from other processes hits all of them alike. The table reports the median over rounds
of each side's per-round median, and each ratio as the median of the rounds' own ratios (each
round's sides ran seconds apart, so a machine that speeds up or slows down between rounds moves
all of them), with the rounds' range. N is --reps (>= 50 by default), lowered for a large model
so that one side's round takes about --round-seconds, but never below 5.

Needs a python with onnxruntime and numpy (and torch, torchvision, transformers for the PyTorch
column). setup.sh does not install onnxruntime; install it with
    .venv/bin/pip install onnxruntime
and run this script with that python (or pass --python to re-run under another interpreter):
    .venv/bin/python scripts/cpu_vs_ort.py
    /work/venv-models/bin/python scripts/cpu_vs_ort.py --models /work/models
"""
import argparse
import functools
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp_tiny", "bert_tiny", "mobilenet_v3_small", "squeezenet1_1"]


class Model:
    def __init__(self, name, path, manifest=None):
        self.name, self.path, self.manifest = name, path, manifest
        d = os.path.join(os.path.dirname(path), "test_data_set_0")
        self.data = d if glob.glob(os.path.join(d, "input_*.pb")) else None


def suite_models(folder, pick, exporters):
    """The fp32 exports under folder (export.py's <model>_fp32_<exporter>/ with manifest.json)."""
    out = []
    for man_path in sorted(glob.glob(os.path.join(folder, "*_fp32_*", "manifest.json"))):
        with open(man_path) as f:
            man = json.load(f)
        if (pick and man["model"] not in pick) or (exporters and man["exporter"] not in exporters):
            continue
        d = os.path.dirname(man_path)
        out.append(Model(os.path.basename(d), os.path.join(d, "model.onnx"), man))
    if not out:
        sys.exit(f"cpu_vs_ort.py: no fp32 suite exports (*_fp32_*/manifest.json) in {folder}")
    return out


def read_inputs(m, sess, np):
    """The model's test_data_set_0 inputs by name (else by position), or synthetic ones."""
    if m.data:
        from onnx import numpy_helper
        import onnx
        feed = {}
        files = sorted(glob.glob(os.path.join(m.data, "input_*.pb")),
                       key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
        names = [i.name for i in sess.get_inputs()]
        for k, p in enumerate(files):
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            feed[t.name if t.name in names else names[k]] = numpy_helper.to_array(t)
        return feed
    # The same kind of data brrr feeds without --data: ints 0/1, floats uniform in [-1, 1].
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


def median_of(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


RUN_TIME = re.compile(r"run ([0-9.e+-]+) ms \(median of (\d+)")


def time_brrr(brrr, m, reps, threads, passive, precision="fp32"):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), BRRR_THREADS=str(threads))
    if passive:
        # brrr's oneDNN kernels run on OpenMP (libgomp). Spinning at barriers is catastrophic when
        # the cores are shared: sleep at barriers instead. libgomp reads this when it loads.
        env.setdefault("OMP_WAIT_POLICY", "passive")
    cmd = [brrr, "run", m.path, "--reps", str(reps), "--threads", str(threads)]
    if precision != "fp32":
        cmd += ["--precision", precision]
    if m.data:
        cmd += ["--data", m.data]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    hit = RUN_TIME.search(p.stdout)
    if p.returncode != 0 or not hit:
        err = (p.stderr.strip().splitlines() or ["no 'run ... ms (median of N' line"])[-1]
        raise RuntimeError(f"brrr run {os.path.basename(m.path)}: {err}")
    return float(hit.group(1))


class TorchEager:
    """The suite model rebuilt in PyTorch (same spec, seed and size as the export)."""

    def __init__(self, m, feed, threads):
        import torch
        sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
        import suite
        torch.set_num_threads(threads)
        man = m.manifest
        kw = {"layers": man["layers"]} if man.get("layers") else {}
        spec = suite.SPECS[man["model"]]
        self.model, _ = spec.build(man["small"], **kw)
        self.x = torch.from_numpy(next(iter(feed.values())).copy())  # writable, as torch wants
        self.torch = torch

    def __call__(self):
        with self.torch.no_grad():
            self.model(self.x)


def fmt_ratio(rs):
    if not rs:
        return f"{'-':>8}  {'':9}"
    return f"{statistics.median(rs):>7.2f}x  {min(rs):.2f}-{max(rs):.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", help="model names under examples/ or .onnx paths")
    ap.add_argument("--models", dest="suite", metavar="DIR",
                    help="also the fp32 suite exports in DIR (scripts/models/export.py --out DIR)")
    ap.add_argument("--pick", default="", help="suite models to take, e.g. bert_base,gpt2")
    ap.add_argument("--exporters", default="", help="suite exporters to take (default both)")
    ap.add_argument("--brrr", default=os.path.join(ROOT, "build", "brrr"))
    ap.add_argument("--baseline", metavar="BIN",
                    help="another brrr binary (a build before a change), run in the same rounds "
                         "right after --brrr: a 'before' column and brrr/before ratios")
    ap.add_argument("--precision", default="fp32",
                    help="brrr run --precision (bf16: on a CPU with avx512_bf16 or AMX); ONNX "
                         "Runtime and PyTorch stay fp32")
    ap.add_argument("--baseline-precision", metavar="P",
                    help="--precision of the --baseline runs (default: --precision's); "
                         "--baseline build/brrr --baseline-precision fp32 --precision bf16 gives "
                         "bf16/fp32 ratios of one build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=50, help="timed runs per round (>= 50)")
    ap.add_argument("--round-seconds", type=float, default=8.0,
                    help="lower the runs of a large model so that one side's round takes about "
                         "this long (never below 5 runs)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved brrr/ORT rounds")
    ap.add_argument("--no-torch", action="store_true", help="no PyTorch eager column")
    ap.add_argument("--passive", action="store_true",
                    help="run brrr and PyTorch with OMP_WAIT_POLICY=passive (steadier on a busy "
                         "machine; slower on an idle one). Default: libgomp's own policy, as "
                         "users get")
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
    if a.baseline and not os.access(a.baseline, os.X_OK):
        sys.exit(f"--baseline {a.baseline}: not an executable file")
    models = []
    for m in a.models or ([] if a.suite else MODELS):
        path = m if m.endswith(".onnx") else os.path.join(ROOT, "examples", m, "model.onnx")
        models.append(Model(m if not m.endswith(".onnx") else
                            os.path.basename(os.path.dirname(os.path.abspath(path))), path))
    if a.suite:
        models += suite_models(a.suite, [x for x in a.pick.split(",") if x],
                               [x for x in a.exporters.split(",") if x])
    torch_ok = not a.no_torch
    if torch_ok and a.passive:
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # read when torch's libgomp loads
    if torch_ok:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("cpu_vs_ort.py: torch is not importable here: no PyTorch column", file=sys.stderr)
            torch_ok = False
    rows = []
    t_start = time.time()
    for m in models:
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(m.path, so, providers=["CPUExecutionProvider"])
        feed = read_inputs(m, sess, np)
        ort_run = functools.partial(sess.run, None, feed)
        t0 = time.perf_counter()
        ort_run()
        one = (time.perf_counter() - t0) * 1e3
        reps = max(a.reps, 50)
        reps = max(5, min(reps, int(a.round_seconds * 1e3 / max(one, 1e-3))))
        tor = None
        if torch_ok and m.manifest:
            try:
                tor = TorchEager(m, feed, a.threads)
            except Exception as e:  # report, time the rest
                print(f"  {m.name}: PyTorch skipped: {type(e).__name__}: {e}", file=sys.stderr)
        b, o, t, base = [], [], [], []
        try:
            for _ in range(a.rounds):
                b.append(time_brrr(a.brrr, m, reps, a.threads, a.passive, a.precision))
                if a.baseline:
                    base.append(time_brrr(a.baseline, m, reps, a.threads, a.passive,
                                          a.baseline_precision or a.precision))
                o.append(median_of(ort_run, reps, 3 if reps < 50 else 10))
                if tor:
                    t.append(median_of(tor, reps, 2))
        except RuntimeError as e:
            print(f"  {m.name}: {e}", file=sys.stderr)
            rows.append((m.name, None, statistics.median(o) if o else None, None, [], [], reps,
                         None, [], []))
            continue
        rows.append((m.name, statistics.median(b), statistics.median(o),
                     statistics.median(t) if t else None,
                     [x / y for x, y in zip(b, o)], [x / y for x, y in zip(b, t)], reps,
                     statistics.median(base) if base else None,
                     [x / y for x, y in zip(b, base)], [x / y for x, y in zip(base, o)]))
        print(f"  {m.name}: {reps} runs; brrr {[round(x, 3) for x in b]} ort "
              f"{[round(x, 3) for x in o]}" + (f" torch {[round(x, 3) for x in t]}" if t else "")
              + (f" before {[round(x, 3) for x in base]}" if base else "")
              + f" ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
        del sess, ort_run, tor
    tv = f"; torch {sys.modules['torch'].__version__}" if torch_ok else ""
    load = os.getloadavg()
    print(f"threads={a.threads}, median of N runs per round, median over {a.rounds} interleaved "
          f"rounds; onnxruntime {ort.__version__}{tv}; brrr OMP_WAIT_POLICY="
          f"{'passive' if a.passive else os.environ.get('OMP_WAIT_POLICY', 'default')}; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    if a.precision != "fp32":
        print(f"brrr: --precision {a.precision}")
    if a.baseline:
        print(f"before: {a.baseline} --precision {a.baseline_precision or a.precision}")
    print(f"{'model':<30} {'N':>4} {'brrr ms':>10} {'ORT ms':>10} {'torch ms':>10} "
          f"{'brrr/ORT':>8}  {'range':9} {'brrr/torch':>10}  range"
          + (f"    {'before ms':>10} {'before/ORT':>10}  range      {'brrr/before':>11}  range"
             if a.baseline else ""))
    for name, bm, om, tm, r_o, r_t, reps, basem, r_b, r_bo in rows:
        f = lambda x: f"{x:>10.3f}" if x is not None else f"{'failed' if x is bm else '-':>10}"  # noqa: E731
        print(f"{name:<30} {reps:>4} {f(bm)} {f(om)} {f(tm)} {fmt_ratio(r_o)} "
              f"{fmt_ratio(r_t).rjust(19)}"
              + (f"    {f(basem)} {fmt_ratio(r_bo).rjust(12)} {fmt_ratio(r_b).rjust(19)}"
                 if a.baseline else ""))


if __name__ == "__main__":
    main()
