"""The engine from a blob's RECIPE (format/recipe.py): the builder's view of a recipe (:func:`build_export`, for the
device build: et_tensorrt.runtime.device_build) and the RECIPE header of an ONNX export (:func:`header_for`, for
lowering: backend/recipe_derivation.py). Moved here from format/recipe.py, unchanged: they read the ONNX export and
the builder's profiles, which the format layer does not import.
"""

from __future__ import annotations

import torch

from et_tensorrt.builder.engine_builder import profile_shapes
from et_tensorrt.builder.onnx_export import OnnxExport, TensorInfo
from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format.blob import DimRange
from et_tensorrt.format.dtypes import scalar_type_code, scalar_type_dtype
from et_tensorrt.format.recipe import Recipe, initializers


def _dims(rows) -> tuple:
    return tuple(DimRange(*(int(v) for v in row)) for row in rows)


def build_export(recipe: Recipe, weights: list[torch.Tensor]):
    """The builder's view of the recipe: an ``OnnxExport`` of the weightless graph whose ``initializers`` are every
    non-empty initializer rebuilt from ``weights`` (fed to TensorRT's parser from memory, as lowering feeds the
    export's: builder/onnx_weights.py), and the engine's I/O read from the header. BlobFormatError when the
    header lacks a field."""
    h = recipe.header
    try:
        inputs = []
        for e in h["inputs"]:
            profiles = tuple(_dims(p) for p in e["profiles"])
            if e["size"]:
                (value,) = _dims(e["dims"])
                inputs.append(
                    TensorInfo(
                        e["name"], torch.int64, torch.device("cpu"), (), (value,), tuple(p[0] for p in profiles), value
                    )
                )
            else:
                dims = _dims(e["dims"])
                inputs.append(
                    TensorInfo(e["name"], scalar_type_dtype(e["dtype"]), torch.device("cpu"), dims, dims, profiles)
                )
        outputs = [
            TensorInfo(e["name"], scalar_type_dtype(e["dtype"]), torch.device("cpu"), (), ()) for e in h["outputs"]
        ]
        held = {name: t for name, t in initializers(recipe, weights).items() if t.numel()}  # empty ones stay inline
        export = OnnxExport(bytes(recipe.graph), int(h["onnx_opset"]), inputs, outputs, initializers=held)
        export.aliased = {str(k): str(v) for k, v in h.get("aliased", {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise BlobFormatError(f"delegate blob: the RECIPE header is malformed ({exc!r}); re-lower the model") from exc
    return export


def header_for(export, precision: str, workspace_bytes: int | None, engine: dict | None) -> dict:
    """The RECIPE header of an ONNX export (et_tensorrt.builder.onnx_export.OnnxExport): its engine inputs (in the
    ONNX graph's order) with their dim ranges and per-profile ranges, its outputs, state aliases, the precision and
    build options, and ``engine``: the ahead-of-time engine (flavour, version, targets, gpu) or None."""
    shapes = profile_shapes(export)  # per profile, per engine input
    inputs = []
    for i, info in enumerate(export.engine_inputs):
        rows = [[[d.min, d.opt, d.max] for d in profile[i]] for profile in shapes]
        dims = (
            [[info.value.min, info.value.opt, info.value.max]]
            if info.is_size
            else [[d.min, d.opt, d.max] for d in info.dims]
        )
        inputs.append(
            {
                "name": info.name,
                "dtype": scalar_type_code(info.dtype),
                "size": info.is_size,
                "dims": dims,
                "profiles": rows,
            }
        )
    return {
        "inputs": inputs,
        "outputs": [{"name": o.name, "dtype": scalar_type_code(o.dtype)} for o in export.outputs],
        "aliased": dict(export.aliased),
        "onnx_opset": export.opset,
        "precision": precision,
        "workspace_bytes": workspace_bytes,
        "engine": engine,
    }
