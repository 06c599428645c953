"""Which driver generates with a program, from its flatbuffer's method names alone (no torch, no ExecuTorch: the
command line refuses a file at once). The command line (``et-tensorrt generate``), :func:`~.opening.open_generator`
and :class:`~et_tensorrt.llm.TextGenerator` all choose here.

* ``TextLLMRunner`` (ExecuTorch's C++ runner, through :class:`~et_tensorrt.llm.TextGenerator`): one ``forward``
  that returns logits;
* ``MethodsDriver``: ``prefill`` and ``decode`` methods, or a program that chooses its token in the engine
  (TextLLMRunner reads float logits only);
* ``MultimodalRunner`` (ExecuTorch's, through :class:`~et_tensorrt.llm.MultimodalGenerator`): ``token_embedding``,
  ``text_decoder`` and an encoder;
* ``Transcriber``: ``encoder`` and ``decoder`` methods with their constant methods.
"""

from __future__ import annotations

from ...errors import RunnerError
from ..constants import SAMPLING_METHODS, _method_names, is_multimodal, missing_methods

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
        from .. import constants

        missing = [n for n in constants.SEQ2SEQ_METHODS if n not in names]
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
