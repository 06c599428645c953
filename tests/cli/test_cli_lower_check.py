"""`lower` and `check` on a .pt2 written by torch.export.save, as the real command (run_cli): the report,
what `check` says it checked (no engine runs without a GPU; each engine's ONNX on the user's inputs),
`check --json`, a lowering that delegates nothing (exit 4), and a `--torch-executed-op` that matches no
node. The mismatch statuses run in-process through `cli.main` with onnxruntime's answer perturbed.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from et_tensorrt import cli


class SmallConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        logits = self.fc(y.flatten(1))
        return logits, torch.cumsum(logits, dim=1)  # cumsum: kept on the host by the user


class OnlyHost(torch.nn.Module):
    def forward(self, x):
        return torch.atan2(x, x)  # outside the supported table


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lower")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    torch.export.save(torch.export.export(SmallConvNet().eval(), (x,)), tmp / "net.pt2")
    torch.export.save(torch.export.export(OnlyHost(), (torch.randn(4, 4),)), tmp / "host.pt2")
    torch.save([x], tmp / "inputs.pt")
    return tmp


@pytest.fixture(scope="module")
def lowered(tmp, run_cli):
    return run_cli(
        "lower",
        "net.pt2",
        "-o",
        "net.pte",
        "--min-block-size",
        1,
        "--torch-executed-op",
        "aten.relu.default",
        "--torch-executed-op",
        "aten.cumsum",
        "--no-zero-copy-inputs",
        cwd=tmp,
    )


def test_lower_prints_report_progress_and_writes_pte(lowered, tmp):
    assert lowered.status == 0, lowered.stdout + lowered.stderr
    assert lowered.noise == []  # no third-party noise
    out = lowered.stdout
    assert "x float32(2, 3, 6, 6)" in out
    assert "torch_executed_ops ['aten.relu.default', 'aten.cumsum']" in out
    assert re.search(r"^aten_relu_default\s+aten\.relu\.default\s+cpu\s+host: user:torch_executed_ops$", out, re.M)
    assert re.search(r"^aten_cumsum_default\s+aten\.cumsum\.default\s+cpu\s+host: user:torch_executed_ops$", out, re.M)
    # relu on the host splits the graph: conv before it, linear after it.
    m = re.search(r"lowered in [\d.]+ s: (\d+) delegate\(s\); engines (\d+) built, (\d+) from cache, (\d+) left", out)
    assert m and m.group(1) == "2", out
    assert int(m.group(2)) + int(m.group(3)) + int(m.group(4)) == 2
    assert len(re.findall(r"\[et_tensorrt\] engine (\d+)/2: \d+ nodes", lowered.stderr)) == 2, lowered.stderr
    assert "wrote net.pte" in out
    report = out[out.index("et_tensorrt partition report") : out.index("lowered in")]
    assert max(len(line) for line in report.splitlines()) <= 100

    from et_tensorrt.inspection import inspect_file

    info = inspect_file(tmp / "net.pte")
    ours = [d for d in info.method("forward").delegates if d.ours]
    assert len(ours) == 2
    assert all(d.blob is not None and d.compile_specs["et_tensorrt.execution_device"] == "cuda:0" for d in ours)
    assert all(d.compile_specs["et_tensorrt.precision"] == "fp32" for d in ours)  # every BuildOptions field travels
    assert {"aten::relu.out", "aten::cumsum.out"} <= set(info.method("forward").operators)


def test_check_says_what_ran_and_checks_each_engines_onnx(tmp, run_cli):
    result = run_cli(
        "check",
        "net.pt2",
        "--inputs",
        "inputs.pt",
        "--min-block-size",
        1,
        "--torch-executed-op",
        "aten.relu.default",
        cwd=tmp,
    )
    assert result.status == 0, result.stdout + result.stderr
    assert result.noise == []
    out = result.stdout
    executed = 2 if torch.cuda.is_available() else 0
    assert f"engines: 2; ran in TensorRT: {executed}; ONNX checked with onnxruntime" in out
    rows = re.findall(r"^\s+engine ([12])/2\s+(\S+)\s+(\S+)\s+(\S+)\s+ok$", out, re.M)
    assert [r[0] for r in rows] == ["1", "2"], out
    assert all(float(r[2]) <= 1e-3 for r in rows)
    if not torch.cuda.is_available():
        assert all(r[1] == "pytorch" for r in rows)
        assert "ran with PyTorch, not TensorRT: engine 1/2, engine 2/2 (no CUDA device is available" in out
        assert "TensorRT's own numbers need a GPU" in out
    outputs = re.findall(r"^\s+([01])\s+\(2, 5\)\s+(\S+)\s+(\S+)\s+ok$", out, re.M)
    assert [r[0] for r in outputs] == ["0", "1"], out
    assert out.rstrip().endswith(
        f"check passed: TensorRT ran {executed} of 2 engine(s) here; the ONNX of 2 matched eager PyTorch on your inputs"
    )


def test_check_json_is_one_object(tmp, run_cli):
    result = run_cli("check", "net.pt2", "--inputs", "inputs.pt", "--min-block-size", 1, "--json", cwd=tmp)
    assert result.status == 0, result.stdout + result.stderr
    assert result.noise == []
    data = json.loads(result.stdout)  # stdout holds the object and nothing else
    assert data["engines"] == 1 and data["onnx_checked"] == 1 and data["passed"] is True
    assert data["engines_executed"] == (1 if torch.cuda.is_available() else 0)
    assert 0 <= data["max_abs_error"] <= 1e-3 and data["max_rel_error"] >= 0
    (engine,) = data["per_engine"]
    assert engine["engine"] == "engine 1/1" and engine["onnx"]["passed"] is True
    assert engine["executor"] == ("tensorrt" if torch.cuda.is_available() else "pytorch")
    assert data["outputs"]["passed"] is True and data["outputs"]["atol"] == 1e-3


@pytest.mark.parametrize("command", ["lower", "check"])
def test_nothing_delegated_is_status_4(tmp, run_cli, command):
    args = ("-o", "host.pte") if command == "lower" else ()
    result = run_cli(command, "host.pt2", *args, cwd=tmp)
    assert result.status == cli.EXIT_NOTHING_DELEGATED, result.stdout + result.stderr
    assert "nothing was delegated: all 1 node(s) stay on the host" in result.error_line
    assert "host: unsupported-op" in result.stdout  # the report says why
    assert not (tmp / "host.pte").exists()


def test_check_json_on_nothing_delegated_is_still_one_object(tmp, run_cli):
    result = run_cli("check", "host.pt2", "--json", cwd=tmp)
    assert result.status == cli.EXIT_NOTHING_DELEGATED
    assert "nothing was delegated" in result.error_line
    data = json.loads(result.stdout)
    assert data["passed"] is False and data["exit_status"] == 4 and data["engines"] == 0
    assert data["error"].startswith("nothing was delegated")


def test_allow_no_delegate_keeps_the_program(tmp, run_cli):
    result = run_cli("lower", "host.pt2", "-o", "host_allowed.pte", "--allow-no-delegate", cwd=tmp)
    assert result.status == 0 and result.noise == []
    assert (tmp / "host_allowed.pte").read_bytes()[4:8] == b"ET12"


def test_executed_op_matching_no_node_stops_at_partitioning(tmp, run_cli):
    # aten.linear is a real op, but ExecuTorch decomposes it (addmm) before the partitioner sees the graph.
    result = run_cli(
        "lower", "net.pt2", "-o", "x.pte", "--min-block-size", 1, "--torch-executed-op", "aten.linear.default", cwd=tmp
    )
    assert result.status == cli.EXIT_USAGE
    line = result.error_line
    assert "'aten.linear.default' matches no node of this program" in line and "did you mean" in line
    assert "aten.addmm.default" in line
    assert "engine 1" not in result.stdout  # stopped before any engine was built
    assert not (tmp / "x.pte").exists()


def test_check_mismatch_in_an_engines_onnx_fails(tmp, monkeypatch, capsys):
    """onnxruntime's answer perturbed: the check names the engine and exits 3; no ONNX answer at all (an
    engine neither run nor checked) fails too."""
    from et_tensorrt.backend import validation
    from et_tensorrt.errors import ValidationError

    real = validation.run_onnx
    monkeypatch.setattr(validation, "run_onnx", lambda export, inputs: [t + 0.5 for t in real(export, inputs)])
    code = cli.main(["check", str(tmp / "net.pt2"), "--inputs", str(tmp / "inputs.pt"), "--min-block-size", "1"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_MISMATCH
    assert re.search(r"^\s+engine 1/1\s+\S+\s+5\.000e-01\s+\S+\s+MISMATCH: output 0", out, re.M), out
    assert "check FAILED: engine 1/1 ONNX: output 0: values differ beyond the tolerance" in out

    def refuse(export, inputs):
        raise ValidationError("onnxruntime could not run the exported ONNX: test")

    if torch.cuda.is_available():
        return  # the engine runs in TensorRT there: that is a check of its own
    monkeypatch.setattr(validation, "run_onnx", refuse)
    code = cli.main(
        ["check", str(tmp / "net.pt2"), "--inputs", str(tmp / "inputs.pt"), "--min-block-size", "1", "--json"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == cli.EXIT_MISMATCH and data["passed"] is False and data["onnx_checked"] == 0
    assert "neither run by TensorRT nor checked here" in data["summary"]


def test_lower_shows_each_stage_and_writes_a_ptd_that_run_needs(tmp, run_cli):
    """`lower` shows each partition's stages as they run (lines when stdout is not a terminal); with
    `--named-data ptd` the engines and weights go to a .ptd beside the .pte, which `run --data` loads."""
    args = ("-o", "shared.pte", "--min-block-size", 1, "--named-data", "ptd", "--no-cache")  # built: every stage runs
    result = run_cli("lower", "net.pt2", *args, cwd=tmp)
    assert result.status == 0, result.stdout + result.stderr
    out = result.stdout
    for stage in ("ONNX export", "engine build", "serialization"):  # progress: on stderr, beside the results
        assert re.search(rf"\[et_tensorrt\] engine 1/1: {stage}: [\d.]+ s \([\d.]+ s elapsed\)", result.stderr)
    assert "wrote shared.pte" in out and "wrote shared.ptd" in out
    ran = run_cli("run", "shared.pte", "--data", "shared.ptd", "--inputs", "inputs.pt", cwd=tmp)
    assert ran.status == 0, ran.stdout + ran.stderr
    beside = run_cli("run", "shared.pte", "--inputs", "inputs.pt", cwd=tmp)  # without --data: the .ptd beside it
    assert beside.status == 0 and "note: named data from shared.ptd" in beside.stderr, beside.stderr
