"""A model whose every tensor lives on the device becomes one partition, parameters baked in."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class DeviceModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Fake parameters created inside FakeTensorMode (nn.Linear's init cannot run on fake cuda).
        self.weight = torch.nn.Parameter(torch.empty(4, 8, device="cuda"), requires_grad=False)
        self.bias = torch.nn.Parameter(torch.empty(4, device="cuda"), requires_grad=False)

    def forward(self, x):
        y = torch.nn.functional.linear(x, self.weight, self.bias)
        return torch.softmax(y.relu() * 2.0, dim=-1)


def _inputs():
    return (torch.empty(2, 8, device="cuda"),)


def test_one_partition_everything_delegated(fake_edge, partition_recording, tagged):
    partitioner = TensorRTPartitioner(require_full_compilation=True)  # default min_block_size
    result, warnings = partition_recording(partitioner, fake_edge(DeviceModel, _inputs))

    assert warnings == []
    assert partitioner.report.host_nodes == {}
    assert partitioner.report.partitions == {
        "et_tensorrt_0": (
            "aten_permute_copy_default",
            "aten_addmm_default",
            "aten_relu_default",
            "aten_mul_tensor",
            "aten__softmax_default",
        )
    }
    assert tagged(result.tagged_exported_program) == {
        name: "et_tensorrt_0"
        for name in (
            "p_weight",
            "p_bias",
            "_lifted_tensor_constant0",
            "aten_permute_copy_default",
            "aten_addmm_default",
            "aten_relu_default",
            "aten_mul_tensor",
            "aten__softmax_default",
        )
    }
