"""One way to open a program for generation, used by the Python API and ``et-tensorrt generate`` alike: the driver
:mod:`.driver_choice` names for it, made."""

from __future__ import annotations

import os

from .driver_choice import METHODS_DRIVER, MULTIMODAL_RUNNER, TEXT_LLM_RUNNER, TRANSCRIBER, driver_kind


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
    from .generation import TextGenerator
    from .methods_driver import MethodsDriver
    from .multimodal_generation import MultimodalGenerator
    from .transcribe import Transcriber

    classes = {TEXT_LLM_RUNNER: TextGenerator, METHODS_DRIVER: MethodsDriver}
    classes.update({MULTIMODAL_RUNNER: MultimodalGenerator, TRANSCRIBER: Transcriber})
    return classes[kind]
