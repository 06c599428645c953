"""``et_tensorrt::quantize`` / ``et_tensorrt::dequantize``: the Q/DQ a TensorRT engine runs, in the aten partition
program after legalization (builder/quant_legalization.py), exported as ONNX ``QuantizeLinear`` /
``DequantizeLinear`` through the exporter's translation table (as ``kv_cache_op`` adds ``TensorScatter``).

Both are symmetric (TensorRT's only kind: no zero point). ``qtype`` names the quantized type: ``"int8"``,
``"int4"`` (values in [-8, 7] held in an int8 tensor, as torchao and PT2E hold them) or ``"float8_e4m3fn"``.

* ``dequantize(q, scale, axis, block_size, qtype)``: ``q * scale`` in ``scale``'s dtype. ``scale`` is 0-d (per
  tensor), 1-D along ``axis`` (per channel) or, with ``block_size``, of ``q``'s rank with ``q.shape[axis] /
  block_size`` along ``axis`` (ONNX's blocked DequantizeLinear, opset 21).
* ``quantize(x, scale, qtype)``: per tensor, ``x / scale`` rounded half to even and saturated to the type's
  range ([-128, 127] for int8: TensorRT's, whatever narrower range the program asked for), as TensorRT does.

torch.onnx has no int4 dtype: the translation casts an int4 ``q`` to ONNX INT4, and :func:`pack_int4_weights`
turns each such cast of an initializer into an INT4 initializer, stored packed two per byte (ONNX's and
TensorRT's layout), before the model leaves the exporter. The embedded program never holds these ops
(``host_program`` in quant_legalization.py spells them as aten arithmetic): the runtime never loads them.
"""

from __future__ import annotations

import numpy as np
import torch

ONNX_OPSET = 21  # DequantizeLinear's block_size and the INT4 type
QTYPES = {"int8": torch.int8, "int4": torch.int8, "float8_e4m3fn": torch.float8_e4m3fn}
RANGES = {"int8": (-128, 127), "int4": (-8, 7), "float8_e4m3fn": (-448.0, 448.0)}


def _check(qtype: str) -> None:
    if qtype not in QTYPES:
        raise ValueError(f"quantized type {qtype!r} is not one of {sorted(QTYPES)}")


@torch.library.custom_op("et_tensorrt::dequantize", mutates_args=())
def dequantize(q: torch.Tensor, scale: torch.Tensor, axis: int, block_size: int, qtype: str) -> torch.Tensor:
    _check(qtype)
    if scale.dim() > 0:
        if block_size:
            scale = scale.repeat_interleave(block_size, dim=axis)
        else:
            shape = [1] * q.dim()
            shape[axis] = -1
            scale = scale.reshape(shape)
    return q.to(scale.dtype) * scale


@dequantize.register_fake
def _(q, scale, axis, block_size, qtype):
    return q.new_empty(q.shape, dtype=scale.dtype)


@torch.library.custom_op("et_tensorrt::quantize", mutates_args=())
def quantize(x: torch.Tensor, scale: torch.Tensor, qtype: str) -> torch.Tensor:
    _check(qtype)
    lo, hi = RANGES[qtype]
    scaled = x / scale
    if qtype != "float8_e4m3fn":
        scaled = torch.round(scaled)
    return torch.clamp(scaled, lo, hi).to(QTYPES[qtype])


@quantize.register_fake
def _(x, scale, qtype):
    return x.new_empty(x.shape, dtype=QTYPES[qtype])


def _dequantize_linear(q, scale, axis, block_size, qtype):
    import onnx
    from onnxscript.values import Opset

    op = Opset("", ONNX_OPSET)
    if qtype == "int4":
        q = op.Cast(q, to=onnx.TensorProto.INT4)  # an initializer's cast: pack_int4_weights stores it as INT4
    if block_size:
        return op.DequantizeLinear(q, scale, axis=axis, block_size=block_size)
    return op.DequantizeLinear(q, scale, axis=axis)  # the axis is ignored for a 0-d scale


def _quantize_linear(x, scale, qtype):
    import ml_dtypes
    import onnx_ir as ir
    from onnxscript.values import Opset

    op = Opset("", ONNX_OPSET)
    zero = np.zeros((), dtype=np.int8 if qtype == "int8" else ml_dtypes.float8_e4m3fn)
    # The zero point's type is the quantized type (TensorRT reads it from there; it must be 0).
    return op.QuantizeLinear(x, scale, op.Constant(value=ir.tensor(zero, name="zero_point")))


DEQUANTIZE = torch.ops.et_tensorrt.dequantize.default
QUANTIZE = torch.ops.et_tensorrt.quantize.default
TRANSLATIONS = {DEQUANTIZE: _dequantize_linear, QUANTIZE: _quantize_linear}


def uses_quantization(ep) -> bool:
    return any(n.op == "call_function" and n.target in TRANSLATIONS for n in ep.graph.nodes)


def pack_int4_weights(model) -> int:
    """Each ``Cast(initializer, to=INT4)`` of an ``onnx_ir`` model becomes an INT4 initializer (packed two per
    byte), the cast removed; returns how many. (The exporter folds the casts of small initializers itself.)"""
    import ml_dtypes
    import onnx
    import onnx_ir as ir

    graph = model.graph
    packed = 0
    for node in list(graph):
        if node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
            continue
        to = node.attributes.get("to")
        source = node.inputs[0]
        if to is None or to.value != onnx.TensorProto.INT4 or source is None or not source.is_initializer():
            continue
        values = source.const_value.numpy()
        if values.min(initial=0) < -8 or values.max(initial=0) > 7:
            raise ValueError(f"initializer {source.name!r} holds values outside int4's [-8, 7]")
        name = f"{source.name}_int4"
        value = ir.Value(name=name, shape=source.shape, type=ir.TensorType(ir.DataType.INT4))
        value.const_value = ir.tensor(values.astype(ml_dtypes.int4), name=name)
        graph.register_initializer(value)
        ir.convenience.replace_all_uses_with(node.outputs[0], value)
        graph.remove(node, safe=True)
        if not source.uses() and not source.is_graph_output():
            graph.initializers.pop(source.name)
        packed += 1
    return packed
