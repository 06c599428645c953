"""The RECIPE's AOT side (backend/recipe_derivation.py) on a hand-made ONNX model: the graph keeps every
initializer's name, type and dims but none of its bytes; each initializer is rebuilt from WEIGHTS or stored raw
(a 0-d constant included); TensorRT parses the weightless graph with the initializers handed over from memory
and builds the same engine it builds from the whole model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from et_tensorrt.backend.recipe_derivation import EXTERNAL_LOCATION, weightless_graph
from et_tensorrt.backend.refit_derivation import derive_refit_map, verify_refit_map
from et_tensorrt.builder.onnx_export import OnnxExport, TensorInfo
from et_tensorrt.format import blob as B
from et_tensorrt.format import recipe as R


def _model(weight: torch.Tensor) -> bytes:
    """y = (x @ weight^T) * 0.5: the transposed weight (from WEIGHTS) and a 0-d constant (raw)."""
    w_t = numpy_helper.from_array(weight.t().contiguous().numpy(), "w_t")
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_t"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w_t, half],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


INPUTS = [TensorInfo("x", torch.float32, torch.device("cpu"), (B.DimRange.static(2), B.DimRange.static(8)), ())]
OUTPUTS = [TensorInfo("y", torch.float32, torch.device("cpu"), (), ())]


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    weights = [B.Weight("fc.weight", "parameter", torch.randn(4, 8))]
    export = OnnxExport(_model(weights[0].tensor), 17, INPUTS, OUTPUTS)  # every initializer inline
    return export, weights, derive_refit_map(export, weights)


def test_the_graph_keeps_no_initializer_bytes(parts):
    export, _, _ = parts
    light = onnx.load_from_string(weightless_graph(export))
    for init in light.graph.initializer:
        assert init.data_location == TensorProto.EXTERNAL and not init.raw_data and not init.float_data
        assert {e.key: e.value for e in init.external_data}["location"] == EXTERNAL_LOCATION
    assert [(i.name, list(i.dims)) for i in light.graph.initializer] == [("w_t", [8, 4]), ("half", [])]


def test_each_initializer_is_rebuilt_from_weights_or_stored_raw(parts):
    export, weights, plan = parts
    by_name = {e.name: e for e in plan.entries}
    assert [s.op for s in by_name["w_t"].steps] == [1, 4]  # SOURCE fc.weight, PERMUTE
    assert by_name["half"].raw and plan.raw_bytes == 4  # the 0-d constant
    recipe = R.Recipe(R.VERSION, {}, b"graph", plan.payload, plan.entries, b"{}")
    assert recipe.raw_bytes == 4 and recipe.nbytes == 2 + 5 + len(plan.payload)
    verify_refit_map(export, plan.entries, [w.tensor for w in weights], plan.payload)


def test_tensorrt_builds_the_same_engine_from_the_weightless_graph(parts):
    trt_rtx = pytest.importorskip("tensorrt_rtx")
    from et_tensorrt.builder.engine_builder import BuildSettings, build_engine

    export, weights, plan = parts
    whole = build_engine(export, BuildSettings()).engine.to_bytes()
    recipe = R.Recipe(R.VERSION, {}, weightless_graph(export), plan.payload, plan.entries)
    tensors = R.initializers(recipe, [w.tensor for w in weights])
    light = build_engine(OnnxExport(recipe.graph, 17, INPUTS, OUTPUTS, initializers=tensors), BuildSettings())
    light = light.engine.to_bytes()
    assert light == whole and light[:4] == b"vtrt" and trt_rtx is not None
