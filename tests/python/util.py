"""Helpers of the Python package's tests (pytest puts this folder on sys.path). ctest runs the
tests against the build tree (PYTHONPATH=build/python); by hand:
PYTHONPATH=build/python .venv/bin/python -m pytest tests/python
"""
import glob
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")
CLI_DATA = os.path.join(REPO, "tests", "data", "cli")
MODELS = ["mlp_tiny", "bert_tiny", "squeezenet1_1", "mobilenet_v3_small"]

try:
    import brrr  # noqa: F401
except ImportError as e:
    raise ImportError(f"cannot import brrr ({e}); build it (ninja -C build) and set "
                      "PYTHONPATH=build/python") from e


def load_pb(path):
    """A model-zoo input_N.pb / output_N.pb file as (name, numpy array)."""
    import onnx
    from onnx import numpy_helper

    t = onnx.load_tensor(path)
    return t.name, numpy_helper.to_array(t)


def example_data(model):
    """The example's test_data_set_0: ({input name: array}, [expected outputs])."""
    d = os.path.join(EXAMPLES, model, "test_data_set_0")
    inputs = dict(load_pb(p) for p in sorted(glob.glob(os.path.join(d, "input_*.pb"))))
    outputs = [load_pb(p)[1] for p in sorted(glob.glob(os.path.join(d, "output_*.pb")))]
    return inputs, outputs


def assert_close(got, exp, rtol=1e-4, atol=1e-6):
    """`brrr run --check`'s rule: |got - exp| <= atol * max|exp| + rtol * |exp|."""
    assert got.shape == exp.shape and got.dtype == exp.dtype
    scale = float(np.max(np.abs(exp))) if exp.size else 0.0
    err = np.abs(got.astype(np.float64) - exp.astype(np.float64))
    bound = atol * scale + rtol * np.abs(exp.astype(np.float64))
    worst = float(np.max(err - bound)) if exp.size else 0.0
    assert worst <= 0, f"max abs error {float(np.max(err)):.3g} exceeds the tolerance"


ADD_RELU = os.path.join(CLI_DATA, "add_relu.onnx")  # y = relu(x + b), x float32 [2, 3]


def add_relu_expected(x):
    b = np.array([[1, -2, 3], [-4, 5, -6]], np.float32) * 0.25
    return np.maximum(x + b, 0)

