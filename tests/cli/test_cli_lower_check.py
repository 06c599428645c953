"""`lower` and `check` on a .pt2 written by torch.export.save (subprocess), plus check's mismatch
status through `cli.main` with the lowering reused.

The module lowers one program once (the `lower` command's own output is the shared .pte).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from et_tensorrt import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SmallConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        logits = self.fc(y.flatten(1))
        return logits, torch.cumsum(logits, dim=1)  # cumsum: kept on the host by the user


def run_cli(*args, tmp):
    env = dict(os.environ, ET_TENSORRT_CACHE_DIR=str(tmp / "engines"))
    return subprocess.run([sys.executable, "-m", "et_tensorrt", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=600)


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lower")
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    x = torch.randn(2, 3, 6, 6)
    torch.export.save(torch.export.export(model, (x,)), tmp / "net.pt2")
    torch.save([x], tmp / "inputs.pt")
    proc = run_cli("lower", tmp / "net.pt2", "-o", tmp / "net.pte", "--min-block-size", 1,
                   "--torch-executed-op", "aten.relu.default", "--torch-executed-op", "aten.cumsum",
                   "--no-zero-copy-inputs", tmp=tmp)
    return proc, tmp


def test_lower_prints_report_progress_and_writes_pte(lowered):
    proc, tmp = lowered
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "x float32(2, 3, 6, 6)" in out
    assert "torch_executed_ops ['aten.relu.default', 'aten.cumsum']" in out
    assert "host: user:torch_executed_ops (aten.relu.default)" in out
    assert "host: user:torch_executed_ops (aten.cumsum.default)" in out
    # relu on the host splits the graph: conv before it, linear after it.
    m = re.search(r"lowered in [\d.]+ s: (\d+) delegate\(s\); engines (\d+) built, (\d+) from cache, (\d+) left", out)
    assert m and m.group(1) == "2", out
    assert int(m.group(2)) + int(m.group(3)) + int(m.group(4)) == 2
    progress = re.findall(r"\[et_tensorrt\] engine (\d+)(?:/(\d+))?: \d+ nodes", out)
    assert len(progress) == 2, out
    assert f"wrote {tmp / 'net.pte'}" in out

    from et_tensorrt.inspection import inspect_file

    info = inspect_file(tmp / "net.pte")
    ours = [d for d in info.method("forward").delegates if d.ours]
    assert len(ours) == 2
    assert all(d.blob is not None and d.compile_specs["et_tensorrt.execution_device"] == "cuda:0" for d in ours)
    assert {"aten::relu.out", "aten::cumsum.out"} <= set(info.method("forward").operators)


def test_check_passes_and_prints_error_table(lowered):
    _, tmp = lowered
    proc = run_cli("check", tmp / "net.pt2", "--inputs", tmp / "inputs.pt", "--min-block-size", 1, tmp=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "check passed" in out
    rows = re.findall(r"^\s+([01])\s+\(2, 5\)\s+(\S+)\s+(\S+)\s+ok$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1"], out
    assert all(float(r[1]) <= 1e-3 for r in rows)


def test_check_mismatched_input_shape(lowered):
    _, tmp = lowered
    torch.save([torch.randn(2, 3, 5, 5)], tmp / "wrong.pt")
    proc = run_cli("check", tmp / "net.pt2", "--inputs", tmp / "wrong.pt", tmp=tmp)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = [l for l in proc.stderr.splitlines() if l.startswith("error")]
    assert "input 0 (x): shape (2, 3, 5, 5) does not match the program's (2, 3, 6, 6)" in line


def test_check_mismatch_exit_status(lowered, monkeypatch, capsys):
    """The comparison and exit status, with the lowering reused and the lowered outputs perturbed."""
    _, tmp = lowered
    data = (tmp / "net.pte").read_bytes()
    monkeypatch.setattr(cli, "lower_program", lambda program, args, debug: (data, None))
    real_run = cli.run_program

    def perturbed(source, inputs, repeat=1):
        outputs, plan, times = real_run(source, inputs, repeat)
        outputs[1] = outputs[1] + 0.5
        return outputs, plan, times

    monkeypatch.setattr(cli, "run_program", perturbed)
    code = cli.main(["check", str(tmp / "net.pt2"), "--inputs", str(tmp / "inputs.pt")])
    out = capsys.readouterr().out
    assert code == cli.EXIT_MISMATCH
    assert re.search(r"^\s+0\s+\(2, 5\)\s+\S+\s+\S+\s+ok$", out, re.M)
    assert re.search(r"^\s+1\s+\(2, 5\)\s+5\.000e-01\s+\S+\s+MISMATCH$", out, re.M)
    assert "check FAILED" in out
