"""Limits of TensorRT on the arguments of ops in the table: why a node of a supported op is refused.

Each check returns the reason (the detail of an ``unsupported-args`` refusal) or None. Some ops are
delegated in forms ONNX or TensorRT lack, and ``builder/op_rewrites.py`` rewrites them into ones they have
(adaptive pooling, index_put with a mask or with accumulate=True); the functions that decide whether a
node can be rewritten live here, so the partitioner and the rewrite cannot disagree.
"""

from __future__ import annotations

import math
import operator

import torch

from .supported_ops import BITWISE, op_name


def _arg(node, index: int, name: str, default=None):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _rank(value) -> int:
    val = getattr(value, "meta", {}).get("val")
    return val.dim() if isinstance(val, torch.Tensor) else -1


def _arg_reduction_limit(node) -> str | None:
    if _arg(node, 1, "dim") is None or _rank(node.args[0]) < 2:
        return "TensorRT's ArgMax/ArgMin needs an explicit dim on an input of rank >= 2"
    return None


def _indices_used(node) -> bool:
    """Whether output 1 (the indices) of a (values, indices) pooling node is read."""
    return any(
        user.target is operator.getitem and len(user.args) > 1 and user.args[1] == 1 and user.users
        for user in node.users
    )


_NO_INDICES = "TensorRT's MaxPool has no indices output"


def _max_pool_limit(node) -> str | None:
    dilation = _arg(node, 4, "dilation", 1)
    if any(d != 1 for d in (dilation if isinstance(dilation, (list, tuple)) else [dilation])):
        return "TensorRT's MaxPool takes no dilation"
    if _indices_used(node):
        return _NO_INDICES
    return None


def adaptive_pool_window(node) -> tuple | None:
    """(kernel, stride) of the plain pooling an adaptive 2-D or 3-D pooling node equals, or None.

    Adaptive pooling with an output size that divides the (static) input size has equal, disjoint
    windows: kernel = stride = input // output. ``edge_to_aten`` rewrites it to that pooling, which
    ONNX and TensorRT have; other sizes give overlapping windows of varying size, which they lack."""
    val = getattr(node.args[0], "meta", {}).get("val")
    output_size = _arg(node, 1, "output_size")
    if not isinstance(output_size, (list, tuple)) or len(output_size) not in (2, 3):
        return None
    spatial_rank = len(output_size)
    if not isinstance(val, torch.Tensor) or val.dim() not in (spatial_rank + 1, spatial_rank + 2):
        return None
    spatial = list(val.shape[-spatial_rank:])
    window = []
    for size, out in zip(spatial, output_size):
        out = size if out is None else out
        if not isinstance(size, int) or not isinstance(out, int) or out <= 0 or size % out:
            return None
        window.append(size // out)
    return tuple(window), tuple(window)


# Adaptive pooling op -> the plain pooling it becomes when its windows are equal (edge_to_aten).
ADAPTIVE_POOLING = {
    "aten.adaptive_avg_pool2d.default": "aten.avg_pool2d.default",
    "aten._adaptive_avg_pool2d.default": "aten.avg_pool2d.default",
    "aten.adaptive_max_pool2d.default": "aten.max_pool2d_with_indices.default",
    "aten.adaptive_avg_pool3d.default": "aten.avg_pool3d.default",
    "aten._adaptive_avg_pool3d.default": "aten.avg_pool3d.default",
    "aten.adaptive_max_pool3d.default": "aten.max_pool3d_with_indices.default",
}


AVERAGING_ADAPTIVE_POOL2D = ("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")


def adaptive_avg_pool2d_sizes(node) -> tuple | None:
    """((H, W), (OH, OW)) of a 2-D adaptive average pooling with static output sizes, else None. H and W may be
    sizes of a dynamic input (SymInt).

    Any such pooling (unequal, overlapping windows too) is two matrix products with averaging matrices,
    ``P_h @ x @ P_w^T`` (``op_rewrites``): constants over a static size, computed in the engine from the
    input's size over a dynamic one."""
    if op_name(node.target) not in AVERAGING_ADAPTIVE_POOL2D:
        return None
    val = getattr(node.args[0], "meta", {}).get("val")
    output_size = _arg(node, 1, "output_size")
    if not isinstance(val, torch.Tensor) or val.dim() not in (3, 4) or not isinstance(output_size, (list, tuple)):
        return None
    spatial = tuple(val.shape[-2:])
    out = tuple(s if o is None else o for s, o in zip(spatial, output_size))
    if len(out) != 2 or not all(isinstance(v, int) and v > 0 for v in out):
        return None  # an output size that is itself a size of the input: not a fixed number of windows
    if not all(isinstance(v, torch.SymInt) or (isinstance(v, int) and v > 0) for v in spatial):
        return None
    return spatial, out


def _adaptive_pool_limit(node) -> str | None:
    if adaptive_pool_window(node) is None and adaptive_avg_pool2d_sizes(node) is None:
        if op_name(node.target) in AVERAGING_ADAPTIVE_POOL2D:
            return "adaptive average pooling is delegated only with a static output size"
        return (
            "adaptive max and 3-D pooling are delegated only when the static input size is a multiple of "
            "the output size (equal windows: a plain pooling)"
        )
    if _indices_used(node):
        return _NO_INDICES
    return None


def _val(arg):
    return arg.meta.get("val") if hasattr(arg, "meta") else None


def _bool_only(node) -> str | None:
    for arg in node.args:
        val = _val(arg)
        if isinstance(val, torch.Tensor) and val.dtype != torch.bool:
            return f"TensorRT has no bitwise operations on {val.dtype} (bool tensors are delegated)"
    return None


def _is_mask(index) -> bool:
    val = _val(index)
    return isinstance(val, torch.Tensor) and val.dtype in (torch.bool, torch.uint8)


def _data_dependent(val) -> bool:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(val))


def _index_limit(node) -> str | None:
    if any(_is_mask(i) for i in node.args[1] if i is not None):
        return (
            "a boolean-mask index computed from the inputs selects a data-dependent number of elements "
            "(TensorRT-RTX has no NonZero; a constant mask is delegated); index with integer tensors, "
            "or use torch.where"
        )
    if _data_dependent(node.meta.get("val")):
        return "its output size depends on the data"
    return None


def index_put_mask(node) -> int | None:
    """The dim where the boolean mask of ``index_put(x, [None, ..., mask], values)`` starts, when it can be
    rewritten as ``torch.where`` (a static-shape op): one bool mask, only ``None`` around it, and values
    that broadcast without the data-dependent number of selected elements (a size-1 or absent dim there)."""
    indices = list(node.args[1])
    masks = [i for i, index in enumerate(indices) if index is not None]
    if len(masks) != 1 or _val(indices[masks[0]]) is None or _val(indices[masks[0]]).dtype != torch.bool:
        return None
    start = masks[0]
    x, mask, values = _val(node.args[0]), _val(indices[start]), _val(node.args[2])
    if not all(isinstance(t, torch.Tensor) for t in (x, mask, values)):
        return None
    rest = x.dim() - start - mask.dim()
    # sizes compared as expressions: comparing SymInts would add guards to the program
    if rest < 0 or [str(s) for s in mask.shape] != [str(s) for s in x.shape[start : start + mask.dim()]]:
        return None
    selected_dim = values.dim() - rest - 1  # the dim of values that lines up with the selected elements
    if selected_dim >= 0 and not (isinstance(values.shape[selected_dim], int) and values.shape[selected_dim] == 1):
        return None
    return start


def index_put_accumulate_dims(node) -> int | None:
    """How many leading dims the integer indices of ``index_put(x, indices, values, accumulate=True)``
    index, when it can be rewritten as a one-hot matrix product (TensorRT's ScatterND has no reduction):
    a floating-point ``x`` of static shape, integer indices of static shape for its leading dims."""
    indices = list(node.args[1])
    x = _val(node.args[0])
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point or not indices:
        return None
    if any(not isinstance(s, int) for s in x.shape) or len(indices) > x.dim():
        return None
    for index in indices:
        val = _val(index)
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.int64, torch.int32):
            return None
        if any(not isinstance(s, int) for s in val.shape):
            return None
    return len(indices)


def _index_put_limit(node) -> str | None:
    indices = node.args[1]
    if any(_is_mask(i) for i in indices if i is not None):
        if index_put_mask(node) is None:
            return (
                "a boolean mask is delegated as one bool mask (only None around it) whose values broadcast "
                "without the number of selected elements"
            )
        return None
    if _arg(node, 3, "accumulate", False) and index_put_accumulate_dims(node) is None:
        return (
            "TensorRT's ScatterND has no reduction: accumulate=True is delegated for a floating-point "
            "tensor of static shape indexed by integer tensors of static shape from dim 0"
        )
    return None


TOPK_MAX_K = 3840  # TensorRT's TopK layer


def _topk_limit(node) -> str | None:
    k = _arg(node, 1, "k")
    if not isinstance(k, int):
        return "TensorRT's TopK needs k known when the engine is built"
    if k > TOPK_MAX_K:
        return f"TensorRT's TopK takes k <= {TOPK_MAX_K}, got {k}"
    return None


def _sort_limit(node) -> str | None:
    """``sort`` is ONNX TopK with k the dim's size: TensorRT takes at most TOPK_MAX_K (checked when an engine runs,
    for a dynamic size), so the size's largest value must be within it. (``sort(stable=True)`` is not in the
    table: TensorRT's TopK promises no order among equal elements.)"""
    val = _val(node.args[0])
    if not isinstance(val, torch.Tensor) or val.dim() == 0:
        return None
    if val.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64):
        return f"TensorRT's TopK does not sort {val.dtype}"
    size = val.shape[_arg(node, 1, "dim", -1)]
    if isinstance(size, torch.SymInt):
        upper = size.node.shape_env.bound_sympy(size.node.expr).upper
        if not upper.is_finite:
            return f"TensorRT's TopK sorts at most {TOPK_MAX_K} elements; this dim's size has no upper bound"
        size = int(upper)
    if size > TOPK_MAX_K:
        return f"TensorRT's TopK sorts at most {TOPK_MAX_K} elements, this dim has up to {size}"
    return None


def _attention_limit(node) -> str | None:
    if _arg(node, 4, "dropout_p", 0.0):
        return "dropout_p must be 0 (an engine runs inference)"
    return None


def _contiguous_strides(sizes) -> list[int]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return strides[::-1]


def _dense_over_sizes(sizes, strides) -> bool:
    """Row-major strides for every dim that has more than one element (a size-1 dim's stride is never used)."""
    return all(size == 1 or stride == want for size, stride, want in zip(sizes, strides, _contiguous_strides(sizes)))


def as_strided_reshape(node) -> list[int] | None:
    """The sizes of the reshape an ``as_strided`` node equals, or None.

    ``as_strided(x, size, stride, 0)`` reads x's storage; when x is row-major (its own strides, as recorded)
    and ``stride`` is row-major for ``size`` with as many elements, every element lands where a reshape puts
    it. ExecuTorch's decomposition of a global adaptive average pooling over a dynamic size leaves such a
    node (``mean`` -> ``as_strided`` to the channels-last strides eager would give the 1x1 result)."""
    val = _val(node.args[0])
    sizes, strides = _arg(node, 1, "size"), _arg(node, 2, "stride")
    offset = _arg(node, 3, "storage_offset", None)
    if (
        not isinstance(val, torch.Tensor)
        or not isinstance(sizes, (list, tuple))
        or not isinstance(strides, (list, tuple))
    ):
        return None
    if offset not in (None, 0) or len(sizes) != len(strides):
        return None
    if offset == 0 and val.storage_offset() != 0:
        return None  # an explicit 0 is absolute: it would read before x's first element
    if not all(isinstance(v, int) for v in (*sizes, *strides, *val.shape, *val.stride())):
        return None  # symbolic sizes or strides: not provably a reshape
    if math.prod(sizes) != val.numel() or not _dense_over_sizes(list(val.shape), list(val.stride())):
        return None
    return list(sizes) if _dense_over_sizes(list(sizes), list(strides)) else None


def _as_strided_limit(node) -> str | None:
    if as_strided_reshape(node) is None:
        return "as_strided is delegated only where it equals a reshape (static row-major sizes and strides, offset 0)"
    return None


# Ops in the table whose TensorRT conversion has limits on their arguments (found by ExecuTorch's
# backend conformance suite); op name -> check returning why a node is refused, or None.
ARGUMENT_LIMITS = {
    "aten.argmax.default": _arg_reduction_limit,
    "aten.argmin.default": _arg_reduction_limit,
    "aten.max_pool2d.default": _max_pool_limit,
    "aten.max_pool2d_with_indices.default": _max_pool_limit,
    "aten.max_pool3d.default": _max_pool_limit,
    "aten.max_pool3d_with_indices.default": _max_pool_limit,
    **dict.fromkeys(ADAPTIVE_POOLING, _adaptive_pool_limit),
    **dict.fromkeys(BITWISE, _bool_only),
    "aten.index.Tensor": _index_limit,
    "aten.index_put.default": _index_put_limit,
    "aten.topk.default": _topk_limit,
    "aten.sort.default": _sort_limit,
    "aten.scaled_dot_product_attention.default": _attention_limit,
    "aten.as_strided.default": _as_strided_limit,
    "aten.as_strided_copy.default": _as_strided_limit,
}


def argument_refusal(name: str, node) -> str | None:
    check = ARGUMENT_LIMITS.get(name)
    return check(node) if check is not None else None
