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


def test_recurrent_state_recipe_generates_the_same_text_through_runner_and_textllmrunner(tmp_path):
    proc = run_python(python_code(STATEFUL, "## Recurrent state: Mamba, hybrids, short convolutions"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert printed(proc.stdout, "Runner: ") == printed(proc.stdout, "TextLLMRunner: ")
    assert "in place" in proc.stdout and "conv_state_0_0" in proc.stdout


def test_quantization_recipe_runs_on_this_cpu_machine_and_writes_the_gpu_file(tmp_path):
    """The int4 ``weights="both"`` file runs here (the CPU fallback computes the quantized model); the engine-only file
    for the GPU is the smaller."""
    proc = run_python(python_code("docs/quantization.md", "# Quantized programs"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(printed(proc.stdout, "int4.pte runs: ").split("%")[0]) < 2  # parity.QUANTIZED_SHARE
    assert (tmp_path / "int4-gpu.pte").stat().st_size < (tmp_path / "int4.pte").stat().st_size


def test_models_moe_recipe_is_one_engine_per_method_and_generates(tmp_path, run_cli):
    heading = "## Recipe: a mixture of experts"
    proc = run_python(python_code("docs/models.md", heading), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for method in ("prefill", "decode"):
        line = printed(proc.stdout, f"{method} ")
        assert line.startswith("1 partition(s), 0 host node(s):") and "aten.sort.default" in line, line
    (generate,) = commands("docs/models.md", heading)
    result = run_cli(*generate, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat") and " generated in " in result.stdout


def test_next_token_recipe_samples_in_the_engine_the_same_text_in_every_process(tmp_path, run_cli):
    """Issue 46: the sampled prefill/decode program of docs/stateful-decode.md, driven by Runner (each call's token
    fed to the next), by MethodsDriver and by the command line with one seed: one text."""
    from et_tensorrt.testing import decoders

    heading = "## The next token chosen in the engine"
    decoders.byte_level_tokenizer(tmp_path / "tokenizer.json")  # the recipe's tokenizer.json (its first section's)
    proc = run_python(python_code(STATEFUL, heading), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dict_keys(['et_tensorrt_0'])" in proc.stdout
    text = printed(proc.stdout, "MethodsDriver: ")
    assert printed(proc.stdout, "Runner: ") == text
    generate, cooler, greedy = commands(STATEFUL, heading)  # the seed's text, another temperature, the argmax
    result = run_cli(*generate, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat" + text.rstrip("\ufffd")), result.stdout
    assert run_cli(*cooler, cwd=tmp_path).status == 0
    result = run_cli(*greedy, cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith("the cat" + printed(proc.stdout, "greedy: ").rstrip("\ufffd")), result.stdout
