#!/usr/bin/env python3
"""Compile time against graph size (issue 14 item 9): the five hostile shapes over a size ladder.

For each shape and size it writes the model with tests/data/make_scale_models.py, then times
`brrr run MODEL --data DIR --check` three ways: cold (an empty kernel cache), warm (the cache the
cold run filled) and with the reference backend, and prints one table row: shape, nodes, cold s,
warm s, reference s, cold/reference, and the check result of the cold run. Times are wall times of
the whole process (load, passes, code generation and compile, one run).

    .venv/bin/python scripts/compile_scaling.py [--sizes 1000,5000,20000,100000] [--shapes ...]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ["relu_chain", "wide", "sum", "reshape_transpose", "add_const"]


def timed(cmd, env, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    dt = time.monotonic() - t0
    out = p.stdout + p.stderr
    if p.returncode != 0:
        return dt, "exit {}: {}".format(p.returncode, (out.strip().splitlines() or [""])[-1][:60])
    return dt, "PASS" if "check: PASS" in out else "no check"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,5000,20000,100000")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--brrr", default=os.path.join(ROOT, "build", "brrr"))
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="brrr_scaling_")
    print(f"{'shape':<18} {'nodes':>7} {'cold s':>8} {'warm s':>8} {'ref s':>8} {'cold/ref':>8}  check")
    try:
        for shape in a.shapes.split(","):
            for n in [int(s) for s in a.sizes.split(",")]:
                subprocess.run([sys.executable, os.path.join(ROOT, "tests/data/make_scale_models.py"),
                                work, str(n), shape], check=True)
                d = os.path.join(work, f"{shape}_{n}")
                cmd = [a.brrr, "run", os.path.join(d, "model.onnx"), "--data",
                       os.path.join(d, "test_data_set_0"), "--check", "--reps", "0"]
                env = dict(os.environ, XDG_CACHE_HOME=os.path.join(d, "cache"))
                env.pop("BRRR_DEBUG", None)
                cold, status = timed(cmd, env, a.timeout)
                warm, _ = timed(cmd, env, a.timeout)
                ref, _ = timed(cmd + ["--backend", "reference"], env, a.timeout)
                f = lambda t: f"{t:8.2f}" if t is not None else f"{'-':>8}"
                ratio = f"{cold / ref:8.1f}" if cold and ref else f"{'-':>8}"
                print(f"{shape:<18} {n:>7} {f(cold)} {f(warm)} {f(ref)} {ratio}  {status}",
                      flush=True)
                shutil.rmtree(d)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
