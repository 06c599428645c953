"""Turn an ExecuTorch edge-dialect partition back into an aten-dialect ``ExportedProgram``.

Edge ops wrap the aten overload in ``._op``; ``to_edge`` rewrote ``_to_copy``/``clone`` into
``dim_order_ops``, which we map back (``dim_order`` -> ``memory_format``). Parameters, buffers and lifted
constants keep their graph-signature kinds, so the ONNX exporter bakes them in as initializers and only
USER_INPUT placeholders become engine inputs. Symbolic shapes and range constraints are kept as they are.
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from et_tensorrt.builder.op_rewrites import Rewriter, lift_constants, rewrite
from et_tensorrt.errors import EngineBuildError

# Targets the rewrites below write in themselves (beyond an edge op's own aten op, its view form from
# ``_view_op``, and the plain pooling of ``ADAPTIVE_POOLING``). The embedded program's safe loader allows
# exactly what the partitioner delegates plus these (et_tensorrt/embedded_program/allowed_ops.py).
REWRITE_TARGETS = ("aten._to_copy.default", "aten.clone.default", "aten.mean.dim")


def _memory_format(dim_order, rank_hint=None):
    if dim_order is None:
        return torch.contiguous_format
    order = [int(d) for d in dim_order]
    if order == list(range(len(order))):
        return torch.contiguous_format
    if len(order) == 4 and order == [0, 2, 3, 1]:
        return torch.channels_last
    if len(order) == 5 and order == [0, 2, 3, 4, 1]:
        return torch.channels_last_3d
    raise EngineBuildError(f"dim_order {order} has no torch memory_format equivalent")


def _is_dim_order_op(target, name: str) -> bool:
    op = getattr(target, "_op", target)
    schema_name = getattr(getattr(op, "_schema", None), "name", "")
    return schema_name == f"dim_order_ops::{name}"


def _rewrite_node(node: torch.fx.Node) -> None:
    target = node.target
    if _is_dim_order_op(target, "_to_dim_order_copy"):
        kwargs = dict(node.kwargs)
        fmt = _memory_format(kwargs.pop("dim_order", None))
        kwargs["memory_format"] = fmt
        node.target = torch.ops.aten._to_copy.default
        node.kwargs = kwargs
    elif _is_dim_order_op(target, "_clone_dim_order"):
        kwargs = dict(node.kwargs)
        fmt = _memory_format(kwargs.pop("dim_order", None))
        kwargs.pop("non_blocking", None)
        kwargs["memory_format"] = fmt
        node.target = torch.ops.aten.clone.default
        node.kwargs = kwargs
    elif hasattr(target, "_op") and isinstance(target._op, torch._ops.OpOverload):
        node.target = _view_op(target._op)
    _spell_out_reductions(node)
    _cast_input_first(node)


def _spell_out_reductions(node: torch.fx.Node) -> None:
    """Spellings the ONNX exporter mistranslates, rewritten to equivalent ones it handles:
    reductions over "all dims" (``dim=None``/``[]``, ``mean.default``) get the dims listed, and views that
    change nothing (``prims.view_of``, ``alias``, a squeeze of non-1 dims) become a clone (ONNX Identity)."""
    aten = torch.ops.aten
    val = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return
    if node.target in (torch.ops.prims.view_of.default, aten.alias.default) or (
        node.target in (aten.squeeze.dims, aten.squeeze.dim) and _squeezes_nothing(node, val)
    ):
        node.target, node.args, node.kwargs = aten.clone.default, (node.args[0],), {}
        return
    if val.dim() == 0:
        return
    every_dim = list(range(val.dim()))
    if node.target is aten.mean.default:
        node.target, node.args = aten.mean.dim, (node.args[0], every_dim, False)  # dtype stays in kwargs
    elif node.target in (aten.mean.dim, aten.amax.default, aten.amin.default, aten.sum.dim_IntList):
        args = list(node.args)
        dim = args[1] if len(args) > 1 else node.kwargs.get("dim")
        if not dim:
            if len(args) > 1:
                args[1] = every_dim
            else:
                node.kwargs = {**node.kwargs, "dim": every_dim}
            node.args = tuple(args)


# Ops whose ``dtype`` argument means "cast the input, then compute" (PyTorch), which the ONNX exporter
# translates as "compute, then cast": a mean of int64 in ONNX divides in integers (mean([1, 2]) = 1).
_DTYPE_ARG_POSITION = {
    torch.ops.aten.mean.dim: None,
    torch.ops.aten.mean.default: None,
    torch.ops.aten.sum.dim_IntList: None,
    torch.ops.aten.sum.default: None,
    torch.ops.aten.softmax.int: 2,
    torch.ops.aten.log_softmax.int: 2,
    torch.ops.aten.cumsum.default: None,
}


def _cast_input_first(node: torch.fx.Node) -> None:
    """``op(x, ..., dtype=d)`` -> ``op(x.to(d), ...)``: the cast PyTorch does first, made explicit."""
    if node.target not in _DTYPE_ARG_POSITION:
        return
    position = _DTYPE_ARG_POSITION[node.target]
    args, kwargs = list(node.args), dict(node.kwargs)
    if position is not None and len(args) > position:
        dtype = args[position]
        args[position] = None
    else:
        dtype = kwargs.pop("dtype", None)
    source = args[0]
    val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if dtype is None or not isinstance(val, torch.Tensor):
        return
    if val.dtype != dtype:
        with node.graph.inserting_before(node):
            cast = node.graph.call_function(torch.ops.aten._to_copy.default, (source,), {"dtype": dtype})
        cast.meta["val"] = val.to(dtype)
        args[0] = cast
    node.args, node.kwargs = tuple(args), kwargs


def _squeezes_nothing(node: torch.fx.Node, val: torch.Tensor) -> bool:
    dims = node.args[1] if len(node.args) > 1 else []
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return all(val.shape[d] != 1 for d in dims)


def _view_op(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """``aten.select_copy.int`` -> ``aten.select.int``: edge's functional ``*_copy`` view ops back to the view
    ops the ONNX exporter converts (several ``*_copy`` variants have no ONNX function). Same values: the
    partition is functional, so no view is ever written through."""
    packet = op._schema.name.split("::")[-1]
    if not packet.endswith("_copy") or packet == "_to_copy":
        return op
    view_packet = getattr(torch.ops.aten, packet[: -len("_copy")], None)
    view = getattr(view_packet, op._overloadname, None) if view_packet is not None else None
    return view if isinstance(view, torch._ops.OpOverload) else op


def _used_ranges(gm: torch.fx.GraphModule, ranges: dict) -> dict:
    """Range constraints of the symbols the graph still uses (ExecuTorch's passes leave stale unbacked ones)."""
    used = set()
    for node in gm.graph.nodes:
        vals = node.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor):
                sizes = list(v.shape)
            elif isinstance(v, torch.SymInt):
                sizes = [v]
            else:
                continue
            for s in sizes:
                if isinstance(s, torch.SymInt):
                    used |= s.node.expr.free_symbols
    return {k: v for k, v in ranges.items() if k in used}


def edge_to_aten(edge_program: ExportedProgram) -> ExportedProgram:
    """An aten ``ExportedProgram`` computing what ``edge_program`` computes (the input is not modified)."""
    gm = copy.deepcopy(edge_program.graph_module)
    signature = copy.deepcopy(edge_program.graph_signature)
    constants = dict(edge_program.constants)
    user = {s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT}
    rewriter = Rewriter(gm, user)
    for node in list(gm.graph.nodes):
        if node.op == "call_function":
            _rewrite_node(node)
            rewrite(node, rewriter)
    lift_constants(rewriter, signature, constants)
    ranges = _used_ranges(gm, edge_program.range_constraints)
    return regraphed(edge_program, gm, signature, dict(edge_program.state_dict), constants, ranges)


def regraphed(
    ep: ExportedProgram, gm: torch.fx.GraphModule, signature, state_dict: dict, constants: dict, range_constraints: dict
) -> ExportedProgram:
    """``ep`` (its module call graph) around a rewritten graph, signature, weights and ranges."""
    gm.graph.lint()
    gm.recompile()
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=state_dict,
        range_constraints=range_constraints,
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        constants=constants,
    )


def _host_device(value):
    if isinstance(value, torch.device) and value.type != "cpu":
        return torch.device("cpu")
    return value


def _host_val(val):
    if isinstance(val, torch.Tensor):
        return val if val.device.type == "cpu" else val.to("cpu")
    if isinstance(val, (list, tuple)):
        return type(val)(_host_val(v) for v in val)
    return val


def _host_tensor(t):
    if not isinstance(t, torch.Tensor) or t.device.type == "cpu":
        return t
    moved = t.detach().to("cpu")
    return torch.nn.Parameter(moved, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else moved


def _collect_device(value, found: list) -> object:
    if isinstance(value, torch.device):
        found.append(value)
    return value


def is_on_host(ep: ExportedProgram) -> bool:
    """Every tensor the program records, every device argument and every weight is on the host."""
    for node in ep.graph.nodes:
        vals = node.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                return False
        devices: list[torch.device] = []
        torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a, found=devices: _collect_device(a, found))
        if any(d.type != "cpu" for d in devices):
            return False
    tensors = list(ep.state_dict.values()) + list(ep.constants.values())
    return all(t.device.type == "cpu" for t in tensors if isinstance(t, torch.Tensor))


def on_host(ep: ExportedProgram) -> ExportedProgram:
    """The same computation with every tensor on the host: recorded devices, device arguments (a factory's
    ``device=cuda:0``) and weights. ONNX and TensorRT engines carry no device, so a partition of a program
    exported with CUDA tensors is exported (and validated, and embedded for the PyTorch fallback, which
    moves it to its execution device) from its host form: tracing it never mixes the recorded device with
    host example inputs or host weights. The engine's I/O devices are recorded from ``ep`` itself."""
    if is_on_host(ep):
        return ep
    gm = copy.deepcopy(ep.graph_module)
    for node in gm.graph.nodes:
        if "val" in node.meta:
            node.meta["val"] = _host_val(node.meta["val"])
        node.args = torch.fx.node.map_aggregate(node.args, _host_device)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, _host_device)
    gm.recompile()
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=copy.deepcopy(ep.graph_signature),
        state_dict={k: _host_tensor(v) for k, v in ep.state_dict.items()},
        range_constraints=dict(ep.range_constraints),
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        constants={k: _host_tensor(v) for k, v in ep.constants.items()},
    )


def user_input_nodes(ep: ExportedProgram) -> list[torch.fx.Node]:
    """Placeholders that are user inputs (engine inputs), in argument order."""
    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    return [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]


def user_output_nodes(ep: ExportedProgram) -> list:
    """The graph's outputs that are user outputs, in the partition's output order."""
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    values = out_node.args[0]
    specs = ep.graph_signature.output_specs
    from torch.export.graph_signature import OutputKind

    return [v for v, s in zip(values, specs) if s.kind == OutputKind.USER_OUTPUT]
