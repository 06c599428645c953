"""A reference sampler in plain PyTorch and Python, written apart from et_tensorrt.llm.sampling's head: the whole
vocabulary sorted (stable), the candidates walked one by one in Python for top-p and for the inverse CDF, the draw
from the hash's specification in Python integers (``sampling.draw_value``). Its float steps are the same float32
operations the head makes (temperature division, softmax over the top-k, cumulative sums), so on the CPU the two
agree token for token; the tests hold the head to it."""

from __future__ import annotations

import torch

from et_tensorrt.llm.sampling import Sampling, draw_value


def reference_token(logits: torch.Tensor, sampling: Sampling, seed: int = 0, counter: int = 0) -> int:
    """The token ``sampling`` picks from the last position of ``logits`` with draw ``counter`` of ``seed``."""
    last = logits.reshape(-1, logits.shape[-1])[-1].to(torch.float32)
    if sampling.greedy:
        best = max(range(last.numel()), key=lambda i: (float(last[i]), -i))  # the first of the largest
        return best
    scaled = last / sampling.temperature
    order = torch.sort(scaled, descending=True, stable=True).indices[: sampling.candidates(last.numel())]
    probs = torch.softmax(scaled[order], dim=0)
    cumulative = torch.cumsum(probs, dim=0)
    kept = 0  # the top-p cut: a token whose mass before it is short of top_p (float32, as the head compares)
    while kept < len(order) and bool(cumulative[kept] - probs[kept] < sampling.top_p):
        kept += 1
    point = torch.tensor(draw_value(seed, counter), dtype=torch.float32) * cumulative[kept - 1]
    for i in range(kept):
        if cumulative[i] > point:
            return int(order[i])
    return int(order[kept - 1])
