"""`check` and `lower --strict-quantization` on a torchao 8da4w program (issue 28): `check` compares a quantized
program within 2 % of the output's absmax and says why; the strict option refuses with one error line."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.testing import quantized_models as qm


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quantized")
    torch.manual_seed(0)
    model = qm.quantize_torchao(qm.Mlp().eval(), "8da4w")
    torch.export.save(torch.export.export(model, (torch.randn(4, 128),)), tmp / "8da4w.pt2")
    return tmp


def test_check_passes_within_the_quantized_share(program, run_cli):
    result = run_cli("check", "8da4w.pt2", "--min-block-size", 1, cwd=program)
    assert result.status == 0, result.stdout + result.stderr
    assert "quantized program: outputs compared within 2% of their largest magnitude" in result.stdout
    assert "check passed" in result.stdout


def test_strict_quantization_is_one_error_line(program, run_cli):
    result = run_cli("lower", "8da4w.pt2", "-o", "x.pte", "--min-block-size", 1, "--strict-quantization", cwd=program)
    assert result.status == 1
    assert "strict_quantization=True refuses" in result.stderr and "nothing was built" in result.stderr
    assert not (program / "x.pte").exists()
