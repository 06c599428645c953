"""The README's Python snippets, each executed as written in a fresh interpreter (so the own-flow snippet
cannot lean on an earlier `et_tensorrt.lower` having imported the backend), and the command lines of its recipes
after them, in the same folder. Under .ci/run the recipes' runs are the ones scripts/readme_recipes.py made in a new
venv (``ET_TENSORRT_RECIPE_RESULTS``, doc_blocks.run_recipe): each recipe runs once per CI run, checked here."""

from __future__ import annotations

import ast
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

import pytest
from doc_blocks import (
    README,
    README_RECIPES,
    SET_UP,
    commands,
    install_lines,
    printed,
    python_code,
    run_recipe,
    section,
)
from packaging.requirements import Requirement

TOUR = "## A 30-second tour of the Python API"
LLM = "### LLMs: export, lower, decode, generate text"
QUANTIZED = "## Quantized programs"
TESTS = "### Tests"


@pytest.mark.parametrize("heading", [TOUR, "### Inside your own ExecuTorch flow"])
def test_readme_snippet_runs_in_a_fresh_process(heading, tmp_path):
    proc = run_recipe(heading, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "partition report" in proc.stdout
    if heading == TOUR:
        # Only et_tensorrt speaks: the third-party noise its imports and calls trigger is held back (_quiet.py).
        assert [line for line in proc.stderr.splitlines() if not line.startswith("et_tensorrt: ")] == []


def test_readme_llm_recipe_generates_text_through_runner_textllmrunner_and_the_cli(tmp_path, run_cli):
    """The recipe's greedy Runner loop over prefill/decode and TextLLMRunner over one forward write the same text
    (one model, two exports); then its command line generates from the file it wrote."""
    proc = run_recipe(LLM, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert printed(proc.stdout, "Runner: ") == printed(proc.stdout, "TextLLMRunner: ")
    assert "MethodPlan(method=decode" in proc.stdout
    (generate,) = commands("README.md", LLM)
    result = run_cli(*generate, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat") and " generated in " in result.stdout


def test_readme_quantized_recipe_runs_on_this_cpu_machine_and_writes_the_gpu_file(tmp_path, run_cli):
    """The ``weights="both"`` file runs here (the fallback, the quantized model's arithmetic); the engine-only file
    is smaller and refuses to load here, saying where it runs, as the README says."""
    proc = run_recipe(QUANTIZED, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(printed(proc.stdout, "int8.pte runs: ").split("%")[0]) < 2  # parity.QUANTIZED_SHARE
    both, gpu = (tmp_path / "int8.pte").stat().st_size, (tmp_path / "int8-gpu.pte").stat().st_size
    assert gpu < both
    assert "an engine-only blob" in run_cli("run", "int8-gpu.pte", cwd=tmp_path).error_line


def _setup_requirements() -> tuple[list[str], dict[str, list[str]]]:
    """setup.py's install_requires and extras_require, read as written (the checkout need not be pip-installed)."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    given = {k.arg: k.value for k in call.keywords}
    return ast.literal_eval(given["install_requires"]), ast.literal_eval(given["extras_require"])


def _closure(requirements: list[str], own: tuple[list[str], dict[str, list[str]]]) -> set[str]:
    """The distributions those requirements install, through the installed packages' own requirements (markers
    evaluated for this machine; et_tensorrt's own, with its extras, from setup.py)."""
    seen: set[str] = set()
    todo = [(Requirement(r), ()) for r in requirements]
    while todo:
        req, _ = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name == "et-tensorrt":
            todo += [(Requirement(r), ()) for r in own[0] + [r for e in req.extras for r in own[1][e]]]
            continue
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(req.name) or []:
            dep = Requirement(text)
            extras = set(req.extras) or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append((dep, ()))
    return seen


def _installed_by(lines: list[str]) -> set[str]:
    """The distributions these README shell lines' ``pip install`` commands install (``.`` is et_tensorrt)."""
    named = []
    for line in lines:
        for command in line.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"]:
                named += ["et_tensorrt" + w[1:] if w.startswith(".") else w for w in words[2:] if w[0] != "-"]
    return _closure(named, _setup_requirements())


def test_the_main_job_brings_no_test_tools_the_test_line_does_and_the_readme_says_so():
    """Issue 54, row 8: pytest right after the main job is "No module named pytest". The test line is the one that
    brings pytest and the xdist its ``-n 2`` needs, and the set-up text says so where the main job is."""
    main, tests = _installed_by(install_lines(README, SET_UP)), _installed_by(install_lines(README, TESTS))
    assert "pytest" not in main and {"pytest", "pytest-xdist"} <= tests
    assert all("python -m pytest" in line for line in install_lines(README, TESTS))  # installs, then runs pytest
    assert re.search(r"does not install pytest.*the\s+line under \"Tests\" does", section(README, SET_UP), re.S)


def test_the_install_lines_install_what_the_recipes_import():
    """Issue 44, row 1: every module a README recipe imports comes with the README's install lines (the set-up line
    and each recipe's own, e.g. the LLM recipe's `.[llm]`), not only with the `[test]` extra. .ci/run runs the
    recipes in a new venv made by exactly these lines (scripts/readme_recipes.py)."""
    lines = [line for heading in (SET_UP, *README_RECIPES) for line in install_lines(README, heading)]
    assert any(".[llm]" in line for line in install_lines(README, LLM))
    installed = _installed_by(lines)
    module_dists = metadata.packages_distributions()
    for heading in README_RECIPES:
        tree = ast.parse(python_code(README, heading))
        modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        for module in sorted(modules - set(sys.stdlib_module_names) - {"et_tensorrt"}):
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in module_dists.get(module, [module])}
            assert dists & installed, f"{heading}: imports {module} ({dists}), which the install lines do not install"
