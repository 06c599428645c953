"""``cuda_graph`` at lowering: for every method (True) or the methods named (``cuda_graph="decode"``), recorded in
each blob's METADATA, the one entry of it the runtime reads (runtime/executors.py). Names the program does not
have are refused before any work."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt.errors import OptionError
from et_tensorrt.format import _reader
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.runtime import executors


def _methods():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    ep = torch.export.export(model, (torch.randn(2, 8),))
    return {"prefill": ep, "decode": ep}


def _graphed(pte: bytes) -> list[bool]:
    return [executors._lowered_with_graph(_reader.parse_blob(b)) for b in delegate_blobs(pte)]


def test_only_the_named_method_replays_as_a_graph(_engine_cache_dir):
    pte = et_tensorrt.lower(_methods(), min_block_size=1, cuda_graph="decode")
    runner = et_tensorrt.Runner(pte)
    x = torch.randn(2, 8)
    torch.testing.assert_close(runner.run([x], method="decode")[0], runner.run([x], method="prefill")[0])
    # Blobs in method order (decode, prefill: ExecuTorch sorts them by name).
    assert sorted(_graphed(pte)) == [False, True]
    assert et_tensorrt.lower.last_reports.keys() == {"prefill", "decode"}


def test_a_bool_applies_to_every_method_and_the_default_to_none(_engine_cache_dir):
    methods = _methods()
    assert _graphed(et_tensorrt.lower(methods, min_block_size=1, cuda_graph=True)) == [True, True]
    assert _graphed(et_tensorrt.lower(methods["decode"], min_block_size=1)) == [False]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("generate", r"cuda_graph names 'generate', which the program does not have \(its methods: prefill, decode\)"),
        (3, r"cuda_graph 3 is neither True/False nor method names"),
    ],
)
def test_a_method_the_program_does_not_have_is_refused(value, message):
    with pytest.raises(OptionError, match=message):
        et_tensorrt.lower(_methods(), cuda_graph=value)
