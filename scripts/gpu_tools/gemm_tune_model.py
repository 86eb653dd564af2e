#!/usr/bin/env python3
"""Writes the GEMM workload of gemm_tune_bench.sh: BERT-base's encoder GEMMs at seq 128 without
the rest of the model. x[M,768] goes through L blocks of (x@Wq+b: 768x768, x@W1+b: 768x3072,
h@W2+b: 3072x768) in float32 (brrr --precision bf16 stores it in 16 bits); every layer has its
own weights, so, as in BERT-base, they do not all stay in L2 between replays."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--m", type=int, default=128)
ap.add_argument("--layers", type=int, default=12)
a = ap.parse_args()

rng = np.random.default_rng(0)
nodes, inits = [], []
x = "x"


def dense(name, src, k, n):
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = (rng.standard_normal(n) * 0.1).astype(np.float32)
    inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
    nodes.append(helper.make_node("MatMul", [src, name + "_w"], [name + "_mm"], name=name + "/MatMul"))
    nodes.append(helper.make_node("Add", [name + "_mm", name + "_b"], [name], name=name + "/Add"))
    return name


for i in range(a.layers):
    q = dense(f"l{i}_proj", x, 768, 768)
    h = dense(f"l{i}_up", q, 768, 3072)
    x = dense(f"l{i}_down", h, 3072, 768)
g = helper.make_graph(nodes, "gemm_tune_bench",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.m, 768])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [a.m, 768])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, a.out)
print(f"wrote {a.out}: {a.layers} x (768x768, 768x3072, 3072x768) at M={a.m}")
