"""Type stubs of brrr's C++ core (python/src); use the brrr package, not this module."""
from typing import Any, Mapping, Optional, Sequence

import numpy as np

class Error(Exception):
    """A user or model error (brrr::Error): the one-line message the C++ library and CLI print."""

class InternalError(Error):
    """A C++ exception other than brrr::Error escaped brrr: a bug in brrr."""

class TensorInfo:
    """A model input or output as the session was prepared for it."""
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str:
        """numpy's dtype name: "float32", "float16", "bfloat16", "float64", "int64", "int32",
        "int8", "uint8" or "bool"."""
    @property
    def shape(self) -> tuple[int, ...]: ...

class _Session:
    def __init__(
        self,
        path: str,
        backend: str = "cpu",
        precision: str = "fp32",
        shapes: Mapping[str, Sequence[int]] = ...,
        threads: int = 0,
        fusion: Optional[bool] = None,
        graphs: Optional[bool] = None,
    ) -> None: ...
    def run(
        self, inputs: Mapping[str, Any], outputs: Optional[Mapping[str, Any]] = None
    ) -> dict[str, Any]:
        """Host arrays in: dict name -> np.ndarray out. CUDA arrays in (backend "cuda"): the
        CUDA output arrays (given in `outputs`, or new torch tensors) out."""
    def _profile_json(self, inputs: Mapping[str, Any], reps: int) -> str: ...
    @property
    def inputs(self) -> list[TensorInfo]: ...
    @property
    def outputs(self) -> list[TensorInfo]: ...
    @property
    def backend(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def path(self) -> str: ...
    def plan_summary(self) -> str: ...

def _doctor_json(
    session: _Session, inputs: Mapping[str, np.ndarray], reps: int, top: int, refresh: bool,
    html: str
) -> str: ...
