"""docs/profiling.md's recipes executed as written: the Runner's table and ETDump, Inspector reading it, the same
table through ExecuTorch's own runtime, then the recipe's ``et-tensorrt run --profile`` line."""

from __future__ import annotations

import re

import pytest
from doc_blocks import commands, printed, python_code, run_python

PROFILING = "docs/profiling.md"
RECIPE = "## Recipe: a table and an ETDump of three calls"
RUNTIME = "## Through ExecuTorch's own runtime"


@pytest.mark.slow  # a fresh interpreter that lowers and imports executorch.devtools (Inspector: executorch.exir)
def test_profiling_recipe_prints_the_phases_and_inspector_reads_every_call(tmp_path, run_cli):
    code = python_code(PROFILING, RECIPE) + "\n" + python_code(PROFILING, RUNTIME)
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert printed(proc.stdout, "phases: ") == "init, input copies, pytorch fallback, output copies"
    assert printed(proc.stdout, "output bytes per call: ") == "160"  # bytes: the (4, 10) float32 result
    assert printed(proc.stdout, "Inspector: ") == "init x1, input copies x3, pytorch fallback x3, output copies x3"
    # executorch.runtime's ETDump, read back into the same table: one row per phase, 3 calls each but init
    rows = re.findall(r"^(init|input copies|pytorch fallback|output copies)\s+(\d+)\s", proc.stdout, re.M)
    assert rows[-4:] == [("init", "1"), ("input copies", "3"), ("pytorch fallback", "3"), ("output copies", "3")]
    (line,) = commands(PROFILING, RECIPE)
    result = run_cli(*line, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert re.search(r"^output copies\s+4\s+[\d.]+\s+[\d.]+\s+640$", result.stdout, re.M), result.stdout
    assert (tmp_path / "run.etdump").stat().st_size > 0
