"""et_tensorrt.parity: one tolerance table and one comparator for every place that compares with eager."""

from __future__ import annotations

import math

import pytest
import torch

from et_tensorrt.errors import OptionError
from et_tensorrt.parity import EXACT, TOLERANCES, Tolerances, compare, for_precision

FP32 = TOLERANCES["fp32"]


def test_table_is_named_rtol_atol():
    assert for_precision("fp16") == Tolerances(rtol=2e-2, atol=2e-2)
    assert FP32.rtol == 1e-3 and FP32.atol == 1e-3
    with pytest.raises(OptionError):
        for_precision("fp8")
    with pytest.raises(OptionError, match="atol must be a finite number >= 0"):
        Tolerances(rtol=0.1, atol=-1)


def test_matches_and_mismatches():
    a = torch.tensor([1.0, 2.0, float("nan"), float("inf")])
    assert compare([a], [a.clone()], EXACT).passed  # NaN matches NaN, inf matches inf
    result = compare([a], [a + torch.tensor([0.0, 0.01, 0.0, 0.0])], FP32)
    assert not result.passed and result.outputs[0].max_abs_error == pytest.approx(0.01)
    assert result.failures() == ["output 0: values differ beyond the tolerance"]
    assert "NaN" in compare([a], [torch.tensor([1.0, 2.0, 3.0, float("inf")])], FP32).failures()[0]
    assert not compare([a], [torch.tensor([1.0, 2.0, float("nan"), 5.0])], FP32).passed  # inf allows no slack
    assert "vs reference float32(4,)" in compare([a], [a[:2]], FP32).failures()[0]
    assert compare([a], [a, a], FP32).failures() == ["2 output(s), the reference has 1"]


def test_integers_must_be_equal_and_errors_are_reported():
    big = torch.tensor([10_000])
    assert not compare([big], [big + 1], FP32).passed  # within atol + rtol*|e| = 10, still different
    close = compare([torch.tensor([1.0, 0.0])], [torch.tensor([1.0005, 0.0])], FP32)
    assert close.passed and close.max_abs_error == pytest.approx(5e-4, rel=1e-3)
    assert math.isclose(close.max_rel_error, 5e-4, rel_tol=1e-2)
    assert compare([torch.empty(0, 3)], [torch.empty(0, 3)], EXACT).passed
