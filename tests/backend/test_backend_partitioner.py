"""End to end with the project's own TensorRTPartitioner (not the test-only one)."""

from __future__ import annotations

import torch

from et_tensorrt.testing import Tester


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
    tester = Tester(Net(), (torch.randn(3, 8),), min_block_size=1, validate=True)
    tester.export().to_edge_transform_and_lower()
    assert tester.lowered_blobs(), "nothing was delegated"
    tester.check_blobs()
    tester.to_executorch()
