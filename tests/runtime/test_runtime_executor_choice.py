"""Which executor runs a partition, and ``ET_TENSORRT_FALLBACK=error``.

Without CUDA the partition runs with PyTorch on the host and one log line says why; with
``ET_TENSORRT_FALLBACK=error`` the delegate refuses to initialise instead (the choice is made when the
method loads, so the variable must be set before that).
"""

from __future__ import annotations

import logging

import pytest
import torch

import et_tensorrt
from et_tensorrt import _C

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the CPU-only fallback")


@needs_no_cuda
def test_pytorch_executor_on_the_host_with_one_log_line(mlp_tester, caplog):
    runner = et_tensorrt.Runner(mlp_tester.pte)
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        runner.run([torch.randn(2, 8)])  # the method (and its delegate) loads on the first run
        runner.run([torch.randn(2, 8)])
    lines = [r.getMessage() for r in caplog.records if r.name == "et_tensorrt"]
    assert lines == [
        "et_tensorrt: partition runs with PyTorch on cpu: no CUDA device is available; runs on cpu instead of cuda:0"
    ]
    plan = runner.last_plan
    assert plan.executor == "pytorch"
    assert plan.execution_device == torch.device("cpu")  # the blob asked for cuda:0; none is usable


@needs_no_cuda
def test_fallback_error_refuses_through_the_runner(mlp_tester, monkeypatch):
    mlp_tester.runner.run([torch.randn(2, 8)])  # loads its method (and delegate) before the variable is set
    monkeypatch.setenv("ET_TENSORRT_FALLBACK", "error")
    runner = et_tensorrt.Runner(mlp_tester.pte)
    with pytest.raises(et_tensorrt.RunnerError) as info:
        runner.run([torch.randn(2, 8)])
    msg = str(info.value)
    assert "cannot load method 'forward'" in msg
    assert "TensorRT cannot execute this partition here: no CUDA device is available" in msg
    assert "ET_TENSORRT_FALLBACK=error refuses the PyTorch fallback" in msg
    assert "ET_TENSORRT_FALLBACK=error" in _C.last_delegate_error()
    # A method loaded before the variable was set keeps its executor.
    mlp_tester.runner.run([torch.randn(2, 8)])
    monkeypatch.delenv("ET_TENSORRT_FALLBACK")
    x = torch.randn(2, 8)
    torch.testing.assert_close(runner.run([x])[0], mlp_tester.expected([x])[0], rtol=1e-5, atol=1e-6)


@needs_no_cuda
def test_fallback_error_refuses_through_executorch_runtime(mlp_tester, monkeypatch):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(mlp_tester.pte)
    monkeypatch.setenv("ET_TENSORRT_FALLBACK", "error")
    with pytest.raises(RuntimeError, match="Failed to load method forward"):
        program.load_method("forward")
    assert "ET_TENSORRT_FALLBACK=error refuses the PyTorch fallback" in _C.last_delegate_error()
    monkeypatch.setenv("ET_TENSORRT_FALLBACK", "pytorch")  # the explicit default
    x = torch.randn(2, 8)
    torch.testing.assert_close(
        program.load_method("forward").execute([x])[0], mlp_tester.expected([x])[0], rtol=1e-5, atol=1e-6
    )
