#!/usr/bin/env python3
"""Writes the five graph shapes of issue 14 item 9 (compile time against graph size) at N nodes.

  relu_chain         x -> Relu -> Relu -> ... (N Relus)
  wide               N branches Mul(x, s_i) (distinct scalars), summed by a balanced Add tree
  sum                one Sum over x and N-1 distinct [64] initializers
  reshape_transpose  Transpose(perm 1,0) and Reshape back, alternating (N nodes)
  add_const          x -> Add(c_1) -> Add(c_2) -> ... (N distinct [64] initializers)

Each model gets a test_data_set_0 (a random input, and the output numpy computes in the same
order of float32 operations), so `brrr run MODEL --data DIR --check` checks the result.

usage: make_scale_models.py OUT_DIR N [SHAPE ...]
       (writes OUT_DIR/SHAPE_N/model.onnx and OUT_DIR/SHAPE_N/test_data_set_0/)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = 64  # elements per row: small tensors, so the time measured is compile time


def model(name, nodes, inits, x_shape, y_shape, y_name):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, y_shape)],
        initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def relu_chain(n):
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"t{i-1}"], [f"t{i}"]) for i in range(n)]
    return model("relu_chain", nodes, [], [1, W], [1, W], f"t{n-1}"), lambda x: np.maximum(x, 0)


def wide(n):
    b = max(2, (n + 1) // 2)  # b branches and b-1 Adds: about n nodes
    rng = np.random.default_rng(1)
    nodes, inits, level = [], [], []
    for i in range(b):
        inits.append(numpy_helper.from_array(np.array(rng.uniform(-1, 1), np.float32), f"s{i}"))
        nodes.append(helper.make_node("Mul", ["x", f"s{i}"], [f"m{i}"]))
        level.append(f"m{i}")
    k = 0
    tree = [level]  # names per level, for the expected output
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            nodes.append(helper.make_node("Add", [level[j], level[j + 1]], [f"a{k}"]))
            nxt.append(f"a{k}")
            k += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt

    def expect(x):
        vals = [x * numpy_helper.to_array(t) for t in inits]
        while len(vals) > 1:
            nxt = [vals[j] + vals[j + 1] for j in range(0, len(vals) - 1, 2)]
            vals = nxt + ([vals[-1]] if len(vals) % 2 else [])
        return vals[0]
    return model("wide", nodes, inits, [1, W], [1, W], level[0]), expect


def sum_inputs(n):
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, W).astype(np.float32), f"c{i}")
             for i in range(1, n)]
    nodes = [helper.make_node("Sum", ["x"] + [f"c{i}" for i in range(1, n)], ["y"])]

    def expect(x):
        for t in inits:
            x = x + numpy_helper.to_array(t)
        return x
    return model("sum", nodes, inits, [1, W], [1, W], "y"), expect


def reshape_transpose(n):
    shape = numpy_helper.from_array(np.array([8, 8], np.int64), "shape")
    nodes, prev = [], "x"
    for i in range(n):
        if i % 2 == 0:
            nodes.append(helper.make_node("Transpose", [prev], [f"t{i}"], perm=[1, 0]))
        else:
            nodes.append(helper.make_node("Reshape", [prev, "shape"], [f"t{i}"]))
        prev = f"t{i}"
    return (model("reshape_transpose", nodes, [shape], [8, 8], [8, 8], prev),
            lambda x: x.T.copy() if (n + 1) // 2 % 2 else x)


def add_const(n):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.uniform(-1e-3, 1e-3, W).astype(np.float32), f"c{i}")
             for i in range(n)]
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i-1}", f"c{i}"], [f"t{i}"])
             for i in range(n)]
    def expect(x):
        for t in inits:
            x = x + numpy_helper.to_array(t)
        return x
    return model("add_const", nodes, inits, [1, W], [1, W], f"t{n-1}"), expect


SHAPES = {"relu_chain": relu_chain, "wide": wide, "sum": sum_inputs,
          "reshape_transpose": reshape_transpose, "add_const": add_const}


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    for s in sys.argv[3:] or SHAPES:
        m, expect = SHAPES[s](n)
        d = os.path.join(out, f"{s}_{n}")
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        shape = [v.dim_value for v in m.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(n).uniform(-1, 1, shape).astype(np.float32)
        y = expect(x).astype(np.float32)
        for name, t in (("input_0.pb", numpy_helper.from_array(x, "x")),
                        ("output_0.pb", numpy_helper.from_array(y, m.graph.output[0].name))):
            with open(os.path.join(d, "test_data_set_0", name), "wb") as f:
                f.write(t.SerializeToString())


if __name__ == "__main__":
    main()
