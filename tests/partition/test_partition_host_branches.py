"""Several host branches off one device value: each branch stays on the host, the trunk is delegated."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class Branches(torch.nn.Module):
    def forward(self, x):
        y = torch.tanh(x) + 1.0
        h1 = y.to("cpu").sum()
        h2 = y.to(device="cpu", dtype=torch.int32) * 2
        h3 = (y * 4.0).to("cpu").neg()
        return y * 2.0, h1, h2, h3


def _inputs():
    return (torch.empty(8, device="cuda"),)


def test_each_host_branch_kept_out(fake_edge, partition_recording):
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, _ = partition_recording(partitioner, fake_edge(Branches, _inputs))
    report = partitioner.report

    assert report.partitions == {
        "et_tensorrt_0": ("aten_tanh_default", "aten_add_tensor", "aten_mul_tensor_1", "aten_mul_tensor_2")
    }
    assert {n: r.code for n, r in report.host_nodes.items()} == {
        "dim_order_ops__to_dim_order_copy_default": "cast:device-change",
        "aten_sum_dim_int_list": "device:host-output",
        "dim_order_ops__to_dim_order_copy_default_1": "cast:device-change",
        # to_edge casts the 0-d constant 2 to int32 on the host; the mul consuming it is host work.
        "dim_order_ops__to_dim_order_copy_default_2": "device:host-output",
        "aten_mul_tensor": "device:host-output",
        "dim_order_ops__to_dim_order_copy_default_3": "cast:device-change",
        "aten_neg_default": "device:host-output",
    }
    # Delegate outputs keep the device the graph recorded.
    ep = result.tagged_exported_program
    recorded = {n.name: n.meta["val"].device for n in ep.graph.nodes if n.name in report.delegated}
    assert set(recorded.values()) == {torch.device("cuda", 0)}
