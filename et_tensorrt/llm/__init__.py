"""Language models and the other model families ExecuTorch ships on NVIDIA, as programs for et_tensorrt, shaped as
ExecuTorch's extension/llm is: the exporters in ``export/``, the drivers that generate with their programs in
``runner/``, and what both sides read at the top (docs/architecture.md, "Layers": neither side imports the other).

Shared by both sides:

* ``constants``: the constant methods a program carries and its drivers read (:func:`llm_methods`; the
  encoder–decoder and multimodal ones);
* ``sampling``: the choice of the next token (:class:`Sampling`), one function run by the program's sampling head and
  by the drivers on the host;
* ``media``: how an image or audio becomes the encoder's input, and the processor a program carries as JSON.

``export/``, one exporter per family (the methods and constant methods ExecuTorch's runners read):

* ``causal``: decoder-only LMs with a KV cache (:func:`export_causal_lm`, :func:`export_prefill_decode`);
* ``recurrent``: those whose layers keep conv or SSM states (Mamba, Mamba2, their hybrids, LFM2), which
  ``export_causal_lm`` hands over to (``state_scans``: their recurrences for any number of tokens);
* ``seq2seq``: encoder–decoders, text and speech (:func:`export_encoder_decoder`); ``speech``: their constant
  methods' values and feature extractors;
* ``multimodal``: vision–language and audio LLMs for ExecuTorch's ``MultimodalRunner`` (:func:`export_multimodal`);
* ``sampling_head``: the head that chooses the token in the program, which any causal exporter adds.

``runner/``, the drivers:

* ``opening``: which driver generates with a program, chosen from its method names (:func:`open_generator`, what
  ``et-tensorrt generate`` and :class:`TextGenerator` both use; ``driver_choice``: the rule);
* ``generation``: :class:`TextGenerator` (ExecuTorch's ``TextLLMRunner``); ``methods_driver``: :class:`MethodsDriver`
  (``prefill``/``decode`` programs through :class:`et_tensorrt.Runner`; ``token_loop``: each call's token fed to the
  next); ``transcribe``: :class:`Transcriber`; ``multimodal_generation``: :class:`MultimodalGenerator`;
* ``outcome`` (:class:`Generation`), ``runner_output``, ``program_facts``, ``tokenizer_files``,
  ``tokenizer_identity``: what the drivers share.

Names load with their module on first use: the command line reads :func:`missing_methods` without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# public name -> the module of this package that defines it
_HOME = {
    "REQUIRED_METHODS": "constants",
    "llm_methods": "constants",
    "missing_methods": "constants",
    "ExportedLM": "export.causal",
    "export_causal_lm": "export.causal",
    "export_prefill_decode": "export.causal",
    "ExportedSeq2Seq": "export.seq2seq",
    "export_encoder_decoder": "export.seq2seq",
    "ExportedMultimodal": "export.multimodal",
    "export_multimodal": "export.multimodal",
    "MultimodalGenerator": "runner.multimodal_generation",
    "Transcriber": "runner.transcribe",
    "Generation": "runner.outcome",
    "MethodsDriver": "runner.methods_driver",
    "TextGenerator": "runner.generation",
    "Sampling": "sampling",
    "open_generator": "runner.opening",
}

__all__ = [
    "REQUIRED_METHODS",
    "ExportedLM",
    "ExportedMultimodal",
    "ExportedSeq2Seq",
    "Generation",
    "MethodsDriver",
    "MultimodalGenerator",
    "Sampling",
    "TextGenerator",
    "Transcriber",
    "export_causal_lm",
    "export_encoder_decoder",
    "export_multimodal",
    "export_prefill_decode",
    "llm_methods",
    "missing_methods",
    "open_generator",
]
assert set(__all__) == set(_HOME)

if TYPE_CHECKING:
    from .constants import REQUIRED_METHODS, llm_methods, missing_methods
    from .export.causal import ExportedLM, export_causal_lm, export_prefill_decode
    from .export.multimodal import ExportedMultimodal, export_multimodal
    from .export.seq2seq import ExportedSeq2Seq, export_encoder_decoder
    from .runner.generation import TextGenerator
    from .runner.methods_driver import MethodsDriver
    from .runner.multimodal_generation import MultimodalGenerator
    from .runner.opening import open_generator
    from .runner.outcome import Generation
    from .runner.transcribe import Transcriber
    from .sampling import Sampling


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
