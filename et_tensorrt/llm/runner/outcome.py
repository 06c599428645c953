"""What one generation gave (:class:`Generation`), why it stopped, and the refusals every front door words alike
(a prompt that cannot start, a bad ``max_new_tokens``, missing files)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _check_files(model, tokenizer, data_path) -> None:
    files = (("program", model), ("tokenizer", tokenizer), *((("data file", data_path),) if data_path else ()))
    for what, path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no {what} at {os.fspath(path)!r}")
    if data_path:  # ExecuTorch reads a .ptd's key table unverified: a damaged one is refused here, by name
        from et_tensorrt import _C

        _C.check_data_file(os.fspath(data_path), os.fspath(model))


@dataclass
class Generation:
    text: bytes  # what the runner printed: the prompt is not echoed; bytes, as a random model's need not be UTF-8
    prompt_tokens: int
    generated_tokens: int  # every token chosen, the prompt call's first one included (and an EOS that ended it)
    seconds: float  # the runner's own inference time (prefill + decode)
    # Bytes each decode step (one token) moved between host and device, one entry per step; empty when not
    # measured. `bytes_counted` says what the numbers include.
    step_bytes: tuple[int, ...] = ()
    bytes_counted: str = ""
    # Bytes of state each decode step copied back into the delegate's states (0: the KV cache updated in place);
    # empty when not measured.
    state_bytes: tuple[int, ...] = ()
    stopped: str = ""  # why generation stopped: STOP_EOS, STOP_MAX_NEW_TOKENS or STOP_CONTEXT ("" not known)
    by: str = ""  # who generated it: TextLLMRunner, or MethodsDriver and the methods it called
    sampling: str = ""  # how each token was chosen (greedy or the sampler and its seed) and where

    @property
    def ended_at_eos(self) -> bool:
        """Whether the last generated token is an end-of-sequence id (counted; its text not in ``text``)."""
        return self.stopped == STOP_EOS

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else 0.0


STOP_EOS = "an end-of-sequence token"
STOP_MAX_NEW_TOKENS = "max_new_tokens"
STOP_CONTEXT = "the end of the context"


def cannot_start(position: int, prompt_tokens: int, context: int) -> str | None:
    """Why a prompt of ``prompt_tokens`` tokens cannot be continued from ``position`` in a cache of ``context``
    positions (one is left for the first generated token, as TextLLMRunner requires), in one line; None if it can.
    Every front door says it in these words."""
    if prompt_tokens < 1:
        return "the prompt is empty (it encodes to no token): give text to continue"
    if prompt_tokens >= context:
        return (
            f"the prompt is {prompt_tokens} tokens and the program's cache holds {context} (get_max_context_len): "
            "shorten the prompt, or lower the model with a longer cache"
        )
    if position + prompt_tokens >= context:
        return (
            f"the context is full: {position} of its {context} positions are used and the prompt needs "
            f"{prompt_tokens} more; reset() to start over"
        )
    return None


def _check_max_new_tokens(n: int) -> None:
    if n < 1:
        raise ValueError(f"max_new_tokens is {n}: ask for at least 1 token")
