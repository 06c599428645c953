"""Every section of a delegate blob carries a CRC-32 (DIGESTS, format 3) that the C++ reader checks before
anything parses a payload or TensorRT deserializes the engine: a flipped byte in a real program is one error
naming the section, on this CPU machine as on a GPU (docs/security.md says what a digest does not protect)."""

from __future__ import annotations

import blob_fixtures as fx
import pytest
import torch
from models import MLP

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.errors import RunnerError
from et_tensorrt.format import blob as B
from et_tensorrt.inspection import delegate_blobs, format_program, inspect_bytes

NAMES = {v: k[len("SECTION_") :] for k, v in vars(B).items() if k.startswith("SECTION_")}


@pytest.fixture(scope="module")
def pte():
    return et_tensorrt.lower(MLP().eval(), (torch.randn(4, 8),))


def _flipped(pte: bytes, kind: int) -> bytes:
    """The program with one byte of its delegate's ``kind`` section inverted where it lies in the file."""
    (blob,) = delegate_blobs(pte)
    at = pte.index(blob)
    flipped = fx.flip_byte(blob, kind)
    return pte[:at] + flipped + pte[at + len(blob) :]


def test_real_blob_has_digests_and_inspect_says_so(pte):
    (blob,) = [B.read_blob(b) for b in delegate_blobs(pte)]
    assert blob.version == 3 and blob.digests_verified
    text = format_program(inspect_bytes(pte))
    assert "integrity: every section matches its CRC-32 (DIGESTS)" in text


@pytest.mark.parametrize("kind", [B.SECTION_ENGINE, B.SECTION_GRAPH, B.SECTION_WEIGHTS, B.SECTION_IO_TABLE])
def test_flipped_byte_is_refused_at_load_by_section(pte, kind):
    bad = _flipped(pte, kind)
    with pytest.raises(RunnerError, match=f"{NAMES[kind]} section fails its digest"):
        Runner(bad).run([torch.randn(4, 8)])
    text = format_program(inspect_bytes(bad))  # inspect names the broken section instead of the contents
    assert f"{NAMES[kind]} section fails its digest" in text
