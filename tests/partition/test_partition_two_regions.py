"""A host node between two device regions splits the engine work into two partitions."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class TwoRegions(torch.nn.Module):
    def forward(self, x):
        a = x.relu() * 3.0
        c = a.to("cpu") + 1.0
        return c.to(x.device).sigmoid() + x


def _inputs():
    return (torch.empty(8, device="cuda"),)


def test_two_partitions_around_host_node(fake_edge, partition_recording, tagged, warned):
    ep = fake_edge(TwoRegions, _inputs)
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, warnings = partition_recording(partitioner, ep)
    report = partitioner.report

    assert report.partitions == {
        "et_tensorrt_0": ("aten_relu_default", "aten_mul_tensor"),
        "et_tensorrt_1": ("aten_sigmoid_default", "aten_add_tensor_1"),
    }
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "dim_order_ops__to_dim_order_copy_default": "cast:device-change (cuda:0 -> cpu)",
        "aten_add_tensor": "device:host-output (output on cpu)",
        "dim_order_ops__to_dim_order_copy_default_1": "device:host-input (input aten_add_tensor on cpu)",
    }
    assert set(result.partition_tags) == {"et_tensorrt_0", "et_tensorrt_1"}
    # The 3.0 constant is baked into the first engine; the 1.0 constant stays with the host add.
    tags = tagged(result.tagged_exported_program)
    assert tags["_lifted_tensor_constant0"] == "et_tensorrt_0"
    assert "_lifted_tensor_constant1" not in tags
    assert warned(warnings) == ["aten_add_tensor", "dim_order_ops__to_dim_order_copy_default"]


def test_min_block_size_applies_per_partition(fake_edge):
    report = TensorRTPartitioner(min_block_size=3).analyze(fake_edge(TwoRegions, _inputs))
    assert report.partitions == {}
    assert str(report.host_nodes["aten_relu_default"]) == "min_block_size (partition of 2 < 3)"
    assert str(report.host_nodes["aten_add_tensor_1"]) == "min_block_size (partition of 2 < 3)"
