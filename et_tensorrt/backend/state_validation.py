"""onnxruntime validation of a stateful partition: several consecutive calls, the state carried between them.

One call cannot catch a state that is written to the wrong place or never read back: each step here feeds the
state the previous step returned (PyTorch's to PyTorch, onnxruntime's to onnxruntime), starting from the
initial contents, with write positions that follow on from the last step's, as a decoder's calls do.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from et_tensorrt.backend.state_lifting import AXIS, POSITIONS, State
from et_tensorrt.backend.validation import ValidationError, ValidationInconclusive, run_onnx, validation_inputs
from et_tensorrt.builder.onnx_export import OnnxExport
from et_tensorrt.parity import compare, for_precision

STEPS = 3


def _write_length(state: State, inputs: list) -> int:
    guard = state.guard
    if guard.kind == POSITIONS:
        return inputs[guard.input].numel()
    if guard.length_input >= 0:
        return inputs[guard.length_input].shape[guard.length_dim]
    return guard.length_value


def _place_positions(inputs: list, states: list[State], start: int) -> int:
    """Writes consecutive positions from ``start`` into each guarded input; returns where the next step starts."""
    end = start
    for state in states:
        if not state.in_place:
            continue
        length, capacity = _write_length(state, inputs), state.shape[AXIS]
        first = start if start + length <= capacity else 0  # a full cache starts over (the state is still carried)
        held = inputs[state.guard.input]
        if state.guard.kind == POSITIONS:
            values = torch.arange(first, first + held.numel())
        else:
            values = torch.full((held.numel(),), first)
        inputs[state.guard.input] = values.reshape(held.shape).to(held.dtype)
        end = first + length
    return end


def validate_steps(
    ep: ExportedProgram, export: OnnxExport, states: list[State], precision: str = "fp32", seed: int = 0
) -> dict:
    """``ep``: the engine program (state_lifting.engine_program); returns the largest absolute error per output
    over the steps; ValidationError names the step and output that differ."""
    n = len(states)
    module = ep.module()
    eager_state = [s.initial.clone() for s in states]
    onnx_state = [s.initial.clone() for s in states]
    worst: dict[str, float] = {}
    start = 0
    for step in range(STEPS):
        inputs = list(validation_inputs(ep, export, seed + step))[: len(export.inputs) - n]
        start = _place_positions(inputs, states, start)
        try:
            with torch.no_grad():
                expected = list(module(*inputs, *eager_state))
        except Exception as exc:  # noqa: BLE001
            raise ValidationInconclusive(f"PyTorch cannot run the partition at step {step + 1}: {exc}") from exc
        got = run_onnx(export, [*inputs, *onnx_state])
        result = compare(expected, got, for_precision(precision))
        if not result.passed:
            bad = [export.outputs[o.index].name for o in result.outputs if not o.ok] or result.failures()
            raise ValidationError(
                f"ONNX differs from PyTorch at step {step + 1} of {STEPS} with the state carried over "
                f"({result.tolerances}): {', '.join(bad)}"
            )
        for info, o in zip(export.outputs, result.outputs):
            worst[info.name] = max(worst.get(info.name, 0.0), o.max_abs_error or 0.0)
        eager_state, onnx_state = expected[len(expected) - n :], got[len(got) - n :]
    return worst
