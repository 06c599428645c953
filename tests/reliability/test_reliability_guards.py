"""Inputs the exported program's own guards refuse (issue 45, rows 8-9): positions and tokens of different lengths,
a token id past the vocabulary. The delegate refuses them before anything runs (the blob's INPUT_GUARDS), for every
front door, in one line naming the method's input as its caller knows it ("input 1 ('cache_position')")."""

from __future__ import annotations

import pytest
import torch
from artifacts import LLAMA_CONTEXT as CONTEXT

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.errors import BlobFormatError, RunnerError
from et_tensorrt.format import blob as blob_mod
from et_tensorrt.format import input_guards as guards_mod
from et_tensorrt.inspection import delegate_blobs


@pytest.fixture(scope="module")
def lowered(tiny_llama_artifact) -> tuple[bytes, int]:
    """(the .pte, its vocabulary): a tiny HF Llama as prefill (1..31 tokens and their positions) and decode (one
    token) methods, lowered once per session (tests/artifacts.py; tests/reliability/test_reliability_generation.py
    generates with it)."""
    return (tiny_llama_artifact.folder / "two.pte").read_bytes(), tiny_llama_artifact.value["vocab"]


@pytest.fixture(scope="module")
def pte(lowered) -> bytes:
    return lowered[0]


@pytest.fixture(scope="module")
def vocab(lowered) -> int:
    return lowered[1]


def _refused(runner, inputs, method) -> str:
    with pytest.raises(RunnerError) as err:
        runner.run(inputs, method)
    message = str(err.value)
    assert "\n" not in message and "frame #" not in message, message
    runner.run([torch.tensor([[5, 6]]), torch.arange(2)], "prefill")  # the runner goes on
    return message


def test_the_blob_records_what_torch_export_guards(pte, vocab):
    decode, prefill = (blob_mod.read_blob(b).input_guards for b in delegate_blobs(pte))  # methods sorted by name
    assert {(g.argument, g.dim, g.scale, g.offset) for g in prefill.dims} == {(0, 1, 1, 0), (1, 0, 1, 0)}
    assert len({g.symbol for g in prefill.dims}) == 1 and prefill.indices == (guards_mod.IndexGuard(0, vocab),)
    assert decode.dims == () and decode.indices == (guards_mod.IndexGuard(1, vocab),)  # static: no symbol


def test_positions_and_tokens_of_different_lengths_are_refused(pte):
    message = _refused(et_tensorrt.Runner(pte), [torch.tensor([[5, 6, 7]]), torch.arange(0, 5)], "prefill")
    assert (
        "dim 0 of input 1 ('cache_position') is 5 but dim 1 of input 0 ('input_ids') is 3: the exported program "
        "takes them equal" in message
    )


def test_a_token_past_the_vocabulary_is_one_error_naming_the_input(pte, vocab):
    message = _refused(et_tensorrt.Runner(pte), [torch.tensor([[vocab + 7]]), torch.tensor([3])], "decode")
    assert f"input 0 ('input_ids') holds {vocab + 7} (element 0), outside 0..{vocab - 1}" in message


def test_a_decode_error_names_the_methods_input_not_the_delegates(pte):
    """decode's delegate reads cache_position first: its own argument 0 is the method's input 1."""
    message = _refused(et_tensorrt.Runner(pte), [torch.tensor([[5]]), torch.tensor([CONTEXT + 1])], "decode")
    assert f"input 1 ('cache_position'): writing 1 position(s) from {CONTEXT + 1}" in message


def test_executorch_runtime_is_refused_too(pte):
    """Without a Runner the delegate still refuses (in its own argument order)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    method = program.load_method("prefill")
    with pytest.raises(RuntimeError):
        method.execute([torch.tensor([[5, 6, 7]]), torch.arange(0, 5)])
    assert "dim 0 of input 1 is 5 but dim 1 of input 0 is 3" in _C.last_delegate_error()


def test_the_reader_refuses_a_guard_on_an_argument_the_delegate_lacks():
    io = [blob_mod.IOEntry(blob_mod.ROLE_INPUT, "x", 6, (blob_mod.DimRange(1, 2, 4),))]
    io.append(blob_mod.IOEntry(blob_mod.ROLE_OUTPUT, "y", 6, (blob_mod.DimRange(1, 2, 4),)))
    bad = guards_mod.InputGuards((guards_mod.DimGuard(0, 0, 0), guards_mod.DimGuard(3, 0, 0)))
    with pytest.raises(BlobFormatError, match="INPUT_GUARDS dim entry 1 names argument 3, not one"):
        blob_mod.read_blob(blob_mod.write_blob(io, engine=b"e", guards=bad))
