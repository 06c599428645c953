"""Derive a partition's RECIPE (et_tensorrt.format.recipe): its ONNX graph without the initializers' bytes, a recipe
per initializer over the embedded program's WEIGHTS, and the build header.

The initializer recipes are REFIT_MAP's (backend/refit_derivation.py: same derivation, same exact byte-for-byte
verification, RAW bytes only for what no recipe explains), so a weight is stored once, in WEIGHTS, however many
engines are built from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from et_tensorrt import trt
from et_tensorrt.backend.refit_derivation import RefitPlan, derive_refit_map, verify_refit_map
from et_tensorrt.builder import onnx_weights
from et_tensorrt.builder.recipe_build import header_for
from et_tensorrt.format import recipe as recipe_mod

# Where an initializer's bytes "are" in the weightless graph: the export's own in-memory location (no file behind
# it). TensorRT's parser never reads it (every initializer is handed over from memory), and a missing one fails
# the parse by its name instead of reading garbage.
EXTERNAL_LOCATION = onnx_weights.LOCATION


@dataclass
class RecipePlan:
    payload: bytes  # the RECIPE section
    map: RefitPlan  # the initializers' recipes (shared with a weights="refit" REFIT_MAP of the same ONNX)
    graph_bytes: int  # the weightless graph's size
    raw_bytes: int  # initializer bytes stored raw in the map (not rebuilt from WEIGHTS)


def weightless_graph(export) -> bytes:
    """The export's ONNX graph (``OnnxExport.model``: its large initializers already external references, see
    builder/onnx_weights.py) with every other non-empty initializer made one too (``EXTERNAL_LOCATION``, its
    byte length): names, types and dims stay, no weight bytes. The nodes' provenance (the exporter's
    ``pkg.torch.onnx.*`` metadata and doc strings: ~85% of a transformer's graph bytes; TensorRT reads neither)
    is left out too."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(export.model)
    for init in model.graph.initializer:
        if onnx_weights.is_external(init):
            continue
        nbytes = len(numpy_helper.to_array(init).tobytes())
        if nbytes == 0:
            continue  # nothing to hold: stays inline, as in the export
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            init.ClearField(name)
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in (("location", EXTERNAL_LOCATION), ("offset", "0"), ("length", str(nbytes))):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx_weights.check_proto_size("the build recipe", model.ByteSize())
    return model.SerializeToString()


def aot_engine(target_archs: tuple[str, ...], gpu: str | None) -> dict:
    """What the blob's ahead-of-time engine runs on: the builder's flavour and version, its targets (named, or
    TensorRT-RTX's default portable set), and for TensorRT (no target API) the GPU it was built on."""
    flavour = trt.default()
    targets = [trt.normalize_arch(a) for a in target_archs] or list(flavour.default_targets())
    return recipe_mod.engine_header(flavour, targets, gpu)


def derive_recipe(export, weights, aten_ep, precision: str, workspace_bytes: int | None, engine: dict) -> RecipePlan:
    """The RECIPE of an ONNX export built from a program with these WEIGHTS (``aten_ep``: for the batch norms the
    export folds), every initializer's recipe verified byte for byte against the export."""
    plan = derive_refit_map(export, weights, aten_ep)
    tensors = [w.tensor.detach().cpu() for w in weights]
    verify_refit_map(export, plan.entries, tensors, plan.payload, [w.name for w in weights])
    graph = weightless_graph(export)
    header = header_for(export, precision, workspace_bytes, engine)
    return RecipePlan(recipe_mod.encode(header, graph, plan.payload), plan, len(graph), plan.raw_bytes)
