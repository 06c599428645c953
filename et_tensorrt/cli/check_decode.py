"""``check`` on an LLM program: a few tokens decoded through the lowered program's methods (``prefill`` then
``decode``, or ``forward``), as ``generate`` calls them, against the eager reference: the exported programs run with
their own buffers (one per name across the methods, as the lowering shares them), token by token. Every call's
outputs (the logits, or the token a sampling head chose) are compared, the tokens must be the same, and each
engine's ONNX is run by onnxruntime on the first call that engine got (its states as the call found them).

Both sides are driven by the drivers' own token loop (llm/runner/token_loop.py) with the program's signature and
sampling (llm/runner/program_facts.py reads them from the lowered program's constant methods), from the same prompt and
seed. Each call gets the token the eager reference chose, so that one near tie cannot make the rest of the comparison
meaningless: a different token still fails the check."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..parity import Comparison, Tolerances, compare
from .check import EngineCheck, _check_engine
from .display import print_table

PROMPT_TOKENS = 4  # the prompt's length (fewer where the context is short)


@dataclass
class DecodeCheck:
    methods: tuple[str, ...]  # the methods that take tokens: ("prefill", "decode") or ("forward",)
    calls: list[tuple[str, Comparison]]  # (method, its outputs against eager's), in order
    tokens: list[int]  # the lowered program's, one per call
    eager_tokens: list[int]
    prompt: list[int]
    engines: list[EngineCheck]

    @property
    def tokens_match(self) -> bool:
        return self.tokens == self.eager_tokens

    @property
    def passed(self) -> bool:
        onnx_ok = all(e.onnx is None or e.onnx.passed for e in self.engines)
        calls_ok = all(c.passed for _, c in self.calls)
        return calls_ok and self.tokens_match and onnx_ok and all(e.verified for e in self.engines)

    def failures(self) -> list[str]:
        problems = []
        for index, (method, c) in enumerate(self.calls):
            problems += [f"decode call {index + 1} ({method}): {p}" for p in c.failures()]
        if not self.tokens_match:
            at = next(i for i, (a, b) in enumerate(zip(self.tokens, self.eager_tokens, strict=True)) if a != b)
            problems.append(f"token {at + 1}: {self.tokens[at]}, eager {self.eager_tokens[at]}")
        for e in self.engines:
            if e.onnx is not None and not e.onnx.passed:
                problems += [f"{e.label} ONNX: {p}" for p in e.onnx.failures()]
            elif not e.verified:
                problems.append(f"{e.label}: neither run by TensorRT nor checked here ({e.onnx_note})")
        return problems

    def summary(self) -> str:
        largest = max((c.max_abs_error or 0.0 for _, c in self.calls), default=0.0)
        return (
            f"decoded {len(self.tokens)} token(s) through {'/'.join(self.methods)} from a prompt of "
            f"{len(self.prompt)}: the same tokens as eager, every call's outputs within tolerance (max abs error "
            f"{largest:.1e})"
        )

    def to_json(self) -> dict:
        return {
            "methods": list(self.methods),
            "prompt": self.prompt,
            "tokens": self.tokens,
            "eager_tokens": self.eager_tokens,
            "max_abs_error": max((c.max_abs_error or 0.0 for _, c in self.calls), default=None),
            "calls_passed": sum(c.passed for _, c in self.calls),
            "calls": len(self.calls),
            "onnx_checked": [e.label for e in self.engines if e.onnx is not None],
            "passed": self.passed,
            "problems": self.failures(),
        }


class _Outputs:
    """A runner (the lowered program's Runner, or the eager reference) whose last call's outputs are kept."""

    def __init__(self, runner):
        self._runner, self.last = runner, []

    def __getattr__(self, name):  # last_plan, outputs_written_in_place: the token loop reads them
        return getattr(self._runner, name)

    def run(self, inputs, method: str = "forward", outputs=None):
        self.last = list(self._runner.run(inputs, method=method, outputs=outputs))
        return self.last


def decoding_methods(data: bytes) -> tuple[str, ...] | None:
    """The methods an LLM program takes tokens with, when it has the constant methods the drivers read; else None."""
    from ..llm.constants import _method_names, decoding_methods, missing_methods

    decoding = decoding_methods(_method_names(data))
    return None if missing_methods(data, decoding) else decoding


def decode_and_check(
    data: bytes, programs, exports: dict, tolerances: Tolerances, tokens: int, seed: int, debug: bool
) -> DecodeCheck:
    """Decodes ``tokens`` tokens (fewer where the context ends) through ``data``'s methods and through the eager
    ``programs`` (what was lowered), and checks each call, the tokens and each engine's ONNX."""
    from .. import Runner, inspection
    from ..llm.constants import _method_names
    from ..llm.runner.program_facts import _constants, _program_facts
    from ..llm.runner.token_loop import TokenLoop
    from ..llm.sampling import Sampling
    from ..runtime.executors import record_calls
    from .common import backend_log, quiet_native_stderr
    from .eager import EagerProgram

    methods = decoding_methods(data)
    signature, context, _ = _program_facts(data, methods, _method_names(data))
    (vocab,) = _constants(data, "get_vocab_size")
    generator = torch.Generator().manual_seed(seed)
    length = max(1, min(PROMPT_TOKENS, context - 2))
    prompt = torch.randint(0, int(vocab[0]), (length,), generator=generator).tolist()
    count = max(1, min(tokens, context - length))
    sampling = signature.head or Sampling()
    eager = _Outputs(EagerProgram(programs))
    eager_loop = TokenLoop(eager, signature, sampling, seed, device="cpu")
    calls, got, want = [], [], []
    with record_calls() as recorded, backend_log(debug), quiet_native_stderr(debug):
        lowered = _Outputs(Runner(data))
        loop = TokenLoop(lowered, signature, sampling, seed)
        for step in range(count):
            if step == 0:
                token, reference = loop.first(prompt, 0), eager_loop.first(prompt, 0)
                method = signature.prefill
            else:
                position = length + step - 1
                fed = torch.tensor([[want[-1]]], dtype=torch.int64)  # eager's token, to both (the module doc)
                token, reference = loop.next(fed, position), eager_loop.next(fed, position)
                method = signature.decode
            calls.append((method, compare(eager.last, [t.detach().cpu() for t in lowered.last], tolerances)))
            got.append(int(token))
            want.append(int(reference))
    program = inspection.inspect_bytes(data)
    engines = []
    for name in methods:
        delegates = [d for d in program.method(name).delegates if d.ours]
        named = inspection.named_data(data) if any(d.blob is not None and d.blob.named for d in delegates) else {}
        for i, d in enumerate(delegates):
            check = _check_engine(i, d.blob, len(delegates), recorded, exports, tolerances, named)
            check.label = f"{name} {check.label}"
            engines.append(check)
    result = DecodeCheck(methods, calls, got, want, prompt, engines)
    _print(result)
    return result


def _print(result: DecodeCheck) -> None:
    print(
        f"\ndecoded {len(result.tokens)} token(s) through the methods {', '.join(result.methods)} from the prompt "
        f"{result.prompt}, against the exported programs run eagerly with their own buffers:"
    )
    rows = [("call", "method", "max abs err", "outputs", "token", "eager token")]
    for index, ((method, c), token, reference) in enumerate(
        zip(result.calls, result.tokens, result.eager_tokens, strict=True)
    ):
        verdict = "ok" if c.passed else "MISMATCH: " + "; ".join(c.failures())
        error = "-" if c.max_abs_error is None else f"{c.max_abs_error:.3e}"
        rows.append((str(index + 1), method, error, verdict, str(token), str(reference)))
    print_table(rows)
    rows = [("engine", "ran in", "onnx check")]
    for e in result.engines:
        if e.onnx is None:
            rows.append((e.label, e.executor, f"not checked: {e.onnx_note}" if e.onnx_note else "-"))
        else:
            rows.append((e.label, e.executor, "ok" if e.onnx.passed else "MISMATCH: " + "; ".join(e.onnx.failures())))
    print_table(rows)
