"""The sampling head a causal exporter puts on its model (:class:`SampledLM`, :func:`export_sampled`): the step's
logits go through :func:`~et_tensorrt.llm.sampling.choose_by`, traced into the program, so each call returns the
chosen token (llm/sampling.py says how it is chosen; the drivers run the same function on the host)."""

from __future__ import annotations

import torch

from ..sampling import Sampling, choice_inputs, choose, choose_by


def _logits_of(output) -> torch.Tensor:
    """A model's logits from what its forward returned (a tensor, a tuple starting with it, or a ModelOutput)."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"the model returned {type(output).__name__}, not logits")


class SampledLM(torch.nn.Module):
    """``model`` (a causal LM step: ``call(model, tokens, positions)`` returns its logits) with the sampling head:
    ``forward(tokens, positions)`` (greedy) or ``forward(tokens, positions, seed, counter, temperature, top_k,
    top_p)`` returns the chosen token, int64 ``[1, 1]``, and with ``sampling.logits`` the model's logits after it.
    ``seed`` and ``counter`` are int64 ``[1]``: draw ``counter`` of ``seed``; ``temperature`` (0: the argmax),
    ``top_k`` (1 .. ``sampling.candidates(vocab)``, the tokens the head's TopK ranks) and ``top_p`` are the request's
    (:func:`choice_inputs`); ``sampling`` gives the program's defaults. Export it as the model (its buffers, the KV
    cache, are the model's, named under ``model.``)."""

    def __init__(self, model: torch.nn.Module, sampling: Sampling, call=None):
        super().__init__()
        self.model = model
        self.sampling = sampling
        self._call = call or (lambda m, tokens, positions: m(tokens, positions))

    def forward(self, tokens, positions, seed=None, counter=None, temperature=None, top_k=None, top_p=None):
        logits = _logits_of(self._call(self.model, tokens, positions))
        if self.sampling.greedy:
            token = choose(logits, self.sampling)
        else:
            ranks = self.sampling.candidates(logits.shape[-1])
            token = choose_by(logits, ranks, temperature, top_k, top_p, seed, counter)
        return (token, logits) if self.sampling.logits else token


def export_sampled(model, sampling: Sampling, call, example: tuple, dynamic_shapes=None, strict: bool = False):
    """``torch.export`` of ``model`` under the head (:class:`SampledLM`), what a causal exporter calls to add it:
    ``example`` and ``dynamic_shapes`` are the step's (tokens, positions) and theirs; a sampled head's inputs follow,
    static (:data:`CHOICE_INPUTS`): the seed and the counter of the draw, then the request's temperature, top-k and
    top-p."""
    extra = ()
    if not sampling.greedy:
        zero = torch.zeros(1, dtype=torch.int64)
        extra = (zero, zero.clone(), *choice_inputs(sampling))
    shapes = None if dynamic_shapes is None else (*dynamic_shapes, *(None for _ in extra))
    head = SampledLM(model, sampling, call)
    return torch.export.export(head, (*example, *extra), dynamic_shapes=shapes, strict=strict)
