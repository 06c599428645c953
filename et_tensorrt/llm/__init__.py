"""Language models and the other model families ExecuTorch ships on NVIDIA, as programs for et_tensorrt: one
exporter per family (the methods and constant methods ExecuTorch's runners read), over the same partitioner, states
and runtime, and the drivers that generate with them.

* ``constants``: the constant methods ExecuTorch's LLM runners read (:func:`llm_methods`);
* ``causal``: decoder-only LMs with a KV cache (:func:`export_causal_lm`, :func:`export_prefill_decode`);
* ``recurrent``: those whose layers keep conv or SSM states (Mamba, Mamba2, their hybrids, LFM2), which
  ``export_causal_lm`` hands over to (``state_scans``: their recurrences for any number of tokens);
* ``seq2seq``: encoder–decoders, text and speech (:func:`export_encoder_decoder`); ``speech``: their constant methods
  and feature extractors; ``transcribe``: their driver (:class:`Transcriber`);
* ``multimodal``: vision–language and audio LLMs for ExecuTorch's ``MultimodalRunner`` (:func:`export_multimodal`;
  :class:`MultimodalGenerator` drives it, ``multimodal_generation``);
* ``generation``: text from a prompt (:class:`TextGenerator`: ExecuTorch's ``TextLLMRunner``; :class:`MethodsDriver`:
  ``prefill``/``decode`` programs through :class:`et_tensorrt.Runner`);
* ``opening``: which driver generates with a program, chosen from its method names (:func:`open_generator`, what
  ``et-tensorrt generate`` and :class:`TextGenerator` both use);
* ``sampling``: the next token chosen inside the program (:class:`Sampling`, a head any causal exporter adds), and
  ``token_loop``: each call's token fed to the next.

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
    "ExportedLM": "causal",
    "export_causal_lm": "causal",
    "export_prefill_decode": "causal",
    "ExportedSeq2Seq": "seq2seq",
    "export_encoder_decoder": "seq2seq",
    "ExportedMultimodal": "multimodal",
    "export_multimodal": "multimodal",
    "MultimodalGenerator": "multimodal_generation",
    "Transcriber": "transcribe",
    "Generation": "generation",
    "MethodsDriver": "generation",
    "TextGenerator": "generation",
    "Sampling": "sampling",
    "open_generator": "opening",
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
    from .causal import ExportedLM, export_causal_lm, export_prefill_decode
    from .constants import REQUIRED_METHODS, llm_methods, missing_methods
    from .generation import TextGenerator
    from .methods_driver import MethodsDriver
    from .multimodal import ExportedMultimodal, export_multimodal
    from .multimodal_generation import MultimodalGenerator
    from .opening import open_generator
    from .outcome import Generation
    from .sampling import Sampling
    from .seq2seq import ExportedSeq2Seq, export_encoder_decoder
    from .transcribe import Transcriber


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
