"""Check the exported ONNX with onnxruntime against PyTorch on the partition (random inputs), with the
tolerances of ``et_tensorrt.parity`` for the build precision.

Random integers must be inputs the partition accepts: an index input gets values inside the dim it
indexes (the ONNX Gather of an out-of-range index fails), also when it reaches its indexing op through
views, casts or a ``where`` (``input_ids.view(-1, n)`` feeding an embedding), any other integer input
nonzero values of both signs (an integer division by zero raises in PyTorch; negative values tell floor from truncating
division). When PyTorch still cannot compute the reference, the check is inconclusive: ``validate``
raises ``ValidationInconclusive`` and the caller warns instead of refusing the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.export import ExportedProgram

from et_tensorrt.builder import quant_ops
from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.builder.onnx_export import OnnxExport
from et_tensorrt.builder.onnx_weights import onnxruntime_session
from et_tensorrt.errors import EngineBuildError, ValidationError
from et_tensorrt.parity import compare, for_precision, for_quantized

_INT_MAGNITUDE = 4  # random non-index integers lie in [-4, -1] u [1, 4]


class ValidationInconclusive(Exception):
    """Nothing was compared: PyTorch could not compute the reference on the random inputs, or onnxruntime has
    no CPU kernel for the ONNX's bf16 tensors (numpy has no bfloat16; ORT lacks e.g. a bf16 Conv)."""


def _size(value) -> int:
    return value if isinstance(value, int) else 1  # a symbolic dim: index 0 is always inside it


def _indexed_dims(data: torch.fx.Node, dims) -> list:
    val = data.meta.get("val") if isinstance(data, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return [1]
    return [_size(val.shape[d]) for d in dims if -val.dim() <= d < val.dim()] or [1]


_aten = torch.ops.aten
# Ops whose output holds values of their first argument unchanged (moved, repeated, re-typed): an index
# read through them is still an index.
_PASSING_VALUES = {
    _aten.view.default,
    _aten.reshape.default,
    _aten._unsafe_view.default,
    _aten.unsqueeze.default,
    _aten.squeeze.dim,
    _aten.squeeze.dims,
    _aten.squeeze.default,
    _aten.expand.default,
    _aten.permute.default,
    _aten.transpose.int,
    _aten.t.default,
    _aten.clone.default,
    _aten.contiguous.default,
    _aten.alias.default,
    _aten.flatten.using_ints,
    _aten.select.int,
    _aten.slice.Tensor,
    _aten._to_copy.default,
    _aten.repeat.default,
}


def _passes_values(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether ``user``'s output holds values of ``node`` unchanged."""
    args = user.args
    if user.target in _PASSING_VALUES:
        return bool(args) and args[0] is node
    if user.target is _aten.where.self:  # where(cond, a, b): a and b pass through (the rewrite of i < 0)
        return node in args[1:3]
    if user.target is _aten.cat.default:
        return node in args[0]
    return False


def _index_bound(node: torch.fx.Node, depth: int = 0) -> int | None:
    """The exclusive upper bound for an integer input used as an index (None: not an index)."""
    aten = torch.ops.aten
    bounds = []
    for user in node.users:
        args = user.args
        if depth < 16 and _passes_values(user, node):
            bound = _index_bound(user, depth + 1)
            if bound is not None:
                bounds.append(bound)
            continue
        if user.target in (aten.index_select.default, aten.gather.default) and len(args) > 2 and args[2] is node:
            bounds += _indexed_dims(args[0], [args[1]])
        elif user.target is aten.embedding.default and len(args) > 1 and args[1] is node:
            bounds += _indexed_dims(args[0], [0])
        elif user.target in (aten.index.Tensor, aten.index_put.default) and len(args) > 1:
            positions = [i for i, x in enumerate(args[1]) if x is node]
            if positions:  # index_put's values (args[2]) are data, not an index
                bounds += _indexed_dims(args[0], positions)
        elif (
            user.target in (aten.scatter.src, aten.scatter.value, aten.scatter_add.default)
            and len(args) > 2
            and args[2] is node
        ):
            bounds += _indexed_dims(args[0], [args[1]])
    return min(bounds) if bounds else None


def validation_inputs(ep: ExportedProgram, export: OnnxExport, seed: int = 0) -> tuple:
    """Random inputs of the profile's opt shapes that the partition accepts (see the module doc); size
    arguments get their opt value."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for node, info in zip(user_input_nodes(ep), export.inputs):
        if info.is_size:  # a size argument: its opt value (the tensors below are built for it)
            out.append(info.value.opt)
            continue
        shape, dt = [r.opt for r in info.dims], info.dtype
        if dt.is_floating_point:
            out.append(torch.randn(shape, generator=gen, dtype=torch.float32).to(dt))
        elif dt == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        elif (bound := _index_bound(node)) is not None:
            out.append(torch.randint(0, max(bound, 1), shape, generator=gen).to(dt))
        else:
            magnitude = torch.randint(1, _INT_MAGNITUDE + 1, shape, generator=gen)
            sign = torch.randint(0, 2, shape, generator=gen) * 2 - 1 if dt.is_signed else 1
            out.append((magnitude * sign).to(dt))
    return tuple(out)


def run_onnx(export: OnnxExport, inputs: Sequence[torch.Tensor | int]) -> list[torch.Tensor]:
    """The exported ONNX run by onnxruntime on the host, one tensor per output (ValidationError when
    onnxruntime cannot run it on these inputs). A size argument is an int."""
    import onnxruntime as ort

    if len(inputs) != len(export.inputs):
        raise ValidationError(f"the ONNX takes {len(export.inputs)} input(s), got {len(inputs)}")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if b"QuantizeLinear" in export.model_bytes:  # (also matches DequantizeLinear)
        # onnxruntime's graph optimizations rewrite Q/DQ around Conv/MatMul into its own quantized kernels, which
        # round differently (measured: FP8 outputs off by a third): run the ONNX as it is written.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if any(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in inputs):  # before ORT sees the graph
        raise ValidationInconclusive("bf16 inputs cannot be fed to onnxruntime (numpy has no bfloat16)")
    try:
        session = onnxruntime_session(export, opts)
        wanted = set(session.input_names)  # an input the graph does not read may be dropped
        feeds = {}
        for info, value in zip(export.inputs, inputs, strict=True):
            if info.is_size:  # fed as a 0-d int64 when the engine takes it, else computed from shapes
                if info.bound:
                    feeds[info.name] = np.array(value, dtype=np.int64)
                continue
            if info.name in wanted:
                feeds[info.name] = value.detach().to("cpu").contiguous().numpy()
        got = session.run([o.name for o in export.outputs], feeds)
    except (ValidationError, ValidationInconclusive, EngineBuildError):
        raise
    except Exception as exc:  # noqa: BLE001
        if "bfloat16" in str(exc):  # ORT's CPU provider has no kernel for this op in bf16: its limit, not the ONNX's
            raise ValidationInconclusive(f"onnxruntime cannot run this bf16 ONNX on the CPU: {exc}") from exc
        raise ValidationError(f"onnxruntime could not run the exported ONNX: {exc}") from exc
    return [torch.from_numpy(value) for value in got]


def validate(ep: ExportedProgram, export: OnnxExport, precision: str = "fp32", seed: int = 0) -> dict:
    """Raise ValidationError when onnxruntime and PyTorch disagree (ValidationInconclusive when PyTorch
    cannot compute the reference); returns the largest absolute error per output."""
    inputs = validation_inputs(ep, export, seed)
    try:
        with torch.no_grad():
            expected = ep.module()(*inputs)
    except Exception as exc:  # noqa: BLE001
        raise ValidationInconclusive(f"PyTorch cannot run the partition on random inputs: {exc}") from exc
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    # numpy has no bfloat16: onnxruntime hands such outputs back widened to float32.
    expected = [e.float() if isinstance(e, torch.Tensor) and e.dtype == torch.bfloat16 else e for e in expected]
    got = run_onnx(export, inputs)
    # a quantized activation may round to a neighbouring step in either runtime: compare against its share
    quantized = any(n.target is quant_ops.QUANTIZE for n in ep.graph.nodes)
    result = compare(expected, got, for_quantized(precision, expected) if quantized else for_precision(precision))
    if not result.passed:
        problems = (
            result.failures()
            if result.problem
            else [_problem(export.outputs[o.index].name, o) for o in result.outputs if not o.ok]
        )
        raise ValidationError(f"ONNX differs from PyTorch ({result.tolerances}): " + "; ".join(problems))
    return {info.name: o.max_abs_error for info, o in zip(export.outputs, result.outputs, strict=True)}


def _problem(name: str, output) -> str:
    error = "" if output.max_abs_error is None else f", max abs error {output.max_abs_error:.3g}"
    return f"output {name!r}: {output.problem}{error}"
