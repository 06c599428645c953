"""Quantize/dequantize nodes as the partitioner and the legalization stage read them: which op, which
tensor, which scale, and what TensorRT can do with it (a ``Verdict``). One reading for both, so the
partitioner's promise ("this Q/DQ goes into the engine") is what preprocess legalizes.

Ops read (edge or aten form; ``torch.ops.<namespace>.<op>.<overload>``):

* PT2E (``quantized_decomposed``): ``quantize/dequantize_per_tensor`` (``.default``: Python scale and zero
  point; ``.tensor``/``.tensor2``: tensors, e.g. from ``choose_qparams``), ``_per_channel``, ``_per_token``,
  ``_per_channel_group``, and ``choose_qparams`` (``.tensor``, ``_symmetric``, ``_per_token``,
  ``_per_token_asymmetric``).
* torchao (``quantize_``'s tensor subclasses, ExecuTorch's LLM modes): ``quantize_affine``,
  ``dequantize_affine``, ``choose_qparams_affine``; the granularity comes from ``block_size``.

TensorRT quantizes explicitly and symmetrically (its ONNX parser refuses a nonzero zero point); per-channel
scales are for weights only, blocks run along one dim, INT4 is weight-only, FP8 is per tensor
(docs/quantization.md). So:

* a **weight** (a constant the program holds, DQ'd, or Q'd then DQ'd) is kept when it is symmetric int8 per
  tensor / per channel / in blocks, symmetric int4 of a 2-D weight per channel or in blocks along its columns,
  or FP8 per tensor; anything else is refused, with what to do;
* an **activation** Q/DQ is kept when it is static, symmetric, per tensor, int8 or FP8 E4M3; any other
  activation quantization (a nonzero zero point, uint8, dynamic or per-token scales) is *dropped*: the
  activation runs in the engine's float precision, the weights stay quantized (``BuildOptions
  .strict_quantization`` refuses instead);
* ``choose_qparams`` only feeds dynamic activation Q/DQ, which are dropped with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.fx import Node

from et_tensorrt.partition.supported_ops import QUANTIZATION_OPS, aten_op, op_name

QUANTIZE, DEQUANTIZE, CHOOSE_QPARAMS = "quantize", "dequantize", "choose_qparams"

# op name -> (kind, family); the family says where its scale and granularity are.
_QD = "quantized_decomposed"
OPS: dict[str, tuple[str, str]] = {
    **{f"{_QD}.quantize_per_tensor.{o}": (QUANTIZE, "tensor") for o in ("default", "tensor", "tensor2")},
    **{f"{_QD}.dequantize_per_tensor.{o}": (DEQUANTIZE, "tensor") for o in ("default", "tensor", "tensor2")},
    f"{_QD}.quantize_per_channel.default": (QUANTIZE, "channel"),
    f"{_QD}.dequantize_per_channel.default": (DEQUANTIZE, "channel"),
    f"{_QD}.quantize_per_token.default": (QUANTIZE, "token"),
    f"{_QD}.dequantize_per_token.default": (DEQUANTIZE, "token"),
    f"{_QD}.quantize_per_channel_group.default": (QUANTIZE, "group"),
    f"{_QD}.dequantize_per_channel_group.default": (DEQUANTIZE, "group"),
    f"{_QD}.choose_qparams.tensor": (CHOOSE_QPARAMS, ""),
    f"{_QD}.choose_qparams_symmetric.tensor": (CHOOSE_QPARAMS, ""),
    f"{_QD}.choose_qparams_per_token.default": (CHOOSE_QPARAMS, ""),
    f"{_QD}.choose_qparams_per_token_asymmetric.default": (CHOOSE_QPARAMS, ""),
    "torchao.quantize_affine.default": (QUANTIZE, "affine"),
    "torchao.dequantize_affine.default": (DEQUANTIZE, "affine"),
    "torchao.choose_qparams_affine.default": (CHOOSE_QPARAMS, ""),
}
assert frozenset(OPS) == QUANTIZATION_OPS, "supported_ops.QUANTIZATION_OPS and qdq.OPS list the same ops"

# Actions a Verdict prescribes.
KEEP = "keep"  # a TensorRT Q/DQ (QuantizeLinear / DequantizeLinear in the ONNX)
FOLD = "fold"  # a weight's quantize: evaluated once at lowering, the engine holds the quantized weight
DROP = "drop"  # an activation Q/DQ TensorRT cannot express: removed, the activation runs in float
REFUSE = "refuse"  # nothing TensorRT can do: the lowering stops with ``Verdict.fix``

NONZERO_ZERO_POINT = "its zero point is not 0 (TensorRT quantizes symmetrically)"
FP8_DTYPES = (torch.float8_e4m3fn,)  # TensorRT's FP8 is E4M3
INT4_RANGE = (-8, 7)


def is_quantization_op(target) -> bool:
    return op_name(target) in QUANTIZATION_OPS


def not_decomposed_ops() -> list[torch._ops.OpOverload]:
    """For ``Partitioner.ops_to_not_decompose``: the quantization ops loaded in this process that ExecuTorch would
    otherwise decompose (torchao's are CompositeImplicitAutograd: plain arithmetic by the time the partitioner
    sees them). The others survive ``to_edge`` whole anyway (and ExecuTorch refuses to preserve multi-output ops)."""
    ops = []
    for name in sorted(QUANTIZATION_OPS):
        namespace, packet, overload = name.split(".")
        try:
            op = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
        except (AttributeError, RuntimeError):
            continue  # a library that is not loaded (torchao) or an op this torch lacks
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
            ops.append(op)
    return ops


@dataclass(frozen=True)
class QuantNode:
    """One Q, DQ or choose_qparams node, its arguments read by name."""

    node: Node
    kind: str
    family: str
    input: Node | None
    scale: Node | float | None = None
    zero_point: Node | int | None = None
    dtype: torch.dtype | None = None  # the quantized dtype
    quant_min: int | None = None
    quant_max: int | None = None
    granularity: str = "tensor"  # tensor | channel | block | token | unsupported
    axis: int | None = None  # channel: the scaled dim; block: the blocked dim
    block_size: int = 0  # block: elements per scale along ``axis``
    out_dtype: torch.dtype | None = None  # a DQ's result dtype

    @property
    def bits(self) -> int:
        """4 for int4 values held in int8 (torchao's ``IntxUnpackedToInt8Tensor``, PT2E ``quant_min=-8``)."""
        if self.dtype == torch.int8 and self.quant_min is not None and self.quant_max is not None:
            if INT4_RANGE[0] <= self.quant_min and self.quant_max <= INT4_RANGE[1]:
                return 4
        if self.dtype is None:
            return 0
        return self.dtype.itemsize * 8


# c10::ScalarType codes a schema default may hold (``ScalarType output_dtype=6``)
_SCALAR_TYPE_CODES = {5: torch.float16, 6: torch.float32, 7: torch.float64, 15: torch.bfloat16}


def _bind(node: Node) -> dict:
    """The node's arguments by schema name (defaults filled in, a dtype default as a torch.dtype)."""
    schema = aten_op(node.target)._schema
    bound = {}
    for i, arg in enumerate(schema.arguments):
        if not arg.kwarg_only and i < len(node.args):
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            value = arg.default_value
            if isinstance(value, int) and arg.name.endswith("dtype"):
                value = _SCALAR_TYPE_CODES.get(value, value)
            bound[arg.name] = value
    return bound


def _val(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return val if isinstance(val, torch.Tensor) else None


def affine_granularity(block_size, shape) -> tuple[str, int | None, int]:
    """torchao's ``block_size`` over a tensor's shape -> (granularity, axis, block): per tensor (one block), per
    channel (blocks of 1 along one dim, whole along the others), blocks along one dim of a 2-D tensor, per
    token (whole along the last dim, 1 along two or more), or unsupported."""
    sizes = list(shape)
    blocks = [int(b) for b in block_size]
    if len(blocks) != len(sizes) or not all(isinstance(s, int) for s in sizes):
        return "unsupported", None, 0
    blocks = [s if b in (-1, 0) else b for b, s in zip(blocks, sizes)]
    split = [d for d, (b, s) in enumerate(zip(blocks, sizes)) if b < s]  # dims with more than one block
    if not split:
        return "tensor", None, 0
    ones = [d for d in split if blocks[d] == 1]
    partial = [d for d in split if blocks[d] > 1]
    if len(split) == 1 and ones:
        return "channel", ones[0], 0
    if len(sizes) == 2 and len(ones) == 1 and len(partial) == 1 and sizes[partial[0]] % blocks[partial[0]] == 0:
        return "block", partial[0], blocks[partial[0]]
    if not partial and len(ones) >= 2 and blocks[-1] == sizes[-1]:
        return "token", None, 0
    return "unsupported", None, 0


def read(node: Node) -> QuantNode | None:
    """The node as a ``QuantNode``, or None when it is not a quantization op."""
    if node.op != "call_function":
        return None
    entry = OPS.get(op_name(node.target))
    if entry is None:
        return None
    kind, family = entry
    b = _bind(node)
    first = next(iter(b.values()), None)
    source = first if isinstance(first, Node) else None
    if kind == CHOOSE_QPARAMS:
        return QuantNode(node, kind, family, source)
    shape = _val(source).shape if _val(source) is not None else ()
    fields: dict = {"quant_min": b.get("quant_min"), "quant_max": b.get("quant_max")}
    if family == "affine":
        fields["dtype"] = b.get("output_dtype") if kind == QUANTIZE else b.get("input_dtype")
        fields["scale"], fields["zero_point"] = b.get("scale"), b.get("zero_point")
        granularity, axis, block = affine_granularity(b.get("block_size", ()), shape)
        fields.update(granularity=granularity, axis=axis, block_size=block)
        if kind == DEQUANTIZE:
            fields["out_dtype"] = b.get("output_dtype")
        for bound in ("quant_min", "quant_max"):  # None: the dtype's own range
            if fields[bound] is None and fields["dtype"] is not None and not fields["dtype"].is_floating_point:
                info = torch.iinfo(fields["dtype"])
                fields[bound] = info.min if bound == "quant_min" else info.max
    else:
        fields["dtype"] = b.get("dtype")
        plural = family in ("channel", "token", "group")
        fields["scale"] = b.get("scales" if plural else "scale")
        fields["zero_point"] = b.get("zero_points" if plural else "zero_point")
        fields["out_dtype"] = b.get("out_dtype", b.get("output_dtype")) if kind == DEQUANTIZE else None
        if family == "channel":
            fields.update(granularity="channel", axis=int(b["axis"]) % max(len(shape), 1))
        elif family == "token":
            fields["granularity"] = "token"
        elif family == "group":
            size = int(b["group_size"])
            ok = len(shape) == 2 and isinstance(shape[1], int) and shape[1] % size == 0
            fields.update(granularity="block" if ok else "unsupported", axis=1, block_size=size)
    for bound in ("quant_min", "quant_max"):
        if isinstance(fields[bound], (float, bool)):
            fields[bound] = int(fields[bound])
        elif not isinstance(fields[bound], int):
            fields[bound] = None  # a tensor bound (``.tensor2``)
    if kind == DEQUANTIZE and fields.get("out_dtype") is None:
        fields["out_dtype"] = torch.float32
    return QuantNode(node, kind, family, source, **fields)


# ----------------------------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    action: str  # KEEP, FOLD, DROP or REFUSE
    what: str  # what the node is ("int4 weight, blocks of 32 along dim 1")
    why: str = ""  # DROP / REFUSE: what TensorRT cannot do
    fix: str = ""  # REFUSE: what the user can do

    @property
    def is_activation(self) -> bool:
        return self.what.startswith("activation")


def constant_tensor(ep, node) -> torch.Tensor | None:
    """The tensor a placeholder lifts (parameter, constant or a buffer nothing mutates), or an inner tensor of a
    lifted tensor subclass (torchao's weights before ``to_edge`` unwraps them), else None. Inside ExecuTorch's
    partitioning these are FakeTensors: shapes and dtypes, no values."""
    if not isinstance(node, Node):
        return None
    if node.op == "call_function" and str(node.target) == "export.access_subclass_inner_tensor.default":
        outer = constant_tensor(ep, node.args[0])
        inner = getattr(outer, node.args[1], None) if outer is not None else None
        return inner if isinstance(inner, torch.Tensor) else None
    if node.op != "placeholder":
        return None
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        return ep.state_dict.get(sig.inputs_to_parameters[node.name])
    if node.name in sig.inputs_to_buffers:
        target = sig.inputs_to_buffers[node.name]
        if target in set(sig.buffers_to_mutate.values()):
            return None
        return ep.state_dict.get(target, ep.constants.get(target))
    if node.name in sig.inputs_to_lifted_tensor_constants:
        return ep.constants.get(sig.inputs_to_lifted_tensor_constants[node.name])
    return None


def _static_value(ep, value) -> torch.Tensor | float | int | None:
    """A scale or zero point as a value when the program fixes it (a literal or a constant), else None."""
    if value is None or isinstance(value, (int, float)):
        return value
    return constant_tensor(ep, value)


def _zero(value) -> bool:
    """Whether a zero point is 0. A FakeTensor (ExecuTorch hands partitioners weights without values) counts as
    0 here: ``value_problems`` checks the values before ``to_edge``, the legalization stage again in preprocess."""
    if value is None:
        return True
    if isinstance(value, (int, float)):
        return value == 0
    if is_fake(value):
        return True
    return bool((value == 0).all())


def _describe(q: QuantNode, role: str) -> str:
    dtype = "int4" if q.bits == 4 else str(q.dtype).replace("torch.", "")
    where = {
        "tensor": "per tensor",
        "channel": f"per channel (dim {q.axis})",
        "block": f"blocks of {q.block_size} along dim {q.axis}",
        "token": "per token",
        "unsupported": "in blocks TensorRT cannot express",
    }[q.granularity]
    return f"{role} {dtype} {where}"


_WEIGHT_FIX = (
    "quantize weights symmetrically (zero point 0) to int8 per tensor, per channel or in groups, to int4 per "
    "channel or in groups of a 2-D (linear) weight, or to FP8 E4M3 per tensor: torchao's IntxWeightOnlyConfig / "
    "Int8DynamicActivationIntxWeightConfig with the default symmetric mapping, or PT2E with "
    "et_tensorrt.quantization.TensorRTQuantizer"
)


def _weight_verdict(q: QuantNode, ep, action: str) -> Verdict:
    what = _describe(q, "weight")
    zero_point = _static_value(ep, q.zero_point)
    scale = _static_value(ep, q.scale)
    if scale is None:
        return Verdict(REFUSE, what, "its scale is computed at run time", _WEIGHT_FIX)
    if q.dtype in FP8_DTYPES:
        if q.granularity != "tensor":
            return Verdict(REFUSE, what, "TensorRT's FP8 scales are per tensor", _WEIGHT_FIX)
        return Verdict(action, what)
    if q.dtype != torch.int8:
        return Verdict(REFUSE, what, f"TensorRT quantizes weights to int8, int4 or FP8, not {q.dtype}", _WEIGHT_FIX)
    if zero_point is None or not _zero(zero_point):
        return Verdict(REFUSE, what, NONZERO_ZERO_POINT, _WEIGHT_FIX)
    if q.granularity in ("token", "unsupported"):
        return Verdict(REFUSE, what, "TensorRT scales a weight per tensor, per channel or in blocks", _WEIGHT_FIX)
    if q.bits == 4:
        rank = _val(q.input).dim() if _val(q.input) is not None else 0
        if rank != 2 or q.granularity == "tensor" or (q.granularity == "channel" and q.axis != 0):
            return Verdict(
                REFUSE, what, "TensorRT's int4 weights are 2-D, in blocks along the input dim (or per row)", _WEIGHT_FIX
            )
    return Verdict(action, what)


_ACTIVATION_FIX = (
    "lower with strict_quantization=False to run these activations in float (the weights stay quantized), or "
    "quantize activations statically and symmetrically per tensor to int8 (et_tensorrt.quantization."
    "TensorRTQuantizer)"
)


def _activation_verdict(q: QuantNode, ep) -> Verdict:
    what = _describe(q, "activation")
    scale, zero_point = _static_value(ep, q.scale), _static_value(ep, q.zero_point)
    if scale is None:
        why = "its scale is computed at run time (dynamic quantization)"
    elif q.granularity != "tensor":
        why = "TensorRT scales activations per tensor only"
    elif q.dtype not in (torch.int8, *FP8_DTYPES):
        why = f"TensorRT quantizes activations to int8 or FP8 E4M3, not {q.dtype}"
    elif zero_point is None or not _zero(zero_point):
        why = NONZERO_ZERO_POINT
    elif isinstance(scale, torch.Tensor) and scale.numel() != 1:
        why = "TensorRT scales activations per tensor only"
    elif q.dtype == torch.int8 and q.bits == 4:
        why = "TensorRT's int4 is for weights only"
    else:
        return Verdict(KEEP, what)
    return Verdict(DROP, what, why, _ACTIVATION_FIX)


def _undroppable(verdict: Verdict, because: str) -> Verdict:
    """An activation quantization TensorRT cannot express that cannot be dropped either: its quantized values
    are more than the input of its own dequantize."""
    return Verdict(
        REFUSE,
        verdict.what,
        f"{verdict.why}, and {because}",
        "quantize it as TensorRT does (static, symmetric, per tensor, int8), or keep the quantized values inside "
        "the program, each read only by its dequantize",
    )


def _pair_source(ep, q: QuantNode, reads: dict[str, QuantNode]) -> tuple[str, QuantNode | None]:
    """What a node's quantized input is: "weight" (a constant), "quantize" (a Q node of the program, returned)
    or "input" (anything else: a quantized tensor the partition receives)."""
    if constant_tensor(ep, q.input) is not None:
        return "weight", None
    source = reads.get(q.input.name) if isinstance(q.input, Node) else None
    if source is not None and source.kind == QUANTIZE:
        return "quantize", source
    return "input", None


def verdicts(ep, nodes: Iterable[Node] | None = None) -> dict[str, Verdict]:
    """A verdict per quantization node of ``ep`` (by node name)."""
    reads = {}
    for node in ep.graph.nodes if nodes is None else nodes:
        q = read(node)
        if q is not None:
            reads[node.name] = q
    out: dict[str, Verdict] = {}
    # Quantize nodes first: a DQ follows its Q's verdict.
    for q in reads.values():
        if q.kind != QUANTIZE:
            continue
        if constant_tensor(ep, q.input) is not None:
            out[q.node.name] = _weight_verdict(q, ep, FOLD)
            continue
        verdict = _activation_verdict(q, ep)
        if verdict.action == DROP and not all(reads.get(u.name, q).kind == DEQUANTIZE for u in q.node.users):
            verdict = _undroppable(verdict, "the quantized values leave it (not only into a dequantize)")
        out[q.node.name] = verdict
    for q in reads.values():
        if q.kind != DEQUANTIZE:
            continue
        source_kind, source = _pair_source(ep, q, reads)
        if source_kind == "weight":
            out[q.node.name] = _weight_verdict(q, ep, KEEP)
        elif source_kind == "quantize":
            verdict = out[source.node.name]
            if verdict.action == FOLD:  # a weight quantized at lowering
                out[q.node.name] = _weight_verdict(q, ep, KEEP)
            elif verdict.action == KEEP:
                own = _activation_verdict(q, ep)
                out[q.node.name] = own if own.action == KEEP else Verdict(REFUSE, own.what, own.why, _ACTIVATION_FIX)
            else:
                out[q.node.name] = Verdict(verdict.action, _describe(q, "activation"), verdict.why, verdict.fix)
        else:
            verdict = _activation_verdict(q, ep)
            if verdict.action == DROP:  # the partition receives quantized values: nothing to drop
                verdict = _undroppable(verdict, "the quantized values come from outside the engine")
            out[q.node.name] = verdict
    for q in reads.values():
        if q.kind != CHOOSE_QPARAMS:
            continue
        readers = [u2 for u in q.node.users for u2 in u.users] + [u for u in q.node.users if u.op != "call_function"]
        if readers and all(out.get(r.name, Verdict(REFUSE, "")).action == DROP for r in readers):
            out[q.node.name] = Verdict(DROP, "activation qparams (dynamic)", "dynamic activation quantization")
        else:
            out[q.node.name] = Verdict(
                REFUSE,
                "dynamic qparams",
                "its scale and zero point feed more than the activation quantization TensorRT drops",
                "compute quantization parameters only for a quantize/dequantize pair",
            )
    return out


def value_problems(ep) -> list[str]:
    """The refusals that need the weights' values (a nonzero zero point), on a program with real weights (the
    partitioner reads the program before ``to_edge``; it partitions a copy with FakeTensor weights)."""
    problems = []
    for name, verdict in verdicts(ep).items():
        if verdict.action == REFUSE and verdict.why == NONZERO_ZERO_POINT:
            node = next(n for n in ep.graph.nodes if n.name == name)
            problems.append(f"{name} ({op_name(node.target)}, {verdict.what}): {verdict.why}; {verdict.fix}")
    return problems
