"""The recurrences of state-space and short-convolution layers, computed for any number of tokens from the state the
previous call left: the same graph for a prompt and for one token, so one exported method (or a ``prefill`` of a
dynamic length) continues a sequence exactly where the last call stopped.

HF transformers' own torch paths branch in Python on the token count (one token: the recurrent update; several: a
scan that, for Mamba, starts from zeros and loops over the tokens), which an export of a dynamic length cannot
follow. Here every step is a tensor operation over the whole call, in chunks of ``chunk`` tokens: inside a chunk
the decays between any two tokens (``exp`` of a segment sum, masked where the source follows the target), across
chunks the same over the chunks' end states. Memory grows with tokens x ``chunk``, not tokens squared; a call of
one token is a chunk of one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...partition.token_chunks import chunks as _chunks
from ...partition.token_chunks import drop_front as _drop_front
from ...partition.token_chunks import in_chunks as _in_chunks
from ...partition.token_chunks import segment_sums as _segment_sums

CHUNK = 16  # tokens per chunk of a Mamba (per channel and state) scan


def diagonal_scan(log_decay: torch.Tensor, inputs: torch.Tensor, state: torch.Tensor, chunk: int = CHUNK):
    """``h[t] = exp(log_decay[t]) * h[t-1] + inputs[t]`` from ``h[-1] = state``, channel by channel.

    ``log_decay``, ``inputs``: ``[batch, tokens, *channels]``; ``state``: ``[batch, *channels]``. Returns every
    ``h[t]`` (``[batch, tokens, *channels]``) and the last (the next call's state)."""
    batch, tokens, *channels = inputs.shape
    length, count, pad = _chunks(tokens, chunk)
    flat = math.prod(channels)
    # padded in front: steps that neither decay nor add keep the state as it was
    a = _in_chunks(log_decay.reshape(batch, tokens, flat), count, length, pad)
    u = _in_chunks(inputs.reshape(batch, tokens, flat), count, length, pad)
    # inside each chunk, from a zero state: sum over s <= t of decay(s -> t) * u[s]
    decay = torch.exp(_segment_sums(a, dim=2))  # [batch, count, t, s, flat]
    local = (decay * u.unsqueeze(2)).sum(dim=3)  # [batch, count, length, flat]
    # across chunks: the state entering each chunk, from `state` and each chunk's own end state
    totals = torch.cumsum(a, dim=2)  # decay from a chunk's start to each of its steps
    ends = torch.cat([state.reshape(batch, 1, flat), local[:, :, -1]], dim=1)  # [batch, count + 1, flat]
    steps = F.pad(totals[:, :, -1], (0, 0, 1, 0))  # the decay over each chunk, after a leading 0
    weights = torch.exp(_segment_sums(steps, dim=1))  # [batch, count + 1 (entering), count + 1 (end), flat]
    entering = (weights[:, :count] * ends.unsqueeze(1)).sum(dim=2)  # [batch, count, flat]
    h = local + torch.exp(totals) * entering.unsqueeze(2)
    h = _drop_front(h.reshape(batch, count * length, flat), pad, tokens)
    # the state after the last chunk, summed in the state's own shape: the op that computes it can write it in place
    last = (weights[:, -1].reshape(batch, -1, *channels) * ends.reshape(batch, -1, *channels)).sum(dim=1)
    return h.reshape(batch, tokens, *channels), last


def head_scan(
    x: torch.Tensor,
    log_decay: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    state: torch.Tensor,
    chunk: int,
):
    """State space duality (Mamba2): per head ``h``, ``S[t] = exp(log_decay[t]) * S[t-1] + x[t] B[t]^T`` from
    ``S[-1] = state`` and ``y[t] = S[t] C[t]``; one scalar decay per head lets each chunk contract ``C B^T`` first.

    ``x``: ``[batch, tokens, heads, head_dim]`` (already scaled by the time step); ``log_decay``: ``[batch, tokens,
    heads]``; ``B``, ``C``: ``[batch, tokens, heads, state_size]``; ``state``: ``[batch, heads, head_dim,
    state_size]``. Returns ``y`` (``[batch, tokens, heads, head_dim]``) and the last state."""
    batch, tokens, heads, head_dim = x.shape
    length, count, pad = _chunks(tokens, chunk)
    # [batch, heads, count, length, ...]: the chunk count is the last batch dim of every matmul (a product of batch
    # dims an export splits back must end in its symbolic factor to be proven whole)
    x, a, B, C = (_in_chunks(t, count, length, pad).transpose(1, 3).transpose(2, 3) for t in (x, log_decay, B, C))
    totals = torch.cumsum(a, dim=-1)  # [batch, heads, count, length]: decay from a chunk's start to each step
    # 1. inside each chunk: y[t] = sum over s <= t of (C[t] . B[s]) decay(s -> t) x[s]
    scores = torch.matmul(C, B.transpose(-1, -2)) * torch.exp(_segment_sums(a, dim=3))
    y = torch.matmul(scores, x)  # [batch, heads, count, length, head_dim]
    # 2. each chunk's end state from its own tokens
    to_end = torch.exp(totals[..., -1:] - totals)  # decay from each step to its chunk's end
    ends = torch.matmul((x * to_end[..., None]).transpose(-1, -2), B)  # [batch, heads, count, head_dim, state_size]
    # 3. the state entering each chunk, from `state` and the end states before it
    ends = torch.cat([state.unsqueeze(2), ends], dim=2)  # [batch, heads, count + 1, head_dim, state_size]
    across = torch.exp(_segment_sums(F.pad(totals[..., -1], (1, 0)), dim=2))  # [batch, heads, count+1, count+1]
    state_size = B.shape[-1]
    flat = ends.reshape(batch, heads, -1, head_dim * state_size)
    entering = torch.matmul(across[:, :, :count], flat).reshape(batch, heads, count, head_dim, state_size)
    # 4. what the entering state adds to each token's output
    y = y + torch.matmul(C, entering.transpose(-1, -2)) * torch.exp(totals)[..., None]
    y = _drop_front(y.permute(0, 2, 3, 1, 4).reshape(batch, count * length, heads, head_dim), pad, tokens)
    # the state after the last chunk, summed in the state's own shape: the op that computes it can write it in place
    last = (across[:, :, -1][..., None, None] * ends).sum(dim=2)
    return y, last
