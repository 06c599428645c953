"""ExecuTorch's LLM custom ops (extension/llm/custom_ops: CPU kernels, no TensorRT layer) as the aten ops they
compute, decomposed before lowering so a method that uses them is one engine: ``llama.custom_sdpa`` (attention over
a ``[batch, positions, heads, dim]`` cache, grouped-query heads, causal from ``start_pos`` or an additive mask) and
``llama.update_cache`` (writes ``value`` into the cache at ``start_pos``: a state updated in place). What
examples/models/llama with ``use_sdpa_with_kv_cache``, gemma4 and voxtral_realtime export whenever the custom ops
library is loaded."""

from __future__ import annotations

import math

import torch

SDPA = "llama.custom_sdpa.default"
UPDATE_CACHE = "llama.update_cache.default"


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


def is_cache_update(node: torch.fx.Node) -> bool:
    from .supported_ops import op_name

    return node.op == "call_function" and op_name(node.target) == UPDATE_CACHE


def cache_updates_to_copies(graph: torch.fx.Graph) -> int:
    """Each ``llama.update_cache(value, cache, start_pos)`` (a mutating op: ``run_decompositions`` would wrap it in
    ``auto_functionalized``, which no table decomposes) becomes what it does, ``cache.narrow(1, start_pos,
    S).copy_(value)``: the cache is then a state written in place like any KV cache. Its output, a placeholder the
    kernel leaves unwritten, is read by nothing in ExecuTorch's modules; one that is read keeps the op."""
    changed = 0
    for node in [n for n in graph.nodes if is_cache_update(n) and not n.users]:
        value, cache, start = node.args[:3]
        length = value.meta["val"].size(1)
        with graph.inserting_before(node):
            if isinstance(length, torch.SymInt):
                size = graph.call_function(torch.ops.aten.sym_size.int, (value, 1))
                size.meta["val"] = length
                length = size
            window = graph.call_function(torch.ops.aten.narrow.default, (cache, 1, start, length))
            copied = graph.call_function(torch.ops.aten.copy_.default, (window, value))
        window.meta = dict(node.meta, val=_fake(cache).narrow(1, _fake(start), _fake(length)))
        copied.meta = dict(node.meta, val=window.meta["val"])
        graph.erase_node(node)
        changed += 1
    return changed


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
