"""Decoders whose KV cache the delegate owns: lowered from exporters nobody here wrote, decoded token by token.

Each decoder is one partition that owns every cache buffer (the STATE table), the top-level program copies
no state (no ``copy_`` kernel, no cache among the method's inputs or outputs), and a call moves only the
logits: the cache is updated in place, 0 bytes.
"""

from __future__ import annotations

import re

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.errors import RunnerError
from et_tensorrt.format.blob import read_blob
from et_tensorrt.format.dtypes import scalar_type_code
from et_tensorrt.inspection import delegate_blobs, format_program, inspect_bytes
from et_tensorrt.parity import for_precision
from et_tensorrt.testing import decoders

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]
TOLERANCE = 1e-4  # fp32 engines against eager fp32


MAKERS = {
    "hf_llama": decoders.hf_llama,
    "executorch_llama": decoders.executorch_llama,
    "executorch_llama_dynamic": lambda **kw: decoders.executorch_llama(dynamic=True, **kw),
}
HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(scope="module", params=list(MAKERS))
def lowered(request):
    decoder = MAKERS[request.param]()
    pte = et_tensorrt.lower(decoder.program)
    return decoder, pte, et_tensorrt.lower.last_report


def test_one_partition_owns_every_cache(lowered):
    decoder, pte, report = lowered
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)
    owned = [s for s in report.states if s.partition is not None]
    assert owned and len(owned) == len(report.states), "\n".join(map(str, report.states))
    (blob,) = [read_blob(b) for b in delegate_blobs(pte)]
    assert sum(e.nbytes for e in blob.states if "cache" in e.name) == decoder.cache_bytes
    assert all(e.in_place for e in blob.states if "cache" in e.name)  # TensorScatter -> KV-cache update layer
    assert blob.metadata["onnx_opset"] >= 24  # TensorScatter's opset


def test_inspect_lists_the_state(lowered):
    decoder, pte, _ = lowered
    text = format_program(inspect_bytes(pte))
    assert re.search(r"state the delegate owns on cuda:0 \(16\.[01] KiB", text), text
    assert decoder.cache_bytes == 16 * 1024  # 2 layers x K, V x (1, 2, 32, 16) float32; HF adds 2 int64 counters
    assert len(re.findall(r"cache\S*\s+float32\(1, 2, 32, 16\)\s+in place\s+zeros\s+input \d", text)) == 4, text


def test_top_level_program_copies_no_state(lowered):
    decoder, pte, _ = lowered
    (method,) = inspect_bytes(pte).methods
    assert not [op for op in method.operators if "copy" in op], method.operators
    # the method's inputs are the tokens and positions only: no cache goes in or out
    assert sum(v.kind == "tensor" for v in method.inputs) == len(decoders._flat(decoder.inputs([1], 0)))
    assert len(method.outputs) == 1


def test_decodes_like_eager_and_moves_only_logits(lowered):
    decoder, pte, _ = lowered
    steps = decoders.decode(decoder, pte, TOKENS, prompt=3)
    assert len(steps) >= 16
    assert max(s.max_error for s in steps) <= TOLERANCE
    logits = decoders.VOCAB * 4
    for step in steps[1:]:
        assert step.bytes_moved <= logits * step.tokens + 64, step.plans  # counters may be written back
        (plan,) = step.plans
        caches = [s for s in plan.states if "cache" in s.name]
        assert caches and all(s.update == "in place" and s.bytes == 0 for s in caches)


def test_position_past_the_cache_is_refused(lowered):
    decoder, pte, _ = lowered
    runner = Runner(pte)
    args, kwargs = decoder.inputs([3], decoders.MAX_CONTEXT + 4)
    with pytest.raises(RunnerError, match=r"(?s)position.*\b36\b.*cache"):
        runner.run(decoders._flat((args, kwargs)))
    # the refused call wrote nothing: the Runner still decodes from the start
    steps = decoders.decode(decoder, runner, TOKENS[:4])
    assert max(s.max_error for s in steps) <= TOLERANCE


def test_two_runners_keep_their_own_cache(lowered):
    decoder, pte, _ = lowered
    a, b = Runner(pte), Runner(pte)
    first = decoders._flat(decoder.inputs([3], 0))
    out_a = a.run(first)[0].clone()
    a.run(decoders._flat(decoder.inputs([5], 1)))
    # b has seen nothing: its first call is a's first call, not a continuation of a's cache
    torch.testing.assert_close(b.run(first)[0], out_a, rtol=0, atol=TOLERANCE)


def test_reset_starts_a_new_sequence(lowered):
    decoder, pte, _ = lowered
    runner = Runner(pte)
    first = decoders._flat(decoder.inputs([3], 0))
    out = runner.run(first)[0].clone()
    runner.run(decoders._flat(decoder.inputs([5], 1)))
    runner.reset()
    torch.testing.assert_close(runner.run(first)[0], out, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_caches_are_updated_in_place(dtype):
    decoder = decoders.executorch_llama(layers=1, dtype=dtype)
    pte = et_tensorrt.lower(decoder.program)
    (blob,) = [read_blob(b) for b in delegate_blobs(pte)]
    assert [(e.dtype, e.in_place) for e in blob.states] == [(scalar_type_code(dtype), True)] * 2
    steps = decoders.decode(decoder, pte, TOKENS[:6])
    assert max(s.max_error for s in steps) <= 0.05  # half precision against half-precision eager
    assert all(s.state_bytes == 0 for s in steps)


@pytest.fixture(scope="module", params=[(m, p) for m in MAKERS for p in HALF], ids="-".join)
def half(request):
    """An fp32 decoder (one layer) lowered with precision fp16 / bf16."""
    name, precision = request.param
    decoder = MAKERS[name](layers=1)
    pte = et_tensorrt.lower(decoder.program, precision=precision)
    return decoder, pte, precision, et_tensorrt.lower.last_report


def test_fp32_decoder_in_half_precision_decodes_with_its_cache_in_place(half):
    decoder, pte, precision, report = half
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)
    (blob,) = [read_blob(b) for b in delegate_blobs(pte)]
    caches = [e for e in blob.states if "cache" in e.name]
    assert caches and all(e.in_place and e.dtype == scalar_type_code(HALF[precision]) for e in caches)
    assert sum(e.nbytes for e in caches) == decoder.cache_bytes // 2  # the fp32 cache's bytes, halved
    fp32_weights = sum(t.numel() * 4 for t in decoder.program.state_dict.values() if t.dtype == torch.float32)
    assert sum(w.nbytes for w in blob.weights) < 0.55 * (fp32_weights - decoder.cache_bytes)  # weights cast once
    steps = decoders.decode(decoder, pte, TOKENS, prompt=3)
    assert len(steps) >= 16
    assert max(s.max_error for s in steps) <= for_precision(precision).atol  # against fp32 eager
    logits = decoders.VOCAB * 4  # the logits stay float32 at the delegate boundary
    for step in steps:
        assert step.bytes_moved <= 2 * logits * step.tokens + 256, step.plans
        states = [s for s in step.plans[0].states if "cache" in s.name]
        assert all(s.update == "in place" and s.bytes == 0 and s.dtype == HALF[precision] for s in states)


def test_half_precision_reset_restores_the_initial_cache(half):
    """A call at position 1 reads the cache row at 0: the previous sequence's after a call there, the initial
    (zero) contents after ``reset()``, as in a fresh Runner."""
    decoder, pte, _, _ = half
    runner = Runner(pte)

    def at_one(r):
        return r.run(decoders._flat(decoder.inputs([5], 1)))[0].clone()

    runner.run(decoders._flat(decoder.inputs([3], 0)))
    continued = at_one(runner)
    runner.reset()
    restored = at_one(runner)
    torch.testing.assert_close(restored, at_one(Runner(pte)), rtol=0, atol=TOLERANCE)
    assert float((restored - continued).abs().max()) > 10 * TOLERANCE  # the row at 0 is read
