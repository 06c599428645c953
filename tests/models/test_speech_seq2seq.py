"""Speech encoder-decoders (HF Whisper and Moonshine, tiny random configs): ``export_encoder_decoder`` makes an
``encoder`` and a ``decoder`` method, each one engine, the decoder's self-attention cache and HF's position counters
in its delegate, the constant methods a driver needs in the program; decoded token by token against eager HF from the
same features, through a Runner of the file; a WAV transcribed through Transcriber; bad audio refused by name."""

from __future__ import annotations

import json
import wave

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.errors import InputShapeError
from et_tensorrt.llm import Transcriber, export_encoder_decoder
from et_tensorrt.llm import constants as names
from et_tensorrt.testing import decoders
from et_tensorrt.testing import speech as models

pytest.importorskip("tokenizers")

TOLERANCE = 1e-4  # fp32 against eager fp32
CACHE = 32


class Lowered:
    """The model (its vocabulary the tokenizer's) exported, saved with its constant methods, and a WAV."""

    def __init__(self, folder, make):
        self.tokenizer = folder / "tokenizer.json"
        self.model = make(decoders.byte_level_tokenizer(self.tokenizer))
        self.logits = 4 * self.model.config.vocab_size  # bytes of one token's logits
        self.exported = export_encoder_decoder(self.model, max_cache_len=CACHE)
        self.path = folder / f"{self.model.config.model_type}.pte"
        et_tensorrt.save(self.path, self.exported)  # its constant methods come with it
        self.reports = dict(et_tensorrt.lower.last_reports)
        self.layers = len(self.model.get_decoder().layers)
        self.wav = models.sine_wav(folder / "sine.wav", seconds=0.5)


@pytest.fixture(scope="module")
def whisper(tmp_path_factory):
    return Lowered(tmp_path_factory.mktemp("whisper"), models.whisper)


@pytest.fixture(scope="module")
def moonshine(tmp_path_factory):
    """One layer each side (Whisper's two check the per-layer states): its waveform encoder makes it the slower."""
    return Lowered(tmp_path_factory.mktemp("moonshine"), lambda vocab: models.moonshine(vocab, layers=1))


@pytest.fixture(params=["whisper", "moonshine"])
def lowered(request):
    return request.getfixturevalue(request.param)


def test_one_engine_per_method_the_decoder_state_in_its_delegate(lowered):
    assert sorted(lowered.reports) == ["decoder", "encoder"]
    for report in lowered.reports.values():
        assert len(report.partitions) == 1 and not report.host_nodes, report.host_nodes
    states = {str(s) for s in lowered.reports["decoder"].states}
    layers = range(lowered.layers)
    expected = [f"{kind}_{i}" for kind in ("key_cache", "value_cache", "cumulative_length") for i in layers]
    assert states == {f"state {name}: owned by et_tensorrt_0" for name in expected}


def test_whisper_program_carries_what_its_driver_needs(whisper):
    constants = whisper.exported.constant_methods
    assert constants[names.DECODER_PROMPT] == [models.START] and constants[names.EOS_IDS] == [models.EOS]
    assert constants[names.ENCODER_INPUT] == "input_features" and constants[names.FIXED_INPUT_LEN] is True
    assert constants[names.SAMPLING_RATE] == 16000 and constants[names.MAX_AUDIO_SAMPLES] == 16000  # 100 frames
    extractor = json.loads(constants[names.FEATURE_EXTRACTOR])
    assert extractor["feature_extractor_type"] == "WhisperFeatureExtractor" and extractor["feature_size"] == 16
    transcriber = Transcriber(whisper.path, whisper.tokenizer)
    assert transcriber.constants[names.MAX_SEQ_LEN] == CACHE and transcriber.sampling_rate == 16000


def test_whisper_features_are_its_own_feature_extractors(whisper):
    from transformers import WhisperFeatureExtractor

    with wave.open(str(whisper.wav)) as f:
        samples = torch.frombuffer(bytearray(f.readframes(f.getnframes())), dtype=torch.int16).float() / 32768
    expected = WhisperFeatureExtractor(feature_size=16)(
        samples.numpy(), sampling_rate=16000, max_length=16000, padding="max_length", return_tensors="pt"
    ).input_features
    got = Transcriber(whisper.path, whisper.tokenizer).features(whisper.wav)
    assert got.shape == (1, 16, 100) and float((got - expected).abs().max()) <= 1e-6


def test_decodes_like_eager_from_the_same_features(lowered):
    """12+ greedy tokens through a Runner of the file, each step's logits within 1e-4 of eager HF's; a step moves
    the logits (at most twice, plus 256 B), the hidden states and cross-attention K/V shared, the cache in place."""
    features = Transcriber(lowered.path, lowered.tokenizer).features(lowered.wav)
    runner = Runner(lowered.path)
    _, steps = models.decode(lowered.model, runner, features, 14, lowered.exported.encoder_input.name)
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
    for step in steps:
        assert step.bytes_moved <= 2 * lowered.logits + 256, step.plans
        (plan,) = step.plans
        assert {s.update for s in plan.states if "cache" in s.name} == {"in place"}
    assert runner.last_plan.bytes_copied <= 2 * lowered.logits + 256  # the method's boundary included


def test_whisper_transcribes_a_wav_as_eager_greedy_decoding(whisper):
    generator = Transcriber(whisper.path, whisper.tokenizer)
    pieces = []
    result = generator.generate(audio=whisper.wav, max_new_tokens=16, on_token=pieces.append)
    features = generator.features(whisper.wav)
    tokens = [models.START]
    for _ in range(16):  # greedy to the end token, as the driver
        tokens.append(int(models.eager_logits(whisper.model, features, tokens, "input_features").argmax()))
        if tokens[-1] == models.EOS:
            break
    assert generator.last_tokens == tokens[1:] and result.generated_tokens == len(tokens) - 1
    from tokenizers import Tokenizer

    text = Tokenizer.from_file(str(whisper.tokenizer)).decode(tokens[1:], skip_special_tokens=True)
    assert result.text == b"".join(pieces) == text.encode()  # streamed: every piece
    assert result.step_bytes and max(result.step_bytes) <= 2 * whisper.logits + 256


def _wav(path, seconds=0.5, rate=16000, channels=1):
    return models.sine_wav(path, seconds=seconds, rate=rate, channels=channels)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: _wav(p, channels=2), r"has 2 channels: the model takes mono audio at 16000 Hz; mix it down"),
        (lambda p: _wav(p, rate=8000), r"sampled at 8000 Hz: the model takes 16000 Hz; resample it \(sox .* -r 16000"),
        (lambda p: _wav(p, seconds=2.0), r"is 2\.00 s long .* the encoder takes at most 1\.00 s .*: cut it"),
        (lambda p: p.write_bytes(b"ID3\x04 not a wav at all") and p, r"is not a PCM wav file .*: convert it"),
    ],
    ids=["stereo", "8kHz", "too-long", "mp3"],
)
def test_bad_audio_is_one_error_naming_what_to_change(whisper, tmp_path, make, message):
    wav = make(tmp_path / "input.wav")
    with pytest.raises(InputShapeError, match=message):
        Transcriber(whisper.path, whisper.tokenizer).transcribe(wav)
