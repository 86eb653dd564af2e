"""fp32 against --precision bf16 on the CPU, interleaved: both sessions of one model are built
once, then each round runs each once (the order alternating), so load changes hit both alike.
Prints the medians, the minimums, the speed-up and each precision's error against the model
folder's test_data_set_0, plus which oneDNN kernels read bf16 (from the plan summary).

  PYTHONPATH=build/python .venv/bin/python scripts/cpu_bf16_ab.py MODEL.onnx [ROUNDS] [THREADS]
"""
import glob
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

import brrr


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def main():
    model = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    data = os.path.join(os.path.dirname(model), "test_data_set_0")
    feeds = [read_pb(f) for f in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    names = [i.name for i in onnx.load(model, load_external_data=False).graph.input]
    inputs = dict(zip(names, feeds))
    shapes = {n: tuple(f.shape) for n, f in inputs.items()}
    sessions = {p: brrr.Session(model, "cpu", precision=p, threads=threads, shapes=shapes)
                for p in ("fp32", "bf16")}
    expected = read_pb(os.path.join(data, "output_0.pb")).astype(np.float32)
    for p, s in sessions.items():
        got = np.asarray(list(s.run(inputs).values())[0], dtype=np.float32)
        rel = np.linalg.norm(got - expected) / np.linalg.norm(expected)
        print(f"{p}: rel L2 {rel:.3g}, max abs {np.abs(got - expected).max():.3g} "
              f"(max|exp| {np.abs(expected).max():.3g})")
    times = {p: [] for p in sessions}
    for r in range(rounds):
        for p in ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32"):
            t0 = time.perf_counter()
            sessions[p].run(inputs)
            times[p].append((time.perf_counter() - t0) * 1e3)
    a, b = statistics.median(times["fp32"]), statistics.median(times["bf16"])
    print(f"{model}: fp32 median {a:.3f} ms (min {min(times['fp32']):.3f}), bf16 median {b:.3f} ms "
          f"(min {min(times['bf16']):.3f}), speed-up {a / b:.2f}x over {rounds} rounds, "
          f"{threads} threads; loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for line in sessions["bf16"].plan_summary().splitlines():
        if line.startswith("precision:"):
            print(line)


if __name__ == "__main__":
    main()
