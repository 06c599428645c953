"""``check`` on an LLM program: a few tokens decoded through the lowered program's methods, as its driver calls them
(check_calls.py: a text decoder's ``prefill``/``decode`` or ``forward``; an encoder–decoder's ``encoder`` then
``decoder``; a multimodal program's encoder, ``token_embedding`` and ``text_decoder``), against the eager reference:
the exported programs run with their own buffers (one per name across the methods, as the lowering shares them), call
by call. Every call's outputs (logits, embeddings, an encoder's hidden states and cross-attention K/V, or the token
a sampling head chose) are compared, the tokens must be the same, and each engine's ONNX is run by onnxruntime on
the first call that engine got (its states as the call found them).

Each side feeds its own outputs on (the lowered encoder's states to the lowered decoder), from the same inputs and
seed. Each step gets the token the eager reference chose, so that one near tie cannot make the rest of the
comparison meaningless: a different token still fails the check."""

from __future__ import annotations

from dataclasses import dataclass

from ..parity import Comparison, Tolerances, compare
from .check import EngineCheck, _check_engine
from .display import print_table


@dataclass
class Call:
    method: str
    outputs: Comparison  # its outputs against eager's
    token: int | None = None  # the token chosen after it (the last call of a step), the lowered program's
    eager_token: int | None = None


@dataclass
class DecodeCheck:
    family: str  # check_calls.Plan.family
    methods: tuple[str, ...]  # the methods the decode calls
    calls: list[Call]  # in order
    prompt: list[int]
    fed: str  # what the first step took
    engines: list[EngineCheck]

    @property
    def tokens(self) -> list[int]:
        return [c.token for c in self.calls if c.token is not None]

    @property
    def eager_tokens(self) -> list[int]:
        return [c.eager_token for c in self.calls if c.token is not None]

    @property
    def tokens_match(self) -> bool:
        return self.tokens == self.eager_tokens

    @property
    def passed(self) -> bool:
        onnx_ok = all(e.onnx is None or e.onnx.passed for e in self.engines)
        calls_ok = all(c.outputs.passed for c in self.calls)
        return calls_ok and self.tokens_match and onnx_ok and all(e.verified for e in self.engines)

    def failures(self) -> list[str]:
        problems = []
        for index, c in enumerate(self.calls):
            problems += [f"decode call {index + 1} ({c.method}): {p}" for p in c.outputs.failures()]
        if not self.tokens_match:
            at = next(i for i, (a, b) in enumerate(zip(self.tokens, self.eager_tokens, strict=True)) if a != b)
            problems.append(f"token {at + 1}: {self.tokens[at]}, eager {self.eager_tokens[at]}")
        for e in self.engines:
            if e.onnx is not None and not e.onnx.passed:
                problems += [f"{e.label} ONNX: {p}" for p in e.onnx.failures()]
            elif not e.verified:
                problems.append(f"{e.label}: neither run by TensorRT nor checked here ({e.onnx_note})")
        return problems

    def _largest(self) -> float | None:
        return max((c.outputs.max_abs_error or 0.0 for c in self.calls), default=None)

    def summary(self) -> str:
        return (
            f"decoded {len(self.tokens)} token(s) through {'/'.join(self.methods)} ({self.family}, "
            f"{len(self.calls)} calls) from {self.fed}: the same tokens as eager, every call's outputs within "
            f"tolerance (max abs error {self._largest() or 0.0:.1e})"
        )

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "methods": list(self.methods),
            "fed": self.fed,
            "prompt": self.prompt,
            "tokens": self.tokens,
            "eager_tokens": self.eager_tokens,
            "max_abs_error": self._largest(),
            "calls_passed": sum(c.outputs.passed for c in self.calls),
            "calls": len(self.calls),
            "calls_per_method": {m: sum(c.method == m for c in self.calls) for m in self.methods},
            "onnx_checked": [e.label for e in self.engines if e.onnx is not None],
            "passed": self.passed,
            "problems": self.failures(),
        }


class _Recorded:
    """A runner (the lowered program's Runner, or the eager reference) that keeps a copy of every call's outputs."""

    def __init__(self, runner):
        self._runner, self.calls = runner, []

    def __getattr__(self, name):  # last_plan, outputs_written_in_place: the token loop reads them
        return getattr(self._runner, name)

    def run(self, inputs, method: str = "forward", outputs=None):
        results = list(self._runner.run(inputs, method=method, outputs=outputs))
        self.calls.append((method, [t.detach().cpu().clone() for t in results]))
        return results


def decoding_methods(data: bytes) -> tuple[str, ...] | None:
    """The methods an LLM program's decode calls (any family: check_calls.family), when it has the constant methods
    its driver reads; else None."""
    from ..llm.constants import _method_names
    from .check_calls import family

    found = family(_method_names(data))
    return None if found is None else found[1]


def decode_and_check(
    data: bytes, programs, exports: dict, tolerances: Tolerances, tokens: int, seed: int, debug: bool
) -> DecodeCheck:
    """Decodes ``tokens`` tokens (fewer where the context ends) through ``data``'s methods and through the eager
    ``programs`` (what was lowered) as the program's driver calls them (check_calls.py), and checks each call, the
    tokens and each engine's ONNX."""
    from .. import Runner, inspection
    from ..runtime.executors import record_calls
    from .check_calls import plan_for
    from .common import backend_log, quiet_native_stderr
    from .eager import EagerProgram

    programs = programs if isinstance(programs, dict) else {"forward": programs}
    plan = plan_for(data, programs, seed)
    eager = _Recorded(EagerProgram(programs))
    reference = plan.side(eager, True)
    calls: list[Call] = []
    with record_calls() as recorded, backend_log(debug), quiet_native_stderr(debug):
        lowered = _Recorded(Runner(data))
        side = plan.side(lowered, False)
        want = None  # eager's last token, fed to both sides
        while not calls or (sum(c.token is not None for c in calls) < tokens and reference.room > 0):
            if want is None:
                token, wanted = side.first(), reference.first()
            else:
                token, wanted = side.next(want), reference.next(want)
            if len(lowered.calls) != len(eager.calls):  # one plan drives both sides: a bug here, not a mismatch
                raise RuntimeError(f"decode made {len(lowered.calls)} calls, its reference {len(eager.calls)}")
            for (method, got), (_, expected) in zip(lowered.calls[len(calls) :], eager.calls[len(calls) :]):
                calls.append(Call(method, compare(expected, got, tolerances)))
            calls[-1].token, calls[-1].eager_token, want = token, wanted, wanted
    program = inspection.inspect_bytes(data)
    engines = []
    for name in plan.methods:
        delegates = [d for d in program.method(name).delegates if d.ours]
        named = inspection.named_data(data) if any(d.blob is not None and d.blob.named for d in delegates) else {}
        for i, d in enumerate(delegates):
            check = _check_engine(i, d.blob, len(delegates), recorded, exports, tolerances, named)
            check.label = f"{name} {check.label}"
            engines.append(check)
    result = DecodeCheck(plan.family, plan.methods, calls, plan.prompt, plan.fed, engines)
    _print(result)
    return result


def _print(result: DecodeCheck) -> None:
    print(
        f"\ndecoded {len(result.tokens)} token(s) through the methods {', '.join(result.methods)} ({result.family}) "
        f"from {result.fed}, against the exported programs run eagerly with their own buffers:"
    )
    rows = [("call", "method", "max abs err", "outputs", "token", "eager token")]
    for index, c in enumerate(result.calls):
        verdict = "ok" if c.outputs.passed else "MISMATCH: " + "; ".join(c.outputs.failures())
        error = "-" if c.outputs.max_abs_error is None else f"{c.outputs.max_abs_error:.3e}"
        token = ("", "") if c.token is None else (str(c.token), str(c.eager_token))
        rows.append((str(index + 1), c.method, error, verdict, *token))
    print_table(rows)
    rows = [("engine", "ran in", "onnx check")]
    for e in result.engines:
        if e.onnx is None:
            rows.append((e.label, e.executor, f"not checked: {e.onnx_note}" if e.onnx_note else "-"))
        else:
            rows.append((e.label, e.executor, "ok" if e.onnx.passed else "MISMATCH: " + "; ".join(e.onnx.failures())))
    print_table(rows)
