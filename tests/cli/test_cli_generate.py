"""``generate`` (et_tensorrt.llm): ExecuTorch's own C++ TextLLMRunner drives a decoder lowered with
et_tensorrt, KV cache in the delegate: the same text as the same program lowered with XNNPACK, a prompt
continued, and reset to start over."""

from __future__ import annotations

import re

import pytest

import et_tensorrt
from et_tensorrt.errors import RunnerError
from et_tensorrt.llm import TextGenerator, llm_methods
from et_tensorrt.testing import decoders

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def llm_export(tmp_path_factory):
    """(folder, tokenizer, export, methods): ``export()`` is ExecuTorch's default LLM export (enable_dynamic_shape),
    one program per lowering."""
    folder = tmp_path_factory.mktemp("llm")
    tokenizer = folder / "tokenizer.json"
    vocab = decoders.byte_level_tokenizer(tokenizer)
    methods = llm_methods(max_seq_len=decoders.MAX_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[1])
    return folder, tokenizer, lambda: decoders.executorch_llama(dynamic=True, vocab=vocab).program, methods


@pytest.fixture(scope="module")
def llm(llm_export):
    folder, tokenizer, export, methods = llm_export
    ours = folder / "et_tensorrt.pte"
    ours.write_bytes(et_tensorrt.lower(export(), constant_methods=methods))
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    xnnpack = folder / "xnnpack.pte"
    edge = to_edge_transform_and_lower(export(), partitioner=[XnnpackPartitioner()], constant_methods=methods)
    xnnpack.write_bytes(edge.to_executorch().buffer)
    return ours, xnnpack, tokenizer


def test_same_text_as_xnnpack_then_continued_then_reset(llm):
    ours, xnnpack, tokenizer = llm
    texts = {}
    for name, pte in (("et_tensorrt", ours), ("xnnpack", xnnpack)):
        generator = TextGenerator(pte, tokenizer)
        pieces = []
        first = generator.generate("the cat", max_new_tokens=8, on_token=pieces.append)
        assert first.prompt_tokens >= 2 and first.generated_tokens >= 1
        assert b"".join(pieces) == first.text  # streamed: every piece, the runner's own newlines and stats left out
        # bytes per decode step: our delegate's recorded plans (XNNPACK's calls record none)
        assert len(first.step_bytes) == (first.generated_tokens - 1 if name == "et_tensorrt" else 0)
        more = generator.generate(" sat on", max_new_tokens=4)  # continues at the position the first left
        generator.reset()
        again = generator.generate("the cat", max_new_tokens=8)
        assert again.text == first.text  # a reset sequence decodes as the first did
        texts[name] = (first.text, more.text)
    assert texts["et_tensorrt"] == texts["xnnpack"]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_fp32_program_in_half_precision_writes_the_same_text(llm, llm_export, precision, tmp_path):
    """Lowered from fp32 with precision fp16/bf16 (its KV cache in that precision, in the delegate), TextLLMRunner
    writes what the fp32 lowering writes: 16 tokens greedy, continued, and again after a reset."""
    ours, _, tokenizer = llm
    folder, _, export, methods = llm_export
    half = tmp_path / f"{precision}.pte"
    half.write_bytes(et_tensorrt.lower(export(), constant_methods=methods, precision=precision))
    texts = []
    for pte in (ours, half):
        generator = TextGenerator(pte, tokenizer)
        first = generator.generate("the cat", max_new_tokens=17)  # the prompt's call yields the first of them
        assert first.generated_tokens == 17 or first.ended_at_eos
        more = generator.generate(" sat on", max_new_tokens=4)
        generator.reset()
        assert generator.generate("the cat", max_new_tokens=17).text == first.text
        texts.append((first.text, more.text))
    assert texts[1] == texts[0]


def test_cli_generate(llm, run_cli):
    ours, _, tokenizer = llm
    result = run_cli(
        "generate", ours, "--tokenizer", tokenizer, "--prompt", "the cat", "--max-new-tokens", 4, cwd=ours.parent
    )
    assert result.status == 0 and result.noise == [], result.stderr
    assert result.stdout.startswith("the cat")
    assert "generated in" in result.stdout and "by TextLLMRunner; the KV cache stays in the delegate" in result.stdout
    assert re.search(
        r"^bytes moved per decode step: median [\d,]+ B \(min [\d,]+ B, max [\d,]+ B, \d step\(s\)\); "
        r"counted: the copies the et_tensorrt delegates made",
        result.stdout,
        re.M,
    ), result.stdout


@pytest.mark.slow
def test_the_fallback_notice_comes_before_the_text_never_inside_it(llm):
    """Issue 54 row 4: on a terminal stdout and stderr are one stream; without a GPU the fallback notice, logged when
    TextLLMRunner first loads its methods (after the prompt was printed), split the text. A fresh process whose
    stderr is its stdout, as a terminal shows them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import torch

    ours, _, tokenizer = llm
    repo = str(Path(et_tensorrt.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    env.pop("ET_TENSORRT_FALLBACK", None)
    args = ("generate", ours, "--tokenizer", tokenizer, "--prompt", "the cat", "--max-new-tokens", 6)
    shown = subprocess.run(
        [sys.executable, "-m", "et_tensorrt", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stdout
    out = shown.stdout
    text = out[out.index("the cat") : out.index(" prompt token(s), ")]  # the prompt, its continuation, a blank line
    assert "[et_tensorrt]" not in text and "note: " not in text and text.endswith("\n\n2"), out
    assert "[et_tensorrt]" not in out[out.index(" prompt token(s), ") :], out  # none held back for the end here
    if not torch.cuda.is_available():  # the notice this was about, before the text
        assert "  [et_tensorrt] warning: partition runs with PyTorch on cpu" in out[: out.index("the cat")], out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """ExecuTorch's llama lowered without the LLM constant methods (what generate refuses), once for the module."""
    path = tmp_path_factory.mktemp("plain") / "plain.pte"
    path.write_bytes(et_tensorrt.lower(decoders.executorch_llama().program))
    return path


def test_program_without_llm_methods_is_refused(llm, plain):
    _, _, tokenizer = llm
    with pytest.raises(RunnerError, match=r"no method\(s\) get_max_seq_len, .*llm_methods"):
        TextGenerator(plain, tokenizer)


@pytest.mark.parametrize("make", ["executorch_llama", "hf_llama"])
def test_prefill_and_decode_methods_generate_the_one_method_text(llm, tmp_path, make):
    """A program of prefill and decode methods (export_prefill_decode), driven by TextGenerator through Runner,
    generates what the one-method program generates through ExecuTorch's TextLLMRunner."""
    import torch

    from et_tensorrt.llm import MethodsDriver, export_prefill_decode

    ours, _, tokenizer = llm
    vocab = decoders.byte_level_tokenizer(tmp_path / "again.json")
    if make == "executorch_llama":
        model = decoders.executorch_llama(dynamic=True, vocab=vocab).eager
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=decoders.MAX_CONTEXT,
        )  # fmt: skip
        model = LlamaForCausalLM(config).eval()
    methods = llm_methods(max_seq_len=decoders.MAX_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[1])
    two = tmp_path / "two.pte"
    two.write_bytes(et_tensorrt.lower(export_prefill_decode(model), constant_methods=methods))
    generator = TextGenerator(two, tokenizer)
    assert isinstance(generator, MethodsDriver)
    pieces = []
    first = generator.generate("the cat", max_new_tokens=8, on_token=pieces.append)
    assert b"".join(pieces) == first.text
    assert len(first.step_bytes) == first.generated_tokens - 1 and "method boundary" in first.bytes_counted
    generator.reset()
    assert generator.generate("the cat", max_new_tokens=8).text == first.text
    if make == "executorch_llama":  # the same weights as the fixture's one-method program
        theirs = TextGenerator(ours, tokenizer).generate("the cat", max_new_tokens=8)
        assert theirs.prompt_tokens == first.prompt_tokens
        assert theirs.generated_tokens == first.generated_tokens  # both count the prompt call's token
        assert _printed(first.text) == _printed(theirs.text)


def _printed(text: bytes) -> str:
    """What a terminal shows of a random model's bytes: TextLLMRunner prints no control character and no broken
    UTF-8 sequence."""
    return "".join(c for c in text.decode("utf-8", "ignore") if c.isprintable() or c in "\n\t")


def test_both_runners_count_every_token_they_generate(llm):
    """Issue 44 row 7: TextLLMRunner's statistics count its decode calls, not the token the prompt's call chose;
    TextGenerator counts every token, as MethodsDriver (here over the same ``forward``) does."""
    from et_tensorrt.llm import MethodsDriver

    ours, _, tokenizer = llm
    theirs = TextGenerator(ours, tokenizer).generate("the cat", max_new_tokens=7)
    pieces = []
    driven = MethodsDriver(ours, tokenizer).generate("the cat", max_new_tokens=7, on_token=pieces.append)
    assert driven.by == "et_tensorrt.llm.MethodsDriver (forward/forward methods)"
    assert _printed(driven.text) == _printed(theirs.text)
    assert theirs.generated_tokens == driven.generated_tokens == len(pieces) + driven.ended_at_eos
    assert len(theirs.step_bytes) == theirs.generated_tokens - 1  # the decode calls, after the prompt's
    assert theirs.tokens_per_second == theirs.generated_tokens / theirs.seconds


def test_sampling_takes_a_seed_and_repeats_with_a_forward_program(llm, run_cli):
    """Issue 44 row 13: ``temperature=0.8`` twice under one ``torch.manual_seed``, or with one ``seed``, writes one
    text: TextLLMRunner's sampler is seeded from the clock and takes no seed, so a sampled sequence of a ``forward``
    program runs through MethodsDriver over that ``forward``; greedy ones stay TextLLMRunner's."""
    import torch

    ours, _, tokenizer = llm
    generator = TextGenerator(ours, tokenizer)
    texts = []
    for seed in (None, None, 5, 5):
        if seed is None:
            torch.manual_seed(0)
        result = generator.generate("the cat", max_new_tokens=8, temperature=0.8, seed=seed)
        assert result.by == "et_tensorrt.llm.MethodsDriver (forward/forward methods)"
        texts.append(result.text)
        generator.reset()
    assert texts[0] == texts[1] and texts[2] == texts[3]
    assert generator.generate("the cat", max_new_tokens=2).by == "TextLLMRunner"  # greedy, after a reset
    with pytest.raises(RunnerError, match=r"TextLLMRunner generated this sequence greedily .* reset\(\) first"):
        generator.generate(" sat", temperature=0.8, seed=5)
    args = ("generate", ours, "--tokenizer", tokenizer, "--prompt", "the cat", "--max-new-tokens", 8)
    runs = [run_cli(*args, "--temperature", "0.8", "--seed", 5, cwd=ours.parent) for _ in range(2)]
    assert all(r.status == 0 for r in runs), runs[0].stderr
    assert runs[0].stdout.split("\n\n")[0] == runs[1].stdout.split("\n\n")[0]
    assert "tokens: temperature 0.8, top-k 50, top-p 1, seed 5; chosen on the host from the logits" in runs[0].stdout
    assert run_cli(*args, "--top-p", "1.5", cwd=ours.parent).error_line.startswith("error: argument --top-p")


def test_an_end_of_sequence_token_ends_the_text_unprinted(llm, llm_export):
    """Issue 44 row 13: TextLLMRunner prints the EOS token's text (``</s>``); TextGenerator's text and pieces leave it
    out, count it, and say the sequence ended there. The prompt: the first one-token prompt whose greedy continuation
    reaches ``</s>`` (id 1) within 20 tokens, found with the eager model."""
    import torch
    from tokenizers import Tokenizer

    from et_tensorrt.llm import MethodsDriver

    ours, _, tokenizer = llm
    words = Tokenizer.from_file(str(tokenizer))
    eager = decoders.executorch_llama(dynamic=True, vocab=words.get_vocab_size()).eager
    prompt = None
    with torch.no_grad():
        for start in range(2, words.get_vocab_size()):
            text = words.decode([start])
            if words.encode(text, add_special_tokens=False).ids != [start]:
                continue
            tokens, out = [start], []
            for position in range(20):
                logits = eager(torch.tensor([tokens]), {"input_pos": torch.tensor([position])})
                logits = logits[0] if isinstance(logits, tuple) else logits
                out.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
                tokens = out[-1:]
            if 1 in out[1:] and out[0] != 1:
                prompt, ends = text, out.index(1)
                break
    assert prompt is not None, "no one-token prompt reaches </s> greedily"
    pieces = []
    result = TextGenerator(ours, tokenizer).generate(prompt, max_new_tokens=24, on_token=pieces.append)
    assert result.ended_at_eos and result.generated_tokens == ends + 1
    assert b"</s>" not in result.text and b"".join(pieces) == result.text
    driven = MethodsDriver(ours, tokenizer).generate(prompt, max_new_tokens=24)
    assert driven.ended_at_eos and driven.generated_tokens == result.generated_tokens
    assert _printed(driven.text) == _printed(result.text)


def test_methods_driver_loads_when_made_and_calls_once_a_token(llm, monkeypatch):
    """MethodsDriver loads its methods when it is made, as TextLLMRunner's load() does (no executor is made while
    it generates: its seconds are its calls'), and makes one Runner call per token, however many are asked for."""
    from et_tensorrt.llm import MethodsDriver
    from et_tensorrt.runtime import executors

    made = []
    real = executors.pytorch_executor
    monkeypatch.setattr(executors, "pytorch_executor", lambda *a: made.append(a) or real(*a))
    ours, _, tokenizer = llm
    driver = MethodsDriver(ours, tokenizer)
    assert made  # the delegate chose its executor when the driver loaded the method
    made.clear()
    calls = []
    run = driver._runner.run
    monkeypatch.setattr(driver._runner, "run", lambda *a, **k: calls.append(k.get("method")) or run(*a, **k))
    for asked in (4, 12):
        driver.reset()
        calls.clear()
        result = driver.generate("the cat", max_new_tokens=asked)
        assert len(calls) == result.generated_tokens  # the prompt's call chose the first token
    assert made == []


def test_the_command_line_and_the_python_api_open_a_program_alike(llm, plain, tmp_path, run_cli):
    """``open_generator`` (et_tensorrt.llm.runner.opening) makes the driver ``generate`` chooses, and refuses what it
    refuses in the same words."""
    from et_tensorrt.llm import open_generator
    from et_tensorrt.llm.runner.driver_choice import driver_kind

    ours, _, tokenizer = llm
    assert driver_kind(ours.read_bytes()) == "TextLLMRunner"
    assert type(open_generator(ours, tokenizer)) is TextGenerator
    with pytest.raises(RunnerError) as refused:
        open_generator(plain, tokenizer)
    result = run_cli("generate", plain, "--tokenizer", tokenizer, "--prompt", "the cat", cwd=tmp_path)
    assert result.status != 0 and str(refused.value) in result.error_line, result.stderr
