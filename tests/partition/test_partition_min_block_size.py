"""min_block_size drops small partitions; plumbing nodes (getitem) do not count toward the size."""

import pytest
import torch

from et_tensorrt.partition import TensorRTPartitioner


class SplitThenHost(torch.nn.Module):
    def forward(self, x):
        a, b = torch.split(x.relu(), 4)
        return a * 2.0, (b + 1.0).to("cpu")


def _inputs():
    return (torch.empty(8, device="cuda"),)


def test_counts(fake_edge):
    ep = fake_edge(SplitThenHost, _inputs)
    calls = [n.name for n in ep.graph.nodes if n.op == "call_function"]
    getitems = [n for n in calls if n.startswith("getitem")]
    assert len(getitems) == 2
    compute = [n for n in calls if n not in getitems and "to_dim_order_copy" not in n]
    assert len(compute) == 4  # relu, split, mul, add

    kept = TensorRTPartitioner(min_block_size=4).analyze(ep)
    assert set(kept.delegated) == set(compute) | set(getitems)
    assert {n: r.code for n, r in kept.host_nodes.items()} == {
        "dim_order_ops__to_dim_order_copy_default": "cast:device-change"
    }

    dropped = TensorRTPartitioner(min_block_size=5).analyze(ep)
    assert dropped.partitions == {}
    assert {str(dropped.host_nodes[n]) for n in compute + getitems} == {"min_block_size (partition of 4 < 5)"}


def test_invalid_min_block_size():
    with pytest.raises(ValueError):
        TensorRTPartitioner(min_block_size=0)
