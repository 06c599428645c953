"""An HF encoder–decoder exported as ``encoder`` and ``decoder`` methods of one program, with the cross-attention
keys and values computed once per input: text ones (T5, BART: the encoder reads token ids) and speech ones (Whisper,
Speech2Text: log-mel features; Moonshine: the raw waveform), any whose decoder's attention reads an
``EncoderDecoderCache``.

HF transformers' own ExecuTorch export (``Seq2SeqLMExportableModule``) gives its decoder the encoder's hidden states
and recomputes every layer's cross-attention K and V from them at each token: two projections of the whole input
per layer per token. Here the ``encoder`` method returns them with the hidden states, computed once (it runs the
decoder's first step on the start token and keeps the cross-attention cache that step fills), and the ``decoder``
method takes them as inputs: HF's attention reads a cross-attention cache marked as filled instead of projecting.
On a GPU they stay where the encoder wrote them and the decoder's delegate shares them (no copy); its self-attention
cache (and the position counter HF's static cache keeps beside it) is a state the delegate owns, as in HF's export.

    exported = export_encoder_decoder(model, max_cache_len=64)
    pte = et_tensorrt.lower(exported)  # its constant methods (runner/transcribe.py reads them) included
    hidden, *cross = runner.run([features], method="encoder")
    logits = runner.run([token, hidden, position, *cross], method="decoder")[0]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..._quiet import quiet
from ...errors import OptionError
from ..constants import carry


@dataclass(frozen=True)
class EncoderInput:
    """What the ``encoder`` method takes: the encoder's keyword (``input_ids``, ``input_features``,
    ``input_values``, ``inputs_embeds``), an example, and which of its dims is the length (None: fixed, as
    Whisper's 30 s window) from ``min_length`` (as the export found it) to ``max_length``."""

    name: str
    example: torch.Tensor
    length_dim: int | None
    max_length: int
    min_length: int = 1


def encoder_input(
    model, max_input_len: int | None = None, example: torch.Tensor | None = None, name: str | None = None
):
    """The ``encoder`` method's input for ``model``: its encoder's main input (``main_input_name``) unless ``name``
    says otherwise; the example and the length's range from its config (``example`` replaces the example)."""
    config = model.config
    name = name or getattr(model.get_encoder(), "main_input_name", None) or model.main_input_name
    if name == "input_features" and getattr(config, "model_type", "") == "whisper":
        # Whisper's encoder takes exactly its window (max_source_positions after two convolutions, 2 of stride 2)
        frames = config.max_source_positions * 2
        if max_input_len not in (None, frames):
            raise OptionError(
                f"Whisper's encoder takes exactly {frames} feature frames (2 x max_source_positions): leave "
                f"max_input_len out (got {max_input_len})"
            )
        shape = (1, config.num_mel_bins, frames)
        return _checked(EncoderInput(name, _or(example, torch.zeros(shape)), None, frames), shape)
    if name == "input_features":  # Speech2Text: (batch, frames, features), frames subsampled by its convolutions
        features = getattr(config, "input_feat_per_channel", None) or getattr(config, "num_mel_bins", None)
        if features is None:
            raise OptionError(f"{type(model).__name__}'s config names no feature size: pass example_input")
        features *= getattr(config, "input_channels", 1)
        stride = 2 ** len(getattr(config, "conv_kernel_sizes", ()))
        longest = config.max_source_positions * stride
        length = _length(max_input_len, longest, "feature frames")
        shape = (1, min(8 * stride, length), features)
        return EncoderInput(name, _or(example, torch.zeros(shape)), 1, length)
    if name == "input_values":  # Moonshine: the waveform; its convolutions take 384 samples per position
        longest = config.max_position_embeddings * 384
        length = _length(max_input_len, longest, "samples")
        return EncoderInput(name, _or(example, torch.zeros((1, min(16000, length)))), 1, length)
    # T5's n_positions (relative positions: a length it was trained to, not a limit), BART's position embeddings
    positions = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None) or 512
    if name == "input_ids":
        length = _length(max_input_len, positions, "tokens")
        ids = torch.ones((1, min(6, length)), dtype=torch.long)
        return EncoderInput(name, _or(example, ids), 1, length)
    if name == "inputs_embeds":
        length = _length(max_input_len, positions, "positions")
        shape = (1, min(6, length), config.d_model if hasattr(config, "d_model") else config.hidden_size)
        return EncoderInput(name, _or(example, torch.zeros(shape)), 1, length)
    raise OptionError(
        f"{type(model).__name__}'s encoder takes {name!r}: export_encoder_decoder takes encoders of input_ids, "
        "input_features, input_values or inputs_embeds (pass input_name= to choose one)"
    )


def _or(example, default):
    return default if example is None else example


def _length(asked: int | None, longest: int, unit: str) -> int:
    if asked is not None and asked > longest:
        raise OptionError(f"max_input_len={asked} is past what the encoder takes ({longest} {unit})")
    return asked or longest


def _checked(spec: EncoderInput, shape) -> EncoderInput:
    if tuple(spec.example.shape) != tuple(shape):
        raise OptionError(f"the encoder takes {spec.name} of shape {tuple(shape)}, not {tuple(spec.example.shape)}")
    return spec


def _export_encoder(model, spec: EncoderInput) -> tuple[torch.export.ExportedProgram, EncoderInput]:
    """The ``encoder`` method's program, and ``spec`` with the shortest input it takes."""
    encoder = _Encoder(model, spec.name)
    if spec.length_dim is None:
        return torch.export.export(encoder, (spec.example,), strict=False), spec
    # DYNAMIC, not a named Dim: torch cannot prove some guards over a subsampled length that hold for every length
    # (Speech2Text's positions viewed as (L - 1) // 4 + 1 rows), and it narrows the range to the lengths the encoder
    # takes (Moonshine's convolutions need 1279 samples or more)
    length = torch.export.Dim.DYNAMIC(min=spec.min_length, max=spec.max_length)
    program = torch.export.export(encoder, (spec.example,), dynamic_shapes=({spec.length_dim: length},), strict=False)
    (name,) = program.graph_signature.user_inputs
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == name)
    size = placeholder.meta["val"].shape[spec.length_dim]
    shortest = int(program.range_constraints[size.node.expr].lower) if isinstance(size, torch.SymInt) else size
    return program, dataclasses.replace(spec, min_length=max(shortest, spec.min_length))


def _encoded_length(model, spec: EncoderInput) -> int:
    """The hidden states' length for the longest input (after the encoder's subsampling, if any)."""
    if spec.name in ("input_ids", "inputs_embeds"):
        return spec.max_length
    shape = list(spec.example.shape)
    shape[spec.length_dim] = spec.max_length
    return model.get_encoder()(**{spec.name: spec.example.new_zeros(shape)}).last_hidden_state.shape[1]


def _start(model) -> int:
    return model.config.decoder_start_token_id


def _filled_cross_cache(model, encoder_name: str, features: torch.Tensor):
    """(hidden states, the decoder's caches after one eager step on the start token: self-attention, cross)."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    hidden = model.get_encoder()(**{encoder_name: features}).last_hidden_state
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    start = torch.full((features.shape[0], 1), _start(model), dtype=torch.long, device=features.device)
    # One decoder step fills the cross-attention cache: the projections HF's attention makes of the hidden states.
    model.get_decoder()(input_ids=start, encoder_hidden_states=hidden, cache=cache, use_cache=True)
    return hidden, cache


class _Encoder(torch.nn.Module):
    """features (or input ids) -> (hidden states, K_0, V_0, K_1, V_1, ...): the decoder's cross-attention keys and
    values."""

    def __init__(self, model, input_name: str):
        super().__init__()
        self.model, self.input_name = model, input_name

    def forward(self, features):
        hidden, cache = _filled_cross_cache(self.model, self.input_name, features)
        return (hidden, *[t for layer in cache.cross_attention_cache.layers for t in (layer.keys, layer.values)])


class _Decoder(torch.nn.Module):
    """One token -> logits, through the decoder with a static self-attention cache of ``max_cache_len`` positions
    (HF's ``StaticLayer``s, as its ``Seq2SeqLMDecoderExportableModuleWithStaticCache``: registered buffers, the
    write position set from ``cache_position`` each call), reading the cross-attention K and V it is given instead
    of projecting the hidden states. The layers' shapes are those of an eager step (``self_cache``), so any number
    of decoder layers and K/V heads fits."""

    def __init__(self, model, max_cache_len: int, self_cache):
        from transformers.cache_utils import Cache, StaticLayer

        super().__init__()
        self.decoder, self.lm_head = model.get_decoder(), model.get_output_embeddings()
        layers = []
        for i, eager in enumerate(self_cache.layers):
            layer = StaticLayer(max_cache_len)
            layer.lazy_initialization(eager.keys, eager.values)
            layers.append(layer)
            self.register_buffer(f"key_cache_{i}", layer.keys, persistent=False)
            self.register_buffer(f"value_cache_{i}", layer.values, persistent=False)
            self.register_buffer(f"cumulative_length_{i}", layer.cumulative_length, persistent=False)
        self.static_cache = Cache(layers=layers)

    def forward(self, decoder_input_ids, encoder_hidden_states, cache_position, *cross):
        from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

        for layer in self.static_cache.layers:
            layer.cumulative_length.copy_(cache_position[0])
        filled = DynamicCache()
        for i in range(len(cross) // 2):  # the layers made filled (an update would concatenate to an empty one)
            layer = DynamicLayer()
            layer.keys, layer.values, layer.device = cross[2 * i], cross[2 * i + 1], cross[2 * i].device
            layer.is_initialized = True
            filled.layers.append(layer)
        cache = EncoderDecoderCache(self.static_cache, filled)
        for i in range(len(cross) // 2):
            cache.is_updated[i] = True  # HF's attention then reuses them
        outputs = self.decoder(
            input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states, cache=cache, use_cache=True
        )
        return self.lm_head(outputs[0])


@dataclass
class ExportedSeq2Seq(Mapping):
    """What :func:`export_encoder_decoder` made: the ``encoder`` and ``decoder`` programs by name (a mapping, as
    ``et_tensorrt.lower`` takes methods) and the constant methods a driver reads (:func:`seq2seq_methods`), which
    ``lower``/``save`` add to the program."""

    programs: dict[str, torch.export.ExportedProgram]
    constant_methods: dict = field(default_factory=dict)
    encoder_input: EncoderInput | None = None

    def __getitem__(self, name: str) -> torch.export.ExportedProgram:
        return self.programs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.programs)

    def __len__(self) -> int:
        return len(self.programs)


@quiet  # torch.export's dynamo warnings on HF models (_quiet.py)
def export_encoder_decoder(
    model,
    max_cache_len: int = 64,
    max_input_len: int | None = None,
    example_input: torch.Tensor | None = None,
    *,
    input_name: str | None = None,
    eos_ids: Sequence[int] | None = None,
    decoder_prompt_ids: Sequence[int] | None = None,
    feature_extractor=None,
) -> ExportedSeq2Seq:
    """The ``encoder`` and ``decoder`` methods of ``model`` for :func:`et_tensorrt.lower` (or ``save``), with the
    constant methods a driver reads.

    ``encoder`` takes what the model's encoder does (its ``main_input_name``, or ``input_name``): token ids
    (1..``max_input_len``), Whisper's log-mel features (its fixed window: ``(1, num_mel_bins, 2 *
    max_source_positions)``), Speech2Text's (``(1, frames, features)``, frames up to ``max_input_len``), Moonshine's
    waveform (``(1, samples)``); it returns the hidden states and each decoder layer's cross-attention K and V.
    ``decoder`` takes one token, the hidden states, its position (``cache_position``, below ``max_cache_len``) and
    those K and V, in order, and returns the logits. ``eos_ids``: default the generation config's (or config's)
    ``eos_token_id``. ``decoder_prompt_ids``: the decoder's first tokens, default the start token and those the
    generation config forces (Whisper's language and task). ``feature_extractor``: the one a speech model's audio
    goes through (a transformers feature extractor, e.g. loaded from a checkpoint's preprocessor_config.json);
    default built from the config (``et_tensorrt.llm.export.speech.feature_extractor_of``), nothing downloaded."""
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        raise OptionError(
            f"{type(model).__name__} is not an encoder-decoder (its config says is_encoder_decoder=False): for a "
            "decoder-only LM use et_tensorrt.llm.export_causal_lm; an encoder alone (a CTC or transducer speech "
            "model such as Parakeet) is one program: torch.export it and lower it with et_tensorrt.lower"
        )
    if getattr(model.config, "decoder_start_token_id", None) is None:
        raise OptionError(
            "the model's config has no decoder_start_token_id: set it (the first token the decoder reads)"
        )
    if model.get_output_embeddings() is None:
        raise OptionError(f"{type(model).__name__} has no output projection (get_output_embeddings() is None)")
    positions = getattr(model.config, "max_target_positions", None)  # the decoder's position embeddings
    if positions is not None and max_cache_len > positions:
        raise OptionError(
            f"max_cache_len={max_cache_len} is past the decoder's {positions} positions (max_target_positions)"
        )
    from .speech import seq2seq_methods

    model = model.eval()
    spec = encoder_input(model, max_input_len, example_input, input_name)
    features = spec.example
    with torch.no_grad():  # as HF's own export
        hidden, cache = _filled_cross_cache(model, spec.name, features)
        cross = [t for layer in cache.cross_attention_cache.layers for t in (layer.keys, layer.values)]
        encoder_program, spec = _export_encoder(model, spec)
        decoder = _Decoder(model, max_cache_len, cache.self_attention_cache)
        example = (torch.tensor([[_start(model)]]), hidden, torch.tensor([0]), *cross)
        shapes = None
        if spec.length_dim is not None:  # the hidden states' length follows the input's (subsampled: its own range)
            hidden_len = torch.export.Dim("encoder_length", min=1, max=_encoded_length(model, spec))
            shapes = (None, {1: hidden_len}, None, tuple({2: hidden_len} for _ in cross))
        # strict, as HF exports its decoder: the non-strict trace of its static cache does not decompose
        decoder_program = torch.export.export(decoder, example, dynamic_shapes=shapes, strict=True)
    constants = seq2seq_methods(
        model,
        spec,
        max_cache_len,
        eos_ids=eos_ids,
        feature_extractor=feature_extractor,
        decoder_prompt_ids=decoder_prompt_ids,
    )
    programs = {"encoder": encoder_program, "decoder": decoder_program}
    carry(programs, constants)  # so that torch.export.save files say them too (`et-tensorrt lower` reads them)
    return ExportedSeq2Seq(programs, constants, spec)
