"""0-d host tensors do not make a device node host-resident; larger host tensors do."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class MixScalar(torch.nn.Module):
    def forward(self, x, scale, offset):
        # PyTorch lets a 0-d cpu tensor mix with a cuda tensor; a 1-d cpu one would not run at all.
        return (x * scale).relu() + 3.0, offset * 2.0


def _inputs():
    return (torch.empty(8, device="cuda"), torch.empty(()), torch.empty(4))


def test_zero_dim_host_input_is_delegable(fake_edge, partition_recording, tagged):
    ep = fake_edge(MixScalar, _inputs)
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, _ = partition_recording(partitioner, ep)
    report = partitioner.report
    assert report.partitions == {"et_tensorrt_0": ("aten_mul_tensor", "aten_relu_default", "aten_add_tensor")}
    # `offset` is a 1-d host tensor: its mul stays on the host.
    assert {n: r.code for n, r in report.host_nodes.items()} == {"aten_mul_tensor_1": "device:host-output"}
    tags = tagged(result.tagged_exported_program)
    assert tags["_lifted_tensor_constant0"] == "et_tensorrt_0"  # the 3.0 is baked into the engine
    assert "_lifted_tensor_constant1" not in tags  # the 2.0 belongs to the host mul
    assert "scale" not in tags  # a user input is a delegate input, copied at the boundary
