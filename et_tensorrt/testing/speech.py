"""Speech encoder–decoders with tiny random configs (nothing downloaded), WAV files made with the standard library,
and a decoder run token by token against eager HF transformers.

* ``whisper()``, ``speech2text()``, ``moonshine(layers)``: the HF model (2 + 2 layers, d_model 64);
* ``sine_wav(path, seconds, rate, channels)``: a WAV file of a sine (``wave``);
* ``decode(model, runner, features, steps)``: the ``encoder`` method once, then ``steps`` greedy ``decoder`` calls
  through :class:`et_tensorrt.Runner`, each step's logits against the eager model's for the same tokens.
"""

from __future__ import annotations

import math
import wave
from collections.abc import Sequence

import numpy as np
import torch

from .decoders import Step

START, EOS = 0, 1  # byte_level_tokenizer's <s> and </s>


def _common(vocab: int) -> dict:
    return dict(vocab_size=vocab, decoder_start_token_id=START, bos_token_id=START, eos_token_id=EOS, pad_token_id=EOS)


def whisper(vocab: int = 320, mel_bins: int = 16, frames: int = 100):
    """``frames`` log-mel frames (its window: 100 frames is 1 s at Whisper's 16 kHz, 10 ms hop)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(
        d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=mel_bins, max_source_positions=frames // 2,
        max_target_positions=64, begin_suppress_tokens=None, suppress_tokens=None, **_common(vocab),
    )  # fmt: skip
    torch.manual_seed(0)
    return WhisperForConditionalGeneration(config).eval()


def speech2text(vocab: int = 320, mel_bins: int = 16):
    from transformers import Speech2TextConfig, Speech2TextForConditionalGeneration

    config = Speech2TextConfig(
        d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, input_feat_per_channel=mel_bins, conv_channels=32,
        max_source_positions=64, max_target_positions=64, **_common(vocab),
    )  # fmt: skip
    torch.manual_seed(0)
    return Speech2TextForConditionalGeneration(config).eval()


def moonshine(vocab: int = 320, layers: int = 2):
    """``layers`` in the encoder and as many in the decoder."""
    from transformers import MoonshineConfig, MoonshineForConditionalGeneration

    config = MoonshineConfig(
        hidden_size=64, intermediate_size=128, encoder_num_hidden_layers=layers, decoder_num_hidden_layers=layers,
        encoder_num_attention_heads=4, decoder_num_attention_heads=4, max_position_embeddings=64, **_common(vocab),
    )  # fmt: skip
    torch.manual_seed(0)
    return MoonshineForConditionalGeneration(config).eval()


def sine_wav(path, seconds: float = 0.5, rate: int = 16000, channels: int = 1, width: int = 2, hz: float = 440.0):
    """A WAV file of a ``hz`` sine at half scale, ``width`` bytes a sample (PCM)."""
    n = int(seconds * rate)
    wave_ = 0.5 * np.sin(2 * math.pi * hz * np.arange(n) / rate)
    scale = float(1 << (8 * width - 1)) - 1
    pcm = np.repeat((wave_ * scale).astype({1: "<i2", 2: "<i2", 4: "<i4"}[width]), channels)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(width)
        f.setframerate(rate)
        f.writeframes(pcm.tobytes() if width != 1 else (pcm // 256 + 128).astype(np.uint8).tobytes())
    return path


def eager_logits(model, encoder_input, tokens: Sequence[int], input_name: str) -> torch.Tensor:
    """The eager model's logits for the next token after ``tokens`` (the decoder's input so far), from
    ``encoder_input``: HF's own forward, no cache."""
    with torch.no_grad():
        out = model(**{input_name: encoder_input}, decoder_input_ids=torch.tensor([list(tokens)]))
    return out.logits[0, -1]


def decode(model, runner, encoder_input, steps: int, input_name: str) -> tuple[list[int], list[Step]]:
    """(the greedy tokens, one Step per decoder call): the ``encoder`` method once, then the ``decoder`` from the
    start token, end tokens not stopping it; each call's logits against :func:`eager_logits` of the same tokens."""
    hidden, *cross = runner.run([encoder_input], method="encoder")
    tokens, out = [model.config.decoder_start_token_id], []
    for position in range(steps):
        args = [torch.tensor([[tokens[-1]]]), hidden, torch.tensor([position]), *cross]
        got = runner.run(args, method="decoder")[0].reshape(-1)
        expected = eager_logits(model, encoder_input, tokens, input_name)
        plans = runner.last_plans
        out.append(
            Step(
                tokens=1,
                max_error=float((got - expected).abs().max()),
                bytes_moved=sum(p.bytes_copied for p in plans),
                state_bytes=sum(s.bytes for p in plans for s in p.states),
                plans=plans,
            )
        )
        tokens.append(int(expected.argmax()))
    return tokens[1:], out
