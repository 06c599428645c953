"""``et-tensorrt generate --image``: ExecuTorch's MultimodalRunner runs a vision-language program (a tiny HF LLaVA
exported by export_multimodal): the image file through the model's own image processor (its config carried by the
program), the same text as HF's eager model; bad input is one error line."""

from __future__ import annotations

import numpy as np
import pytest

from et_tensorrt.testing import multimodal_models as models

pytest.importorskip("tokenizers")
PIL = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def llava(multimodal_artifact, tmp_path_factory):
    """(a folder of llava.pte, tokenizer.json and an image, the model, its export): the LLaVA program of
    tests/models/test_multimodal_runner.py, lowered once per session (tests/artifacts.py)."""
    lowered = multimodal_artifact("llava")
    folder = lowered.copy_to(tmp_path_factory.mktemp("llava"))  # the tests write their bad media beside it
    model = models.llava(lowered.value.vocab)  # the lowered model's weights (seeded)
    image = folder / "cat.jpg"
    PIL.fromarray(np.random.default_rng(2).integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(image)
    return folder, model, lowered.value, image


def test_generate_image_is_eager_text(llava, run_cli):
    folder, model, exported, image = llava
    result = run_cli(
        "generate", "llava.pte", "--tokenizer", "tokenizer.json", "--image", image.name,
        "--prompt", "the cat<image> sat on", "--max-new-tokens", 6, cwd=folder,
    )  # fmt: skip
    assert result.status == 0 and result.noise == [], result.stderr
    pixels = exported.processor(images=[PIL.open(image).convert("RGB")], return_tensors="pt")["pixel_values"]
    text, count = models.eager_text(model, folder / "tokenizer.json", "the cat", pixels, 16, " sat on", 6)
    assert result.stdout.startswith("the cat<image> sat on" + text.decode()), result.stdout
    assert f"{count} generated in" in result.stdout and "by MultimodalRunner" in result.stdout


def test_generate_bad_media_is_one_error(llava, run_cli):
    folder, *_ = llava
    (folder / "notes.txt").write_text("not an image")
    common = ("generate", "llava.pte", "--tokenizer", "tokenizer.json", "--prompt", "the cat")
    result = run_cli(*common, "--image", "notes.txt", cwd=folder)
    assert result.status != 0 and "notes.txt is not an image Pillow can read" in result.error_line
    (folder / "tone.wav").write_bytes(b"RIFF")
    result = run_cli(*common, "--audio", "tone.wav", cwd=folder)
    assert "this program has no audio_encoder method, so it takes no audio: give --image" in result.error_line
