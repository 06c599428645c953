"""`check` on one program of each family in docs/models.md, exported as the docs show and saved with
torch.export.save: a mixture of experts, a recurrent model (Mamba), a speech encoder–decoder (Whisper), a
vision–language model (LLaVA) and ExecuTorch's own llama (examples/models/llama). Each is lowered, its checked
method run once, and a few tokens decoded through its methods as its driver calls them (cli/check_calls.py) against
the exported programs run eagerly; a perturbed weight fails it. The README's Llama (a text decoder, both forms):
tests/cli/test_cli_check_llm.py."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from et_tensorrt.cli import commands
from et_tensorrt.cli.check_calls import ENCODER_DECODER, MULTIMODAL, TEXT_DECODER_FAMILY, family
from et_tensorrt.llm.constants import REQUIRED_METHODS, SEQ2SEQ_METHODS


def test_the_family_comes_from_the_method_names_and_constant_methods():
    llm = set(REQUIRED_METHODS)
    assert family({"prefill", "decode", *llm}) == (TEXT_DECODER_FAMILY, ("prefill", "decode"))
    assert family({"forward", *llm}) == (TEXT_DECODER_FAMILY, ("forward",))
    assert family({"encoder", "decoder", *SEQ2SEQ_METHODS}) == (ENCODER_DECODER, ("encoder", "decoder"))
    multimodal = {"audio_encoder", "token_embedding", "text_decoder", *llm}
    assert family(multimodal) == (MULTIMODAL, ("audio_encoder", "token_embedding", "text_decoder"))
    assert family({"forward"}) is None  # no constant methods a driver reads: no LLM, no decode
    assert family({"encoder", "decoder"}) is None
    assert family({"token_embedding", "text_decoder", *llm}) is None  # no encoder: not a program MultimodalRunner runs


def _moe(vocab):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from et_tensorrt.llm import export_causal_lm

    config = Qwen3MoeConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=64, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, bos_token_id=0, eos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    return export_causal_lm(Qwen3MoeForCausalLM(config).eval(), methods="prefill_decode", max_seq_len=24).programs


def _mamba(vocab):
    from transformers import AutoModelForCausalLM

    from et_tensorrt.llm import export_causal_lm
    from et_tensorrt.testing.decoders import _recurrent_config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_recurrent_config("mamba", vocab)).eval()
    return export_causal_lm(model, methods="prefill_decode", max_seq_len=24).programs


def _whisper(vocab):
    from et_tensorrt.llm import export_encoder_decoder
    from et_tensorrt.testing import speech as speech_models

    return export_encoder_decoder(speech_models.whisper(vocab), max_cache_len=32).programs


def _llava(vocab):
    from et_tensorrt.llm import export_multimodal
    from et_tensorrt.testing import multimodal_models

    return export_multimodal(multimodal_models.llava(vocab), max_seq_len=48).programs


def _executorch_llama(vocab):
    from et_tensorrt.llm import export_causal_lm
    from et_tensorrt.testing import decoders

    model = decoders.executorch_llama(dynamic=True, layers=1, vocab=vocab, context=32).eager
    return export_causal_lm(model, max_seq_len=32, methods="prefill_decode", bos_id=0, eos_ids=[1]).programs


# family -> (its exporter, the method check runs, the methods whose weights a mismatch perturbs)
FAMILIES = {
    "moe": (_moe, "decode", ("prefill", "decode")),
    "recurrent": (_mamba, "decode", ("prefill", "decode")),
    # the encoder only: its one-call check (the decoder on random inputs) cannot see it, the decode must
    "speech": (_whisper, "decoder", ("encoder",)),
    "multimodal": (_llava, "text_decoder", ("vision_encoder",)),
    "executorch": (_executorch_llama, "decode", ("prefill", "decode")),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each family's programs, exported on first use into a folder of their own, one .pt2 per method."""
    from et_tensorrt.testing.decoders import byte_level_tokenizer

    root = tmp_path_factory.mktemp("check_families")
    vocab = byte_level_tokenizer(root / "tokenizer.json")
    made = {}

    def folder(name):
        if name not in made:
            made[name] = root / name
            made[name].mkdir()
            for method, program in FAMILIES[name][0](vocab).items():
                torch.export.save(program, made[name] / f"{method}.pt2")
        return made[name]

    return folder


def _check(run_cli, folder, method) -> tuple[int, dict]:
    named = [f"{p.stem}={p.name}" for p in sorted(folder.glob("*.pt2"))]
    result = run_cli("check", *named, "--method", method, "--json", cwd=folder)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.startswith("{"), result.stdout + result.stderr
    return result.status, json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_check_decodes_each_family_against_eager(name, folders, run_cli):
    status, report = _check(run_cli, folders(name), FAMILIES[name][1])
    assert status == 0 and report["passed"], report
    decode = report["decode"]
    assert decode["tokens"] == decode["eager_tokens"] and len(decode["tokens"]) == 4, decode
    assert decode["calls_passed"] == decode["calls"]
    assert all(decode["calls_per_method"][m] >= 1 for m in decode["methods"]), decode  # every method called
    assert decode["onnx_checked"] == [f"{m} engine 1/1" for m in decode["methods"]]  # every engine's ONNX


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_a_perturbed_weight_fails_each_familys_check(name, folders, run_cli, monkeypatch):
    _, method, perturbed = FAMILIES[name]
    lower = commands.lower_program

    def lower_perturbed(programs, *args, **kwargs):  # the lowering gets other weights than the eager reference
        programs = copy.deepcopy(programs)
        generator = torch.Generator().manual_seed(0)
        for each in perturbed:  # noise on each weight matrix (parameters, not a state's initial contents)
            program = programs[each]
            for name in program.graph_signature.parameters:
                weight = program.state_dict[name]
                if weight.is_floating_point() and weight.dim() == 2:
                    with torch.no_grad():
                        weight.add_(0.1 * torch.randn(weight.shape, generator=generator))
        return lower(programs, *args, **kwargs)

    monkeypatch.setattr(commands, "lower_program", lower_perturbed)
    status, report = _check(run_cli, folders(name), method)
    assert status == 3 and not report["passed"], report
    decode = report["decode"]
    assert decode["calls_passed"] < decode["calls"] and decode["problems"], decode
    if method not in perturbed:  # the checked method's own call matched: only the decode saw the encoder's weight
        assert report["outputs"]["passed"]
        assert decode["problems"][0].startswith(f"decode call 1 ({perturbed[0]})"), decode["problems"]
