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
    assert "blob format version 3" in text and "embedded program: graph" in text
    assert len(inspection.delegate_blobs(lowered[0])) == 1


def _without_delegate_field(pte: bytes, edit) -> bytes:
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(pte)
    edit(pte_file.program.execution_plan[0].delegates[0])
    return bytes(serialize_pte_binary(pte_file, extract_delegate_segments=True))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: setattr(d.compile_specs[1], "key", None), "compile spec 1 has no key"),
        (lambda d: setattr(d.compile_specs[0], "value", None), "compile spec 0 has no value"),
        (lambda d: setattr(d, "compile_specs", None), "has no compile-spec list"),
        (lambda d: setattr(d, "id", None), "has no backend id"),
    ],
    ids=["spec_key", "spec_value", "spec_list", "backend_id"],
)
def test_a_delegate_missing_a_field_is_refused_not_crashed(lowered, tmp_path, edit, message):
    """Fuzz finding F8: ExecuTorch's verifier accepts a delegate whose optional fields are absent (one flipped
    vtable byte does it) and Method::init then dereferences them: a segfault. Runner checks them after
    verification and refuses the file."""
    bad = _without_delegate_field(lowered[0], edit)
    with pytest.raises(RunnerError, match=message):
        et_tensorrt.Runner(bad)
    path = tmp_path / "bad.pte"
    path.write_bytes(bad)
    with pytest.raises(RunnerError, match=message):
        et_tensorrt.Runner(path)


def test_a_method_without_a_name_is_refused_not_crashed(lowered):
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(lowered[0])
    pte_file.program.execution_plan[0].name = None
    bad = bytes(serialize_pte_binary(pte_file, extract_delegate_segments=True))
    with pytest.raises(RunnerError, match="has no name"):
        et_tensorrt.Runner(bad)
