"""The recipes in docs/ executed as written (their ```python blocks as one program in a fresh interpreter, in an
empty folder), then their ``et-tensorrt`` command lines in that folder."""

from __future__ import annotations

from doc_blocks import commands, printed, python_code, run_python

STATEFUL = "docs/stateful-decode.md"


def test_stateful_decode_recipe_generates_through_runner_and_textllmrunner(tmp_path, run_cli):
    heading = "## Recipe: export, lower, decode N tokens"
    proc = run_python(python_code(STATEFUL, heading), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # TextLLMRunner prints from C++ after the label, then its statistics line
    assert printed(proc.stdout, "Runner: ") == printed(proc.stdout, "TextLLMRunner: ")
    assert "PyTorchObserver " in proc.stdout and "in place" in proc.stdout
    (generate,) = commands(STATEFUL, heading)
    result = run_cli(*generate, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat") and " generated in " in result.stdout
