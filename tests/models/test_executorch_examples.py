"""ExecuTorch's own example models (the installed wheel's ``executorch.examples.models``, tiny configs, random
weights, nothing downloaded), exported as each model's export script does it, lowered with et_tensorrt and decoded
against eager: every method one engine, its KV cache owned by the delegate. Their programs carry ExecuTorch's LLM
custom ops (``llama.custom_sdpa``, ``llama.update_cache(_with_indices)``), which ``partition/llama_custom_ops.py``
decomposes (custom SDPA checked against ExecuTorch's kernel here, the cache updates in
tests/partition/test_partition_llama_custom_ops.py). Voxtral Realtime, Gemma 4's text decoder, and
examples/models/llama's lfm2, qwen3 and smollm3 through export_llama's own code (``LlamaExample``); qwen3_5 is
tested in tests/backend/test_backend_gated_delta_net.py. The table in docs/models.md comes from these tests."""

from __future__ import annotations

import copy

import pytest
import torch

import et_tensorrt
from et_tensorrt.partition import llama_custom_ops

custom_ops = pytest.importorskip("executorch.extension.llm.custom_ops.custom_ops")

CONTEXT, VOCAB, DIM = 32, 128, 32
TOLERANCE = 1e-4


@pytest.mark.parametrize("start, length, is_causal", [(0, 4, True), (5, 1, True), (6, 3, True), (6, 3, False)])
def test_custom_sdpa_decomposition_is_the_kernel(start, length, is_causal):
    """The decomposition against ExecuTorch's CPU kernel: grouped-query heads, causal from ``start_pos`` over the
    whole cache, or an additive mask over the keys given."""
    torch.manual_seed(0)
    keys = 16 if is_causal else start + length
    q, k, v = torch.randn(1, length, 4, 8), torch.randn(1, keys, 2, 8), torch.randn(1, keys, 2, 8)
    mask = None if is_causal else torch.randn(length, keys)
    want = torch.ops.llama.custom_sdpa(q, k, v, start, mask, 0.0, is_causal, 0.3)
    got = llama_custom_ops.custom_sdpa(q, k, v, start, mask, 0.0, is_causal, 0.3)
    assert (got - want).abs().max() < 1e-5


def _voxtral():
    """examples/models/voxtral_realtime as export_voxtral_rt.py exports it offline for XNNPACK/portable (custom SDPA,
    ``update_cache``): three methods, the text decoder's prompt length dynamic."""
    from executorch.examples.models.voxtral_realtime import model as voxtral
    from executorch.examples.models.voxtral_realtime.export_voxtral_rt import (
        AudioEncoderExport,
        TextDecoderExport,
        TokenEmbeddingExport,
    )
    from torch.export import Dim, export

    config = voxtral.VoxtralRealtimeConfig(
        dim=DIM, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=16, hidden_dim=64, vocab_size=VOCAB, enc_dim=32,
        enc_n_layers=1, enc_n_heads=2, enc_head_dim=16, enc_hidden_dim=64, num_mel_bins=16, max_seq_len=CONTEXT,
        sliding_window=CONTEXT,
    )  # fmt: skip
    config.backend = "xnnpack"
    torch.manual_seed(0)
    model = voxtral.VoxtralRealtimeModel(config).eval()
    # what load_model computes after loading a checkpoint: the RoPE tables and the delay's time embedding
    for module, head_dim, length, theta in (
        (model.encoder, config.enc_head_dim, 16384, config.enc_rope_theta),
        (model.decoder, config.head_dim, CONTEXT, config.rope_theta),
    ):
        cos, sin = voxtral.precompute_freqs_cis(head_dim, length, theta)
        module.register_buffer("freqs_cos", cos)
        module.register_buffer("freqs_sin", sin)
    model.register_buffer("t_cond", voxtral.compute_time_embedding(6, config.dim))
    eager = copy.deepcopy(model)
    seq = Dim("seq_len", min=1, max=CONTEXT)
    programs = {
        "audio_encoder": export(
            AudioEncoderExport(model).eval(),
            (torch.randn(1, 16, 16),),
            dynamic_shapes={"mel": {2: 8 * Dim("_t_mel_base", min=1, max=3000)}},
            strict=True,
        ),
        "text_decoder": export(
            TextDecoderExport(model).eval(),
            (torch.randn(1, 4, DIM), torch.arange(4)),
            dynamic_shapes={"input_embeds": {1: seq}, "cache_position": {0: seq}},
            strict=True,
        ),
        "token_embedding": export(
            TokenEmbeddingExport(model).eval(),
            (torch.tensor([[0, 1, 2, 3]]),),
            dynamic_shapes={"token_ids": {1: Dim("tok_seq_len", min=1, max=CONTEXT)}},
            strict=True,
        ),
    }
    return programs, (AudioEncoderExport(eager), TextDecoderExport(eager), TokenEmbeddingExport(eager))


@pytest.fixture(scope="module")
def voxtral_realtime():
    programs, eager = _voxtral()
    pte = et_tensorrt.lower(programs)
    return pte, dict(et_tensorrt.lower.last_reports), eager


@pytest.mark.slow
def test_voxtral_realtime(voxtral_realtime):
    """Three methods, one engine each, the KV cache in the delegate; a prompt then single tokens, each embedded by
    ``token_embedding`` and decoded by ``text_decoder``, within 1e-4 of eager; a decode step moves the logits."""
    pte, reports, (encoder, decoder, embedding) = voxtral_realtime
    assert {name: len(r.partitions) for name, r in reports.items()} == dict.fromkeys(
        ("audio_encoder", "text_decoder", "token_embedding"), 1
    )
    assert not any(r.host_nodes for r in reports.values())
    assert all("owned by et_tensorrt_0" in str(s) for s in reports["text_decoder"].states)
    assert len(reports["text_decoder"].states) == 2  # K and V of its one layer
    runner = et_tensorrt.Runner(pte)
    mel = torch.randn(1, 16, 16)
    with torch.no_grad():
        assert (runner.run([mel], method="audio_encoder")[0] - encoder(mel)).abs().max() < TOLERANCE
    start = 0
    for call in ([3, 5, 7, 9], [11], [13], [17]):
        ids, pos = torch.tensor([call]), torch.arange(start, start + len(call))
        embeds = runner.run([ids], method="token_embedding")[0]
        with torch.no_grad():
            assert (embeds - embedding(ids)).abs().max() < TOLERANCE
            want = decoder(embedding(ids), pos)
        got = runner.run([embeds, pos], method="text_decoder")[0]
        assert (got - want).abs().max() < TOLERANCE
        start += len(call)
    logits = got.numel() * got.element_size()
    assert sum(p.bytes_copied for p in runner.last_plans) <= 2 * logits + 256


@pytest.mark.slow
def test_voxtral_realtime_through_executorch_runtime(voxtral_realtime):
    """ExecuTorch's own ``executorch.runtime`` Methods over the same program (ExecuTorch's Voxtral Realtime runner
    is C++ outside the wheel; this is its Python equivalent): the same tokens as eager."""
    from executorch.runtime import Runtime

    pte, _, (_, decoder, embedding) = voxtral_realtime
    program = Runtime.get().load_program(pte)
    embed, decode = program.load_method("token_embedding"), program.load_method("text_decoder")
    start = 0
    for call in ([3, 5, 7, 9], [11], [13]):
        ids, pos = torch.tensor([call]), torch.arange(start, start + len(call))
        embeds = embed.execute([ids])[0]
        with torch.no_grad():
            want = decoder(embedding(ids), pos)
        assert (decode.execute([embeds, pos])[0] - want).abs().max() < TOLERANCE
        start += len(call)


# ExecuTorch's qwen3_5 (the gated delta net): tests/backend/test_backend_gated_delta_net.py lowers and decodes it.


# ------------------------------------------------- examples/models/llama's Transformer: lfm2, qwen3, smollm3
# Each family is examples/models/llama's Transformer with its own params json (examples/models/<family>/config, not in
# the wheel: the same keys here, tiny). ModelType picks only the checkpoint conversion (none here) and the scaled-RoPE
# check (off in all three); 1.5.1's LlmConfig has no smollm3 one, and its export is the llama one all the same.
LLAMA_FAMILIES = {
    "lfm2": ("lfm2_350m", dict(use_hf_rope=True, use_qk_norm=True, qk_norm_before_rope=True, rope_theta=1e6,
                               layer_types=["conv", "full_attention"], norm_eps=1e-5)),
    "qwen3": ("qwen3_0_6b", dict(head_dim=16, use_hf_rope=True, use_qk_norm=True, qk_norm_before_rope=True,
                                 rope_theta=1e6, attention_qkv_bias=False, norm_eps=1e-6)),
    "smollm3": ("smollm2", dict(use_hf_rope=True, no_rope_layer_interval=4, rope_theta=5e6, attention_qkv_bias=False,
                                n_layers=4, norm_eps=1e-6)),  # its 4th layer without RoPE
}  # fmt: skip
TINY = dict(dim=32, hidden_dim=64, n_heads=2, n_kv_heads=1, n_layers=2, ffn_dim_multiplier=1)
TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12]  # a prompt of 4, then single tokens


def _initialized(model) -> None:
    """Llama2Model without a checkpoint builds on the meta device, ``to_empty``s it and resets the parameters that have
    ``reset_parameters``: the others (RMSNorm's weights) and every buffer (the causal mask, the RoPE tables, the caches
    and conv states) hold whatever the memory held. Each becomes what the module's constructor makes on the CPU, as a
    checkpoint would give it: the tensor of that name and shape, or zeros for a buffer the source transforms replaced
    (ExecuTorch's custom KV cache, zeros in its constructor too)."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer

    fresh_model = construct_transformer(model.params)
    made = dict(fresh_model.named_parameters()) | dict(fresh_model.named_buffers())
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            fresh = made.get(name)
            if fresh is not None and fresh.shape == tensor.shape:
                tensor.copy_(fresh)
            elif not isinstance(tensor, torch.nn.Parameter):
                tensor.zero_()


class LlamaExample:
    """One of ExecuTorch's llama-based example models, fluent: ``LlamaExample("qwen3").export().lower()`` then
    ``.decode(TOKENS)``. ``export`` is export_llama's own path (``_prepare_for_llama_export``: the model, its source
    transforms, then ``LLMEdgeManager.export`` and the re-export its lowering does), ``use_kv_cache`` and
    ``enable_dynamic_shape`` (its default) on, ``use_sdpa_with_kv_cache`` as given (ExecuTorch's XNNPACK configs turn it
    on: custom SDPA and ``llama.update_cache``). Random weights, nothing downloaded; BOS 0 and EOS 1, a byte-level
    tokenizer's vocabulary."""

    def __init__(self, family: str, custom_ops: bool = True, vocab: int = 320):
        self.family, self.custom_ops, self.vocab = family, custom_ops, vocab
        self.program = self.eager = self.metadata = self.pte = self.report = None

    def export(self, folder) -> LlamaExample:
        import json

        from executorch.examples.models.llama.export_llama_lib import _prepare_for_llama_export
        from executorch.extension.llm.export.config.llm_config import DtypeOverride, LlmConfig, ModelType

        model_class, params = LLAMA_FAMILIES[self.family]
        path = folder / f"{self.family}_params.json"
        path.write_text(json.dumps(TINY | params | {"vocab_size": self.vocab}))
        config = LlmConfig()
        config.base.model_class, config.base.params = ModelType(model_class), str(path)
        config.base.metadata = '{"get_bos_id": 0, "get_eos_ids": [1]}'  # as the family's yaml gives its own
        config.model.use_kv_cache, config.model.use_sdpa_with_kv_cache = True, self.custom_ops
        config.model.dtype_override = DtypeOverride("fp32")
        config.export.max_seq_length = config.export.max_context_length = CONTEXT
        torch.manual_seed(0)
        manager = _prepare_for_llama_export(config)
        _initialized(manager.model)
        self.eager = copy.deepcopy(manager.model).eval()
        manager.export()
        self.program, self.metadata = manager._export(manager.pre_autograd_graph_module), manager.metadata
        return self

    def lower(self) -> LlamaExample:
        self.pte = et_tensorrt.lower(self.program, constant_methods=self.metadata)
        self.report = et_tensorrt.lower.last_reports["forward"]
        return self

    def decode(self, tokens, prompt: int = 4):
        """decoders.decode's steps: the prompt in one call, then one token a call, against eager."""
        from et_tensorrt.testing import decoders

        def inputs(call, start):
            return (torch.tensor([call]), {"input_pos": torch.tensor([start])}), {}

        decoder = decoders.Decoder(self.family, self.program, self.eager, inputs, True, 0)
        return decoders.decode(decoder, self.pte, tokens, prompt=prompt)

    def summary(self, steps) -> str:
        """The docs/models.md row's numbers: partitions, states owned, bytes of a decode step, largest error."""
        owned = sum("owned by" in str(s) for s in self.report.states)
        return (
            f"{self.family}: {len(self.report.partitions)} partition(s), {owned} of {len(self.report.states)} states "
            f"owned, decode step {max(s.bytes_moved for s in steps[1:])} B (logits {4 * self.vocab} B), "
            f"max error {max(s.max_error for s in steps):.2e} over {len(steps)} calls"
        )

    def check(self, steps) -> None:
        """One partition, every KV cache / conv state owned by the delegate; each call within 1e-4 of eager; a
        decode step moving at most 2x the logits + 256 B."""
        assert len(self.report.partitions) == 1 and not self.report.host_nodes, self.report
        states = [n for n, _ in self.eager.named_buffers() if n.endswith(("_cache", "conv_state"))]
        assert {s.buffer for s in self.report.states} == set(states), [str(s) for s in self.report.states]
        assert all("owned by et_tensorrt_0" in str(s) for s in self.report.states), [str(s) for s in self.report.states]
        assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
        assert all(s.bytes_moved <= 2 * 4 * self.vocab + 256 for s in steps[1:]), [s.bytes_moved for s in steps]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(LLAMA_FAMILIES))
def test_llama_family_without_custom_ops(family, tmp_path):
    """export_llama's default (``use_sdpa_with_kv_cache`` off: the model's own SDPA and KV cache)."""
    example = LlamaExample(family, custom_ops=False).export(tmp_path).lower()
    example.check(example.decode(TOKENS))


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(LLAMA_FAMILIES))
def test_llama_family_as_its_xnnpack_config_exports_it(family, tmp_path):
    """As the family's XNNPACK config exports it: custom SDPA and ``llama.update_cache`` (a write at
    ``input_pos[0].item()`` into its ``[B, S, H, D]`` cache: a scatter in the engine, backend/value_slices.py)."""
    example = LlamaExample(family).export(tmp_path).lower()
    example.check(example.decode(TOKENS))


@pytest.mark.slow
def test_qwen3_through_textllmrunner_generates_what_eager_greedy_generates(tmp_path):
    """ExecuTorch's C++ ``TextLLMRunner`` (et_tensorrt.llm.TextGenerator) over the lowered program, the constant
    methods export_llama gives it: the text eager greedy decoding gives, each decode step within the bound."""
    from tokenizers import Tokenizer

    from et_tensorrt.llm import TextGenerator
    from et_tensorrt.testing import decoders

    tokenizer_path = tmp_path / "tokenizer.json"
    vocab = decoders.byte_level_tokenizer(tokenizer_path)
    example = LlamaExample("qwen3", custom_ops=False, vocab=vocab).export(tmp_path).lower()
    (tmp_path / "model.pte").write_bytes(example.pte)
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    prompt = tokenizer.encode("the cat", add_special_tokens=False).ids
    expected, logits = [], None
    with torch.no_grad():  # eager: the prompt in one call, then greedy tokens, as the runner feeds them
        logits = example.eager(torch.tensor([prompt]), {"input_pos": torch.tensor([0])})
        for position in range(len(prompt), len(prompt) + 8):
            token = int(logits.reshape(-1, vocab)[-1].argmax())
            if token == 1:
                break
            expected.append(token)
            logits = example.eager(torch.tensor([[token]]), {"input_pos": torch.tensor([position])})
    got = TextGenerator(tmp_path / "model.pte", tokenizer_path).generate("the cat", max_new_tokens=8)
    assert got.prompt_tokens == len(prompt) and got.generated_tokens >= len(expected)

    def printed(text):  # ExecuTorch's safe_printf leaves out a one-byte piece that is neither printable nor space
        return "".join(c for c in text if c.isprintable() or c.isspace())

    text = tokenizer.decode(expected, skip_special_tokens=False).replace("\ufffd", "")
    assert printed(got.text.decode("utf-8", "ignore")) == printed(text), (got.text, expected)
    assert got.step_bytes and all(b <= 2 * 4 * vocab + 256 for b in got.step_bytes), got.step_bytes


# ExecuTorch's Gemma 4 text decoder: tests/models/test_executorch_gemma4.py.
