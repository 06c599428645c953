"""A torch_executed_ops entry that matches no node of the program is named in an UnmatchedOpWarning, with
close op names (ExecuTorch decomposes aten.linear before the partitioner sees it)."""

from __future__ import annotations

import warnings

import pytest
import torch
from executorch.exir import to_edge

from et_tensorrt.errors import UnmatchedOpWarning
from et_tensorrt.partition import TensorRTPartitioner


def _edge():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    return to_edge(torch.export.export(model, (torch.randn(2, 4),)))


def test_unmatched_op_is_warned_with_close_names():
    partitioner = TensorRTPartitioner(min_block_size=1, torch_executed_ops=["aten.linear.default", "aten.relu"])
    with pytest.warns(UnmatchedOpWarning) as caught:
        partitioner(_edge().exported_program())
    (warning,) = [w for w in caught if issubclass(w.category, UnmatchedOpWarning)]
    assert "'aten.linear.default' matches no node" in str(warning.message)
    assert "aten.addmm.default" in str(warning.message)
    assert partitioner.report.host_nodes["aten_relu_default"].code == "user:torch_executed_ops"  # the packet matched


def test_matched_ops_warn_nothing():
    partitioner = TensorRTPartitioner(min_block_size=1, torch_executed_ops=["aten.relu.default"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmatchedOpWarning)
        partitioner(_edge().exported_program())
