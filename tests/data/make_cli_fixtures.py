"""Generates the small fixtures the `brrr run` CLI tests read (tests/data/cli). The outputs are
committed; rerun with a Python that has onnx: `.venv/bin/python tests/data/make_cli_fixtures.py`."""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli")


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def save_model(m, fname):
    with open(os.path.join(OUT, fname), "wb") as f:
        f.write(m.SerializeToString())


def save_dir(name, tensors):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for fname, arr, tname in tensors:
        with open(os.path.join(d, fname), "wb") as f:
            f.write(numpy_helper.from_array(arr, tname).SerializeToString())


shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
b = numpy_helper.from_array(np.array([[1, -2, 3], [-4, 5, -6]], np.float32) * 0.25, "b")
# y = relu(x + b)
save_model(model([helper.make_node("Add", ["x", "b"], ["t"], name="add"),
                  helper.make_node("Relu", ["t"], ["y"], name="relu")], [X], [Y], [b]),
           "add_relu.onnx")

x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
y = np.maximum(x + numpy_helper.to_array(b), 0).astype(np.float32)
save_dir("data_ok", [("input_0.pb", x, "x"), ("output_0.pb", y, "y")])
save_dir("data_bad_expected", [("input_0.pb", x, "x"), ("output_0.pb", y + 0.5, "y")])
save_dir("data_wrong_shape", [("input_0.pb", x.reshape(3, 2), "x")])
save_dir("data_no_outputs", [("input_0.pb", x, "x")])

# Symbolic batch dim: runs with --shape, or with batch defaulted to 1.
XS = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
YS = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
save_model(model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [XS], [YS]),
           "symbolic_batch.onnx")

# An op that is in no op table.
save_model(model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")],
                 [X], [Y]), "unsupported_op.onnx")
