#!/usr/bin/env python3
"""Writes the five graph shapes of issue 14 item 9 (compile time against graph size) at N nodes.

  relu_chain         x -> Relu -> Relu -> ... (N Relus)
  wide               N branches Mul(x, s_i) (distinct scalars), summed by a balanced Add tree
  sum                one Sum over x and N-1 distinct [64] initializers
  reshape_transpose  Transpose(perm 1,0) and Reshape back, alternating (N nodes)
  add_const          x -> Add(c_1) -> Add(c_2) -> ... (N distinct [64] initializers)

usage: make_scale_models.py OUT_DIR N [SHAPE ...]   (writes OUT_DIR/SHAPE_N.onnx)
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
    return model("relu_chain", nodes, [], [1, W], [1, W], f"t{n-1}")


def wide(n):
    b = max(2, (n + 1) // 2)  # b branches and b-1 Adds: about n nodes
    rng = np.random.default_rng(1)
    nodes, inits, level = [], [], []
    for i in range(b):
        inits.append(numpy_helper.from_array(np.array(rng.uniform(-1, 1), np.float32), f"s{i}"))
        nodes.append(helper.make_node("Mul", ["x", f"s{i}"], [f"m{i}"]))
        level.append(f"m{i}")
    k = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            nodes.append(helper.make_node("Add", [level[j], level[j + 1]], [f"a{k}"]))
            nxt.append(f"a{k}")
            k += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return model("wide", nodes, inits, [1, W], [1, W], level[0])


def sum_inputs(n):
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, W).astype(np.float32), f"c{i}")
             for i in range(1, n)]
    nodes = [helper.make_node("Sum", ["x"] + [f"c{i}" for i in range(1, n)], ["y"])]
    return model("sum", nodes, inits, [1, W], [1, W], "y")


def reshape_transpose(n):
    shape = numpy_helper.from_array(np.array([8, 8], np.int64), "shape")
    nodes, prev = [], "x"
    for i in range(n):
        if i % 2 == 0:
            nodes.append(helper.make_node("Transpose", [prev], [f"t{i}"], perm=[1, 0]))
        else:
            nodes.append(helper.make_node("Reshape", [prev, "shape"], [f"t{i}"]))
        prev = f"t{i}"
    return model("reshape_transpose", nodes, [shape], [8, 8], [8, 8], prev)


def add_const(n):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.uniform(-1e-3, 1e-3, W).astype(np.float32), f"c{i}")
             for i in range(n)]
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i-1}", f"c{i}"], [f"t{i}"])
             for i in range(n)]
    return model("add_const", nodes, inits, [1, W], [1, W], f"t{n-1}")


SHAPES = {"relu_chain": relu_chain, "wide": wide, "sum": sum_inputs,
          "reshape_transpose": reshape_transpose, "add_const": add_const}


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    for s in sys.argv[3:] or SHAPES:
        m = SHAPES[s](n)
        onnx.save(m, os.path.join(out, f"{s}_{n}.onnx"))


if __name__ == "__main__":
    main()
