"""A host input moved to the device: the move stays on the host side, its consumers are delegated."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class HostToDevice(torch.nn.Module):
    def forward(self, x, lengths):
        scaled = lengths * 2  # host work on a host input
        moved = scaled.to(x.device)  # lengths.to("cuda"); "cuda" by name fails on CPU torch
        return x + moved.float()


def _inputs():
    return (torch.empty(8, device="cuda"), torch.empty(8, dtype=torch.int64))


H2D = "dim_order_ops__to_dim_order_copy_default"
TO_FLOAT = "dim_order_ops__to_dim_order_copy_default_1"


def test_host_to_device_cast_is_a_boundary(fake_edge, partition_recording, tagged, warned):
    ep = fake_edge(HostToDevice, _inputs)
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, warnings = partition_recording(partitioner, ep)

    assert tagged(result.tagged_exported_program) == {TO_FLOAT: "et_tensorrt_0", "aten_add_tensor": "et_tensorrt_0"}
    host = partitioner.report.host_nodes
    assert {n: str(r) for n, r in host.items()} == {
        "aten_mul_tensor": "device:host-output (output on cpu)",
        H2D: "device:host-input (input aten_mul_tensor on cpu)",
    }
    # The 0-d lifted constant of `lengths * 2` feeds a host node: it is not baked into the engine.
    assert "_lifted_tensor_constant0" not in tagged(result.tagged_exported_program)
    # Only the host-output mul would have had its device dropped; the h2d copy keeps cuda either way.
    assert warned(warnings) == ["aten_mul_tensor"]


def test_dtype_only_cast_on_device_is_delegable(fake_edge):
    report = TensorRTPartitioner(min_block_size=1).analyze(fake_edge(HostToDevice, _inputs))
    assert report.delegated[TO_FLOAT] == "et_tensorrt_0"
