"""torch_executed_ops keeps the named ops on the host, however the op is spelled."""

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops

from et_tensorrt.partition import TensorRTPartitioner


class Chain(torch.nn.Module):
    def forward(self, x):
        return ((x.relu() * 2.0).sigmoid() + 1.0).tanh()


def _inputs():
    return (torch.empty(8, device="cuda"),)


@pytest.mark.parametrize(
    "spelling",
    [
        torch.ops.aten.sigmoid.default,
        torch.ops.aten.sigmoid,
        "aten.sigmoid.default",
        "aten.sigmoid",
        exir_ops.edge.aten.sigmoid.default,
    ],
    ids=["overload", "packet", "name", "packet-name", "edge-op"],
)
def test_named_op_kept_on_host(fake_edge, spelling):
    report = TensorRTPartitioner(min_block_size=1, torch_executed_ops=[spelling]).analyze(fake_edge(Chain, _inputs))
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "aten_sigmoid_default": "user:torch_executed_ops (aten.sigmoid.default)"
    }
    assert report.partitions == {
        "et_tensorrt_0": ("aten_relu_default", "aten_mul_tensor"),
        "et_tensorrt_1": ("aten_add_tensor", "aten_tanh_default"),
    }


def test_other_overload_not_matched(fake_edge):
    report = TensorRTPartitioner(min_block_size=1, torch_executed_ops=["aten.mul.Scalar"]).analyze(
        fake_edge(Chain, _inputs)
    )
    assert report.host_nodes == {}
