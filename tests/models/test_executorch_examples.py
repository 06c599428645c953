"""ExecuTorch's own example models (the installed wheel's ``executorch.examples.models``, tiny configs, random
weights, nothing downloaded), exported as each model's export script does it, lowered with et_tensorrt and decoded
against eager: every method one engine, its KV cache owned by the delegate. Their programs carry ExecuTorch's LLM
custom ops (``llama.custom_sdpa``, ``llama.update_cache``), which ``partition/llama_custom_ops.py`` decomposes."""

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


# ExecuTorch's qwen3_5 (the gated delta net): tests/backend/test_backend_gated_delta_net.py lowers and decodes it.


def _gemma4():
    """examples/models/gemma4's text decoder as export_gemma4.py exports it (custom SDPA, dynamic length, audio
    embeddings as an input), 2 layers (a sliding and a full attention one)."""
    from executorch.examples.models.gemma4.text_decoder.gemma4_config import Gemma4Config
    from executorch.examples.models.gemma4.text_decoder.gemma4_model import Gemma4Model

    config = Gemma4Config(
        hidden_size=DIM, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        global_head_dim=16, vocab_size=VOCAB, intermediate_size=64, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=16, hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=0, audio_token_id=120, image_token_id=121,
        audio_vocab_offset=122,
    )  # fmt: skip
    config.use_kv_cache, config.max_seq_len, config.max_context_len = True, CONTEXT, CONTEXT
    config.enable_dynamic_shape, config.use_custom_sdpa = True, True
    torch.manual_seed(0)
    wrapper = Gemma4Model(config=config, dtype=torch.float32)
    model = wrapper.get_eager_model().eval()
    eager = copy.deepcopy(model)
    ids, pos, embeds = wrapper.get_example_inputs_with_audio(seq_len=5)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]), torch.no_grad():
        program = torch.export.export(
            model,
            (ids,),
            kwargs={"input_pos": pos, "inputs_embeds": embeds},
            dynamic_shapes=wrapper.get_dynamic_shapes(with_audio_embeds=True),
        )
    return program, eager


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the cache length start_pos + S (an .item()) and its _check conjunctions stay on the host: 2 partitions, "
    "and the first call fails (the delegate's input 3: size 0 outside the engine's range (1..30,))",
)
def test_gemma4_text_decoder():
    program, eager = _gemma4()
    pte = et_tensorrt.lower({"text_decoder": program})
    (report,) = et_tensorrt.lower.last_reports.values()
    runner, start = et_tensorrt.Runner(pte), 0
    for call in ([3, 5, 7, 9], [11], [13]):
        ids, pos = torch.tensor([call]), torch.arange(start, start + len(call))
        embeds = torch.randn(1, len(call), DIM)
        with torch.no_grad():
            want = eager(ids, input_pos=pos, inputs_embeds=embeds)
        got = runner.run([ids, pos, embeds], method="text_decoder")[0]
        assert (got - want.reshape(got.shape)).abs().max() < TOLERANCE
        start += len(call)
    assert len(report.partitions) == 1 and not report.host_nodes
