"""brrr's errors as Python exceptions: brrr.Error with the C++ library's one-line message, for
bad models, bad options and bad inputs."""
import numpy as np
import pytest

import brrr
from util import ADD_RELU, CLI_DATA


def one_line_error(call, *fragments):
    """Runs call, expects brrr.Error whose message is one line holding every fragment."""
    with pytest.raises(brrr.Error) as e:
        call()
    msg = str(e.value)
    assert msg and "\n" not in msg, repr(msg)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


def test_error_family():
    assert issubclass(brrr.Error, Exception)
    assert issubclass(brrr.InternalError, brrr.Error)
    assert brrr.Error.__module__ == "brrr"


def test_missing_file(tmp_path):
    path = str(tmp_path / "no_such_model.onnx")
    one_line_error(lambda: brrr.Session(path), path)


def test_malformed_models(tmp_path):
    good = open(ADD_RELU, "rb").read()
    rng = np.random.default_rng(1234)
    for i, data in enumerate([b"", good[: len(good) // 2], rng.bytes(300)]):
        p = tmp_path / f"bad_{i}.onnx"
        p.write_bytes(data)
        one_line_error(lambda: brrr.Session(p), str(p))


def test_unsupported_op():
    one_line_error(lambda: brrr.Session(f"{CLI_DATA}/unsupported_op.onnx"),
                   "unsupported op 'com.example.FancyOp'")


def test_bad_options():
    one_line_error(lambda: brrr.Session(ADD_RELU, "tpu"), "unknown backend 'tpu'")
    one_line_error(lambda: brrr.Session(ADD_RELU, precision="fp8"), "unknown precision 'fp8'")
    one_line_error(lambda: brrr.Session(ADD_RELU, precision="fp16"),
                   "precision='fp16' on backend='cpu': the CPU has no fp16 path")
    one_line_error(lambda: brrr.Session(ADD_RELU, "reference", precision="bf16"),
                   "backend='reference' computes in float32 only")
    one_line_error(lambda: brrr.Session(ADD_RELU, "reference", threads=2),
                   "backend='reference' does not use it")
    one_line_error(lambda: brrr.Session(ADD_RELU, shapes={"nope": (1,)}),
                   "'nope', which is not an input of the model")
    one_line_error(lambda: brrr.Session(ADD_RELU, shapes={"x": (3, 3)}), "fixed to 2")


@pytest.fixture(scope="module")
def session():
    return brrr.Session(ADD_RELU)


def test_wrong_dtype(session):
    one_line_error(lambda: session.run({"x": np.zeros((2, 3), np.float64)}),
                   "input 'x' is float64 but the model expects float32")


def test_wrong_shape(session):
    one_line_error(lambda: session.run({"x": np.zeros((3, 2), np.float32)}),
                   "input 'x' has shape [3, 2] but the model was prepared for [2, 3]")


def test_missing_name(session):
    one_line_error(lambda: session.run({}), "no data given for model input 'x'")


def test_extra_name(session):
    x = np.zeros((2, 3), np.float32)
    one_line_error(lambda: session.run({"x": x, "z": x}),
                   "'z' is not an input of the model (its inputs: x)")


def test_not_an_array(session):
    one_line_error(lambda: session.run({"x": [[0.0] * 3] * 2}),
                   "input 'x': expected a numpy array or a DLPack tensor, got list")
    one_line_error(lambda: session.run([np.zeros((2, 3), np.float32)]),
                   "expected a dict of input name -> array, got list")
    one_line_error(lambda: session.run({1: np.zeros((2, 3), np.float32)}),
                   "keys are input names (str), got int")


def test_unsupported_dtype(session):
    one_line_error(lambda: session.run({"x": np.zeros((2, 3), np.complex64)}),
                   "input 'x' has a dtype brrr does not take")


def test_session_still_runs_after_errors(session):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(brrr.Error):
        session.run({"x": x.astype(np.float64)})
    assert session.run({"x": x})["y"].shape == (2, 3)
