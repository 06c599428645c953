"""A decoder exported as two methods of one program (``prefill`` and ``decode``, as ExecuTorch's CUDA backend and
optimum-executorch export LLMs): the KV cache is one state of the loaded program, bound by both methods'
delegates, so decode reads what prefill wrote, through Runner and through ExecuTorch's own Python runtime; decode
runs prefill's engine (one stored), and its weights are stored once."""

from __future__ import annotations

import re

import pytest

import et_tensorrt
from et_tensorrt import _C, Runner
from et_tensorrt.errors import StateSharingError
from et_tensorrt.format.blob import NAMED_ENGINE, read_blob
from et_tensorrt.inspection import delegate_blobs, format_program, inspect_bytes, named_data
from et_tensorrt.runtime import state
from et_tensorrt.testing import decoders
from et_tensorrt.testing.decoders import PREFILL_DECODE

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]
PROMPT = 4
TOLERANCE = 1e-4  # fp32 against eager fp32
LOGITS = decoders.VOCAB * 4


@pytest.fixture(scope="module", params=["executorch_llama_dynamic", "hf_llama"])
def two_methods(request):
    decoder = {
        "executorch_llama_dynamic": lambda: decoders.executorch_llama(dynamic=True),
        "hf_llama": decoders.hf_llama,
    }[request.param]()
    pte = et_tensorrt.lower(decoders.prefill_decode(decoder, PROMPT))
    return decoder, pte, et_tensorrt.lower.last_reports


def _decode(decoder, runner_or_run):
    return decoders.decode(decoder, runner_or_run, TOKENS, prompt=PROMPT, methods=PREFILL_DECODE)


def test_both_methods_run_one_engine_over_the_shared_cache(two_methods):
    decoder, pte, reports = two_methods
    assert sorted(reports) == ["decode", "prefill"]
    assert all(len(r.partitions) == 1 and not r.host_nodes for r in reports.values())
    blobs = {m.name: m.delegates[0].blob for m in inspect_bytes(pte).methods if m.delegates}
    for blob in blobs.values():
        caches = [e for e in blob.states if "cache" in e.name]
        assert caches and all(e.methods == PREFILL_DECODE[::-1] for e in caches)  # sorted: decode, prefill
    prefill, decode = blobs["prefill"], blobs["decode"]
    assert [e.name for e in prefill.states] == [e.name for e in decode.states]
    # one engine, named data under one key: stored once, deserialized once per loaded program
    engine_keys = {n.key for b in blobs.values() for n in b.named if n.target == NAMED_ENGINE}
    assert len(engine_keys) == 1 and decode.metadata["engine_shared_with"] == "prefill (engine 1/1)"
    assert {e.name for e in decode.io} <= {e.name for e in prefill.io}  # bound by the engine's names
    assert all(d.is_static for e in decode.io for d in e.dims)  # decode's own (one-token) shapes
    named = named_data(pte)
    weights = [n.key for b in blobs.values() for n in b.named if n.target != NAMED_ENGINE]
    assert len(set(weights)) < len(weights) and set(weights) <= set(named)  # a weight both read is one datum


def test_decode_reads_what_prefill_wrote(two_methods):
    decoder, pte, _ = two_methods
    steps = _decode(decoder, pte)
    assert len(steps) >= 12 and steps[0].tokens == PROMPT
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
    for step in steps[1:]:
        assert step.bytes_moved <= 2 * LOGITS + 256, step.plans
        (plan,) = step.plans
        caches = [s for s in plan.states if "cache" in s.name]
        assert caches and all(s.update == "in place" and s.bytes == 0 for s in caches)
        assert all(list(s.methods) == ["decode", "prefill"] for s in caches)


def test_executorch_runtime_shares_it_too(two_methods):
    from executorch.runtime import Runtime

    decoder, pte, _ = two_methods
    program = Runtime.get().load_program(pte)
    methods = {}

    def run(inputs, method):
        if method not in methods:
            methods[method] = program.load_method(method)
        return methods[method].execute(inputs)

    steps = _decode(decoder, run)
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]


def test_executorch_own_multimethod_api_stores_what_the_methods_share_once(two_methods):
    """ExecuTorch's own multi-method lowering (no et_tensorrt.lower): the backend sees the methods and stores their
    weights and engine once, as et_tensorrt.lower does (issue 44: 1.99x the one-method program before)."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    from et_tensorrt.partition import TensorRTPartitioner

    decoder, _, _ = two_methods
    methods = decoders.prefill_decode(decoder, PROMPT)
    edge = to_edge_transform_and_lower(methods, partitioner={m: [TensorRTPartitioner()] for m in methods})
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
    pte = edge.to_executorch(config).buffer
    one_method = et_tensorrt.lower(decoders.prefill_decode(decoder, PROMPT)["prefill"])
    assert len(pte) <= 1.15 * len(one_method), (len(pte), len(one_method))
    steps = _decode(decoder, pte)
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]


def test_reset_frees_the_states_and_each_load_holds_its_own(two_methods):
    decoder, pte, _ = two_methods
    names = len(read_blob(delegate_blobs(pte)[0]).states)
    prompt = decoders._flat(decoder.inputs(TOKENS[:PROMPT], 0))
    token = decoders._flat(decoder.inputs([TOKENS[PROMPT]], PROMPT))
    runner, other = Runner(pte), Runner(pte)
    runner.run(prompt, method="prefill")
    after_prompt = runner.run(token, method="decode")[0]
    empty = other.run(token, method="decode")[0]  # its own load: its caches hold nothing of runner's prompt
    assert float((after_prompt - empty).abs().max()) > 1e-3
    assert sorted(state.held_states().values()) == [1] * names + [2] * names  # other: decode only; runner: both
    runner.reset()  # both methods' delegates go, and with them the program's states
    assert sorted(state.held_states().values()) == [1] * names
    assert float((runner.run(token, method="decode")[0] - empty).abs().max()) <= TOLERANCE


def test_inspect_says_which_methods_share_it(two_methods):
    _, pte, _ = two_methods
    text = format_program(inspect_bytes(pte)) + "\n"
    assert (
        len(re.findall(r"cache\S*\s+float32\(1, 2, 32, 16\)\s+in place\s+zeros\s+input \d.*\s+decode, prefill\n", text))
        == 8
    ), text


def test_a_shared_state_without_a_program_to_key_it_is_refused(two_methods):
    _, pte, _ = two_methods
    blob, named = delegate_blobs(pte)[0], named_data(pte)
    with pytest.raises(StateSharingError, match=r"shared by the methods decode, prefill, but this program carries no"):
        _C.create_executor(blob, 0, named)
    # the same blob as two delegates of one loaded program: one tensor per state
    a, _ = _C.create_executor(blob, 0, named, program_scope=7, method="prefill")
    b, _ = _C.create_executor(blob, 0, named, program_scope=7, method="decode")
    assert all(a.state[name] is b.state[name] for name in a.state)
    a.close(), b.close()
    assert not state.held_states()


def test_methods_declaring_one_buffer_differently_are_refused():
    short, long = decoders.executorch_llama(), decoders.executorch_llama()
    long.program = _longer_cache()
    with pytest.raises(StateSharingError) as e:
        et_tensorrt.lower({"prefill": long.program, "decode": short.program})
    assert re.match(
        r"the buffer 'layers\.0\.attention\.kv_cache\.k_cache' is updated by the methods 'decode' as float32\(1, 2, "
        r"32, 16\) \(zeros\) and 'prefill' as float32\(1, 2, 64, 16\) \(zeros\): methods of one program share a "
        r"buffer by its name",
        str(e.value),
    ), str(e.value)


def test_a_method_that_computes_otherwise_gets_its_own_engine():
    import copy

    import torch

    decoder = decoders.executorch_llama(dynamic=True)
    other = copy.deepcopy(decoder.eager)
    other.layers[0].attention.wo.weight.data.mul_(-1)  # same shapes, states and arguments; another result
    decode = torch.export.export(other, decoder.inputs([1], 0)[0], strict=False)
    pte = et_tensorrt.lower({"prefill": decoder.program, "decode": decode})
    blobs = [read_blob(b) for b in delegate_blobs(pte)]
    assert len({n.key for b in blobs for n in b.named if n.target == NAMED_ENGINE}) == 2
    assert not any("engine_shared_with" in b.metadata for b in blobs)


def _longer_cache():
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    args = ModelArgs(
        dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=decoders.VOCAB, hidden_dim=128, max_seq_len=64,
        max_context_len=64, max_batch_size=1, use_kv_cache=True,
    )  # fmt: skip
    model = construct_transformer(args).eval().requires_grad_(False)
    example = (torch.tensor([[1]]), {"input_pos": torch.tensor([0])})
    return torch.export.export(model, example, strict=False)


def test_encoder_decoder_decodes_like_eager_its_cache_in_the_delegate():
    """HF's seq2seq export (T5, random tiny config): an ``encoder`` and a ``decoder`` method in one program, the
    decoder's self-attention cache owned by its delegate; 12 greedy tokens against the exported programs run eagerly."""
    import torch

    seq2seq = decoders.t5_seq2seq()
    pte = et_tensorrt.lower(seq2seq.methods)
    assert all(len(r.partitions) == 1 for r in et_tensorrt.lower.last_reports.values())
    runner = Runner(pte)
    ids = torch.tensor([[5, 9, 3, 7, 2, 4]])
    hidden = runner.run([ids], method="encoder")[0]
    assert float((hidden - seq2seq.encoder(ids)).abs().max()) <= TOLERANCE
    token, errors = 0, []
    for position in range(12):
        args = [torch.tensor([[token]]), hidden, torch.tensor([position])]
        got = runner.run(args, method="decoder")[0]
        with torch.no_grad():
            expected = seq2seq.decoder(*args)
        errors.append(float((got - expected).abs().max()))
        (plan,) = runner.last_plans
        assert plan.bytes_copied <= 2 * LOGITS + 256  # the hidden states are shared, the cache stays put
        assert [s.update for s in plan.states if "key_cache" in s.name] == ["in place"] * 2
        token = int(expected[0, -1].argmax())
    assert max(errors) <= TOLERANCE, errors


def _projections(program) -> int:
    return sum(1 for n in program.graph.nodes if n.op == "call_function" and "linear" in str(n.target))


def test_encoder_decoder_cross_attention_keys_and_values_computed_once_per_input(tmp_path):
    """et_tensorrt.llm.export.seq2seq: the encoder returns each decoder layer's cross-attention K and V with the hidden
    states, the decoder reads them instead of projecting the hidden states at every token (two projections fewer per
    layer), and decodes like HF's own export; they are shared into the decoder's delegate, not copied. The program
    carries its constant methods: Transcriber writes the same tokens from a prompt."""
    import torch

    from et_tensorrt.llm import Transcriber, export_encoder_decoder

    seq2seq = decoders.t5_seq2seq()
    methods = export_encoder_decoder(seq2seq.model, max_cache_len=decoders.MAX_CONTEXT, max_input_len=16)
    layers = seq2seq.model.config.num_decoder_layers
    assert _projections(methods["decoder"]) == _projections(seq2seq.methods["decoder"]) - 2 * layers
    pte = tmp_path / "t5.pte"
    et_tensorrt.save(pte, methods)
    runner = Runner(pte)
    ids = torch.tensor([[5, 9, 3, 7, 2, 4]])
    hidden, *cross = runner.run([ids], method="encoder")
    assert len(cross) == 2 * layers and float((hidden - seq2seq.encoder(ids)).abs().max()) <= TOLERANCE
    token, errors, tokens = 0, [], []
    for position in range(12):
        got = runner.run([torch.tensor([[token]]), hidden, torch.tensor([position]), *cross], method="decoder")[0]
        with torch.no_grad():
            expected = seq2seq.decoder(torch.tensor([[token]]), hidden, torch.tensor([position]))
        errors.append(float((got - expected).abs().max()))
        (plan,) = runner.last_plans
        assert plan.bytes_copied <= 2 * LOGITS + 256  # hidden states and cross K/V shared, the cache in place
        token = int(expected[0, -1].argmax())
        tokens.append(token)
    assert max(errors) <= TOLERANCE, errors
    generator = Transcriber(pte, _word_tokenizer(tmp_path / "tokenizer.json"))
    generator.generate("w5 w9 w3 w7 w2 w4", max_new_tokens=12)
    eos = seq2seq.model.config.eos_token_id
    assert generator.last_tokens == (tokens[: tokens.index(eos) + 1] if eos in tokens else tokens)


def _word_tokenizer(path):
    """A HF tokenizer.json of the words w0 .. w127, one id each (decoders.VOCAB)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(decoders.VOCAB)}, unk_token="w2"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(path))
    return path


def test_a_decoder_only_model_is_refused_naming_the_causal_lm_export():
    from transformers import LlamaConfig, LlamaForCausalLM

    from et_tensorrt.errors import OptionError
    from et_tensorrt.llm import export_encoder_decoder

    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))  # fmt: skip
    with pytest.raises(OptionError, match="is not an encoder-decoder .* use et_tensorrt.llm.export_causal_lm"):
        export_encoder_decoder(model)
