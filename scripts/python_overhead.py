#!/usr/bin/env python3
"""Per-call overhead of brrr's Python API: brrr.Session.run against the C++ Session::run on the
same model (default mlp_tiny, CPU), in microseconds. A benchmark, not a test.

The C++ side is `brrr run MODEL --reps N`, whose steady-state line is the median wall time of N
Session::run calls on host inputs (src/cli/run.cpp). The Python side times N calls of
Session.run with time.perf_counter_ns around each and takes the median. The two alternate over
several rounds so that both see the same machine load; the overhead printed is the median over
rounds of (Python median - C++ median).

    PYTHONPATH=build/python .venv/bin/python scripts/python_overhead.py [--reps 5000] [--rounds 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "build", "python"))

import numpy as np  # noqa: E402

import brrr  # noqa: E402


def load_inputs(model_dir):
    import onnx
    from onnx import numpy_helper

    d = os.path.join(model_dir, "test_data_set_0")
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("input_"):
            t = onnx.load_tensor(os.path.join(d, f))
            out[t.name] = numpy_helper.to_array(t)
    return out


def cpp_median_us(cli, model, reps, threads):
    r = subprocess.run([cli, "run", model, "--reps", str(reps), "--threads", str(threads)],
                       capture_output=True, text=True, check=True)
    m = re.search(r", run ([0-9.e+-]+) ms \(median of", r.stdout)
    if not m:
        sys.exit(f"python_overhead: no run time in `brrr run`'s output:\n{r.stdout}")
    return float(m.group(1)) * 1e3


def python_median_us(session, inputs, reps):
    run = session.run
    for _ in range(min(reps, 200)):  # warm-up, as brrr run's first run
        run(inputs)
    t = []
    clock = time.perf_counter_ns
    for _ in range(reps):
        t0 = clock()
        run(inputs)
        t.append(clock() - t0)
    t.sort()
    return t[len(t) // 2] / 1e3  # the upper middle one, as brrr's median (core/median.hpp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(REPO, "examples", "mlp_tiny"))
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "brrr"))
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    model = os.path.join(a.model, "model.onnx")
    # `brrr run` feeds random inputs of the model's shapes; the values do not change the time.
    inputs = load_inputs(a.model)
    session = brrr.Session(model, threads=a.threads)
    cpp_median_us(a.cli, model, 10, a.threads)  # compiles (or loads) the kernels once
    rows = []
    for r in range(a.rounds):
        c = cpp_median_us(a.cli, model, a.reps, a.threads)
        p = python_median_us(session, inputs, a.reps)
        rows.append((c, p))
        print(f"round {r + 1}: C++ Session::run {c:.2f} us, Python Session.run {p:.2f} us, "
              f"difference {p - c:+.2f} us")
    diffs = [p - c for c, p in rows]
    print(f"{os.path.basename(a.model)} (cpu, {a.threads} thread(s), median of {a.reps} runs "
          f"per side and round): C++ {statistics.median(c for c, _ in rows):.2f} us, Python "
          f"{statistics.median(p for _, p in rows):.2f} us; Python overhead per call "
          f"{statistics.median(diffs):+.2f} us (rounds: {min(diffs):+.2f} .. {max(diffs):+.2f})")


if __name__ == "__main__":
    main()
