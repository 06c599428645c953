"""A partition made only of view/shape ops is not worth an engine, unless it is the whole graph."""

import torch

from et_tensorrt import explain


class ViewsAroundHostOp(torch.nn.Module):
    """unsqueeze -> cumsum (kept on the host by the user) -> squeeze: each view alone would be an engine."""

    def forward(self, x):
        return torch.cumsum(x.unsqueeze(0), dim=1).squeeze(0)


class OnlyAView(torch.nn.Module):
    def forward(self, x):
        return x.reshape(2, 8)


def test_lone_view_partitions_around_a_host_op_are_dropped_with_a_reason():
    ep = torch.export.export(ViewsAroundHostOp(), (torch.randn(16),))
    report = explain(ep, min_block_size=1, torch_executed_ops=["aten.cumsum"])
    assert report.partitions == {}
    assert str(report.host_nodes["aten_unsqueeze_copy_default"]) == (
        "view-only (a partition of only view/shape ops computes nothing)"
    )
    assert str(report.host_nodes["aten_squeeze_copy_dims"]).startswith("view-only")
    assert str(report.host_nodes["aten_cumsum_default"]).startswith("user:torch_executed_ops")


def test_a_graph_that_is_only_a_view_is_still_delegated():
    report = explain(torch.export.export(OnlyAView(), (torch.randn(16),)), min_block_size=1)
    assert report.host_nodes == {}
    assert len(report.partitions) == 1
