"""Models whose state is not (only) a KV cache, exported by ``export_causal_lm`` (llm/export/recurrent.py): HF
Mamba (conv and SSM states), Bamba (Mamba2 and attention layers), LFM2 (short convolutions and attention), Qwen3-Next
and Qwen3.5 (gated delta nets and attention) as ``prefill``/``decode`` programs: one partition per method, every
state the delegate's and shared by both methods, updated in place (0 state bytes a step, only the tokens and logits
moving), 16 tokens as HF's own eager decodes them; ``Runner.reset`` makes every state its initial zeros again.
Mamba2, FalconH1 and Qwen3.5-MoE are checked eagerly (the same functions, the same exporter)."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.llm import export_causal_lm, llm_methods
from et_tensorrt.llm.export.recurrent import RecurrentModule
from et_tensorrt.testing import decoders
from et_tensorrt.testing.decoders import PREFILL_DECODE

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28]  # a prompt of 4, then 16
PROMPT = 4
TOLERANCE = 1e-4  # fp32 against eager fp32


# the gated delta nets (Qwen3-Next with MoE MLPs, Qwen3.5): a lowering of 2 minutes each on a CPU
GATED_DELTA_NETS = [pytest.param(family, marks=pytest.mark.slow) for family in ("qwen3_next", "qwen3_5")]


@pytest.fixture(scope="module", params=["mamba", "bamba", "lfm2", *GATED_DELTA_NETS])
def lowered(request, tmp_path_factory):
    """One program of the three methods the runners call: ``forward`` (TextLLMRunner's, a dynamic length) and
    ``prefill``/``decode``, all binding the same states; its vocabulary a byte-level tokenizer's."""
    folder = tmp_path_factory.mktemp(request.param)
    tokenizer = folder / "tokenizer.json"
    vocab = decoders.byte_level_tokenizer(tokenizer)
    decoder = decoders.hf_recurrent(request.param, vocab=vocab)
    methods = {"forward": decoder.program, **decoders.prefill_decode(decoder, PROMPT)}
    constants = llm_methods(max_seq_len=decoders.MAX_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[1])
    pte = folder / "model.pte"
    pte.write_bytes(et_tensorrt.lower(methods, constant_methods=constants))
    return decoder, pte, et_tensorrt.lower.last_reports, tokenizer, vocab


def test_one_partition_per_method_every_state_owned(lowered):
    decoder, _, reports, _, _ = lowered
    assert sorted(reports) == ["decode", "forward", "prefill"]
    for report in reports.values():
        assert len(report.partitions) == 1 and not report.host_nodes, report
        assert {s.buffer for s in report.states} == set(decoder.states)  # every conv, SSM, K and V state
        assert all(s.partition is not None for s in report.states), [str(s) for s in report.states]


@pytest.mark.parametrize("methods", [PREFILL_DECODE, None], ids=["prefill_decode", "forward"])
def test_decodes_as_hf_eager_with_the_states_in_place_in_the_delegate(lowered, methods):
    decoder, pte, _, _, vocab = lowered
    steps = decoders.decode(decoder, Runner(pte), TOKENS, prompt=PROMPT, methods=methods)
    assert len(steps) == 17 and steps[0].tokens == PROMPT
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
    for step in steps[1:]:
        (plan,) = step.plans
        assert step.state_bytes == 0 and len(plan.states) >= 3, plan
        assert all(s.update == "in place" and list(s.methods) == ["decode", "forward", "prefill"] for s in plan.states)
    # The logits, nothing else. (A dynamic forward's first call after the prompt is planned with the output's size
    # before the delegate resizes it to this call's: the plan counts the prompt's logits, the copy is one token's.)
    assert all(s.bytes_moved <= 4 * vocab for s in steps[1 if methods else 2 :]), [s.bytes_moved for s in steps]


def test_reset_makes_every_state_zeros_again(lowered):
    decoder, pte, _, _, _ = lowered
    prompt = decoders._flat(decoder.inputs(TOKENS[:PROMPT], 0))
    token = decoders._flat(decoder.inputs([TOKENS[PROMPT]], PROMPT))  # position 4: the states are read as held
    runner, fresh = Runner(pte), Runner(pte)
    runner.run(prompt, method="prefill")
    after_prompt = runner.run(token, method="decode")[0]
    from_zeros = fresh.run(token, method="decode")[0]
    assert float((after_prompt - from_zeros).abs().max()) > 1e-3  # the prompt's states count
    runner.reset()
    assert float((runner.run(token, method="decode")[0] - from_zeros).abs().max()) == 0.0


@pytest.mark.parametrize("family", ["mamba2", "falcon_h1", "qwen3_next", "qwen3_5", "qwen3_5_moe"])
def test_the_exported_module_computes_what_hf_computes(family):
    """The module export_causal_lm exports, run eagerly: a prompt, single tokens, a whole sequence in one call (several
    chunks of the scan) and a continuation of several tokens from a state (which HF's own Mamba path cannot do)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(decoders._recurrent_config(family)).eval()
    module, reference = RecurrentModule(model, decoders.MAX_CONTEXT), decoders._HFEager(model)
    ids = torch.tensor([TOKENS])
    with torch.no_grad():
        for start, end in [(0, PROMPT)] + [(p, p + 1) for p in range(PROMPT, PROMPT + 6)]:
            args = (ids[:, start:end], torch.arange(start, end))
            assert float((module(*args) - reference(*args)).abs().max()) <= TOLERANCE
        whole = reference(ids, torch.arange(len(TOKENS)))
        assert float((module(ids, torch.arange(len(TOKENS))) - whole).abs().max()) <= TOLERANCE
        module(ids[:, :PROMPT], torch.arange(PROMPT))
        continued = module(ids[:, PROMPT:], torch.arange(PROMPT, len(TOKENS)))
        assert float((continued - whole[:, PROMPT:]).abs().max()) <= TOLERANCE


def test_a_model_no_exporter_takes_is_one_error_naming_what_to_do():
    """Kimi Linear's delta attention (a decay per key channel) keeps its recurrent state with its own code: refused by
    name, before any export."""
    from transformers import AutoModelForCausalLM, KimiLinearConfig

    config = KimiLinearConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=32, pad_token_id=0, bos_token_id=0, eos_token_id=1,
    )  # fmt: skip
    with pytest.raises(TypeError) as e:
        export_causal_lm(AutoModelForCausalLM.from_config(config))
    assert str(e.value).startswith(
        "export_causal_lm cannot export KimiLinearForCausalLM: its recurrent layers (linear_attention: "
        "KimiLinearDeltaAttention) keep their state with other functions than transformers' causal_conv1d_forward"
    ) and "export the model with torch.export yourself and lower it with et_tensorrt.lower" in str(e.value)


# ------------------------------------------------------------------ ExecuTorch's TextLLMRunner


def test_textllmrunner_generates_what_hf_greedy_generates_continues_and_resets(lowered):
    from tokenizers import Tokenizer

    from et_tensorrt.llm import TextGenerator
    from et_tensorrt.llm.runner.tokenizer_files import byte_decoder

    decoder, pte, _, tokenizer_path, vocab = lowered
    tokenizer, pieces = Tokenizer.from_file(str(tokenizer_path)), byte_decoder()
    prompt = tokenizer.encode("the cat", add_special_tokens=False).ids
    ids, expected = list(prompt), []
    with torch.no_grad():
        for _ in range(8):  # greedy with HF's own model and cache, until </s>
            logits = decoder.eager(torch.tensor([ids]), torch.arange(len(ids)))  # from position 0: a fresh cache
            token = int(logits[0, -1].argmax())
            if token == 1:
                break
            ids.append(token)
            expected.append(token)
    generator = TextGenerator(pte, tokenizer_path)  # ExecuTorch's C++ TextLLMRunner over our program
    first = generator.generate("the cat", max_new_tokens=8)
    assert first.prompt_tokens == len(prompt) and first.generated_tokens >= len(expected)
    # a random model's bytes need not be UTF-8: the runner prints each token's bytes as far as they decode on their
    # own (a character split across two tokens does not), and no control characters
    text = "".join(_utf8(bytes(pieces[c] for c in tokenizer.id_to_token(t))) for t in expected)
    assert _utf8(first.text) == text
    # the logits (the first step after the prompt is planned with the prompt's: see the Runner test above)
    assert len(first.step_bytes) > 1 and all(b <= vocab * 4 + 64 for b in first.step_bytes[1:]), first.step_bytes
    generator.generate(" sat on", max_new_tokens=4)  # continues from the states the first left
    generator.reset()  # TextLLMRunner's own reset: its position back to 0, which starts the states over
    assert generator.generate("the cat", max_new_tokens=8).text == first.text


def _utf8(data: bytes) -> str:
    return "".join(c for c in data.decode("utf-8", "ignore") if c.isprintable())
