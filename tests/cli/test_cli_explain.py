"""`explain`: the partition report `lower` would print, without lowering (et_tensorrt.explain), with lower's
partition options, for one program or the methods of one."""

from __future__ import annotations

import pytest
import torch

EXPECTED = """\
net.pt2: input float32(2, 4)

et_tensorrt partition report: engine cuda:0, graph unplaced (the runtime copies at the boundary)
1 partition(s), 5 node(s) delegated, 1 kept on host
node                         op                         device  decision
---------------------------  -------------------------  ------  -----------------------------
aten_permute_copy_default    aten.permute_copy.default  cpu     et_tensorrt_0
aten_addmm_default           aten.addmm.default         cpu     et_tensorrt_0
aten_relu_default            aten.relu.default          cpu     et_tensorrt_0
aten_permute_copy_default_1  aten.permute_copy.default  cpu     et_tensorrt_0
aten_addmm_default_1         aten.addmm.default         cpu     et_tensorrt_0
aten_sigmoid_default         aten.sigmoid.default       cpu     host: user:torch_executed_ops

nothing was built: `et-tensorrt lower` with the same options delegates these partitions
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explain")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2), torch.nn.Sigmoid())
    torch.export.save(torch.export.export(model.eval(), (torch.randn(2, 4),)), tmp / "net.pt2")
    return tmp


def test_explain_prints_the_report_and_builds_nothing(folder, run_cli):
    args = ("--min-block-size", 1, "--torch-executed-op", "aten.sigmoid.default")
    result = run_cli("explain", "net.pt2", *args, cwd=folder)
    assert result.status == 0 and result.noise == [], result.stderr
    assert result.stdout == EXPECTED
    assert result.stderr == "note: partitioning the program (ExecuTorch's edge passes) ...\n"
    assert sorted(p.name for p in folder.iterdir()) == ["net.pt2"]


def test_explain_takes_methods_as_lower_does(folder, run_cli):
    result = run_cli("explain", "prefill=net.pt2", "decode=net.pt2", "--min-block-size", 1, cwd=folder)
    assert result.status == 0, result.stderr
    out = result.stdout
    assert out.startswith("prefill = net.pt2: input float32(2, 4)\ndecode = net.pt2: input float32(2, 4)\n")
    assert out.count("1 partition(s), 6 node(s) delegated, 0 kept on host") == 2
    assert out.index("\nmethod prefill:\n") < out.index("\nmethod decode:\n")


def test_explain_refuses_an_op_that_is_not_torchs(folder, run_cli):
    result = run_cli("explain", "net.pt2", "--torch-executed-op", "relu", cwd=folder)
    assert result.status == 2
    assert "'relu' is not a torch op" in result.error_line and "did you mean aten.relu.default" in result.error_line
