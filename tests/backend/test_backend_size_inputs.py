"""Sizes a partition reads but does not compute: ExecuTorch passes them as integers. The engine computes each
from its own tensor inputs' shapes where one carries the symbol, else takes it as a 0-d int64 shape input;
the blob lists them (role size), the placement plan checks their values, the executors receive ints."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules
from onnx import TensorProto, helper
from torch.export import Dim

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.builder.edge_to_aten import edge_to_aten, user_input_nodes
from et_tensorrt.builder.engine_builder import BuildSettings, build_engine
from et_tensorrt.builder.onnx_export import OnnxExport, TensorInfo
from et_tensorrt.builder.size_inputs import engine_program
from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format import _reader
from et_tensorrt.format import blob as B


class HostThenView(torch.nn.Module):
    """``relu`` kept on the host: the view after it reads the batch size the host computes."""

    def forward(self, x):
        y = torch.relu(x)
        return (y.view(y.shape[0] * y.shape[1]) + 1) * 2


class SizeOnly(torch.nn.Module):
    """``x`` matters only for its size: no tensor input of the partition carries that symbol."""

    def forward(self, x, y):
        return (torch.relu(y) + 1).expand(x.shape[0], 4)


def _lower(model, args, dynamic_shapes, host_ops):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    partitioner = et_tensorrt.TensorRTPartitioner(min_block_size=1, torch_executed_ops=host_ops)
    return to_edge_transform_and_lower(ep, partitioner=[partitioner]), partitioner.report


def _partition(edge):
    [(_, lowered, _)] = get_lowered_submodules(edge.exported_program().graph_module)
    return B.read_blob(lowered.processed_bytes), lowered.original_module


def test_a_size_the_engine_can_compute_is_an_unbound_argument():
    edge, report = _lower(
        HostThenView(), (torch.randn(4, 3),), ({0: Dim("batch", min=1, max=32)},), ["aten.relu.default"]
    )
    # the size query stays on the host (the partition does not take x), the view and the math do not
    assert {n: r.code for n, r in report.host_nodes.items()} == {
        "sym_size": "symbolic-boundary",
        "aten_relu_default": "user:torch_executed_ops",
    }
    blob, partition = _partition(edge)
    [size, tensor] = blob.inputs
    assert (
        size.is_size and size.name == "" and size.dims == (B.DimRange(1, 4, 32),)
    )  # the batch: the product is computed inside
    assert tensor.role == B.ROLE_INPUT and tensor.dims[0] == B.DimRange(1, 4, 32)
    program, kept = engine_program(edge_to_aten(partition))
    assert kept == [] and [n.name for n in user_input_nodes(program)] == [partition.graph_signature.user_inputs[1]]
    assert blob.engine is not None


def test_the_program_runs_at_every_size_with_the_size_passed_in():
    model = HostThenView()
    pte = et_tensorrt.lower(
        model,
        (torch.randn(4, 3),),
        dynamic_shapes=({0: Dim("batch", min=1, max=32)},),
        min_block_size=1,
        torch_executed_ops=["aten.relu.default"],
        validate=True,
    )
    runner = et_tensorrt.Runner(pte)
    for n in (1, 2, 7, 32):
        x = torch.randn(n, 3)
        [got] = runner.run([x])
        torch.testing.assert_close(got, model(x))
        [delegate] = runner.last_plan.delegates  # the method plan holds each delegate's own plan
        size = delegate.inputs[0]
        assert (size.action, size.bytes) == ("value", 0) and f"size {n}," in size.reason


def test_a_size_no_tensor_input_carries_is_a_shape_input_of_the_engine():
    edge, report = _lower(SizeOnly(), (torch.randn(5, 3), torch.randn(1, 4)), ({0: Dim("n", min=1, max=64)}, None), [])
    blob, _ = _partition(edge)
    [size] = [e for e in blob.inputs if e.is_size]
    [y] = [e for e in blob.inputs if not e.is_size]
    assert size.name and size.dims == (B.DimRange(1, 5, 64),)
    assert y.dims == (B.DimRange.static(1), B.DimRange.static(4))
    assert blob.engine is not None  # TensorRT took the 0-d int64 as a shape input with its value range
    runner = et_tensorrt.Runner(
        et_tensorrt.lower(
            SizeOnly(),
            (torch.randn(5, 3), torch.randn(1, 4)),
            dynamic_shapes=({0: Dim("n", min=1, max=64)}, None),
            min_block_size=1,
            validate=True,
        )
    )
    for n in (1, 9, 64):
        x, y = torch.randn(n, 3), torch.randn(1, 4)
        [got] = runner.run([x, y])
        torch.testing.assert_close(got, SizeOnly()(x, y))
    with pytest.raises(ValueError, match="at most"):  # the program's own bound comes first
        runner.run([torch.randn(65, 3), torch.randn(1, 4)])


_SIZE_DIMS = (B.DimRange(1, 4, 8),)


def _size_blob(name="n", dims=_SIZE_DIMS) -> bytes:
    io = [
        B.IOEntry(B.ROLE_SIZE, name, B.scalar_type_code(torch.int64), dims),
        B.IOEntry(B.ROLE_INPUT, "x", B.scalar_type_code(torch.float32), (B.DimRange(1, 4, 8),)),
        B.IOEntry(B.ROLE_OUTPUT, "y", B.scalar_type_code(torch.float32), (B.DimRange(1, 4, 8),)),
    ]
    return B.write_blob(io, graph=b"{}", exec_device_type=B.DEVICE_CPU)


def test_size_entries_round_trip_in_both_readers():
    data = _size_blob()
    blob = B.read_blob(data)
    assert [e.role for e in blob.inputs] == [B.ROLE_SIZE, B.ROLE_INPUT]
    parsed = _reader.parse_blob(data)
    assert [(i["role"], i["name"], i["dims"]) for i in parsed["inputs"]] == [
        ("size", "n", [(1, 4, 8)]),
        ("input", "x", [(1, 4, 8)]),
    ]


def test_a_size_entry_must_hold_exactly_its_value_range():
    with pytest.raises(BlobFormatError, match="rank 2, dtype 4; a size has rank 1"):
        _size_blob(dims=(B.DimRange(1, 1, 1), B.DimRange(1, 1, 1)))
    # readers: tests/blob_fixtures.py damaged blobs io_size_rank_2 and io_size_float (both readers reject them)


def test_the_plan_passes_sizes_by_value_and_checks_their_range():
    data = _size_blob()
    x, out = torch.randn(4), torch.empty(4)
    cpu = torch.device("cpu")
    plan = _C.plan_placement(data, [5, et_tensorrt.describe(x)], [et_tensorrt.describe(out)], cpu, "pytorch", False)
    assert plan.ok and plan.inputs[0].action == "value" and plan.inputs[0].bytes == 0
    plan = _C.plan_placement(data, [9, et_tensorrt.describe(x)], [et_tensorrt.describe(out)], cpu, "pytorch", False)
    assert not plan.ok and "size 9 outside the engine's range (1..8,)" in plan.inputs[0].reason
    plan = _C.plan_placement(
        data, [et_tensorrt.describe(x), et_tensorrt.describe(x)], [et_tensorrt.describe(out)], cpu, "pytorch", False
    )
    assert not plan.ok and "a tensor where the partition takes a size" in plan.inputs[0].reason
    plan = _C.plan_placement(data, [5, 4], [et_tensorrt.describe(out)], cpu, "pytorch", False)
    assert not plan.ok and "where the engine takes a tensor" in plan.inputs[1].reason


def test_a_size_shape_input_gets_its_value_range_in_every_profile():
    """A 0-d int64 input that sets a shape is a TensorRT shape input: its profile holds values, not dims."""
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["n", "axes"], ["shape"]),
            helper.make_node("Concat", ["shape", "four"], ["target"], axis=0),
            helper.make_node("Expand", ["y", "target"], ["out"]),
        ],
        "expand",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4])],
        [
            helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
            helper.make_tensor("four", TensorProto.INT64, [1], [4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    static = (B.DimRange.static(1), B.DimRange.static(4))
    size = TensorInfo(
        "n",
        torch.int64,
        torch.device("cpu"),
        (),
        (B.DimRange(1, 8, 64),),
        (B.DimRange(1, 1, 8), B.DimRange(9, 64, 64)),
        B.DimRange(1, 8, 64),
    )
    y = TensorInfo("y", torch.float32, torch.device("cuda:0"), static, static, (static, static))
    out = TensorInfo("out", torch.float32, torch.device("cuda:0"), (B.DimRange(1, 8, 64), static[1]), ())
    export = OnnxExport(model.SerializeToString(), 18, [size, y], [out])
    assert export.profile_count == 2
    assert len(build_engine(export, BuildSettings()).engine) > 0


def test_a_dynamic_output_planned_at_a_larger_upper_bound_is_resized_not_rejected():
    """ExecuTorch plans a dynamic output at its own upper bound of the size expression, which can exceed the
    engine's exact range (swin's window sizes); the output is resized after the call."""
    io = [
        B.IOEntry(B.ROLE_INPUT, "x", B.scalar_type_code(torch.float32), (B.DimRange(1, 4, 8),)),
        B.IOEntry(B.ROLE_OUTPUT, "y", B.scalar_type_code(torch.float32), (B.DimRange(1, 4, 8), B.DimRange.static(2))),
    ]
    data = B.write_blob(io, graph=b"{}", exec_device_type=B.DEVICE_CPU)
    cpu = torch.device("cpu")
    x = et_tensorrt.describe(torch.randn(4))
    plan = _C.plan_placement(data, [x], [et_tensorrt.describe(torch.empty(11, 2))], cpu, "tensorrt", True)
    assert plan.ok and plan.outputs[0].action == "share"  # 11 x 2 floats hold the largest result, 8 x 2
    plan = _C.plan_placement(data, [x], [et_tensorrt.describe(torch.empty(3, 2))], cpu, "tensorrt", True)
    assert plan.ok and plan.outputs[0].action == "copy result" and "may not hold" in plan.outputs[0].reason
    plan = _C.plan_placement(data, [x], [et_tensorrt.describe(torch.empty(11, 3))], cpu, "tensorrt", True)
    assert not plan.ok and "outside the engine's range" in plan.outputs[0].reason  # a static dim must match
