"""Text from an image (or audio) and a prompt with a program of :func:`~et_tensorrt.llm.export_multimodal`, generated
by ExecuTorch's own C++ ``MultimodalRunner`` (``executorch.extension.llm.runner``, the same ``libexecutorch.so`` our
backend is registered in): it prefills each input in order (text through ``token_embedding``, an image through
``vision_encoder``, audio through ``audio_encoder``, each then through ``text_decoder``) and decodes one token a call;
the KV cache stays in the delegate the whole time.

The image or audio goes where the prompt says ``<image>`` (``<audio>``), else before the prompt. A file is prepared by
the model's own image processor or feature extractor, rebuilt from the config the program carries
(:mod:`.media`). As for :class:`~et_tensorrt.llm.TextGenerator`, the runner prints the text from C++ and this reads
what it prints.
"""

from __future__ import annotations

import os

from ...errors import RunnerError
from ..constants import (
    AUDIO_ENCODER,
    FEATURE_EXTRACTOR,
    IMAGE_PROCESSOR,
    REQUIRED_METHODS,
    TEXT_DECODER,
    TOKEN_EMBEDDING,
    VISION_ENCODER,
)
from .outcome import Generation, _check_files
from .program_facts import _constants
from .runner_output import _Captured, _ExecuTorchLog, _failed, _native_generate, _stopped
from .tokenizer_identity import check_tokenizer

MARKERS = {VISION_ENCODER: "<image>", AUDIO_ENCODER: "<audio>"}
_PROCESSORS = {VISION_ENCODER: IMAGE_PROCESSOR, AUDIO_ENCODER: FEATURE_EXTRACTOR}
_WHAT = {VISION_ENCODER: "image", AUDIO_ENCODER: "audio"}


class MultimodalGenerator:
    """``MultimodalRunner`` of one ``.pte`` (:func:`export_multimodal`'s methods) and tokenizer file."""

    def __init__(self, model, tokenizer, data_path=None):
        from ... import load_native
        from ...compile_specs import BACKEND_ID
        from ...format.pte_tables import read_tables

        load_native()
        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        plans = {plan.name: plan for plan in read_tables(pte).plans}
        missing = [n for n in (TOKEN_EMBEDDING, TEXT_DECODER, *REQUIRED_METHODS) if n not in plans]
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not a program MultimodalRunner can drive: it has no method(s) "
                f"{', '.join(missing)}; export it with et_tensorrt.llm.export_multimodal"
            )
        check_tokenizer(pte, model, tokenizer)
        # per encoder: its input's sizes and the tokens its output takes in the cache
        self.encoders = {
            name: (plans[name].values[plans[name].inputs[0]].sizes, plans[name].values[plans[name].outputs[0]].sizes[1])
            for name in MARKERS
            if name in plans
        }
        # our delegate calls per decode step (token_embedding, then text_decoder)
        self._step_delegates = sum(
            d.id == BACKEND_ID for n in (TOKEN_EMBEDDING, TEXT_DECODER) for d in plans[n].delegates
        )
        keys = [_PROCESSORS[name] for name in self.encoders if _PROCESSORS[name] in plans]
        context, *configs = _constants(pte, "get_max_context_len", *keys)
        self.context = int(context[0])
        self._processor_json = dict(zip(keys, (c[0] for c in configs)))
        self._processors = {}
        self._tokenizer = _counting_tokenizer(tokenizer)
        self._position = 0
        with _Captured(2) as log:
            from executorch.extension.llm.runner import MultimodalRunner

            with _ExecuTorchLog() as logged:  # after the import: its Python bindings install their log function
                try:
                    self._runner = MultimodalRunner(
                        os.fspath(model), os.fspath(tokenizer), os.fspath(data_path) if data_path else None
                    )
                    failure = None
                except RuntimeError as exc:
                    failure = exc
        self.log = log.text.decode("utf-8", "replace")
        if failure is not None:
            raise _failed("MultimodalRunner", f"load {os.fspath(model)}", failure, logged.errors)

    def processor(self, encoder: str):
        """The transformers image processor or feature extractor the program's ``encoder`` inputs go through."""
        if encoder not in self._processors:
            from ..media import processor_from_json

            text = self._processor_json.get(_PROCESSORS[encoder])
            if text is None:
                raise RunnerError(
                    f"the program carries no {_PROCESSORS[encoder]} (export it with export_multimodal): give the "
                    f"{_WHAT[encoder]} as the encoder's input tensor"
                )
            self._processors[encoder] = processor_from_json(text)
        return self._processors[encoder]

    def inputs(self, prompt: str, image=None, audio=None) -> tuple[list, int]:
        """(MultimodalRunner's inputs, the cache positions they take or -1 if not counted) for ``prompt`` and the
        media (a file path, or a tensor of the encoder's input)."""
        from executorch.extension.llm.runner import make_audio_input, make_image_input, make_text_input

        from ..media import audio_features, pixel_values

        pieces, positions = [], 0
        for encoder, media in ((VISION_ENCODER, image), (AUDIO_ENCODER, audio)):
            if media is None:
                continue
            if encoder not in self.encoders:
                other = ", ".join(f"--{_WHAT[e]}" for e in self.encoders) or "a text prompt only"
                raise RunnerError(
                    f"this program has no {encoder} method, so it takes no {_WHAT[encoder]}: give {other}"
                )
            sizes, tokens = self.encoders[encoder]
            processor = None if _is_tensor(media) else self.processor(encoder)  # a tensor: the encoder's input
            if encoder == VISION_ENCODER:
                made = [make_image_input(pixel_values(media, processor, sizes)[0])]
            else:
                made = [make_audio_input(window) for window in audio_features(media, processor, sizes)]
            pieces.append((encoder, made))
            positions += tokens * len(made)
        inputs, texts, rest = [], [], prompt
        for encoder, made in pieces:
            before, marker, rest = rest.partition(MARKERS[encoder])
            if not marker:  # no marker: the media first
                before, rest = "", before
            texts += [before] if before else []
            inputs += ([make_text_input(before)] if before else []) + made
        if rest:
            texts.append(rest)
            inputs.append(make_text_input(rest))
        if not inputs:
            raise RunnerError("nothing to generate from: give a prompt, an image or audio")
        if self._tokenizer is None:
            return inputs, -1
        return inputs, positions + sum(len(self._tokenizer.encode(t, add_special_tokens=False).ids) for t in texts)

    def generate(
        self, prompt: str, image=None, audio=None, max_new_tokens: int = 16, temperature: float = 0.0, on_token=None
    ) -> Generation:
        """Continues the sequence (the runner keeps its position; :meth:`reset` starts over). ``image``/``audio``: a
        file path or the encoder's input tensor; ``on_token``: called with each piece of text (bytes) as the runner
        prints it, from another thread."""
        from executorch.extension.llm.runner import GenerationConfig

        inputs, positions = self.inputs(prompt, image, audio)
        if positions >= 0 and self._position + positions >= self.context:
            media = "/".join(_WHAT[e] for e in self.encoders)
            raise RunnerError(
                f"the prompt takes {positions} positions of the cache (text and {media} tokens), {self._position} are "
                f"taken already, and the cache holds {self.context}: shorten the prompt, reset() to start over, or "
                "export with a longer max_seq_len"
            )
        config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature, echo=False)
        text, ended, s, plans, logged = _native_generate(
            self,
            "MultimodalRunner",
            lambda stats: self._runner.generate(inputs, config, stats_callback=stats),
            on_token,
        )
        self._position = s.num_prompt_tokens + s.num_generated_tokens
        k = self._step_delegates
        steps = [plans[i : i + k] for i in range(len(plans) - k * s.num_generated_tokens, len(plans), k)] if k else []
        counted = (
            "the copies the et_tensorrt delegates made (their placement plans) in token_embedding and text_decoder"
        )
        return Generation(
            text.rstrip(b"\n"),
            s.num_prompt_tokens,
            s.num_generated_tokens + 1,  # the prefill's token, then one a decode step
            (s.inference_end_ms - s.inference_start_ms) / 1e3,
            tuple(sum(p.bytes_copied for p in step) for step in steps),
            counted if steps else "",
            tuple(sum(p.state_bytes for p in step) for step in steps),
            stopped=_stopped(logged, ended, max_new_tokens),
            by="MultimodalRunner",
            sampling=f"temperature {temperature}" if temperature else "greedy",
        )

    def reset(self) -> None:
        """The next ``generate`` starts at position 0."""
        self._runner.reset()
        self._position = 0


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _counting_tokenizer(path):
    """A HF ``tokenizer.json`` read by ``tokenizers``, to count a prompt's positions before the runner runs; None for
    the other formats (the runner's own error then says when a prompt does not fit)."""
    if not os.fspath(path).endswith(".json"):
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.fspath(path))
