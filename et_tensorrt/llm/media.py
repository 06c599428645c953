"""An image or audio file (or tensor) as the input a multimodal (or speech encoder-decoder) program's encoder takes,
prepared by the model's own transformers image processor or feature extractor, rebuilt from the config the program
carries (nothing downloaded). Images are read by Pillow (PNG, JPEG, BMP, GIF, WebP, PPM, ...), wav files by
Python's ``wave`` (16- or 32-bit PCM, mono, the extractor's sampling rate). Every refusal says what to change."""

from __future__ import annotations

import json
import os
import wave
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import InputShapeError, OptionError

PROCESSOR_CLASS = "et_tensorrt_class"


def processor_to_json(processor) -> str:
    """``processor``'s ``to_dict()`` and its class, as JSON (what :func:`processor_from_json` reads)."""
    return json.dumps({**processor.to_dict(), PROCESSOR_CLASS: type(processor).__name__}, sort_keys=True, default=str)


def processor_from_json(text: str):
    """The transformers image processor or feature extractor whose ``to_dict()`` ``text`` is (its class by name)."""
    import transformers

    config = json.loads(text)
    # the class the exporter used (transformers' CLIPImageProcessor is a torchvision one or a Pillow one, by install)
    name = (
        config.pop(PROCESSOR_CLASS, None) or config.get("image_processor_type") or config.get("feature_extractor_type")
    )
    cls = getattr(transformers, name or "", None)
    if cls is None:
        raise OptionError(f"the program's processor is a {name!r}, which this transformers does not have")
    processor = cls.from_dict(config)
    for key, value in config.items():  # what its constructor recomputes (Whisper's n_samples from a float window)
        if isinstance(value, (int, float)) and hasattr(processor, key) and repr(getattr(processor, key)) != repr(value):
            setattr(processor, key, value)
    return processor


def pixel_values(image, processor, expected: Sequence[int]) -> torch.Tensor:
    """``image`` (a file path, a PIL image, or pixel values ``[C, H, W]``/``[1, C, H, W]``) as the float
    ``[1, C, H, W]`` the vision encoder takes (``expected``): a file or PIL image through ``processor``, a tensor as
    it is (already processed)."""
    channels, height, width = expected[-3:]
    if isinstance(image, torch.Tensor):
        values = image
        where = "the pixel values"
    else:
        values = processor(images=[_open_image(image, channels)], return_tensors="pt")["pixel_values"]
        where = f"the image processor's output ({type(processor).__name__})"
    while values.dim() > 4 and values.shape[0] == 1:  # SmolVLM's [batch, images, C, H, W]
        values = values[0]
    if values.dim() == 3:
        values = values.unsqueeze(0)
    if values.dim() != 4 or tuple(values.shape[1:]) != (channels, height, width) or values.shape[0] != 1:
        crops = values.dim() == 4 and values.shape[0] > 1
        raise InputShapeError(
            f"{where} are {'x'.join(map(str, values.shape))}; the vision encoder takes one image of "
            f"{channels}x{height}x{width} (channels x height x width): "
            + (
                "the processor split the image into crops; make it with do_image_splitting=False"
                if crops
                else "give an image file (the model's processor resizes it) or pixel values of that shape"
            )
        )
    if not values.is_floating_point():
        raise InputShapeError(
            f"the pixel values are {values.dtype}: the vision encoder takes float32 (processed values)"
        )
    return values.to(torch.float32).contiguous()


def _open_image(image, channels: int):
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as e:
        raise OptionError("reading an image file needs Pillow (pip install pillow), as the image processors do") from e

    if isinstance(image, Image.Image):
        picture = image
    else:
        path = os.fspath(image)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no image at {path!r}")
        try:
            picture = Image.open(path)
            picture.load()
        except (UnidentifiedImageError, OSError) as e:
            raise InputShapeError(
                f"{path} is not an image Pillow can read ({e}): give a PNG, JPEG, BMP, GIF, WebP or PPM file"
            ) from e
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise InputShapeError(f"the vision encoder takes {channels} channels: give its pixel values as a tensor")
    return picture.convert(mode)  # grayscale, palette or RGBA files as the model's channels


def read_wav(path) -> tuple[np.ndarray, int, int]:
    """(samples as float32 in [-1, 1], channels interleaved, the sampling rate, the channel count) of a PCM wav."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no audio file at {path!r}")
    try:
        with wave.open(path, "rb") as f:
            width, channels, rate, frames = f.getsampwidth(), f.getnchannels(), f.getframerate(), f.getnframes()
            data = f.readframes(frames)
    except (wave.Error, EOFError) as e:
        raise InputShapeError(f"{path} is not a PCM wav file ({e}): convert it (e.g. sox in.mp3 -b 16 out.wav)") from e
    kinds = {1: (np.uint8, 128.0, 128.0), 2: (np.int16, 0.0, 32768.0), 4: (np.int32, 0.0, 2147483648.0)}
    if width not in kinds:
        raise InputShapeError(
            f"{path} has {8 * width}-bit samples: give 8-, 16- or 32-bit PCM (sox in.wav -b 16 out.wav)"
        )
    dtype, offset, scale = kinds[width]
    return (np.frombuffer(data, dtype=dtype).astype(np.float32) - offset) / scale, rate, channels


def mono_wav(path, rate: int) -> np.ndarray:
    """The samples of the wav at ``path``, refused unless it is mono at ``rate`` Hz and holds some."""
    samples, found, channels = read_wav(path)
    if channels != 1:
        raise InputShapeError(
            f"{os.fspath(path)} has {channels} channels: the model takes mono audio at {rate} Hz; mix it down "
            f"(sox in.wav -c 1 out.wav)"
        )
    if found != rate:
        raise InputShapeError(
            f"{os.fspath(path)} is sampled at {found} Hz: the model takes {rate} Hz; resample it "
            f"(sox in.wav -r {rate} out.wav)"
        )
    if samples.size == 0:
        raise InputShapeError(f"{os.fspath(path)} holds no samples")
    return samples


def whisper_feature_extractor(mel_bins: int, frames: int):
    """Whisper's log-mel feature extractor (its checkpoints' settings) for an encoder of ``frames`` frames: its
    window (``n_samples``: 30 s for Whisper's 3,000 frames) what the encoder takes."""
    from transformers import WhisperFeatureExtractor

    extractor = WhisperFeatureExtractor(feature_size=mel_bins)
    extractor.nb_max_frames = frames
    extractor.n_samples = frames * extractor.hop_length
    extractor.chunk_length = extractor.n_samples / extractor.sampling_rate
    return extractor


def audio_features(audio, extractor, expected: Sequence[int]) -> list[torch.Tensor]:
    """``audio`` (a wav path, or features ``[1, mel bins, frames]``) as the audio encoder's inputs (``expected``),
    one per window of the extractor's length (a longer recording is several windows, in order)."""
    bins, frames = expected[-2:]
    if isinstance(audio, torch.Tensor):
        values = audio.unsqueeze(0) if audio.dim() == 2 else audio
        if values.dim() != 3 or tuple(values.shape) != (1, bins, frames):
            raise InputShapeError(
                f"the audio features are {'x'.join(map(str, audio.shape))}; the audio encoder takes 1x{bins}x{frames} "
                "(batch x mel bins x frames): give a wav file (the model's feature extractor makes them) or features "
                "of that shape"
            )
        return [values.to(torch.float32).contiguous()]
    rate = int(extractor.sampling_rate)
    samples = mono_wav(audio, rate)
    window = int(extractor.n_samples)
    out = []
    for start in range(0, samples.size, window):
        features = extractor(samples[start : start + window], sampling_rate=rate, return_tensors="pt")
        values = features["input_features"]
        if tuple(values.shape) != (1, bins, frames):
            raise InputShapeError(
                f"the feature extractor ({type(extractor).__name__}) made {'x'.join(map(str, values.shape))} "
                f"features; the audio encoder takes 1x{bins}x{frames}: export with the extractor the model's "
                "checkpoints use"
            )
        out.append(values.to(torch.float32).contiguous())
    return out
