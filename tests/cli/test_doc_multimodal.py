"""docs/multimodal.md's recipe executed as written (its ```python blocks in a fresh interpreter, in an empty folder),
then its ``et-tensorrt generate --image`` line there: the same text both ways, one engine per method."""

from __future__ import annotations

import pytest
from doc_blocks import commands, printed, python_code, run_python

pytest.importorskip("PIL")
DOC, HEADING = "docs/multimodal.md", "## Recipe: an image and a prompt, through MultimodalRunner"


def test_multimodal_recipe_generates_through_multimodal_runner_and_the_command_line(tmp_path, run_cli):
    proc = run_python(python_code(DOC, HEADING), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for method in ("vision_encoder", "token_embedding", "text_decoder"):
        assert f"{method} 1 partition(s)" in proc.stdout
    assert printed(proc.stdout, "tokens: ").endswith("state bytes per decode step: [0]")  # the cache in place
    (generate,) = commands(DOC, HEADING)
    result = run_cli(*generate, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat<image> sat on" + printed(proc.stdout, "MultimodalRunner: "))
    assert "by MultimodalRunner" in result.stdout
