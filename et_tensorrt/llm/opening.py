"""One way to open a program for generation: which driver runs it, from its flatbuffer's method names alone (no
torch, no ExecuTorch: the command line refuses a file at once), and that driver made. The command line
(``et-tensorrt generate``) and :class:`~et_tensorrt.llm.TextGenerator` both choose here.

* ``TextLLMRunner`` (ExecuTorch's C++ runner, through :class:`~et_tensorrt.llm.TextGenerator`): one ``forward``
  that returns logits;
* ``MethodsDriver``: ``prefill`` and ``decode`` methods, or a program that chooses its token in the engine
  (TextLLMRunner reads float logits only);
* ``MultimodalRunner`` (ExecuTorch's, through :class:`~et_tensorrt.llm.MultimodalGenerator`): ``token_embedding``,
  ``text_decoder`` and an encoder;
* ``Transcriber``: ``encoder`` and ``decoder`` methods with their constant methods.
"""

from __future__ import annotations

import os

from ..errors import RunnerError
from .constants import SAMPLING_METHODS, _method_names, is_multimodal, missing_methods

TEXT_LLM_RUNNER, METHODS_DRIVER, MULTIMODAL_RUNNER, TRANSCRIBER = (
    "TextLLMRunner",
    "MethodsDriver",
    "MultimodalRunner",
    "Transcriber",
)


def driver_kind(pte: bytes, name: str = "the program") -> str:
    """The driver that generates with ``pte`` (the program's bytes; ``name`` names it in errors): one of the four
    kinds above; RunnerError saying what the program lacks and how to export one that has it."""
    names = _method_names(pte)
    if is_multimodal(names):
        missing = missing_methods(pte, ("token_embedding", "text_decoder"))
        if missing:
            raise RunnerError(f"{name} lacks the method(s) {', '.join(missing)} MultimodalRunner reads: export it "
                              "with et_tensorrt.llm.export_multimodal")  # fmt: skip
        return MULTIMODAL_RUNNER
    if {"encoder", "decoder"} <= names:
        from . import speech

        missing = [n for n in speech.SEQ2SEQ_METHODS if n not in names]
        if missing:
            raise RunnerError(
                f"{name} is an encoder-decoder program without the constant method(s) {', '.join(missing)}: export "
                "it with et_tensorrt.llm.export_encoder_decoder and lower what it returns (they come with it)"
            )
        return TRANSCRIBER
    two = {"prefill", "decode"} <= names and "forward" not in names
    missing = missing_methods(pte, ("prefill", "decode") if two else ("forward",))
    if missing:
        raise RunnerError(
            f"{name} is not an LLM program `generate` can run: it has no method(s) {', '.join(missing)} (it has "
            f"{', '.join(sorted(names)) or 'none'}); lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
        )
    return METHODS_DRIVER if two or SAMPLING_METHODS[0] in names else TEXT_LLM_RUNNER


def open_generator(model: str | os.PathLike, tokenizer: str | os.PathLike, data_path: str | os.PathLike | None = None):
    """The driver of the program at ``model`` (:func:`driver_kind`), made with its tokenizer file and ``data_path``
    (its .ptd, where the lowering kept its named data outside). Each has ``generate(prompt, max_new_tokens=...,
    on_token=...)`` and ``reset()``."""
    if not os.path.isfile(model):
        raise FileNotFoundError(f"no program at {os.fspath(model)!r}")
    with open(model, "rb") as f:
        kind = driver_kind(f.read(), os.fspath(model))
    return driver_class(kind)(model, tokenizer, data_path=data_path)


def driver_class(kind: str):
    """The class that drives programs of ``kind``."""
    from . import MethodsDriver, MultimodalGenerator, TextGenerator, Transcriber

    classes = {TEXT_LLM_RUNNER: TextGenerator, METHODS_DRIVER: MethodsDriver}
    classes.update({MULTIMODAL_RUNNER: MultimodalGenerator, TRANSCRIBER: Transcriber})
    return classes[kind]
