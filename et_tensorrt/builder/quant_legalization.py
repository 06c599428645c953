"""Quantized partitions made into what TensorRT runs (stage ``legalize_quant``), and the embedded program's
plain-aten spelling of the result (``host_program``).

:func:`legalize` reads every quantization node with ``et_tensorrt.quantization.qdq`` (the partitioner's own
reading) and rewrites the aten partition program:

* a weight's dequantize (PT2E per channel / per tensor, torchao per axis or per group, int8 or int4) becomes
  ``et_tensorrt::dequantize`` on the quantized weight, its scale shaped as ONNX wants it (int4 always in blocks
  along the input dim: per channel is one block per row); the zero point (0) goes;
* a weight's quantize (PT2E without ``fold_quantize``) is evaluated now: the engine holds the quantized weight;
* a static symmetric per-tensor activation Q/DQ (int8, FP8) becomes ``et_tensorrt::quantize`` /
  ``dequantize``;
* activation quantization TensorRT cannot express is dropped (with its ``choose_qparams``): the activation runs
  in float, the weights stay quantized; the partitioner warned with the count (``strict_quantization``
  refused before any work).

The result computes what the engine computes; :func:`host_program` spells the two ops as aten arithmetic over
the same quantized weights (int4 packed two per byte into uint8) for the embedded program, which the runtime's
C++ interpreter runs without torchao or et_tensorrt's ops.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, TensorArgument

from et_tensorrt.builder.edge_to_aten import regraphed
from et_tensorrt.builder.op_rewrites import Rewriter, lift_constants
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.quantization import qdq

aten = torch.ops.aten

# Every aten target host_program writes: the embedded program's safe loader allows them
# (et_tensorrt/embedded_program/allowed_ops.py).
HOST_TARGETS = (
    "aten._to_copy.default",
    "aten.bitwise_and.Scalar",
    "aten.bitwise_right_shift.Tensor_Scalar",
    "aten.bitwise_xor.Scalar",
    "aten.clamp.default",
    "aten.div.Tensor",
    "aten.mul.Tensor",
    "aten.reshape.default",
    "aten.round.default",
    "aten.stack.default",
    "aten.sub.Scalar",
)


@dataclass
class Summary:
    """What legalization kept and dropped (the blob METADATA's ``quantization``, ``inspect``'s precision)."""

    weights: dict[str, int] = field(default_factory=dict)  # quantized type -> weights ("int4": 4)
    activations: dict[str, int] = field(default_factory=dict)  # quantized type -> activation Q/DQ pairs kept
    dropped_activation_qdq: int = 0

    def as_metadata(self) -> dict:
        return {
            "weights": dict(sorted(self.weights.items())),
            "activations": dict(sorted(self.activations.items())),
            "dropped_activation_qdq": self.dropped_activation_qdq,
        }


def _ops():
    from et_tensorrt.builder import quant_ops  # registers et_tensorrt::quantize / dequantize

    return quant_ops


def _qtype(q: qdq.QuantNode) -> str:
    if q.dtype in qdq.FP8_DTYPES:
        return "float8_e4m3fn"
    return "int4" if q.bits == 4 else "int8"


def _scalar_scale(ep, q: qdq.QuantNode) -> torch.Tensor:
    value = q.scale if isinstance(q.scale, (int, float)) else qdq.constant_tensor(ep, q.scale)
    return torch.as_tensor(value, dtype=torch.float32).reshape(())


def _weight_scale(ep, q: qdq.QuantNode, shape) -> tuple[torch.Tensor, int, int]:
    """(scale shaped as ONNX's DequantizeLinear takes it, axis, block_size) of a weight's dequantize."""
    if q.granularity == "tensor":
        scale = _scalar_scale(ep, q)
        if q.bits == 4:  # TensorRT's int4 is blocked: one block per row, all rows one scale
            return scale.expand(shape[0], 1).contiguous(), 1, shape[1]
        return scale, 0, 0
    scale = qdq.constant_tensor(ep, q.scale).detach()
    if q.granularity == "channel":
        scale = scale.reshape(-1)
        if q.bits == 4:  # one block per row
            return scale.reshape(shape[0], 1), 1, shape[1]
        return scale, q.axis, 0
    blocks = list(shape)
    blocks[q.axis] //= q.block_size
    return scale.reshape(blocks), q.axis, q.block_size


class _Legalizer:
    def __init__(self, ep: ExportedProgram, strict: bool):
        self.ep = ep
        self.strict = strict
        self.gm = copy.deepcopy(ep.graph_module)
        self.nodes = {n.name: n for n in self.gm.graph.nodes}
        user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
        self.rewriter = Rewriter(self.gm, user)
        self.summary = Summary()
        self.replaced: dict[str, torch.fx.Node] = {}  # Q node name -> what its DQs now read

    def run(self) -> ExportedProgram:
        reads = {n.name: qdq.read(n) for n in self.ep.graph.nodes}
        reads = {k: v for k, v in reads.items() if v is not None}
        verdicts = qdq.verdicts(self.ep)
        for name, verdict in verdicts.items():
            if verdict.action == qdq.REFUSE:
                raise EngineBuildError(f"{name} ({verdict.what}): {verdict.why}; {verdict.fix}")
        for name, q in reads.items():  # graph order: a Q before its DQs
            verdict = verdicts[name]
            node = self.nodes[name]
            self.rewriter.before = node
            if q.kind == qdq.QUANTIZE and verdict.action == qdq.FOLD:
                self._fold(node, q)
            elif q.kind == qdq.QUANTIZE and verdict.action == qdq.KEEP:
                self._quantize(node, q)
            elif q.kind == qdq.DEQUANTIZE and verdict.action == qdq.KEEP:
                self._dequantize(node, q, verdict)
            elif q.kind == qdq.DEQUANTIZE and verdict.action == qdq.DROP:
                if self.strict:
                    raise EngineBuildError(f"{name} ({verdict.what}): {verdict.why}; strict_quantization refuses it")
                node.replace_all_uses_with(self.nodes[q.input.name].args[0])
                self.summary.dropped_activation_qdq += 1
        self._erase_dead(set(reads))
        return rebuild(self.ep, self.gm, self.rewriter)

    def _fold(self, node: torch.fx.Node, q: qdq.QuantNode) -> None:
        """A weight's quantize, evaluated once: the engine holds (and the blob stores) the quantized weight."""
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: qdq.constant_tensor(self.ep, n))
        value = q.node.target(*args, **kwargs)
        self.replaced[node.name] = self.rewriter.constant(f"{node.name}_weight", value.detach())

    def _quantize(self, node: torch.fx.Node, q: qdq.QuantNode) -> None:
        dtype = q.input.meta["val"].dtype
        scale = self.rewriter.constant(f"{node.name}_scale", _scalar_scale(self.ep, q).to(dtype))
        self.replaced[node.name] = self.rewriter.emit(_ops().QUANTIZE, self.nodes[q.input.name], scale, qtype=_qtype(q))

    def _dequantize(self, node: torch.fx.Node, q: qdq.QuantNode, verdict: qdq.Verdict) -> None:
        source = self.replaced.get(q.input.name, self.nodes[q.input.name])
        shape = tuple(source.meta["val"].shape)
        qtype = _qtype(q)
        if verdict.is_activation:
            scale, axis, block = _scalar_scale(self.ep, q), 0, 0
            self.summary.activations[qtype] = self.summary.activations.get(qtype, 0) + 1
        else:
            scale, axis, block = _weight_scale(self.ep, q, shape)
            self.summary.weights[qtype] = self.summary.weights.get(qtype, 0) + 1
        scale_node = self.rewriter.constant(f"{node.name}_scale", scale.to(q.out_dtype).contiguous())
        out = self.rewriter.emit(_ops().DEQUANTIZE, source, scale_node, axis=axis, block_size=block, qtype=qtype)
        node.replace_all_uses_with(out)

    def _erase_dead(self, names: set[str]) -> None:
        """The replaced quantization nodes, their choose_qparams and getitems, once nothing reads them."""
        chooser_items = {u.name for n in names for u in self.nodes[n].users if u.target is operator.getitem}
        dead = names | chooser_items
        changed = True
        while changed:
            changed = False
            for node in reversed(list(self.gm.graph.nodes)):
                if node.name in dead and node.op == "call_function" and not node.users:
                    self.gm.graph.erase_node(node)
                    dead.discard(node.name)
                    changed = True
        if dead & names:
            left = sorted(dead & names)
            raise EngineBuildError(f"quantization nodes {left} are still read after legalization")


def rebuild(ep: ExportedProgram, gm: torch.fx.GraphModule, rewriter: Rewriter) -> ExportedProgram:
    """``ep`` with ``gm`` as its graph, the rewriter's constants lifted, and the weights nothing reads any more
    (zero points, float weights that were quantized, replaced scales) dropped."""
    signature = copy.deepcopy(ep.graph_signature)
    state_dict, constants = dict(ep.state_dict), dict(ep.constants)
    lift_constants(rewriter, signature, constants)
    mutated = set(signature.buffers_to_mutate.values())
    unused = {
        n.name for n in gm.graph.nodes if n.op == "placeholder" and not n.users and n.name not in rewriter.user_inputs
    }
    kept_specs = []
    for spec in signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name in unused and spec.kind != InputKind.USER_INPUT and spec.target not in mutated:
            gm.graph.erase_node(next(n for n in gm.graph.nodes if n.name == name))
            continue
        kept_specs.append(spec)
    signature.input_specs[:] = kept_specs
    # An output that was a dropped dequantize is now its float source: the signature names the new node.
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    for spec, value in zip(signature.output_specs, outputs):
        if isinstance(value, torch.fx.Node) and isinstance(spec.arg, TensorArgument):
            spec.arg = TensorArgument(name=value.name)
    targets = {s.target for s in kept_specs}
    state_dict = {k: v for k, v in state_dict.items() if k in targets}
    constants = {k: v for k, v in constants.items() if k in targets}
    return regraphed(ep, gm, signature, state_dict, constants, dict(ep.range_constraints))


def legalize(ep: ExportedProgram, strict: bool = False) -> tuple[ExportedProgram, Summary | None]:
    """The partition program with its quantization legalized, and what was kept and dropped (None and ``ep``
    itself for a partition without quantization)."""
    if not any(qdq.read(n) is not None for n in ep.graph.nodes):
        return ep, None
    legalizer = _Legalizer(ep, strict)
    return legalizer.run(), legalizer.summary


# ------------------------------------------------------------------------------------------ the host form


def _unpack_int4(rw: Rewriter, packed: torch.fx.Node, shape) -> torch.fx.Node:
    """int8 values in [-8, 7] from uint8 bytes holding two each along the last dim, low nibble first."""
    low = rw.emit(aten.bitwise_and.Scalar, packed, 15)
    high = rw.emit(aten.bitwise_right_shift.Tensor_Scalar, packed, 4)
    nibbles = rw.emit(aten.reshape.default, rw.emit(aten.stack.default, [low, high], -1), list(shape))
    nibbles = rw.emit(aten._to_copy.default, nibbles, dtype=torch.int8)
    return rw.emit(aten.sub.Scalar, rw.emit(aten.bitwise_xor.Scalar, nibbles, 8), 8)  # sign-extend 4 bits


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7], last dim even -> uint8, two per byte along the last dim, low nibble first."""
    nibbles = (values.to(torch.int16) & 15).to(torch.uint8).reshape(*values.shape[:-1], -1, 2)
    return nibbles[..., 0] | (nibbles[..., 1] << 4)


def _host_dequantize(ep: ExportedProgram, rw: Rewriter, node: torch.fx.Node) -> torch.fx.Node:
    q, scale = node.args[0], node.args[1]
    axis, block, qtype = (node.kwargs[k] for k in ("axis", "block_size", "qtype"))
    shape = list(q.meta["val"].shape)
    weight = qdq.constant_tensor(ep, q)
    if qtype == "int4" and weight is not None and shape and shape[-1] % 2 == 0:
        q = _unpack_int4(rw, rw.constant(f"{q.name}_int4", pack_int4(weight)), shape)
    scale_value = qdq.constant_tensor(ep, scale)
    values = rw.emit(aten._to_copy.default, q, dtype=scale_value.dtype)
    if scale_value.dim() == 0:
        return rw.emit(aten.mul.Tensor, values, scale)
    if not block:
        broadcast = [1] * len(shape)
        broadcast[axis] = -1
        return rw.emit(aten.mul.Tensor, values, rw.constant(f"{scale.name}_host", scale_value.reshape(broadcast)))
    split = shape[:axis] + [shape[axis] // block, block] + shape[axis + 1 :]
    scales = list(scale_value.shape[: axis + 1]) + [1] + list(scale_value.shape[axis + 1 :])
    blocks = rw.emit(aten.reshape.default, values, split)
    scaled = rw.emit(aten.mul.Tensor, blocks, rw.constant(f"{scale.name}_host", scale_value.reshape(scales)))
    return rw.emit(aten.reshape.default, scaled, shape)


def _host_quantize(rw: Rewriter, node: torch.fx.Node) -> torch.fx.Node:
    x, scale, qtype = node.args[0], node.args[1], node.kwargs["qtype"]
    quant_ops = _ops()
    lo, hi = quant_ops.RANGES[qtype]
    scaled = rw.emit(aten.div.Tensor, x, scale)
    if qtype != "float8_e4m3fn":
        scaled = rw.emit(aten.round.default, scaled)
    clamped = rw.emit(aten.clamp.default, scaled, lo, hi)
    return rw.emit(aten._to_copy.default, clamped, dtype=quant_ops.QTYPES[qtype])


def host_program(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` with ``et_tensorrt::quantize``/``dequantize`` spelled as aten arithmetic over the same quantized
    weights (int4 stored packed): the embedded program, which the runtime runs without et_tensorrt's ops."""
    quant_ops = _ops()
    targets = set(quant_ops.TRANSLATIONS)
    if not any(n.op == "call_function" and n.target in targets for n in ep.graph.nodes):
        return ep
    gm = copy.deepcopy(ep.graph_module)
    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    rw = Rewriter(gm, user)
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        rw.before = node
        if node.target is quant_ops.DEQUANTIZE:
            out = _host_dequantize(ep, rw, node)
        else:
            out = _host_quantize(rw, node)
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
    return rebuild(ep, gm, rw)
