"""Bad input for every command: one clear `error:` line, no traceback, a non-zero status.

Each command gets one subprocess case; the rest run in-process through `cli.main` (same code path,
without paying for a new interpreter per case).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from et_tensorrt import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, tmp):
    env = dict(os.environ, ET_TENSORRT_CACHE_DIR=str(tmp / "engines"))
    return subprocess.run([sys.executable, "-m", "et_tensorrt", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=300)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1, stderr
    return lines[0]


# ---------------------------------------------------------------------------------------- subprocess


def test_lower_missing_program(tmp_path):
    proc = run_cli("lower", tmp_path / "absent.pt2", "-o", tmp_path / "x.pte", tmp=tmp_path)
    assert proc.returncode == 1
    assert "does not exist" in one_error_line(proc.stderr)
    assert not (tmp_path / "x.pte").exists()


def test_inspect_corrupt_pte(tmp_path):
    (tmp_path / "junk.pte").write_bytes(os.urandom(64))
    proc = run_cli("inspect", tmp_path / "junk.pte", tmp=tmp_path)
    assert proc.returncode == 1
    assert "is not an ExecuTorch program" in one_error_line(proc.stderr)


def test_run_unsupported_device_string(tmp_path):
    (tmp_path / "m.pte").write_bytes(b"\0" * 64)
    proc = run_cli("run", tmp_path / "m.pte", "--device", "tpu:0", tmp=tmp_path)
    assert proc.returncode == 1
    assert "'tpu:0' is not a supported device string" in one_error_line(proc.stderr)


def test_check_missing_program(tmp_path):
    proc = run_cli("check", tmp_path / "absent.pt2", tmp=tmp_path)
    assert proc.returncode == 1
    assert "does not exist" in one_error_line(proc.stderr)


def test_demo_unsupported_target_device(tmp_path):
    proc = run_cli("demo", "--target-device", "cpu", tmp=tmp_path)
    assert proc.returncode == 1
    assert "TensorRT engines run on a cuda device" in one_error_line(proc.stderr)


# ------------------------------------------------------------------------------------------ in-process


def main_err(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, one_error_line(captured.err)


@pytest.mark.parametrize("device", ["cpu", "tpu", "cuda:x", "cuda:-1", "CUDA:0", "cuda:0:1"])
def test_lower_refuses_device_strings(tmp_path, capsys, device):
    program = tmp_path / "p.pt2"
    program.write_bytes(b"not read: the device is checked first")
    code, line = main_err(capsys, "lower", program, "-o", tmp_path / "o.pte", "--target-device", device)
    assert code == 1 and f"--target-device {device!r}" in line


def test_debug_raises_instead_of_one_line(tmp_path):
    with pytest.raises(cli.CliError, match="does not exist"):
        cli.main(["--debug", "inspect", str(tmp_path / "absent.pte")])


def test_lower_corrupt_program(tmp_path, capsys):
    (tmp_path / "p.pt2").write_text("hello")
    code, line = main_err(capsys, "lower", tmp_path / "p.pt2", "-o", tmp_path / "o.pte")
    assert code == 1 and "is not a torch.export.save program" in line


def test_min_block_size_must_be_positive(tmp_path, capsys):
    (tmp_path / "p.pt2").write_text("x")
    code, line = main_err(capsys, "lower", tmp_path / "p.pt2", "-o", tmp_path / "o.pte", "--min-block-size", 0)
    assert code == 1 and "--min-block-size must be >= 1" in line


def test_inspect_missing_and_directory(tmp_path, capsys):
    code, line = main_err(capsys, "inspect", tmp_path / "absent.pte")
    assert code == 1 and "does not exist" in line
    code, line = main_err(capsys, "inspect", tmp_path)
    assert code == 1 and "is not a file" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_run_cuda_without_cuda(tmp_path, capsys):
    (tmp_path / "m.pte").write_bytes(b"\0" * 64)
    code, line = main_err(capsys, "run", tmp_path / "m.pte", "--device", "cuda:0")
    assert code == 1 and "CUDA is not available on this machine" in line


def test_run_corrupt_pte(tmp_path, capsys):
    (tmp_path / "m.pte").write_bytes(b"\x00\x00\x00\x00XXXX" + os.urandom(64))
    code, line = main_err(capsys, "run", tmp_path / "m.pte")
    assert code == 1 and "is not an ExecuTorch program" in line


def test_inputs_file_must_hold_tensors(tmp_path, capsys):
    (tmp_path / "m.pte").write_bytes(b"\0" * 64)
    torch.save({"x": 1}, tmp_path / "in.pt")
    code, line = main_err(capsys, "run", tmp_path / "m.pte", "--inputs", tmp_path / "in.pt")
    assert code == 1 and "must hold a tensor or a list/tuple of tensors" in line
    code, line = main_err(capsys, "run", tmp_path / "m.pte", "--inputs", tmp_path / "absent.pt")
    assert code == 1 and "inputs file" in line and "does not exist" in line


def test_bad_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lower", "x.pt2", "-o", "y.pte", "--precision", "fp8"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "invalid choice: 'fp8'" in capsys.readouterr().err


def test_compare_flags_mismatches():
    a = torch.tensor([1.0, 2.0, float("nan")])
    rows, ok = cli.compare([a], [a.clone()], 1e-3, 1e-3)
    assert ok and rows[0][-1] == "ok"
    rows, ok = cli.compare([a], [a + torch.tensor([0.0, 0.01, 0.0])], 1e-3, 1e-3)
    assert not ok and rows[0][-1] == "MISMATCH" and rows[0][2] == "1.000e-02"
    rows, ok = cli.compare([a], [torch.tensor([1.0, 2.0, 3.0])], 1e-3, 1e-3)
    assert not ok and "NaN" in rows[0][-1]
    rows, ok = cli.compare([a], [a[:2]], 1e-3, 1e-3)
    assert not ok and "MISMATCH" in rows[0][-1]
    rows, ok = cli.compare([a], [a, a], 1e-3, 1e-3)
    assert not ok and "2 output(s), eager has 1" in rows[0][-1]
