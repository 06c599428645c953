"""Sizes do not split dynamic programs: a partition takes the sizes it reads as arguments, sizes are read from
the program's inputs (never from an intermediate tensor), and splits do not pin a dynamic batch."""

import pytest
import torch
from executorch.exir import to_edge_transform_and_lower
from torch.export import Dim

import et_tensorrt
from et_tensorrt import explain
from et_tensorrt.errors import PartitionError
from et_tensorrt.partition import TensorRTPartitioner


class TwoRegions(torch.nn.Module):
    """Both regions reshape with the batch size; ``sin`` between them stays on the host."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x):
        b = x.shape[0]
        y = torch.relu(self.a(x)).view(b, 2, 4).transpose(1, 2).reshape(b, 8)
        y = torch.sin(y)
        return torch.relu(self.b(y)).view(b, 4, 2).sum(-1)


def test_regions_reading_a_host_size_stay_delegated():
    ep = torch.export.export(TwoRegions(), (torch.randn(3, 8),), dynamic_shapes=({0: Dim("b", min=1, max=16)},))
    report = explain(ep, min_block_size=1, torch_executed_ops=["aten.sin.default"])
    host = {name: reason.code for name, reason in report.host_nodes.items()}
    # only the sin (user choice) and the size query (the host reads x's shape; no engine takes x for it)
    assert sorted(host.values()) == ["symbolic-boundary", "user:torch_executed_ops"], report
    assert len(report.partitions) == 2


class Pooled(torch.nn.Module):
    """Reads sizes of an intermediate (the pooled tensor), as swin's window attention does."""

    def forward(self, x):
        y = x.relu()[:, :, ::2]
        b, c, n = y.shape
        return torch.sin(y.reshape(b, c * n)) * 2


def _sym_sizes(program):
    return [n for n in program.graph.nodes if n.op == "call_function" and "sym_size" in str(n.target)]


def test_sizes_are_read_from_the_inputs_and_the_caller_program_is_untouched():
    ep = torch.export.export(Pooled(), (torch.randn(2, 3, 16),), dynamic_shapes=({2: Dim("n", min=4, max=64) * 2},))
    before = [(n.name, n.args[0].op) for n in _sym_sizes(ep)]
    assert any(op != "placeholder" for _, op in before)  # the exported program reads the pooled tensor's size
    partitioner = TensorRTPartitioner(min_block_size=1, torch_executed_ops=["aten.sin.default"])
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    assert [(n.name, n.args[0].op) for n in _sym_sizes(ep)] == before
    program = edge.exported_program()
    assert all(n.args[0].op == "placeholder" for n in _sym_sizes(program)), program.graph
    # the engine before sin returns only what sin reads; no tensor leaves an engine for its shape
    first, second = [n for n in program.graph.nodes if "call_delegate" in str(n.target)]
    assert len(first.meta["val"]) == 1


class QKV(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).split(8, dim=2)
        return torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v


def test_a_split_does_not_pin_a_dynamic_batch():
    ep = torch.export.export(
        QKV(), (torch.randn(2, 5, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=8), 1: Dim("seq", min=1, max=32)},)
    )
    edge = to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(min_block_size=1)])
    [x] = [n for n in edge.exported_program().graph.nodes if n.op == "placeholder" and n.name == "x"]
    assert all(isinstance(d, torch.SymInt) for d in x.meta["val"].shape[:2]), x.meta["val"].shape


class GatedPieces(torch.nn.Module):
    """A gated MLP's ``chunk`` (MoE experts) and an ``unbind``, along static dims of a dynamic number of rows."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)

    def forward(self, x):
        gate, up = self.up(x).chunk(2, dim=-1)
        first, second = torch.stack([gate, up], dim=1).unbind(1)
        return torch.nn.functional.silu(first) * second


def test_chunk_and_unbind_do_not_pin_a_dynamic_size():
    """ExecuTorch's edge verifier reads the size of the first piece an op returning a list produces, which pinned a
    MoE prefill's dynamic length to its example (its engine then failed to build a KV-cache update)."""
    dynamic = ({0: Dim("rows", min=1, max=32)},)
    model = GatedPieces()
    ep = torch.export.export(model, (torch.randn(5, 8),), dynamic_shapes=dynamic)
    edge = to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(min_block_size=1)])
    [x] = [n for n in edge.exported_program().graph.nodes if n.op == "placeholder" and n.name == "x"]
    assert isinstance(x.meta["val"].shape[0], torch.SymInt), x.meta["val"].shape
    runner = et_tensorrt.Runner(et_tensorrt.lower(ep))
    for rows in (1, 7, 32):
        x = torch.randn(rows, 8)
        torch.testing.assert_close(runner.run([x])[0], model(x))


class ReturnsAPiece(torch.nn.Module):
    def forward(self, x):
        return x.split(4, dim=1)[0] * 2, x.split(4, dim=1)[1]  # a piece the program returns as it is


def test_a_returned_piece_does_not_pin_a_dynamic_batch():
    dynamic = ({0: Dim("batch", min=1, max=8)},)
    runner = et_tensorrt.Runner(et_tensorrt.lower(ReturnsAPiece(), (torch.randn(3, 8),), dynamic_shapes=dynamic))
    for batch in (1, 8):
        x = torch.randn(batch, 8)
        for got, expected in zip(runner.run([x]), ReturnsAPiece()(x)):
            torch.testing.assert_close(got, expected)


def test_a_dynamic_dim_to_edge_pins_is_refused_by_name(monkeypatch):
    from et_tensorrt.partition import pre_decomposition

    monkeypatch.setattr(pre_decomposition, "_SPLITS", ())  # a Tensor[] op the rewrites do not know
    ep = torch.export.export(ReturnsAPiece(), (torch.randn(3, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=8)},))
    with pytest.raises(
        PartitionError, match=r"fixed dynamic dims to their example sizes: x dim 0 \(declared 1..8\) is 3"
    ):
        to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(min_block_size=1)])


def test_an_unknown_opt_size_name_fails_before_lowering():
    ep = torch.export.export(QKV(), (torch.randn(2, 5, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=8)},))
    with pytest.raises(ValueError, match="opt_sizes names 'beam'.*known: batch, x:0"):
        to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(opt_sizes={"beam": 4})])


class Trim(torch.nn.Module):
    """Window arithmetic (swin pads to a multiple of its window): ``mod`` on a size is size arithmetic."""

    def forward(self, x):
        n = x.shape[1]
        return x.relu()[:, : n - n % 3] * 2


def test_modulo_on_a_size_stays_in_the_engine_and_runs_at_every_size():
    dynamic = ({1: 16 * Dim("n", min=1, max=8)},)
    ep = torch.export.export(Trim(), (torch.randn(2, 32, 8),), dynamic_shapes=dynamic)
    report = explain(ep, min_block_size=1)
    assert not report.host_nodes and len(report.partitions) == 1, report
    runner = et_tensorrt.Runner(
        et_tensorrt.lower(Trim(), (torch.randn(2, 32, 8),), dynamic_shapes=dynamic, min_block_size=1)
    )
    for n in (16, 48, 128):  # 15, 48 and 126 rows out
        x = torch.randn(2, n, 8)
        [got] = runner.run([x])
        torch.testing.assert_close(got, Trim()(x))
