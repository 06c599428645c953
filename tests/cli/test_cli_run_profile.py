"""``et-tensorrt run --profile ETDUMP``: the per-phase table of the delegates' events and the ETDump (issue 52)."""

from __future__ import annotations

import re

import pytest
import torch


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    import et_tensorrt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    path = tmp_path_factory.mktemp("profile") / "mlp.pte"
    path.write_bytes(et_tensorrt.lower(torch.export.export(model, (torch.randn(2, 8),)), min_block_size=1))
    return path


def _row(out: str, name: str) -> list[str]:
    found = re.search(rf"^{re.escape(name)}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)$", out, re.M)
    assert found, out
    return list(found.groups())


def test_run_profile_prints_each_phase_and_writes_the_etdump(pte, tmp_path, run_cli):
    result = run_cli("run", pte, "--repeat", 3, "--profile", "run.etdump", cwd=tmp_path)
    assert result.status == 0, result.stderr
    out = result.stdout
    assert "profile of the load and 4 calls, 1 of them warm-up" in out
    assert _row(out, "init")[0] == "1"
    for name in ("input copies", "pytorch fallback", "output copies"):
        assert _row(out, name)[0] == "4"
    assert _row(out, "output copies")[3] == "128"  # 4 calls x the (2, 4) float32 result, 32 B
    assert _row(out, "pytorch fallback")[3] == "-"
    assert (tmp_path / "run.etdump").stat().st_size > 0
    assert f"wrote run.etdump ({(tmp_path / 'run.etdump').stat().st_size:,} bytes)" in out


def test_profile_layers_without_a_gpu_says_there_are_no_layer_rows(pte, tmp_path, run_cli):
    result = run_cli("run", pte, "--profile", "run.etdump", "--profile-layers", cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert "no per-layer rows: no delegate ran TensorRT here" in result.stdout


def test_profile_layers_needs_profile(pte, tmp_path, run_cli):
    result = run_cli("run", pte, "--profile-layers", cwd=tmp_path)
    assert result.status == 2
    assert result.error_line == "error: --profile-layers needs --profile ETDUMP (the file the events are written to)"


def test_without_profile_run_prints_no_profile(pte, tmp_path, run_cli):
    result = run_cli("run", pte, cwd=tmp_path)
    assert result.status == 0 and "profile of the" not in result.stdout
    assert not list(tmp_path.glob("*.etdump"))
