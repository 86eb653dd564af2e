"""brrr: compile an ONNX model (or a PyTorch nn.Module) into a static plan and run it on the CPU
or an NVIDIA GPU; its doctor says where each microsecond goes.

    import brrr, numpy as np
    s = brrr.Session("examples/mlp_tiny/model.onnx")          # loads, plans, compiles once
    out = s.run({"input": np.zeros((4, 16), np.float32)})      # dict name -> numpy array
    report = brrr.doctor("examples/mlp_tiny/model.onnx")       # the `brrr doctor --json` keys

Errors brrr reports (a bad model file, an unsupported op, a wrong input) raise brrr.Error with
the one-line message the C++ library and the CLI print.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np



def _default_openmp_spin() -> None:
    # The CLI's rule (src/cli/main.cpp, default_openmp_wait_policy): unless the user chose
    # OMP_WAIT_POLICY or GOMP_SPINCOUNT, oneDNN's OpenMP threads spin 100000 pauses and then
    # sleep, instead of libgomp's 300000 (30-60 ms on a small VM, which under load takes the cores
    # the other threads need). libgomp reads the variable once, when it loads: here, with the
    # extension below, unless something in this process loaded it before (then it is left as is).
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    try:
        with open("/proc/self/maps") as maps:
            if any("/libgomp.so" in line for line in maps):
                return
    except OSError:
        return
    os.environ["GOMP_SPINCOUNT"] = "100000"


_default_openmp_spin()

from ._brrr import Error, InternalError, TensorInfo, _Session, _doctor_json  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Session", "TensorInfo", "Error", "InternalError", "doctor", "compile", "__version__"]

for _t in (Error, InternalError, TensorInfo):
    _t.__module__ = "brrr"

PathLike = Union[str, "os.PathLike[str]"]


def _random_array(info: TensorInfo, rng: np.random.Generator) -> np.ndarray:
    # The CLI's rule for inputs it makes up: floats uniform in [-1, 1), integers and bools 0 or 1
    # (so token ids and indices stay in range).
    if info.dtype in ("float32", "float64", "float16"):
        return rng.uniform(-1.0, 1.0, info.shape).astype(info.dtype)
    if info.dtype == "bfloat16":
        raise Error(f"input '{info.name}' is bfloat16, which numpy cannot make; give inputs=")
    return rng.integers(0, 2, info.shape).astype(info.dtype)


class Session(_Session):
    """A model compiled once into a static plan, then run many times.

    backend: "cpu" (the compiled plan, default), "cuda" (the compiled plan on GPU 0) or
    "reference" (brrr's naive per-op kernels, the oracle). precision: "fp32", or "tf32", "bf16",
    "fp16" for CUDA GEMMs. shapes: concrete shapes for inputs with symbolic dims, e.g.
    {"x": (8, 3, 224, 224)}. threads: CPU threads (0: BRRR_THREADS, else the CPUs this process
    may use). fusion / graphs: None keeps the default; False turns fusion / CUDA Graphs off.

    run(inputs) takes a dict input name -> array: numpy arrays or any host DLPack tensor (a CPU
    torch tensor), read in place when contiguous. It returns a dict output name -> numpy array
    (graph output order) that owns its buffer. It releases the GIL while the plan runs; one run
    at a time per session.

    run(inputs, outputs=None) with CUDA arrays (backend "cuda", DLPack tensors on cuda:0, e.g.
    CUDA torch tensors): the inputs are copied device to device into the plan's arena and the
    outputs out of it into `outputs` (a dict output name -> contiguous CUDA array, written in
    place and returned) or, when None and the inputs are torch tensors, into new torch tensors.
    No tensor data goes through the host (kernels the plan itself runs on the host, listed by
    plan_summary(), excepted); it is not zero-copy: each run adds those two device copies. It
    waits for all work queued on the GPU before it starts and has finished when it returns.
    """

    def __init__(
        self,
        path: PathLike,
        backend: str = "cpu",
        *,
        precision: str = "fp32",
        shapes: Optional[Mapping[str, Sequence[int]]] = None,
        threads: int = 0,
        fusion: Optional[bool] = None,
        graphs: Optional[bool] = None,
    ) -> None:
        shape_lists = {str(k): [int(d) for d in v] for k, v in (shapes or {}).items()}
        super().__init__(os.fspath(path), backend, precision, shape_lists, threads, fusion, graphs)

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Inputs of the right names, dtypes and shapes (what the CLI runs without --data)."""
        rng = np.random.default_rng(seed)
        return {i.name: _random_array(i, rng) for i in self.inputs}

    def profile(self, inputs: Optional[Mapping[str, Any]] = None, reps: int = 10) -> dict:
        """Per-kernel median times over `reps` runs after a warm-up (random inputs when none are
        given): the RunProfile JSON's keys (backend, wall_ms, threads, kernels)."""
        given = self.random_inputs() if inputs is None else inputs
        return json.loads(self._profile_json(dict(given), reps))

    def __repr__(self) -> str:
        return f"brrr.Session({self.path!r}, backend={self.backend!r})"


_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
                 "float64": "float64", "int64": "int64", "int32": "int32", "int8": "int8",
                 "uint8": "uint8", "bool": "bool"}


def _empty_device_outputs(outputs: Sequence[TensorInfo], inputs: Mapping[str, Any]) -> dict:
    """Session.run's CUDA outputs when the caller gave none: empty tensors of the inputs'
    framework on their device (torch only)."""
    first = next(iter(inputs.values()))
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(first, torch.Tensor):
        raise Error("CUDA inputs that are not torch tensors need outputs= (a dict output name -> "
                    "preallocated contiguous CUDA array)")
    return {o.name: torch.empty(o.shape, dtype=getattr(torch, _TORCH_DTYPES[o.dtype]),
                                device=first.device) for o in outputs}


def doctor(
    model: Union[PathLike, Session],
    *,
    backend: str = "cpu",
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    threads: int = 0,
    fusion: Optional[bool] = None,
    inputs: Optional[Mapping[str, Any]] = None,
    reps: int = 5,
    top: int = 10,
    html: Optional[PathLike] = None,
    refresh_ceilings: bool = False,
) -> dict:
    """What `brrr doctor MODEL --json` reports, as a dict with the same keys: the model profiled
    on `inputs` (random ones when None), judged against this machine's measured ceilings (probed
    once, ~20 s, then cached; `refresh_ceilings` probes again). `model` is a path or a Session
    (then backend, shapes, threads and fusion come from it). `html` also writes the HTML page.
    """
    if isinstance(model, _Session):
        session = model
    else:
        session = Session(model, backend, shapes=shapes, threads=threads, fusion=fusion)
    given = session.random_inputs() if inputs is None else dict(inputs)
    text = _doctor_json(session, given, reps, top, refresh_ceilings, os.fspath(html) if html else "")
    return json.loads(text)


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "brrr.compile needs PyTorch (pip install torch); brrr itself does not") from e
    return torch


class CompiledModule:
    """An nn.Module exported to ONNX and compiled by brrr: call it with torch tensors of the
    example inputs' shapes and dtypes; it returns a tensor (one output) or a tuple of tensors.
    With backend "cuda", CUDA tensors go in and come out through DLPack with no copy through the
    host (see Session.run); other tensors go through numpy without a copy on the host, and on
    the CPU backends CUDA tensors are copied to the host and the outputs back to their device."""

    def __init__(self, session: Session, torch: Any) -> None:
        self.session = session
        self._torch = torch
        self._names = [i.name for i in session.inputs]

    def __call__(self, *args: Any) -> Any:
        torch = self._torch
        if len(args) != len(self._names):
            raise TypeError(f"the compiled module takes {len(self._names)} input(s), "
                            f"got {len(args)}")
        for name, x in zip(self._names, args):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input '{name}': expected a torch.Tensor, got {type(x).__name__}")
        device = args[0].device if args else torch.device("cpu")
        if self.session.backend == "cuda" and device.type == "cuda":
            outs = list(self.session.run(
                {n: x.detach() for n, x in zip(self._names, args)}).values())
        else:
            host = self.session.run({n: x.detach().cpu() for n, x in zip(self._names, args)})
            outs = [torch.from_numpy(a).to(device) for a in host.values()]
        return outs[0] if len(outs) == 1 else tuple(outs)


def compile(
    module: Any,
    example_inputs: Any,
    *,
    backend: str = "cpu",
    precision: str = "fp32",
    threads: int = 0,
    opset: int = 17,
) -> CompiledModule:
    """Exports `module` (a torch.nn.Module) with torch.onnx.export on `example_inputs` (a tensor
    or a tuple of them) into a temporary folder, compiles it into a brrr Session and returns a
    callable taking and returning torch tensors: brrr.compile(model, x)(x) is model(x).
    Shapes are fixed to the example inputs'."""
    torch = _import_torch()
    examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (
        example_inputs,)
    names = [f"input_{i}" for i in range(len(examples))]
    with tempfile.TemporaryDirectory(prefix="brrr-compile-") as folder:
        path = os.path.join(folder, "model.onnx")
        kwargs = dict(input_names=names, opset_version=opset)
        with torch.no_grad():
            try:  # the TorchScript exporter: no onnxscript needed (torch >= 2.5 takes dynamo=)
                torch.onnx.export(module, examples, path, dynamo=False, **kwargs)
            except TypeError:
                torch.onnx.export(module, examples, path, **kwargs)
        session = Session(path, backend, precision=precision, threads=threads)
    return CompiledModule(session, torch)
