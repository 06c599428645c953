"""Verified loading (Runner checks the program with ExecuTorch's InternalConsistency verification unless
told the file is trusted) and a passive ``inspect`` (it never deserializes a program or an engine)."""

from __future__ import annotations

import struct

import pytest
import torch

import et_tensorrt
from et_tensorrt.errors import RunnerError


def _corrupt_root(pte: bytes) -> bytes:
    """The flatbuffer's root offset pointed past the end: only a verifying loader notices before reading."""
    return struct.pack("<I", len(pte) + 4096) + pte[4:]


def test_runner_verifies_programs_by_default(lowered, tmp_path):
    pte, model, x = lowered
    with pytest.raises(RunnerError, match="program verification"):
        et_tensorrt.Runner(_corrupt_root(pte))
    path = tmp_path / "corrupt.pte"
    path.write_bytes(_corrupt_root(pte))
    with pytest.raises(RunnerError, match="program verification"):
        et_tensorrt.Runner(path)
    (y,) = et_tensorrt.Runner(pte).run([x])
    torch.testing.assert_close(y, model(x).detach())


def test_trusted_programs_may_skip_verification(lowered, tmp_path):
    pte, model, x = lowered
    path = tmp_path / "ok.pte"
    path.write_bytes(pte)
    for source in (pte, path):
        (y,) = et_tensorrt.Runner(source, verify=False).run([x])
        torch.testing.assert_close(y, model(x).detach())


def test_inspect_never_deserializes_a_program_or_an_engine(lowered, monkeypatch):
    from torch._export.serde import serialize

    from et_tensorrt import inspection, trt
    from et_tensorrt.embedded_program import loader
    from et_tensorrt.runtime import executors

    def forbidden(*args, **kwargs):
        raise AssertionError("inspect deserialized something")

    monkeypatch.setattr(loader, "load_program", forbidden)
    monkeypatch.setattr(loader, "checked_program", forbidden)
    monkeypatch.setattr(executors, "create_executor", forbidden)
    monkeypatch.setattr(serialize.ExportedProgramDeserializer, "deserialize", forbidden)
    monkeypatch.setattr(trt, "module", forbidden)
    monkeypatch.setattr(torch.export, "load", forbidden)
    info = inspection.inspect_bytes(lowered[0])
    text = inspection.format_program(info)
    assert "blob format version 2" in text and "embedded program: graph" in text
    assert len(inspection.delegate_blobs(lowered[0])) == 1
