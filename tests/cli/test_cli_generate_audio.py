"""``generate --audio``: the recipe "Recipe: transcribe a WAV file (Whisper)" of docs/stateful-decode.md executed as
written (a tiny random HF Whisper exported with ``export_encoder_decoder``, a WAV written with ``wave``), then its
command line: the command prints the text the recipe's Transcriber wrote, streamed; bad audio, and a speech program
given no audio, are one error line each naming what to change."""

from __future__ import annotations

import ast
import re

import pytest
from doc_blocks import commands, printed, python_code, run_python

from et_tensorrt.testing import speech as models

pytest.importorskip("tokenizers")

DOC, HEADING = "docs/stateful-decode.md", "### Recipe: transcribe a WAV file (Whisper)"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """(its folder, what it printed)."""
    folder = tmp_path_factory.mktemp("speech")
    proc = run_python(python_code(DOC, HEADING), folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder, proc.stdout


def test_the_recipe_transcribes_through_transcriber_and_the_command(run_cli, recipe):
    folder, stdout = recipe
    assert "owned by et_tensorrt_0" in stdout and "stays ExecuTorch's" not in stdout
    text = printed(stdout, "Transcriber: ").rsplit(" [", 1)[0]  # the text, then the tokens
    logits = int(printed(stdout, "logits: ").split()[0])  # bytes
    steps = ast.literal_eval(printed(stdout, "bytes per decoder step: "))
    assert steps and max(steps) <= 2 * logits + 256, (steps, logits)
    (generate,) = commands(DOC, HEADING)
    result = run_cli(*generate, cwd=folder)
    assert result.status == 0, result.stderr
    assert result.stdout.startswith(text + "\n\n"), (result.stdout, text)
    assert "by et_tensorrt.llm.Transcriber (the encoder once, the decoder a token a call)" in result.stdout
    assert f"bytes moved per decode step: median {2 * logits:,} B" in result.stdout


@pytest.mark.parametrize(
    "audio, message",
    [
        (dict(channels=2), r"has 2 channels: the model takes mono audio at 16000 Hz; mix it down"),
        (None, r"this is a speech program: give it audio .*--audio FILE\.wav"),
    ],
    ids=["stereo", "no-audio"],  # every refusal's message: tests/models/test_speech_seq2seq.py
)
def test_bad_input_is_one_error_line(run_cli, recipe, tmp_path, audio, message):
    folder, _ = recipe
    given = ["--prompt", "hello"]
    if audio is not None:
        given = ["--audio", models.sine_wav(tmp_path / "input.wav", seconds=0.5, **audio)]
    result = run_cli("generate", folder / "whisper.pte", "--tokenizer", folder / "tokenizer.json", *given, cwd=tmp_path)
    assert result.status != 0 and re.search(message, result.error_line), result.stderr
