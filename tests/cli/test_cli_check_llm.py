"""`check` on the LLM programs the README makes (prefill/decode and one forward, saved with torch.export.save): the
shared states as the lowering sees them, each engine's ONNX fed its states, a few tokens decoded against the
exported programs run eagerly; a perturbed weight fails it. `lower` adds the constant methods the .pt2 files carry
(or --constant-methods), so `generate` runs what it wrote."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from et_tensorrt.cli import commands
from et_tensorrt.cli.eager import EagerProgram
from et_tensorrt.llm.constants import carried, carry


class Counter(torch.nn.Module):
    """A buffer updated in place, as HF's static cache is (the saved program's signature does not say so)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3), persistent=False)

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


def test_eager_reference_leaves_the_programs_and_shares_a_buffer_across_methods():
    a = torch.export.export(Counter(), (torch.ones(3),))
    b = torch.export.export(Counter(), (torch.ones(3),))
    eager = EagerProgram({"prefill": a, "decode": b})
    eager.run([torch.ones(3)], "prefill")
    (second,) = eager.run([torch.ones(3)], "decode")  # decode reads what prefill left
    assert torch.equal(second, torch.full((3,), 4.0))
    assert torch.equal(a.constants["total"], torch.zeros(3)) and torch.equal(b.constants["total"], torch.zeros(3))


def test_constant_methods_survive_torch_export_save(tmp_path):
    ep = torch.export.export(Counter(), (torch.ones(3),))
    carry(ep, {"get_vocab_size": 64, "get_eos_ids": [1, 2]})
    torch.export.save(ep, tmp_path / "p.pt2")
    assert carried(torch.export.load(tmp_path / "p.pt2")) == {"get_vocab_size": 64, "get_eos_ids": [1, 2]}


@pytest.mark.parametrize(
    "given, why",
    [
        ("[1]", "give a JSON object"),
        ('{"get_eos_ids": [1, "x"]}', "a non-empty list of ints or of floats"),
        ('{"get bos": 1}', "is not a method name"),
        ("{bad", "not JSON"),
    ],
)
def test_bad_constant_methods_are_one_usage_error(tmp_path, run_cli, given, why):
    (tmp_path / "p.pt2").write_bytes(b"")
    result = run_cli("lower", "p.pt2", "-o", "p.pte", "--constant-methods", given, cwd=tmp_path)
    assert result.status == 2 and "--constant-methods" in result.stderr and why in result.stderr, result.stderr


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The README's model (a tiny random Llama), exported both ways and saved with torch.export.save."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from et_tensorrt.llm import export_causal_lm
    from et_tensorrt.testing.decoders import byte_level_tokenizer

    tmp = tmp_path_factory.mktemp("check_llm")
    vocab = byte_level_tokenizer(tmp / "tokenizer.json")
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, bos_token_id=0, eos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    lm = export_causal_lm(model, max_seq_len=32, methods="prefill_decode")
    torch.export.save(lm.programs["prefill"], tmp / "prefill.pt2")
    torch.export.save(lm.programs["decode"], tmp / "decode.pt2")
    torch.export.save(export_causal_lm(model, max_seq_len=32).programs, tmp / "forward.pt2")
    return tmp


def _checked(result) -> dict:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.startswith("{"), result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_check_passes_on_the_prefill_decode_pair_and_decodes_tokens(exports, run_cli):
    result = run_cli("check", "prefill=prefill.pt2", "decode=decode.pt2", "--method", "decode", "--json", cwd=exports)
    report = _checked(result)
    assert result.status == 0 and report["passed"], report
    assert report["onnx_checked"] == 1  # decode's engine, fed the states it binds
    decode = report["decode"]
    assert decode["methods"] == ["prefill", "decode"] and decode["calls_passed"] == decode["calls"] == 4
    assert decode["tokens"] == decode["eager_tokens"]
    assert decode["onnx_checked"] == ["prefill engine 1/1", "decode engine 1/1"]


@pytest.mark.slow
def test_check_passes_on_the_forward_program_with_its_state_inputs(exports, run_cli):
    result = run_cli("check", "forward.pt2", cwd=exports)
    assert result.status == 0, result.stdout + result.stderr
    assert "the ONNX of 1 matched eager PyTorch" in result.stdout
    assert "decoded 4 token(s) through forward" in result.stdout


@pytest.mark.slow
def test_a_perturbed_weight_fails_check(exports, run_cli, monkeypatch):
    lower = commands.lower_program

    def perturbed(programs, *args, **kwargs):  # the lowering gets other weights than the eager reference
        programs = copy.deepcopy(programs)
        for program in programs.values():
            weight = next(v for k, v in program.state_dict.items() if k.endswith("q_proj.weight"))
            with torch.no_grad():
                weight.add_(0.5)
        return lower(programs, *args, **kwargs)

    monkeypatch.setattr(commands, "lower_program", perturbed)
    result = run_cli("check", "prefill=prefill.pt2", "decode=decode.pt2", "--method", "decode", "--json", cwd=exports)
    report = _checked(result)
    assert result.status == 3 and not report["passed"]
    assert not report["outputs"]["passed"] and report["decode"]["calls_passed"] < report["decode"]["calls"]


@pytest.mark.slow
def test_lower_adds_the_carried_llm_methods_so_generate_runs_it(exports, run_cli):
    lowered = run_cli("lower", "prefill=prefill.pt2", "decode=decode.pt2", "-o", "llm.pte", cwd=exports)
    assert lowered.status == 0, lowered.stdout + lowered.stderr
    assert "constant methods (carried by prefill.pt2, decode.pt2): get_max_seq_len=32" in lowered.stdout
    generated = run_cli(
        "generate", "llm.pte", "--tokenizer", "tokenizer.json", "--prompt", "the cat", "--max-new-tokens", 3,
        cwd=exports,
    )  # fmt: skip
    assert generated.status == 0, generated.stdout + generated.stderr
    assert "MethodsDriver" in generated.stdout + generated.stderr
