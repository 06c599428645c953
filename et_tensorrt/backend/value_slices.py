"""Slices that start at a value read from a tensor become gathers, so the engine never needs it on the host.

ExecuTorch's llama with ``enable_dynamic_shape=True`` reads its start position with ``input_pos[0].item()``
and slices the rotary tables and the mask at it: ``freqs[start : start + S]``. A slice's start is a TensorRT
shape tensor, which TensorRT reads from host memory before it can even size the engine's tensors. The same
rows are ``index_select(freqs, 0, arange(S) + start)``: a gather whose indices are ordinary device data, and
whose output size (``S``) comes from the tokens' shape. The write position's range is the delegate's to check
(the state's position guard, backend/state_lifting.py).

Writes the same way: ``slice_scatter(cache, rows, dim, start, start + S)`` (``cache.narrow(dim, start,
S).copy_(rows)``, ExecuTorch's ``llama.update_cache`` on its ``[B, S, H, D]`` cache) is ``cache[..., arange(S) +
start] = rows``, an ``index_put`` (a scatter) whose output has the cache's shape. (A write into a ``[B, H, S, D]``
cache the delegate owns is TensorRT's KV-cache update instead, backend/state_lifting.py.)

Applied to the program the ONNX export sees (the engine's); the embedded program keeps the slices.
"""

from __future__ import annotations

import operator

import torch

aten = torch.ops.aten
_SLICES = (aten.slice.Tensor, aten.slice_copy.Tensor)


def _read_value(node) -> bool:
    """Whether ``node`` is a SymInt read from tensor data (``.item()``), not from a shape."""
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and node.target == aten._local_scalar_dense.default
    )


def gathers_for_value_slices(gm: torch.fx.GraphModule) -> int:
    """Rewrites ``slice(x, dim, v, v + L)`` with ``v`` read from a tensor into ``index_select``; returns how
    many. ``gm`` is modified in place."""
    graph = gm.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _SLICES or len(node.args) < 4:
            continue
        x, dim, start, end = node.args[:4]
        step = node.args[4] if len(node.args) > 4 else 1
        if step != 1 or not _read_value(start):
            continue
        if not (isinstance(end, torch.fx.Node) and end.target is operator.add and end.args[0] is start):
            continue
        length = end.args[1]
        x_val = x.meta["val"]
        fake = x_val.fake_mode
        with graph.inserting_before(node):
            rows = _positions(graph, start, length, fake)
            gather = graph.call_function(aten.index_select.default, (x, dim, rows))
        gather.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(gather)
        graph.erase_node(node)
        count += 1
    if count:
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return count


def scatters_for_value_slices(gm: torch.fx.GraphModule, keep=frozenset()) -> dict[str, torch.fx.Node]:
    """Rewrites ``slice_scatter(x, rows, dim, v, v + L)`` with ``v`` read from a tensor into ``index_put(x, [None] *
    dim + [arange(L) + v], rows)``, except the nodes named in ``keep``; returns {old node's name: its
    replacement}. ``gm`` is modified in place."""
    graph = gm.graph
    replaced = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.slice_scatter.default or node.name in keep:
            continue
        if len(node.args) < 5:
            continue
        x, rows, dim, start, end = node.args[:5]
        step = node.args[5] if len(node.args) > 5 else 1
        if step != 1 or not _read_value(start):
            continue
        length = slice_length(start, end)
        if length is None:
            continue
        x_val = x.meta["val"]
        dim = dim % x_val.dim()
        with graph.inserting_before(node):
            positions = _positions(graph, start, length, x_val.fake_mode)
            scatter = graph.call_function(aten.index_put.default, (x, [None] * dim + [positions], rows))
        scatter.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(scatter)
        replaced[node.name] = scatter
        graph.erase_node(node)
    if replaced:
        graph.lint()
        gm.recompile()
    return replaced


def slice_length(start: torch.fx.Node, end) -> int | torch.fx.Node | None:
    """L for a slice ``[start, start + L)``: an int or the node of its SymInt, else None."""
    if isinstance(end, torch.fx.Node) and end.op == "call_function" and end.target is operator.add:
        if end.args[0] is start:
            return end.args[1]
        if end.args[1] is start:
            return end.args[0]
    return None


def _positions(graph: torch.fx.Graph, start: torch.fx.Node, length, fake) -> torch.fx.Node:
    """``arange(length) + start``: the rows a slice at ``start`` covers, as device data."""
    ramp = graph.call_function(aten.arange.start_step, (0, length), {"dtype": torch.int64})
    first = graph.call_function(aten.scalar_tensor.default, (start,), {"dtype": torch.int64})
    rows = graph.call_function(aten.add.Tensor, (ramp, first))
    with fake:
        length_val = length.meta["val"] if isinstance(length, torch.fx.Node) else length
        ramp.meta["val"] = torch.arange(0, length_val, dtype=torch.int64)
        first.meta["val"] = torch.scalar_tensor(0, dtype=torch.int64)
        rows.meta["val"] = ramp.meta["val"] + first.meta["val"]
    return rows
