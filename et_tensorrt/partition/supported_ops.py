"""The one table of ops our ONNX -> TensorRT engine builder converts, and the dtypes it takes.

The partitioner delegates only ops listed here; the engine builder imports the same table, so the two
cannot drift apart. Names are ``namespace.op.overload`` as ``str(OpOverload)`` spells them; an
ExecuTorch edge op is looked up by the aten op it wraps (``EdgeOpOverload._op``). Both the aten form
and the edge form (``*_copy`` view ops, ``dim_order_ops``) are listed. Deliberately absent:
``aten.nonzero`` (no TensorRT-RTX implementation) and every op with a data-dependent output shape.

What TensorRT cannot do with the arguments of an op in the table is in ``argument_limits.py``.
"""

from __future__ import annotations

import operator

import torch

from .report import ReasonCode

_ELEMENTWISE = (
    "aten.add.Tensor",
    "aten.add.Scalar",
    "aten.sub.Tensor",
    "aten.sub.Scalar",
    "aten.mul.Tensor",
    "aten.mul.Scalar",
    "aten.div.Tensor",
    "aten.div.Scalar",
    "aten.div.Tensor_mode",
    "aten.rsub.Scalar",
    "aten.neg.default",
    "aten.abs.default",
    "aten.pow.Tensor_Scalar",
    "aten.pow.Tensor_Tensor",
    "aten.sqrt.default",
    "aten.rsqrt.default",
    "aten.exp.default",
    "aten.log.default",
    "aten.reciprocal.default",
    "aten.sin.default",
    "aten.cos.default",
    "aten.tanh.default",
    "aten.sigmoid.default",
    "aten.relu.default",
    "aten.gelu.default",
    "aten.silu.default",
    "aten.hardtanh.default",
    "aten.leaky_relu.default",
    "aten.clamp.default",
    "aten.clamp.Tensor",
    "aten.maximum.default",
    "aten.minimum.default",
    "aten.where.self",
    "aten.where.ScalarSelf",
    "aten.where.ScalarOther",
    "aten.where.Scalar",
    "aten.floor.default",
    "aten.ceil.default",
    "aten.erf.default",
    "aten.eq.Tensor",
    "aten.eq.Scalar",
    "aten.ne.Tensor",
    "aten.ne.Scalar",
    "aten.lt.Tensor",
    "aten.lt.Scalar",
    "aten.le.Tensor",
    "aten.le.Scalar",
    "aten.gt.Tensor",
    "aten.gt.Scalar",
    "aten.ge.Tensor",
    "aten.ge.Scalar",
    "aten.logical_and.default",
    "aten.logical_or.default",
    "aten.logical_not.default",
    "aten.logical_xor.default",
    "aten.log1p.default",
    # ONNX Mod(fmod=1): C's truncating remainder, the sign of the dividend (torch.roll's index arithmetic)
    "aten.fmod.Scalar",
    "aten.fmod.Tensor",
)
# Bitwise ops: ONNX And/Or/Xor/Not on bool tensors (TensorRT has no integer bitwise ops: argument_limits).
BITWISE = (
    "aten.bitwise_and.Tensor",
    "aten.bitwise_or.Tensor",
    "aten.bitwise_xor.Tensor",
    "aten.bitwise_not.default",
)
_REDUCTIONS = (
    "aten.sum.dim_IntList",
    "aten.sum.default",
    "aten.mean.dim",
    "aten.mean.default",
    "aten.amax.default",
    "aten.amin.default",
    "aten.argmax.default",
    "aten.argmin.default",
    "aten._softmax.default",
    "aten._log_softmax.default",
    "aten.softmax.int",
    "aten.log_softmax.int",
    "aten.any.default",
    "aten.any.dim",
    "aten.any.dims",
    "aten.all.default",
    "aten.all.dim",
    "aten.all.dims",
    "aten.cumsum.default",
    "aten.topk.default",
    # ONNX TopK over the whole dim (a MoE's routed rows sorted by expert); not sort.stable (argument_limits)
    "aten.sort.default",
)
_LINEAR_ALGEBRA_AND_NN = (
    "aten.mm.default",
    "aten.bmm.default",
    "aten.matmul.default",
    "aten.addmm.default",
    "aten.linear.default",
    "aten.convolution.default",
    "aten.conv2d.default",
    "aten.max_pool2d.default",
    "aten.max_pool2d_with_indices.default",
    "aten.avg_pool2d.default",
    "aten.avg_pool3d.default",
    "aten.max_pool3d.default",
    "aten.max_pool3d_with_indices.default",
    "aten.adaptive_avg_pool2d.default",
    "aten._adaptive_avg_pool2d.default",
    "aten.adaptive_max_pool2d.default",
    "aten.adaptive_avg_pool3d.default",
    "aten._adaptive_avg_pool3d.default",
    "aten.adaptive_max_pool3d.default",
    "aten.native_layer_norm.default",
    "aten.layer_norm.default",
    "aten._native_batch_norm_legit_no_training.default",
    "aten.native_group_norm.default",  # ONNX GroupNormalization (Moonshine's first convolution)
    "aten.embedding.default",
    # ONNX Resize: sizes or scales, align_corners or half-pixel coordinates
    "aten.upsample_bilinear2d.vec",
    "aten.upsample_bilinear2d.default",
    "aten.upsample_nearest2d.vec",
    "aten.upsample_nearest2d.default",
    # Only where it survives ExecuTorch's decompositions (to_edge's preserve_ops); else its parts are delegated.
    "aten.scaled_dot_product_attention.default",
)
# Ops that only re-describe memory (shape, order, aliasing). A partition of nothing else moves data into
# an engine and back without computing anything, so it is not worth an engine of its own. The "_copy" forms
# are what to_edge produces.
_VIEWS = (
    "aten.view.default",
    "aten.view_copy.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.permute.default",
    "aten.permute_copy.default",
    "aten.transpose.int",
    "aten.t.default",
    "aten.expand.default",
    "aten.expand_copy.default",
    "aten.squeeze.dims",
    "aten.squeeze_copy.dims",
    "aten.squeeze.dim",
    "aten.squeeze_copy.dim",
    "aten.unsqueeze.default",
    "aten.unsqueeze_copy.default",
    "aten.clone.default",
    "aten.contiguous.default",
    "aten.alias.default",
    "aten.alias_copy.default",
)
VIEW_OPS = frozenset(_VIEWS)
# Shape and data movement: the views and the ops that select or combine data.
_SHAPE = _VIEWS + (
    "aten.slice.Tensor",
    "aten.slice_copy.Tensor",
    "aten.select.int",
    "aten.select_copy.int",
    "aten.cat.default",
    "aten.split_with_sizes.default",
    "aten.split_with_sizes_copy.default",
    "aten.index_select.default",
    "aten.gather.default",
    "aten.index.Tensor",
    "aten.index_put.default",
    "aten.flatten.using_ints",
    "aten.repeat.default",  # ONNX Tile (HF's position ids: arange(...).unsqueeze(0).repeat(batch, 1))
    # ONNX ScatterND over the slice's positions (start/end may be sizes: swin's shifted-window mask)
    "aten.slice_scatter.default",
    # ONNX Pad, constant mode; the pads may be sizes (swin pads each image to whole windows)
    "aten.constant_pad_nd.default",
    # the functional form of ``dst.copy_(src)``: src broadcast to dst's shape and cast to its dtype
    "aten.copy.default",
    # only where it equals a reshape (argument_limits.as_strided_reshape; op_rewrites makes it one)
    "aten.as_strided.default",
    "aten.as_strided_copy.default",
)
# Casts. Device-changing ones are refused by the placement rule, not by this table.
_CASTS = (
    "aten._to_copy.default",
    "aten.to.dtype",
    "aten.to.device",
    "aten.to.dtype_layout",
    "aten.to.other",
    "dim_order_ops._to_dim_order_copy.default",
    "dim_order_ops._clone_dim_order.default",
)
_FACTORIES = (
    "aten.arange.default",
    "aten.arange.start",
    "aten.arange.start_step",
    "aten.full.default",
    "aten.full_like.default",
    "aten.zeros.default",
    "aten.zeros_like.default",
    "aten.ones.default",
    "aten.ones_like.default",
    "aten.scalar_tensor.default",
)
# Quantize / dequantize / choose_qparams (PT2E's ``quantized_decomposed``, torchao's affine ops): delegated when
# TensorRT can run them (``et_tensorrt.quantization.qdq`` reads each node and decides; what it cannot run is
# refused there), into the engine of the ops they feed. Plumbing like the rows below: they do not count toward
# min_block_size.
QUANTIZATION_OPS = frozenset(
    [
        f"quantized_decomposed.{q}_per_tensor.{o}"
        for q in ("quantize", "dequantize")
        for o in ("default", "tensor", "tensor2")
    ]
    + [
        f"quantized_decomposed.{q}_per_{g}.default"
        for q in ("quantize", "dequantize")
        for g in ("channel", "token", "channel_group")
    ]
    + [
        "quantized_decomposed.choose_qparams.tensor",
        "quantized_decomposed.choose_qparams_symmetric.tensor",
        "quantized_decomposed.choose_qparams_per_token.default",
        "quantized_decomposed.choose_qparams_per_token_asymmetric.default",
        "torchao.quantize_affine.default",
        "torchao.dequantize_affine.default",
        "torchao.choose_qparams_affine.default",
    ]
)
# Graph plumbing that computes nothing: delegable, but not counted toward min_block_size, so a
# partition of plumbing alone (e.g. a lone shape query) is always dropped.
NON_COMPUTE_OPS = (
    frozenset(
        {
            "operator.getitem",
            "aten._assert_tensor_metadata.default",
            "aten.sym_size.int",  # a shape query; an ONNX Shape inside the engine
            # Size arithmetic on SymInts (a flatten of a dynamic dim multiplies sizes): ONNX scalar math.
            "_operator.mul",
            "_operator.add",
            "_operator.sub",
            "_operator.floordiv",
            "_operator.mod",
            "_operator.neg",
            "torch.sym_max",
            "torch.sym_min",  # window padding (swin), ceil division
            # A value read as a size (ExecuTorch llama's ``input_pos[0].item()``: its KV write position) and the
            # range checks torch.export recorded on it: inside the engine it stays a tensor (no round trip through
            # the host); the checks are the delegate's (a state write's position guard) and PyTorch's.
            "aten._local_scalar_dense.default",
            "aten._assert_scalar.default",
            "aten.sym_constrain_range_for_size.default",
            "_operator.ge",
            "_operator.gt",
            "_operator.le",
            "_operator.lt",
            "_operator.eq",
            "_operator.ne",
            # ``torch._check(a <= x <= b)`` records its conjunction of SymBools; the assert that reads it is above.
            "_operator.and_",
            "_operator.or_",
            "_operator.not_",
        }
    )
    | QUANTIZATION_OPS
)


SUPPORTED_OPS = (
    frozenset(_ELEMENTWISE + BITWISE + _REDUCTIONS + _LINEAR_ALGEBRA_AND_NN + _SHAPE + _CASTS + _FACTORIES)
    | NON_COMPUTE_OPS
)

CAST_OPS = frozenset(_CASTS) - {"dim_order_ops._clone_dim_order.default"}

# float64 is absent on purpose: TensorRT narrows it to float32 without telling anyone.
SUPPORTED_DTYPES = frozenset(
    {
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.int8,
        torch.uint8,
        torch.bool,
    }
)


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


def dtype_refusal(dtype: torch.dtype) -> ReasonCode | None:
    """The reason code a tensor of ``dtype`` is refused with, or None when TensorRT takes it."""
    if dtype in SUPPORTED_DTYPES:
        return None
    if dtype.is_complex:
        return ReasonCode.DTYPE_COMPLEX
    if dtype == torch.float64:
        return ReasonCode.DTYPE_FLOAT64
    return ReasonCode.DTYPE_UNSUPPORTED
