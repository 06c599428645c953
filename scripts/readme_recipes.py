"""The README followed verbatim on a clean Python (what .ci/run runs): a new venv; in it, the README's install lines
as written (the set-up line, then the line of each recipe that needs more, e.g. the LLM recipe's ``.[llm]``); then
each recipe, its ```python blocks as one program in an empty folder and its ``et-tensorrt`` command lines there,
with that venv's python and console script. A recipe importing what the install lines do not install fails here.

    python scripts/readme_recipes.py [--venv DIR] [--only HEADING-PREFIX]

Run from any folder; the install lines run in the root of a copy of the checkout (its tracked files and the untracked
ones git does not ignore), as in a fresh clone: the checkout itself is left as it was. pip finds what it finds for
any user (the torch wheel on disk through pip's configured find-links, its cache); the package builds in the copy.
Exit status 1 when a step fails (its output's tail is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from doc_blocks import (  # noqa: E402
    README,
    README_RECIPES,
    SET_UP,
    commands,
    install_lines,
    keep_results,
    python_code,
)


def _environment(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


def _step(name: str, argv: list[str], cwd: Path, env: dict, timeout: int = 3600, record: list | None = None) -> bool:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if record is not None:
        record.append({"name": name, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr})
    seconds = time.perf_counter() - start
    print(
        f"  {name}: {'ok' if proc.returncode == 0 else f'FAILED (exit {proc.returncode})'} in {seconds:.0f} s",
        flush=True,
    )
    if proc.returncode:
        print("    " + (proc.stdout[-2000:] + proc.stderr[-4000:]).replace("\n", "\n    "))
    return proc.returncode == 0


def _copy_of_checkout(destination: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore) copied to ``destination``: the install
    lines run there, as in a fresh clone. Run in the checkout itself, an editable install would build the native
    modules into its source tree linked against this temporary venv's torch and executorch, and break every later
    use of the checkout (.ci/run's pytest) once the venv is gone."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():  # a deleted, not yet committed file is listed too
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", help="where to make the venv (default: a temporary folder)")
    parser.add_argument("--only", help="run only the recipes whose heading contains this text")
    parser.add_argument(
        "--results",
        help="keep each recipe's folder and what its steps printed here (tests/cli/test_readme.py checks them "
        "instead of running the recipes again, when ET_TENSORRT_RECIPE_RESULTS names this folder: .ci/run)",
    )
    args = parser.parse_args()
    recipes = [h for h in README_RECIPES if not args.only or args.only in h]
    with tempfile.TemporaryDirectory(prefix="readme-recipes-") as tmp:
        venv = Path(args.venv or Path(tmp) / "venv").resolve()
        print(f"README recipes in a new venv ({venv}):", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = _environment(venv)
        checkout = _copy_of_checkout(Path(tmp) / "checkout")
        ok = True
        for heading in (SET_UP, *recipes):
            for line in install_lines(README, heading):
                ok = _step(line, ["bash", "-c", line], checkout, env) and ok
        if not ok:
            print("README recipes: the install lines failed; no recipe ran")
            return 1
        passed = 0
        for heading in recipes:
            folder = Path(tempfile.mkdtemp(dir=tmp))  # the recipe's files, for its command lines after it
            python, cli = str(venv / "bin" / "python"), str(venv / "bin" / "et-tensorrt")
            steps = [(heading, [python, "-c", python_code(README, heading)])]
            steps += [(" ".join(["et-tensorrt", *argv]), [cli, *argv]) for argv in commands(README, heading)]
            record: list[dict] = []
            passed += all(_step(name, argv, folder, env, record=record) for name, argv in steps)  # to the 1st failure
            if args.results:
                keep_results(Path(args.results), heading, folder, record)
        print(f"README recipes: {passed} of {len(recipes)} ran as written")
        return 0 if passed == len(recipes) else 1


if __name__ == "__main__":
    sys.exit(main())
