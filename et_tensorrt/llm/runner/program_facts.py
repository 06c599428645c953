"""What a lowered LLM program says about itself, read from the ``.pte`` without running it: its decoding methods'
signature (:func:`_program_facts`), its constant methods' values (:func:`_constants`), and a request's sampling
checked against it (:func:`_sampling`, :func:`_seed`)."""

from __future__ import annotations

import math

from ...errors import RunnerError
from ..constants import SAMPLING_METHODS

_LONG = 4  # ExecuTorch's ScalarType::Long


def _program_facts(pte: bytes, decoding: tuple[str, ...], names: set[str]):
    """(:class:`~.token_loop.Signature`, the context length, the EOS ids) of an LLM program, from its plans and its
    constant methods."""
    from ...format.pte_tables import read_tables
    from ..sampling import CHOICE_INPUTS, Sampling
    from .token_loop import Signature

    prefill, decode = (decoding * 2)[:2]
    plans = {plan.name: plan for plan in read_tables(pte).plans}
    first = plans[prefill]
    # ExecuTorch's convention (extension/llm/runner): a one-element second input is the start position, else
    # the positions of the tokens (HF's cache_position)
    start_only = len(first.inputs) > 1 and math.prod(first.values[first.inputs[1]].sizes) == 1
    context, eos, dynamic = _constants(pte, "get_max_context_len", "get_eos_ids", "enable_dynamic_shape")
    head, choices, ranks, vocab = None, False, 0, 0
    if set(SAMPLING_METHODS) <= names:
        temperature, top_k, top_p = (values[0] for values in _constants(pte, *SAMPLING_METHODS))
        head = Sampling(float(temperature), int(top_k), float(top_p), logits=len(plans[decode].outputs) > 1)
        choices = not head.greedy and len(plans[decode].inputs) == 2 + len(CHOICE_INPUTS)
        if choices:  # the request's temperature, top-k and top-p are inputs: top-k at most what the head ranks
            vocab = int(_constants(pte, "get_vocab_size")[0][0])
            ranks = head.candidates(vocab)
    elif plans[decode].outputs and plans[decode].values[plans[decode].outputs[0]].scalar_type == _LONG:
        raise RunnerError(
            f"the {decode} method returns integers (a chosen token?) but the program does not say how it chooses "
            "them: lower it with constant_methods including et_tensorrt.llm.sampling.sampling_methods(...), as "
            "export_causal_lm(..., sampling=...) makes them"
        )
    whole = prefill == "prefill" or bool(dynamic[0])
    signature = Signature(prefill, decode, start_only, whole, head, choices, ranks, vocab)
    return signature, int(context[0]), {int(t) for t in eos}


def _sampling(signature, temperature, top_k, top_p):
    """The :class:`Sampling` a generate call asks for: on a program whose sampling head takes its choices as inputs
    (``signature.choices``), the request, the program's own choices its defaults, top-k checked against what the head
    ranks; on one whose head fixed them at export, that head (a request that differs is refused); else the request
    with Sampling's defaults (temperature 0: greedy)."""
    from ..sampling import TOPK_MAX_K, Sampling

    head = signature.head if signature is not None else None
    asked = {k: v for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if v is not None}
    if head is None:
        return Sampling(**asked)
    if signature.choices and not head.greedy:
        wanted = Sampling(**{"temperature": head.temperature, "top_k": head.top_k, "top_p": head.top_p, **asked})
        if not wanted.greedy and signature.ranks and (wanted.top_k or signature.vocab) > signature.ranks:
            whole = f" (the whole vocabulary of {signature.vocab:,} tokens)" if not wanted.top_k else ""
            asked_for = f"top_k={wanted.top_k}{whole}"
            raise RunnerError(
                f"{asked_for}: this program's sampling head ranks the {signature.ranks} likeliest tokens (its top_k "
                f"at export: TensorRT's TopK takes its k when the engine is built), so a request asks top_k 1 .. "
                f"{signature.ranks}; or export the program with a larger top_k (at most {TOPK_MAX_K})"
            )
        return Sampling(wanted.temperature, wanted.top_k, wanted.top_p, logits=head.logits)
    differs = {k: v for k, v in asked.items() if getattr(head, k) != v and not (head.greedy and k != "temperature")}
    if differs:
        wanted = ", ".join(f"{k}={v!r}" for k, v in differs.items())
        raise RunnerError(
            f"this program chooses its token in the engine ({head}, chosen at export): it cannot sample with "
            f"{wanted}; leave them out, or export another program (export_causal_lm(..., sampling=...): a sampled "
            "head takes temperature, top-k and top-p per request; sampling=None returns the logits, which any "
            "sampling reads)"
        )
    return head


def _seed(seed, sampling) -> int:
    """The draws' seed: the one given (an int64), else one drawn from torch's default generator."""
    import torch

    if seed is None:
        return 0 if sampling.greedy else int(torch.randint(0, 2**62, (1,)))
    if isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**63:
        raise ValueError(f"seed is an integer that fits int64, not {seed!r}")
    return seed


def _constants(pte: bytes, *names: str) -> list[list]:
    """What the program's constant methods return (ints: ExecuTorch's own runtime reads them; Runner runs tensors)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return [list(program.load_method(name).execute([])) for name in names]
