"""The gated delta net (Qwen3.5's and Qwen3-Next's linear attention) lowers whole, its states in the delegate.

ExecuTorch's ``llama.gated_delta_rule`` (a CPU kernel of its custom ops library, what examples/models/llama exports
for Qwen3.5) becomes partition/delta_rule.py's chunked rule before ExecuTorch decomposes the program, for one token
or a dynamic number of them; the rule itself is checked against that kernel. ExecuTorch's own qwen3_5 model, exported
as its export script does it (examples/models/qwen3_5's config: one token a call, ``forward(tokens, input_pos)``),
lowers as one partition owning its four states, decodes 16 tokens as eager does through ``Runner`` and ExecuTorch's
``TextLLMRunner``. HF's Qwen3-Next and Qwen3.5 go through ``export_causal_lm`` (test_backend_recurrent_state.py)."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.llm import llm_methods
from et_tensorrt.partition import delta_rule, pre_decomposition
from et_tensorrt.testing import Tester, decoders

custom_ops = pytest.importorskip("executorch.extension.llm.custom_ops.custom_ops")  # registers llama.gated_delta_rule

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28]  # a prompt of 4, then 16
PROMPT = 4
TOLERANCE = 1e-4  # fp32 against eager fp32


def _inputs(tokens: int, heads: int = 2, key_dim: int = 4, value_dim: int = 3, seed: int = 0):
    """What AttentionGatedDeltaNet hands the op: unit keys, scaled unit queries, a decay in (0, 1], a state."""
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(1, heads, tokens, key_dim, generator=g), dim=-1) / key_dim**0.5
    k = torch.nn.functional.normalize(torch.randn(1, heads, tokens, key_dim, generator=g), dim=-1)
    v = torch.randn(1, heads, tokens, value_dim, generator=g)
    decay = torch.exp(-3 * torch.rand(1, heads, tokens, generator=g))
    beta = torch.rand(1, heads, tokens, generator=g)
    state = torch.randn(1, heads, key_dim, value_dim, generator=g)
    return q, k, v, decay, beta, state


@pytest.mark.parametrize(("tokens", "chunk"), [(1, 64), (5, 64), (70, 64), (19, 4)])
def test_the_chunked_rule_is_executorchs_kernel(tokens, chunk):
    """Inside one chunk, across two (the prefix scan), across five."""
    q, k, v, decay, beta, state = _inputs(tokens)
    expected, expected_state = torch.ops.llama.gated_delta_rule(q, k, v, decay, beta, state)
    out, last = delta_rule.gated_delta_rule(q, k, v, torch.log(decay), beta, state, chunk)
    assert float((out - expected).abs().max()) <= 1e-5 and float((last - expected_state).abs().max()) <= 1e-5


class Rule(torch.nn.Module):
    def forward(self, q, k, v, decay, beta, state):
        return torch.ops.llama.gated_delta_rule(q, k, v, decay, beta, state)


def _rule_program(tokens: int):
    seq = Dim("seq", min=1, max=96)
    shapes = ({2: seq}, {2: seq}, {2: seq}, {2: seq}, {2: seq}, None)
    return torch.export.export(Rule(), _inputs(tokens), dynamic_shapes=shapes)


def test_the_executorch_op_becomes_core_ops_for_any_length():
    program = pre_decomposition.transform(_rule_program(3))
    assert not [n for n in program.graph.nodes if "gated_delta_rule" in str(n.target)]
    for tokens in (1, 3, 70):
        inputs = _inputs(tokens, seed=tokens)
        for got, expected in zip(program.module()(*inputs), Rule()(*inputs), strict=True):
            assert float((got - expected).abs().max()) <= 1e-5


def test_a_decay_per_key_channel_stays_as_it_is():
    """``decay [batch, heads, tokens, key_dim]`` is another recurrence (Kimi's): left to the host, not misread."""
    q, k, v, decay, beta, state = _inputs(3)
    channelwise = decay[..., None].expand(*decay.shape, q.shape[-1]).contiguous()
    program = torch.export.export(Rule(), (q, k, v, channelwise, beta, state))
    assert delta_rule.decompositions(program.graph) == {}
    assert pre_decomposition.transform(program) is program


@pytest.mark.slow
def test_the_rule_lowers_whole_and_runs_as_the_kernel():
    inputs = _inputs(5)
    seq = Dim("seq", min=1, max=96)
    shapes = ({2: seq}, {2: seq}, {2: seq}, {2: seq}, {2: seq}, None)
    tester = Tester(Rule(), inputs, shapes)
    tester.lower(min_block_size=1).check_partitions(1).check_delegated_all()
    tester.run_both().check_parity()
    for tokens in (1, 70):
        tester.run_runner(list(_inputs(tokens, seed=tokens))).check_parity()


# ------------------------------------------------------------------ ExecuTorch's own qwen3_5


@pytest.fixture(scope="module")
def qwen3_5(tmp_path_factory):
    """examples/models/qwen3_5 as its export config has it (use_kv_cache, enable_dynamic_shape off: one token a
    call), with the constant methods TextLLMRunner reads; its vocabulary a byte-level tokenizer's."""
    folder = tmp_path_factory.mktemp("qwen3_5")
    tokenizer = folder / "tokenizer.json"
    vocab = decoders.byte_level_tokenizer(tokenizer)
    decoder = decoders.executorch_qwen3_5(vocab=vocab)
    constants = llm_methods(
        max_seq_len=decoders.MAX_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[1], enable_dynamic_shape=False
    )
    pte = folder / "model.pte"
    pte.write_bytes(et_tensorrt.lower(decoder.program, constant_methods=constants))
    return decoder, pte, et_tensorrt.lower.last_reports["forward"], tokenizer, vocab


@pytest.mark.slow
def test_qwen3_5_is_one_partition_owning_every_state(qwen3_5):
    decoder, _, report, _, _ = qwen3_5
    assert len(report.partitions) == 1 and not report.host_nodes, report
    assert len(decoder.states) == 4  # the delta net's conv and recurrent states, the attention layer's K and V
    assert {s.buffer for s in report.states} == set(decoder.states)
    assert all(s.partition is not None for s in report.states), [str(s) for s in report.states]


@pytest.mark.slow
def test_qwen3_5_decodes_as_eager_with_its_states_in_place(qwen3_5):
    decoder, pte, _, _, vocab = qwen3_5
    runner = Runner(pte)
    steps = decoders.decode(decoder, runner, TOKENS)
    assert len(steps) == len(TOKENS) and max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
    for step in steps:
        (plan,) = step.plans
        assert step.state_bytes == 0 and len(plan.states) == 4, plan
        assert all(s.update == "in place" for s in plan.states), plan
        assert step.bytes_moved <= 2 * 4 * vocab + 256, plan  # the bound: 2x the logits + 256 B
    # Runner.reset: every state its zeros again (position 0 resets them too: a token at 1 shows the held state)
    token = decoders._flat(decoder.inputs([TOKENS[1]], 1))
    held = runner.run(token)[0]
    runner.reset()
    fresh = runner.run(token)[0]
    assert float((held - fresh).abs().max()) > 1e-3
    assert float((fresh - Runner(pte).run(token)[0]).abs().max()) == 0.0


@pytest.mark.slow
def test_qwen3_5_through_textllmrunner_generates_what_eager_greedy_generates(qwen3_5):
    from tokenizers import Tokenizer

    from et_tensorrt.llm import TextGenerator
    from et_tensorrt.llm.runner.tokenizer_files import byte_decoder

    decoder, pte, _, tokenizer_path, vocab = qwen3_5
    tokenizer, pieces = Tokenizer.from_file(str(tokenizer_path)), byte_decoder()
    prompt = tokenizer.encode("the cat", add_special_tokens=False).ids
    expected, position, logits = [], 0, None
    with torch.no_grad():
        for token in prompt:  # eager, one token a call as the runner feeds it
            args, kwargs = decoder.inputs([token], position)
            logits, position = decoder.eager(*args, **kwargs), position + 1
        for _ in range(8):
            token = int(logits.reshape(-1, logits.shape[-1])[-1].argmax())
            if token == 1:
                break
            expected.append(token)
            args, kwargs = decoder.inputs([token], position)
            logits, position = decoder.eager(*args, **kwargs), position + 1
    generator = TextGenerator(pte, tokenizer_path)  # ExecuTorch's C++ TextLLMRunner over our program
    first = generator.generate("the cat", max_new_tokens=8)
    assert first.prompt_tokens == len(prompt) and first.generated_tokens >= len(expected)
    text = b"".join(bytes(pieces[c] for c in tokenizer.id_to_token(t)) for t in expected)
    assert first.text.decode("utf-8", "ignore") == text.decode("utf-8", "ignore")
    assert all(b <= 2 * 4 * vocab + 256 for b in first.step_bytes), first.step_bytes
    generator.reset()  # TextLLMRunner's own reset: position 0 again, which starts the states over
    assert generator.generate("the cat", max_new_tokens=8).text == first.text
