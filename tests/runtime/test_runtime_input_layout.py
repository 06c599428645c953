"""Dense inputs whose dim order is not the one the program expects (transposed, channels-last).

KNOWN BUG (extension/runner/program_runner.cpp, fails today): ``ProgramRunner::run`` hands such a
descriptor to ``Method::set_input``, which checks dtype and sizes only and then shares (zero-copy
inputs) or memcpys (planned inputs) the *bytes*: the method's input tensor keeps the program's
contiguous dim order, so the delegate reads the caller's memory as row-major and returns wrong numbers
with a plan that says "share". The Runner must either refuse the input (LayoutError naming input,
method and the two dim orders) or make it contiguous first; it must never return a silently wrong result.

(ExecuTorch's own Python runtime accepts channels-last inputs and has the same silent problem upstream;
it refuses other non-contiguous orders. That is outside et_tensorrt and not asserted here.)
"""

from __future__ import annotations

import pytest
import torch

import et_tensorrt


def _correct_or_refused(tester, x):
    """The Runner either returns the eager result for ``x`` or raises LayoutError; nothing else."""
    try:
        got = tester.runner.run([x])
    except et_tensorrt.LayoutError as e:
        assert "input 0" in str(e) and "'forward'" in str(e)
        return
    expected = tester.expected([x])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6, msg=lambda m: f"silently wrong result: {m}")


def test_transposed_input(mlp_tester):
    x = torch.randn(8, 2).t()  # shape (2, 8), dense, dim order (1, 0)
    assert et_tensorrt.describe(x).dim_order == (1, 0)
    _correct_or_refused(mlp_tester, x)


def test_channels_last_input(conv_tester):
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    assert et_tensorrt.describe(x).dim_order == (0, 2, 3, 1)
    _correct_or_refused(conv_tester, x)


@pytest.mark.parametrize("make", [lambda: torch.randn(2, 8), lambda: torch.randn(4, 8)[::2].contiguous()])
def test_contiguous_inputs_are_unaffected(mlp_tester, make):
    x = make()
    torch.testing.assert_close(mlp_tester.runner.run([x])[0], mlp_tester.expected([x])[0], rtol=1e-5, atol=1e-6)
