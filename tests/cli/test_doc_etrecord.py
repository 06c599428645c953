"""docs/profiling.md's ETRecord recipe executed as written (its ```python blocks in a fresh interpreter, then its
``et-tensorrt`` line): each of the two partitions' events is printed with its own source ops."""

from __future__ import annotations

import pytest
from doc_blocks import commands, python_code, run_python

DOC = "docs/profiling.md"
HEADING = "## ETRecord: each event against its partition's source ops"


@pytest.mark.slow  # a fresh interpreter lowers and profiles the model (~30 s here)
def test_etrecord_recipe_prints_each_partitions_ops_and_the_command_writes_one(tmp_path, run_cli):
    proc = run_python(python_code(DOC, HEADING), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("Default ", "Execute "))]
    assert [" ".join(row[1:3]) for row in rows if row[0] == "Default"] == ["init 1/2", "init 2/2"]
    runs = [line for line in proc.stdout.splitlines() if " pytorch fallback " in line]
    assert len(runs) == 2 and "aten.tanh.default" not in runs[0] and "aten.tanh.default" in runs[1]
    assert all("calls 3" in line for line in runs)
    (lower,) = commands(DOC, HEADING)
    result = run_cli(*lower, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert "wrote model.etrecord (" in result.stdout
