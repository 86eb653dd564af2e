"""brrr.Session: the examples against their reference outputs, the inputs/outputs description,
options, and arrays in and out."""
import sys
import threading
import time

import numpy as np
import pytest

import brrr
from util import ADD_RELU, CLI_DATA, EXAMPLES, MODELS, add_relu_expected, assert_close, example_data


@pytest.mark.parametrize("model", MODELS)
def test_example_matches_reference_outputs(model):
    inputs, expected = example_data(model)
    s = brrr.Session(f"{EXAMPLES}/{model}/model.onnx")
    out = s.run(inputs)
    assert list(out) == [o.name for o in s.outputs]
    for got, exp in zip(out.values(), expected):
        assert isinstance(got, np.ndarray)
        assert_close(got, exp)


def test_reference_backend_matches_reference_outputs():
    inputs, expected = example_data("mlp_tiny")
    s = brrr.Session(f"{EXAMPLES}/mlp_tiny/model.onnx", backend="reference")
    assert s.backend == "reference" and s.threads == 0
    assert_close(s.run(inputs)["output"], expected[0])


def test_inputs_and_outputs_describe_the_model():
    s = brrr.Session(f"{EXAMPLES}/bert_tiny/model.onnx")
    assert [(i.name, i.dtype, i.shape) for i in s.inputs] == [("input_ids", "int64", (2, 16))]
    assert [(o.name, o.dtype, o.shape) for o in s.outputs] == [("output", "float32", (2, 16, 128))]
    assert repr(s.inputs[0]) == "TensorInfo(name='input_ids', dtype='int64', shape=(2, 16))"


def test_cpu_session_reports_its_threads():
    s = brrr.Session(ADD_RELU, threads=1)
    assert s.threads == 1
    assert "plan:" in s.plan_summary()


def test_symbolic_dims_need_shapes():
    path = f"{CLI_DATA}/symbolic_batch.onnx"  # y = relu(x), x [batch, 3]
    with pytest.raises(brrr.Error, match="input 'x' has a symbolic dim 'batch'"):
        brrr.Session(path)
    s = brrr.Session(path, shapes={"x": (5, 3)})
    assert s.inputs[0].shape == (5, 3)
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(x, 0))


def test_outputs_own_their_buffers():
    s = brrr.Session(ADD_RELU)
    x1 = np.ones((2, 3), np.float32)
    y1 = s.run({"x": x1})["y"]
    y2 = s.run({"x": -x1})["y"]  # must not write into y1
    np.testing.assert_array_equal(y1, add_relu_expected(x1))
    np.testing.assert_array_equal(y2, add_relu_expected(-x1))
    assert y1.flags.owndata is False and y1.base is not None  # a view of brrr's buffer, no copy


def test_non_contiguous_and_read_only_inputs():
    s = brrr.Session(ADD_RELU)
    x = np.arange(6, dtype=np.float32).reshape(3, 2).T  # a transposed view
    np.testing.assert_array_equal(s.run({"x": x})["y"], add_relu_expected(x))
    ro = np.ascontiguousarray(x)
    ro.setflags(write=False)
    np.testing.assert_array_equal(s.run({"x": ro})["y"], add_relu_expected(ro))


class DLPackOnly:
    """A producer that offers only the DLPack protocol (no buffer protocol, not numpy)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_tensor_in():
    s = brrr.Session(ADD_RELU)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run({"x": DLPackOnly(x)})["y"], add_relu_expected(x))


def test_one_run_at_a_time_from_many_threads():
    s = brrr.Session(f"{EXAMPLES}/mlp_tiny/model.onnx")
    inputs, expected = example_data("mlp_tiny")
    errors = []

    def loop():
        try:
            for _ in range(25):
                assert_close(s.run(inputs)["output"], expected[0])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_profile_has_the_run_profile_keys():
    s = brrr.Session(f"{EXAMPLES}/mlp_tiny/model.onnx")
    p = s.profile(reps=2)
    assert p["backend"] == "cpu" and p["wall_ms"] > 0
    assert p["kernels"] and {"name", "kind", "ops", "time_ms"} <= set(p["kernels"][0])
    inputs, _ = example_data("mlp_tiny")
    assert s.profile(inputs, reps=1)["kernels"]


def test_random_inputs_fit_the_model():
    s = brrr.Session(f"{EXAMPLES}/bert_tiny/model.onnx")
    r = s.random_inputs()
    assert r["input_ids"].dtype == np.int64 and r["input_ids"].shape == (2, 16)
    assert s.run(r)["output"].shape == (2, 16, 128)


def test_run_releases_the_gil():
    # With a long switch interval the interpreter never takes the GIL from the thread holding
    # it: the spinning thread advances during run() only if run() lets go of the GIL.
    s = brrr.Session(f"{EXAMPLES}/squeezenet1_1/model.onnx", "reference")  # ~0.5 s per run
    x = s.random_inputs()
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # lets the main thread take the GIL back when run() returns

    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = count[0]
        s.run(x)
        during = count[0] - before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert during > 100, f"the other thread ran {during} times during run()"


@pytest.mark.parametrize("model", MODELS)
def test_bf16_cpu_session_within_bf16_tolerance(model):
    """precision='bf16' on the CPU (avx512_bf16 / AMX): the examples within bf16's default
    relative L2 bound of their float32 outputs (stored in bf16, or, with pools, float32 storage
    and bf16 GEMM/conv operands); elsewhere the one-line refusal names the feature."""
    inputs, expected = example_data(model)
    try:
        s = brrr.Session(f"{EXAMPLES}/{model}/model.onnx", precision="bf16")
    except brrr.Error as e:
        assert "avx512_bf16 or amx_bf16" in str(e) or "oneDNN" in str(e), str(e)
        pytest.skip(str(e))
    summary = s.plan_summary()
    assert "read bf16 operands" in summary or "stored in 16 bits" in summary, summary
    for got, exp in zip(s.run(inputs).values(), expected):
        exp = np.asarray(exp, dtype=np.float32)
        rel = np.linalg.norm(got.astype(np.float32) - exp) / np.linalg.norm(exp)
        assert rel <= 5e-2, rel


def _spincount_at_import(env):
    # libgomp prints its settings at load under OMP_DISPLAY_ENV=verbose (to stderr).
    import os
    import subprocess

    full = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    full.update(env, OMP_DISPLAY_ENV="verbose")
    r = subprocess.run([sys.executable, "-c", "import brrr"], env=full, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    at = r.stderr.rfind("GOMP_SPINCOUNT = '")
    return None if at < 0 else r.stderr[at + 18:r.stderr.index("'", at + 18)]


def test_import_sets_the_clis_openmp_spin_unless_the_user_chose():
    got = _spincount_at_import({})
    if got is None:
        pytest.skip("brrr's oneDNN does not use libgomp here (no OMP_DISPLAY_ENV output)")
    assert got == "100000"
    assert _spincount_at_import({"GOMP_SPINCOUNT": "1234"}) == "1234"
    assert _spincount_at_import({"OMP_WAIT_POLICY": "active"}) != "100000"
