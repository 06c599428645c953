"""Decoder-only causal LMs exported with their KV cache: a HF transformers causal LM (its static cache, through
``TorchExportableModuleForDecoderOnlyLM``; one with conv or SSM states through llm/export/recurrent.py) or ExecuTorch's
llama ``Transformer`` (``use_kv_cache``), as one ``forward`` method or as ``prefill`` and ``decode`` methods sharing
the cache in the delegate."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..._quiet import quiet
from ..constants import carry, llm_methods
from ..sampling import Sampling, sampling_methods
from .sampling_head import export_sampled


@quiet  # torch.export's dynamo warnings on HF models (_quiet.py)
def export_prefill_decode(model, max_seq_len: int | None = None, sampling=None) -> dict:
    """``{"prefill": ..., "decode": ...}`` ExportedPrograms of one causal LM, as ExecuTorch's CUDA backend and
    optimum-executorch export LLMs: ``prefill`` takes 1 .. max_seq_len - 1 tokens (a dynamic length), ``decode`` one.
    Lowered together (``et_tensorrt.lower(methods, constant_methods=llm_methods(...))``) both bind one KV cache in the
    delegate and run one engine (docs/stateful-decode.md, "Several methods").

    ``model``: a HF transformers causal LM (``LlamaForCausalLM(config)`` or ``from_pretrained(folder)``; exported
    with its static cache of ``max_seq_len``, default its ``max_position_embeddings``, through
    ``TorchExportableModuleForDecoderOnlyLM``) or ExecuTorch's llama ``Transformer`` built with ``use_kv_cache`` and
    ``enable_dynamic_shape`` (examples/models/llama; ``max_seq_len`` is its own). ``sampling``: as
    :func:`export_causal_lm`'s, which also makes the constant methods that say so (``llm_methods(...)`` and
    ``sampling.sampling_methods(...)``: the drivers need both)."""
    export, _, vocab, dynamic = _exporter(model, max_seq_len)
    if not dynamic:
        raise TypeError(
            "export_prefill_decode takes a HF transformers causal LM or ExecuTorch's llama Transformer built with "
            "use_kv_cache=True and enable_dynamic_shape=True"
        )
    return _prefill_decode(export, Sampling.of(sampling, vocab))


@dataclass
class ExportedLM:
    """What :func:`export_causal_lm` made: lower it with ``et_tensorrt.save(path, lm.programs,
    constant_methods=lm.constant_methods)``."""

    programs: Any  # one ExportedProgram ("forward") or {"prefill": ..., "decode": ...}
    constant_methods: dict  # llm_methods(...): what TextLLMRunner and TextGenerator read
    max_seq_len: int
    vocab_size: int
    sampling: Sampling | None = None  # how the methods choose their token (None: they return logits)


@quiet  # torch.export's dynamo warnings on HF models (_quiet.py)
def export_causal_lm(
    model,
    *,
    max_seq_len: int | None = None,
    methods: str = "forward",
    bos_id: int | None = None,
    eos_ids: Sequence[int] | None = None,
    sampling=None,
) -> ExportedLM:
    """One causal LM, exported with its KV cache for ``et_tensorrt.lower``/``save``, and the constant methods
    ExecuTorch's LLM runners read (:func:`llm_methods`), in one call.

    ``model``: a HF transformers causal LM (``LlamaForCausalLM(config)``), the path of a local HF checkpoint
    directory (``config.json`` and weights: loaded with ``AutoModelForCausalLM.from_pretrained``, never downloaded),
    or ExecuTorch's llama ``Transformer`` built with ``use_kv_cache=True`` (examples/models/llama). A HF model whose
    layers keep conv or SSM states (Mamba, Mamba2, their attention hybrids such as Bamba or FalconH1, LFM2) is
    exported by llm/export/recurrent.py, its states in the delegate as a KV cache is; a model neither exporter takes is
    one TypeError saying what to do instead.

    ``methods``: ``"forward"``, one method taking 1 .. max_seq_len - 1 tokens and their positions (ExecuTorch's
    ``TextLLMRunner`` calls it; ExecuTorch's llama without ``enable_dynamic_shape`` takes one token a call), or
    ``"prefill_decode"``, the two methods of :func:`export_prefill_decode` (``TextGenerator`` drives them through
    ``Runner``). ``max_seq_len``: the KV cache's length, default the HF config's ``max_position_embeddings`` (pass
    it for a real checkpoint: the cache takes that many positions of memory; a model without it, such as Mamba,
    2048); ExecuTorch's llama has its own.
    ``bos_id``/``eos_ids``: default the HF config's ``bos_token_id``/``eos_token_id``; required for ExecuTorch's
    llama (its tokenizer's).

    ``sampling``: None (default), every method returns the logits; ``"greedy"`` or a
    :class:`~et_tensorrt.llm.sampling.Sampling` (``temperature``, ``top_k``, ``top_p``; ``logits=True`` returns the
    logits too), every method returns the chosen token, int64 ``[1, 1]`` (the next call's ``tokens``), chosen inside
    the engine (:mod:`et_tensorrt.llm.sampling`); sampled methods take two more inputs, ``seed`` and ``counter``
    (int64 ``[1]``: the draw). The constant methods then say how (``get_sampling_*``), and the drivers
    (``TextGenerator``, ``MethodsDriver``, ``et-tensorrt generate``) feed each token to the next call as it is.
    ExecuTorch's TextLLMRunner reads float logits only: such a program is driven by ``MethodsDriver``."""
    if methods not in ("forward", "prefill_decode"):
        raise ValueError(f"methods is 'forward' or 'prefill_decode', not {methods!r}")
    head = Sampling.of(sampling)  # checked before any work
    if isinstance(model, (str, os.PathLike)):
        model = _from_checkpoint(model)
    if _is_hf(model):
        bos_id = model.config.bos_token_id if bos_id is None else bos_id
        eos_ids = model.config.eos_token_id if eos_ids is None else eos_ids
    elif max_seq_len not in (None, _llama_params(model).max_seq_len):
        raise ValueError(
            f"ExecuTorch's llama Transformer has its own max_seq_len ({model.params.max_seq_len}, its ModelArgs): "
            f"build it with max_seq_len={max_seq_len} instead"
        )
    export, length, vocab, dynamic = _exporter(model, max_seq_len)
    if bos_id is None or eos_ids is None:
        raise ValueError("export_causal_lm needs bos_id= and eos_ids= (the tokenizer's): the model does not name them")
    eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids)
    head = Sampling.of(head, vocab)
    if methods == "prefill_decode":
        if not dynamic:
            raise ValueError(
                "methods='prefill_decode' needs ExecuTorch's llama built with enable_dynamic_shape=True (prefill takes "
                "the prompt in one call); or export it with methods='forward'"
            )
        programs = _prefill_decode(export, head)
    else:
        programs = _export(export, 2, True, head) if dynamic else _export(export, 1, False, head)
    constants = llm_methods(
        max_seq_len=length, vocab_size=vocab, bos_id=bos_id, eos_ids=eos_ids, enable_dynamic_shape=dynamic
    )
    if head is not None:
        constants.update(sampling_methods(head))
    carry(programs, constants)  # so that a torch.export.save file says them too (`et-tensorrt lower` reads them)
    return ExportedLM(programs, constants, length, vocab, head)


def _exporter(model, max_seq_len: int | None):
    """(``export(n, dynamic)``, the cache's length, the vocabulary size, whether the token count may vary) of a HF
    causal LM (its static cache of ``max_seq_len``, default its ``max_position_embeddings``; a model with conv or SSM
    states through llm/export/recurrent.py) or ExecuTorch's llama (its own length)."""
    if _is_hf(model):
        from . import recurrent

        config = model.config.get_text_config(decoder=True)
        length = max_seq_len or getattr(config, "max_position_embeddings", None)
        if recurrent.recurrent_layer_types(model):
            why = recurrent.unsupported_reason(model)
            if why:
                raise TypeError(f"export_causal_lm cannot export {type(model).__name__}: {why}; {_OTHERWISE}")
            length = length or recurrent.DEFAULT_LENGTH
            return recurrent.RecurrentStateExport(model, length), length, config.vocab_size, True
        if getattr(config, "num_attention_heads", None) is None or length is None:
            raise TypeError(
                f"export_causal_lm cannot export {type(model).__name__} (model_type {config.model_type!r}): it takes "
                "decoder-only LMs whose state is a KV cache (attention layers: num_attention_heads, "
                "max_position_embeddings) or conv / SSM states (Mamba, Mamba2 and their attention hybrids, LFM2), and "
                f"this config has neither; {_OTHERWISE}"
            )
        return HFStaticCacheExport(model, length), length, config.vocab_size, True
    params = _llama_params(model)
    return LlamaExport(model), params.max_seq_len, params.vocab_size, params.enable_dynamic_shape


_OTHERWISE = (
    "export the model with torch.export yourself and lower it with et_tensorrt.lower (its mutated buffers become "
    "delegate states), or use et_tensorrt.llm.export_encoder_decoder for an encoder-decoder"
)


def _prefill_decode(export, head: Sampling | None = None) -> dict:
    return {"prefill": _export(export, 2, True, head), "decode": _export(export, 1, False, head)}


def _export(export, n: int, dynamic: bool, head: Sampling | None):
    """``export(n, dynamic)``, under the sampling ``head`` when one is given (an exporter without a ``head``
    parameter, such as the recurrent one, is asked for logits only)."""
    return export(n, dynamic) if head is None else export(n, dynamic, head)


def _is_hf(model) -> bool:
    return hasattr(model, "generation_config") and hasattr(model, "config")


def _from_checkpoint(path):
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"no HF checkpoint directory at {os.fspath(path)!r} (no config.json): give a folder saved with "
            "save_pretrained (nothing is downloaded), or the model itself"
        )
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()


def _llama_params(model):
    params = getattr(model, "params", None)
    if params is None or not getattr(params, "use_kv_cache", False):
        raise TypeError(
            "takes a HF transformers causal LM (or its checkpoint directory) or ExecuTorch's llama Transformer built "
            "with use_kv_cache=True"
        )
    return params


class HFStaticCacheExport:
    """``self(n, dynamic, head=None)``: the HF causal LM with its static cache of ``length`` positions, exported from
    ``n`` example tokens, their number dynamic (1 .. length - 1) or not, through
    ``TorchExportableModuleForDecoderOnlyLM`` (``self.module``: what it exports, the eager reference); with a
    :class:`~et_tensorrt.llm.sampling.Sampling` ``head``, that module under the sampling head (``self.step``: how
    the head calls it), exported as HF exports it (strict)."""

    def __init__(self, model, length: int):
        import torch
        from transformers import GenerationConfig
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

        model.generation_config = GenerationConfig(
            use_cache=True,
            cache_implementation="static",
            max_length=length,
            cache_config={"batch_size": 1, "max_cache_len": length},
        )
        self.exportable = TorchExportableModuleForDecoderOnlyLM(model.eval())
        # transformers 5's outer forward drops cache_position; the module it exports is the inner one
        self.module = self.exportable.model
        self._seq = torch.export.Dim("seq", min=1, max=length - 1)

    @staticmethod
    def step(module, tokens, positions):
        return module(input_ids=tokens, cache_position=positions)

    def __call__(self, n: int, dynamic: bool, head: Sampling | None = None):
        import torch

        ids, positions = torch.ones((1, n), dtype=torch.long), torch.arange(n)
        if head is None:
            shapes = {"input_ids": {1: self._seq}, "cache_position": {0: self._seq}} if dynamic else None
            return self.exportable.export(input_ids=ids, cache_position=positions, dynamic_shapes=shapes)
        shapes = ({1: self._seq}, {0: self._seq}) if dynamic else None
        return export_sampled(self.module, head, self.step, (ids, positions), shapes, strict=True)


class LlamaExport:
    """``self(n, dynamic, head=None)``: ExecuTorch's llama Transformer (``use_kv_cache``) exported from ``n`` example
    tokens at position 0, their number dynamic (``enable_dynamic_shape``: 1 .. max_seq_len - 1) or not; with a
    sampling ``head``, under it."""

    def __init__(self, model):
        import torch

        self.module = model.eval()
        self._seq = torch.export.Dim("seq", min=1, max=model.params.max_seq_len - 1)

    @staticmethod
    def step(module, tokens, start):
        return module(tokens, {"input_pos": start})

    def __call__(self, n: int, dynamic: bool, head: Sampling | None = None):
        import torch

        tokens, start = torch.ones((1, n), dtype=torch.long), torch.tensor([0], dtype=torch.long)
        if head is None:
            shapes = ({1: self._seq}, {"input_pos": {0: None}}) if dynamic else None
            return torch.export.export(self.module, (tokens, {"input_pos": start}), dynamic_shapes=shapes, strict=False)
        return export_sampled(
            self.module, head, self.step, (tokens, start), ({1: self._seq}, None) if dynamic else None
        )
