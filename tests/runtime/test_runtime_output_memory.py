"""zero_copy_outputs=True: the method writes its outputs straight into memory the caller owns."""

import pytest
import torch
from models import MLP

from et_tensorrt.testing import Tester


@pytest.fixture(scope="module")
def unplanned_outputs():
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    tester = Tester(MLP(), (x,)).lower(min_block_size=1, zero_copy_outputs=True)
    return tester.original_module, x, tester.runner


def test_caller_output_is_written_in_place(unplanned_outputs):
    model, x, runner = unplanned_outputs
    out = torch.full((2, 4), float("nan"))
    (result,) = runner.run([x], outputs=[out])
    assert result is out
    assert runner.outputs_written_in_place == [True]
    torch.testing.assert_close(out, model(x).detach(), rtol=1e-5, atol=1e-6)


def test_without_a_caller_tensor_the_runner_allocates_one(unplanned_outputs):
    model, x, runner = unplanned_outputs
    first = runner.run([x])[0]
    second = runner.run([x])[0]
    assert first.data_ptr() != second.data_ptr()  # each call its own memory, never a reused buffer
    torch.testing.assert_close(second, model(x).detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: torch.empty(2, 4, dtype=torch.int32), "has dtype int32 and the program writes float32"),
        (lambda: torch.empty(1, 4), "must be contiguous and hold"),
        (lambda: torch.empty(4, 2).t(), "must be contiguous and hold"),
    ],
)
def test_unusable_output_tensors_are_refused_by_name(unplanned_outputs, bad, message):
    model, x, runner = unplanned_outputs
    with pytest.raises((TypeError, ValueError), match=rf"^output 0 of method 'forward' .*{message}"):
        runner.run([x], outputs=[bad()])
    torch.testing.assert_close(runner.run([x])[0], model(x).detach(), rtol=1e-5, atol=1e-6)
