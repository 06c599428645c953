"""ExecuTorch's Gemma 4 text decoder (the wheel's ``examples/models/gemma4``, tiny config, random weights) as its
export script exports it: one engine from the first call, its KV cache written in place, decoded token by token
against eager through et_tensorrt's Runner and through ExecuTorch's own ``executorch.runtime`` (what
``run_gemma4.py`` drives it with).

Its program reads the write position with ``input_pos[0].item()`` (checked by ``torch._check`` conjunctions),
writes each cache with ``narrow(cache, 2, start, S).copy_(rows)`` and attends over ``narrow(cache, 2, 0, start +
S)``: the checks are scalar plumbing the engine takes (partition/supported_ops.py), the write a slice write the
delegate guards (backend/state_lifting.py)."""

from __future__ import annotations

import pytest

import et_tensorrt
from et_tensorrt.errors import RunnerError
from et_tensorrt.format.blob import read_blob
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.testing import decoders

pytest.importorskip("executorch.examples.models.gemma4.text_decoder.gemma4_model")
pytestmark = pytest.mark.slow

TOKENS = [3, 5, 7, 9, 11, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def gemma4():
    decoder = decoders.executorch_gemma4()
    pte = et_tensorrt.lower({"text_decoder": decoder.program})
    return decoder, pte, et_tensorrt.lower.last_report


def test_one_engine_owns_every_cache_in_place(gemma4):
    decoder, pte, report = gemma4
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)
    assert sorted(s.buffer for s in report.states if s.partition is not None) == sorted(decoder.states)
    (blob,) = [read_blob(b) for b in delegate_blobs(pte)]
    assert len(blob.states) == 4 and all(e.in_place for e in blob.states)
    assert sum(e.nbytes for e in blob.states) == decoder.cache_bytes


def test_decodes_like_eager_from_the_first_call(gemma4):
    decoder, pte, _ = gemma4
    steps = decoders.decode(decoder, pte, TOKENS, prompt=4, methods=("text_decoder", "text_decoder"))
    assert len(steps) == 17 and max(s.max_error for s in steps) <= TOLERANCE
    logits = decoders.VOCAB * 4
    for step in steps[1:]:
        assert step.bytes_moved <= 2 * logits + 256, step.plans
        assert all(s.update == "in place" and s.bytes == 0 for p in step.plans for s in p.states)


def test_executorch_runtime_decodes_it(gemma4):
    """``executorch.runtime``'s Method, as ExecuTorch's run_gemma4.py calls ``text_decoder``."""
    from executorch.runtime import Runtime

    decoder, pte, _ = gemma4
    program = Runtime.get().load_program(pte)
    method = program.load_method("text_decoder")
    steps = decoders.decode(decoder, lambda inputs, _: method.execute(inputs), TOKENS[:8], prompt=4)
    assert max(s.max_error for s in steps) <= TOLERANCE


def test_a_write_past_the_cache_is_refused(gemma4):
    decoder, pte, _ = gemma4
    runner = et_tensorrt.Runner(pte)
    args, kwargs = decoder.inputs([3, 5], decoders.MAX_CONTEXT - 1)
    with pytest.raises(RunnerError, match=r"(?s)position.*\b31\b.*cache"):
        runner.run(decoders._flat((args, kwargs)), method="text_decoder")
    # nothing was written: the runner still decodes from the start
    steps = decoders.decode(decoder, runner, TOKENS[:6], prompt=4, methods=("text_decoder", "text_decoder"))
    assert max(s.max_error for s in steps) <= TOLERANCE
