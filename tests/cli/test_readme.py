"""The README's Python snippets, each executed as written in a fresh interpreter (so the own-flow snippet
cannot lean on an earlier `et_tensorrt.lower` having imported the backend)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _snippet(heading: str) -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, heading
    return match.group(1)


@pytest.mark.parametrize(
    "heading",
    [
        "## A 30-second tour of the Python API",
        "### Inside your own ExecuTorch flow",
        "### LLMs: `prefill` and `decode` in one program",
    ],
)
def test_readme_snippet_runs_in_a_fresh_process(heading, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run(
        [sys.executable, "-c", _snippet(heading)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "partition report" in proc.stdout
    if heading.startswith("## A 30-second tour"):
        # Only et_tensorrt speaks: the third-party noise its imports and calls trigger is held back (_quiet.py).
        assert [line for line in proc.stderr.splitlines() if not line.startswith("et_tensorrt: ")] == []
