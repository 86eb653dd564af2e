"""Generates the small hostile and edge-case ONNX files the loader tests read (tests/data/loader).
Run with a Python that has onnx: `python3 make_loader_fixtures.py`. The outputs are committed."""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loader")
os.makedirs(OUT, exist_ok=True)


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def save(m, fname):
    with open(os.path.join(OUT, fname), "wb") as f:
        f.write(m.SerializeToString())


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])

# A valid model: y = relu(x + b), with b in raw_data and c in typed float_data.
b = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, "b")
c = helper.make_tensor("c", TensorProto.FLOAT, [3], [1.0, -1.0, 0.5])
save(model([helper.make_node("Add", ["x", "b"], ["t"], name="add"),
            helper.make_node("Add", ["t", "c"], ["u"], name="add2"),
            helper.make_node("Relu", ["u"], ["y"], name="relu")], [X], [Y], [b, c]), "add_relu.onnx")

# Symbolic batch dim.
XS = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
YS = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [XS], [YS]), "symbolic_batch.onnx")

# Unsupported op.
save(model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")], [X], [Y]),
     "unsupported_op.onnx")

# raw_data shorter than dims need.
bad = numpy_helper.from_array(np.zeros((2, 3), np.float32), "b")
bad.raw_data = bad.raw_data[:10]
save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [X], [Y], [bad]), "raw_data_short.onnx")

# Typed field count mismatch.
badc = TensorProto()
badc.name = "b"
badc.data_type = TensorProto.FLOAT
badc.dims.extend([2, 3])
badc.float_data.extend([1.0, 2.0])
save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [X], [Y], [badc]), "float_data_short.onnx")

# Dims whose product overflows int64.
huge = TensorProto()
huge.name = "b"
huge.data_type = TensorProto.FLOAT
huge.dims.extend([1 << 40, 1 << 40])
save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [X], [Y], [huge]), "dims_overflow.onnx")

# Shapes that cannot broadcast.
bb = numpy_helper.from_array(np.zeros((4,), np.float32), "b")
save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add_bad")], [X], [Y], [bb]), "bad_broadcast.onnx")

# A cycle: t = relu(u), u = relu(t).
save(model([helper.make_node("Relu", ["u"], ["t"], name="r1"),
            helper.make_node("Relu", ["t"], ["u"], name="r2"),
            helper.make_node("Add", ["x", "t"], ["y"], name="add")], [X], [Y]), "cycle.onnx")

# An input nobody produces.
save(model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], [X], [Y]), "dangling_input.onnx")


def external(location, fname):
    t = TensorProto()
    t.name = "b"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [X], [Y], [t]), fname)


# External data: valid, escaping with ../, absolute, and through a symlink (made by the test).
with open(os.path.join(OUT, "weights.bin"), "wb") as f:
    f.write(np.arange(6, dtype=np.float32).tobytes())
external("weights.bin", "external_ok.onnx")
external("../loader/weights.bin", "external_dotdot.onnx")
external("/etc/passwd", "external_absolute.onnx")
external("escape_link/passwd", "external_symlink.onnx")
external("missing.bin", "external_missing.onnx")

# Unsupported IR version and a model with no graph outputs.
m = model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y])
m.ir_version = 99
save(m, "ir_version_99.onnx")

# Names that would break generated code or logs if they leaked into it.
weird = 'a"b*/\\n#c\nint main'
save(model([helper.make_node("Relu", ["x"], [weird], name=weird),
            helper.make_node("Relu", [weird], ["y"], name="r2")], [X], [Y]), "weird_names.onnx")


# Add with one input (the schema requires two).
save(model([helper.make_node("Add", ["x"], ["y"], name="add_one")], [X], [Y]), "add_one_input.onnx")
print("wrote", OUT)
