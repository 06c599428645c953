"""Tiny vision–language and audio LLMs from transformers' own classes (random init, nothing downloaded), the shapes
ExecuTorch's ``MultimodalRunner`` runs: LLaVA (CLIP tower + MLP projector + Llama), Gemma 3 (SigLIP + pooled projector
+ Gemma 3 text, its sliding-window layers), SmolVLM (SigLIP-like tower + pixel-shuffle connector + Llama) and Voxtral
(Whisper-like audio encoder + projector + Llama). One layer each, hidden 32-64, 16x16 images of 4x4 patches, a
96-frame audio window; ``vocab``: the tokenizer's size (the logits index its ids), the media token its last id.

``greedy(model, inputs, n)``: the eager reference, HF's own forward over the processor's inputs (the image or audio
tokens in place), greedy, ``n`` tokens or to an EOS."""

from __future__ import annotations

import torch

IMAGE_SIZE, PATCH = 16, 4
AUDIO_POSITIONS = 48  # 96 mel frames; Voxtral's projector groups 4 positions: 12 audio tokens


def _llama(vocab: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=vocab, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=1,
    )  # fmt: skip


def llava(vocab: int):
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=IMAGE_SIZE,
        patch_size=PATCH, projection_dim=32,
    )  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=_llama(vocab), image_token_index=vocab - 1)
    return LlavaForConditionalGeneration(config).eval()


def gemma3(vocab: int):
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    torch.manual_seed(0)
    text = Gemma3TextConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, vocab_size=vocab, max_position_embeddings=64, sliding_window=64, bos_token_id=0, eos_token_id=1,
        pad_token_id=1, layer_types=["sliding_attention", "full_attention"],
    )  # fmt: skip
    vision = SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=IMAGE_SIZE,
        patch_size=PATCH,
    )  # fmt: skip
    config = Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, image_token_index=vocab - 1,
        boi_token_index=vocab - 2, eoi_token_index=vocab - 3,
    )  # fmt: skip
    return Gemma3ForConditionalGeneration(config).eval()


def smolvlm(vocab: int):
    from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration, SmolVLMVisionConfig

    torch.manual_seed(0)
    vision = SmolVLMVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=IMAGE_SIZE,
        patch_size=PATCH,
    )  # fmt: skip
    config = SmolVLMConfig(vision_config=vision, text_config=_llama(vocab), scale_factor=2, image_token_id=vocab - 1)
    return SmolVLMForConditionalGeneration(config).eval()


def voxtral(vocab: int):
    from transformers import VoxtralConfig, VoxtralEncoderConfig, VoxtralForConditionalGeneration

    torch.manual_seed(0)
    audio = VoxtralEncoderConfig(
        hidden_size=32, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, num_mel_bins=16,
        max_source_positions=AUDIO_POSITIONS,
    )  # fmt: skip
    config = VoxtralConfig(audio_config=audio, text_config=_llama(vocab), audio_token_id=vocab - 1)
    return VoxtralForConditionalGeneration(config).eval()


MODELS = {"llava": llava, "gemma3": gemma3, "smolvlm": smolvlm, "voxtral": voxtral}


def media_token(model) -> int:
    """The placeholder id the processor puts where the image's (audio's) embeddings go."""
    config = model.config
    for name in ("image_token_id", "image_token_index", "audio_token_id"):
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    raise ValueError(f"{type(model).__name__} names no image or audio token")


def greedy(model, before: list[int], media: torch.Tensor, count: int, after: list[int], n: int, eos=(1,)) -> list[int]:
    """HF's eager model: ``before``, ``count`` media placeholders replaced by ``media``'s embeddings (pixel values or
    features, as the model's forward takes them), ``after``; then greedy, one token a step, to ``n`` or an EOS."""
    from transformers import DynamicCache

    ids = torch.tensor([before + [media_token(model)] * count + after])
    key = "input_features" if hasattr(model, "get_audio_features") else "pixel_values"
    if model.config.model_type in ("smolvlm", "idefics3") and media.dim() == 4:
        media = media.unsqueeze(1)  # [batch, images, C, H, W]
    cache, out = DynamicCache(config=model.config.get_text_config()), []
    with torch.no_grad():
        logits = model(input_ids=ids, cache=cache, use_cache=True, **{key: media}).logits
        while len(out) < n:
            out.append(int(logits[0, -1].argmax()))
            if out[-1] in eos:
                break
            logits = model(input_ids=torch.tensor([out[-1:]]), cache=cache, use_cache=True).logits
    return out


def ascii_tokenizer(path) -> int:
    """A byte-level BPE (``tokenizers``; nothing downloaded) whose every token is plain ASCII, saved as the HF
    ``tokenizer.json`` ExecuTorch's runners read. ``MultimodalRunner`` prints each generated token's text and drops a
    piece that is not UTF-8 (a lone byte of a multi-byte character), so with this vocabulary its text spells out
    every token it generated. Token 0 is ``<s>``, 1 is ``</s>``. Returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=160, special_tokens=["<s>", "</s>"])
    tokenizer.train_from_iterator(
        ["the cat sat on the mat.", "a dog ran in the sun, and the cat ran too."] * 8, trainer
    )
    tokenizer.save(str(path))
    return tokenizer.get_vocab_size()


def eager_text(model, tokenizer_path, before: str, media: torch.Tensor, count: int, after: str, n: int):
    """(text, how many tokens): what ``MultimodalRunner`` prints for ``before``, the media, ``after`` and ``n`` greedy
    tokens, computed by HF's eager model (:func:`greedy`) and the tokenizer (an :func:`ascii_tokenizer`: each token's
    text as it is)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    ids = [tokenizer.encode(t, add_special_tokens=False).ids for t in (before, after)]
    tokens = greedy(model, ids[0], media, count, ids[1], n)
    return tokenizer.decode(tokens, skip_special_tokens=False).encode(), len(tokens)
