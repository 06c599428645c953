"""The one table of ops our ONNX -> TensorRT engine builder converts, and the dtypes it takes.

The partitioner delegates only ops listed here; the engine builder imports the same table, so the two
cannot drift apart. Names are ``namespace.op.overload`` as ``str(OpOverload)`` spells them; an
ExecuTorch edge op is looked up by the aten op it wraps (``EdgeOpOverload._op``). Both the aten form
(``explain`` on a plain ``torch.export`` program) and the edge form (``*_copy`` view ops,
``dim_order_ops``) are listed. Deliberately absent: ``aten.nonzero`` (no TensorRT-RTX
implementation) and every op with a data-dependent output shape.
"""

from __future__ import annotations

import operator
from typing import Optional

import torch

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
    "aten.logical_not.default",
)
_REDUCTIONS = (
    "aten.sum.dim_IntList", "aten.sum.default", "aten.mean.dim", "aten.mean.default",
    "aten.amax.default", "aten.amin.default", "aten.argmax.default", "aten.argmin.default",
    "aten._softmax.default", "aten._log_softmax.default", "aten.softmax.int",
    "aten.log_softmax.int",
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
    "_operator.mod", "_operator.neg", "torch.sym_max", "torch.sym_min",  # window padding (swin), ceil division
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
    _ELEMENTWISE + _REDUCTIONS + _LINEAR_ALGEBRA_AND_NN + _SHAPE + _CASTS + _FACTORIES
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


def is_supported_op(target) -> bool:
    return op_name(target) in SUPPORTED_OPS


def _arg(node, index: int, name: str, default=None):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _rank(value) -> int:
    val = getattr(value, "meta", {}).get("val")
    return val.dim() if isinstance(val, torch.Tensor) else -1


def _arg_reduction_limit(node) -> Optional[str]:
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


def _max_pool_limit(node) -> Optional[str]:
    dilation = _arg(node, 4, "dilation", 1)
    if any(d != 1 for d in (dilation if isinstance(dilation, (list, tuple)) else [dilation])):
        return "TensorRT's MaxPool takes no dilation"
    if _indices_used(node):
        return _NO_INDICES
    return None


def adaptive_pool_window(node) -> Optional[tuple]:
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


def _adaptive_pool_limit(node) -> Optional[str]:
    if adaptive_pool_window(node) is None:
        return ("adaptive pooling is delegated only when the static input size is a multiple of "
                "the output size (equal windows: a plain pooling)")
    if _indices_used(node):
        return _NO_INDICES
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
}


def argument_refusal(name: str, node) -> Optional[str]:
    check = ARGUMENT_LIMITS.get(name)
    return check(node) if check is not None else None


def dtype_refusal(dtype: torch.dtype) -> Optional[str]:
    """The reason code a tensor of ``dtype`` is refused with, or None when TensorRT takes it."""
    if dtype in SUPPORTED_DTYPES:
        return None
    if dtype.is_complex:
        return "dtype:complex"
    if dtype == torch.float64:
        return "dtype:float64"
    return "dtype:unsupported"
