"""The README's Python snippets, each executed as written in a fresh interpreter (so the own-flow snippet
cannot lean on an earlier `et_tensorrt.lower` having imported the backend), and the command lines of its recipes
after them, in the same folder."""

from __future__ import annotations

import pytest
from doc_blocks import commands, printed, python_code, run_python

TOUR = "## A 30-second tour of the Python API"
LLM = "### LLMs: export, lower, decode, generate text"
QUANTIZED = "## Quantized programs"


@pytest.mark.parametrize("heading", [TOUR, "### Inside your own ExecuTorch flow"])
def test_readme_snippet_runs_in_a_fresh_process(heading, tmp_path):
    proc = run_python(python_code("README.md", heading), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "partition report" in proc.stdout
    if heading == TOUR:
        # Only et_tensorrt speaks: the third-party noise its imports and calls trigger is held back (_quiet.py).
        assert [line for line in proc.stderr.splitlines() if not line.startswith("et_tensorrt: ")] == []


def test_readme_llm_recipe_generates_text_through_runner_textllmrunner_and_the_cli(tmp_path, run_cli):
    """The recipe's greedy Runner loop over prefill/decode and TextLLMRunner over one forward write the same text
    (one model, two exports); then its command line generates from the file it wrote."""
    proc = run_python(python_code("README.md", LLM), tmp_path)
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
    proc = run_python(python_code("README.md", QUANTIZED), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(printed(proc.stdout, "int8.pte runs: ").split("%")[0]) < 2  # parity.QUANTIZED_SHARE
    both, gpu = (tmp_path / "int8.pte").stat().st_size, (tmp_path / "int8-gpu.pte").stat().st_size
    assert gpu < both
    assert "an engine-only blob" in run_cli("run", "int8-gpu.pte", cwd=tmp_path).error_line
