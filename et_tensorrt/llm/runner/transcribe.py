"""Text from an encoder–decoder program (:func:`~et_tensorrt.llm.export_encoder_decoder`): a speech model's
transcript of a WAV file, or a text model's output for a prompt, decoded greedily (or sampled) to an end token,
streamed as it comes, through :class:`et_tensorrt.Runner`.

The program says what it needs in its constant methods (``et_tensorrt.llm.constants``): the encoder's input, the
feature extractor audio goes through (transformers' own, rebuilt from the config the program carries: nothing is
downloaded), the sampling rate and the longest audio, the decoder's first tokens, its end tokens and length. The
encoder runs once per input and returns the decoder's cross-attention keys and values with the hidden states; each
decoder call then takes one token and them (shared, not copied: the delegate's plan says so), the self-attention
cache staying in the delegate.
"""

from __future__ import annotations

import os
import time

from ...errors import InputShapeError, RunnerError
from .. import constants
from .outcome import STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS, Generation, _check_files
from .program_facts import _constants


class _Text:
    """Pieces of text (bytes) as tokens come: the tokenizer's decoding of all tokens so far (special tokens
    skipped), less what was already given; held back while it ends in a partial UTF-8 character."""

    def __init__(self, tokenizer):
        self._tokenizer, self._ids, self._shown = tokenizer, [], ""

    def add(self, token: int) -> bytes:
        self._ids.append(token)
        return self.piece(final=False)

    def piece(self, final: bool = True) -> bytes:
        """What was not given yet (``final``: also a trailing partial character, as the replacement character)."""
        text = self.text()
        if not text.startswith(self._shown) or (not final and text.endswith("\ufffd")):
            return b""
        piece, self._shown = text[len(self._shown) :], text
        return piece.encode()

    def text(self) -> str:
        return self._tokenizer.decode(self._ids, skip_special_tokens=True)


def _check_length(samples: int, rate: int, shortest: int, longest: int, what: str) -> None:
    if samples > longest:
        seconds = longest / rate
        raise InputShapeError(
            f"{what} is {samples / rate:.2f} s long ({samples} samples); the encoder takes at most {seconds:.2f} s "
            f"({longest} samples at {rate} Hz): cut it into pieces of at most that (sox in.wav part.wav trim 0 "
            f"{seconds:g} : newfile : restart)"
        )
    if samples < shortest:
        raise InputShapeError(
            f"{what} is {samples} samples long; the encoder takes at least {shortest} ({shortest / rate:.3f} s at "
            f"{rate} Hz): pad it with silence"
        )


def _next_token(logits, temperature: float = 0.0) -> int:
    """The token after the last position of ``logits``: the likeliest (``temperature`` 0), else drawn from their
    softmax at ``temperature``."""
    import torch

    last = logits.reshape(-1, logits.shape[-1])[-1].float()
    if temperature > 0:
        return int(torch.multinomial(torch.softmax(last / temperature, -1), 1))
    return int(last.argmax())


class Transcriber:
    """Drives an ``encoder``/``decoder`` program and its tokenizer (a HF ``tokenizer.json``: a Whisper checkpoint
    ships one). ``transcribe(audio)`` for a speech program, ``generate(prompt)`` for a text one."""

    def __init__(self, model, tokenizer, data_path=None):
        from tokenizers import Tokenizer

        from ...runtime.runner import Runner
        from ..constants import _method_names

        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        names = _method_names(pte)
        missing = [n for n in ("encoder", "decoder", *constants.SEQ2SEQ_METHODS) if n not in names]
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an encoder-decoder program: it has no method(s) {', '.join(missing)}; "
                "export it with et_tensorrt.llm.export_encoder_decoder and lower what it returns"
            )
        self.speech = all(n in names for n in constants.SPEECH_METHODS)
        wanted = constants.SEQ2SEQ_METHODS + (constants.SPEECH_METHODS if self.speech else ())
        lists = (constants.EOS_IDS, constants.DECODER_PROMPT)
        self.constants = {n: list(v) if n in lists else v[0] for n, v in zip(wanted, _constants(pte, *wanted))}
        self._tokenizer = Tokenizer.from_file(os.fspath(tokenizer))
        self._runner = Runner(model, data_path=data_path)  # mapped from the file
        for method in ("encoder", "decoder"):  # loaded now, as MethodsDriver's are: a transcript's time is its calls'
            self._runner.load_method(method)
        self._extractor = None
        self.last_tokens: list[int] = []
        self.log = ""

    @property
    def sampling_rate(self) -> int:
        return int(self.constants[constants.SAMPLING_RATE]) if self.speech else 0

    def features(self, audio):
        """The encoder's input for ``audio``: a WAV file's path, or mono samples (floats in [-1, 1]) at the
        program's sampling rate; computed by the program's own feature extractor."""
        import numpy as np
        import torch

        from ..media import mono_wav

        if not self.speech:
            raise RunnerError("this program's encoder takes text, not audio: generate(prompt) instead")
        c = self.constants
        rate = self.sampling_rate
        if isinstance(audio, (str, os.PathLike)):
            samples, what = mono_wav(audio, rate), os.fspath(audio)
        else:
            samples = np.asarray(audio.numpy() if isinstance(audio, torch.Tensor) else audio, dtype=np.float32)
            if samples.ndim != 1 or samples.size == 0:
                raise InputShapeError(f"the audio has shape {samples.shape}: give mono samples, one dimension")
            what = "the audio"
        longest = int(c[constants.MAX_AUDIO_SAMPLES])
        _check_length(samples.size, rate, int(c[constants.MIN_AUDIO_SAMPLES]), longest, what)
        padding = {"padding": "max_length", "max_length": longest} if c[constants.FIXED_INPUT_LEN] else {}
        values = self._feature_extractor()(samples, sampling_rate=rate, return_tensors="pt", **padding)
        return values[c[constants.ENCODER_INPUT]].to(torch.float32).contiguous()

    def _feature_extractor(self):
        if self._extractor is None:
            from ..media import processor_from_json

            self._extractor = processor_from_json(self.constants[constants.FEATURE_EXTRACTOR])
        return self._extractor

    def transcribe(self, audio, max_new_tokens: int | None = None, temperature: float = 0.0, on_token=None):
        """The text of ``audio`` (a WAV file's path, or mono samples at :attr:`sampling_rate`), as a
        :class:`Generation`; ``on_token`` is called with each piece of text (bytes) as it is decoded."""
        return self.decode(self.features(audio), max_new_tokens, temperature, on_token)

    def generate(
        self, prompt: str = "", max_new_tokens: int | None = None, temperature: float = 0.0, on_token=None, audio=None
    ) -> Generation:
        """The drivers' common call (:class:`TextGenerator`'s): the text for ``prompt`` (a text encoder's input) or
        for ``audio``."""
        import torch

        if self.speech or audio is not None:
            if audio is None:
                raise RunnerError("this is a speech program: give it audio (generate(audio=...), --audio FILE.wav)")
            return self.transcribe(audio, max_new_tokens, temperature, on_token)
        ids = self._tokenizer.encode(prompt).ids
        if not ids:
            raise RunnerError("the prompt encodes to no token")
        longest = int(self.constants[constants.MAX_INPUT_LEN])
        if len(ids) > longest:
            raise RunnerError(f"the prompt is {len(ids)} tokens; the encoder takes at most {longest}")
        return self.decode(torch.tensor([ids], dtype=torch.long), max_new_tokens, temperature, on_token)

    def decode(self, encoder_input, max_new_tokens: int | None = None, temperature: float = 0.0, on_token=None):
        """Runs the encoder on ``encoder_input`` once, then the decoder from the program's decoder prompt, one token
        a call, to an end token, ``max_new_tokens`` or the decoder's last position."""

        c = self.constants
        prompt, eos = [int(t) for t in c[constants.DECODER_PROMPT]], {int(t) for t in c[constants.EOS_IDS]}
        room = int(c[constants.MAX_SEQ_LEN]) - len(prompt) + 1  # the last prompt token's call yields the first
        limit = room if max_new_tokens is None else min(max_new_tokens, room)
        began = time.perf_counter()
        hidden, *cross = self._runner.run([encoder_input], method="encoder")
        text, tokens, steps, generated = _Text(self._tokenizer), [], [], 0
        logits = None
        for position, token in enumerate(prompt):
            logits = self._step(token, position, hidden, cross)
        position = len(prompt)
        while generated < limit:
            token = _next_token(logits, temperature)
            generated += 1
            tokens.append(token)
            if token in eos:
                break
            piece = text.add(token)
            if piece and on_token is not None:
                on_token(piece)
            if generated == limit:
                break
            logits = self._step(token, position, hidden, cross)
            steps.append(self._runner.last_plan.bytes_copied)
            position += 1
        rest = text.piece()
        if rest and on_token is not None:
            on_token(rest)
        self.last_tokens = tokens
        counted = "every copy of the decoder call, the method boundary's included (Runner's placement plan)"
        seconds = time.perf_counter() - began
        asked = room if max_new_tokens is None else max_new_tokens
        stopped = STOP_EOS if tokens and tokens[-1] in eos else STOP_CONTEXT if limit < asked else STOP_MAX_NEW_TOKENS
        return Generation(
            text.text().encode(), len(prompt), generated, seconds, tuple(steps), counted if steps else "",
            stopped=stopped, by="et_tensorrt.llm.Transcriber (the encoder once, the decoder a token a call)",
            sampling=f"temperature {temperature}" if temperature else "greedy",
        )  # fmt: skip

    def _step(self, token: int, position: int, hidden, cross):
        import torch

        args = [torch.tensor([[token]], dtype=torch.long), hidden, torch.tensor([position], dtype=torch.long), *cross]
        return self._runner.run(args, method="decoder")[0]

    def reset(self) -> None:
        """Nothing carries over between inputs (each starts at position 0): the drivers' common interface."""
