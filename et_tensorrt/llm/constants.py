"""The constant methods ExecuTorch's LLM runners read from a program (``TextLLMRunner``, ``MultimodalRunner``:
ExecuTorch's extension/llm/runner), and which of them a program lacks. Reads the flatbuffer alone (no ExecuTorch, no
torch): the command line refuses a file at once."""

from __future__ import annotations

from collections.abc import Sequence

# What TextLLMRunner reads from the program (ExecuTorch's extension/llm/runner), besides "forward".
REQUIRED_METHODS = (
    "get_max_seq_len",
    "get_max_context_len",
    "get_vocab_size",
    "get_bos_id",
    "get_eos_ids",
    "use_kv_cache",
    "enable_dynamic_shape",
)

# What a program whose methods choose the next token says of how (et_tensorrt.llm.sampling.sampling_methods): its
# temperature (0: greedy), top-k and top-p. TextLLMRunner cannot run such a program (it reads float logits).
SAMPLING_METHODS = ("get_sampling_temperature", "get_sampling_top_k", "get_sampling_top_p")

# MultimodalRunner's method names (extension/llm/runner/constants.h)
VISION_ENCODER = "vision_encoder"
AUDIO_ENCODER = "audio_encoder"
TOKEN_EMBEDDING = "token_embedding"
TEXT_DECODER = "text_decoder"
# ours: the transformers processor an image or audio goes through before its encoder (media.processor_to_json), the
# same key the encoder–decoder programs use for their feature extractor (speech.py)
IMAGE_PROCESSOR = "get_image_processor"
FEATURE_EXTRACTOR = "get_feature_extractor"


def is_multimodal(names) -> bool:
    """Whether a program of these method names is one MultimodalRunner runs."""
    return {TOKEN_EMBEDDING, TEXT_DECODER} <= set(names)


def _method_names(pte: bytes) -> set[str]:
    """Read from the flatbuffer alone (no ExecuTorch, no torch): the command line refuses a file at once."""
    from ..format.pte_tables import method_names

    return set(method_names(pte))


def missing_methods(pte: bytes, decoding: Sequence[str] = ("forward",)) -> list[str]:
    """The methods TextLLMRunner (``decoding``: the methods that take tokens) needs that ``pte`` lacks."""
    names = _method_names(pte)
    return [n for n in (*decoding, *REQUIRED_METHODS) if n not in names]


def llm_methods(
    *,
    max_seq_len: int,
    vocab_size: int,
    bos_id: int,
    eos_ids: Sequence[int],
    max_context_len: int | None = None,
    use_kv_cache: bool = True,
    enable_dynamic_shape: bool = True,
) -> dict:
    """The constant methods ExecuTorch's LLM runners read (as ``export_llama`` writes them)."""
    methods = {
        "get_max_seq_len": max_seq_len,
        "get_max_context_len": max_context_len or max_seq_len,
        "get_vocab_size": vocab_size,
        "get_bos_id": bos_id,
        "get_eos_ids": list(eos_ids),
        "use_kv_cache": use_kv_cache,
        "enable_dynamic_shape": enable_dynamic_shape,
    }
    assert set(methods) == set(REQUIRED_METHODS)
    return methods
