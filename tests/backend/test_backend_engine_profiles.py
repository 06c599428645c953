"""The engine builder gives TensorRT an optimization profile whenever the parsed network has a dynamic
input, even one the partition records as static (the ONNX exporter can leave such a dim symbolic)."""

import torch
from onnx import TensorProto, helper

from et_tensorrt.builder.engine_builder import BuildSettings, build_engine
from et_tensorrt.builder.onnx_export import OnnxExport, TensorInfo
from et_tensorrt.format.blob import DimRange


def _relu_export(onnx_dims, info_dims):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, onnx_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, onnx_dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    dims = tuple(DimRange(*d) for d in info_dims)
    info = lambda name: TensorInfo(name, torch.float32, torch.device("cuda:0"), dims, dims)  # noqa: E731
    return OnnxExport(model.SerializeToString(), 18, [info("x")], [info("y")])


def test_a_dim_symbolic_in_onnx_but_static_in_the_partition_builds_pinned_to_its_size():
    engine = build_engine(_relu_export(["n", 3], [(2, 2, 2), (3, 3, 3)]), BuildSettings()).engine
    assert len(engine) > 0


def test_a_dynamic_partition_input_builds_for_its_range():
    engine = build_engine(_relu_export(["n", 3], [(1, 4, 8), (3, 3, 3)]), BuildSettings()).engine
    assert len(engine) > 0


def test_a_static_network_needs_no_profile():
    assert len(build_engine(_relu_export([2, 3], [(2, 2, 2), (3, 3, 3)]), BuildSettings()).engine) > 0
