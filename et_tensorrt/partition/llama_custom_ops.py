"""ExecuTorch's LLM custom ops (extension/llm/custom_ops: CPU kernels, no TensorRT layer) as the aten ops they
compute, decomposed before lowering so a method that uses them is one engine: ``llama.custom_sdpa`` (attention over
a ``[batch, positions, heads, dim]`` cache, grouped-query heads, causal from ``start_pos`` or an additive mask),
``llama.update_cache`` (writes ``value`` into the cache at ``start_pos``: a state updated in place) and
``llama.update_cache_with_indices`` (writes ``value[b, s]`` at position ``indices[b, s]``: the ring buffers of
voxtral_realtime's ``--streaming`` decoder and llama's attention sink / sliding window). What examples/models/llama
with ``use_sdpa_with_kv_cache``, gemma4 and voxtral_realtime export whenever the custom ops library is loaded.

The cache updates come in two forms: as the mutating op (a ``torch.export`` of the model) or, after any
``run_decompositions`` (ExecuTorch's LLM export, ``LLMEdgeManager._export``, runs one before handing the program on),
wrapped in ``auto_functionalized_v2``, which no decomposition table takes; both become the aten ops they compute."""

from __future__ import annotations

import math
import operator

import torch

SDPA = "llama.custom_sdpa.default"
UPDATE_CACHE = "llama.update_cache.default"
UPDATE_CACHE_WITH_INDICES = "llama.update_cache_with_indices.default"
_UPDATES = (UPDATE_CACHE, UPDATE_CACHE_WITH_INDICES)
_FUNCTIONALIZED = "torch.ops.higher_order.auto_functionalized_v2"


def custom_sdpa(query, key, value, start_pos, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """The kernel's attention (op_sdpa.cpp): ``query`` ``[B, S, H, D]``, ``key``/``value`` ``[B, L, Hkv, D]`` with
    query head ``h`` reading key head ``h // (H // Hkv)``; a mask (``[S, L]``, added) over every key, or causal:
    query ``i`` (position ``start_pos + i``) reads keys ``0 .. start_pos + i``. The causal mask is computed over the
    whole cache, so no size depends on ``start_pos``."""
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    groups = q.size(1) // k.size(1)
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (scale if scale is not None else 1.0 / math.sqrt(q.size(-1)))
    if attn_mask is not None:
        scores = scores + attn_mask.to(scores.dtype)
    elif is_causal:
        rows = torch.arange(q.size(2), device=q.device).unsqueeze(1) + start_pos
        cols = torch.arange(k.size(2), device=q.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows, float("-inf"))
    out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), v)
    return out.transpose(1, 2).contiguous()


def _update_op(node: torch.fx.Node) -> str | None:
    """The cache update ``node`` calls (the op itself, or the op ``auto_functionalized_v2`` wraps), else None."""
    from .supported_ops import op_name

    if node.op != "call_function":
        return None
    name = op_name(node.target)
    if name == _FUNCTIONALIZED and node.args and op_name(node.args[0]) in _UPDATES:
        return op_name(node.args[0])
    return name if name in _UPDATES else None


def is_cache_update(node: torch.fx.Node) -> bool:
    return _update_op(node) is not None


def cache_updates_to_copies(graph: torch.fx.Graph, renamed: dict[str, str] | None = None) -> int:
    """Each cache update becomes what it does. The mutating ``llama.update_cache(value, cache, start_pos)`` (which
    ``run_decompositions`` would wrap in ``auto_functionalized``) becomes ``cache.narrow(1, start_pos,
    S).copy_(value)``, ``update_cache_with_indices(value, cache, start_pos, indices)`` an ``index_put_`` of
    ``cache[b, indices[b, s]] = value[b, s]`` (op_update_cache.cpp: ``start_pos`` is not read, the indices lie within
    the cache): the cache is then a state written in place like any KV cache. Their output, a placeholder the kernel
    leaves unwritten, is read by nothing in ExecuTorch's modules; one that is read keeps the op. An
    ``auto_functionalized_v2`` of either becomes the functional op computing the new cache (``slice_scatter``,
    ``index_put``) in place of the wrapper's new cache; ``renamed`` gets ``{the wrapper's new cache: its
    replacement}`` (the program's buffer mutations name it)."""
    from .supported_ops import op_name

    changed = 0
    for node in [n for n in graph.nodes if is_cache_update(n)]:
        if op_name(node.target) == _FUNCTIONALIZED:
            changed += _unwrap_functionalized(graph, node, renamed if renamed is not None else {})
        elif not node.users:
            _to_inplace(graph, node)
            changed += 1
    return changed


def _length(graph: torch.fx.Graph, value: torch.fx.Node):
    """``value``'s positions (dim 1), a size node where it is dynamic."""
    length = value.meta["val"].size(1)
    if isinstance(length, torch.SymInt):
        size = graph.call_function(torch.ops.aten.sym_size.int, (value, 1))
        size.meta["val"] = length
        return size
    return length


def _row_indices(graph: torch.fx.Graph, value: torch.fx.Node, indices: torch.fx.Node, meta: dict) -> torch.fx.Node:
    """``arange(batch)[:, None]``: with ``indices`` it addresses ``cache[b, indices[b, s]]``."""
    batch = value.meta["val"].size(0)
    arange = graph.call_function(
        torch.ops.aten.arange.start_step, (0, batch, 1), {"dtype": torch.long, "device": _fake(indices).device}
    )
    fake = _fake(indices)
    with fake.fake_mode:
        arange.meta = dict(meta, val=torch.arange(batch, dtype=torch.long, device=fake.device))
        rows = graph.call_function(torch.ops.aten.unsqueeze.default, (arange, 1))
        rows.meta = dict(meta, val=arange.meta["val"].unsqueeze(1))
    return rows


def _to_inplace(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    value, cache, start = node.args[:3]
    with graph.inserting_before(node):
        if _update_op(node) == UPDATE_CACHE:
            length = _length(graph, value)
            window = graph.call_function(torch.ops.aten.narrow.default, (cache, 1, start, length))
            window.meta = dict(node.meta, val=_fake(cache).narrow(1, _fake(start), _fake(length)))
            written = graph.call_function(torch.ops.aten.copy_.default, (window, value))
            written.meta = dict(node.meta, val=window.meta["val"])
        else:
            rows = _row_indices(graph, value, node.args[3], node.meta)
            written = graph.call_function(torch.ops.aten.index_put_.default, (cache, [rows, node.args[3]], value))
            written.meta = dict(node.meta, val=_fake(cache))
    graph.erase_node(node)


def _unwrap_functionalized(graph: torch.fx.Graph, node: torch.fx.Node, renamed: dict[str, str]) -> int:
    """``auto_functionalized_v2(update, value=, start_pos=, [indices=,] _cache_base_index=0, _all_bases=[cache])``
    whose cache is its base itself (a buffer, as ExecuTorch's KV cache modules hold it): ``getitem(node, 1)``, the
    new cache, becomes the functional write; the op's own output (``getitem 0``) must be unread. Anything else (a
    cache that is a view of its base) is left as it is."""
    kwargs = node.kwargs
    bases = kwargs.get("_all_bases") or []
    if len(bases) != 1 or kwargs.get("_cache_base_index") != 0 or "_cache_size" in kwargs:
        return 0
    picks = {user.args[1]: user for user in node.users if user.target is operator.getitem}
    if len(picks) != len(node.users) or 0 in picks and picks[0].users or 1 not in picks:
        return 0
    cache, value, start = bases[0], kwargs["value"], kwargs["start_pos"]
    new_cache = picks[1]
    with graph.inserting_before(node):
        if _update_op(node) == UPDATE_CACHE:
            length = _length(graph, value)
            end = graph.call_function(operator.add, (start, length))
            end.meta["val"] = _fake(start) + _fake(length)
            written = graph.call_function(torch.ops.aten.slice_scatter.default, (cache, value, 1, start, end))
        else:
            rows = _row_indices(graph, value, kwargs["indices"], node.meta)
            written = graph.call_function(torch.ops.aten.index_put.default, (cache, [rows, kwargs["indices"]], value))
    written.meta = dict(new_cache.meta)
    new_cache.replace_all_uses_with(written)
    renamed[new_cache.name] = written.name
    for user in list(node.users):
        graph.erase_node(user)
    graph.erase_node(node)
    return 1


def _fake(arg):
    return arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg


_DECOMPOSED = {SDPA: custom_sdpa}


def decompositions(graph: torch.fx.Graph) -> dict:
    """``run_decompositions``' table for the functional ExecuTorch LLM custom ops ``graph`` calls."""
    from .supported_ops import op_name

    return {
        n.target: _DECOMPOSED[op_name(n.target)]
        for n in graph.nodes
        if n.op == "call_function" and op_name(n.target) in _DECOMPOSED
    }
