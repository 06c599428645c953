"""Real decoders, made by exporters nobody here wrote, lowered and decoded token by token against eager.

Tiny configs with random weights (nothing is downloaded):

* ``executorch_llama(dynamic)``: ExecuTorch's ``examples/models/llama`` Transformer with ``use_kv_cache=True``;
  ``dynamic=True`` is its LLM export default (``enable_dynamic_shape``: one ``forward`` for a prompt of S
  tokens and for single tokens, the write position read with ``input_pos[0].item()``).
* ``executorch_gemma4()``: ExecuTorch's Gemma 4 text decoder as its export script makes it.
* ``hf_llama()``: HF transformers' ``TorchExportableModuleForDecoderOnlyLM`` (a Llama with a static cache).
* ``hf_causal_lm(model)``: any HF causal LM as ``et_tensorrt.llm.export_causal_lm`` exports it (prefill/decode).
* ``hf_tiny_causal_lm(kind)``: a tiny HF Llama or Qwen3 model itself, for ``export_causal_lm``.

``decode(decoder, pte, tokens)`` runs the prompt then one token per call through :class:`et_tensorrt.Runner`
and the eager model side by side, and returns per step the largest error and the delegate's bytes moved.

``prefill_decode(decoder)`` is the same decoder as a program of two methods, as ExecuTorch's CUDA backend and
optimum-executorch export LLMs: ``prefill`` (the prompt) and ``decode`` (one token);
``decode(..., methods=PREFILL_DECODE)`` runs them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

MAX_CONTEXT = 32
VOCAB = 128


PREFILL_DECODE = ("prefill", "decode")


@dataclass
class Decoder:
    name: str
    program: torch.export.ExportedProgram
    eager: torch.nn.Module  # its own state: run it only after lowering `program`
    # (tokens of this call, start position) -> (args, kwargs) of the eager forward; their tensors in order are
    # the method's inputs
    inputs: Callable[[list[int], int], tuple[tuple, dict]]
    prompt_tokens: bool  # whether one call may take several tokens
    cache_bytes: int
    # another export of the same model: (example tokens of one call, whether their number is dynamic) -> its
    # program (prefill_decode's methods)
    export: Callable[[list[int], bool], torch.export.ExportedProgram] | None = None
    states: tuple[str, ...] = ()  # the buffers that hold its state, where the maker names them


def prefill_decode(decoder: Decoder, prompt: int = 4) -> dict[str, torch.export.ExportedProgram]:
    """The decoder as two methods of one program, as ExecuTorch's CUDA examples export them: ``prefill`` with a
    dynamic number of tokens (its own program when it already takes several) and ``decode``, one token, static."""
    prefill = decoder.program if decoder.prompt_tokens else decoder.export(list(range(1, prompt + 1)), True)
    return {"prefill": prefill, "decode": decoder.export([1], False)}


def executorch_llama(
    dynamic: bool = False,
    layers: int = 2,
    dtype: torch.dtype = torch.float32,
    vocab: int = VOCAB,
    quantize: str = "",
    dim: int = 64,
    context: int = MAX_CONTEXT,
    model_args: dict | None = None,
) -> Decoder:
    """``quantize``: a torchao case of ``quantized_models`` (``"8da4w"``, ``"int4_weight_only"``, ...) applied to
    the model before export, as ExecuTorch's LLM export does (``-qmode``); eager is then what the engine computes
    (8da4w: its weight-only reading). ``dim`` (4 heads, 2 of them for K/V, an MLP twice as wide) and ``context``
    (the cache's length) make it larger, for benchmarks."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    from et_tensorrt.llm.export.causal import LlamaExport

    args = ModelArgs(
        dim=dim,
        n_layers=layers,
        n_heads=4,
        n_kv_heads=2,
        vocab_size=vocab,
        hidden_dim=2 * dim,
        max_seq_len=context,
        max_context_len=context,
        max_batch_size=1,
        use_kv_cache=True,
        enable_dynamic_shape=dynamic,
        **(model_args or {}),
    )
    torch.manual_seed(0)
    model = construct_transformer(args).eval().requires_grad_(False).to(dtype)
    if quantize:
        from et_tensorrt.testing import quantized_models

        model = quantized_models.quantize_torchao(model, quantize)
        reference = quantized_models.reference(quantize, model)
    else:
        reference = copy.deepcopy(model)

    def inputs(tokens, start):
        return (torch.tensor([tokens], dtype=torch.long), {"input_pos": torch.tensor([start], dtype=torch.long)}), {}

    exporter = LlamaExport(model)

    def export(tokens, dynamic_length):  # from position 0
        return exporter(len(tokens), dynamic_length)

    program = export([3, 5, 7] if dynamic else [3], dynamic)

    states = tuple(n for n, _ in model.named_buffers() if n.endswith(("_cache", "_state")))
    cache = sum(b.numel() * b.element_size() for n, b in model.named_buffers() if n in states)
    return Decoder(
        f"executorch llama ({'enable_dynamic_shape' if dynamic else 'static'}"
        + ("" if dtype == torch.float32 else f", {str(dtype).replace('torch.', '')}")
        + (f", {quantize}" if quantize else "")
        + ")",
        program,
        reference,
        inputs,
        dynamic,
        cache,
        export,
        states,
    )


# examples/models/llama's ModelArgs of a Qwen3.5 (examples/models/qwen3_5: its Llama2Model reads them from the HF
# config): gated-delta-net layers (a conv and a recurrent state each) and full attention layers (gated queries,
# q/k norms, partial rotary), tiny
QWEN3_5_ARGS = dict(
    head_dim=16, layer_types=["linear_attention", "full_attention"], linear_conv_kernel_dim=4, linear_key_head_dim=8,
    linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, use_q_gate=True, use_qk_norm=True,
    qk_norm_before_rope=True, use_hf_rope=True, partial_rotary_factor=0.25, rms_norm_add_unit_offset=True,
)  # fmt: skip


def executorch_qwen3_5(dynamic: bool = False, vocab: int = VOCAB) -> Decoder:
    """ExecuTorch's Qwen3.5 (examples/models/qwen3_5: the llama Transformer with Gated DeltaNet layers), with the
    custom ops library loaded as its export script has it: the recurrence is ``llama.gated_delta_rule``."""
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    decoder = executorch_llama(dynamic, vocab=vocab, model_args=QWEN3_5_ARGS)
    decoder.name = decoder.name.replace("executorch llama", "executorch qwen3_5")
    return decoder


def executorch_gemma4(vocab: int = VOCAB, dim: int = 32) -> Decoder:
    """ExecuTorch's Gemma 4 text decoder (examples/models/gemma4/text_decoder) as ``export_gemma4.py`` exports it:
    custom SDPA, a dynamic number of tokens, the embeddings of other modalities as a third input; 2 layers (one
    sliding-window, one full attention). It reads its write position with ``input_pos[0].item()``, writes the
    cache with ``narrow(...).copy_`` and attends over ``narrow(cache, 0, start + S)`` (a data-dependent length).
    Each call's ``inputs_embeds`` are random but fixed by its start position, as an audio prompt's would be."""
    from executorch.examples.models.gemma4.text_decoder.gemma4_config import Gemma4Config
    from executorch.examples.models.gemma4.text_decoder.gemma4_model import Gemma4Model
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    config = Gemma4Config(
        hidden_size=dim, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        global_head_dim=16, vocab_size=vocab, intermediate_size=2 * dim, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=16, hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=vocab, num_kv_shared_layers=0, audio_token_id=vocab - 8,
        image_token_id=vocab - 7, audio_vocab_offset=vocab - 6,
    )  # fmt: skip
    config.use_kv_cache, config.max_seq_len, config.max_context_len = True, MAX_CONTEXT, MAX_CONTEXT
    config.enable_dynamic_shape, config.use_custom_sdpa = True, True
    torch.manual_seed(0)
    wrapper = Gemma4Model(config=config, dtype=torch.float32)
    model = wrapper.get_eager_model().eval().requires_grad_(False)
    reference = copy.deepcopy(model)

    def inputs(tokens, start):
        embeds = torch.randn(1, len(tokens), dim, generator=torch.Generator().manual_seed(start))
        positions = torch.arange(start, start + len(tokens), dtype=torch.long)
        return (torch.tensor([tokens], dtype=torch.long),), {"input_pos": positions, "inputs_embeds": embeds}

    def export(tokens, dynamic_length):
        (ids,), kwargs = inputs(tokens, 0)
        shapes = wrapper.get_dynamic_shapes(with_audio_embeds=True) if dynamic_length else None
        with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]), torch.no_grad():
            return torch.export.export(model, (ids,), kwargs=kwargs, dynamic_shapes=shapes)

    states = tuple(n for n, _ in model.named_buffers() if n.endswith(("k_cache", "v_cache")))
    cache = sum(b.numel() * b.element_size() for n, b in model.named_buffers() if n in states)
    program = export([3, 5, 7, 9, 11], True)
    return Decoder("executorch gemma4 text decoder", program, reference, inputs, True, cache, export, states)


def hf_inputs(tokens, start):
    """The inputs of transformers' static-cache exports (and ours): ``input_ids`` and their ``cache_position``."""
    ids = torch.tensor([tokens], dtype=torch.long)
    return (), {"input_ids": ids, "cache_position": torch.arange(start, start + len(tokens), dtype=torch.long)}


def hf_llama(layers: int = 2) -> Decoder:
    from transformers import LlamaConfig, LlamaForCausalLM

    from et_tensorrt.llm.export.causal import HFStaticCacheExport

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2 * MAX_CONTEXT,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval().requires_grad_(False)
    exporter = HFStaticCacheExport(model, MAX_CONTEXT)

    def export(tokens, dynamic_length):  # from position 0
        return exporter(len(tokens), dynamic_length)

    program = export([1], False)
    reference = copy.deepcopy(exporter.module)

    cache = sum(b.numel() * b.element_size() for n, b in exporter.exportable.named_buffers() if "_cache_" in n)
    return Decoder("HF transformers Llama (static cache)", program, reference, hf_inputs, False, cache, export)


def hf_causal_lm(model, max_seq_len: int = MAX_CONTEXT) -> tuple[Decoder, object]:
    """A HF causal LM as ``et_tensorrt.llm.export_causal_lm(model, methods="prefill_decode",
    max_seq_len=max_seq_len)`` exports it, and that export (an ``ExportedLM``): the Decoder's eager model is
    transformers' own static-cache module of it, with a cache of its own (run it after lowering)."""
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    from et_tensorrt.llm import export_causal_lm

    lm = export_causal_lm(model, methods="prefill_decode", max_seq_len=max_seq_len)
    exportable = TorchExportableModuleForDecoderOnlyLM(model)  # the generation config export_causal_lm set

    cache = sum(b.numel() * b.element_size() for n, b in exportable.named_buffers() if "_cache_" in n)
    name = f"HF transformers {type(model).__name__}"
    return Decoder(name, lm.programs["prefill"], exportable.model, hf_inputs, True, cache), lm


def _recurrent_config(family: str, vocab: int = VOCAB):
    """Tiny configs (2 layers, hidden 32, small states) of HF's recurrent-state families."""
    import transformers as t

    common = {"vocab_size": vocab, "hidden_size": 32, "num_hidden_layers": 2, "bos_token_id": 0, "eos_token_id": 1}
    attention = {"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2 * MAX_CONTEXT}
    mamba2 = {"mamba_n_heads": 4, "mamba_d_head": 16, "mamba_d_state": 8, "mamba_n_groups": 1, "mamba_chunk_size": 8}
    if family == "mamba":
        return t.MambaConfig(**common, state_size=8, intermediate_size=64, conv_kernel=4, time_step_rank=4)
    if family == "mamba2":
        return t.Mamba2Config(**common, num_heads=4, head_dim=16, state_size=8, n_groups=1, chunk_size=8)
    if family == "bamba":  # Mamba2 layer, then attention
        return t.BambaConfig(**common, **attention, **mamba2, intermediate_size=64, attn_layer_indices=[1])
    if family == "falcon_h1":  # attention and Mamba2 side by side in every layer
        return t.FalconH1Config(**common, **attention, **mamba2, intermediate_size=64, head_dim=8, mamba_d_ssm=64)
    if family == "lfm2":  # short convolution, then attention
        return t.Lfm2Config(
            **common, **attention, intermediate_size=64, conv_L_cache=3, layer_types=["conv", "full_attention"]
        )
    # a gated delta net (a conv and a recurrent state), then gated attention; Qwen3-Next and Qwen3.5-MoE: MoE MLPs
    delta = {"layer_types": ["linear_attention", "full_attention"], "head_dim": 8, "linear_conv_kernel_dim": 4}
    delta.update(linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4)
    experts = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    if family == "qwen3_next":
        return t.Qwen3NextConfig(
            **common, **attention, **delta, **experts, intermediate_size=64, shared_expert_intermediate_size=32
        )
    if family == "qwen3_5":
        return t.Qwen3_5TextConfig(**common, **attention, **delta, intermediate_size=64)
    if family == "qwen3_5_moe":
        return t.Qwen3_5MoeTextConfig(**common, **attention, **delta, **experts, shared_expert_intermediate_size=32)
    raise ValueError(f"no recurrent family {family!r}: one of {', '.join(RECURRENT_FAMILIES)}")


RECURRENT_FAMILIES = ("mamba", "mamba2", "bamba", "falcon_h1", "lfm2", "qwen3_next", "qwen3_5", "qwen3_5_moe")


class _HFEager(torch.nn.Module):
    """A HF causal LM decoding with its own ``DynamicCache`` and code paths (nothing of et_tensorrt's), started over at
    position 0: the reference a recurrent export is compared with."""

    def __init__(self, model):
        super().__init__()
        import inspect

        self.model, self.cache = model, None
        self._positions = "position_ids" in inspect.signature(model.forward).parameters

    def forward(self, input_ids, cache_position):
        from transformers import DynamicCache

        if int(cache_position[0]) == 0:
            self.cache = DynamicCache(config=self.model.config)
        extra = {"position_ids": cache_position.unsqueeze(0)} if self._positions else {}
        return self.model(input_ids=input_ids, cache=self.cache, use_cache=True, **extra).logits


def hf_recurrent(family: str = "mamba", vocab: int = VOCAB) -> Decoder:
    """A HF model whose state is conv / SSM states (``family``: one of RECURRENT_FAMILIES, hybrids with attention
    included), exported by et_tensorrt.llm.export.recurrent; eager is HF's own model with its ``DynamicCache``."""
    from transformers import AutoModelForCausalLM

    from et_tensorrt.llm.export.recurrent import RecurrentStateExport

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_recurrent_config(family, vocab)).eval().requires_grad_(False)
    exporter = RecurrentStateExport(model, MAX_CONTEXT)

    def export(tokens, dynamic_length):  # from position 0
        return exporter(len(tokens), dynamic_length)

    program = export([1, 2], True)
    name = f"HF {type(model).__name__} (conv / SSM states)"
    states = tuple(exporter.module.states)
    return Decoder(name, program, _HFEager(model), hf_inputs, True, exporter.module.state_bytes(), export, states)


def hf_tiny_causal_lm(kind: str = "llama", vocab: int = VOCAB, layers: int = 1, context: int = MAX_CONTEXT):
    """A tiny HF transformers causal LM of random weights (``kind``: ``"llama"`` or ``"qwen3"``, Qwen3's per-head
    q/k norms), BOS 0 and EOS 1, for ``export_causal_lm``."""
    import transformers

    shape = dict(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=context, bos_token_id=0, eos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape)).eval()
    if kind == "qwen3":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **shape)).eval()
    raise ValueError(f"kind is 'llama' or 'qwen3', not {kind!r}")


@dataclass
class Step:
    tokens: int  # tokens in this call
    max_error: float
    bytes_moved: int  # every delegate's bytes copied in this call (inputs, results, outputs; not its state)
    state_bytes: int  # the delegate's state written back on its device (0 for a cache updated in place)
    seconds: float = 0.0  # the Runner call alone (eager runs outside it)
    plans: list = field(default_factory=list)


def _flat(inputs) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]


def decode(
    decoder: Decoder, pte, tokens: Sequence[int], prompt: int = 1, methods: tuple[str, str] | None = None
) -> list[Step]:
    """The first ``prompt`` tokens in one call (when the decoder takes several, or ``methods`` names a prefill
    method), then one per call, from position 0; ``pte`` is the program's bytes or a :class:`et_tensorrt.Runner` of
    it, or any ``(inputs, method) -> outputs`` callable (ExecuTorch's own runtime). ``methods``: (the prompt's
    method, the single tokens' method), ``forward`` for both by default."""
    from et_tensorrt import Runner

    prefill, single = methods or ("forward", "forward")
    several = decoder.prompt_tokens or methods is not None
    if callable(pte):  # ExecuTorch's own runtime, or any (inputs, method) -> outputs
        run, plans_of = pte, lambda: []
    else:
        runner = pte if isinstance(pte, Runner) else Runner(pte)
        run, plans_of = (lambda inputs, method: runner.run(inputs, method=method)), lambda: runner.last_plans
    calls = [list(tokens[:prompt])] + [[t] for t in tokens[prompt:]] if several else [[t] for t in tokens]
    steps, start = [], 0
    for n, call in enumerate(calls):
        args, kwargs = decoder.inputs(call, start)
        with torch.no_grad():
            expected = decoder.eager(*args, **kwargs)
        expected = expected[0] if isinstance(expected, (tuple, list)) else expected
        began = time.perf_counter()
        got = run(_flat((args, kwargs)), prefill if n == 0 else single)[0]
        seconds = time.perf_counter() - began
        expected = expected.reshape(got.shape) if expected.numel() == got.numel() else expected[..., -1, :]
        plans = plans_of()
        steps.append(
            Step(
                tokens=len(call),
                max_error=float((got - expected.reshape(got.shape)).abs().max()),
                bytes_moved=sum(p.bytes_copied for p in plans),
                state_bytes=sum(s.bytes for p in plans for s in p.states),
                seconds=seconds,
                plans=plans,
            )
        )
        start += len(call)
    return steps


def byte_level_tokenizer(path, vocab: int = 320) -> int:
    """Trains a tiny byte-level BPE (``tokenizers``; nothing downloaded) and saves it as a HF ``tokenizer.json``
    at ``path``, the form ExecuTorch's LLM runners read. Token 0 is ``<s>``, 1 is ``</s>``. Returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    text = ["the cat sat on the mat.", "a dog ran in the sun, and the cat ran too."] * 8
    tokenizer.train_from_iterator(text, trainer)
    tokenizer.save(str(path))
    return tokenizer.get_vocab_size()


@dataclass
class Seq2Seq:
    """An encoder-decoder exported as two methods, as HF transformers' ``Seq2SeqLMExportableModule`` does:
    ``encoder`` (input ids -> hidden states) and ``decoder`` (one token, the hidden states, its position -> logits;
    its self-attention cache a static cache of MAX_CONTEXT)."""

    methods: dict[str, torch.export.ExportedProgram]
    encoder: torch.nn.Module  # the exported programs run eagerly (each its own state): the reference
    decoder: torch.nn.Module
    model: torch.nn.Module  # the HF model they were exported from


def t5_seq2seq(layers: int = 2) -> Seq2Seq:
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.integrations.executorch import Seq2SeqLMExportableModule

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=layers, num_decoder_layers=layers, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config).eval()
    exportable = Seq2SeqLMExportableModule(model, max_hidden_seq_length=16, max_cache_length=MAX_CONTEXT)
    exportable.export(encoder_input_ids=torch.ones((1, 6), dtype=torch.long))
    encoder, decoder = exportable.exported_encoder, exportable.exported_decoder
    return Seq2Seq(
        {"encoder": encoder, "decoder": decoder},
        copy.deepcopy(encoder).module(),
        copy.deepcopy(decoder).module(),
        model,
    )
