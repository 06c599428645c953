"""Tokens in chunks: the layout every chunked recurrence here computes in (llm/export/state_scans.py's Mamba scans, the
gated delta rule of partition/delta_rule.py), for a token count that is an int or a symbolic size of a dynamic
export alike."""

from __future__ import annotations

import torch


def chunks(tokens, chunk: int) -> tuple:
    """(chunk length, number of chunks, padding in front) for ``tokens`` (an int or a SymInt).

    A token count that varies (an export of a dynamic length) gets one chunk of padding more than it needs: its
    chunk count is then at least 2 for every length, which an export can prove, where a count that may be 1 is one
    that torch's 0/1 specialization pins to its example's (a prefill of at most one chunk)."""
    if isinstance(tokens, int):
        chunk = min(chunk, tokens)
        count = (tokens + chunk - 1) // chunk
    else:
        count = (tokens + chunk - 1) // chunk + 1
    return chunk, count, count * chunk - tokens


def in_chunks(t: torch.Tensor, count, length: int, pad) -> torch.Tensor:
    """``t`` ``[batch, tokens, *rest]`` as ``[batch, count, length, *rest]``, ``pad`` zero steps in front: a gather by
    a ``[count, length]`` index rather than a view, whose split of a symbolic length an export cannot prove."""
    index = torch.arange(count, device=t.device)[:, None] * length + torch.arange(length, device=t.device) - pad
    real = (index >= 0).view(*index.shape, *([1] * (t.dim() - 2)))
    return torch.where(real, t[:, index.clamp(min=0)], torch.zeros((), dtype=t.dtype, device=t.device))


def drop_front(t: torch.Tensor, pad, tokens) -> torch.Tensor:
    """``t[:, pad:]`` (``tokens`` long) as a gather: a slice at a symbolic start leaves an export sizes it cannot
    prove."""
    return t.index_select(1, torch.arange(tokens, device=t.device) + pad)


def segment_sums(log_decay: torch.Tensor, dim: int) -> torch.Tensor:
    """``out[..., t, s, ...] = sum(log_decay[s+1 .. t])`` for ``s <= t`` and ``-inf`` above (``exp`` gives 0): the
    log decay from step ``s`` to step ``t`` along ``dim`` (inserted as two dims: ``t`` at ``dim``, ``s`` after it).
    A cumulative sum of the masked steps rather than a difference of two cumulative sums: no cancellation."""
    dim = dim % log_decay.dim()
    n = log_decay.shape[dim]
    steps = torch.arange(n, device=log_decay.device)
    shape = [1] * (log_decay.dim() + 1)
    shape[dim], shape[dim + 1] = n, n
    after = (steps[:, None] > steps[None, :]).view(shape)  # step t counts toward the decay from s when t > s
    expanded = log_decay.unsqueeze(dim + 1).expand(*log_decay.shape[: dim + 1], n, *log_decay.shape[dim + 1 :])
    sums = torch.cumsum(expanded.masked_fill(~after, 0.0), dim=dim)
    causal = (steps[:, None] >= steps[None, :]).view(shape)
    return sums.masked_fill(~causal, float("-inf"))
