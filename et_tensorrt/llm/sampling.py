"""The choice of the next token: one function (:func:`choose_by`) that the sampling head any causal exporter can put
on its model traces into the program (export/sampling_head.py) and that the drivers run on the host (:func:`choose`).

A causal LM step ``(tokens, positions) -> logits`` becomes ``(tokens, positions[, seed, counter, temperature, top_k,
top_p]) -> token[, logits]``: greedy (``argmax``: a ``"greedy"`` head, or temperature 0 given to a sampled one), or a
draw from ``softmax(logits / temperature)`` restricted to the ``top_k`` most likely tokens and then to the smallest of
them whose probability reaches ``top_p`` (HF's order: temperature, top-k, top-p). A sampled head takes the choices
per call (:data:`CHOICE_INPUTS`): one program serves every request, its TopK ranking the export's ``top_k`` (TensorRT
builds a TopK's k into the engine) and masking past the request's. The token is an int64 ``[1, 1]``, the shape of the
next step's ``tokens``: fed back as it is, it never has to leave the device.

The draw is reproducible on every machine: one uniform number per step from the ``seed`` and ``counter`` inputs by a
counter-based hash in int64 arithmetic every backend computes exactly (products below 2**63, modulo the prime
2**31 - 1, a square per round for nonlinearity; no float transcendental), its top 24 bits scaled to [0, 1) (exact in
float32), then inverse-CDF over the sorted top-k/top-p probabilities. Every op is one TensorRT runs (TopK, softmax,
cumulative sum, comparisons, reductions, gather): the head lands in the model's engine.

:class:`Sampling` is the one place the choices and their defaults live: ``export_causal_lm(sampling=...)``, the
drivers' ``generate(temperature=, top_k=, top_p=, seed=)`` and ``et-tensorrt generate`` all make one. A program that
samples says so in its constant methods (:func:`sampling_methods`), which the drivers read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..partition.argument_limits import TOPK_MAX_K
from .constants import SAMPLING_METHODS

PRIME = 2_147_483_647  # 2**31 - 1: residues below 2**31, so a product of two stays below 2**62
# (multiplier, key) per round: x <- ((x + counter + seed_high + key) ** 2 * multiplier + high bits) mod PRIME.
# Three rounds: consecutive draws uncorrelated (|r| < 0.01 over 20,000 counters or seeds, pairs uniform); a fourth
# takes TensorRT-RTX's builder past a cliff with the sampler beside it (a 256-token head on the CPU: 65 s with three
# rounds, over 20 min with four).
ROUNDS = ((1_103_515_245, 12_345), (69_621, 2_718_281), (48_271, 3_141_592))
DRAW_BITS = 24  # float32 holds every multiple of 2**-24 in [0, 1) exactly
_FOLD = 65_536  # x // 2**16: the high bits of a residue folded into its low ones
_SHIFT = 128  # x // 2**7: a residue's top 24 bits
# A sampled head's inputs after the step's tokens and positions, in order (int64 [1] but for the float32 [1] ones):
# 56 bytes a decode step with the token and its position in and the token out.
CHOICE_INPUTS = ("seed", "counter", "temperature", "top_k", "top_p")
_ALL = 2**62  # top_k 0 as the head's input: past every rank


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen. ``temperature=0``: greedy (the largest logit). Otherwise a draw among the
    ``top_k`` most likely tokens (0: the whole vocabulary) whose cumulative probability first reaches ``top_p``
    (1: all ``top_k`` of them), from ``softmax(logits / temperature)``. The defaults are HF transformers' (``top_k``
    50, ``top_p`` 1). ``logits``: a program returns the logits beside the token (users who want them; they then
    leave the device every step)."""

    temperature: float = 0.0
    top_k: int = 50
    top_p: float = 1.0
    logits: bool = False

    def __post_init__(self):
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValueError(f"temperature is a number >= 0 (0: greedy), not {self.temperature!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature is a finite number >= 0 (0: greedy), not {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or not 0 <= self.top_k <= TOPK_MAX_K:
            raise ValueError(
                f"top_k is an integer in 0 .. {TOPK_MAX_K} (0: the whole vocabulary; TensorRT's TopK takes at most "
                f"{TOPK_MAX_K}), not {self.top_k!r}"
            )
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p is a number in (0, 1] (1: no nucleus cut), not {self.top_p!r}")
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def candidates(self, vocab: int) -> int:
        """How many tokens the draw ranks: ``top_k`` (0: all ``vocab``), at most ``vocab``."""
        return min(self.top_k or vocab, vocab)

    def __str__(self) -> str:
        if self.greedy:
            return "greedy"
        return f"temperature {self.temperature:g}, top-k {self.top_k or 'all'}, top-p {self.top_p:g}"

    @classmethod
    def of(cls, value, vocab: int | None = None) -> Sampling | None:
        """``export_causal_lm``'s ``sampling``: None (the program returns logits), ``"greedy"``, a :class:`Sampling`
        or a dict of its fields; checked against a ``vocab`` of that many tokens when given."""
        if value is None:
            return None
        if isinstance(value, dict):
            value = cls(**value)
        elif value == "greedy":
            value = cls()
        elif not isinstance(value, cls):
            raise ValueError(f"sampling is None, 'greedy', a Sampling or a dict of its fields, not {value!r}")
        if vocab is not None:
            value.check_vocabulary(vocab)
        return value

    def check_vocabulary(self, vocab: int) -> None:
        """TensorRT's TopK ranks at most TOPK_MAX_K: a whole vocabulary larger than that needs a ``top_k``."""
        if not self.greedy and self.candidates(vocab) > TOPK_MAX_K:
            raise ValueError(
                f"top_k=0 ranks the whole vocabulary of {vocab:,} tokens, and TensorRT's TopK takes at most "
                f"{TOPK_MAX_K}: give top_k <= {TOPK_MAX_K} (HF's default is 50)"
            )


def sampling_methods(sampling: Sampling) -> dict:
    """The constant methods that say a program chooses its token and how (the drivers read them)."""
    return dict(zip(SAMPLING_METHODS, (sampling.temperature, sampling.top_k, sampling.top_p)))


def _residue(x: torch.Tensor) -> torch.Tensor:
    """``x mod PRIME`` in [0, PRIME) for any int64 ``x`` (``fmod`` keeps the dividend's sign)."""
    r = torch.fmod(x, PRIME)
    return r + (r < 0).to(torch.int64) * PRIME


def draw(seed: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """The uniform number in [0, 1) of draw ``counter`` of ``seed`` (int64 tensors of one element): float32, of the
    shape ``[1, 1]``. Integer arithmetic only, each product below 2**62: exact on every backend."""
    seed, counter = seed.reshape(1, 1).to(torch.int64), counter.reshape(1, 1).to(torch.int64)
    high = _residue(torch.div(seed, PRIME, rounding_mode="floor"))
    added = _residue(counter) + high
    x = _residue(seed)
    for multiplier, key in ROUNDS:
        x = torch.fmod(x + added + key, PRIME)
        x = torch.fmod(x * x, PRIME)
        x = torch.fmod(x * multiplier + torch.div(x, _FOLD, rounding_mode="floor"), PRIME)
    return torch.div(x, _SHIFT, rounding_mode="floor").to(torch.float32) * (1.0 / (1 << DRAW_BITS))


def draw_value(seed: int, counter: int) -> float:
    """:func:`draw` in Python integers (its specification): the same number on every machine."""
    x, added = seed % PRIME, counter % PRIME + (seed // PRIME) % PRIME
    for multiplier, key in ROUNDS:
        x = (x + added + key) % PRIME
        x = x * x % PRIME
        x = (x * multiplier + x // _FOLD) % PRIME
    return (x // _SHIFT) / (1 << DRAW_BITS)


def choose(logits: torch.Tensor, sampling: Sampling, seed=None, counter=None) -> torch.Tensor:
    """The next token (int64 ``[1, 1]``) from the last position's ``logits`` (``[..., vocab]``) with ``sampling``:
    what the drivers run on the host for a program that returns logits (the head's function, :func:`choose_by`, with
    the choices as tensors), so a seed gives the same tokens either way."""
    last = logits.reshape(-1, logits.shape[-1])[-1:].to(torch.float32)  # [1, vocab]
    if sampling.greedy:
        return torch.argmax(last, dim=-1, keepdim=True)
    ranks = sampling.candidates(last.shape[-1])
    return choose_by(logits, ranks, *choice_inputs(sampling), seed, counter)


def choice_inputs(sampling: Sampling) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``sampling`` as the head's inputs: temperature (float32 ``[1]``), top-k (int64 ``[1]``; top_k 0, the whole
    vocabulary, keeps every token the head ranks) and top-p (float32 ``[1]``)."""
    return (
        torch.tensor([sampling.temperature], dtype=torch.float32),
        torch.tensor([sampling.top_k or _ALL], dtype=torch.int64),
        torch.tensor([sampling.top_p], dtype=torch.float32),
    )


def choose_by(logits, ranks: int, temperature, top_k, top_p, seed, counter) -> torch.Tensor:
    """The next token (int64 ``[1, 1]``) from the last position's ``logits``, the choices given as tensors (traced
    into the program by export/sampling_head.py's ``SampledLM``, so one program serves every request):
    ``temperature`` 0, the argmax exactly; else a draw among the ``top_k`` likeliest (1 .. ``ranks``) whose mass
    first reaches ``top_p``. TensorRT's TopK takes its k when the engine is built, so the head ranks ``ranks`` tokens
    (the most a request may ask) and masks those past the request's ``top_k``."""
    last = logits.reshape(-1, logits.shape[-1])[-1:].to(torch.float32)  # [1, vocab]
    greedy = torch.argmax(last, dim=-1, keepdim=True)
    warm = temperature.reshape(1, 1) > 0
    values, ids = torch.topk(last / torch.where(warm, temperature.reshape(1, 1), 1.0), ranks, dim=-1)
    in_k = torch.arange(ranks).reshape(1, ranks) < top_k.reshape(1, 1)  # the first top_k of the sorted ones
    probs = torch.softmax(torch.where(in_k, values, float("-inf")), dim=-1)  # sorted, largest first: renormalized
    cumulative = torch.cumsum(probs, dim=-1)
    kept = ((cumulative - probs) < top_p.reshape(1, 1)) & in_k  # the mass before a token is short of top_p
    last_kept = kept.to(torch.int64).sum(dim=-1, keepdim=True) - 1  # kept tokens are a prefix of the sorted ones
    point = draw(seed, counter) * torch.gather(cumulative, -1, last_kept)  # the kept mass, renormalized by scaling
    # inverse CDF: the first kept token whose cumulative probability passes the point
    below = ((cumulative <= point) & kept).to(torch.int64).sum(dim=-1, keepdim=True)
    sampled = torch.gather(ids, -1, torch.minimum(below, last_kept))
    return torch.where(warm, sampled, greedy)
