"""``et_tensorrt::kv_cache_update``: a KV-cache write along the sequence axis, exported as ONNX ``TensorScatter``.

torch.onnx has no TensorScatter: ``index_copy``/``index_put`` lower to ScatterND, which TensorRT runs out of
place. The state-lifting stage (``state_lifting``) rewrites a cache write into this op, and the exporter's
translation table turns it into ``TensorScatter(cache, update, write_indices, axis=-2, mode="linear")``
(opset 24), which TensorRT's ONNX parser makes an IKVCacheUpdateLayer: the engine's cache output aliases its
cache input, and the caller binds both to one device buffer (the delegate's state).

Semantics (ONNX TensorScatter, linear mode): ``cache [B, H, S_max, D]``, ``update [B, H, S, D]``,
``write_indices [B]``; row ``b`` of the result is the cache with positions ``write_indices[b] ..
write_indices[b] + S - 1`` replaced by ``update[b]``. Ahead-of-time only: the embedded program keeps the
original ``index_put``, and the runtime never loads this op.
"""

from __future__ import annotations

import torch

ONNX_OPSET = 24  # TensorScatter's opset
AXIS = -2  # the only axis TensorRT's KV-cache layer updates


@torch.library.custom_op("et_tensorrt::kv_cache_update", mutates_args=())
def kv_cache_update(cache: torch.Tensor, update: torch.Tensor, write_indices: torch.Tensor) -> torch.Tensor:
    out = cache.clone()
    length = update.shape[AXIS]
    for b in range(cache.shape[0]):
        start = int(write_indices[b])
        if start < 0 or start + length > cache.shape[AXIS]:
            raise IndexError(
                f"KV-cache write of {length} positions at {start} is outside the cache's {cache.shape[AXIS]}"
            )
        out[b, :, start : start + length] = update[b]
    return out


@kv_cache_update.register_fake
def _(cache, update, write_indices):
    return torch.empty_like(cache)


def _tensor_scatter(cache, update, write_indices):
    from onnxscript.values import Opset

    return Opset("", ONNX_OPSET).TensorScatter(cache, update, write_indices, axis=AXIS, mode="linear")


TRANSLATIONS = {torch.ops.et_tensorrt.kv_cache_update.default: _tensor_scatter}
