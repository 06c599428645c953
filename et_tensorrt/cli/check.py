"""``check`` (and the last step of ``demo``): run the lowered program on the user's inputs and say exactly
what was checked.

Two things are compared with eager PyTorch:

* the program's outputs, as it ran here: through TensorRT where an engine could run, else through the
  partition's embedded PyTorch program (then this comparison says nothing about TensorRT);
* each engine's ONNX (what the engine is built from), run by onnxruntime on the inputs that partition
  received from the user's inputs, against eager PyTorch on those same inputs.

The check passes when both match, and every engine either ran in TensorRT or had its ONNX checked.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import torch

from ..parity import Comparison, Tolerances, compare, error_text
from .common import backend_log, quiet_native_stderr
from .display import print_comparison, print_plan, print_table


@dataclass
class EngineCheck:
    label: str  # "engine 1/2"
    has_engine: bool  # False: its build was left to PyTorch at lowering time
    executor: str  # "tensorrt", "pytorch", or "not called"
    reason: str  # why TensorRT did not run it ("" when it did)
    onnx: Comparison | None  # None when the ONNX was not checked
    onnx_note: str  # why it was not checked

    @property
    def verified(self) -> bool:
        """Its numbers were looked at: TensorRT ran it (the program's outputs cover it), or its ONNX matched."""
        if not self.has_engine:
            return True  # PyTorch runs it everywhere: the program's outputs cover it
        return self.executor == "tensorrt" or (self.onnx is not None and self.onnx.passed)


@dataclass
class CheckResult:
    outputs: Comparison  # the program as run here against eager PyTorch
    engines: list[EngineCheck]
    decode: object = None  # check_decode.DecodeCheck: an LLM program's tokens decoded against eager's

    @property
    def engines_executed(self) -> int:
        return sum(e.executor == "tensorrt" for e in self.engines)

    @property
    def onnx_checked(self) -> int:
        return sum(e.onnx is not None for e in self.engines)

    @property
    def passed(self) -> bool:
        onnx_ok = all(e.onnx is None or e.onnx.passed for e in self.engines)
        decoded = self.decode is None or self.decode.passed
        return self.outputs.passed and onnx_ok and all(e.verified for e in self.engines) and decoded

    def _largest(self, attr: str) -> float | None:
        values = [getattr(self.outputs, attr)] + [getattr(e.onnx, attr) for e in self.engines if e.onnx]
        known = [v for v in values if v is not None]
        return max(known) if known else None

    def summary(self) -> str:
        n = len(self.engines)
        if not self.passed:
            problems = [f"outputs: {p}" for p in self.outputs.failures()]
            for e in self.engines:
                if e.onnx is not None and not e.onnx.passed:
                    problems += [f"{e.label} ONNX: {p}" for p in e.onnx.failures()]
                elif not e.verified:
                    problems.append(f"{e.label}: neither run by TensorRT nor checked here ({e.onnx_note})")
            if self.decode is not None:
                problems += self.decode.failures()
            return "check FAILED: " + "; ".join(problems)
        text = f"check passed: TensorRT ran {self.engines_executed} of {n} engine(s) here"
        if self.onnx_checked:
            text += f"; the ONNX of {self.onnx_checked} matched eager PyTorch on your inputs"
        if self.decode is not None:
            text += f"; {self.decode.summary()}"
        return text

    def notes(self) -> list[str]:
        if self.engines_executed < len(self.engines):
            return [
                "note: an engine that did not run here was checked through its ONNX only; TensorRT's own "
                "numbers need a GPU"
            ]
        return []

    def to_json(self, **context) -> str:
        def number(x):
            return x if x is None or math.isfinite(x) else None

        def comparison(c: Comparison | None):
            if c is None:
                return None
            return {
                "passed": c.passed,
                "max_abs_error": number(c.max_abs_error),
                "max_rel_error": number(c.max_rel_error),
                "rtol": c.tolerances.rtol,
                "atol": c.tolerances.atol,
                "problems": c.failures(),
            }

        return json.dumps(
            {
                **context,
                "engines": len(self.engines),
                "engines_executed": self.engines_executed,
                "onnx_checked": self.onnx_checked,
                "max_abs_error": number(self._largest("max_abs_error")),
                "max_rel_error": number(self._largest("max_rel_error")),
                "passed": self.passed,
                "outputs": comparison(self.outputs),
                "per_engine": [
                    {
                        "engine": e.label,
                        "has_engine": e.has_engine,
                        "executor": e.executor,
                        "not_tensorrt_because": e.reason,
                        "onnx": comparison(e.onnx),
                        "onnx_not_checked_because": e.onnx_note,
                    }
                    for e in self.engines
                ],
                "decode": None if self.decode is None else self.decode.to_json(),
                "summary": self.summary(),
                "notes": self.notes(),
            },
            indent=2,
        )


def run_and_check(
    data: bytes,
    inputs: list,
    expected: list,
    exports: dict,
    tolerances: Tolerances,
    debug: bool,
    method: str = "forward",
) -> CheckResult:
    """Runs ``method`` of ``data`` on ``inputs`` with :class:`et_tensorrt.Runner`, recording each delegate call, then
    checks the outputs against ``expected`` and each engine's ONNX (``exports``, from the lowering) on its inputs."""
    from .. import Runner, inspection
    from ..runtime.executors import record_calls

    with record_calls() as calls, backend_log(debug), quiet_native_stderr(debug):
        runner = Runner(data)
        outputs = runner.run(inputs, method=method)
    delegates = [d for d in inspection.inspect_bytes(data).method(method).delegates if d.ours]
    named = inspection.named_data(data) if any(d.blob is not None and d.blob.named for d in delegates) else {}
    print_plan(runner.last_plan)
    engines = [
        _check_engine(i, d.blob, len(delegates), calls, exports, tolerances, named) for i, d in enumerate(delegates)
    ]
    result = CheckResult(compare(expected, outputs, tolerances), engines)
    print(
        f"engines: {len(engines)}; ran in TensorRT: {result.engines_executed}; ONNX checked with onnxruntime on "
        f"the inputs each got from yours: {result.onnx_checked}"
    )
    reasons: dict[str, list[str]] = {}
    for e in engines:
        if e.executor == "pytorch":
            reasons.setdefault(e.reason, []).append(e.label)
    for reason, labels in reasons.items():
        print(f"  ran with PyTorch, not TensorRT: {', '.join(labels)} ({reason})")
    rows = [("engine", "ran in", "onnx max abs err", "onnx max rel err", "onnx check")]
    for e in engines:
        if e.onnx is None:
            rows.append((e.label, e.executor, "-", "-", f"not checked: {e.onnx_note}" if e.onnx_note else "-"))
        else:
            rows.append(
                (
                    e.label,
                    e.executor,
                    error_text(e.onnx.max_abs_error),
                    error_text(e.onnx.max_rel_error),
                    "ok" if e.onnx.passed else "MISMATCH: " + "; ".join(e.onnx.failures()),
                )
            )
    print_table(rows)
    print_comparison("the program's outputs as run here, against eager PyTorch", result.outputs)
    return result


def _check_engine(index, blob, count, calls, exports, tolerances, named=None) -> EngineCheck:
    from ..backend.validation import run_onnx
    from ..errors import ValidationError
    from ..format.blob import program_digest

    digest = program_digest(blob)
    recorded = exports.get(digest)
    label = recorded.label if recorded is not None else f"engine {index + 1}/{count}"
    has_engine = blob.has_engine
    call = next((c for c in calls if c.partition == digest), None)
    executor, reason = ("not called", "") if call is None else (call.executor, call.reason)
    if not has_engine:
        return EngineCheck(label, False, executor, reason, None, "no engine (its build was left to PyTorch)")
    if call is None:
        return EngineCheck(label, True, executor, reason, None, "the program did not call this partition")
    if recorded is None:
        return EngineCheck(label, True, executor, reason, None, "no ONNX recorded for it in this lowering")
    # A stateful partition's ONNX takes the states as trailing inputs and returns their new values as trailing
    # outputs: fed and compared as the call found and left them (the delegate binds them itself).
    if call.executor == "pytorch":
        expected = call.outputs + call.states_after
    else:
        expected = _eager(blob, call.inputs, call.states_before, named)
    # numpy has no bfloat16: onnxruntime hands such outputs back widened to float32.
    expected = [e.float() if e.dtype == torch.bfloat16 else e for e in expected]
    inputs, order = _engine_order(blob, recorded.export, call.inputs)
    try:
        got = run_onnx(recorded.export, inputs + call.states_before)
        got = [got[i] for i in order] + got[len(order) :]
    except ValidationError as e:
        return EngineCheck(label, True, executor, reason, None, str(e))
    return EngineCheck(label, True, executor, reason, compare(expected, got, tolerances), "")


def _engine_order(blob, export, inputs: list) -> tuple[list, list[int]]:
    """The call's ``inputs`` in the order of the engine's ONNX, and for each of the call's outputs the ONNX output
    it is. A method that runs another method's engine (backend/engine_sharing.py: ``decode`` runs ``prefill``'s)
    binds its arguments by the engine's names, in an order of its own; otherwise the orders are the same."""
    from ..format.blob import ROLE_OUTPUT

    mine_in = [e.name for e in blob.io if e.role != ROLE_OUTPUT]
    mine_out = [e.name for e in blob.io if e.role == ROLE_OUTPUT]
    theirs_in = [i.name for i in export.delegate_inputs]
    theirs_out = [o.name for o in export.delegate_outputs]
    if not blob.metadata.get("engine_shared_with") or sorted(mine_in) != sorted(theirs_in):
        return list(inputs), list(range(len(mine_out)))
    if len(set(mine_in)) != len(mine_in) or sorted(mine_out) != sorted(theirs_out):
        return list(inputs), list(range(len(mine_out)))
    return [inputs[mine_in.index(name)] for name in theirs_in], [theirs_out.index(name) for name in mine_out]


def _eager(blob, inputs: list, states: list, named=None) -> list:
    """The partition's own program with PyTorch on the host (the reference where TensorRT ran it), loaded by
    the runtime's safe loader (its weights out of the program's named data where they live there), its states
    (the blob's STATE table) as the call found them: its outputs, then the states' new values."""
    from ..embedded_program import load_program

    module = load_program(blob, named).module(check_guards=False)
    module.validate_inputs = False  # the Runner's plan checked the inputs against the blob's dim ranges
    for entry, value in zip(blob.states, states, strict=True):
        module.get_buffer(entry.name).copy_(value)
    with torch.no_grad():
        result = module(*inputs)
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    return result + [module.get_buffer(entry.name).clone() for entry in blob.states]
