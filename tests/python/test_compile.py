"""brrr.compile on a torch nn.Module (when torch is installed; setup.sh does not install it), and
its error without torch."""
import sys

import pytest

import brrr


def test_compile_without_torch_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match="brrr.compile needs PyTorch"):
        brrr.compile(object(), ())


def small_module(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                               torch.nn.Softmax(dim=-1))


def test_compile_matches_eager():
    torch = pytest.importorskip("torch", reason="torch is not installed: brrr.compile not tested")
    m = small_module(torch)
    x = torch.randn(3, 8)
    fast = brrr.compile(m, (x,))
    y = fast(x)
    assert isinstance(y, torch.Tensor) and y.shape == (3, 4)
    torch.testing.assert_close(y, m(x).detach(), rtol=1e-4, atol=1e-6)
    x2 = torch.randn(3, 8)
    torch.testing.assert_close(fast(x2), m(x2).detach(), rtol=1e-4, atol=1e-6)
    with pytest.raises(TypeError, match="takes 1 input"):
        fast(x, x)
    with pytest.raises(brrr.Error, match="has shape"):
        fast(torch.randn(5, 8))


def test_compile_two_inputs_two_outputs():
    torch = pytest.importorskip("torch", reason="torch is not installed: brrr.compile not tested")

    class AddMul(torch.nn.Module):
        def forward(self, a, b):
            return a + b, a * b

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    s, p = brrr.compile(AddMul(), (a, b))(a, b)
    torch.testing.assert_close(s, a + b)
    torch.testing.assert_close(p, a * b)
