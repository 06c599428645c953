"""Audio for a speech program: a WAV file read with the standard library's ``wave`` (16-, 24-, 32-bit or 8-bit
PCM), checked against what the model takes (one channel, its sampling rate, at most the encoder's length) before
any work, each refusal naming what to change."""

from __future__ import annotations

import os
import wave

import numpy as np

from ..errors import AudioError

_FFMPEG = "ffmpeg -i {src} -ac 1 -ar {rate} -c:a pcm_s16le out.wav"


def read_wav(path: str | os.PathLike) -> tuple[np.ndarray, int, int]:
    """(samples as float32 in [-1, 1], one row per channel, the sampling rate, the channels) of a PCM WAV file."""
    path = os.fspath(path)
    try:
        with wave.open(path, "rb") as f:
            channels, width, rate, frames = f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()
            data = f.readframes(frames)
    except FileNotFoundError:
        raise AudioError(f"no audio file at {path!r}") from None
    except (wave.Error, EOFError) as e:
        reason = str(e) or "truncated"
        if "unknown format" in reason:
            what = f"a WAV file of an encoding Python's wave module does not read ({reason}: float or compressed)"
        else:
            what = f"not a WAV file ({reason})"
        raise AudioError(f"{path} is {what}: give a PCM WAV, e.g. {_FFMPEG.format(src=path, rate='16000')}") from None
    if width not in (1, 2, 3, 4):
        raise AudioError(
            f"{path} has {8 * width}-bit samples: write it as 16-bit PCM ({_FFMPEG.format(src=path, rate=rate)})"
        )
    samples = _pcm(data[: len(data) - len(data) % (width * channels)], width)
    return samples.reshape(-1, channels).T, rate, channels


def _pcm(data: bytes, width: int) -> np.ndarray:
    """Little-endian PCM as float32 in [-1, 1] (8-bit WAV is unsigned, the others signed)."""
    if width == 1:
        return (np.frombuffer(data, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 3:  # no 24-bit dtype: each sample's three bytes on top of an int32, shifted back down
        raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        values = (raw[:, 0] << 8 | raw[:, 1] << 16 | raw[:, 2] << 24) >> 8
        return values.astype(np.float32) / float(1 << 23)
    dtype = {2: "<i2", 4: "<i4"}[width]
    return np.frombuffer(data, dtype=dtype).astype(np.float32) / float(1 << (8 * width - 1))


def load_audio(path: str | os.PathLike, sampling_rate: int, max_samples: int) -> np.ndarray:
    """The mono samples of the WAV at ``path``, refused unless it has one channel, ``sampling_rate`` samples a
    second and at most ``max_samples`` (the longest the encoder takes)."""
    samples, rate, channels = read_wav(path)
    path = os.fspath(path)
    if channels != 1:
        raise AudioError(
            f"{path} has {channels} channels; the model takes mono audio: mix it down to one channel, e.g. "
            f"{_FFMPEG.format(src=path, rate=sampling_rate)}"
        )
    if rate != sampling_rate:
        raise AudioError(
            f"{path} is sampled at {rate} Hz; the model takes {sampling_rate} Hz: resample it, e.g. "
            f"{_FFMPEG.format(src=path, rate=sampling_rate)} (or sox {path} -r {sampling_rate} out.wav)"
        )
    return check_length(samples[0], sampling_rate, max_samples, path)


def check_length(samples: np.ndarray, sampling_rate: int, max_samples: int, what: str = "the audio") -> np.ndarray:
    if samples.size == 0:
        raise AudioError(f"{what} holds no samples")
    if samples.size > max_samples:
        raise AudioError(
            f"{what} is {samples.size / sampling_rate:.2f} s long ({samples.size} samples); the encoder takes at most "
            f"{max_samples / sampling_rate:.2f} s ({max_samples} samples at {sampling_rate} Hz): cut it into pieces "
            f"of at most that, e.g. ffmpeg -i {what} -f segment -segment_time {max_samples // sampling_rate or 1} "
            "part%03d.wav"
        )
    return samples
