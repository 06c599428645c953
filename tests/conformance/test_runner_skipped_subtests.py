"""Subtests the backend suite lowers through our delegate but never runs are run here, and must pass.

The suite's runner skips every subtest whose *pre-delegation* graph holds a rank-5 convolution,
because the portable kernels cannot run one; our delegate takes those convolutions, so the runner
would report them "delegated, then skipped". These tests call the suite's own conv3d and
convtranspose3d test functions with ``DirectRunner``, which takes the runner's stages and tolerances
without that skip: every subtest must delegate, run and match eager PyTorch, and (through the
``et_tensorrt_onnx_checked`` flow) each engine's ONNX must match PyTorch under onnxruntime.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from et_tensorrt.conformance.direct_runner import DirectRunner
from et_tensorrt.conformance.flow import ET_TENSORRT_ONNX_CHECKED_FLOW

SUITE_MODULES = ("test_conv3d", "test_convtranspose3d")


def _suite_tests():
    for name in SUITE_MODULES:
        module = importlib.import_module(f"executorch.backends.test.suite.operators.{name}")
        for attr in sorted(vars(module)):
            if attr.startswith("test_") and callable(getattr(module, attr)):
                yield pytest.param(getattr(module, attr), id=f"{name}::{attr}")


@pytest.mark.parametrize("suite_test", list(_suite_tests()))
def test_rank5_convolution_runs_through_the_delegate(suite_test):
    runner = DirectRunner(ET_TENSORRT_ONNX_CHECKED_FLOW)
    if "dtype" in suite_test.__code__.co_varnames[: suite_test.__code__.co_argcount]:
        suite_test(runner, torch.float32)
    else:
        suite_test(runner)
    assert runner.results, "the suite test lowered nothing"
    for result in runner.results:
        assert result.delegated and result.delegated_nodes > 0, result
