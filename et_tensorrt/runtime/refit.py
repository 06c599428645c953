"""Refitting a weight-stripped engine (blob with REFIT_MAP, ``weights="refit"``) at delegate init, on a GPU.

The engine was built with STRIP_PLAN + REFIT_IDENTICAL: it holds no refittable weights, and TensorRT optimized
it assuming the refit weights are exactly the build's. Every weight TensorRT asks for (``get_all_weights``) is
rebuilt from the embedded program's WEIGHTS through its REFIT_MAP recipe (et_tensorrt.format.refit_map.rebuild, the
code that verified the map byte for byte against the ONNX model at lowering time) and handed to
``trt.Refitter`` as host memory; the refit copies it to the GPU. Any gap (a weight without a recipe, a dtype
or size TensorRT does not expect, a refit TensorRT refuses) is a :class:`RefitError` naming it, and the
engine is not used.
"""

from __future__ import annotations

import torch

from ..embedded_program.loader import weight_tensors
from ..format.blob import Blob
from ..format.refit_map import rebuild
from ..trt import data_type_name


class RefitError(RuntimeError):
    """The weight-stripped engine could not be refitted from the blob; the message says which weight and why."""


def _trt_dtype(trt, dtype: torch.dtype):
    value = getattr(trt.DataType, data_type_name(dtype) or "", None)
    if value is None:
        raise RefitError(f"TensorRT has no data type for {dtype}")
    return value


def refit_engine(trt, engine, blob: Blob, logger=None, refitter=None) -> int:
    """Refit ``engine`` from ``blob``; returns the number of weights set. ``refitter`` is injectable (tests)."""
    if refitter is None:
        refitter = trt.Refitter(engine, logger)
    entries = {e.name: e for e in blob.refit_entries}
    weights = weight_tensors(blob)
    wanted = list(refitter.get_all_weights())
    missing = sorted(set(wanted) - set(entries))
    if missing:
        raise RefitError(
            f"the engine asks for weight(s) the blob's REFIT_MAP does not describe: {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''} (re-lower the model with this et_tensorrt version)"
        )
    keep = []  # host tensors TensorRT reads during refit_cuda_engine: alive until it returns
    for name in wanted:
        tensor = rebuild(entries[name], weights, blob.refit_map)
        prototype = refitter.get_weights_prototype(name) if hasattr(refitter, "get_weights_prototype") else None
        if prototype is not None and int(getattr(prototype, "size", tensor.numel())) != tensor.numel():
            raise RefitError(
                f"weight {name!r}: the engine expects {prototype.size} elements, the REFIT_MAP "
                f"rebuilds {tensor.numel()}"
            )
        keep.append(tensor)
        if not refitter.set_named_weights(
            name, trt.Weights(_trt_dtype(trt, tensor.dtype), tensor.data_ptr(), tensor.numel())
        ):
            raise RefitError(f"TensorRT refused weight {name!r} ({tensor.dtype}, {tuple(tensor.shape)})")
    still = list(refitter.get_missing_weights())
    if still:
        raise RefitError(f"after setting every weight TensorRT still misses {still[:5]}")
    if not refitter.refit_cuda_engine():
        raise RefitError("TensorRT's refit_cuda_engine failed")
    return len(wanted)
