"""Token by token through a :class:`~et_tensorrt.Runner`: the prompt, then one token a call, each call's token chosen
in the program (its sampling head, :mod:`.sampling`) and fed back as it is — on a GPU it stays in device memory, the
host reads its 8 bytes to stream the text and see the end — or, for a program that returns logits, chosen on the host
from them by the same function with the same draws. Runtime only (torch and the Runner): the GPU check drives it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import Sampling, choice_inputs, choose


@dataclass(frozen=True)
class Signature:
    """How an LLM program's methods are called: ``prefill`` takes the prompt (in one call when ``whole_prompt``,
    else a token a call), ``decode`` one token; ``start_only``: the second input is the start position (ExecuTorch's
    llama), else every token's position (HF's ``cache_position``); ``head``: the token the methods choose (None:
    they return logits), with ``seed`` and ``counter`` inputs unless greedy, then (``choices``) the request's
    temperature, top-k and top-p (:data:`~.sampling.CHOICE_INPUTS`; a program made before they were inputs fixed them
    at export); ``ranks``: how many tokens such a head ranks (the most top-k a request asks; 0: not known), of a
    vocabulary of ``vocab``."""

    prefill: str = "prefill"
    decode: str = "decode"
    start_only: bool = False
    whole_prompt: bool = True
    head: Sampling | None = None
    choices: bool = True
    ranks: int = 0
    vocab: int = 0


class TokenLoop:
    """One sequence's calls through ``runner`` with ``sampling`` (the program's own head, or the host's choice from
    its logits) and ``seed``. ``first(tokens, position)`` runs the prompt; ``next(token, position)`` one token, the
    tensor the previous call returned. Each returns the chosen token, int64 ``[1, 1]``, where the program wrote it.

    ``device``: where the chosen tokens stay between calls; default the device the first call ran on (its plan's).
    On a GPU the loop hands the program two device buffers in turn for its token (never the one the call reads), and
    a program lowered with ``zero_copy_outputs=True`` writes it there in place: the next call reads it there, the
    host copies its 8 bytes only to read it. A program whose outputs ExecuTorch planned on the host writes the token
    there anyway, so the loop keeps it there (one copy fewer than carrying it back)."""

    def __init__(
        self, runner, signature: Signature, sampling: Sampling, seed: int = 0, device: str | torch.device | None = None
    ):
        self.runner, self.signature, self.sampling = runner, signature, sampling
        self.device = None if device is None else torch.device(device)
        self._seed = torch.tensor([seed], dtype=torch.int64)
        # the request's temperature, top-k and top-p: the same tensors every call
        self._choices = list(choice_inputs(sampling)) if signature.choices else []
        head = signature.head
        self._seeded = head is not None and not head.greedy
        self._tokens: list[torch.Tensor] = []  # the two device buffers, made once the device is known
        self._beside: dict[str, list[torch.Tensor]] = {}  # method -> device buffers of its other outputs (logits)
        self._turn = 0
        self.last_logits: torch.Tensor | None = None  # the logits of the last call (a program that returns them)
        # bytes the last call's inputs and outputs hold: the most that crosses between host and device per call
        # (all of it where the host holds them; a token left on the device crosses once, when the host reads it)
        self.io_bytes = 0

    def _positions(self, start: int, count: int) -> torch.Tensor:
        if self.signature.start_only:
            return torch.tensor([start], dtype=torch.int64)
        return torch.arange(start, start + count, dtype=torch.int64)

    def _call(self, method: str, tokens: torch.Tensor, start: int) -> torch.Tensor:
        counter = torch.tensor([start + tokens.shape[-1]], dtype=torch.int64)  # the draw: the new token's position
        inputs = [tokens, self._positions(start, tokens.shape[-1])]
        if self._seeded:
            inputs += [self._seed, counter, *self._choices]
        if self.signature.head is None:
            logits = self.runner.run(inputs, method=method)[0]
            self.last_logits = logits
            self.io_bytes = _nbytes(*inputs, logits)
            return choose(logits, self.sampling, self._seed, counter)
        outputs = None
        if self.device is not None and self.device.type != "cpu":
            if not self._tokens:
                self._tokens = [torch.zeros((1, 1), dtype=torch.int64, device=self.device) for _ in range(2)]
            outputs = [self._tokens[self._turn], *self._beside.get(method, ())]
            self._turn ^= 1
        results = self.runner.run(inputs, method=method, outputs=outputs)
        if self.device is None:  # the first call says where the program runs
            plan = self.runner.last_plan
            self.device = plan.execution_device if plan is not None else torch.device("cpu")
        elif outputs is not None and not self.runner.outputs_written_in_place[0]:
            self.device = torch.device("cpu")  # its outputs are planned on the host: the token is there already
        elif outputs is not None and method == self.signature.decode and method not in self._beside:
            # the logits beside the token stay on the device too (a decode call's are of one shape)
            self._beside[method] = [torch.empty_like(r, device=self.device) for r in results[1:]]
        self.last_logits = results[1] if len(results) > 1 else None
        self.io_bytes = _nbytes(*inputs, *results)
        return results[0]

    def first(self, tokens: list[int], position: int) -> torch.Tensor:
        ids = torch.tensor([tokens], dtype=torch.int64)
        if self.signature.whole_prompt:
            return self._call(self.signature.prefill, ids, position)
        for i in range(len(tokens)):  # a method of one token a call: the prompt's tokens one by one
            token = self._call(self.signature.prefill, ids[:, i : i + 1], position + i)
        return token

    def next(self, token: torch.Tensor, position: int) -> torch.Tensor:
        return self._call(self.signature.decode, token, position)


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
