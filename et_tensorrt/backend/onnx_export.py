"""Export an aten partition to ONNX in memory and record what the blob and the builder need.

Records, for every engine input, its ONNX name, dtype, device and per-dim ranges (min/opt/max) taken from
the program's symbolic shapes and range constraints, and the output names in the partition's output order.
"""

from __future__ import annotations

import io
import logging
import warnings
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch.export import ExportedProgram

from et_tensorrt.blob import DimRange
from et_tensorrt.backend.edge_to_aten import user_input_nodes, user_output_nodes
from et_tensorrt.errors import EngineBuildError

logger = logging.getLogger("et_tensorrt")

LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class TensorInfo:
    name: str  # ONNX / TensorRT binding name
    dtype: torch.dtype
    device: torch.device
    dims: tuple[DimRange, ...]  # ranges the engine is built for (bounded)
    declared_dims: tuple[DimRange, ...]  # ranges as the program declares them (max -1 = unbounded)


@dataclass
class OnnxExport:
    model_bytes: bytes
    opset: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    picked_max: dict = field(default_factory=dict)  # "input:dim" -> max chosen for an unbounded dim
    seconds: float = 0.0


def _sym_of(d):
    if isinstance(d, torch.SymInt):
        return d.node.expr
    return int(d)


def _hint(d) -> Optional[int]:
    try:
        hint = d.node.hint
        if hint is not None:
            return int(hint)
    except Exception:  # noqa: BLE001
        pass
    try:
        return int(d.node.shape_env.size_hint(d.node.expr))
    except Exception:  # noqa: BLE001
        return None


def _bound(value) -> Optional[int]:
    """sympy bound -> int, None when infinite."""
    try:
        import torch.utils._sympy.numbers as snum

        if value in (snum.int_oo, -snum.int_oo):
            return None
    except ImportError:
        pass
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if f in (float("inf"), float("-inf")) or f > 2**62:
        return None
    return int(value)


def _symbol_hint(d, symbol) -> Optional[int]:
    """The example value ``symbol`` had when the program was traced (``d`` is a SymInt using it)."""
    try:
        env = d.node.shape_env
        # torch 2.13 renamed var_to_val (now deprecated, with a warning per call) to backed_var_to_val.
        values = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
        value = values.get(symbol)
        return int(value) if value is not None else None
    except Exception:  # noqa: BLE001
        return None


def linear_form(expr) -> Optional[tuple]:
    """``(symbol, a, b)`` when ``expr`` is ``a*symbol + b`` with integers a > 0, b (``16*s`` from a derived
    ``Dim("h") * 16``), else None."""
    free = list(expr.free_symbols)
    if len(free) != 1:
        return None
    symbol = free[0]
    poly = expr.as_poly(symbol) if hasattr(expr, "as_poly") else None
    if poly is None or poly.degree() != 1:
        return None
    a, b = (int(c) if c.is_Integer else None for c in poly.all_coeffs())
    if a is None or b is None or a <= 0:
        return None
    return symbol, a, b


def symbol_ranges(ep: ExportedProgram, max_factor: int = 2) -> tuple[dict, dict, dict]:
    """For each input symbol: profile (min, opt, max), declared (min, max or -1), picked maxima.

    An input dim is a plain dynamic dim (``s0``), a linear one (``16*s0``, from a derived ``Dim``) or, for a
    partition fed by another, any size expression of the program's symbols (``(4*s0 + 7)//8``). The
    ranges are per symbol; ``_dims`` turns them into each dim's range."""
    profile, declared, picked = {}, {}, {}
    for node in user_input_nodes(ep):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for i, d in enumerate(val.shape):
            if not isinstance(d, torch.SymInt):
                continue
            expr = d.node.expr
            form = linear_form(expr)
            for symbol in sorted(expr.free_symbols, key=str):
                if symbol in profile:
                    continue
                rng = ep.range_constraints.get(symbol)
                if rng is None:
                    raise EngineBuildError(
                        f"input {node.name!r} dim {i} has the symbolic size {expr}, and the program records "
                        f"no range for {symbol}"
                    )
                lo = max(1, _bound(rng.lower) or 1)
                hi = _bound(rng.upper)
                hint = _symbol_hint(d, symbol)
                if hint is None and form is not None:
                    size = _hint(d)
                    hint = (size - form[2]) // form[1] if size is not None else None
                opt = max(hint or lo, lo)
                if hi is not None:
                    opt = min(opt, hi)
                declared[symbol] = (lo, -1 if hi is None else hi)
                if hi is None:
                    hi = max(lo, max_factor * opt)
                    picked[f"{node.name}:{i}"] = hi if form is None else form[1] * hi + form[2]
                profile[symbol] = (lo, opt, hi)
    return profile, declared, picked


# A one-symbol size expression is evaluated at every value of its symbol up to this many values (exact
# range even for floor divisions and modulos); beyond it, and with several symbols, at the range corners.
_EXACT_RANGE_VALUES = 4096


def expr_range(expr, profile: dict) -> tuple[int, int, int]:
    """(min, opt, max) of a size expression over the profile ranges of its symbols."""
    import itertools

    import sympy

    free = sorted(expr.free_symbols, key=str)
    opt = int(expr.xreplace({s: sympy.Integer(profile[s][1]) for s in free}))
    if len(free) == 1 and linear_form(expr) is None:
        (symbol,) = free
        lo, _, hi = profile[symbol]
        if hi - lo < _EXACT_RANGE_VALUES:
            values = [int(expr.xreplace({symbol: sympy.Integer(v)})) for v in range(lo, hi + 1)]
            return min(values), opt, max(values)
    corners = [
        int(expr.xreplace({s: sympy.Integer(v) for s, v in zip(free, point)}))
        for point in itertools.product(*[(profile[s][0], profile[s][2]) for s in free])
    ]
    return min(corners), opt, max(corners)


def _dims(val: torch.Tensor, profile: dict, declared: dict, ep: ExportedProgram):
    dims, decl = [], []
    for d in val.shape:
        expr = _sym_of(d)
        if isinstance(expr, int):
            dims.append(DimRange.static(expr))
            decl.append(DimRange.static(expr))
            continue
        free = expr.free_symbols
        if free and free.issubset(profile.keys()):
            lo, opt, hi = expr_range(expr, profile)
            dims.append(DimRange(lo, opt, hi))
            if all(declared[s][1] != -1 for s in free):
                decl.append(DimRange(lo, opt, hi))
            else:
                decl.append(DimRange(lo, opt, -1))
            continue
        # Data-dependent (unbacked) size: use its declared range, unbounded when unknown.
        rng = ep.range_constraints.get(expr) if getattr(expr, "is_Symbol", False) else None
        lo = max(0, _bound(rng.lower) or 0) if rng is not None else 0
        hi = _bound(rng.upper) if rng is not None else None
        r = DimRange(lo, lo, -1 if hi is None else hi)
        dims.append(r)
        decl.append(r)
    return tuple(dims), tuple(decl)


def find_float64(ep: ExportedProgram) -> Optional[str]:
    """Name of the first node (with its op) that produces or holds a float64 tensor, else None."""
    for node in ep.graph.nodes:
        vals = node.meta.get("val")
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        if any(isinstance(v, torch.Tensor) and v.dtype == torch.float64 for v in vals):
            what = node.target if node.op == "call_function" else node.op
            return f"{node.name} ({what})"
    return None


def example_inputs(infos: list[TensorInfo]) -> tuple[torch.Tensor, ...]:
    """Zero inputs of the profile's opt shapes (tracing only; validation makes random ones)."""
    return tuple(torch.zeros([r.opt for r in info.dims], dtype=info.dtype) for info in infos)


class _Cast(torch.nn.Module):
    """Run ``inner`` in a lower float precision; I/O keeps the partition's dtypes."""

    def __init__(self, inner: torch.nn.Module, dtype: Optional[torch.dtype]):
        super().__init__()
        if dtype is not None:  # ep.module() shares its parameters with the program: cast a copy
            import copy

            inner = copy.deepcopy(inner).to(dtype)
        self.inner = inner
        self.dtype = dtype
        if dtype is not None and isinstance(inner, torch.fx.GraphModule):
            # Lifted constants come back as plain tensor attributes, which Module.to() does not touch.
            for node in inner.graph.nodes:
                if node.op != "get_attr":
                    continue
                owner, _, attr = node.target.rpartition(".")
                mod = inner.get_submodule(owner) if owner else inner
                value = getattr(mod, attr, None)
                if isinstance(value, torch.Tensor) and value.dtype == torch.float32 and not isinstance(
                    value, torch.nn.Parameter
                ):
                    if attr in mod._buffers:
                        mod._buffers[attr] = value.to(dtype)
                    else:
                        setattr(mod, attr, value.to(dtype))

    def forward(self, *args):
        if self.dtype is None:
            return self.inner(*args)
        cast = [a.to(self.dtype) if a.dtype == torch.float32 else a for a in args]
        outs = self.inner(*cast)
        single = not isinstance(outs, (tuple, list))
        outs = (outs,) if single else tuple(outs)
        outs = tuple(o.to(torch.float32) if o.dtype == self.dtype else o for o in outs)
        return outs[0] if single else outs


def with_precision(
    ep: ExportedProgram, precision: str, inputs: list[TensorInfo], profile: dict, retrace: bool = False
) -> ExportedProgram:
    """fp32: ``ep`` itself (re-traced when ``retrace``). fp16/bf16: re-export with the weights and compute
    cast (TRT-RTX is strongly typed, so the ONNX tensor types decide the engine's precision)."""
    if precision == "fp32" and not retrace:
        return ep
    module = _Cast(ep.module(), LOW_PRECISION.get(precision))
    names = {}
    dyn = []
    for node, info in zip(user_input_nodes(ep), inputs):
        spec = {}
        for i, d in enumerate(node.meta["val"].shape):
            expr = _sym_of(d)
            if isinstance(expr, int):
                continue
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
        torch.zeros([r.opt if r.is_static else max(2, r.opt) for r in info.dims], dtype=info.dtype) for info in inputs
    )
    dynamic = any(spec for spec in dyn)
    return torch.export.export(module, args, dynamic_shapes=tuple(dyn) if dynamic else None, strict=False)


def partition_io(ep: ExportedProgram, max_factor: int = 2) -> tuple[list[TensorInfo], list[TensorInfo], dict, dict]:
    """The partition's engine inputs and outputs (named by their nodes until the export names them), the
    per-symbol profile ranges and the maxima picked for unbounded dims. Cheap: no tracing."""
    profile, declared, picked = symbol_ranges(ep, max_factor)
    inputs = []
    for node in user_input_nodes(ep):
        val = node.meta["val"]
        dims, decl = _dims(val, profile, declared, ep)
        inputs.append(TensorInfo(node.name, val.dtype, val.device, dims, decl))
    outputs = []
    for out in user_output_nodes(ep):
        val = out.meta["val"] if isinstance(out, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            raise EngineBuildError(f"partition output {out} is not a tensor; TensorRT engines return tensors only")
        dims, decl = _dims(val, profile, declared, ep)
        outputs.append(TensorInfo(out.name, val.dtype, val.device, dims, decl))
    return inputs, outputs, profile, picked


def export_onnx(ep: ExportedProgram, precision: str = "fp32", max_factor: int = 2) -> OnnxExport:
    import time

    import onnx

    inputs, outputs, profile, picked = partition_io(ep, max_factor)
    start = time.perf_counter()
    args = example_inputs(inputs)
    program = None
    for retrace in (False, True):
        # A partition program carried through ExecuTorch's passes can hold stale unbacked-symbol
        # bookkeeping (data-dependent ops such as nonzero) that the exporter's re-decomposition trips on;
        # re-tracing it with torch.export gives a clean program computing the same thing.
        try:
            target = with_precision(ep, precision, inputs, profile, retrace=retrace)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = torch.onnx.export(target, args=args, dynamo=True, external_data=False, verbose=False)
            break
        except Exception as exc:  # noqa: BLE001
            if retrace or precision != "fp32":
                raise EngineBuildError(f"ONNX export of the partition failed: {exc}") from exc
            logger.debug("ONNX export failed (%s); re-tracing the partition", type(exc).__name__)
    model = program.model_proto
    seconds = time.perf_counter() - start

    onnx_inputs = [i.name for i in model.graph.input]
    onnx_outputs = [o.name for o in model.graph.output]
    if len(onnx_inputs) != len(inputs) or len(onnx_outputs) != len(outputs):
        raise EngineBuildError(
            f"ONNX graph has {len(onnx_inputs)} inputs / {len(onnx_outputs)} outputs, "
            f"the partition {len(inputs)} / {len(outputs)}"
        )
    for info, name in zip(inputs, onnx_inputs):
        info.name = name
    for info, name in zip(outputs, onnx_outputs):
        info.name = name
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    data = model.SerializeToString()
    onnx.checker.check_model(data if len(data) < 2**31 else model)
    return OnnxExport(data, int(opset), inputs, outputs, picked, seconds)


def onnx_node_origin(model_bytes: bytes, node_name: str) -> Optional[str]:
    """The torch op an ONNX node came from (the exporter's ``pkg.torch.onnx.*`` metadata), if recorded."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    for node in model.graph.node:
        if node.name == node_name:
            props = {p.key: p.value for p in node.metadata_props}
            for key in ("pkg.torch.onnx.fx_node", "pkg.torch.onnx.name_scopes", "namespace"):
                if key in props:
                    return props[key]
            return None
    return None
