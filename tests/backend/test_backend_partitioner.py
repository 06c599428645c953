"""End to end with the project's own TensorRTPartitioner (not the test-only one)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_helpers import check_blob, lowered  # noqa: E402

from et_tensorrt import compile_specs as cs  # noqa: E402
from et_tensorrt.partition import TensorRTPartitioner  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.b(torch.nn.functional.gelu(self.ln(self.a(x)))), dim=-1)


def test_tensorrt_partitioner_lowers_and_builds():
    torch.manual_seed(0)
    ep = torch.export.export(Net().eval(), (torch.randn(3, 8),))
    partitioner = TensorRTPartitioner(min_block_size=1, compile_specs={cs.VALIDATE: True})
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    blobs = lowered(edge)
    assert blobs, "nothing was delegated"
    for blob, partition in blobs:
        check_blob(blob, partition)
    edge.to_executorch()
