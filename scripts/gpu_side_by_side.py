#!/usr/bin/env python3
"""The peers on the same GPU and workloads as brrr_gpu_probe: PyTorch eager, torch.compile and
torch.compile(mode="reduce-overhead"). Medians from triton.testing.do_bench (events, L2 flushed);
inputs are random (never zeros) and larger than L2 except the batch-1/64 MLP, which is
overhead-bound by design. TB/s counts compulsory bytes (inputs read once, output written once).
Prints one table last. BRRR_TORCH_BUDGET_S caps the total time (compiles included)."""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

BUDGET = float(os.environ.get("BRRR_TORCH_BUDGET_S", "300"))
T0 = time.time()
dev = "cuda"
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
rows = []


def bench(fn):
    for _ in range(3):  # compile / capture / warm up outside the timed region
        fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def run(name, fn, metric):
    """metric(ms) -> (value, unit). Times eager, compile, reduce-overhead."""
    if time.time() - T0 > BUDGET:
        print(f"skip {name}: time budget {BUDGET:.0f}s spent", flush=True)
        return
    res = {}
    for mode in ("eager", "compile", "reduce-overhead"):
        if time.time() - T0 > BUDGET:
            res[mode] = None
            continue
        torch._dynamo.reset()
        f = fn if mode == "eager" else (
            torch.compile(fn) if mode == "compile" else torch.compile(fn, mode="reduce-overhead"))
        t = time.time()
        try:
            res[mode] = bench(f)
        except Exception as e:  # report, keep going
            print(f"{name} {mode}: {type(e).__name__}: {e}", flush=True)
            res[mode] = None
        print(f"  {name:34s} {mode:16s} {res[mode] if res[mode] else float('nan'):9.4f} ms"
              f"  ({time.time() - t:.1f}s incl. compile)", flush=True)
    rows.append((name, res, metric))


def tbs(nbytes):
    return lambda ms: (nbytes / (ms * 1e-3) / 1e12, "TB/s")


def tflops(flops):
    return lambda ms: (flops / (ms * 1e-3) / 1e12, "TFLOP/s")


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    # cos(cos(x)), 2^28 fp32 (1 GiB, far over L2)
    x = torch.rand(1 << 28, device=dev) * 8 - 4
    run("cos(cos(x)) 2^28 fp32", lambda: x.cos().cos(), tbs(2 * 4 * x.numel()))
    del x

    R, C = 16384, 4096
    xb = torch.randn(R, C, device=dev, dtype=torch.bfloat16)
    w = torch.randn(C, device=dev, dtype=torch.bfloat16)
    b = torch.randn(C, device=dev, dtype=torch.bfloat16)
    nb = 2 * 2 * R * C  # read + write, bf16
    run("LayerNorm bf16 16384x4096", lambda: F.layer_norm(xb, (C,), w, b), tbs(nb))
    run("softmax(-1) bf16 16384x4096", lambda: torch.softmax(xb, -1), tbs(nb))
    run("GELU(x+b) bf16 16384x4096", lambda: F.gelu(xb + b), tbs(nb))
    run("LayerNorm(x+0.5x) bf16 16384x4096", lambda: F.layer_norm(xb + 0.5 * xb, (C,), w, b),
        tbs(nb))
    del xb

    n = 8192
    A = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    W = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(n, device=dev, dtype=torch.bfloat16)
    run("GEMM bf16 8192^3", lambda: A @ W, tflops(2 * n ** 3))
    run("GELU(A@W+b) bf16 8192^3", lambda: F.gelu(A @ W + bias), tflops(2 * n ** 3))
    del A, W

    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    mlp = torch.nn.Sequential(*layers).to(dev)
    for batch in (1, 64, 4096):
        xin = torch.randn(batch, 256, device=dev)

        def fwd(xin=xin):
            with torch.no_grad():
                return mlp(xin)

        run(f"MLP 8x(Linear256+ReLU) fp32 b={batch}", fwd,
            lambda ms, b=batch: (ms * 1e3, "us/fwd"))

    print("\n==== PyTorch side-by-side (ms, median; metric from the best mode) ====")
    print(f"| {'workload':36s} | {'eager':>9s} | {'compile':>9s} | {'reduce-ovh':>10s} | metric")
    for name, res, metric in rows:
        cells = [f"{res[m]:9.4f}" if res.get(m) else f"{'-':>9s}"
                 for m in ("eager", "compile", "reduce-overhead")]
        parts = []
        for m in ("eager", "compile", "reduce-overhead"):
            if res.get(m):
                v, unit = metric(res[m])
                parts.append(f"{m[:7]} {v:.2f}")
        unit = metric(1.0)[1]
        print(f"| {name:36s} | {cells[0]} | {cells[1]} | {cells[2]:>10s} | {unit}: {', '.join(parts)}")
    print(f"total {time.time() - T0:.0f}s", flush=True)
    if os.environ.get("BRRR_TORCH_JSON"):  # for scripts/gpu_full.sh's combined table
        import json
        with open(os.environ["BRRR_TORCH_JSON"], "w") as f:
            json.dump([{"workload": n, **{m: r.get(m) for m in ("eager", "compile", "reduce-overhead")}}
                       for n, r, _ in rows], f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
