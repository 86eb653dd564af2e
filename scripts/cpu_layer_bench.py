#!/usr/bin/env python3
"""Transformer-shaped ONNX graphs, built here with onnx.helper, timed brrr vs ONNX Runtime.

The graphs (random weights, batch 1, fp32):
  vit_mlp     one ViT-B/16 MLP block at 197 tokens: LayerNorm, MatMul+Add 768->3072, Gelu (erf),
              MatMul+Add 3072->768, residual Add
  bert_layer  one BERT-base encoder layer at seq 128: Q/K/V projections (MatMul+Add), Reshape and
              Transpose to heads, Q.K^T (a Transpose feeding a MatMul), Div, Add mask, Softmax, P.V,
              Transpose back, output projection, residual, LayerNorm, the MLP with erf Gelu
              written out as ONNX exports it (Div, Erf, Add, Mul, Mul), LayerNorm
  gemm_only   the ViT MLP's first GEMM alone ([1,197,768] x [768,3072] + bias)

The graphs are written to --out (default: a temporary folder), then scripts/cpu_vs_ort.py times
them (interleaved rounds, medians). Run with a python that has onnx and onnxruntime:
    .venv/bin/python scripts/cpu_layer_bench.py [--graphs vit_mlp bert_layer] [--rounds 5]
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def builder():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    counter = [0]

    def name(p):
        counter[0] += 1
        return f"{p}{counter[0]}"

    def const(arr):
        n = name("c")
        inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def weight(*shape, scale=None):
        scale = scale or 1.0 / np.sqrt(shape[0])
        return const(rng.uniform(-scale, scale, size=shape).astype(np.float32))

    def op(kind, *ins, **attrs):
        out = name(kind.lower())
        nodes.append(helper.make_node(kind, list(ins), [out], **attrs))
        return out

    def linear(x, k, n):
        return op("Add", op("MatMul", x, weight(k, n)), weight(n, scale=0.1))

    def layernorm(x, d):
        return op("LayerNormalization", x, const(np.ones(d, np.float32)),
                  const(np.zeros(d, np.float32)), axis=-1, epsilon=1e-5)

    def gelu_erf(x):  # as torch.onnx exports nn.GELU() at opsets < 20
        e = op("Erf", op("Div", x, const(np.float32(np.sqrt(2.0)))))
        return op("Mul", op("Mul", x, op("Add", e, const(np.float32(1.0)))),
                  const(np.float32(0.5)))

    def finish(graph_name, inputs, output, out_shape):
        g = helper.make_graph(nodes, graph_name, inputs,
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    return np, TensorProto, helper, op, const, weight, linear, layernorm, gelu_erf, finish


def vit_mlp(tokens=197, d=768, hidden=3072):
    np, TP, helper, op, const, weight, linear, layernorm, gelu_erf, finish = builder()
    x = "x"
    h = linear(gelu_erf(linear(layernorm(x, d), d, hidden)), hidden, d)
    y = op("Add", x, h)
    return finish("vit_mlp", [helper.make_tensor_value_info(x, TP.FLOAT, [1, tokens, d])], y,
                  [1, tokens, d])


def gemm_only(tokens=197, d=768, hidden=3072):
    np, TP, helper, op, const, weight, linear, layernorm, gelu_erf, finish = builder()
    y = linear("x", d, hidden)
    return finish("gemm_only", [helper.make_tensor_value_info("x", TP.FLOAT, [1, tokens, d])], y,
                  [1, tokens, hidden])


def bert_layer(seq=128, d=768, heads=12, hidden=3072):
    np, TP, helper, op, const, weight, linear, layernorm, gelu_erf, finish = builder()
    x, mask = "x", "mask"
    dh = d // heads
    split = const(np.array([1, seq, heads, dh], np.int64))

    def heads_of(t, perm):
        return op("Transpose", op("Reshape", t, split), perm=perm)

    q = heads_of(linear(x, d, d), [0, 2, 1, 3])  # [1, h, s, dh]
    kt = heads_of(linear(x, d, d), [0, 2, 3, 1])  # [1, h, dh, s]
    v = heads_of(linear(x, d, d), [0, 2, 1, 3])
    s = op("Div", op("MatMul", q, kt), const(np.float32(np.sqrt(dh))))
    p = op("Softmax", op("Add", s, mask), axis=-1)
    ctx = op("Reshape", op("Transpose", op("MatMul", p, v), perm=[0, 2, 1, 3]),
             const(np.array([1, seq, d], np.int64)))
    h1 = layernorm(op("Add", x, linear(ctx, d, d)), d)
    h2 = layernorm(op("Add", h1, linear(gelu_erf(linear(h1, d, hidden)), hidden, d)), d)
    return finish("bert_layer", [helper.make_tensor_value_info(x, TP.FLOAT, [1, seq, d]),
                                 helper.make_tensor_value_info(mask, TP.FLOAT, [1, 1, 1, seq])],
                  h2, [1, seq, d])


GRAPHS = {"vit_mlp": vit_mlp, "bert_layer": bert_layer, "gemm_only": gemm_only}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--graphs", nargs="*", default=["vit_mlp", "bert_layer"], choices=list(GRAPHS))
    ap.add_argument("--out", help="folder for the .onnx files (default: a temporary one)")
    ap.add_argument("--only-write", action="store_true", help="write the graphs and stop")
    a, rest = ap.parse_known_args()
    import onnx

    out = a.out or tempfile.mkdtemp(prefix="brrr_layers_")
    os.makedirs(out, exist_ok=True)
    paths = []
    for g in a.graphs:
        p = os.path.join(out, f"{g}.onnx")
        m = GRAPHS[g]()
        onnx.checker.check_model(m)
        onnx.save(m, p)
        paths.append(p)
        print(f"wrote {p}", file=sys.stderr)
    if a.only_write:
        return
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "cpu_vs_ort.py")] + paths + rest
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
