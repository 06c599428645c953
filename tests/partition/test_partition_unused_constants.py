"""A constant nothing reads once ExecuTorch's edge passes ran (an empty tensor a ``cat`` started from, as in HF's
static-cache encoder-decoder export) goes into the delegate, not into the top-level program: left there, its zero
bytes made ExecuTorch's constant segment empty, and the program loaded from its bytes but not from its file. Such a
failure says why (ExecuTorch's own log line), without ET_TENSORRT_EXECUTORCH_LOGS."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.errors import RunnerError


class _EmptyStart(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.empty = torch.zeros(1, 0, 8)  # a lifted constant; PruneEmptyTensorsPass drops it from the cat

    def forward(self, x):
        return torch.relu(self.linear(torch.cat([self.empty, x], dim=1))) * 2 + 1


def _save(path):
    x = torch.randn(1, 4, 8)
    module = _EmptyStart().eval()
    et_tensorrt.save(path, torch.export.export(module, (x,)))
    return x, module(x)


def test_a_program_with_an_unread_constant_loads_from_its_file(tmp_path):
    path = tmp_path / "model.pte"
    x, expected = _save(path)
    from executorch.runtime import Runtime

    for program in (path, path.read_bytes()):
        assert torch.allclose(Runner(program).run([x])[0], expected, atol=1e-5)
    method = Runtime.get().load_program(path).load_method("forward")  # ExecuTorch's own runtime, from the file
    assert torch.allclose(method.execute([x])[0], expected, atol=1e-5)


def test_a_load_failure_carries_executorchs_reason(tmp_path, monkeypatch):
    from et_tensorrt.partition import partitioner

    monkeypatch.setattr(partitioner, "tag_unused_constants", lambda *args: [])  # as before: left in the program
    monkeypatch.delenv("ET_TENSORRT_EXECUTORCH_LOGS", raising=False)
    path = tmp_path / "model.pte"
    x, _ = _save(path)
    with pytest.raises(RunnerError, match=r"error 35\): ExecuTorch logged: constant_buffer path is disabled"):
        Runner(path).run([x])
