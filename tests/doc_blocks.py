"""The code blocks of a Markdown document's section, as the tests that run them verbatim read them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = "et-tensorrt"
README = "README.md"
SET_UP = "## Set-up (fresh machine, from the repository root)"
# The README's recipes: each heading's ```python blocks are one program, its ```sh lines run after it.
README_RECIPES = (
    "## A 30-second tour of the Python API",
    "### Inside your own ExecuTorch flow",
    "### LLMs: export, lower, decode, generate text",
    "## Quantized programs",
)


def section(document: str, heading: str) -> str:
    """The text of ``document`` (relative to the repository) under ``heading``, a whole heading line such as
    ``"### Recipe"``, up to the next heading (a ``#`` line inside a code block is code)."""
    lines = (REPO / document).read_text().splitlines(keepends=True)
    assert heading + "\n" in lines, f"{document} has no heading {heading!r}"
    out, fenced = [], False
    for line in lines[lines.index(heading + "\n") + 1 :]:
        fenced ^= line.startswith("```")
        hashes = len(line) - len(line.lstrip("#"))
        if not fenced and hashes and line[hashes : hashes + 1] == " ":
            break
        out.append(line)
    return "".join(out)


def python_code(document: str, heading: str) -> str:
    """The section's ```python blocks, in order, as one program."""
    blocks = re.findall(r"^```python\n(.*?)^```", section(document, heading), re.S | re.M)
    assert blocks, f"{document}, {heading!r}: no python block"
    return "\n".join(blocks)


def commands(document: str, heading: str) -> list[list[str]]:
    """The ``et-tensorrt`` command lines of the section's ```sh blocks, split as a shell would, without the program
    name (run them with ``python -m et_tensorrt``)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", section(document, heading), re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    for line in lines:
        assert line.startswith(CLI + " "), f"{document}, {heading!r}: not an {CLI} command: {line!r}"
    return [shlex.split(line)[1:] for line in lines]


def install_lines(document: str, heading: str) -> list[str]:
    """The ``pip install`` lines of the section's plain ``` blocks: the shell lines a reader runs as written."""
    blocks = re.findall(r"^```\n(.*?)^```", section(document, heading), re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("pip install")]


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter in ``cwd``, importing this checkout's et_tensorrt."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("ET_TENSORRT_FALLBACK", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


# Where scripts/readme_recipes.py --results kept the recipes it ran in a new venv (.ci/run): the README tests check
# those runs instead of running each recipe a second time.
RECIPE_RESULTS_ENV = "ET_TENSORRT_RECIPE_RESULTS"


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def keep_results(root: Path, heading: str, folder: Path, steps: list[dict]) -> None:
    """A recipe's folder (the files it wrote) and what each of its steps printed, under ``root``."""
    kept = root / _slug(heading)
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(folder, kept / "files")
    (kept / "steps.json").write_text(json.dumps(steps))


def run_recipe(heading: str, cwd: Path) -> subprocess.CompletedProcess:
    """The README recipe's Python program run in ``cwd``: as scripts/readme_recipes.py ran it in a new venv (its
    files copied into ``cwd``) where ``ET_TENSORRT_RECIPE_RESULTS`` names that run's results, else here in a fresh
    interpreter."""
    root = os.environ.get(RECIPE_RESULTS_ENV)
    if not root:
        return run_python(python_code(README, heading), cwd)
    kept = Path(root) / _slug(heading)
    if not (kept / "steps.json").is_file():
        raise FileNotFoundError(f"{RECIPE_RESULTS_ENV}={root} holds no run of the recipe {heading!r}")
    shutil.copytree(kept / "files", cwd, dirs_exist_ok=True)
    step = json.loads((kept / "steps.json").read_text())[0]
    return subprocess.CompletedProcess(step["name"], step["returncode"], step["stdout"], step["stderr"])


def printed(stdout: str, label: str) -> str:
    """What the snippet printed after ``label`` on its one line starting so. Lines end at ``\n`` only: a
    random model's text may hold characters ``str.splitlines`` also ends lines at (``\x1c``-``\x1e``, ``\x85``)."""
    (line,) = [line for line in stdout.split("\n") if line.startswith(label)]
    return line[len(label) :]
