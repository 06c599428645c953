"""Sizes never leave a partition: engines return tensors only. Size arithmetic next to its consumer is
delegated with it; a size read on the host is computed on the host (sizes flowing *into* a partition:
test_partition_sizes.py)."""

import torch

from et_tensorrt import explain


class Flatten(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return y.view(y.shape[0] * y.shape[1])


def _export():
    batch = torch.export.Dim("batch", min=2, max=32)
    return torch.export.export(Flatten(), (torch.randn(4, 3),), dynamic_shapes=({0: batch},))


def test_size_arithmetic_is_delegated_with_its_consumer():
    report = explain(_export(), min_block_size=1)
    assert report.host_nodes == {}
    assert len(report.partitions) == 1


def test_a_size_read_on_the_host_stays_on_the_host_with_the_reason():
    # The user names the aten view; the edge program lowering partitions holds its functional view_copy.
    report = explain(_export(), min_block_size=1, torch_executed_ops=["aten.view.default"])
    host = {name: reason.code for name, reason in report.host_nodes.items()}
    assert host.pop("aten_view_copy_default") == "user:torch_executed_ops"
    # the size query and the multiplication feeding the host view are not delegated
    assert host == {"sym_size": "symbolic-boundary", "mul": "symbolic-boundary"}, report
    delegated = {n for names in report.partitions.values() for n in names}
    assert delegated == {"aten_relu_default"}
