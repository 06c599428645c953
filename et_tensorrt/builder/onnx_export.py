"""Export an aten partition to ONNX in memory and record what the blob and the builder need.

The ONNX keeps its weights outside the protobuf (builder/onnx_weights.py): ``OnnxExport.model`` is the graph,
its large initializers external references, and ``OnnxExport.initializers`` holds their tensors by name.

Records, for every delegate argument (tensors, and sizes ExecuTorch passes as integers), its ONNX name,
dtype, device and per-dim ranges (min/opt/max, see ``profiles``), and the output names in the partition's
output order. Sizes the engine computes from its tensor inputs are not engine inputs (``size_inputs``).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch.export import ExportedProgram

from et_tensorrt.builder import kv_cache_op, onnx_weights, quant_ops
from et_tensorrt.builder.edge_to_aten import user_input_nodes, user_output_nodes
from et_tensorrt.builder.profiles import (
    DynamicDim,
    SymbolRanges,
    dims_of,
    size_range,
    symbol_ranges,
)
from et_tensorrt.builder.size_inputs import engine_program
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.format.blob import DimRange
from et_tensorrt.sizes import is_size, linear_form, size_expr

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger("et_tensorrt")

# onnxscript's input size limit for constant folding (elements): larger inputs are "large"
_FOLD_INPUT_LIMIT = 8192


@dataclass
class TensorInfo:
    """One delegate argument or result: a tensor, or a size (``value`` set, ``dims`` empty)."""

    name: str  # ONNX / TensorRT binding name; "" for a size the engine computes itself (not an engine input)
    dtype: torch.dtype
    device: torch.device
    dims: tuple[DimRange, ...]  # ranges the engine is built for (bounded): the union of its profiles
    declared_dims: tuple[DimRange, ...]  # ranges as the program declares them (max -1 = unbounded); a size: (value,)
    profiles: tuple = ()  # per TensorRT optimization profile: the dims (a tensor) or the value range (a size)
    value: DimRange | None = None  # a size argument: the range of its value

    @property
    def is_size(self) -> bool:
        return self.value is not None

    @property
    def bound(self) -> bool:
        """Whether the engine takes this argument (every tensor; a size only when it is not derived)."""
        return bool(self.name)


@dataclass
class OnnxExport:
    # The graph: a ModelProto whose initializers of at least the export's threshold are external references
    # (given as serialized bytes, it is parsed; such a model holds all its initializers inline).
    model: onnx.ModelProto | bytes
    opset: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    picked_max: dict = field(default_factory=dict)  # "input:dim" -> max chosen for an unbounded dim
    seconds: float = 0.0
    state_count: int = 0  # the last inputs and outputs carry the delegate's state (backend/state_lifting.py)
    aliased: dict = field(default_factory=dict)  # in-place state: engine output name -> the input it aliases
    # the external initializers' bytes by name: views of the program's tensors where the exporter kept them
    initializers: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.model, (bytes, bytearray, memoryview)):
            try:
                import onnx
            except ImportError:  # the device build without the onnx package: the graph stays serialized
                self.model = bytes(self.model)
                return
            self.model = onnx.load_from_string(bytes(self.model)) if len(self.model) else onnx.ModelProto()

    @property
    def model_bytes(self) -> bytes:
        """The graph serialized (small: the external weights are references, see builder/onnx_weights.py)."""
        if isinstance(self.model, bytes):
            return self.model
        onnx_weights.check_proto_size("serializing the ONNX graph", self.model.ByteSize())
        return self.model.SerializeToString()

    def digest(self) -> str:
        """SHA-256 of the ONNX model the builder sees, external weights included (onnx_weights.digest)."""
        return onnx_weights.digest(self)

    @property
    def delegate_inputs(self) -> list[TensorInfo]:
        """The delegate's own arguments (the blob's I/O table): the inputs without the state."""
        return self.inputs[: len(self.inputs) - self.state_count]

    @property
    def delegate_outputs(self) -> list[TensorInfo]:
        return self.outputs[: len(self.outputs) - self.state_count]

    @property
    def engine_inputs(self) -> list[TensorInfo]:
        """The inputs the engine binds, in the ONNX graph's order."""
        return [i for i in self.inputs if i.bound]

    @property
    def profile_count(self) -> int:
        return max((len(i.profiles) for i in self.inputs), default=1) or 1


def find_float64(ep: ExportedProgram) -> str | None:
    """Name of the first node (with its op) that produces or holds a float64 tensor, else None."""
    for node in ep.graph.nodes:
        vals = node.meta.get("val")
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        if any(isinstance(v, torch.Tensor) and v.dtype == torch.float64 for v in vals):
            what = node.target if node.op == "call_function" else node.op
            return f"{node.name} ({what})"
    return None


def example_inputs(infos: list[TensorInfo]) -> tuple:
    """Zero inputs of the profile's opt shapes, opt values for sizes (tracing only; validation makes random
    ones)."""
    return tuple(
        info.value.opt if info.is_size else torch.zeros([r.opt for r in info.dims], dtype=info.dtype) for info in infos
    )


class _Flat(torch.nn.Module):
    """``inner`` called with the partition's inputs as they come (what a re-trace exports)."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        return self.inner(*args)


def retraced(ep: ExportedProgram, inputs: list[TensorInfo], profile: dict) -> ExportedProgram:
    """``ep`` traced again with ``torch.export`` (its dynamic dims kept); ``inputs``: the infos of its user inputs,
    in order. The engine's precision is already the program's (backend/precision.py): nothing is cast here."""
    module = _Flat(ep.module())
    names = {}
    dyn = []
    for node, info in zip(user_input_nodes(ep), inputs):
        if info.is_size:  # an integer argument the engine reads as a value: keep it dynamic
            dyn.append(torch.export.Dim.DYNAMIC)
            continue
        spec = {}
        for i, d in enumerate(node.meta["val"].shape):
            if not isinstance(d, torch.SymInt):
                continue
            expr = d.node.expr
            form = linear_form(expr)
            if form is None:  # a size computed from other sizes: let export find it again
                spec[i] = torch.export.Dim.AUTO
                continue
            symbol, a, b = form
            if symbol not in names:
                lo, _, hi = profile[symbol]
                names[symbol] = torch.export.Dim(f"d{len(names)}", min=max(lo, 2), max=max(hi, 3))
            spec[i] = names[symbol] if (a, b) == (1, 0) else names[symbol] * a + b
        dyn.append(spec or None)
    # torch.export specializes sizes 0/1: give dynamic dims an example size of at least 2.
    args = tuple(
        max(2, info.value.opt)
        if info.is_size
        else torch.zeros([r.opt if r.is_static else max(2, r.opt) for r in info.dims], dtype=info.dtype)
        for info in inputs
    )
    dynamic = any(spec for spec in dyn)
    # _Flat.forward(*args): torch.export sees one input, the tuple of the partition's inputs.
    return torch.export.export(module, args, dynamic_shapes=(tuple(dyn),) if dynamic else None, strict=False)


def _info(name: str, val, ranges: SymbolRanges, ep: ExportedProgram) -> TensorInfo:
    if not isinstance(val, torch.Tensor):  # a size argument (SymInt or int)
        union, declared, per_profile = size_range(size_expr(val), ranges)
        if union is None:
            raise EngineBuildError(f"size argument {name!r} ({val.node.expr}) has no range in the program")
        return TensorInfo(name, torch.int64, torch.device("cpu"), (), (declared,), per_profile, union)
    dims, declared, per_profile = dims_of(val, ranges, ep)
    return TensorInfo(name, val.dtype, val.device, dims, declared, per_profile)


def partition_io(
    ep: ExportedProgram, max_factor: int = 2, dynamic_dims: dict[str, DynamicDim] | None = None
) -> tuple[list[TensorInfo], list[TensorInfo], ExportedProgram, SymbolRanges]:
    """The delegate's arguments and results (tensors named by their nodes until the export names them; a
    size the engine derives itself named ""), the program the engine computes, and the symbol ranges.
    No tracing: the build cache keys on these before any export."""
    engine_ep, kept_sizes = engine_program(ep)
    ranges = symbol_ranges(engine_ep, max_factor, dynamic_dims)
    inputs = []
    for node in user_input_nodes(ep):
        inputs.append(_info(node.name, node.meta["val"], ranges, ep))
        if is_size(node) and node.name not in kept_sizes:
            inputs[-1].name = ""  # derived inside the engine from its tensor inputs' shapes
    outputs = []
    for out in user_output_nodes(ep):
        val = out.meta["val"] if isinstance(out, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            raise EngineBuildError(f"partition output {out} is not a tensor; TensorRT engines return tensors only")
        outputs.append(_info(out.name, val, ranges, ep))
    return inputs, outputs, engine_ep, ranges


def _folds_a_weight(node) -> bool | None:
    """onnxscript's constant folding always folds a Transpose of a large initializer (its only consumer): a
    transposed copy of the weight, the size of every linear layer's (and seconds of numpy per GiB). Such a
    Transpose stays in the graph (TensorRT folds it into its own weights at build); others fold as before."""
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
        return None
    source = node.inputs[0] if node.inputs else None
    tensor = source.const_value if source is not None else None
    if tensor is not None and tensor.size > _FOLD_INPUT_LIMIT:
        return False
    return None


def _matmul_transposed(op, a, w):
    return op.MatMul(a, op.Transpose(w, perm=[1, 0]))


def _gemm(op, a, w):
    return op.Gemm(a, w, transB=1)


def _gemm_nd(op, a, w):
    """``a @ w.T`` for ``a`` of rank > 2: flattened to a matrix, a Gemm, reshaped back."""
    flat = op.Reshape(a, op.Constant(value_ints=[-1, w.shape[1]]))
    lead = op.Slice(op.Shape(a), op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]))
    return op.Reshape(op.Gemm(flat, w, transB=1), op.Concat(lead, op.Constant(value_ints=[w.shape[0]]), axis=0))


def _gemm_transposed(op, a, w, c, alpha, beta):
    return op.Gemm(a, op.Transpose(w, perm=[1, 0]), c, alpha=alpha, beta=beta, transA=0, transB=0)


def _gemm_bias(op, a, w, c, alpha, beta):
    return op.Gemm(a, w, c, alpha=alpha, beta=beta, transB=1)


def _is_weight(rank_ok):
    def check(context, a, w, **_) -> bool:
        shape = w.const_value.shape if w.const_value is not None else None
        return shape is not None and len(shape) == 2 and a.shape is not None and rank_ok(len(a.shape))

    return check


def _linear_rules():
    """A linear layer's ``MatMul(x, Transpose(W))`` (its weight kept untransposed, see ``_folds_a_weight``) as one
    ``Gemm(x, W, transB=1)``: TensorRT reads the weight transposed in place instead of transposing a copy of it at
    build (measured with TensorRT-RTX 1.7: about half the build time of a 1 GiB stack of linears)."""
    from onnxscript.rewriter import pattern

    return [
        pattern.RewriteRule(_matmul_transposed, _gemm, _is_weight(lambda r: r == 2)),
        pattern.RewriteRule(_matmul_transposed, _gemm_nd, _is_weight(lambda r: r > 2)),
        pattern.RewriteRule(_gemm_transposed, _gemm_bias, _is_weight(lambda r: r == 2)),
    ]


def _numbered_dims_static(model) -> None:
    """A dim of an input or output whose size expression is a number (a symbol the program pinned to one
    value) is exported as a name (``"2"``), which TensorRT treats as dynamic: shapes inside then cannot be
    proved equal to it (a KV-cache update's heads from a ``Reshape`` with -1). It is that number."""
    import onnx_ir as ir

    for value in (*model.graph.inputs, *model.graph.outputs):
        dims = list(value.shape or ())
        if any(isinstance(d, ir.SymbolicDim) and (d.value or "").isdigit() for d in dims):
            value.shape = ir.Shape(
                [int(d.value) if isinstance(d, ir.SymbolicDim) and (d.value or "").isdigit() else d for d in dims]
            )


def optimize(model) -> None:
    """The exporter's optimization (``torch.onnx.export(optimize=True)``: onnxscript's ``optimize_ir``, then its
    ONNX fusions), in place, except that no weight is transposed into a copy (``_folds_a_weight``): a linear
    layer's transposed weight becomes a ``Gemm`` with ``transB`` (``_linear_rules``)."""
    import onnxscript

    onnxscript.optimizer.optimize_ir(model, should_fold=_folds_a_weight)
    onnxscript.rewriter.onnx_fusions.fuse(model)
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=_linear_rules())


def export_onnx(
    ep: ExportedProgram,
    max_factor: int = 2,
    dynamic_dims: dict[str, DynamicDim] | None = None,
    external_threshold: int | None = None,
) -> OnnxExport:
    """``ep``: the partition as an aten program, in the engine's precision (backend/precision.py: nothing is cast
    here); its user inputs are the delegate's arguments. Initializers of at least ``external_threshold`` bytes
    (default ``onnx_weights.DEFAULT_THRESHOLD``; 0: all) stay out of the protobuf, held in the export
    (builder/onnx_weights.py)."""
    import time

    import onnx

    inputs, outputs, engine_ep, ranges = partition_io(ep, max_factor, dynamic_dims)
    engine_inputs = [i for i in inputs if i.bound]
    profile = ranges.profile
    picked = ranges.picked
    ep = engine_ep

    start = time.perf_counter()
    writes_state = any(n.target == torch.ops.et_tensorrt.kv_cache_update.default for n in ep.graph.nodes)
    # TensorScatter (a state's in-place write) exists from opset 24, blocked and INT4 DequantizeLinear from 21;
    # other partitions keep the exporter's default
    opsets = [kv_cache_op.ONNX_OPSET] * writes_state + [quant_ops.ONNX_OPSET] * quant_ops.uses_quantization(ep)
    args = example_inputs(engine_inputs)
    program = None
    for retrace in (False, True):
        # A partition program carried through ExecuTorch's passes can hold stale unbacked-symbol
        # bookkeeping (data-dependent ops such as nonzero) that the exporter's re-decomposition trips on;
        # re-tracing it with torch.export gives a clean program computing the same thing.
        try:
            target = retraced(ep, engine_inputs, profile) if retrace else ep
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = torch.onnx.export(
                    target,
                    args=args,
                    dynamo=True,
                    external_data=False,
                    verbose=False,
                    optimize=False,  # optimize() below: the exporter's own, without copying the weights
                    opset_version=max(opsets, default=None),
                    custom_translation_table={**kv_cache_op.TRANSLATIONS, **quant_ops.TRANSLATIONS},
                )
            quant_ops.pack_int4_weights(program.model)
            break
        except Exception as exc:  # noqa: BLE001
            if retrace:
                raise EngineBuildError(f"ONNX export of the partition failed: {exc}") from exc
            logger.debug("ONNX export failed (%s); re-tracing the partition", type(exc).__name__)
    exported_values = list(program.model.graph.initializers.values())  # before the optimizer replaces some
    _drop_source_locations(program.model)
    _numbered_dims_static(program.model)
    optimize(program.model)
    threshold = onnx_weights.DEFAULT_THRESHOLD if external_threshold is None else external_threshold
    model, held = onnx_weights.split_model(program.model, threshold)  # never the weights in a protobuf
    # onnxscript's module-level rewrite rules keep the last graph they matched, and its bookkeeping the values the
    # optimizer replaced: none of them may keep the weights alive once the export is done.
    for value in (*exported_values, *program.model.graph.initializers.values()):
        value.const_value = None
    del program
    seconds = time.perf_counter() - start

    onnx_inputs = [i.name for i in model.graph.input]
    onnx_outputs = [o.name for o in model.graph.output]
    if len(onnx_inputs) != len(engine_inputs) or len(onnx_outputs) != len(outputs):
        raise EngineBuildError(
            f"ONNX graph has {len(onnx_inputs)} inputs / {len(onnx_outputs)} outputs, "
            f"the partition {len(engine_inputs)} / {len(outputs)}"
        )
    for info, name in zip(engine_inputs, onnx_inputs):
        info.name = name
    for info, name in zip(outputs, onnx_outputs):
        info.name = name
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    onnx.checker.check_model(onnx_weights.checkable(model))
    return OnnxExport(model, int(opset), inputs, outputs, picked, seconds, initializers=held)


# Node metadata naming the user's source files (paths and line numbers): the same partition exported from two
# checkouts of a model's code would be two ONNX graphs, and the build cache (keyed by the partition) would take
# one for a changed export of the other. The op each node came from stays (``pkg.torch.onnx.fx_node``, ``namespace``).
_SOURCE_LOCATION_KEYS = ("pkg.torch.onnx.stack_trace",)


def _drop_source_locations(model) -> None:
    """Removes the source-location metadata of every node of an onnx_ir model (its functions' included)."""
    import onnx_ir as ir

    graphs = [model.graph, *model.functions.values()]
    for graph in graphs:
        for node in ir.traversal.RecursiveGraphIterator(graph):
            for key in _SOURCE_LOCATION_KEYS:
                node.metadata_props.pop(key, None)


def onnx_node_origin(model: onnx.ModelProto | bytes, node_name: str) -> str | None:
    """The torch op an ONNX node came from (the exporter's ``pkg.torch.onnx.*`` metadata), if recorded."""
    import onnx

    if isinstance(model, (bytes, bytearray)):
        model = onnx.load_from_string(bytes(model))
    for node in model.graph.node:
        if node.name == node_name:
            props = {p.key: p.value for p in node.metadata_props}
            for key in ("pkg.torch.onnx.fx_node", "pkg.torch.onnx.name_scopes", "namespace"):
                if key in props:
                    return props[key]
            return None
    return None
