"""`lower --etrecord`: the lowering's ETRecord beside the .pte, holding each delegate's debug-handle map
(docs/profiling.md, "ETRecord")."""

from __future__ import annotations

import pytest
import torch
from executorch.devtools.etrecord import parse_etrecord

from et_tensorrt.backend import debug_handles


@pytest.mark.slow  # ~10 s: the command's lowering in process
def test_lower_writes_the_etrecord_with_the_delegates_map(tmp_path, run_cli):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    torch.export.save(torch.export.export(model, (torch.randn(2, 4),)), tmp_path / "m.pt2")
    result = run_cli("lower", "m.pt2", "-o", "m.pte", "--etrecord", "m.etrecord", cwd=tmp_path)
    assert result.status == 0, result.stdout + result.stderr
    assert "wrote m.etrecord (" in result.stdout
    (delegate,) = parse_etrecord(str(tmp_path / "m.etrecord"))._delegate_map["forward"].values()
    assert delegate["name"] == "EtTensorRTBackend"
    assert {debug_handles.INIT, debug_handles.INPUTS, *debug_handles.EXECUTORS} <= set(delegate["delegate_map"])


def test_lower_refuses_an_etrecord_in_a_missing_folder(tmp_path, run_cli):
    (tmp_path / "m.pt2").write_bytes(b"")  # checked before it is read
    result = run_cli("lower", "m.pt2", "-o", "m.pte", "--etrecord", "nowhere/m.etrecord", cwd=tmp_path)
    assert result.status != 0
    assert "nowhere" in result.error_line
