"""The command list (`--help`'s "Commands:" line and its entries, the README's table: every command, in one
order), and what the quick answers import: `--help`, `--version`, an argument error, `generate`'s refusal, `cache
size`, a refused program file (a text file, a state dict) and a method the .pte does not have load no torch (a second
or more), `inspect` reads the flatbuffer without ExecuTorch's exir (seconds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import et_tensorrt
from et_tensorrt import cli

REPO = Path(__file__).resolve().parents[2]

COMMANDS_LINE = (
    "Commands: demo, lower, explain, inspect, run, prepare, check, generate, describe, cache (`et-tensorrt COMMAND "
    "--help` for each)."
)


def test_help_lists_every_command(run_cli, tmp_path):
    result = run_cli("--help", cwd=tmp_path)
    assert result.status == 0 and result.stderr == ""
    assert COMMANDS_LINE in " ".join(result.stdout.split())  # argparse wraps at the terminal's width
    listed = re.findall(r"^    (\w+) ", result.stdout, re.M)
    assert listed == list(cli.COMMANDS)


def test_readme_table_lists_every_command():
    text = (REPO / "README.md").read_text()
    table = text[text.index("## The command line") :].split("\n\n")[1]
    assert re.findall(r"^\| `(\w+)", table, re.M) == list(cli.COMMANDS)


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    path = tmp_path_factory.mktemp("quick") / "net.pte"
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    path.write_bytes(et_tensorrt.lower(torch.export.export(model, (torch.randn(2, 4),)), min_block_size=1))
    (path.parent / "notes.txt").write_text("not a program\n")
    torch.save(model.state_dict(), path.parent / "state.pt")
    return path


def _imported(result) -> set[str]:
    """The modules a run imported (PYTHONPROFILEIMPORTTIME's lines on stderr)."""
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr_lines if line.startswith("import time:")}


QUICK = {
    "--help": (("--help",), 0),
    "argument error": (("run", "--repeat", "0", "net.pte"), 2),
    "generate refusal": (("generate", "net.pte", "--tokenizer", "net.pte", "--prompt", "hi"), 1),
    # issue 44, row 9: 15 s, 3.2-3.8 s and 5 s before
    "--version": (("--version",), 0),
    "cache size": (("cache", "size"), 0),
    "explain of a text file": (("explain", "notes.txt"), 1),
    "lower of a state dict": (("lower", "state.pt", "-o", "x.pte"), 1),
    "check of a state dict": (("check", "state.pt"), 1),
    "run of a method the program lacks": (("run", "net.pte", "--method", "decode"), 2),
}


@pytest.mark.parametrize("case", list(QUICK))
def test_quick_answers_import_no_torch(pte, run_cli, case, tmp_path):
    args, status = QUICK[case]
    env = {"PYTHONPROFILEIMPORTTIME": "1", "ET_TENSORRT_CACHE_DIR": str(tmp_path)}
    result = run_cli(*args, cwd=pte.parent, env=env)
    assert result.status == status, result.stderr[-2000:]
    imported = _imported(result)
    assert "et_tensorrt.cli" in imported
    assert not {"torch", "executorch", "et_tensorrt._C"} & imported


def test_inspect_imports_no_exir(pte, run_cli):
    result = run_cli("inspect", "net.pte", cwd=pte.parent, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.status == 0
    assert "1 delegate(s) (1 EtTensorRTBackend)" in result.stdout
    assert not {m for m in _imported(result) if m.startswith("executorch")}
