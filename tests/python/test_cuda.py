"""CUDA torch tensors through brrr.Session.run and brrr.compile on the GPU: in and out through
DLPack, results equal to the examples' reference outputs (`brrr run --check`'s rule), and no
copy through the host (the output is the caller's own device buffer, and the CUDA activity
during a run has no host-device memcpy). Skips without torch, a GPU, or a CUDA build of brrr."""
import numpy as np
import pytest

import brrr
from util import ADD_RELU, EXAMPLES, MODELS, assert_close, example_data


def cuda_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed: CUDA tensors not tested")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch: CUDA tensors not tested")
    try:
        brrr.Session(ADD_RELU, "cuda")
    except brrr.Error as e:
        pytest.skip(f"brrr has no CUDA backend here: {e}")
    return torch


@pytest.mark.parametrize("model", MODELS)
def test_cuda_tensors_match_reference_outputs(model):
    torch = cuda_torch()
    inputs, expected = example_data(model)
    s = brrr.Session(f"{EXAMPLES}/{model}/model.onnx", "cuda")
    out = s.run({k: torch.from_numpy(v).cuda() for k, v in inputs.items()})
    for got, exp in zip(out.values(), expected):
        assert isinstance(got, torch.Tensor) and got.is_cuda
        assert_close(got.cpu().numpy(), exp)


def test_outputs_are_written_into_the_callers_buffer():
    torch = cuda_torch()
    inputs, expected = example_data("mlp_tiny")
    s = brrr.Session(f"{EXAMPLES}/mlp_tiny/model.onnx", "cuda")
    x = torch.from_numpy(inputs["input"]).cuda()
    y = torch.empty(tuple(s.outputs[0].shape), device="cuda")
    ptr = y.data_ptr()
    out = s.run({"input": x}, outputs={"output": y})
    assert out["output"] is y and y.data_ptr() == ptr
    assert_close(y.cpu().numpy(), expected[0])


def test_no_host_device_copy_during_a_run():
    torch = cuda_torch()
    from torch.profiler import ProfilerActivity, profile

    inputs, _ = example_data("mlp_tiny")
    s = brrr.Session(f"{EXAMPLES}/mlp_tiny/model.onnx", "cuda")
    x = torch.from_numpy(inputs["input"]).cuda()
    y = torch.empty(tuple(s.outputs[0].shape), device="cuda")
    s.run({"input": x}, outputs={"output": y})  # warm-up
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            s.run({"input": x}, outputs={"output": y})
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert any("DtoD" in n for n in names), names  # the profiler saw brrr's copies
    host_copies = [n for n in names if "HtoD" in n or "DtoH" in n]
    assert host_copies == [], host_copies


def test_device_errors():
    torch = cuda_torch()
    s = brrr.Session(ADD_RELU, "cuda")
    x = torch.zeros(2, 3, device="cuda")
    with pytest.raises(brrr.Error, match="model expects float32"):
        s.run({"x": x.double()})
    with pytest.raises(brrr.Error, match="every input must be a CUDA array"):
        s.run({"x": np.zeros((2, 3), np.float32)}, outputs={"y": torch.empty(2, 3, device="cuda")})
    with pytest.raises(brrr.Error, match="must be a writable contiguous array in CUDA memory"):
        s.run({"x": x}, outputs={"y": np.zeros((2, 3), np.float32)})
    with pytest.raises(brrr.Error, match="backend='cpu' takes host arrays"):
        brrr.Session(ADD_RELU).run({"x": x})


def test_compile_keeps_cuda_tensors_on_the_device():
    torch = cuda_torch()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).cuda()
    x = torch.randn(3, 8, device="cuda")
    y = brrr.compile(m, (x,), backend="cuda")(x)
    assert y.is_cuda
    torch.testing.assert_close(y, m(x).detach(), rtol=1e-4, atol=1e-5)
