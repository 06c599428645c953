"""Zero copy of inputs (the delegate sees the caller's pointer) and caller-preallocated outputs."""

from __future__ import annotations

import pytest
import torch
from models import MLP

import et_tensorrt
from et_tensorrt.testing import Tester


@pytest.fixture(scope="module")
def planned_inputs_tester():
    """The same MLP lowered with zero_copy_inputs=False: ExecuTorch plans (and copies into) its inputs."""
    torch.manual_seed(0)
    return Tester(MLP(), (torch.randn(2, 8),)).lower(min_block_size=1, zero_copy_inputs=False)


def test_default_lowering_shares_the_callers_input_memory(mlp_tester):
    x = torch.randn(2, 8)
    mlp_tester.run_runner([x])
    plan = mlp_tester.runner.last_plan
    assert plan.inputs[0].action == "share"
    assert plan.inputs[0].data_ptr == x.data_ptr()
    assert plan.inputs[0].bytes == 0
    assert plan.inputs[0].source == torch.device("cpu")
    # A second tensor: the delegate follows the new pointer (nothing cached from the last call).
    y = torch.randn(2, 8)
    mlp_tester.run_runner([y])
    assert mlp_tester.runner.last_plan.inputs[0].data_ptr == y.data_ptr() != x.data_ptr()


def test_zero_copy_through_executorch_runtime_too(mlp_tester):
    """ExecuTorch's own Python runtime on the same .pte: the delegate also sees the caller's pointer, and
    record_plans() shows it (there is no Runner to hold the plan)."""
    x = torch.randn(2, 8)
    with et_tensorrt.record_plans() as rec:
        mlp_tester.run_executorch([x])
    (plan,) = rec.plans
    assert plan.inputs[0].action == "share"
    assert plan.inputs[0].data_ptr == x.data_ptr()


def test_planned_inputs_are_copied_by_executorch(planned_inputs_tester):
    """zero_copy_inputs=False: ExecuTorch copies the input into its planned buffer before the delegate runs.
    The method plan says so (the delegate itself "shares" what it is given: ExecuTorch's copy, not the
    caller's memory); the planned buffer stays the same from call to call."""
    x = torch.randn(2, 8)
    planned_inputs_tester.run_runner([x]).run_executorch([x]).check_parity()
    plan = planned_inputs_tester.runner.last_plan
    assert plan.inputs[0].action == "copy planned"
    assert plan.inputs[0].bytes >= x.numel() * x.element_size()
    assert "zero_copy_inputs=True" in plan.inputs[0].reason
    (delegate,) = planned_inputs_tester.runner.last_plans
    assert delegate.inputs[0].action == "share"
    planned = delegate.inputs[0].data_ptr
    assert planned == plan.inputs[0].data_ptr != x.data_ptr()
    y = torch.randn(2, 8)
    planned_inputs_tester.run_runner([y])
    assert planned_inputs_tester.runner.last_plans[0].inputs[0].data_ptr == planned != y.data_ptr()


def test_preallocated_output_is_returned_with_the_values(mlp_tester):
    """``run(..., outputs=[out])`` returns ``out`` itself. The MLP's output is memory planned by ExecuTorch,
    so ``Method::set_output_data_ptr`` refuses it and the Runner copies the result into ``out``
    (``outputs_written_in_place == [False]``): ``out`` is the caller's memory either way."""
    x = torch.randn(2, 8)
    expected = mlp_tester.runner.run([x])[0]
    out = torch.full((2, 4), float("nan"))
    ptr = out.data_ptr()
    result = mlp_tester.runner.run([x], outputs=[out])
    assert result[0] is out
    assert out.data_ptr() == ptr
    assert torch.equal(out, expected)
    assert mlp_tester.runner.outputs_written_in_place == [False]
    # The plan: the PyTorch executor allocates its result, the delegate copies it into the planned output,
    # and the Runner copies that into `out`: two copies of the output, both reported.
    plan = mlp_tester.runner.last_plan
    nbytes = out.numel() * out.element_size()
    assert plan.executor == "pytorch"
    assert plan.outputs[0].action == "copy result"
    assert plan.outputs[0].bytes == 2 * nbytes
    assert "copied into the caller's tensor" in plan.outputs[0].reason
    assert mlp_tester.runner.last_plans[0].outputs[0].bytes == nbytes
    assert plan.bytes_copied == plan.outputs[0].bytes


def test_without_outputs_each_call_returns_fresh_tensors(mlp_tester):
    """Returned outputs are the caller's own copies: ExecuTorch reuses its planned output buffer."""
    a = mlp_tester.runner.run([torch.randn(2, 8)])[0]
    a_copy = a.clone()
    b = mlp_tester.runner.run([torch.randn(2, 8)])[0]
    assert a.data_ptr() != b.data_ptr()
    assert torch.equal(a, a_copy)
    assert mlp_tester.runner.outputs_written_in_place == [False]
