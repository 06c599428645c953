"""min_block_size drops small partitions; plumbing nodes (getitem) do not count toward the size; a method whose whole
graph is one small partition is an engine all the same (no host op around it for the engine to cost transfers
against: a multimodal program's ``token_embedding``, one embedding)."""

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
    grouped = [n for n in calls if n != "aten_add_tensor"]  # the add kept on the host: the group is not the method

    kept = TensorRTPartitioner(min_block_size=3, torch_executed_ops=["aten.add.Tensor"]).analyze(ep)
    assert kept.partitions == {"et_tensorrt_0": tuple(grouped)}

    dropped = TensorRTPartitioner(min_block_size=4, torch_executed_ops=["aten.add.Tensor"]).analyze(ep)
    assert dropped.partitions == {}
    assert {n: str(r) for n, r in dropped.host_nodes.items() if n in grouped} == {
        n: "min_block_size (partition of 3 < 4)" for n in grouped
    }


class Embedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16, 8)

    def forward(self, ids):
        return self.table(ids)


def test_a_whole_method_is_an_engine_below_min_block_size():
    ep = to_edge(torch.export.export(Embedding(), (torch.tensor([[1, 2, 3]]),))).exported_program()
    report = TensorRTPartitioner().analyze(ep)  # the default min_block_size, 5
    assert report.partitions == {"et_tensorrt_0": ("aten_embedding_default",)} and not report.host_nodes
    # the same op beside a host op is a partition of 1 < 5, as before
    split = to_edge(torch.export.export(Split(), (torch.randn(8),))).exported_program()
    small = TensorRTPartitioner(torch_executed_ops=["aten.relu.default"]).analyze(split)
    assert small.partitions == {} and str(small.host_nodes["aten_mul_tensor"]).startswith("min_block_size")


def test_invalid_min_block_size():
    with pytest.raises(ValueError):
        TensorRTPartitioner(min_block_size=0)
