"""`Runner`: runs a `.pte` through ExecuTorch's C++ Module/Method with our descriptors.

Inputs are described with their real devices (errors name the input, the method and the device).
Callers may pass preallocated ``outputs`` (e.g. CUDA tensors): outputs the program left unplanned are
written in place (``Method::set_output_data_ptr``), others are copied into them.

Programs are loaded with ExecuTorch's ``InternalConsistency`` verification (its flatbuffer verifier and
semantic checks), as ExecuTorch's own Python runtime does: a corrupt ``.pte`` is a RunnerError, not a
crash. ``verify=False`` skips it for files you trust (docs/security.md has its measured cost).
"""

from __future__ import annotations

import os
import threading
from typing import Optional, Sequence

import torch

from .. import _C
from ..errors import RunnerError

_kernels_loaded = False
_kernels_lock = threading.Lock()


def load_kernels() -> None:
    """Register ExecuTorch's CPU kernels (for the ops our delegate does not take) into libexecutorch.so.

    They are registered by the kernel libraries ExecuTorch's own Python binding loads.
    """
    global _kernels_loaded
    with _kernels_lock:
        if not _kernels_loaded:
            import executorch.extension.pybindings.portable_lib  # noqa: F401

            _kernels_loaded = True


class Runner:
    def __init__(self, program: str | os.PathLike | bytes | bytearray | memoryview, *, verify: bool = True):
        load_kernels()
        if isinstance(program, (bytes, bytearray, memoryview)):
            self._native = _C.ProgramRunner.from_bytes(bytes(program), verify)
        else:
            path = os.fspath(program)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"no program at {path!r}")
            self._native = _C.ProgramRunner.from_file(path, verify)
        self.last_plan: Optional[_C.PlacementPlan] = None
        # One call at a time per Runner: ExecuTorch's Method holds its inputs and outputs as state, so
        # two threads sharing a Runner would read each other's results. Separate Runners run in parallel.
        self._lock = threading.Lock()
        self.outputs_written_in_place: list[bool] = []

    @property
    def method_names(self) -> list[str]:
        return sorted(self._require().method_names())

    def run(
        self,
        inputs: Sequence[torch.Tensor],
        method: str = "forward",
        outputs: Optional[Sequence[torch.Tensor]] = None,
    ) -> list[torch.Tensor]:
        native = self._require()
        if isinstance(inputs, torch.Tensor):
            inputs = [inputs]
        with self._lock:
            before = _C.last_plan()
            try:
                results, in_place = native.run(list(inputs), method, None if outputs is None else list(outputs))
            finally:
                plan = _C.last_plan()
                # The plan of this call's (last) delegate; None when the method ran no delegate.
                self.last_plan = plan if plan is not None and plan is not before else self.last_plan
            self.outputs_written_in_place = list(in_place)
        return list(results)

    def close(self) -> None:
        self._native = None

    def _require(self):
        if self._native is None:
            raise RunnerError("this Runner was closed; create a new one")
        return self._native

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
