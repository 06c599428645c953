"""Comparing outputs with a reference (eager PyTorch): one tolerance table, one comparator.

Used by the command line (``check``, ``demo``), by ``backend/validation.py`` (ONNX on onnxruntime against
PyTorch), by the tests and by conformance. An element matches when
``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``); NaN matches NaN, an infinity
matches the same infinity, and integer and bool outputs must be equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import OptionError

if TYPE_CHECKING:  # torch is imported where tensors are compared: the command line reads TOLERANCES without it
    import torch


@dataclass(frozen=True)
class Tolerances:
    rtol: float
    atol: float

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise OptionError(f"{name} must be a finite number >= 0, got {value!r}")

    def __str__(self) -> str:
        return f"rtol {self.rtol:g}, atol {self.atol:g}"


# A lowered program (an engine, or the ONNX it is built from) against eager PyTorch, by build precision.
# fp32 leaves room for TF32, which TensorRT may use for fp32 matmuls and convolutions on a GPU.
TOLERANCES: dict[str, Tolerances] = {
    "fp32": Tolerances(rtol=1e-3, atol=1e-3),
    "fp16": Tolerances(rtol=2e-2, atol=2e-2),
    "bf16": Tolerances(rtol=5e-2, atol=5e-2),
}
# PyTorch running a partition's decomposed program (addmm + permute_copy, ...) against the eager module
# (aten.linear, ...): only last-bit differences, so tight enough to catch any real numerical change.
SAME_MATH = Tolerances(rtol=1e-5, atol=1e-6)
# ExecuTorch's backend test suite compares with these (executorch/backends/test/suite/runner.py); we use the
# suite's own numbers so our results read side by side with XNNPACK's.
SUITE = Tolerances(rtol=4e-2, atol=1e-1)
EXACT = Tolerances(rtol=0.0, atol=0.0)
# torch.testing.assert_close's float32 defaults, for tests that compared with it before the one table.
ASSERT_CLOSE_FP32 = Tolerances(rtol=1.3e-6, atol=1e-5)


# Quantized programs: a value quantized by two runtimes whose float arithmetic differs in the last bit may round
# to neighbouring steps (an int8 step is 1/127 of the range, an FP8 E4M3 step up to 1/14 of the value), so
# outputs are compared within this share of their largest magnitude (docs/quantization.md).
QUANTIZED_SHARE = 0.02


def error_share(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference of ``got`` from ``want`` as a share of ``want``'s largest magnitude (what
    ``QUANTIZED_SHARE`` bounds)."""
    return float((got - want).abs().max()) / max(float(want.abs().max()), 1e-12)


def for_quantized(precision: str, expected) -> Tolerances:
    """``for_precision``'s tolerances, with an absolute tolerance of ``QUANTIZED_SHARE`` of the largest
    magnitude among the ``expected`` outputs."""
    import torch

    base = for_precision(precision)
    tensors = [e for e in expected if isinstance(e, torch.Tensor) and e.is_floating_point() and e.numel()]
    absmax = max((float(e.abs().max()) for e in tensors), default=0.0)
    return Tolerances(rtol=base.rtol, atol=max(base.atol, QUANTIZED_SHARE * absmax))


def for_precision(precision: str) -> Tolerances:
    try:
        return TOLERANCES[precision]
    except KeyError:
        raise OptionError(f"no tolerances for precision {precision!r}; known: {', '.join(TOLERANCES)}") from None


@dataclass(frozen=True)
class OutputComparison:
    """One output: the largest errors, and what differs ("" when it matches)."""

    index: int
    shape: tuple[int, ...] | None
    max_abs_error: float | None  # None when the values could not be compared (shape or dtype differ)
    max_rel_error: float | None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else f"MISMATCH ({self.problem})"


@dataclass(frozen=True)
class Comparison:
    tolerances: Tolerances
    outputs: tuple[OutputComparison, ...]
    problem: str = ""  # set when the outputs cannot be paired at all (their counts differ)

    @property
    def passed(self) -> bool:
        return not self.problem and all(o.ok for o in self.outputs)

    @property
    def max_abs_error(self) -> float | None:
        return _largest(o.max_abs_error for o in self.outputs)

    @property
    def max_rel_error(self) -> float | None:
        return _largest(o.max_rel_error for o in self.outputs)

    def failures(self) -> list[str]:
        """One line per problem: ``output 1: values differ (max abs error 5.0e-01)``."""
        if self.problem:
            return [self.problem]
        return [f"output {o.index}: {o.problem}" for o in self.outputs if not o.ok]

    def rows(self) -> list[tuple[str, ...]]:
        """Text-table rows (with their header) for :func:`et_tensorrt._text.table`."""
        rows = [("output", "shape", "max abs err", "max rel err", "result")]
        if self.problem:
            return rows + [("-", "-", "-", "-", f"MISMATCH ({self.problem})")]
        for o in self.outputs:
            rows.append(
                (
                    str(o.index),
                    "-" if o.shape is None else str(o.shape),
                    error_text(o.max_abs_error),
                    error_text(o.max_rel_error),
                    o.verdict,
                )
            )
        return rows


def compare(expected: Sequence, actual: Sequence, tolerances: Tolerances) -> Comparison:
    """``actual`` against ``expected``, output by output (tensors are compared on the host)."""
    if len(expected) != len(actual):
        return Comparison(tolerances, (), f"{len(actual)} output(s), the reference has {len(expected)}")
    return Comparison(
        tolerances,
        tuple(_compare_one(i, e, a, tolerances) for i, (e, a) in enumerate(zip(expected, actual, strict=True))),
    )


def _compare_one(index: int, e, a, tol: Tolerances) -> OutputComparison:
    import torch

    if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
        same = type(e) is type(a) and e == a
        return OutputComparison(index, None, None, None, "" if same else f"{a!r} vs reference {e!r}")
    a, e = a.detach().to("cpu"), e.detach().to("cpu")
    shape = tuple(e.shape)
    if tuple(a.shape) != shape or a.dtype != e.dtype:
        return OutputComparison(
            index, shape, None, None, f"{_dtype(a)}{tuple(a.shape)} vs reference {_dtype(e)}{shape}"
        )
    if e.numel() == 0:
        return OutputComparison(index, shape, 0.0, 0.0)
    wide = torch.complex128 if e.is_complex() else torch.float64
    ad, ed = a.to(wide), e.to(wide)
    nan_a, nan_e = ad.isnan(), ed.isnan()
    # Equal values (an infinity included) differ by 0; a NaN on one side only differs by infinity.
    diff = torch.where(ad == ed, torch.zeros_like(ad.real if e.is_complex() else ad), (ad - ed).abs())
    diff = torch.where(nan_a & nan_e, torch.zeros_like(diff), diff.nan_to_num(math.inf, math.inf))
    scale = ed.abs().nan_to_num(0.0, 0.0)  # an infinite reference allows no slack: only itself matches
    max_abs = diff.max().item()
    max_rel = (diff / scale.clamp_min(1e-12)).nan_to_num(math.inf).max().item()
    if bool((nan_a != nan_e).any()):
        problem = "NaN where the reference has a number, or the reverse"
    elif not (e.is_floating_point() or e.is_complex()):
        problem = "" if torch.equal(a, e) else "values differ (integer outputs must be equal)"
    elif not bool((diff <= tol.atol + tol.rtol * scale).all()):
        problem = "values differ beyond the tolerance"
    else:
        problem = ""
    return OutputComparison(index, shape, max_abs, max_rel, problem)


def _largest(values) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def error_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")
