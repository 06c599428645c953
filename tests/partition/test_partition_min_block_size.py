"""min_block_size drops small partitions; plumbing nodes (getitem) do not count toward the size."""

import pytest
import torch
from executorch.exir import to_edge

from et_tensorrt.partition import TensorRTPartitioner


class Split(torch.nn.Module):
    def forward(self, x):
        a, b = torch.split(x.relu(), 4)
        return a * 2.0, b + 1.0


def test_getitems_do_not_count():
    # Host-exported: to_edge's argument validator cannot run split_with_sizes_copy on fake cuda.
    ep = to_edge(torch.export.export(Split(), (torch.randn(8),))).exported_program()
    calls = [n.name for n in ep.graph.nodes if n.op == "call_function"]
    getitems = [n for n in calls if n.startswith("getitem")]
    compute = [n for n in calls if n not in getitems]
    assert len(getitems) == 2 and len(compute) == 4  # relu, split, mul, add

    kept = TensorRTPartitioner(min_block_size=4).analyze(ep)
    assert kept.partitions == {"et_tensorrt_0": tuple(calls)}

    dropped = TensorRTPartitioner(min_block_size=5).analyze(ep)
    assert dropped.partitions == {}
    assert {n: str(r) for n, r in dropped.host_nodes.items()} == {
        n: "min_block_size (partition of 4 < 5)" for n in calls
    }


def test_invalid_min_block_size():
    with pytest.raises(ValueError):
        TensorRTPartitioner(min_block_size=0)
