"""Every LLM front door says why generation cannot go on, or why it stopped, in one line (issue 45, row 7): an
empty prompt, a prompt the cache cannot hold, a full context. ExecuTorch's TextLLMRunner (one ``forward``) logs its
reason without a level through its Python bindings; TextGenerator reads it at its level (_C.ExecuTorchLogCapture)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from artifacts import LLAMA_CONTEXT as CONTEXT

from et_tensorrt.errors import RunnerError
from et_tensorrt.llm import MethodsDriver, TextGenerator
from et_tensorrt.llm.runner.outcome import STOP_CONTEXT, STOP_MAX_NEW_TOKENS

pytest.importorskip("tokenizers")
LONG = "the cat sat on the mat. " * 12  # more tokens than the cache holds


@pytest.fixture(scope="module")
def programs(tiny_llama_artifact):
    """(tokenizer, {"forward": one-method .pte (TextLLMRunner), "two": prefill + decode .pte (MethodsDriver)}): a tiny
    HF Llama whose end-of-sequence id it cannot emit (a generation ends at max_new_tokens or the end of the context),
    lowered once per session (tests/artifacts.py; tests/reliability/test_reliability_guards.py refuses inputs with
    it)."""
    folder = tiny_llama_artifact.folder
    return folder / "tokenizer.json", {"forward": folder / "forward.pte", "two": folder / "two.pte"}


@pytest.fixture(params=["forward", "two"])
def generator(request, programs):
    tokenizer, paths = programs
    made = TextGenerator(paths[request.param], tokenizer)
    assert isinstance(made, MethodsDriver) == (request.param == "two")
    return made


def _refused(generator, prompt: str) -> str:
    with pytest.raises(RunnerError) as err:
        generator.generate(prompt, max_new_tokens=4)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_an_empty_prompt(generator):
    assert _refused(generator, "") == "cannot generate: the prompt is empty (it encodes to no token): give text to " + (
        "continue"
    )


def test_a_prompt_the_cache_cannot_hold(generator):
    message = _refused(generator, LONG)
    assert message.startswith("cannot generate: the prompt is ")
    assert f"tokens and the program's cache holds {CONTEXT} (get_max_context_len): shorten the prompt" in message


def test_a_full_context_then_why_it_stopped(generator):
    first = generator.generate("the cat", max_new_tokens=2)
    assert first.stopped == STOP_MAX_NEW_TOKENS
    rest = generator.generate(" sat", max_new_tokens=100)  # runs to the end of the cache
    assert rest.stopped == STOP_CONTEXT, rest
    assert "cannot generate: the context is full: " in _refused(generator, " on the mat")
    generator.reset()
    assert generator.generate("the cat", max_new_tokens=2).text == first.text


def test_the_command_line_says_it_in_one_line(programs):
    tokenizer, paths = programs
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "et_tensorrt", "generate", paths["forward"], "--tokenizer", tokenizer, "--prompt", LONG],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode != 0 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("error: cannot generate: the prompt is "), errors
