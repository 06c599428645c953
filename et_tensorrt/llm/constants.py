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
# same key the encoder–decoder programs use for their feature extractor (below)
IMAGE_PROCESSOR = "get_image_processor"
FEATURE_EXTRACTOR = "get_feature_extractor"

# The constant methods of an encoder–decoder program (export/speech.py writes them, runner/transcribe.py reads them).
MAX_SEQ_LEN = "get_max_seq_len"  # the decoder's positions (its self-attention cache), as llm_methods
VOCAB_SIZE = "get_vocab_size"
EOS_IDS = "get_eos_ids"
DECODER_PROMPT = "get_decoder_prompt_ids"  # the decoder's first tokens: the start token, then any forced ones
ENCODER_INPUT = "get_encoder_input"  # the encoder's input: input_ids, input_features, input_values, inputs_embeds
MAX_INPUT_LEN = "get_max_input_len"  # its longest length (tokens, feature frames or samples)
FIXED_INPUT_LEN = "get_fixed_input_len"  # whether it takes exactly that length (Whisper's window: audio padded to it)
# speech models only
SAMPLING_RATE = "get_sampling_rate"
MAX_AUDIO_SAMPLES = "get_max_audio_samples"  # the longest audio the encoder takes, in samples
MIN_AUDIO_SAMPLES = "get_min_audio_samples"  # the shortest
# FEATURE_EXTRACTOR (above): its transformers feature extractor (media.processor_to_json)
SEQ2SEQ_METHODS = (MAX_SEQ_LEN, VOCAB_SIZE, EOS_IDS, DECODER_PROMPT, ENCODER_INPUT, MAX_INPUT_LEN, FIXED_INPUT_LEN)
SPEECH_METHODS = (SAMPLING_RATE, MAX_AUDIO_SAMPLES, MIN_AUDIO_SAMPLES, FEATURE_EXTRACTOR)


def is_multimodal(names) -> bool:
    """Whether a program of these method names is one MultimodalRunner runs."""
    return {TOKEN_EMBEDDING, TEXT_DECODER} <= set(names)


def _method_names(pte: bytes) -> set[str]:
    """Read from the flatbuffer alone (no ExecuTorch, no torch): the command line refuses a file at once."""
    from ..format.pte_tables import method_names

    return set(method_names(pte))


def decoding_methods(names) -> tuple[str, ...]:
    """The methods a program of these method names takes tokens with: ``prefill`` and ``decode`` where it has both,
    else ``forward``."""
    return ("prefill", "decode") if {"prefill", "decode"} <= set(names) else ("forward",)


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


# Where an exporter's programs carry their constant methods: the ExportedProgram's graph_module.meta["custom"],
# which torch.export.save writes into the .pt2 (as JSON) and torch.export.load reads back, so that a program saved
# with torch.export.save alone still says what ExecuTorch's runners need (`et-tensorrt lower` adds them).
CARRIED = "et_tensorrt.constant_methods"


def check_constant_methods(methods, what: str = "constant methods") -> dict:
    """``methods`` (name -> value) as ExecuTorch's ``to_edge(constant_methods=...)`` takes them from JSON: a bool, an
    int, a float, a str, or a non-empty list of ints or of floats per name; one OptionError saying what is wrong."""
    from ..errors import OptionError

    if not isinstance(methods, dict) or not methods:
        raise OptionError(f"{what}: give a JSON object of method name -> value, e.g. {_EXAMPLE}")
    checked = {}
    for name, value in methods.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise OptionError(f"{what}: {name!r} is not a method name (a Python identifier)")
        if isinstance(value, list) and value and all(type(v) in (int, float) for v in value):
            # a list of ints, else of floats (an int among floats read as one)
            checked[name] = value if all(type(v) is int for v in value) else [float(v) for v in value]
        elif type(value) in (bool, int, float, str):
            checked[name] = value
        else:
            raise OptionError(
                f"{what}: {name}={value!r}: a method returns a bool, an int, a float, a string, or a non-empty "
                "list of ints or of floats"
            )
    return checked


_EXAMPLE = '\'{"get_max_seq_len": 128, "get_vocab_size": 32000, "get_bos_id": 1, "get_eos_ids": [2]}\''


def carry(programs, methods: dict) -> None:
    """Records ``methods`` in each ExportedProgram of ``programs`` (one, or a mapping of them) for
    torch.export.save (:data:`CARRIED`)."""
    for program in programs.values() if hasattr(programs, "values") else [programs]:
        program.graph_module.meta.setdefault("custom", {})[CARRIED] = dict(methods)


def carried(program) -> dict | None:
    """The constant methods an ExportedProgram carries (:func:`carry`; kept by torch.export.save/load), or None."""
    custom = program.graph_module.meta.get("custom") or {}
    methods = custom.get(CARRIED)
    return dict(methods) if isinstance(methods, dict) else None
