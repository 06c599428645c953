"""The plan belongs to the Runner and the call: two Runners on two threads never see each other's plans;
a method without a delegate still reports ExecuTorch's own copies; a wrong shape names the input."""

from __future__ import annotations

import threading

import pytest
import torch
from models import MLP

import et_tensorrt


def test_two_runners_on_two_threads_always_see_their_own_plans(mlp_tester):
    runners = [et_tensorrt.Runner(mlp_tester.pte) for _ in range(2)]
    wrong, barrier = [], threading.Barrier(2)

    def hammer(runner):
        barrier.wait()
        for _ in range(300):
            x = torch.randn(2, 8)
            runner.run([x])
            plan = runner.last_plan
            if plan.inputs[0].data_ptr != x.data_ptr() or plan.delegates[0].inputs[0].data_ptr != x.data_ptr():
                wrong.append(plan)

    threads = [threading.Thread(target=hammer, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_a_kept_plan_is_never_changed_by_later_calls(mlp_tester):
    """A call like the last one reuses the delegate's plan only where nobody holds it (issue 45: building each plan's
    words cost more than the call): a plan the caller kept stays as it was, and each call's plan is its own."""
    runner = et_tensorrt.Runner(mlp_tester.pte)
    x = torch.randn(2, 8)
    runner.run([x])
    kept, kept_method = runner.last_plans[0], runner.last_plan
    before = (repr(kept), kept.executor_ns, kept.delegate_ns, repr(kept_method))
    for _ in range(3):
        runner.run([x])
        steady = runner.last_plans[0]
        assert steady is not kept and repr(steady) == before[0]  # the same words, reused or not
        del steady  # let go: the next call may reuse it
    assert (repr(kept), kept.executor_ns, kept.delegate_ns, repr(kept_method)) == before
    y = torch.randn(2, 8)
    runner.run([y])
    assert runner.last_plans[0].inputs[0].data_ptr == y.data_ptr() != kept.inputs[0].data_ptr


def test_plan_of_a_failed_call_is_kept(dynamic_tester):
    """The rejected call's plan is the Runner's last plan (not the previous successful call's)."""
    dynamic_tester.runner.run([torch.randn(4, 8)])
    with pytest.raises(et_tensorrt.RunnerError):
        dynamic_tester.runner.run([torch.randn(1, 8)])
    assert not dynamic_tester.runner.last_plan.ok
    assert dynamic_tester.runner.last_plans[0].inputs[0].action == "reject"


def test_a_method_without_delegates_reports_executorchs_copies():
    """Nothing delegated: the plan still tells that ExecuTorch copied the input into planned memory and that
    the caller's output is a copy of ExecuTorch's reused buffer."""
    torch.manual_seed(0)
    data = et_tensorrt.lower(
        MLP(),
        (torch.randn(2, 8),),
        torch_executed_ops=["aten.addmm.default", "aten.relu.default", "aten.permute_copy.default"],
        zero_copy_inputs=False,
    )
    runner = et_tensorrt.Runner(data)
    x = torch.randn(2, 8)
    (y,) = runner.run([x])
    plan = runner.last_plan
    assert plan.delegates == [] and plan.executor == "none"
    assert plan.inputs[0].action == "copy planned" and plan.inputs[0].bytes == x.numel() * 4
    assert plan.outputs[0].action == "copy out" and plan.outputs[0].bytes == y.numel() * 4
    assert plan.bytes_copied == plan.boundary_bytes == (x.numel() + y.numel()) * 4


def test_wrong_static_shape_names_the_input_and_both_shapes(mlp_tester):
    """(3, 8) fits ExecuTorch's capacity for a static (2, 8) input, but ExecuTorch cannot resize a static dim."""
    with pytest.raises(et_tensorrt.InputShapeError) as info:
        mlp_tester.runner.run([torch.randn(1, 8)])
    msg = str(info.value)
    assert "input 0 of method 'forward' has shape (1, 8) but the program takes (2, 8)" in msg
    assert "dynamic_shapes" in msg
    # Larger than the program's (2, 8) too: a static input takes exactly its sizes (issue 44, row 8)
    with pytest.raises(et_tensorrt.InputShapeError, match=r"has shape \(3, 8\) but the program takes \(2, 8\): dims "):
        mlp_tester.runner.run([torch.randn(3, 8)])
