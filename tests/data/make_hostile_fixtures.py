"""Generates the hostile-model fixtures (tests/data/hostile) read by tests/unit/test_hostile_*.cpp:
names that would break generated code or logs if they ever reached them, IEEE special constants,
run-time out-of-range indices, and ops asking for huge outputs. The outputs are committed; rerun
with a Python that has onnx: `/tmp/venv/bin/python tests/data/make_hostile_fixtures.py`."""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")


def model(nodes, inputs, outputs, inits=(), name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def save(m, fname):
    with open(os.path.join(OUT, fname), "wb") as f:
        f.write(m.SerializeToString())


def save_dir(name, tensors):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for i, (arr, tname) in enumerate(tensors):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, tname).SerializeToString())


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
F, I64 = TensorProto.FLOAT, TensorProto.INT64

# --- Names: every one would be code (or a broken comment / preprocessor line) if pasted into C++.
# The four a?b values sanitize to the same identifier ("a_b") under any [A-Za-z0-9_] mapping.
X = 'x\n"*/ #include <stdlib.h>\\'
N = {
    "relu": "int",
    "add": '*/ system("touch /tmp/brrr_pwned"); /*',
    "mul": "return",
    "sub": "main",
    "tanh": "#define float int\n",
    "neg": "\\\nabort();",
}
V = ["a.b", "a_b", "a-b", "a b", "int", "return 0;", "{0}", "%s%n", "}\n#pragma once\n{"]
Y1 = 'y */ int main() { return 1; } /*'
Y2 = "y2\\"
c1 = numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 0.25], np.float32), "main")
c2 = numpy_helper.from_array(np.array([3.0, 1.0, -2.0, 0.5], np.float32), "a_b")
nodes = [
    helper.make_node("Relu", [X], ["a.b"], name=N["relu"]),
    helper.make_node("Add", ["a.b", "main"], ["a-b"], name=N["add"]),
    helper.make_node("Mul", ["a-b", "a_b"], ["a b"], name=N["mul"]),
    helper.make_node("Sub", ["a b", X], ["int"], name=N["sub"]),
    helper.make_node("Tanh", ["int"], ["return 0;"], name=N["tanh"]),
    helper.make_node("Neg", ["return 0;"], ["{0}"], name=N["neg"]),
    helper.make_node("Add", ["{0}", "a b"], ["%s%n"], name="{}"),
    helper.make_node("Mul", ["%s%n", "int"], [Y1], name="%n%n%n"),
    helper.make_node("Abs", ["a.b"], ["}\n#pragma once\n{"], name="\\"),
    helper.make_node("Sigmoid", ["}\n#pragma once\n{"], [Y2], name="int main"),
]
save(model(nodes, [vi(X, F, [4])], [vi(Y1, F, [4]), vi(Y2, F, [4])], [c1, c2],
           name='graph */ int main(){} /* "\n#'), "names.onnx")

# --- A 1 MB node name and a 64 KB value name (with hostile characters mixed in).
big = ("*/\"\\\n#int main " * (1 << 16))[: 1 << 20]
mid = ("return*/\n" * 8000)[: 1 << 16]
save(model([helper.make_node("Relu", ["x"], [mid], name=big),
            helper.make_node("Exp", [mid], ["y"], name="exp")],
           [vi("x", F, [8])], [vi("y", F, [8])]), "huge_name.onnx")

# --- IEEE special values as initializers (vector and scalar) and as attributes.
f32 = np.float32
denorm, ndenorm = f32(1e-45), f32(-3e-39)
specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, denorm, ndenorm, 1.1754944e-38,
                     5e-39, 3.4028235e38, -3.4028235e38, 1.0, -1.0, -np.nan, 2.5, 1e-40], f32)
xs = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, denorm, -denorm, 1.0, -1.0, 0.5, -2.0, 3.0,
               1e-40, -1e-40, 100.0, -100.0], f32)
inits = [numpy_helper.from_array(specials, "c")]
scal = {"s_nan": np.nan, "s_inf": np.inf, "s_ninf": -np.inf, "s_nzero": -0.0, "s_denorm": denorm,
        "s_ndenorm": ndenorm}
for k, v in scal.items():
    inits.append(numpy_helper.from_array(np.array(v, f32), k))
nodes, outs = [], []


def out(node_op, ins, name, **attrs):
    nodes.append(helper.make_node(node_op, ins, [name], name="n_" + name, **attrs))
    outs.append(vi(name, F, [16]))


for op in ["Add", "Sub", "Mul", "Div", "Max", "Min"]:
    out(op, ["x", "c"], "v_" + op.lower())
for k in scal:
    out("Mul", ["x", k], "mul_" + k)
    out("Add", ["x", k], "add_" + k)
    out("Div", [k, "x"], "div_" + k)
out("Clip", ["x", "s_nzero", "s_denorm"], "clip_nzero_denorm")
out("Clip", ["x", "s_nan", "s_inf"], "clip_nan_inf")
out("Clip", ["x", "s_ninf", "s_nan"], "clip_ninf_nan")
out("Clip", ["x", "s_ndenorm", "s_nzero"], "clip_ndenorm_nzero")
for tag, a in [("nan", np.nan), ("inf", np.inf), ("ninf", -np.inf), ("nzero", -0.0),
               ("denorm", float(denorm)), ("ndenorm", float(ndenorm))]:
    out("LeakyRelu", ["x"], "leaky_" + tag, alpha=a)
    out("Elu", ["x"], "elu_" + tag, alpha=a)
    out("HardSigmoid", ["x"], "hsig_" + tag, alpha=a, beta=-0.0 if tag != "nan" else np.nan)
nodes.append(helper.make_node("Constant", [], ["k_nan"], name="k_nan", value_float=np.nan))
out("Add", ["x", "k_nan"], "add_const_nan")
nodes.append(helper.make_node("Constant", [], ["k_nzero"], name="k_nzero", value_float=-0.0))
out("Mul", ["x", "k_nzero"], "mul_const_nzero")
save(model(nodes, [vi("x", F, [16])], outs, inits), "special_floats.onnx")
save_dir("special_floats_data", [(xs, "x")])

# --- Gather / GatherElements whose indices arrive at run time.
save(model([helper.make_node("Gather", ["data", "idx"], ["y"], name="gather", axis=0)],
           [vi("data", F, [5, 3]), vi("idx", I64, [2])], [vi("y", F, [2, 3])]), "gather.onnx")
save(model([helper.make_node("Gather", ["data", "idx"], ["y"], name="gather1", axis=1)],
           [vi("data", F, [2, 3]), vi("idx", I64, [2, 2])], [vi("y", F, [2, 2, 2])]),
     "gather_axis1.onnx")
save(model([helper.make_node("GatherElements", ["data", "idx"], ["y"], name="ge", axis=1)],
           [vi("data", F, [3, 4]), vi("idx", I64, [3, 2])], [vi("y", F, [3, 2])]),
     "gather_elements.onnx")
d53 = np.arange(15, dtype=f32).reshape(5, 3)
save_dir("gather_ok", [(d53, "data"), (np.array([4, -5], np.int64), "idx")])
save_dir("gather_bad_pos", [(d53, "data"), (np.array([1, 5], np.int64), "idx")])
save_dir("gather_bad_neg", [(d53, "data"), (np.array([-6, 0], np.int64), "idx")])
d34 = np.arange(12, dtype=f32).reshape(3, 4)
save_dir("gather_elements_bad", [(d34, "data"), (np.array([[0, 1], [2, 3], [4, 0]], np.int64),
                                                 "idx")])

# --- Huge outputs (2^40 elements and more): refused before any allocation.
BIG = 1 << 40
save(model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos")], [],
           [vi("y", F, ["n"])], [numpy_helper.from_array(np.array([BIG], np.int64), "shape")]),
     "huge_constant_of_shape.onnx")
save(model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
           [vi("x", F, [1])], [vi("y", F, ["n", "m"])],
           [numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")]),
     "huge_expand.onnx")
save(model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range")], [],
           [vi("y", I64, ["n"])],
           [numpy_helper.from_array(np.array(0, np.int64), "start"),
            numpy_helper.from_array(np.array(BIG, np.int64), "limit"),
            numpy_helper.from_array(np.array(1, np.int64), "delta")]), "huge_range.onnx")
save(model([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile")],
           [vi("x", F, [2])], [vi("y", F, ["n"])],
           [numpy_helper.from_array(np.array([BIG], np.int64), "reps")]), "huge_tile.onnx")
# 64 Mi floats (256 MiB): under the default limit, over a BRRR_MAX_TENSOR_BYTES set by the test.
save(model([helper.make_node("ConstantOfShape", ["shape"], ["t"], name="cos"),
            helper.make_node("Relu", ["t"], ["y"], name="relu")], [], [vi("y", F, ["n"])],
           [numpy_helper.from_array(np.array([1 << 26], np.int64), "shape")]),
     "medium_constant_of_shape.onnx")
