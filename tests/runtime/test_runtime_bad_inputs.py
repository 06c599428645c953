"""Bad inputs through both entry points (et_tensorrt.Runner and executorch.runtime): each raises a
catchable exception, the process survives, and the next good call on the same runner/method still works.

Who rejects what (observed): a meta tensor is refused by our descriptors (Runner) or by ExecuTorch's
pybinding; a wrong dtype or a shape outside the *method's* bounds is refused by ExecuTorch's
``Method::set_input`` before any delegate runs (so ``last_delegate_error()`` stays empty); a shape inside
the method's bounds but outside the engine's profile is refused by our delegate, and the Runner's
message carries the delegate's own reason.
"""

from __future__ import annotations

import pytest
import torch
from blob_fixtures import corrupt_delegate_magic
from models import DYNAMIC_BATCH

import et_tensorrt
from et_tensorrt import _C


@pytest.fixture(scope="module")
def et_method(mlp_tester):
    """One ExecuTorch method (executorch.runtime) reused across failing and good calls."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(mlp_tester.pte)
    method = program.load_method("forward")
    method.keep_program_alive = program  # ExecuTorch's Method does not own its Program (use-after-free)
    return method


def _good_call_still_works(mlp_tester, et_method):
    x = torch.randn(2, 8)
    expected = mlp_tester.expected([x])[0]
    torch.testing.assert_close(mlp_tester.runner.run([x])[0], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(et_method.execute([x])[0], expected, rtol=1e-5, atol=1e-6)


def test_meta_tensor(mlp_tester, et_method):
    meta = torch.empty(2, 8, device="meta")
    with pytest.raises(et_tensorrt.UnsupportedDeviceError) as info:
        mlp_tester.runner.run([meta])
    msg = str(info.value)
    assert "input 0" in msg and "'forward'" in msg and "meta" in msg
    with pytest.raises(RuntimeError, match="device meta"):
        et_method.execute([meta])
    _good_call_still_works(mlp_tester, et_method)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_wrong_dtype(mlp_tester, et_method, dtype):
    bad = torch.ones(2, 8, dtype=dtype)
    name = {torch.float64: "float64", torch.int64: "int64"}[dtype]
    # The Runner checks inputs against the program's method metadata and names the problem.
    with pytest.raises(
        et_tensorrt.UnsupportedDtypeError,
        match=rf"^input 0 of method 'forward' has dtype {name} but the program takes float32$",
    ):
        mlp_tester.runner.run([bad])
    with pytest.raises(RuntimeError, match="set_inputs"):
        et_method.execute([bad])
    _good_call_still_works(mlp_tester, et_method)


@pytest.mark.parametrize("shape", [(3, 8), (2, 9), (2, 8, 1)])
def test_wrong_static_shape(mlp_tester, et_method, shape):
    bad = torch.randn(shape)
    expected = ", ".join(map(str, shape))
    with pytest.raises(
        ValueError,
        match=rf"^input 0 of method 'forward' has shape \({expected}\) but the program takes \(2, 8\): dims "
        r"exported as static cannot change \(export with dynamic_shapes for the dims that vary\)$",
    ):
        mlp_tester.runner.run([bad])
    with pytest.raises(RuntimeError, match="set_inputs"):
        et_method.execute([bad])
    _good_call_still_works(mlp_tester, et_method)


def test_shape_outside_the_engine_profile_carries_the_delegates_reason(dynamic_tester):
    """Batch 1 fits ExecuTorch's bounded input (it checks capacity, not the lower bound) but not the
    engine's profile (2..16): our delegate refuses it and says why."""
    lo, hi = DYNAMIC_BATCH
    bad = torch.randn(lo - 1, 8)
    reason = f"input 0: shape ({lo - 1}, 8) outside the engine's range ({lo}..{hi}, 8)"
    with pytest.raises(et_tensorrt.RunnerError) as info:
        dynamic_tester.runner.run([bad])
    assert reason in str(info.value)
    assert "EtTensorRTBackend execute" in str(info.value)
    assert reason in _C.last_delegate_error()
    assert dynamic_tester.runner.last_plan.inputs[0].action == "reject"
    with pytest.raises(RuntimeError, match="execute"):
        dynamic_tester.run_executorch([bad])
    assert reason in _C.last_delegate_error()
    dynamic_tester.run_both(torch.randn(lo, 8)).check_parity()
    assert dynamic_tester.runner.last_plan.ok


def test_shape_above_the_methods_bound(dynamic_tester):
    """Batch 17: more elements than ExecuTorch's bounded input holds; refused before the delegate."""
    hi = DYNAMIC_BATCH[1]
    with pytest.raises(
        ValueError,
        match=rf"^input 0 of method 'forward' has shape \({hi + 1}, 8\) but the program "
        rf"takes at most \({hi}, 8\)$",
    ):
        dynamic_tester.runner.run([torch.randn(hi + 1, 8)])
    with pytest.raises(RuntimeError, match="set_inputs"):
        dynamic_tester.run_executorch([torch.randn(hi + 1, 8)])
    dynamic_tester.run_both(torch.randn(hi, 8)).check_parity()


@pytest.mark.parametrize(
    "make_bad, fragment",
    [
        (lambda: torch.randn(2, 16)[:, ::2], "stride 2 at dim 1"),
        (lambda: torch.randn(1, 8).expand(2, 8), "expanded (stride 0) at dim 0"),
    ],
    ids=["stepped", "expanded"],
)
def test_non_dense_layout(mlp_tester, et_method, make_bad, fragment):
    bad = make_bad()
    with pytest.raises(et_tensorrt.LayoutError) as info:
        mlp_tester.runner.run([bad])
    msg = str(info.value)
    assert "input 0 of method 'forward'" in msg and "not dense" in msg and fragment in msg
    with pytest.raises(RuntimeError, match="contiguous"):
        et_method.execute([bad])
    _good_call_still_works(mlp_tester, et_method)


def test_wrong_input_count(mlp_tester, et_method):
    with pytest.raises(
        ValueError, match=r"takes 1 input \(input 0: float32\(2, \d+\)\), got 2: pass one tensor per input"
    ):
        mlp_tester.runner.run([torch.randn(2, 8), torch.randn(2, 8)])
    with pytest.raises(RuntimeError):
        et_method.execute([torch.randn(2, 8), torch.randn(2, 8)])
    _good_call_still_works(mlp_tester, et_method)


def test_corrupt_delegate_blob_inside_the_pte(mlp_tester, et_method):
    """The blob's magic flipped inside the .pte bytes: loading the method fails with the reader's reason."""
    bad = corrupt_delegate_magic(mlp_tester.pte)
    assert len(bad) == len(mlp_tester.pte) and bad != mlp_tester.pte
    runner = et_tensorrt.Runner(bad)  # the program loads; the delegate inits with the method
    for _ in range(2):  # and keeps failing cleanly
        with pytest.raises(et_tensorrt.RunnerError) as info:
            runner.run([torch.randn(2, 8)])
        assert "cannot load method 'forward'" in str(info.value)
        assert "wrong magic" in str(info.value)
        assert "wrong magic" in _C.last_delegate_error()
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(bad)
    with pytest.raises(RuntimeError, match="Failed to load method forward"):
        program.load_method("forward")
    assert "EtTensorRTBackend init: delegate blob: wrong magic" in _C.last_delegate_error()
    _good_call_still_works(mlp_tester, et_method)
    et_tensorrt.Runner(mlp_tester.pte).run([torch.randn(2, 8)])  # a fresh runner of the good bytes


def test_closed_runner(mlp_tester):
    runner = et_tensorrt.Runner(mlp_tester.pte)
    runner.close()
    with pytest.raises(et_tensorrt.RunnerError, match="closed"):
        runner.run([torch.randn(2, 8)])
