"""A .pt2 whose program calls a library's custom op (HF's MoE ``transformers.grouped_mm_fallback``): the command line
imports the library that registers it before torch.export.load reads the file, and an op no known library registers
is one error naming it. Fresh interpreters: the claim is about what a new process has registered."""

from __future__ import annotations

import pytest
import torch


class _GroupedMM(torch.nn.Module):
    def forward(self, x, w, offsets):
        return torch.ops.transformers.grouped_mm_fallback(x, w, offsets)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from transformers.integrations import moe  # noqa: F401 - registers torch.ops.transformers.grouped_mm_fallback

    folder = tmp_path_factory.mktemp("ops")
    args = (torch.randn(4, 3), torch.randn(2, 3, 5), torch.tensor([2, 4]))
    torch.export.save(torch.export.export(_GroupedMM(), args), folder / "moe.pt2")
    lib = torch.library.Library("et_tensorrt_test", "DEF")  # an op only this process knows
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")

    class Twice(torch.nn.Module):
        def forward(self, x):
            return torch.ops.et_tensorrt_test.twice(x)

    torch.export.save(torch.export.export(Twice(), (torch.randn(3),)), folder / "unknown.pt2")
    return folder


def test_a_program_calling_transformers_custom_op_is_read(saved, run_cli):
    result = run_cli("explain", "moe.pt2", "--min-block-size", 1, cwd=saved, fresh=True)
    assert result.status == 0, result.stderr
    assert "could not be loaded" not in result.stderr


def test_an_op_no_known_library_registers_is_one_error(saved, run_cli):
    result = run_cli("explain", "unknown.pt2", cwd=saved, fresh=True)
    assert result.status == 1
    line = result.error_line
    assert "torch.ops.et_tensorrt_test.twice" in line and "lower it from Python after importing" in line
