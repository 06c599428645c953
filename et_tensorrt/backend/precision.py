"""An fp32 partition in the engine's precision (``precision="fp16"``/``"bf16"``): the one place casts are placed.

``in_precision(ep, precision)`` rewrites the aten program itself, so the ONNX export, the engine and the embedded
program (the PyTorch fallback) all compute the same thing, in the same types:

- **weights**: every float32 parameter is cast once, here, at build time (the blob and the engine hold the half
  weights), except one that only float32 ops read (a norm's scale), which keeps its float32 bytes; a buffer or
  constant that only low-precision ops read is cast too: no call casts a tensor the program holds;
- **state**: every float32 buffer the partition mutates (a KV cache) is stored in the engine's precision, so
  its in-place update stays in place (docs/stateful-decode.md); its initial contents are cast with it;
- **boundary**: float32 inputs are cast on entry and float32 outputs back on exit: the delegate's I/O keeps the
  program's dtypes;
- **ops** see one dtype each, as ``torch.autocast`` places casts: matrix products and convolutions take the
  engine's precision (when one operand is already in it), the ops that need range or accumulation (``FP32_OPS``:
  powers and squares, reductions, layer and group norms, softmax, exp/log) take float32, writes into a tensor
  and batch norm take their first argument's dtype, and any other op with mixed float inputs takes the widest of
  them (a 0-d scalar does not widen).

Buffers that are not mutated (rotary tables, masks) and tensors the program creates (positions cast to float)
keep float32: they are small, and positions lose exactness in half precision. TensorRT-RTX networks are strongly
typed, so these types are its precision controls: a norm's accumulation stays float32 in the engine as here.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

aten = torch.ops.aten
LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _packets(*names: str) -> frozenset:
    return frozenset(getattr(aten, n) for n in names if hasattr(aten, n))


# Matrix products and convolutions: in the engine's precision (tensor cores, the half weights read as they are).
LOW_OPS = _packets(
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "_convolution", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention",
)  # fmt: skip
# Ops that need float32's range or accumulation (torch.autocast's float32 list, as aten spells them).
FP32_OPS = _packets(
    "pow", "rsqrt", "sqrt", "reciprocal", "exp", "expm1", "log", "log1p", "log2", "log10", "_softmax", "softmax",
    "_safe_softmax", "_log_softmax", "log_softmax", "mean", "sum", "prod", "var", "var_mean", "std", "cumsum",
    "cumprod", "native_layer_norm", "layer_norm", "native_group_norm", "group_norm", "norm", "linalg_vector_norm",
    "erfinv", "acos", "asin", "cosh", "sinh", "tan",
)  # fmt: skip
# Every other float input takes the first argument's dtype: writes into it, and batch norm in inference (its
# statistics follow the activation, so that it still folds into the convolution before it).
FIRST_ARG_OPS = _packets(
    "index_put", "index_put_", "index_copy", "index_copy_", "copy", "copy_", "slice_scatter", "select_scatter",
    "scatter", "scatter_", "index_add", "masked_scatter", "diagonal_scatter", "as_strided_scatter",
    "_native_batch_norm_legit_no_training", "native_batch_norm", "batch_norm",
)  # fmt: skip


def in_precision(ep: ExportedProgram, precision: str) -> ExportedProgram:
    """``ep`` computed in ``precision`` (see the module's docstring); ``ep`` itself for fp32 or a program with
    nothing in float32 to cast (a model already in half precision)."""
    dtype = LOW_PRECISION.get(precision)
    if dtype is None:
        return ep
    signature = ep.graph_signature
    mutated = {s.target for s in signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    gm = copy.deepcopy(ep.graph_module)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    held = _held_float32(ep)  # placeholder -> (target, tensor, kind)
    read_by_aten = {n.name for n in placeholders if any(_is_aten(u.target) for u in n.users)}
    # a scale only a quantization op reads keeps its dtype
    weights = {
        name: (target, value)
        for name, (target, value, kind) in held.items()
        if name in read_by_aten and (kind == InputKind.PARAMETER or target in mutated)
    }
    user = {s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT}
    if not weights and not any(_dtype(n) == torch.float32 for n in placeholders if n.name in user):
        return ep
    originals = {n: n.meta.get("val") for n in gm.graph.nodes}
    casts = _Casts(gm.graph)
    for node in placeholders:
        if node.name in weights:
            node.meta["val"] = node.meta["val"].to(dtype)
        elif node.name in user and _dtype(node) == torch.float32:
            cast = casts.get(node, dtype, before=placeholders[-1].next)
            node.replace_all_uses_with(cast, delete_user_cb=lambda n, c=cast: n is not c)
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node not in casts.made:
            _retype(node, originals, casts, dtype)
    _cast_outputs(gm.graph, signature, originals, casts)
    # A tensor the program holds is stored in the dtype all its readers take, so that no call casts it: a weight
    # only float32 ops read (a norm's scale) keeps its float32 bytes; a buffer or constant only low-precision ops
    # read (a weight registered as a buffer) is cast at build like a parameter.
    for node in placeholders:
        readers = {casts.made.get(u) for u in node.users}
        if node.name not in held or len(readers) != 1 or None in readers or held[node.name][0] in mutated:
            continue
        for cast in list(node.users):
            cast.replace_all_uses_with(node)
            gm.graph.erase_node(cast)
        (stored,) = readers
        node.meta["val"] = originals[node].to(stored)
        if stored == torch.float32:
            weights.pop(node.name, None)
        else:
            weights[node.name] = held[node.name][:2]
    gm.graph.lint()
    gm.recompile()
    state_dict, constants = dict(ep.state_dict), dict(ep.constants)
    for target, value in weights.values():
        store = state_dict if target in state_dict else constants
        cast = value.detach().to(dtype)
        store[target] = torch.nn.Parameter(cast, requires_grad=False) if isinstance(value, torch.nn.Parameter) else cast
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outputs = [
        OutputSpec(s.kind, TensorArgument(v.name), s.target) if isinstance(s.arg, TensorArgument) else s
        for s, v in zip(signature.output_specs, output.args[0])
    ]
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=ExportGraphSignature(input_specs=list(signature.input_specs), output_specs=outputs),
        state_dict=state_dict,
        range_constraints=dict(ep.range_constraints),
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        constants=constants,
    )


class _Casts:
    """``_to_copy(value, dtype=...)`` nodes, one per value and dtype."""

    def __init__(self, graph: torch.fx.Graph):
        self.graph = graph
        self.made: dict[torch.fx.Node, torch.dtype] = {}
        self._memo: dict[tuple[torch.fx.Node, torch.dtype], torch.fx.Node] = {}

    def get(self, value: torch.fx.Node, dtype: torch.dtype, before: torch.fx.Node) -> torch.fx.Node:
        key = (value, dtype)
        if key not in self._memo:
            with self.graph.inserting_before(before):
                cast = self.graph.call_function(aten._to_copy.default, (value,), {"dtype": dtype})
            cast.meta["val"] = value.meta["val"].to(dtype)
            self.made[cast] = dtype
            self._memo[key] = cast
        return self._memo[key]


def _dtype(node) -> torch.dtype | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value.dtype if isinstance(value, torch.Tensor) else None


def _float_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in node.all_input_nodes if _dtype(a) in _FLOATS]


def _held_float32(ep: ExportedProgram) -> dict[str, tuple[str, torch.Tensor, InputKind]]:
    """The program's float32 parameters, buffers and constants: placeholder -> (target, tensor, kind)."""
    held = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
                held[spec.arg.name] = spec.target, value, spec.kind
    return held


def _is_aten(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target.namespace == "aten"


def _packet(target):
    return getattr(target, "overloadpacket", None)


def _retype(node: torch.fx.Node, originals: dict, casts: _Casts, dtype: torch.dtype) -> None:
    """Casts ``node``'s float inputs as its op needs (the module's rules) and gives its value the dtype it now has.
    A node none of whose inputs changed dtype is left as it is."""
    if node.target is operator.getitem:  # an element of a multi-output op's (split, var_mean) value
        parent = node.args[0].meta.get("val")
        if isinstance(parent, (tuple, list)):
            node.meta["val"] = parent[node.args[1]]
        return
    inputs = _float_inputs(node)
    if not any(_dtype(a) != getattr(originals.get(a), "dtype", None) for a in node.all_input_nodes):
        return
    packet = _packet(node.target)
    if not _is_aten(node.target):
        # an op of another library (quantization, et_tensorrt's own): its inputs as the program gave them
        want = {a: originals[a].dtype for a in inputs if isinstance(originals.get(a), torch.Tensor)}
    elif packet in FIRST_ARG_OPS and _dtype(node.args[0]) in _FLOATS:
        want = {a: _dtype(node.args[0]) for a in inputs}
    elif packet in FP32_OPS or _is_square(node):
        want = {a: torch.float32 for a in inputs}
    elif packet in LOW_OPS and any(_dtype(a) == dtype for a in inputs):
        want = {a: dtype for a in inputs}
    else:
        shaped = [a for a in inputs if a.meta["val"].dim() > 0] or inputs
        widest = max((_dtype(a) for a in shaped), key=lambda d: torch.finfo(d).bits, default=None)
        want = {a: widest for a in inputs}
    for a, d in want.items():
        if d is not None and _dtype(a) != d:
            node.replace_input_with(a, casts.get(a, d, before=node))
    node.meta["val"] = _value(node, originals[node])


def _is_square(node: torch.fx.Node) -> bool:
    """``x * x`` (an RMSNorm's square, spelled as a product): float32 like ``pow``."""
    return node.target == aten.mul.Tensor and node.args[0] is node.args[1]


def _value(node: torch.fx.Node, original):
    """``node``'s value with the dtype its (now uniform) float inputs give it: a float result the op did not fix
    with a ``dtype`` argument follows them; other results (bool, int, an explicit dtype) are as they were."""
    if node.kwargs.get("dtype") is not None or original is None:
        return original
    dtypes = {_dtype(a) for a in _float_inputs(node)}
    new = dtypes.pop() if len(dtypes) == 1 else None
    if _packet(node.target) in FIRST_ARG_OPS:
        new = _dtype(node.args[0])
    if new is None:
        return original

    def follow(v):
        return v.to(new) if isinstance(v, torch.Tensor) and v.dtype in _FLOATS else v

    return type(original)(follow(v) for v in original) if isinstance(original, (tuple, list)) else follow(original)


def _cast_outputs(graph: torch.fx.Graph, signature: ExportGraphSignature, originals: dict, casts: _Casts) -> None:
    """User outputs back to the program's dtypes; a mutated buffer's new value in its state's (new) dtype."""
    output = next(n for n in graph.nodes if n.op == "output")
    placeholder = {s.target: s.arg.name for s in signature.input_specs if s.kind == InputKind.BUFFER}
    nodes = {n.name: n for n in graph.nodes}
    values = list(output.args[0])
    for i, (value, spec) in enumerate(zip(values, signature.output_specs)):
        if not isinstance(value, torch.fx.Node) or _dtype(value) not in _FLOATS:
            continue
        if spec.kind == OutputKind.BUFFER_MUTATION:
            want = _dtype(nodes[placeholder[spec.target]])
        else:
            want = getattr(originals.get(value), "dtype", None)
        if want is not None and want != _dtype(value):
            values[i] = casts.get(value, want, before=output)
    output.args = (tuple(values),)
