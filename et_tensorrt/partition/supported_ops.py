"""The one table of ops our ONNX -> TensorRT engine builder converts, and the dtypes it takes.

The partitioner delegates only ops listed here; the engine builder imports the same table, so the two
cannot drift apart. Names are ``namespace.op.overload`` as ``str(OpOverload)`` spells them; an
ExecuTorch edge op is looked up by the aten op it wraps (``EdgeOpOverload._op``). Both the aten form
and the edge form (``*_copy`` view ops, ``dim_order_ops``) are listed. Deliberately absent:
``aten.nonzero`` (no TensorRT-RTX implementation) and every op with a data-dependent output shape.

Some ops are delegated in forms ONNX or TensorRT lack and ``backend/op_rewrites.py`` rewrites to ones
they have (adaptive pooling, index_put with a mask or with accumulate=True); the functions that decide
whether a node can be rewritten live here, so the partitioner and the rewrite cannot disagree.
"""

from __future__ import annotations

import operator

import torch

from .report import ReasonCode

_ELEMENTWISE = (
    "aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar",
    "aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar",
    "aten.div.Tensor_mode", "aten.rsub.Scalar", "aten.neg.default", "aten.abs.default",
    "aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.sqrt.default", "aten.rsqrt.default",
    "aten.exp.default", "aten.log.default", "aten.reciprocal.default", "aten.sin.default",
    "aten.cos.default", "aten.tanh.default", "aten.sigmoid.default", "aten.relu.default",
    "aten.gelu.default", "aten.silu.default", "aten.hardtanh.default", "aten.leaky_relu.default",
    "aten.clamp.default", "aten.clamp.Tensor", "aten.maximum.default", "aten.minimum.default",
    "aten.where.self", "aten.floor.default", "aten.ceil.default", "aten.erf.default",
    "aten.eq.Tensor", "aten.eq.Scalar", "aten.ne.Tensor", "aten.ne.Scalar", "aten.lt.Tensor",
    "aten.lt.Scalar", "aten.le.Tensor", "aten.le.Scalar", "aten.gt.Tensor", "aten.gt.Scalar",
    "aten.ge.Tensor", "aten.ge.Scalar", "aten.logical_and.default", "aten.logical_or.default",
    "aten.logical_not.default", "aten.logical_xor.default", "aten.log1p.default",
)
# Bitwise ops: ONNX And/Or/Xor/Not on bool tensors (TensorRT has no integer bitwise ops, see _bool_only).
_BITWISE = (
    "aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor", "aten.bitwise_not.default",
)
_REDUCTIONS = (
    "aten.sum.dim_IntList", "aten.sum.default", "aten.mean.dim", "aten.mean.default",
    "aten.amax.default", "aten.amin.default", "aten.argmax.default", "aten.argmin.default",
    "aten._softmax.default", "aten._log_softmax.default", "aten.softmax.int",
    "aten.log_softmax.int", "aten.any.default", "aten.any.dim", "aten.any.dims", "aten.all.default",
    "aten.all.dim", "aten.all.dims", "aten.cumsum.default", "aten.topk.default",
)
_LINEAR_ALGEBRA_AND_NN = (
    "aten.mm.default", "aten.bmm.default", "aten.matmul.default", "aten.addmm.default",
    "aten.linear.default", "aten.convolution.default", "aten.conv2d.default",
    "aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", "aten.avg_pool2d.default",
    "aten.avg_pool3d.default", "aten.max_pool3d.default", "aten.max_pool3d_with_indices.default",
    "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
    "aten.adaptive_max_pool2d.default", "aten.adaptive_avg_pool3d.default",
    "aten._adaptive_avg_pool3d.default", "aten.adaptive_max_pool3d.default",
    "aten.native_layer_norm.default", "aten.layer_norm.default",
    "aten._native_batch_norm_legit_no_training.default", "aten.embedding.default",
    # ONNX Resize: sizes or scales, align_corners or half-pixel coordinates
    "aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default", "aten.upsample_nearest2d.vec",
    "aten.upsample_nearest2d.default",
    # Only where it survives ExecuTorch's decompositions (to_edge's preserve_ops); else its parts are delegated.
    "aten.scaled_dot_product_attention.default",
)
# Shape and data movement; the "_copy" forms are what to_edge produces.
_SHAPE = (
    "aten.view.default", "aten.view_copy.default", "aten.reshape.default",
    "aten._unsafe_view.default", "aten.permute.default", "aten.permute_copy.default",
    "aten.transpose.int", "aten.t.default", "aten.expand.default", "aten.expand_copy.default",
    "aten.squeeze.dims", "aten.squeeze_copy.dims", "aten.squeeze.dim", "aten.squeeze_copy.dim",
    "aten.unsqueeze.default",
    "aten.unsqueeze_copy.default", "aten.slice.Tensor", "aten.slice_copy.Tensor",
    "aten.select.int", "aten.select_copy.int", "aten.cat.default", "aten.split_with_sizes.default",
    "aten.split_with_sizes_copy.default", "aten.index_select.default", "aten.gather.default",
    "aten.index.Tensor", "aten.index_put.default",
    "aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.alias_copy.default",
    "aten.flatten.using_ints",
)
# Casts. Device-changing ones are refused by the placement rule, not by this table.
_CASTS = (
    "aten._to_copy.default", "aten.to.dtype", "aten.to.device", "aten.to.dtype_layout",
    "aten.to.other", "dim_order_ops._to_dim_order_copy.default",
    "dim_order_ops._clone_dim_order.default",
)
_FACTORIES = (
    "aten.arange.default", "aten.arange.start", "aten.arange.start_step", "aten.full.default",
    "aten.full_like.default", "aten.zeros.default", "aten.zeros_like.default", "aten.ones.default",
    "aten.ones_like.default", "aten.scalar_tensor.default",
)
# Graph plumbing that computes nothing: delegable, but not counted toward min_block_size, so a
# partition of plumbing alone (e.g. a lone shape query) is always dropped.
NON_COMPUTE_OPS = frozenset({
    "operator.getitem",
    "aten._assert_tensor_metadata.default",
    "aten.sym_size.int",  # a shape query; an ONNX Shape inside the engine
    # Size arithmetic on SymInts (a flatten of a dynamic dim multiplies sizes): ONNX scalar math.
    "_operator.mul", "_operator.add", "_operator.sub", "_operator.floordiv",
})

# Ops that only re-describe memory (shape, order, aliasing). A partition of nothing else moves data into
# an engine and back without computing anything, so it is not worth an engine of its own.
VIEW_OPS = frozenset({
    "aten.view.default", "aten.view_copy.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.permute.default", "aten.permute_copy.default", "aten.transpose.int", "aten.t.default",
    "aten.expand.default", "aten.expand_copy.default", "aten.squeeze.dims", "aten.squeeze_copy.dims",
    "aten.squeeze.dim", "aten.squeeze_copy.dim", "aten.unsqueeze.default", "aten.unsqueeze_copy.default",
    "aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.alias_copy.default",
})

SUPPORTED_OPS = frozenset(
    _ELEMENTWISE + _BITWISE + _REDUCTIONS + _LINEAR_ALGEBRA_AND_NN + _SHAPE + _CASTS + _FACTORIES
) | NON_COMPUTE_OPS

CAST_OPS = frozenset(_CASTS) - {"dim_order_ops._clone_dim_order.default"}

# float64 is absent on purpose: TensorRT narrows it to float32 without telling anyone.
SUPPORTED_DTYPES = frozenset({
    torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8,
    torch.uint8, torch.bool,
})


def aten_op(target):
    """The torch op behind a node target: an ExecuTorch ``EdgeOpOverload`` wraps it in ``._op``
    (an aten ``OpOverload`` also has an ``_op``, its C++ builtin, which is not what we want)."""
    if isinstance(target, torch._ops.OpOverload):
        return target
    inner = getattr(target, "_op", None)
    return inner if isinstance(inner, torch._ops.OpOverload) else target


def op_name(target) -> str:
    """``namespace.op.overload`` of an aten op, an edge op (by its aten op) or a Python callable."""
    target = aten_op(target)
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)
    if target is operator.getitem:
        return "operator.getitem"
    module = getattr(target, "__module__", None) or ""
    return f"{module}.{getattr(target, '__name__', repr(target))}".lstrip(".")


def packet_name(name: str) -> str:
    """``aten.mul.Tensor`` -> ``aten.mul``."""
    return name.rsplit(".", 1)[0] if name.count(".") >= 2 else name


def user_spellings(name: str) -> set[str]:
    """Every name a user may exclude an op by (``torch_executed_ops``): the overload, its packet, and for
    the functional ``*_copy`` view ops ``to_edge`` makes (``aten.view_copy.default``) the view they came from
    (``aten.view.default``, ``aten.view``)."""
    names = {name, packet_name(name)}
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    if namespace == "aten" and packet.endswith("_copy") and packet != "_to_copy":
        view = f"aten.{packet[: -len('_copy')]}"
        names |= {view, f"{view}.{overload}" if overload else view}
    return names


def is_supported_op(target) -> bool:
    return op_name(target) in SUPPORTED_OPS


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
    """((H, W), (OH, OW)) of a 2-D adaptive average pooling with static spatial sizes, else None.

    Any such pooling (unequal, overlapping windows too) is two matrix products with constant averaging
    matrices, ``P_h @ x @ P_w^T`` (``op_rewrites``)."""
    if op_name(node.target) not in AVERAGING_ADAPTIVE_POOL2D:
        return None
    val = getattr(node.args[0], "meta", {}).get("val")
    output_size = _arg(node, 1, "output_size")
    if not isinstance(val, torch.Tensor) or val.dim() not in (3, 4) or not isinstance(output_size, (list, tuple)):
        return None
    spatial = tuple(val.shape[-2:])
    out = tuple(s if o is None else o for s, o in zip(spatial, output_size))
    if len(out) != 2 or not all(isinstance(v, int) and v > 0 for v in spatial + out):
        return None
    return spatial, out


def _adaptive_pool_limit(node) -> str | None:
    if adaptive_pool_window(node) is None and adaptive_avg_pool2d_sizes(node) is None:
        if op_name(node.target) in AVERAGING_ADAPTIVE_POOL2D:
            return "adaptive average pooling is delegated only over static spatial sizes"
        return ("adaptive max and 3-D pooling are delegated only when the static input size is a multiple of "
                "the output size (equal windows: a plain pooling)")
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
        return ("a boolean-mask index selects a data-dependent number of elements (TensorRT-RTX has no "
                "NonZero); index with integer tensors, or use torch.where")
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
            return ("a boolean mask is delegated as one bool mask (only None around it) whose values broadcast "
                    "without the number of selected elements")
        return None
    if _arg(node, 3, "accumulate", False) and index_put_accumulate_dims(node) is None:
        return ("TensorRT's ScatterND has no reduction: accumulate=True is delegated for a floating-point "
                "tensor of static shape indexed by integer tensors of static shape from dim 0")
    return None


TOPK_MAX_K = 3840  # TensorRT's TopK layer


def _topk_limit(node) -> str | None:
    k = _arg(node, 1, "k")
    if not isinstance(k, int):
        return "TensorRT's TopK needs k known when the engine is built"
    if k > TOPK_MAX_K:
        return f"TensorRT's TopK takes k <= {TOPK_MAX_K}, got {k}"
    return None


def _attention_limit(node) -> str | None:
    if _arg(node, 4, "dropout_p", 0.0):
        return "dropout_p must be 0 (an engine runs inference)"
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
    **dict.fromkeys(_BITWISE, _bool_only),
    "aten.index.Tensor": _index_limit,
    "aten.index_put.default": _index_put_limit,
    "aten.topk.default": _topk_limit,
    "aten.scaled_dot_product_attention.default": _attention_limit,
}


def argument_refusal(name: str, node) -> str | None:
    check = ARGUMENT_LIMITS.get(name)
    return check(node) if check is not None else None


def dtype_refusal(dtype: torch.dtype) -> ReasonCode | None:
    """The reason code a tensor of ``dtype`` is refused with, or None when TensorRT takes it."""
    if dtype in SUPPORTED_DTYPES:
        return None
    if dtype.is_complex:
        return ReasonCode.DTYPE_COMPLEX
    if dtype == torch.float64:
        return ReasonCode.DTYPE_FLOAT64
    return ReasonCode.DTYPE_UNSUPPORTED
