"""Refusals: parser-rejected ops, float64, ONNX/PyTorch mismatches; host fallback without an engine."""

from __future__ import annotations

import logging

import pytest
import torch

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend import preprocess
from et_tensorrt.backend.stages import build as build_stage
from et_tensorrt.backend.validation import validate
from et_tensorrt.builder.edge_to_aten import edge_to_aten
from et_tensorrt.builder.onnx_export import export_onnx
from et_tensorrt.errors import EngineBuildError, ValidationError
from et_tensorrt.testing import SplitPartitioner, Tester, check_blob, run_program


class NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


class Double(torch.nn.Module):
    def forward(self, x):
        return (x.to(torch.float64) * 3.0).sum(dim=1)


def _cause_chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _find(excinfo, kind):
    return next((e for e in _cause_chain(excinfo.value) if isinstance(e, kind)), None)


def test_parser_rejected_op_is_named():
    with pytest.raises(Exception) as excinfo:
        Tester(NonZero(), (torch.randn(4, 3),)).lower_with(SplitPartitioner())
    err = _find(excinfo, EngineBuildError)
    assert err is not None, excinfo.value
    assert "NonZero" in str(err)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 5)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_rejected_partition_can_be_left_to_the_host(caplog, monkeypatch, fresh_engine_cache):
    """TensorRT refusing a partition (simulated: this TensorRT builds every op of the table) leaves it to
    PyTorch: the blob carries no engine, only the embedded program, which runs (an empty cache: the build runs)."""

    def refuse(export, settings, sink=None):
        raise EngineBuildError("TensorRT refused the network (simulated)")

    monkeypatch.setattr(build_stage, "build_engine", refuse)
    before = preprocess.stats["fallbacks"]
    model = Mlp().eval()
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        tester = Tester(model, (torch.randn(4, 3),)).lower_with(
            SplitPartitioner({cs.PASS_THROUGH_BUILD_FAILURES: False})
        )
    assert preprocess.stats["fallbacks"] == before + 1
    assert any("left to the host" in r.getMessage() and "simulated" in r.getMessage() for r in caplog.records)
    [(blob, partition)] = tester.lowered_blobs()
    assert blob.engine is None
    assert "simulated" in blob.metadata["fallback_reason"]
    program = check_blob(blob, partition, expect_engine=False)
    x = torch.randn(4, 3)
    (got,) = run_program(program, (x,))
    torch.testing.assert_close(got, model(x))
    tester.to_executorch()


def test_a_partition_outside_the_op_table_cannot_be_embedded():
    """A partitioner that delegates an op outside the table (this test's split partitioner does) gets a
    program the runtime's safe loader would refuse: lowering says so instead of writing it."""
    with pytest.raises(Exception) as excinfo:
        Tester(NonZero(), (torch.randn(4, 3),)).lower_with(SplitPartitioner({cs.PASS_THROUGH_BUILD_FAILURES: False}))
    err = _find(excinfo, EngineBuildError)
    assert err is not None, excinfo.value
    assert "safe loader" in str(err) and "aten.nonzero" in str(err)


def test_float64_is_refused():
    with pytest.raises(Exception) as excinfo:
        Tester(Double(), (torch.randn(2, 3),)).lower_with(SplitPartitioner())
    err = _find(excinfo, EngineBuildError)
    assert err is not None, excinfo.value
    assert "float64" in str(err)


def test_validation_catches_a_mismatch():
    """ONNX of one model validated against another model's program must fail."""

    class A(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2.0

    class B(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2.05

    x = torch.randn(3, 5)
    ep_a = torch.export.export(A(), (x,))
    ep_b = torch.export.export(B(), (x,))
    onnx_a = export_onnx(ep_a)
    assert validate(ep_a, onnx_a)  # agrees with itself
    with pytest.raises(ValidationError, match="differs"):
        validate(ep_b, onnx_a)


def test_edge_to_aten_maps_dim_order_ops_back():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.int32).clone() + 1

    from executorch.exir import to_edge

    edge = to_edge(torch.export.export(M(), (torch.randn(2, 3),)))
    targets = {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert any("dim_order" in t for t in targets)
    aten = edge_to_aten(edge.exported_program())
    aten_targets = [n.target for n in aten.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten._to_copy.default in aten_targets
    assert all(isinstance(t, torch._ops.OpOverload) for t in aten_targets)
    x = torch.randn(2, 3) * 5
    torch.testing.assert_close(aten.module()(x), M()(x))
