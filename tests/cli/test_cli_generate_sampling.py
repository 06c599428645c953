"""The next token chosen inside the engine (issue 46, et_tensorrt.llm.sampling): HF Llama- and Qwen3-shaped tiny
decoders exported with ``export_causal_lm(sampling=...)``, lowered, one partition per method, the sampler in it.
Greedy gives eager's greedy tokens for 32 steps, moving at most 64 bytes a step; seeded sampling (temperature 0.8,
top-k 50, top-p 0.9) gives the reference sampler's tokens (plain PyTorch on eager's logits, the same draws), the
same text twice and in two processes; the sampled program's temperature, top-k and top-p are its inputs, so the one
program also gives greedy (eager's argmax) and temperature 0.5 by request (issue 51); through Runner, MethodsDriver,
TextGenerator and ``generate``, with two methods sharing one cache and with one ``forward``."""

from __future__ import annotations

import codecs
import copy

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.errors import RunnerError
from et_tensorrt.llm import MethodsDriver, TextGenerator, export_causal_lm
from et_tensorrt.llm.export.causal import HFStaticCacheExport
from et_tensorrt.llm.runner.token_loop import Signature, TokenLoop
from et_tensorrt.llm.sampling import Sampling
from et_tensorrt.testing import decoders
from et_tensorrt.testing.reference_sampler import reference_token

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

CONTEXT = 48
STEPS = 32
PROMPT = "the cat sat"
SEEDED = Sampling(temperature=0.8, top_k=50, top_p=0.9)
SEED = 1234
# What the head adds to a method: each must be inside the method's one partition.
GREEDY_OPS = {"aten.argmax.default"}
SAMPLER_OPS = {"aten.topk.default", "aten._softmax.default", "aten.cumsum.default", "aten.gather.default"}


def eager_tokens(model, prompt: list[int], sampling: Sampling, seed: int = 0) -> list[int]:
    """STEPS + 1 tokens after ``prompt``, each chosen from the eager model's logits (its static cache, as exported) by
    the reference sampler with draw = the token's position."""
    module = HFStaticCacheExport(copy.deepcopy(model), CONTEXT).module
    tokens, position, out = prompt, 0, []
    with torch.no_grad():
        for _ in range(STEPS + 1):
            positions = torch.arange(position, position + len(tokens))
            logits = module(input_ids=torch.tensor([tokens]), cache_position=positions)
            position += len(tokens)
            out.append(reference_token(logits, sampling, seed, position))
            tokens = out[-1:]
    return out


class Lowered:
    def __init__(self, folder, tokenizer, vocab, kind, methods, sampling):
        model = decoders.hf_tiny_causal_lm(kind, vocab, context=CONTEXT)
        self.model = copy.deepcopy(model)  # the eager reference of other requests
        self.prompt = decoders_tokenizer(tokenizer).encode(PROMPT, add_special_tokens=False).ids
        self.expected = eager_tokens(model, self.prompt, sampling, SEED)
        lm = export_causal_lm(model, max_seq_len=CONTEXT, methods=methods, sampling=sampling)
        assert lm.sampling == sampling and lm.constant_methods["get_sampling_top_k"] == sampling.top_k
        self.path = folder / f"{kind}_{methods}_{'greedy' if sampling.greedy else 'sampled'}.pte"
        self.path.write_bytes(et_tensorrt.lower(lm.programs, constant_methods=lm.constant_methods))
        self.reports = dict(et_tensorrt.lower.last_reports)
        self.tokenizer, self.sampling = tokenizer, sampling
        two = methods == "prefill_decode"
        self.signature = Signature(*(("prefill", "decode") if two else ("forward", "forward")), head=sampling)

    def loop(self, runner) -> tuple[list[int], list]:
        """The prompt, then STEPS tokens, each call's token fed to the next as it is; each decode call's (plan, bytes
        its inputs and outputs hold)."""
        loop = TokenLoop(runner, self.signature, self.sampling, SEED)
        token, position, out, plans = loop.first(self.prompt, 0), len(self.prompt), [], []
        out.append(int(token))
        for _ in range(STEPS):
            token = loop.next(token, position)
            position += 1
            out.append(int(token))
            plans.append((runner.last_plan, loop.io_bytes))
        return out, plans


def decoders_tokenizer(path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    return path, decoders.byte_level_tokenizer(path)


@pytest.fixture(scope="module")
def lowered(tmp_path_factory, tokenizer):
    """kind -> Lowered, each made on first use."""
    folder, made = tmp_path_factory.mktemp("sampling"), {}
    kinds = {
        "llama greedy": ("llama", "prefill_decode", Sampling()),
        "qwen3 greedy": ("qwen3", "forward", Sampling()),
        "llama sampled": ("llama", "prefill_decode", SEEDED),
    }

    def get(name):
        if name not in made:
            made[name] = Lowered(folder, *tokenizer, *kinds[name])
        return made[name]

    return get


@pytest.mark.parametrize("name", ["llama greedy", "qwen3 greedy"])
def test_greedy_in_the_engine_is_eager_greedy_at_most_64_bytes_a_step(lowered, name):
    lm = lowered(name)
    for method, report in lm.reports.items():
        assert len(report.partitions) == 1 and not report.host_nodes, (method, str(report))
        assert GREEDY_OPS <= {d.op for d in report.nodes if d.partition}, method
    runner = Runner(lm.path)
    tokens, plans = lm.loop(runner)
    assert tokens == lm.expected  # the prompt's token, then 32 decode steps
    for plan, held in plans:
        assert plan.bytes_copied <= 64 and held <= 64, plan  # the token and its position in, the token out
    if lm.signature.prefill == "prefill":  # two methods, one cache
        caches = [s for s in plans[-1][0].delegates[0].states if "cache" in s.name]
        assert caches and all(list(s.methods) == ["decode", "prefill"] for s in caches)
    # the drivers feed the same tokens: TextGenerator sends a program choosing its token to MethodsDriver
    generator = TextGenerator(lm.path, lm.tokenizer)
    assert isinstance(generator, MethodsDriver)
    result = generator.generate(PROMPT, max_new_tokens=STEPS + 1)
    ends = lm.expected.index(1) if 1 in lm.expected else len(lm.expected)
    pieces = [generator._piece(t) for t in lm.expected[:ends]]
    assert result.text == b"".join(pieces) and result.generated_tokens == min(ends + 1, STEPS + 1)
    assert max(result.step_bytes) <= 64 and result.sampling == "greedy; chosen in the program"
    with pytest.raises(RunnerError, match=r"chooses its token in the engine \(greedy, chosen at export\)"):
        generator.generate(PROMPT, temperature=0.8)


@pytest.mark.slow  # lowers a tiny HF Llama and decodes it ten times (about 3 minutes on 2 cores)
def test_seeded_sampling_in_the_engine_is_the_reference_sampler(lowered, run_cli):
    lm = lowered("llama sampled")
    for method, report in lm.reports.items():
        assert len(report.partitions) == 1 and not report.host_nodes, (method, str(report))
        assert SAMPLER_OPS <= {d.op for d in report.nodes if d.partition}, method
    runner = Runner(lm.path)
    first, plans = lm.loop(runner)
    assert first == lm.expected  # the reference sampler's tokens from eager's logits, the same draws
    assert max(max(p.bytes_copied, held) for p, held in plans) <= 64  # token, position, seed, counter; token out
    runner.reset()
    assert lm.loop(runner)[0] == first
    generator = MethodsDriver(lm.path, lm.tokenizer)
    once = generator.generate(PROMPT, max_new_tokens=12, seed=SEED)
    generator.reset()
    assert generator.generate(PROMPT, max_new_tokens=12, seed=SEED).text == once.text
    assert once.sampling == f"{SEEDED}, seed {SEED}; chosen in the program"
    ends = lm.expected.index(1) if 1 in lm.expected[:12] else 12
    assert once.text == b"".join(generator._piece(t) for t in lm.expected[:ends])
    # the choices are the program's inputs: the same program serves greedy (exactly the argmax: eager's greedy
    # tokens) and other temperatures, top-k and top-p, each the reference sampler's tokens, at most 64 bytes a step
    for request in (Sampling(), Sampling(0.5, 50, 0.9), Sampling(1.2, 5, 0.5)):
        generator.reset()
        fields = {"temperature": request.temperature, "top_k": request.top_k, "top_p": request.top_p}
        result = generator.generate(PROMPT, max_new_tokens=12, seed=SEED, **fields)
        assert result.text == _text(generator, eager_tokens(lm.model, lm.prompt, request, SEED)), request
        assert max(result.step_bytes) <= 64 and result.sampling.startswith(str(request)), result.sampling
    with pytest.raises(RunnerError, match=r"top_k=51: this program's sampling head ranks the 50 likeliest tokens"):
        generator.generate(PROMPT, top_k=51)
    with pytest.raises(RunnerError, match=r"top_k=0 \(the whole vocabulary of [0-9,]+ tokens\)"):
        generator.generate(PROMPT, top_k=0)
    # two more processes for each request, through the command line's flags: the same text twice
    args = ("generate", lm.path, "--tokenizer", lm.tokenizer, "--prompt", PROMPT, "--max-new-tokens", 12)
    for flags, request in (([], SEEDED), (["--temperature", 0], Sampling()), (["--temperature", 0.5], SEEDED_05)):
        runs = [run_cli(*args, *flags, "--seed", SEED, cwd=lm.path.parent) for _ in range(2)]
        for result in runs:
            assert result.status == 0, result.stderr
            assert f"tokens: {request}" in result.stdout, result.stdout
        text = _text(generator, eager_tokens(lm.model, lm.prompt, request, SEED))
        shown = codecs.getincrementaldecoder("utf-8")("replace").decode(text)  # as the command prints pieces
        assert all(r.stdout.startswith(PROMPT + shown + "\n\n") for r in runs), [r.stdout for r in runs]


SEEDED_05 = Sampling(temperature=0.5, top_k=50, top_p=0.9)


def _text(generator, tokens: list[int], limit: int = 12) -> bytes:
    """The text of the first ``limit`` tokens, to the end token (1) if one comes first."""
    tokens = tokens[:limit]
    return b"".join(generator._piece(t) for t in tokens[: tokens.index(1) if 1 in tokens else limit])
