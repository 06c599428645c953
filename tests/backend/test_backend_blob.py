"""The blob writer/reader against docs/blob-format.md and the shared fixtures."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import blob_fixtures as fx  # noqa: E402

from et_tensorrt import blob as B  # noqa: E402
from et_tensorrt.errors import BlobFormatError  # noqa: E402


def test_valid_blob_round_trips():
    data = fx.valid_blob()
    parsed = B.read_blob(data)
    assert parsed.io == fx.IO
    assert parsed.engine == fx.ENGINE and parsed.program == fx.PROGRAM
    assert parsed.metadata == fx.METADATA
    assert (parsed.exec_device_type, parsed.exec_device_index) == (1, 0)
    assert [e.name for e in parsed.inputs] == ["x", "ids"] and [e.name for e in parsed.outputs] == ["out", "scalar"]
    assert parsed.outputs[0].device == "cuda:1" and parsed.inputs[1].device == "cpu"


def test_header_layout_is_the_documented_one():
    data = fx.valid_blob()
    magic, version, flags, header_size, count, total = struct.unpack_from("<4sHHIIQ", data, 0)
    assert (magic, version, flags, header_size, count, total) == (b"ETRT", 1, 0, 32, 4, len(data))
    assert struct.unpack_from("<bb6s", data, 24) == (1, 0, b"\0" * 6)
    kinds = [struct.unpack_from("<IIQQ", data, 32 + 24 * i)[0] for i in range(count)]
    assert kinds == [1, 2, 3, 4]
    # IO table: count, then first entry's fixed part (role, dtype, dev type, dev index, name_len, rank)
    _, _, off, size = struct.unpack_from("<IIQQ", data, 32)
    assert struct.unpack_from("<I", data, off) == (4,)
    assert struct.unpack_from("<BBbbHH", data, off + 4) == (0, 6, 1, 0, 1, 2)
    assert data[off + 12 : off + 13] == b"x"
    assert struct.unpack_from("<qqq", data, off + 13) == (1, 4, 64)


def test_engine_section_is_optional_and_unknown_sections_are_skipped():
    assert B.read_blob(fx.valid_blob_without_engine()).engine is None
    parsed = B.read_blob(fx.valid_blob_with_unknown_section())
    assert parsed.program == fx.PROGRAM and parsed.io == fx.IO


@pytest.mark.parametrize("name", sorted(fx.damaged_blobs()))
def test_damaged_blob_is_rejected(name):
    data, fragment = fx.damaged_blobs()[name]
    with pytest.raises(BlobFormatError, match=fragment):
        B.read_blob(data)


def test_every_truncation_is_rejected():
    data = fx.valid_blob()
    for n in range(len(data)):
        with pytest.raises(BlobFormatError):
            B.read_blob(data[:n])


def test_writer_refuses_what_readers_reject():
    with pytest.raises(BlobFormatError, match="rank"):
        B.encode_io_table([B.IOEntry(0, "x", 6, (B.DimRange.static(1),) * 17)])
    with pytest.raises(BlobFormatError, match="min"):
        B.encode_io_table([B.IOEntry(0, "x", 6, (B.DimRange(3, 3, 2),))])
    with pytest.raises(BlobFormatError):
        B.scalar_type_code("complex64")
    with pytest.raises(BlobFormatError):
        B.device_code("mps:0")
    assert B.device_code("cuda:3") == (1, 3) and B.device_code("cpu") == (0, 0)
    assert B.scalar_type_code("torch.bfloat16") == 15


def test_fixture_files_are_written(tmp_path):
    paths = fx.write_fixture_files(tmp_path)
    assert (tmp_path / "valid.etrt").read_bytes() == fx.valid_blob()
    assert len(paths) == 3 + len(fx.damaged_blobs())
