"""Vision–language and audio LLMs (HF LLaVA, Gemma 3, SmolVLM/Idefics3, Voxtral) exported into the methods and constant
methods ExecuTorch's ``MultimodalRunner`` reads (extension/llm/runner: constants.h, multimodal_prefiller.cpp):

* ``vision_encoder`` (float pixel values ``[1, C, H, W]``, made by the model's own image processor) or
  ``audio_encoder`` (log-mel features ``[1, mel bins, frames]``, its feature extractor's) -> the embeddings of the
  image's or audio's tokens ``[1, N, hidden]``, already in the text model's space (vision tower and projector);
* ``token_embedding`` (token ids ``[1, S]``) -> ``[1, S, hidden]``: the text model's embedding (Gemma's scale
  included);
* ``text_decoder`` (embeddings ``[1, S, hidden]`` and their positions ``[S]``) -> the last position's logits
  ``[1, 1, vocab]``; its KV cache a static cache of ``max_seq_len`` positions, a buffer the delegate owns.

The runner prefills each input in order (text through ``token_embedding``, an image through ``vision_encoder``), each
a ``text_decoder`` call, then decodes one token a call (``token_embedding`` then ``text_decoder``). Lowered as one
program, every method is one engine and the cache never leaves the delegate (docs/stateful-decode.md). The program
also carries its image processor's or feature extractor's config (JSON, constant methods below), so a front door
prepares an image or a wav file as the model's checkpoints do, from the ``.pte`` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import OptionError
from ..constants import (
    AUDIO_ENCODER,
    FEATURE_EXTRACTOR,
    IMAGE_PROCESSOR,
    TEXT_DECODER,
    TOKEN_EMBEDDING,
    VISION_ENCODER,
    carry,
    llm_methods,
)

_SPLIT_IMAGES = ("smolvlm", "idefics3")  # image features through vision_model + connector (see _VisionEncoder)


@dataclass
class ExportedMultimodal:
    """What :func:`export_multimodal` made: lower it with ``et_tensorrt.save(path, mm.programs,
    constant_methods=mm.constant_methods)``."""

    programs: dict  # method name -> ExportedProgram (an encoder, token_embedding, text_decoder)
    constant_methods: dict  # llm_methods(...) and the processor's config
    max_seq_len: int
    vocab_size: int
    encoder: str  # VISION_ENCODER or AUDIO_ENCODER
    encoder_tokens: int  # the tokens one image (or audio window) takes in the cache
    processor: Any  # the transformers image processor or feature extractor its inputs go through


class _VisionEncoder(torch.nn.Module):
    """pixel values [1, C, H, W] -> image token embeddings [1, N, hidden]."""

    def __init__(self, model, example):
        super().__init__()
        self.model = model
        self.split_images = model.config.model_type in _SPLIT_IMAGES
        if self.split_images:
            self.embeddings = _FullImageEmbeddings(model.model.vision_model.embeddings, example)

    def forward(self, pixel_values):
        if self.split_images:
            # SmolVLM/Idefics3's get_image_features drops all-zero padding images by a data-dependent index: one real
            # image is its vision model (every patch attended: the positions of a full image) and connector
            inner = self.model.model
            embeddings, inner.vision_model.embeddings = inner.vision_model.embeddings, self.embeddings
            try:
                hidden = inner.vision_model(pixel_values=pixel_values, return_dict=True).last_hidden_state
            finally:
                inner.vision_model.embeddings = embeddings
            features = inner.connector(hidden)
        else:
            features = self.model.get_image_features(pixel_values, return_dict=True).pooler_output
        return _as_tokens(features)


class _FullImageEmbeddings(torch.nn.Module):
    """SmolVLM/Idefics3's patch embeddings of an image whose every patch is real. HF computes the patches' positions
    from the patch mask (with ``bucketize``, which ExecuTorch's edge dialect refuses); for a full image they are
    constants, read once from HF's own forward."""

    def __init__(self, embeddings, example):
        super().__init__()
        self.patch_embedding, self.position_embedding = embeddings.patch_embedding, embeddings.position_embedding
        seen = []
        hook = embeddings.position_embedding.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
        patches = example.shape[-2] // embeddings.patch_size, example.shape[-1] // embeddings.patch_size
        with torch.no_grad():
            embeddings(example, patch_attention_mask=torch.ones((1, *patches), dtype=torch.bool))
        hook.remove()
        self.register_buffer("positions", seen[0].clone(), persistent=False)

    def forward(self, pixel_values, patch_attention_mask=None):
        patches = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        return patches + self.position_embedding(self.positions)


class _AudioEncoder(torch.nn.Module):
    """log-mel features [1, mel bins, frames] -> audio token embeddings [1, N, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features):
        return _as_tokens(self.model.get_audio_features(input_features, return_dict=True).pooler_output)


def _as_tokens(features) -> torch.Tensor:
    """HF's image/audio features (a tensor, or one per image) as the [1, N, hidden] rows they replace, in order."""
    if isinstance(features, (list, tuple)):
        features = torch.cat([f.reshape(-1, f.shape[-1]) for f in features])
    return features.reshape(1, -1, features.shape[-1])


class _TokenEmbedding(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.embedding = model.get_input_embeddings()

    def forward(self, input_ids):
        return self.embedding(input_ids)


def _text_decoder_class():
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    class _TextDecoder(TorchExportableModuleWithStaticCache):
        """HF's exportable static-cache LM (the cache a buffer per layer) over embeddings; the last position's logits
        only (a prefill of an image's hundreds of tokens returns one row of the vocabulary, not one per token).

        HF's export keeps each layer's write position in a counter buffer that every call first sets from the
        positions' start: a state written back each step. Here the counter is a value of the call, made from that
        start: the same positions, and the K/V caches are the only states (updated in place)."""

        def __init__(self, model):
            super().__init__(model)
            for i in range(len(self.static_cache.layers)):
                del self._buffers[f"cumulative_length_{i}"]

        def forward(self, inputs_embeds, cache_position):
            for layer in self.static_cache.layers:
                layer.cumulative_length = cache_position[0].clone()
            out = self.model(inputs_embeds=inputs_embeds, cache=self.static_cache, use_cache=True, logits_to_keep=1)
            return out.logits

    return _TextDecoder


def export_multimodal(
    model,
    *,
    max_seq_len: int | None = None,
    bos_id: int | None = None,
    eos_ids: Sequence[int] | int | None = None,
    processor: Any = None,
) -> ExportedMultimodal:
    """An HF vision–language model (``LlavaForConditionalGeneration``, ``Gemma3ForConditionalGeneration``,
    ``SmolVLMForConditionalGeneration``, ``Idefics3ForConditionalGeneration``: any with ``get_image_features``) or
    audio LLM (``VoxtralForConditionalGeneration``: ``get_audio_features``) as the methods ExecuTorch's
    ``MultimodalRunner`` runs, and the constant methods it reads.

    ``max_seq_len``: the KV cache's positions (prompt, image or audio tokens and generated tokens together), default
    the text config's ``max_position_embeddings``. ``bos_id``/``eos_ids``: default the text config's.
    ``processor``: the transformers image processor or feature extractor the model's inputs go through (a
    checkpoint's ``preprocessor_config.json``: ``AutoImageProcessor.from_pretrained(folder)``); default one built
    from the model's config as its checkpoints configure it (nothing downloaded). Its size must be the encoder's."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "get_input_embeddings"):
        raise OptionError(f"export_multimodal takes a HF transformers model, not {type(model).__name__}")
    if hasattr(model, "get_image_features"):
        example = _pixel_example(config)
        encoder, module = VISION_ENCODER, _VisionEncoder(model, example)
    elif hasattr(model, "get_audio_features"):
        encoder, module, example = AUDIO_ENCODER, _AudioEncoder(model), _features_example(config)
    else:
        raise OptionError(
            f"{type(model).__name__} has no get_image_features or get_audio_features: export_multimodal takes a "
            "vision-language or audio LLM; for a text LLM use et_tensorrt.llm.export_causal_lm"
        )
    text = config.get_text_config()
    length = max_seq_len or text.max_position_embeddings
    processor = processor if processor is not None else default_processor(model)
    model = model.eval()
    with torch.no_grad():  # as HF's own export
        encoded = module(example)
        tokens, hidden = encoded.shape[1], encoded.shape[2]
        if tokens + 1 >= length:
            raise OptionError(
                f"one {'image' if encoder == VISION_ENCODER else 'audio window'} takes {tokens} positions of the "
                f"cache: max_seq_len={length} leaves no room for text; pass max_seq_len > {tokens + 1}"
            )
        seq = torch.export.Dim("seq", min=1, max=length - 1)
        programs = {
            encoder: torch.export.export(module, (example,), strict=False),
            TOKEN_EMBEDDING: torch.export.export(
                _TokenEmbedding(model),
                (torch.ones((1, 3), dtype=torch.long),),
                dynamic_shapes=({1: seq},),
                strict=False,
            ),
            TEXT_DECODER: _export_text_decoder(model, length, hidden, encoded.dtype, seq),
        }
    bos_id = text.bos_token_id if bos_id is None else bos_id
    eos_ids = text.eos_token_id if eos_ids is None else eos_ids
    if bos_id is None or eos_ids is None:
        raise OptionError(
            "export_multimodal needs bos_id= and eos_ids= (the tokenizer's): the model does not name them"
        )
    eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids)
    constants = llm_methods(max_seq_len=length, vocab_size=text.vocab_size, bos_id=bos_id, eos_ids=eos_ids)
    from ..media import processor_to_json

    key = IMAGE_PROCESSOR if encoder == VISION_ENCODER else FEATURE_EXTRACTOR
    constants[key] = processor_to_json(processor)
    carry(programs, constants)  # so that torch.export.save files say them too (`et-tensorrt lower` reads them)
    return ExportedMultimodal(programs, constants, length, text.vocab_size, encoder, tokens, processor)


def _export_text_decoder(model, length: int, hidden: int, dtype, seq):
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=length,
        cache_config={"batch_size": 1, "max_cache_len": length},
    )  # fmt: skip
    decoder = _text_decoder_class()(model)
    example = (torch.zeros((1, 3, hidden), dtype=dtype), torch.arange(3))
    # strict, as HF exports its static-cache LM: the non-strict trace of the cache's counters does not decompose
    return torch.export.export(decoder, example, dynamic_shapes=({1: seq}, {0: seq}), strict=True)


def _pixel_example(config) -> torch.Tensor:
    vision = config.vision_config
    size = vision.image_size
    return torch.zeros((1, getattr(vision, "num_channels", 3), size, size))


def _features_example(config) -> torch.Tensor:
    audio = config.audio_config
    # Whisper's encoder (Voxtral's): a stride-2 convolution to max_source_positions, so twice that many frames
    return torch.zeros((1, audio.num_mel_bins, 2 * audio.max_source_positions))


def default_processor(model):
    """The transformers image processor or feature extractor of ``model``'s checkpoints, built from its config
    (the input size its encoder takes; the rest their classes' defaults, as the checkpoints' configs have them)."""
    config = model.config
    kind = config.model_type
    if hasattr(model, "get_audio_features"):
        from ..media import whisper_feature_extractor

        audio = config.audio_config  # its window: the frames the encoder takes (30 s for Voxtral's 1,500 positions)
        return whisper_feature_extractor(audio.num_mel_bins, 2 * audio.max_source_positions)
    size = config.vision_config.image_size
    if kind == "llava":
        from transformers import CLIPImageProcessor

        return CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
    if kind == "gemma3":
        from transformers import Gemma3ImageProcessor

        return Gemma3ImageProcessor(size={"height": size, "width": size})
    if kind in _SPLIT_IMAGES:
        from transformers import Idefics3ImageProcessor, SmolVLMImageProcessor

        cls = SmolVLMImageProcessor if kind == "smolvlm" else Idefics3ImageProcessor
        edge = {"longest_edge": size}
        return cls(do_image_splitting=False, size=edge, max_image_size=edge)
    raise OptionError(
        f"no image processor is known for {type(model).__name__} ({kind}): pass processor= (a transformers image "
        "processor, e.g. AutoImageProcessor.from_pretrained(folder) of its preprocessor_config.json)"
    )
