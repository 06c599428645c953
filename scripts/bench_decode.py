"""Token-by-token decode: what each call moves, with the KV cache owned by the delegate or left to ExecuTorch.

Side by side in one run, for each decoder (et_tensorrt.testing.decoders: ExecuTorch's llama with
``use_kv_cache``, static and ``enable_dynamic_shape``, and HF's ``TorchExportableModuleForDecoderOnlyLM``):

* ``et_tensorrt`` — the delegate owns the caches (``own_mutable_buffers``, the default);
* ``et_tensorrt fp16`` / ``et_tensorrt bf16`` — the same fp32 program lowered with ``precision="fp16"``/``"bf16"``:
  the caches stored in that precision (half the cache bytes), the engine about half the fp32 engine's weight bytes,
  the error still against fp32 eager;
* ``et_tensorrt (caches ExecuTorch's)`` — ``own_mutable_buffers=False``, the round-2 behaviour: the delegate
  takes each cache as an input and returns it, and ExecuTorch copies it back;
* ``xnnpack`` — ExecuTorch's XNNPACK partitioner on the same program (its caches stay in ExecuTorch's planned
  memory; the cache writes run as host kernels).

Per row: partitions, host kernels that copy (``aten::copy_``), bytes the delegate copied per token at its boundary
(inputs, results, outputs: a cache ExecuTorch owns crosses it twice) and state it wrote back on its device, the
bytes of the caches the delegate owns, of its engine(s) (and their share of the fp32 lowering's: TensorRT-RTX's
engines of these tiny decoders are mostly its kernels, ~2.6 MB, not weights) and of the weights it carries, the
executor's time per token, the first call (the prompt, with one-time costs) and tokens/s of the single-token
calls after it (the method calls alone), and the largest error against eager.
Without a GPU the delegate runs its embedded program with PyTorch on the CPU (the ``executor`` column says so):
the bytes are what the placement plan did, the times are not TensorRT's.

Then the same decoders as a program of two methods (``prefill``: the prompt, a dynamic length; ``decode``: one
token, static), as ExecuTorch's CUDA backend exports LLMs: decode's error after prefill, bytes per decode step, the
program's bytes against the one-method program's, engines stored, the load (Runner and both methods' first calls)
and the state the loaded program holds against what one state per method would hold.

Then the resident memory and load time of a larger llama's two methods, sharing one state, against the same methods
as two programs, a state each (``--memory-only``: that table alone).

Then the next token, for tiny HF Llama- and Qwen3-shaped decoders as prefill/decode programs: the logits handed to
the host, which chooses (greedy, then seeded sampling), against the token chosen in the engine (``export_causal_lm(
sampling=...)``), fed to the next call as it is: bytes per decode step both ways, and whether the tokens are the same
(``--next-token-only [llama] [qwen3]``: that table alone).

Then tokens/s of each LLM driver per program kind (forward, prefill/decode, sampled in the engine, MoE, recurrent,
speech, multimodal), beside TextLLMRunner on the same llama's one-``forward`` program and the sum of the driver's own
``Runner.run`` calls (``--drivers-only``: that table alone; ``OMP_NUM_THREADS=1`` on a shared machine).

Then a projection for Llama-3.2-1B (the cache bytes a call moves before and after, from its config).

    python scripts/bench_decode.py [--tokens 18] [--json out.json] [--memory-only] [--next-token-only [KIND ...]]
                                   [--drivers-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
from bench_common import fmt, xnnpack_edge  # this folder (the script's own) is on sys.path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import et_tensorrt  # noqa: E402
from et_tensorrt.format.blob import read_blob  # noqa: E402
from et_tensorrt.inspection import delegate_blobs, inspect_bytes  # noqa: E402
from et_tensorrt.testing import decoders  # noqa: E402

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 1, 17, 19]


@dataclass
class Row:
    decoder: str
    backend: str
    partitions: int = 0
    host_copies: int = 0
    io_bytes_per_token: float | None = None  # copied at the delegate boundary (inputs, results, outputs)
    state_bytes_per_token: float | None = None  # state written back inside the delegate, on its device
    cache_bytes: int | None = None  # the KV caches the delegate owns (blob STATE), as stored
    engine_bytes: int | None = None  # every engine of the program
    weight_bytes: int | None = None  # the weights the blobs carry for the embedded program (the engine's, as typed)
    executor: str = ""
    executor_us: float | None = None
    first_call_ms: float = 0.0  # the prompt, with the one-time costs (the embedded program's first load, ...)
    tokens_per_s: float = 0.0  # the single-token calls after it
    max_error: float = 0.0
    error: str = ""


def _host_copies(pte: bytes) -> int:
    return sum(op.startswith("aten::copy_") for m in inspect_bytes(pte).methods for op in m.operators)


def run_ours(decoder, tokens, own: bool, precision: str = "fp32") -> Row:
    name = "et_tensorrt" if own else "et_tensorrt (caches ExecuTorch's)"
    row = Row(decoder.name, name if precision == "fp32" else f"{name} {precision}")
    pte = et_tensorrt.lower(decoder.program, own_mutable_buffers=own, precision=precision)
    row.partitions = len(et_tensorrt.lower.last_report.partitions)
    row.host_copies = _host_copies(pte)
    blobs = [read_blob(b) for b in delegate_blobs(pte)]
    row.cache_bytes = sum(e.nbytes for b in blobs for e in b.states if "cache" in e.name)
    row.engine_bytes = sum(len(b.engine) for b in blobs)
    row.weight_bytes = sum(w.nbytes for b in blobs for w in b.weights)
    steps = decoders.decode(decoder, pte, tokens, prompt=3)
    singles = steps[1:]  # the prompt call moves its S tokens' logits; per token: the single-token calls
    row.io_bytes_per_token = statistics.mean(s.bytes_moved for s in singles)
    row.state_bytes_per_token = statistics.mean(s.state_bytes for s in singles)
    row.executor = singles[-1].plans[0].executor
    row.executor_us = statistics.median(sum(p.executor_ns for p in s.plans) / 1e3 for s in singles)
    row.first_call_ms = steps[0].seconds * 1e3
    row.tokens_per_s = len(singles) / sum(s.seconds for s in singles)
    row.max_error = max(s.max_error for s in steps)
    return row


def run_xnnpack(decoder, tokens) -> Row:
    from executorch.exir.lowered_backend_module import get_lowered_submodules
    from executorch.runtime import Runtime

    row = Row(decoder.name, "xnnpack", executor="XNNPACK (cpu)")
    edge = xnnpack_edge(decoder.program)
    row.partitions = len(get_lowered_submodules(edge.exported_program().graph_module))
    pte = edge.to_executorch().buffer
    row.host_copies = _host_copies(pte)
    method = Runtime.get().load_program(pte).load_method("forward")
    calls = [list(tokens[:3])] + [[t] for t in tokens[3:]] if decoder.prompt_tokens else [[t] for t in tokens]
    position, seconds = 0, []
    for call in calls:
        args, kwargs = decoder.inputs(call, position)
        with torch.no_grad():
            expected = decoder.eager(*args, **kwargs)
        expected = expected[0] if isinstance(expected, (tuple, list)) else expected
        start = time.perf_counter()
        got = method.execute(decoders._flat((args, kwargs)))[0]
        seconds.append(time.perf_counter() - start)
        expected = expected.reshape(got.shape) if expected.numel() == got.numel() else expected[..., -1, :]
        row.max_error = max(row.max_error, float((got - expected.reshape(got.shape)).abs().max()))
        position += len(call)
    row.first_call_ms = seconds[0] * 1e3
    row.tokens_per_s = (len(seconds) - 1) / sum(seconds[1:])
    return row


@dataclass
class MethodsRow:
    decoder: str
    max_error: float = 0.0  # decode after prefill, against eager
    io_bytes_per_step: float = 0.0
    program_bytes: int = 0
    one_method_bytes: int = 0
    engines: int = 0  # engines stored in the program
    load_ms: float = 0.0  # Runner, then the first prefill and decode calls (each method loads on its first call)
    state_bytes: int = 0  # the states the loaded program holds (both methods' delegates bind them)
    per_method_state_bytes: int = 0  # what a state per method would hold
    error: str = ""


def run_methods(make, tokens) -> MethodsRow:
    from et_tensorrt import Runner
    from et_tensorrt.runtime import state

    decoder = make()
    row = MethodsRow(decoder.name)
    pte = et_tensorrt.lower(decoders.prefill_decode(decoder))
    row.program_bytes = len(pte)
    row.one_method_bytes = len(et_tensorrt.lower(make().program))
    blobs = [d.blob for m in inspect_bytes(pte).methods for d in m.delegates]
    row.engines = len({b.named_engine.key for b in blobs if b.named_engine is not None})
    began = time.perf_counter()
    runner = Runner(pte)
    created = time.perf_counter() - began
    steps = decoders.decode(decoder, runner, tokens, prompt=4, methods=decoders.PREFILL_DECODE)
    row.load_ms = (created + steps[0].seconds + steps[1].seconds) * 1e3  # each method loads on its first call
    sizes = {e.name: e.nbytes for b in blobs for e in b.states}
    row.state_bytes = sum(sizes[name] for _, name in state.held_states())
    row.per_method_state_bytes = sum(e.nbytes for b in blobs for e in b.states)
    row.max_error = max(s.max_error for s in steps)
    row.io_bytes_per_step = statistics.mean(s.bytes_moved for s in steps[1:])
    return row


# Loads the program(s) given in a fresh process, runs a 4-token prefill and one decode, and prints the resident
# memory that added (after the imports, after the calls) and the time it took: a process of its own per variant, so
# no allocator cache of another variant is counted.
_MEMORY_PROBE = r"""
import gc, json, sys, time
import torch, et_tensorrt

def resident_kib():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))

prefill_path, decode_path = sys.argv[1], sys.argv[2]
gc.collect()
before = resident_kib()
began = time.perf_counter()
prefill = et_tensorrt.Runner(prefill_path)
decode = prefill if decode_path == prefill_path else et_tensorrt.Runner(decode_path)
prefill.run([torch.tensor([[3, 5, 7, 11]]), torch.tensor([0])], method="prefill")
decode.run([torch.tensor([[13]]), torch.tensor([4])], method="decode")
seconds = time.perf_counter() - began
gc.collect()
print(json.dumps({"added_kib": resident_kib() - before, "seconds": seconds}))
"""


@dataclass
class MemoryRow:
    variant: str
    files_bytes: int = 0
    state_bytes: int = 0  # the caches the loaded program(s) hold
    resident_added_mib: float = 0.0  # resident memory the load and the first prefill and decode added
    load_ms: float = 0.0
    error: str = ""


def run_memory(folder: str) -> list[MemoryRow]:
    """A larger ExecuTorch llama (8 layers, dim 256, a 2,048-token cache: 16 MiB of state; a longer one makes its
    attention mask, a context x context constant, the larger part) as one program of two
    methods, whose methods share the cache, the engine and the weights, against the same two methods lowered as two
    programs, each with its own (what a delegate per method held before the methods shared)."""
    import subprocess

    def decoder():  # made again for each lowering (the same weights): ExecuTorch lowers an exported llama once
        return decoders.executorch_llama(dynamic=True, layers=8, dim=256, context=2048)

    paths = {"shared": os.path.join(folder, "methods.pte")}
    et_tensorrt.save(paths["shared"], decoders.prefill_decode(decoder()))
    for name in ("prefill", "decode"):
        paths[name] = os.path.join(folder, f"{name}.pte")
        et_tensorrt.save(paths[name], {name: decoders.prefill_decode(decoder())[name]})
    variants = {
        "one program, two methods (state, engine, weights shared)": (paths["shared"], paths["shared"]),
        "two programs, one method each (a state per method)": (paths["prefill"], paths["decode"]),
    }
    cache = decoder().cache_bytes
    rows = []
    for variant, (prefill, decode) in variants.items():
        row = MemoryRow(variant, files_bytes=sum(os.path.getsize(p) for p in {prefill, decode}))
        row.state_bytes = cache if prefill == decode else 2 * cache
        done = subprocess.run(
            [sys.executable, "-c", _MEMORY_PROBE, prefill, decode], capture_output=True, text=True, check=False
        )
        if done.returncode:
            row.error = (done.stderr.strip().splitlines() or ["failed"])[-1][:300]
        else:
            probe = json.loads(done.stdout.strip().splitlines()[-1])
            row.resident_added_mib, row.load_ms = probe["added_kib"] / 1024, probe["seconds"] * 1e3
        rows.append(row)
    return rows


def memory_table() -> list[MemoryRow]:
    with tempfile.TemporaryDirectory() as folder:
        try:
            memory = run_memory(folder)
        except Exception as exc:  # noqa: BLE001
            memory = [MemoryRow("both", error=f"{type(exc).__name__}: {exc}"[:300])]
    print("\nMemory, shared vs per-method state (llama, 8 layers, dim 256, 2,048-token cache; fresh process each):\n")
    print("| program | files B | state B held | resident added MiB | load + first prefill and decode ms |")
    print("|---|---:|---:|---:|---:|")
    for r in memory:
        if r.error:
            print(f"| {r.variant} | failed: {r.error} ||||")
            continue
        print(f"| {r.variant} | {r.files_bytes:,} | {r.state_bytes:,} | {r.resident_added_mib:.1f} | {r.load_ms:.0f} |")
    return memory


@dataclass
class NextTokenRow:
    decoder: str
    choice: str  # where and how the next token is chosen
    partitions: str = ""  # per method: partitions, host nodes
    bytes_per_step: float = 0.0  # every copy of a decode call, the method boundary's included (its placement plan)
    io_bytes_per_step: float = 0.0  # what the call's inputs and outputs hold: the most a GPU copies per step
    tokens_per_s: float = 0.0  # decode steps (CPU fallback without a GPU)
    tokens: tuple = ()
    same_tokens: str = ""  # against the row that chooses the same way from the logits on the host
    error: str = ""


NEXT_TOKEN_STEPS = 16
SEEDED = {"temperature": 0.8, "top_k": 50, "top_p": 0.9}


def run_next_token(kind: str) -> list[NextTokenRow]:
    """One tiny HF decoder (``kind``) as prefill/decode programs three ways: returning the logits (the host chooses:
    greedy, then seeded sampling), choosing greedily in the engine, sampling in the engine with the same seed; the
    prompt of 4, then NEXT_TOKEN_STEPS decode steps, each call's token fed to the next as it is."""
    from et_tensorrt import Runner
    from et_tensorrt.llm import export_causal_lm
    from et_tensorrt.llm.runner.token_loop import Signature, TokenLoop
    from et_tensorrt.llm.sampling import Sampling

    rows = []
    for head in (None, Sampling(), Sampling(**SEEDED)):
        model = decoders.hf_tiny_causal_lm(kind, decoders.VOCAB)
        lm = export_causal_lm(model, max_seq_len=decoders.MAX_CONTEXT, methods="prefill_decode", sampling=head)
        pte = et_tensorrt.lower(lm.programs, constant_methods=lm.constant_methods)
        parts = ", ".join(
            f"{m} {len(r.partitions)}/{len(r.host_nodes)}" for m, r in et_tensorrt.lower.last_reports.items()
        )
        for choice in (Sampling(), Sampling(**SEEDED)) if head is None else (head,):
            where = "in the engine" if head is not None else "on the host from the logits"
            row = NextTokenRow(f"HF {kind} (prefill/decode)", f"{choice}, {where}", parts)
            runner = Runner(pte)
            loop = TokenLoop(runner, Signature(head=head), choice, seed=1234)
            token, position, plans, moved, seconds = loop.first([3, 5, 7, 11], 0), 4, [], [], []
            tokens = [int(token)]
            for _ in range(NEXT_TOKEN_STEPS):
                began = time.perf_counter()
                token = loop.next(token, position)
                tokens.append(int(token))  # the host reads it: to stream its text and see the end
                seconds.append(time.perf_counter() - began)
                plans.append(runner.last_plan.bytes_copied)
                moved.append(loop.io_bytes)
                position += 1
            row.bytes_per_step = statistics.mean(plans)
            row.io_bytes_per_step = statistics.mean(moved)
            row.tokens_per_s = len(seconds[1:]) / sum(seconds[1:])
            row.tokens = tuple(tokens)
            rows.append(row)
    for engine, host in zip(rows[2:], rows[:2]):  # greedy, sampled: in the engine vs on the host
        engine.same_tokens = "yes" if engine.tokens == host.tokens else "NO"
    return rows


def next_token_table(kinds=("llama", "qwen3")) -> list[NextTokenRow]:
    rows = []
    for kind in kinds:
        try:
            rows += run_next_token(kind)
        except Exception as exc:  # noqa: BLE001
            rows.append(NextTokenRow(f"HF {kind}", "", error=f"{type(exc).__name__}: {exc}"[:300]))
    print(
        f"\nThe next token: logits to the host vs chosen in the engine (prefill of 4, then {NEXT_TOKEN_STEPS} decode "
        "steps, each call's token fed to the next; seed 1234):\n"
    )
    print(
        "| decoder | next token | partitions/host nodes per method | B copied per decode step | B its I/O holds "
        "| tokens/s | same tokens as the host's choice |"
    )
    print("|---|---|---|---:|---:|---:|---|")
    for r in rows:
        if r.error:
            print(f"| {r.decoder} | failed: {r.error} ||||||")
            continue
        print(
            f"| {r.decoder} | {r.choice} | {r.partitions} | {r.bytes_per_step:,.0f} | {r.io_bytes_per_step:,.0f} "
            f"| {r.tokens_per_s:.0f} | {r.same_tokens or '(the reference)'} |"
        )
    vocab = 128_256
    print(
        f"\nLlama-3 projection: a decode step hands the host the logits, {vocab * 4:,} B ({vocab:,} x float32), "
        "or the chosen token, 8 B (int64), after 16 B in (token, position; 32 B with seed and counter)"
    )
    return rows


def llama_1b_projection() -> dict:
    """Llama-3.2-1B: 16 layers, 8 KV heads, head dim 64, context 2048, fp16 caches."""
    layers, kv_heads, head_dim, context, itemsize = 16, 8, 64, 2048, 2
    cache = 2 * layers * kv_heads * context * head_dim * itemsize  # K and V
    logits = 128256 * 4
    return {"cache_bytes": cache, "before_per_token": 2 * cache + logits, "after_per_token": logits}


@dataclass
class DriverRow:
    kind: str  # the program kind
    model: str
    driver: str
    tokens: int = 0
    tokens_per_s: float = 0.0  # the driver's own count: its generated tokens over its generate's seconds
    calls_tokens_per_s: float | None = None  # the same tokens over the sum of its Runner.run calls' seconds
    overhead: float | None = None  # the driver's seconds over its calls' (1.0: the loop adds nothing)
    error: str = ""


def _clocked(run, spent: list):
    """``run``, appending each call's seconds to ``spent``."""

    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return run(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - began)

    return timed


def _driven(driver, generate, repeats: int = 5) -> tuple[int, float, float | None]:
    """(tokens, tokens/s, tokens/s of its Runner.run calls alone) of the fastest of ``repeats`` generations, each
    from the start, after one to warm up. The calls are timed inside the same generations (the wrapper's two clock
    reads are in the driver's time, ~1 us a call): on a shared machine the load drifts between runs, so a driver and
    its calls timed in different runs differ by the drift, not by the loop."""
    runner = getattr(driver, "_runner", None)
    ours = runner is not None and type(runner).__name__ == "Runner"
    spent = []
    if ours:
        runner.run = _clocked(runner.run, spent)
    generate()
    best, calls = None, None
    try:
        for _ in range(repeats):
            driver.reset()
            spent.clear()
            result = generate()
            if best is None or result.tokens_per_second > best.tokens_per_second:
                best, calls = result, (result.generated_tokens / sum(spent) if ours else None)
    finally:
        if ours:
            del runner.run
    return best.generated_tokens, best.tokens_per_second, calls


def drivers_table(tokens: int = 64) -> list[DriverRow]:
    """Tokens/s of each LLM driver per program kind, side by side with TextLLMRunner on the same llama's one-
    ``forward`` program and with the sum of each driver's own Runner.run calls, in one run."""
    from et_tensorrt.llm import (
        MethodsDriver,
        Sampling,
        TextGenerator,
        Transcriber,
        export_causal_lm,
        export_encoder_decoder,
        export_prefill_decode,
        llm_methods,
    )
    from et_tensorrt.testing import moe_models, speech

    folder = tempfile.mkdtemp(prefix="bench_drivers_")
    tokenizer = os.path.join(folder, "tokenizer.json")
    vocab = decoders.byte_level_tokenizer(tokenizer)
    context = 2 * tokens + 16
    methods = llm_methods(max_seq_len=context, vocab_size=vocab, bos_id=0, eos_ids=[1])
    llama = "executorch llama (1 layer, dim 64)"

    def llama_model():
        return decoders.executorch_llama(dynamic=True, layers=1, vocab=vocab, context=context)

    def save(name, program, constant_methods):
        path = os.path.join(folder, f"{name}.pte")
        with open(path, "wb") as f:
            f.write(et_tensorrt.lower(program, constant_methods=constant_methods))
        return path

    def hf(make, sampling=None, methods="prefill_decode"):
        def build():
            lm = export_causal_lm(make(), methods=methods, max_seq_len=context, eos_ids=[1], sampling=sampling)
            return lm.programs, lm.constant_methods

        return build

    tiny = lambda: decoders.hf_tiny_causal_lm("llama", vocab=vocab, context=context)  # noqa: E731
    # generate's arguments: the prompt "the cat", else one after which greedy decoding does not reach EOS (1) within
    # the tokens asked, so that the row times them (after "the cat" the tiny HF Llama's first token is EOS, GPT-J's
    # third); a sampled row's seed, so that every run draws the same tokens (seed 1: all 64 of them)
    cases = [  # (kind, model, driver, build -> (program, constant methods)[, generate's arguments])
        ("forward", llama, TextGenerator, lambda: (llama_model().program, methods)),
        ("forward", llama, MethodsDriver, lambda: (llama_model().program, methods)),
        ("prefill/decode", llama, MethodsDriver, lambda: (export_prefill_decode(llama_model().eager), methods)),
        ("prefill/decode", "HF Llama (1 layer, hidden 32)", MethodsDriver, hf(tiny), {"prompt": "the sun"}),
        ("prefill/decode", "HF GPT-J (1 layer, hidden 32)", MethodsDriver, hf(lambda: _gptj(vocab, context)),
         {"prompt": "the sun"}),
        ("sampled (T 0.8, in the engine)", "HF Llama (1 layer, hidden 32)", MethodsDriver,
         hf(tiny, Sampling(temperature=0.8)), {"seed": 1}),
        ("MoE", "HF Qwen3-MoE (1 layer)", MethodsDriver,
         hf(lambda: moe_models.hf_moe("qwen3_moe", layers=1, vocab=vocab).eval())),
        ("recurrent", "HF Mamba (2 layers, hidden 32)", MethodsDriver, hf(lambda: _mamba(vocab), methods="forward")),
    ]  # fmt: skip
    rows = []
    for kind, model, driver, build, *given in cases:
        row = DriverRow(kind, model, driver.__name__)
        try:
            path = save(f"{len(rows)}", *build())
            made = driver(path, tokenizer)
            row.driver = type(made).__name__.replace("TextGenerator", "TextLLMRunner (TextGenerator)")
            arguments = {"prompt": "the cat", "max_new_tokens": tokens, **(given[0] if given else {})}
            generate = lambda: made.generate(**arguments)  # noqa: E731
            row.tokens, row.tokens_per_s, row.calls_tokens_per_s = _driven(made, generate)
        except Exception as e:  # noqa: BLE001 - the row says what failed
            row.error = f"{type(e).__name__}: {e}"[:200]
        rows.append(row)
    row = DriverRow("speech (encoder once, decoder a token a call)", "HF Whisper (2+2 layers, d 64)", "Transcriber")
    try:
        path = os.path.join(folder, "whisper.pte")
        et_tensorrt.save(path, export_encoder_decoder(speech.whisper(vocab), max_cache_len=32))
        wav = speech.sine_wav(os.path.join(folder, "tone.wav"))
        made = Transcriber(path, tokenizer)
        generate = lambda: made.transcribe(wav, max_new_tokens=tokens)  # noqa: E731
        row.tokens, row.tokens_per_s, row.calls_tokens_per_s = _driven(made, generate)
    except Exception as e:  # noqa: BLE001
        row.error = f"{type(e).__name__}: {e}"[:200]
    rows.append(row)
    rows.append(_multimodal_row(folder, tokenizer, vocab, tokens))
    for row in rows:
        if row.calls_tokens_per_s:
            row.overhead = row.calls_tokens_per_s / row.tokens_per_s
    print(f"\nLLM drivers, {tokens} tokens asked, greedy unless said (torch threads: {torch.get_num_threads()})")
    print("| program kind | model | driver | tokens | tokens/s | its Runner.run calls alone | driver / calls |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        if r.error:
            print(f"| {r.kind} | {r.model} | {r.driver} | FAILED: {r.error} | | | |")
            continue
        calls = f"{r.calls_tokens_per_s:,.0f}" if r.calls_tokens_per_s else "— (C++ runner)"
        over = f"{r.overhead:.2f}x" if r.overhead else "—"
        print(f"| {r.kind} | {r.model} | {r.driver} | {r.tokens} | {r.tokens_per_s:,.0f} | {calls} | {over} |")
    return rows


def _multimodal_row(folder: str, tokenizer: str, vocab: int, tokens: int) -> DriverRow:
    """MultimodalGenerator (ExecuTorch's C++ MultimodalRunner) on a tiny LLaVA, an image and the prompt; its calls
    are C++'s, so "calls alone" is the same calls through Runner.run: the image through vision_encoder and
    text_decoder, the prompt through token_embedding and text_decoder, then both a token a call (check's multimodal
    plan, cli/check_calls.py), as many tokens as the generator made."""
    from et_tensorrt import Runner
    from et_tensorrt.cli.check_calls import plan_for
    from et_tensorrt.llm import MultimodalGenerator, export_multimodal
    from et_tensorrt.testing import multimodal_models

    row = DriverRow("multimodal (image, then the prompt)", "HF LLaVA (CLIP 2 layers, Llama 1 layer)", "")
    try:
        mm = export_multimodal(multimodal_models.llava(vocab), max_seq_len=2 * tokens + 32)
        path = os.path.join(folder, "llava.pte")
        et_tensorrt.save(path, mm.programs, constant_methods=mm.constant_methods)
        made = MultimodalGenerator(path, tokenizer)
        row.driver = "MultimodalRunner (MultimodalGenerator)"
        image = torch.rand(1, 3, multimodal_models.IMAGE_SIZE, multimodal_models.IMAGE_SIZE)

        def generate():
            made.reset()
            return made.generate("the cat", image=image, max_new_tokens=tokens)

        row.tokens, row.tokens_per_s, _ = _driven(made, generate)
        with open(path, "rb") as f:
            plan = plan_for(f.read(), mm.programs, seed=0)
        runner, spent = Runner(path), []
        for method in plan.methods:
            runner.load_method(method)
        runner.run, best = _clocked(runner.run, spent), 0.0
        for _ in range(3):  # each from position 0 (rows a previous sequence left are masked)
            spent.clear()
            side = plan.side(runner, False)
            token = side.first()
            for _ in range(row.tokens - 1):
                token = side.next(token)
            best = max(best, row.tokens / sum(spent))
        row.calls_tokens_per_s = best
    except Exception as e:  # noqa: BLE001
        row.error = f"{type(e).__name__}: {e}"[:200]
    return row


def _gptj(vocab: int, context: int):
    from transformers import GPTJConfig, GPTJForCausalLM

    torch.manual_seed(0)
    config = GPTJConfig(
        vocab_size=vocab, n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=context, bos_token_id=0,
        eos_token_id=1,
    )  # fmt: skip
    return GPTJForCausalLM(config).eval()


def _mamba(vocab: int):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(decoders._recurrent_config("mamba", vocab)).eval()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=18)
    parser.add_argument("--json")
    parser.add_argument("--memory-only", action="store_true", help="only the shared vs per-method memory table")
    parser.add_argument(
        "--next-token-only", nargs="*", metavar="KIND", help="only the next-token table (of llama, qwen3: default both)"
    )
    parser.add_argument("--drivers-only", action="store_true", help="only the LLM drivers' tokens/s table")
    args = parser.parse_args()
    tokens = TOKENS[: args.tokens]
    if args.drivers_only:
        rows = drivers_table()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"drivers": [asdict(r) for r in rows]}, f, indent=1)
        return 1 if any(r.error for r in rows) else 0
    if args.memory_only:
        return 1 if any(r.error for r in memory_table()) else 0
    if args.next_token_only is not None:
        rows = next_token_table(tuple(args.next_token_only) or ("llama", "qwen3"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"next_token": [asdict(r) for r in rows]}, f, indent=1)
        return 1 if any(r.error or r.same_tokens == "NO" for r in rows) else 0
    rows = []
    for make in (decoders.executorch_llama, lambda: decoders.executorch_llama(dynamic=True), decoders.hf_llama):
        for backend in ("ours", "ours-fp16", "ours-bf16", "ours-not-owned", "xnnpack"):
            decoder = make()  # fresh: each lowering and each eager reference starts from the initial state
            precision = backend.rpartition("-")[2] if backend[-4:] in ("fp16", "bf16") else "fp32"
            try:
                if backend == "xnnpack":
                    rows.append(run_xnnpack(decoder, tokens))
                else:
                    rows.append(run_ours(decoder, tokens, own=backend != "ours-not-owned", precision=precision))
            except Exception as exc:  # noqa: BLE001  (a failing row is reported; the others still run)
                name = {"ours-not-owned": "et_tensorrt (caches ExecuTorch's)", "xnnpack": "xnnpack"}.get(backend)
                name = name or ("et_tensorrt" if precision == "fp32" else f"et_tensorrt {precision}")
                rows.append(Row(decoder.name, name, error=f"{type(exc).__name__}: {exc}"[:300]))
    print(f"torch {torch.__version__}, {len(tokens)} tokens (prompt of 3 where one call takes several)\n")
    print(
        "| decoder | backend | partitions | host copy_ | I/O B/token | state B/token | cache B | engine B (of fp32) "
        "| weights B | executor | executor us/token | first call ms | tokens/s after | max err vs fp32 eager |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    fp32_engine = {r.decoder: r.engine_bytes for r in rows if r.backend == "et_tensorrt" and not r.error}
    for r in rows:
        if r.error:
            print(f"| {r.decoder} | {r.backend} | failed: {r.error} ||||||||||| ")
            continue
        engine = fmt(r.engine_bytes, ",")
        if r.engine_bytes and fp32_engine.get(r.decoder):
            engine += f" ({r.engine_bytes / fp32_engine[r.decoder]:.2f})"
        print(
            f"| {r.decoder} | {r.backend} | {r.partitions} | {r.host_copies} | {fmt(r.io_bytes_per_token, ',.0f')} "
            f"| {fmt(r.state_bytes_per_token, ',.0f')} | {fmt(r.cache_bytes, ',')} | {engine} "
            f"| {fmt(r.weight_bytes, ',')} | {r.executor} "
            f"| {fmt(r.executor_us, '.0f')} | {r.first_call_ms:.1f} | {r.tokens_per_s:.0f} | {r.max_error:.1e} |"
        )
    methods = []
    for make in (lambda: decoders.executorch_llama(dynamic=True), decoders.hf_llama):
        try:
            methods.append(run_methods(make, tokens))
        except Exception as exc:  # noqa: BLE001
            methods.append(MethodsRow(make().name, error=f"{type(exc).__name__}: {exc}"[:300]))
    print("\nTwo methods (prefill: the prompt of 4, dynamic length; decode: one token) in one program:\n")
    print(
        "| decoder | decode max err after prefill | I/O B/decode step | program B | vs one method | engines "
        "| load + first calls ms | state B held | one state per method would hold |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in methods:
        if r.error:
            print(f"| {r.decoder} | failed: {r.error} ||||||||")
            continue
        print(
            f"| {r.decoder} | {r.max_error:.1e} | {r.io_bytes_per_step:,.0f} | {r.program_bytes:,} "
            f"| {r.program_bytes / r.one_method_bytes:.2f}x | {r.engines} | {r.load_ms:.0f} | {r.state_bytes:,} "
            f"| {r.per_method_state_bytes:,} |"
        )
    memory = memory_table()
    next_token = next_token_table()
    projection = llama_1b_projection()
    print(
        f"\nLlama-3.2-1B projection (fp16 caches {projection['cache_bytes'] / 2**20:.0f} MiB): "
        f"{projection['before_per_token'] / 2**20:.1f} MiB per token with the caches ExecuTorch's, "
        f"{projection['after_per_token'] / 2**20:.2f} MiB (the logits) with the delegate owning them"
    )
    if args.json:
        with open(args.json, "w") as f:
            tables = {
                "rows": [asdict(r) for r in rows],
                "methods": [asdict(r) for r in methods],
                "memory": [asdict(r) for r in memory],
                "next_token": [asdict(r) for r in next_token],
            }
            json.dump({**tables, "llama_3_2_1b": projection}, f, indent=1)
    owned = ("et_tensorrt", "et_tensorrt fp16", "et_tensorrt bf16")
    failed = any(r.error for r in rows if r.backend in owned) or any(r.error for r in methods + memory + next_token)
    failed = failed or any(r.same_tokens == "NO" for r in next_token)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
