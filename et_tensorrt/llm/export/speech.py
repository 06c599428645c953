"""What a driver needs to run an encoder–decoder program (:func:`et_tensorrt.llm.export_encoder_decoder`), as its
constant methods: the decoder's prompt, end tokens and length, what the encoder takes, and for a speech model the
feature extractor its audio goes through (transformers' own, built from the model's config: nothing downloaded)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import OptionError
from ..constants import (
    DECODER_PROMPT,
    ENCODER_INPUT,
    EOS_IDS,
    FEATURE_EXTRACTOR,
    FIXED_INPUT_LEN,
    MAX_AUDIO_SAMPLES,
    MAX_INPUT_LEN,
    MAX_SEQ_LEN,
    MIN_AUDIO_SAMPLES,
    SAMPLING_RATE,
    VOCAB_SIZE,
)

_WINDOW, _HOP = 400, 160  # 25 ms windows every 10 ms at 16 kHz: Whisper's and Speech2Text's features


def feature_extractor_of(model):
    """The transformers feature extractor a speech model's audio goes through, built from its config as the
    model's checkpoints configure it (preprocessor_config.json); None for a text encoder."""
    config = model.config
    kind = getattr(config, "model_type", "")
    if kind == "whisper":
        from ..media import whisper_feature_extractor

        return whisper_feature_extractor(config.num_mel_bins, 2 * config.max_source_positions)
    if kind == "speech_to_text":
        from transformers import Speech2TextFeatureExtractor

        size = config.input_feat_per_channel
        return Speech2TextFeatureExtractor(feature_size=size, num_mel_bins=size)
    if kind == "moonshine":
        from transformers import Wav2Vec2FeatureExtractor

        return Wav2Vec2FeatureExtractor(
            feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=False, return_attention_mask=True
        )
    if model.main_input_name in ("input_features", "input_values"):
        raise OptionError(
            f"no feature extractor is known for {type(model).__name__}: pass feature_extractor= (a transformers "
            "feature extractor, e.g. FeatureExtractionMixin.from_pretrained(folder) of its preprocessor_config.json)"
        )
    return None


def audio_samples(extractor, spec, frames: int) -> int:
    """The audio (samples) whose features are ``frames`` long: the encoder's input (``spec``: seq2seq.EncoderInput)
    of that length."""
    if spec.name == "input_values":
        return frames
    hop = getattr(extractor, "hop_length", _HOP)
    if spec.length_dim is None:  # Whisper: its window, padded to; the extractor makes samples // hop frames
        return frames * hop
    return (frames - 1) * hop + _WINDOW  # Kaldi frames: one per hop, a window each


def decoder_prompt(model, prompt: Sequence[int] | None = None) -> list[int]:
    """The start token, then the tokens the generation config forces (``forced_decoder_ids``: Whisper's language,
    task, no-timestamps tokens), unless ``prompt`` is given."""
    if prompt is not None:
        return [int(t) for t in prompt]
    ids = [int(model.config.decoder_start_token_id)]
    forced = getattr(getattr(model, "generation_config", None), "forced_decoder_ids", None) or []
    for position, token in sorted(forced):
        if position != len(ids) or token is None:
            break
        ids.append(int(token))
    return ids


def _eos(model, eos_ids) -> list[int]:
    if eos_ids is None:
        generation = getattr(model, "generation_config", None)
        eos_ids = getattr(generation, "eos_token_id", None)
        if eos_ids is None:
            eos_ids = model.config.eos_token_id
    if eos_ids is None:
        raise OptionError("the model names no eos_token_id: pass eos_ids= (the tokens that end the text)")
    return [int(eos_ids)] if isinstance(eos_ids, int) else [int(t) for t in eos_ids]


def seq2seq_methods(
    model, spec, max_cache_len: int, *, eos_ids=None, feature_extractor=None, decoder_prompt_ids=None
) -> dict:
    """The constant methods of ``model``'s program (``spec``: what its encoder takes, seq2seq.EncoderInput)."""
    prompt = decoder_prompt(model, decoder_prompt_ids)
    if len(prompt) >= max_cache_len:
        raise OptionError(
            f"the decoder's prompt ({len(prompt)} tokens) leaves no room in max_cache_len={max_cache_len}"
        )
    methods = {
        MAX_SEQ_LEN: max_cache_len,
        VOCAB_SIZE: int(model.get_output_embeddings().out_features),
        EOS_IDS: _eos(model, eos_ids),
        DECODER_PROMPT: prompt,
        ENCODER_INPUT: spec.name,
        MAX_INPUT_LEN: spec.max_length,
        FIXED_INPUT_LEN: spec.length_dim is None,
    }
    extractor = feature_extractor if feature_extractor is not None else feature_extractor_of(model)
    if extractor is None:
        return methods
    methods[SAMPLING_RATE] = int(extractor.sampling_rate)
    methods[MAX_AUDIO_SAMPLES] = audio_samples(extractor, spec, spec.max_length)
    methods[MIN_AUDIO_SAMPLES] = 1 if spec.length_dim is None else audio_samples(extractor, spec, spec.min_length)
    from ..media import processor_to_json

    methods[FEATURE_EXTRACTOR] = processor_to_json(extractor)
    return methods
