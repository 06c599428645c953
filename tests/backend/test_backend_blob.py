"""The blob writer/reader against docs/blob-format.md and the shared fixtures."""

from __future__ import annotations

import dataclasses
import struct

import blob_fixtures as fx
import pytest
import torch

from et_tensorrt.errors import BlobFormatError, UnsupportedDtypeError
from et_tensorrt.format import blob as B
from et_tensorrt.format import dtypes
from et_tensorrt.format import input_guards as IG
from et_tensorrt.format import recipe as R
from et_tensorrt.format import state_table as ST


def test_valid_blob_round_trips():
    data = fx.valid_blob()
    parsed = B.read_blob(data)
    assert parsed.version == B.VERSION == 3 and parsed.digests_verified
    assert parsed.io == fx.IO
    assert parsed.engine == fx.ENGINE and parsed.graph == fx.GRAPH and parsed.program is None
    assert parsed.metadata == fx.METADATA
    assert (parsed.exec_device_type, parsed.exec_device_index) == (1, 0)
    assert [e.name for e in parsed.inputs] == ["x", "ids"] and [e.name for e in parsed.outputs] == ["out", "scalar"]
    assert parsed.outputs[0].device == "cuda:1" and parsed.inputs[1].device == "cpu"


def test_a_blob_with_named_data_keeps_keys_not_bytes():
    """The engine and two weights are ExecuTorch named data: the blob names their keys (NAMED_DATA, flag bit 1) and
    holds none of their bytes; the rest of the program is in it as before."""
    data = fx.valid_named_blob()
    assert struct.unpack_from("<H", data, 6) == (B.FLAG_NAMED_DATA,)
    parsed = B.read_blob(data)
    assert parsed.named == fx.NAMED and parsed.engine is None and parsed.has_engine
    assert parsed.named_engine == fx.NAMED[0] and parsed.named_weight(1) == fx.NAMED[2]
    assert parsed.named_weight(2) is None and parsed.weight_bytes(parsed.weights[2])  # still in the blob
    with pytest.raises(BlobFormatError, match="named data"):
        parsed.weight_bytes(parsed.weights[0])
    assert fx.ENGINE not in data and fx.WEIGHTS[0].tensor.numpy().tobytes() not in data  # none of their bytes
    # a program's identity covers a named weight by its key (a digest of its bytes)
    renamed = [fx.NAMED[0], B.NamedRef(B.NAMED_WEIGHT, 0, "et_tensorrt:" + "2" * 64, 48), fx.NAMED[2]]
    other = B.write_blob(fx.IO, graph=fx.GRAPH, weights=fx.WEIGHTS, named=renamed)
    assert B.program_digest(B.read_blob(other)) != B.program_digest(parsed)


def test_named_data_records_a_crc32_beside_each_key():
    """NAMED_DATA layout 1 (what lowering writes): each entry carries the CRC-32 the delegate checks its named bytes
    against; layout 0 (written before) still reads, with nothing recorded."""
    checked = B.read_blob(fx.valid_checked_named_blob())
    assert checked.named == fx.NAMED_CHECKED and checked.named_digests
    unchecked = B.read_blob(fx.valid_named_blob())
    assert [n.crc32 for n in unchecked.named] == [None] * 3 and not unchecked.named_digests
    payload = B.encode_named_data(fx.NAMED_CHECKED)
    assert struct.unpack_from("<II", payload) == (3, B.NAMED_LAYOUT_CRC32)
    assert struct.unpack_from("<BBHIQII", payload, 8) == (0, 0, 76, 0, len(fx.ENGINE), 0x1000, 0)
    assert payload[32 : 32 + 76] == fx.NAMED[0].key.encode()
    with pytest.raises(BlobFormatError, match="with and without a CRC-32"):
        B.encode_named_data([fx.NAMED_CHECKED[0], fx.NAMED[1]])


def test_header_layout_is_the_documented_one():
    data = fx.valid_blob()
    magic, version, flags, header_size, count, total = struct.unpack_from("<4sHHIIQ", data, 0)
    assert (magic, version, flags, header_size, count, total) == (b"ETRT", 3, 0, 32, 6, len(data))
    assert struct.unpack_from("<bb6s", data, 24) == (1, 0, b"\0" * 6)
    table = [struct.unpack_from("<IIQQ", data, 32 + 24 * i) for i in range(count)]
    assert [kind for kind, *_ in table] == [1, 2, 5, 6, 4, 9]  # DIGESTS last
    assert all(offset % 64 == 0 for _, _, offset, _ in table), "every payload starts 64-byte aligned"
    # IO table: count, then first entry's fixed part (role, dtype, dev type, dev index, name_len, rank)
    _, _, off, size = struct.unpack_from("<IIQQ", data, 32)
    assert struct.unpack_from("<I", data, off) == (4,)
    assert struct.unpack_from("<BBbbHH", data, off + 4) == (0, 6, 1, 0, 1, 2)
    assert data[off + 12 : off + 13] == b"x"
    assert struct.unpack_from("<qqq", data, off + 13) == (1, 4, 64)


def test_weights_table_is_the_documented_one():
    data = fx.valid_blob()
    _, _, off, size = struct.unpack_from("<IIQQ", data, 32 + 24 * 3)  # WEIGHTS
    count, reserved = struct.unpack_from("<II", data, off)
    assert (count, reserved) == (len(fx.WEIGHTS), 0)
    kind, dtype, rank, flags, name_len, zero, offset, nbytes = struct.unpack_from("<BBBBHHQQ", data, off + 8)
    assert (kind, dtype, rank, flags, name_len, zero) == (0, 6, 2, 0, len("fc.weight"), 0)
    assert data[off + 32 : off + 32 + name_len] == b"fc.weight"
    assert struct.unpack_from("<4q", data, off + 32 + name_len) == (3, 4, 4, 1)  # sizes, then strides
    assert offset % 64 == 0 and (off + offset) % 64 == 0 and nbytes == 48
    assert data[off + offset : off + offset + nbytes] == fx.WEIGHTS[0].tensor.numpy().tobytes()
    parsed = B.read_blob(data)
    assert [(w.name, w.kind, w.sizes, w.strides) for w in parsed.weights] == [
        (w.name, w.kind, tuple(w.tensor.shape), tuple(w.tensor.stride())) for w in fx.WEIGHTS
    ]
    assert parsed.weights[2].persistent and parsed.weights[2].strides == (1, 3)  # a transposed buffer keeps its strides
    assert all(w.offset % 64 == 0 for w in parsed.weights)


def test_engine_or_program_is_optional_and_unknown_sections_are_skipped():
    assert B.read_blob(fx.valid_blob_without_engine()).engine is None
    engine_only = B.read_blob(fx.valid_engine_only_blob())
    assert engine_only.engine == fx.ENGINE and not engine_only.has_program and engine_only.weights == []
    parsed = B.read_blob(fx.valid_blob_with_unknown_section())
    assert parsed.engine == fx.ENGINE and parsed.io == fx.IO


def test_version_1_blobs_are_still_read():
    parsed = B.read_blob(fx.valid_v1_blob())
    assert parsed.version == 1 and parsed.program == fx.PROGRAM and parsed.graph is None
    assert parsed.engine == fx.ENGINE and parsed.io == fx.IO and parsed.metadata == fx.METADATA


def test_input_guards_round_trip():
    assert B.read_blob(fx.valid_guarded_blob()).input_guards == fx.GUARDS
    assert B.read_blob(fx.valid_blob()).input_guards == IG.InputGuards()  # a blob without the section: none


def test_version_2_blobs_are_read_without_digests():
    parsed = B.read_blob(fx.valid_v2_blob())
    assert parsed.version == 2 and not parsed.digests_verified and parsed.engine == fx.ENGINE


def test_a_flipped_byte_in_any_section_is_refused_by_name():
    blobs = (fx.valid_blob(), fx.valid_stateful_blob(), fx.valid_recipe_blob(), fx.valid_named_recipe_blob())
    for blob in (*blobs, fx.valid_guarded_blob()):
        for kind, _, _, size in fx._section_table(blob):
            if kind == B.SECTION_DIGESTS or size == 0:
                continue
            name = {v: k[len("SECTION_") :] for k, v in vars(B).items() if k.startswith("SECTION_")}[kind]
            with pytest.raises(BlobFormatError, match=f"{name} section fails its digest"):
                B.read_blob(fx.flip_byte(blob, kind))


def test_recipe_round_trips_and_rebuilds_its_initializers():
    from et_tensorrt.embedded_program.loader import weight_tensors

    for engine in (fx.ENGINE, None):  # beside the ahead-of-time engine, or alone (a recipe-only blob)
        parsed = B.read_blob(fx.valid_recipe_blob(engine=engine))
        recipe = parsed.recipe
        assert parsed.engine == engine and recipe.usable and recipe.header == fx.RECIPE_HEADER
        assert recipe.graph == fx.RECIPE_GRAPH and recipe.aot_engine["targets"] == ["sm86"]
        rebuilt = R.initializers(recipe, weight_tensors(parsed))
        assert torch.equal(rebuilt["fc_t"], fx.WEIGHTS[0].tensor.t()) and rebuilt["fc_t"].is_contiguous()
        assert rebuilt["half"].tolist() == [0.5, 0.5]


def test_a_recipe_over_named_weights_rebuilds_from_the_named_bytes():
    """Named data and a RECIPE together (flag bit 1, kinds 10 and 11): the recipe maps WEIGHTS entries whose bytes
    are named data, so the weights are stored once, outside the blob, and the recipe still rebuilds them."""
    from et_tensorrt.embedded_program.loader import weight_tensors

    data = fx.valid_named_recipe_blob()
    parsed = B.read_blob(data)
    assert struct.unpack_from("<H", data, 6) == (B.FLAG_NAMED_DATA,) and parsed.named_engine is not None
    assert parsed.recipe.usable and all(parsed.named_weight(i) for i in range(4))
    assert fx.WEIGHTS[0].tensor.numpy().tobytes() not in data
    named = {n.key: B.tensor_span(fx.WEIGHTS[n.index].tensor).tobytes() for n in parsed.named if n.target == 1}
    rebuilt = R.initializers(parsed.recipe, weight_tensors(parsed, named))
    assert torch.equal(rebuilt["fc_t"], fx.WEIGHTS[0].tensor.t()) and rebuilt["half"].tolist() == [0.5, 0.5]


def test_a_recipe_of_a_newer_layout_leaves_the_blob_usable():
    parsed = B.read_blob(fx.valid_recipe_blob(fx.recipe_payload(version=R.VERSION + 1)))
    assert parsed.recipe.version == R.VERSION + 1 and not parsed.recipe.usable and parsed.engine == fx.ENGINE


def test_state_table_round_trips():
    parsed = B.read_blob(fx.valid_stateful_blob())
    assert parsed.states == fx.STATES
    counter = parsed.states[1].initial_tensor(torch.device("cpu"))
    assert counter.tolist() == [7] and parsed.states[0].nbytes == 2 * 16 * 4 * 4


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


def test_read_blob_is_the_cpp_reader():
    """One reader: read_blob raises exactly what _reader.parse_blob raises (same messages)."""
    from et_tensorrt.format import _reader

    for name, (data, _) in fx.damaged_blobs().items():
        with pytest.raises(BlobFormatError) as native:
            _reader.parse_blob(data)
        with pytest.raises(BlobFormatError) as wrapped:
            B.read_blob(data)
        assert str(native.value) == str(wrapped.value), name


def test_writer_refuses_what_readers_reject():
    with pytest.raises(BlobFormatError, match="rank"):
        B.encode_io_table([B.IOEntry(0, "x", 6, (B.DimRange.static(1),) * 17)])
    with pytest.raises(BlobFormatError, match="min"):
        B.encode_io_table([B.IOEntry(0, "x", 6, (B.DimRange(3, 3, 2),))])
    with pytest.raises(BlobFormatError):
        dtypes.scalar_type_code(torch.uint4)  # no ExecuTorch ScalarType
    with pytest.raises(BlobFormatError, match="needs an ENGINE"):
        B.write_blob(fx.IO)
    with pytest.raises(BlobFormatError, match="kind"):
        B.encode_weights([B.Weight("w", "gradient", torch.ones(1))])
    with pytest.raises(BlobFormatError):
        B.device_code("mps:0")
    assert B.device_code("cuda:3") == (1, 3) and B.device_code("cpu") == (0, 0)
    assert dtypes.scalar_type_code("torch.bfloat16") == 15 and dtypes.scalar_type_code(torch.complex64) == 9
    assert dtypes.scalar_type_dtype(15) is torch.bfloat16


def test_dtype_codes_are_named_and_sized_as_torch_does():
    """The format's one dtype table (extension/format/scalar_types.h, read without torch) agrees with the C++
    translator and torch for every code: torch's name and element size, or none for a code torch lacks."""
    for code in range(-1, 64):
        try:
            dtype = dtypes.scalar_type_dtype(code)
        except UnsupportedDtypeError:
            assert dtypes.scalar_type_name(code) == f"ScalarType({code})"
            with pytest.raises(UnsupportedDtypeError):
                dtypes.element_size(code)
            continue
        assert dtypes.scalar_type_name(code) == str(dtype).removeprefix("torch.")
        assert dtypes.element_size(code) == dtype.itemsize, dtype


def test_a_state_dtype_must_be_a_code():
    entry = dataclasses.replace(fx.STATES[0], dtype=torch.float32)
    with pytest.raises(BlobFormatError, match="not an ExecuTorch ScalarType code"):
        ST.encode_state_table([entry])


def test_fixture_files_are_written(tmp_path):
    paths = fx.write_fixture_files(tmp_path)
    assert (tmp_path / "valid.etrt").read_bytes() == fx.valid_blob()
    assert len(paths) == 12 + len(fx.damaged_blobs())
