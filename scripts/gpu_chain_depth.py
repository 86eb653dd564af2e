#!/usr/bin/env python3
"""Where a GEMM chain's time goes: MLPs of 256-wide Linear+ReLU layers at batch 1 with 1, 2, 4,
8 and 16 layers, profiled by `brrr doctor --backend cuda --json` with the chain kernel and with
one cuBLASLt call per layer (BRRR_DISABLE_GEMM_CHAIN=1). The slope over depth is the per-layer
cost, the intercept the fixed cost. Usage: gpu_chain_depth.py BRRR_BINARY [OUT_DIR]"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

brrr, out = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "/tmp")
rng = np.random.default_rng(0)
print(f"{'layers':>6} {'variant':>10} {'wall us':>8} {'kernel us':>9}  kernels")
for layers in (1, 2, 4, 8, 16):
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = numpy_helper.from_array((rng.standard_normal((256, 256)) / 16).astype(np.float32), f"W{i}")
        b = numpy_helper.from_array(rng.standard_normal(256).astype(np.float32), f"b{i}")
        inits += [w, b]
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"y{i}"])]
        x = f"y{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 256])], inits)
    path = os.path.join(out, f"mlp{layers}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    for variant, env in (("chain", {}), ("cublaslt", {"BRRR_DISABLE_GEMM_CHAIN": "1"})):
        js = os.path.join(out, f"mlp{layers}_{variant}.json")
        subprocess.run([brrr, "doctor", path, "--backend", "cuda", "--reps", "50", "--json", js],
                       env={**os.environ, **env}, check=True, capture_output=True)
        r = json.load(open(js))
        ks = r["kernels"]
        busy = sum(k["time_ms"] for k in ks) * 1e3
        print(f"{layers:6d} {variant:>10} {r['attribution']['wall_ms'] * 1e3:8.1f} {busy:9.1f}  {len(ks)}")
