"""The gated delta rule (Gated DeltaNet: Qwen3.5's and Qwen3-Next's linear attention) for any number of tokens, in
ops TensorRT takes: matmuls, cumulative sums, ``exp``, gathers. No loop over tokens, no triangular solve.

Per head, from the state ``S`` (``[key_dim, value_dim]``) the previous call left, each token ``t``::

    S = exp(g[t]) * S;  S = S + beta[t] * k[t] (v[t] - S^T k[t])^T;  o[t] = S^T q[t]

Inside a chunk of ``C`` tokens the WY form (Yang et al., "Gated Delta Networks") gives every output and the end
state from the state entering the chunk with matmuls. It needs ``(I + L)^-1`` for a strictly lower triangular
``L`` (``C x C``), which HF transformers' and FLA's torch paths compute row by row; here it is the product
``(I - L)(I + L^2)(I + L^4)...`` (``L`` is nilpotent: ``log2 C`` matmuls, exact). Across chunks each chunk maps
the state entering it to the state leaving it affinely (``S' = M S + B``), and the states entering the chunks are
a prefix scan of those maps, in ``log2`` (chunks) steps of one batched matmul. A call of one token is one chunk
of one: the recurrence itself.

The chunk layout is token_chunks.py's (a dynamic token count: one chunk of padding more, and the count's largest
value bounds the scan's steps).
"""

from __future__ import annotations

import math

import torch

from .token_chunks import chunks, drop_front, in_chunks, segment_sums

CHUNK = 64  # tokens per chunk (transformers' and FLA's chunk_size)


def gated_delta_rule(q, k, v, log_decay, beta, state, chunk: int = CHUNK):
    """``q``, ``k`` ``[batch, heads, tokens, key_dim]`` (``q`` already scaled), ``v`` ``[batch, heads, tokens,
    value_dim]``, ``log_decay``, ``beta`` ``[batch, heads, tokens]``, ``state`` ``[batch, heads, key_dim,
    value_dim]``, all float. Returns the outputs (``[batch, heads, tokens, value_dim]``) and the last state."""
    batch, heads, tokens, key_dim = k.shape
    value_dim = v.shape[-1]
    length, count, pad = chunks(tokens, chunk)

    def split(t):  # [batch, heads, tokens, *rest] -> [batch, heads, count, length, *rest]; padding: steps that keep S
        return in_chunks(t.transpose(1, 2), count, length, pad).movedim(3, 1)

    q, k, v, g, beta = (split(t) for t in (q, k, v, log_decay, beta))
    decay = torch.exp(segment_sums(g, dim=3))  # [..., t, s]: decay from step s to step t (0 where s > t)
    steps = torch.arange(length, device=q.device)
    strictly_lower = (steps[:, None] > steps[None, :]).to(q.dtype)
    k_beta = k * beta[..., None]
    inverse = _unit_lower_inverse(torch.matmul(k_beta, k.transpose(-1, -2)) * decay * strictly_lower)
    from_start = torch.exp(torch.cumsum(g, dim=-1))  # [..., length]: decay from the state entering the chunk
    u = torch.matmul(inverse, v * beta[..., None])  # what the tokens write, from a zero state
    w = torch.matmul(inverse, k_beta * from_start[..., None])  # how the entering state takes it back
    scores = torch.matmul(q, k.transpose(-1, -2)) * decay
    # the chunk's map of the entering state S to its end state: M S + B
    to_end = k * decay[..., -1, :, None]  # each key, decayed to the chunk's end
    eye = torch.eye(key_dim, dtype=q.dtype, device=q.device)
    maps = torch.exp(g.sum(-1))[..., None, None] * eye - torch.matmul(to_end.transpose(-1, -2), w)
    ends = torch.matmul(to_end.transpose(-1, -2), u)  # [batch, heads, count, key_dim, value_dim]
    entering = _entering_states(maps, ends, state, count)
    q_state = q * from_start[..., None] - torch.matmul(scores, w)
    out = torch.matmul(q_state, entering) + torch.matmul(scores, u)  # [batch, heads, count, length, value_dim]
    out = out.movedim(1, 3).reshape(batch, count * length, heads, value_dim)
    out = drop_front(out, pad, tokens).transpose(1, 2)
    last = torch.matmul(maps[:, :, -1], entering[:, :, -1]) + ends[:, :, -1]
    return out, last


def _unit_lower_inverse(lower: torch.Tensor) -> torch.Tensor:
    """``(I + lower)^-1`` for strictly lower triangular ``[..., n, n]`` matrices: the sum of ``(-lower)^j`` for
    ``j < n`` (the rest are 0), as the product of ``I + (-lower)^(2^i)``."""
    n = lower.shape[-1]
    power = -lower
    result = torch.eye(n, dtype=lower.dtype, device=lower.device) + power
    for _ in range(max(math.ceil(math.log2(n)) - 1, 0)):
        power = torch.matmul(power, power)
        result = result + torch.matmul(result, power)
    return result


def _entering_states(maps, ends, state, count):
    """The state entering each chunk (``[batch, heads, count, key_dim, value_dim]``): a Hillis-Steele prefix scan
    of the affine maps ``S -> maps[c] S + ends[c]``, after the state itself (a map from 0)."""
    key_dim = maps.shape[-1]
    # [maps | ends] per element; element 0 is (0, state): every prefix then ends in the state it makes
    first = torch.cat([torch.zeros_like(state[..., :1]).expand(*state.shape[:-1], key_dim), state], dim=-1)
    scan = torch.cat([first.unsqueeze(2), torch.cat([maps, ends], dim=-1)], dim=2)
    size = count + 1
    positions = torch.arange(size, device=maps.device)
    for shift in _shifts(size):
        earlier = positions - shift
        previous = scan[:, :, earlier.clamp(min=0)]
        combined = torch.matmul(scan[..., :key_dim], previous)
        combined = torch.cat([combined[..., :key_dim], combined[..., key_dim:] + scan[..., key_dim:]], dim=-1)
        scan = torch.where((earlier >= 0)[:, None, None], combined, scan)
    return scan[:, :, :count, :, key_dim:]


def _shifts(size) -> list[int]:
    """1, 2, 4, ... below ``size`` (an int, or a SymInt: below its largest value)."""
    if not isinstance(size, int):
        upper = size.node.shape_env.bound_sympy(size.node.expr).upper
        if not upper.is_finite:
            raise ValueError(
                "the gated delta rule's token count has no upper bound: export it with a dynamic length that has a "
                "max (torch.export.Dim('seq', max=...))"
            )
        size = int(upper)
    return [1 << i for i in range(max(size - 1, 0).bit_length())]


# ExecuTorch's fused op (extension/llm/custom_ops: a CPU kernel, no TensorRT layer) and its deprecated alias; what
# examples/models/llama's AttentionGatedDeltaNet (Qwen3.5) exports whenever the custom ops library is loaded.
EXECUTORCH_OPS = ("llama.gated_delta_rule.default", "llama.channelwise_gated_delta_rule.default")


def _takes(node) -> bool:
    """Whether an ExecuTorch gated delta rule node is the form computed here: a decay per head and token
    (``[batch, heads, tokens]``; a decay per key channel is another recurrence) and as many query as key heads."""
    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in node.args[:6]]
    if len(vals) < 6 or not all(isinstance(t, torch.Tensor) for t in vals):
        return False
    query, key, _, decay, _, _ = vals
    return decay.dim() == 3 and query.shape[1] == key.shape[1]


def decompositions(graph: torch.fx.Graph) -> dict:
    """``run_decompositions``' table for the ExecuTorch gated delta rule ops in ``graph`` that every node of takes
    (an op some node of cannot be computed here stays as it is, on the host)."""
    from .supported_ops import op_name

    nodes: dict = {}
    for node in graph.nodes:
        if node.op == "call_function" and op_name(node.target) in EXECUTORCH_OPS:
            nodes.setdefault(node.target, []).append(node)
    return {target: _from_decay for target, found in nodes.items() if all(_takes(n) for n in found)}


def _from_decay(query, key, value, decay, beta, initial_state):
    """``llama.gated_delta_rule``: the decay itself rather than its log (a decay that underflowed to 0 is -inf,
    which the segment sums keep: no difference of two of them is taken)."""
    return gated_delta_rule(query, key, value, torch.log(decay), beta, initial_state)
