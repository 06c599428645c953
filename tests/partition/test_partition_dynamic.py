"""Dynamic shapes: placement and capability read the same metadata with symbolic sizes."""

import torch

from et_tensorrt.partition import TensorRTPartitioner


class Dynamic(torch.nn.Module):
    def forward(self, x):
        y = (x * 2.0).reshape(-1, 2).sum(dim=1)
        return y.to("cpu"), y + 1.0


def _inputs():
    return (torch.empty(8, 4, device="cuda"),)


DYN = {"x": {0: torch.export.Dim("n", min=2, max=64)}}


def test_dynamic_batch_partitions(fake_edge, partition_recording):
    ep = fake_edge(Dynamic, _inputs, DYN)
    shapes = [n.meta["val"].shape for n in ep.graph.nodes if n.name == "aten_sum_dim_int_list"]
    assert not isinstance(shapes[0][0], int)  # the batch really is symbolic
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, warnings = partition_recording(partitioner, ep)
    report = partitioner.report
    assert report.partitions == {
        "et_tensorrt_0": ("aten_mul_tensor", "aten_view_copy_default", "aten_sum_dim_int_list", "aten_add_tensor")
    }
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "dim_order_ops__to_dim_order_copy_default": "cast:device-change (cuda:0 -> cpu)"
    }
    assert len(warnings) == 1
