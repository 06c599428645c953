"""``et_tensorrt.llm.export_causal_lm``: a HF causal LM, its local checkpoint folder or ExecuTorch's llama, exported
with its KV cache as one ``forward`` or as ``prefill``/``decode``, with the constant methods the LLM runners read.
Exports only (the README's recipe lowers and generates: tests/cli/test_readme.py)."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.llm import REQUIRED_METHODS, export_causal_lm
from et_tensorrt.testing import decoders

transformers = pytest.importorskip("transformers")


def tiny_llama(vocab: int = 96):
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=16, bos_token_id=3, eos_token_id=[4, 5],
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def token_range(program, index: int = 0):
    """(min, max) of the program's ``index``-th user input's token dim."""
    node = [n for n in program.graph.nodes if n.op == "placeholder"][-2 + index]
    size = node.meta["val"].shape[-1] if index == 0 else node.meta["val"].shape[0]
    if isinstance(size, int):
        return size, size
    bounds = program.range_constraints[size.node.expr]
    return int(bounds.lower), int(bounds.upper)


def test_checkpoint_folder_is_loaded_locally_with_its_ids(tmp_path):
    model = tiny_llama()
    model.save_pretrained(tmp_path)
    lm = export_causal_lm(tmp_path, max_seq_len=12)
    assert set(lm.constant_methods) == set(REQUIRED_METHODS)
    assert lm.constant_methods["get_vocab_size"] == 96 and lm.constant_methods["get_max_seq_len"] == 12
    assert lm.constant_methods["get_bos_id"] == 3 and lm.constant_methods["get_eos_ids"] == [4, 5]
    assert token_range(lm.programs) == (1, 11)  # one forward: a prompt or a token, within the cache
    weight = model.get_input_embeddings().weight
    assert any(t.shape == weight.shape and torch.equal(t, weight) for t in lm.programs.state_dict.values())


def test_prefill_decode_from_a_model():
    lm = export_causal_lm(tiny_llama(), max_seq_len=8, methods="prefill_decode", eos_ids=[7])
    assert set(lm.programs) == {"prefill", "decode"}
    assert token_range(lm.programs["prefill"]) == (1, 7) and token_range(lm.programs["decode"]) == (1, 1)
    assert lm.constant_methods["get_eos_ids"] == [7] and lm.constant_methods["enable_dynamic_shape"]


def test_executorch_llama_needs_the_tokenizers_ids_and_keeps_its_own_length():
    static = decoders.executorch_llama().eager  # use_kv_cache, one token a call
    with pytest.raises(ValueError, match="bos_id= and eos_ids="):
        export_causal_lm(static)
    with pytest.raises(ValueError, match=r"its own max_seq_len \(32"):
        export_causal_lm(static, max_seq_len=64, bos_id=0, eos_ids=[1])
    with pytest.raises(ValueError, match="enable_dynamic_shape=True"):
        export_causal_lm(static, methods="prefill_decode", bos_id=0, eos_ids=[1])
    lm = export_causal_lm(static, bos_id=0, eos_ids=[1])
    assert token_range(lm.programs) == (1, 1) and lm.constant_methods["enable_dynamic_shape"] is False


def test_refusals_say_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        export_causal_lm(tmp_path)
    with pytest.raises(TypeError, match="use_kv_cache=True"):
        export_causal_lm(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="'forward' or 'prefill_decode'"):
        export_causal_lm(tiny_llama(), methods="decode")


def test_sampling_head_is_exported_with_the_model_and_named_in_the_constants():
    """``sampling=``: every method returns the token it chose, the draw's seed and counter and the request's
    temperature, top-k and top-p as inputs when it samples; the constant methods say how. Exported only (lowered and
    decoded: tests/cli/test_cli_generate_sampling.py)."""
    from et_tensorrt.llm.sampling import Sampling, choice_inputs, choose

    head = Sampling(temperature=0.8, top_k=5, top_p=0.9)
    lm = export_causal_lm(tiny_llama(), max_seq_len=8, methods="prefill_decode", eos_ids=[7], sampling=head)
    assert lm.sampling == head and lm.constant_methods["get_sampling_top_p"] == 0.9
    # tokens, positions, seed, counter, temperature, top_k, top_p
    assert len(lm.programs["prefill"].graph_signature.user_inputs) == 7
    step = (torch.tensor([[3]]), torch.tensor([0]), torch.tensor([5]), torch.tensor([1]))
    token = lm.programs["decode"].module()(*step, *choice_inputs(head))
    assert token.shape == (1, 1) and token.dtype == torch.int64
    # ExecuTorch's llama (one token a call), greedy: the eager model's argmax
    model, eager = decoders.executorch_llama().eager, decoders.executorch_llama().eager
    lm = export_causal_lm(model, bos_id=0, eos_ids=[1], sampling="greedy")
    assert "get_sampling_temperature" in lm.constant_methods
    args = (torch.tensor([[3]]), torch.tensor([0]))
    expected = choose(eager(args[0], {"input_pos": args[1]}), Sampling())
    assert torch.equal(lm.programs.module()(*args), expected)
