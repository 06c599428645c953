"""A fluent lowering/running helper for the runtime tests (in the spirit of XNNPACK's ``Tester``).

    Tester(model, (x,)).lower(min_block_size=1).run_runner().run_executorch().check_parity()

``lower`` calls :func:`et_tensorrt.lower` once; ``run_runner`` runs the ``.pte`` through
:class:`et_tensorrt.Runner` (our C++ Module/Method runner, descriptors with real devices);
``run_executorch`` runs the same bytes through ExecuTorch's own Python runtime
(``executorch.runtime.Runtime``); ``check_parity`` compares both against eager PyTorch.

Also: ``delegate_blobs(pte)`` (et_tensorrt.inspection's finder) gives the delegate blobs of a ``.pte``, so
plan tests use the very blob the runtime parses, and ``corrupt_delegate_magic`` damages one in place.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Optional, Sequence

import torch

import et_tensorrt
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.parity import EXACT, SAME_MATH, Tolerances, compare

DYNAMIC_BATCH = (2, 16)  # conftest's dynamic model: the batch range it is exported (and profiled) for


def corrupt_delegate_magic(pte: bytes, which: int = 0) -> bytes:
    """The same program with the magic of its ``which``-th delegate blob overwritten (``ETRT`` -> ``XTRT``)."""
    blobs = delegate_blobs(pte)
    assert blobs, "no delegate blob inside this program"
    at = pte.index(blobs[which])
    data = bytearray(pte)
    data[at] = ord("X")
    return bytes(data)


def run_executorch(pte: bytes, inputs: Sequence[torch.Tensor], method: str = "forward") -> list[torch.Tensor]:
    """ExecuTorch's own Python runtime, unchanged: Runtime.get().load_program(pte).load_method(...)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return list(program.load_method(method).execute(list(inputs)))


def eager(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


class Tester:
    __test__ = False  # not a pytest test class

    def __init__(self, model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], *, dynamic_shapes=None):
        self.model = model.eval()
        self.example_inputs = tuple(example_inputs)
        self.dynamic_shapes = dynamic_shapes
        self.pte: Optional[bytes] = None
        self.report = None
        self.lower_seconds = 0.0
        self.runner: Optional[et_tensorrt.Runner] = None
        self.runner_outputs: list[torch.Tensor] = []
        self.executorch_outputs: list[torch.Tensor] = []
        self.last_inputs: tuple = ()

    # -- stages ------------------------------------------------------------------------------------

    def lower(self, **options: Any) -> "Tester":
        # Export a deep copy: torch.export may leave the module in a state eager runs should not see.
        t0 = time.perf_counter()
        self.pte = et_tensorrt.lower(
            copy.deepcopy(self.model), self.example_inputs, dynamic_shapes=self.dynamic_shapes, **options
        )
        self.lower_seconds = time.perf_counter() - t0
        self.report = et_tensorrt.lower.last_report
        self.runner = et_tensorrt.Runner(self.pte)
        return self

    def _inputs(self, inputs) -> tuple:
        if inputs is None:
            return self.example_inputs
        return (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)

    def run_runner(self, inputs: Optional[Sequence[torch.Tensor]] = None, **kwargs) -> "Tester":
        self.last_inputs = self._inputs(inputs)
        self.runner_outputs = self.runner.run(list(self.last_inputs), **kwargs)
        return self

    def run_executorch(self, inputs: Optional[Sequence[torch.Tensor]] = None) -> "Tester":
        self.last_inputs = self._inputs(inputs)
        self.executorch_outputs = run_executorch(self.pte, self.last_inputs)
        return self

    def run_both(self, inputs: Optional[Sequence[torch.Tensor]] = None) -> "Tester":
        return self.run_runner(inputs).run_executorch(inputs)

    # -- checks ------------------------------------------------------------------------------------

    def expected(self, inputs: Optional[Sequence[torch.Tensor]] = None) -> list[torch.Tensor]:
        return eager(self.model, self.last_inputs if inputs is None else self._inputs(inputs))

    def check_parity(self, *, exact: bool = False, tolerances: Tolerances = SAME_MATH) -> "Tester":
        """Both entry points against eager PyTorch, on the inputs of the last run.

        ``tolerances``: ``parity.SAME_MATH`` by default (the PyTorch fallback runs the decomposed edge graph,
        eager the module: last-bit differences); ``exact``: bitwise equal — only where observed to hold.
        """
        expected = self.expected()
        assert self.runner_outputs, "run_runner() first"
        assert self.executorch_outputs, "run_executorch() first"
        for name, got in (("Runner", self.runner_outputs), ("executorch.runtime", self.executorch_outputs)):
            result = compare(expected, got, EXACT if exact else tolerances)
            assert result.passed, f"{name} vs eager ({result.tolerances}): " + "; ".join(result.failures())
        # The two entry points run the same delegate on the same inputs: they must agree bit for bit.
        for i, (a, b) in enumerate(zip(self.runner_outputs, self.executorch_outputs)):
            assert torch.equal(a, b), f"output {i}: Runner and executorch.runtime disagree"
        return self

    def max_abs_error(self) -> float:
        err = 0.0
        for g, e in zip(self.runner_outputs, self.expected()):
            if g.is_floating_point():
                err = max(err, (g - e).abs().max().item())
            else:
                err = max(err, float((g != e).sum().item()))
        return err


# -- models shared by several test files (lowered once per session in conftest.py) ----------------


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, stride=2)

    def forward(self, x):
        return self.conv2(torch.relu(self.bn(self.conv1(x))))


class DynamicHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 0.5
