"""Delegate blob fixtures (format v2, and v1 for the read-only path), generated in code.

``valid_blob()`` must parse; every entry of ``damaged_blobs()`` must be rejected by the one reader (the
C++ reader, through ``_reader.parse_blob`` and ``blob.read_blob``) with a BlobFormatError whose message holds
the ``expect`` fragment. ``write_fixture_files(dir)`` dumps them all as ``<name>.etrt`` files.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import torch

from et_tensorrt.format import blob as B
from et_tensorrt.format import input_guards as IG
from et_tensorrt.format import recipe as R
from et_tensorrt.format import refit_map as RM
from et_tensorrt.format import state_table as ST
from et_tensorrt.format.dtypes import scalar_type_code

ENGINE = b"vtrt" + bytes(range(60))  # placeholder engine payload: readers never interpret ENGINE bytes
GRAPH = b'{"placeholder": "torch.export JSON; the blob reader does not interpret GRAPH"}'
PROGRAM = b"PK\x03\x04" + b"fake torch.export.save archive" * 3  # version 1's PROGRAM section
METADATA = {"trt_flavour": "tensorrt_rtx", "trt_version": "1.7.1.116", "precision": "fp32"}
WEIGHTS = [
    B.Weight("fc.weight", "parameter", torch.arange(12, dtype=torch.float32).reshape(3, 4)),
    B.Weight("fc.bias", "parameter", torch.ones(3, dtype=torch.float16)),
    B.Weight("stats.running", "buffer", torch.arange(6, dtype=torch.int64).reshape(2, 3).t()),  # strides (1, 3)
    B.Weight("mask", "constant", torch.tensor([True, False])),
    B.Weight("empty", "constant", torch.zeros(0, 5)),
]

IO = [
    B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange(1, 4, 64), B.DimRange.static(8)), B.DEVICE_CUDA, 0),
    B.IOEntry(B.ROLE_INPUT, "ids", 4, (B.DimRange(1, 4, 64),), B.DEVICE_CPU, 0),
    B.IOEntry(B.ROLE_OUTPUT, "out", 6, (B.DimRange(1, 4, 64), B.DimRange.static(4)), B.DEVICE_CUDA, 1),
    B.IOEntry(B.ROLE_OUTPUT, "scalar", 5, (), B.DEVICE_CUDA, 0),
]


def valid_blob() -> bytes:
    return B.write_blob(IO, engine=ENGINE, graph=GRAPH, weights=WEIGHTS, metadata=METADATA, exec_device_type=1)


def valid_blob_without_engine() -> bytes:
    return B.write_blob(IO, graph=GRAPH, weights=WEIGHTS, exec_device_type=1)


def valid_engine_only_blob() -> bytes:
    return B.write_blob(IO, engine=ENGINE, metadata=METADATA, exec_device_type=1)


def valid_blob_with_unknown_section() -> bytes:
    """Unknown section kinds are skipped by the reader (forward compatibility)."""
    return B.write_sections(
        [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (99, b"future"), (B.SECTION_ENGINE, ENGINE)], 1, 0
    )


STATES = [
    # a KV cache (1, heads, capacity 16, head dim): written in place where input 0's positions say
    ST.StateEntry(
        "k_cache",
        scalar_type_code(torch.float32),
        (1, 2, 16, 4),
        "k_in",
        "k_out",
        ST.UPDATE_IN_PLACE,
        None,
        position_input=1,
    ),
    # a counter the engine returns and the delegate copies back, starting at 7
    ST.StateEntry(
        "steps", scalar_type_code(torch.int64), (1,), "n_in", "n_out", ST.UPDATE_WRITE_BACK, struct.pack("<q", 7)
    ),
]


def valid_stateful_blob() -> bytes:
    return B.write_blob(IO, engine=ENGINE, metadata=METADATA, state=ST.encode_state_table(STATES), exec_device_type=1)


# The fixture IO's dim 0 of 'x' and of 'ids' are one symbol; the int64 'ids' look up a table of 100 rows.
GUARDS = IG.InputGuards((IG.DimGuard(0, 0, 0), IG.DimGuard(1, 0, 0, 2, 1)), (IG.IndexGuard(1, 100),))


def valid_guarded_blob() -> bytes:
    return B.write_blob(IO, engine=ENGINE, metadata=METADATA, guards=GUARDS, exec_device_type=1)


def with_guards(dims=(), indices=(), counts=None, tail: bytes = b"") -> bytes:
    """An engine blob (the fixture IO) whose INPUT_GUARDS holds the raw ``dims`` (argument, dim, symbol, reserved,
    scale, offset) and ``indices`` (argument, reserved, bound)."""
    head = struct.pack("<II", *(counts or (len(dims), len(indices))))
    payload = head + b"".join(struct.pack("<IiIIqq", *d) for d in dims)
    payload += b"".join(struct.pack("<IIq", *i) for i in indices) + tail
    sections = [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_ENGINE, ENGINE)]
    return B.write_sections(sections + [(B.SECTION_INPUT_GUARDS, payload)], 1, 0)


def state_entry_raw(
    name=b"k",
    dtype=6,
    sizes=(1, 2, 16, 4),
    update=0,
    init=0,
    position_input=1,
    position_kind=0,
    length_input=-1,
    length_dim=0,
    length_value=0,
    initial=b"",
    input_name=b"i",
    output_name=b"o",
    reserved=0,
) -> bytes:
    raw = struct.pack(
        "<HHHBBBBhBBhhq",
        len(name),
        len(input_name),
        len(output_name),
        dtype,
        len(sizes),
        update,
        init,
        position_input,
        position_kind,
        reserved,
        length_input,
        length_dim,
        length_value,
    )
    raw += name + input_name + output_name + struct.pack(f"<{len(sizes)}q", *sizes)
    return raw + (struct.pack("<Q", len(initial)) + initial if init == 1 else b"")


def with_state(*entries: bytes, count: int | None = None, reserved: int = 0, tail: bytes = b"") -> bytes:
    """A v2 engine blob (the fixture IO: input 1 is the int64 'ids') whose STATE table holds ``entries``."""
    table = struct.pack("<II", len(entries) if count is None else count, reserved) + b"".join(entries) + tail
    return B.write_sections(
        [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_ENGINE, ENGINE), (B.SECTION_STATE, table)],
        1,
        0,
        flags=B.FLAG_STATE,
    )


# The engine and the first two weights are ExecuTorch named data (keys: content digests, see builder/named_data.py).
NAMED = [
    B.NamedRef(B.NAMED_ENGINE, 0, "et_tensorrt:" + "e" * 64, len(ENGINE)),
    B.NamedRef(B.NAMED_WEIGHT, 0, "et_tensorrt:" + "0" * 64, 48),
    B.NamedRef(B.NAMED_WEIGHT, 1, "et_tensorrt:" + "1" * 64, 6),
]


def valid_named_blob() -> bytes:
    return B.write_blob(IO, graph=GRAPH, weights=WEIGHTS, named=NAMED, metadata=METADATA, exec_device_type=1)


# The same with the CRC-32 of each one's bytes recorded (NAMED_DATA layout 1, what the embed stage writes).
NAMED_CHECKED = [dataclasses.replace(ref, crc32=0x1000 + i) for i, ref in enumerate(NAMED)]


def valid_checked_named_blob() -> bytes:
    """valid_named_blob with each key's CRC-32 recorded (NAMED_DATA layout 1)."""
    return B.write_blob(IO, graph=GRAPH, weights=WEIGHTS, named=NAMED_CHECKED, metadata=METADATA, exec_device_type=1)


def named_entry_raw(target=1, index=0, nbytes=48, key=b"k", reserved=0, crc32=None, crc_reserved=0) -> bytes:
    """One NAMED_DATA entry; with ``crc32`` in layout 1 (the CRC-32 and a reserved u32 before the key)."""
    fixed = struct.pack("<BBHIQ", target, reserved, len(key), index, nbytes)
    return fixed + (b"" if crc32 is None else struct.pack("<II", crc32, crc_reserved)) + key


def with_named(*entries: bytes, count: int | None = None, layout: int = 0, tail: bytes = b"", engine=True) -> bytes:
    """A v3 blob with the fixture program (WEIGHTS entry 0 named when an entry says so: its offset is 0) and a
    NAMED_DATA table of ``entries`` in ``layout`` (1: entries made with ``crc32``); ``engine``: also an ENGINE
    section."""
    table = struct.pack("<II", len(entries) if count is None else count, layout) + b"".join(entries) + tail
    named0 = B.weights_pieces(WEIGHTS, frozenset({0}))
    sections = [(B.SECTION_IO_TABLE, B.encode_io_table(IO))]
    sections += [(B.SECTION_ENGINE, ENGINE)] if engine else []
    sections += [(B.SECTION_GRAPH, GRAPH), (B.SECTION_WEIGHTS, named0), (B.SECTION_NAMED_DATA, table)]
    return B.write_sections(sections, 1, 0, flags=B.FLAG_NAMED_DATA)


RECIPE_GRAPH = b"\x08\x0a placeholder ONNX ModelProto: the blob reader does not interpret the recipe's graph"
RECIPE_HEADER = {
    "inputs": [{"name": "x", "dtype": 6, "size": False, "dims": [[1, 4, 64], [8, 8, 8]], "profiles": []}],
    "outputs": [{"name": "out", "dtype": 6}],
    "aliased": {},
    "onnx_opset": 20,
    "precision": "fp32",
    "workspace_bytes": None,
    "engine": {"flavour": "tensorrt_rtx", "version": "1.7.1.116", "targets": ["sm86"], "gpu": None},
}
# fc.weight transposed (WEIGHTS entry 0), and a constant the exporter made (RAW)
RECIPE_ENTRIES = [
    RM.Entry("fc_t", 6, (4, 3), (RM.Step(RM.SOURCE, weight=0), RM.Step(RM.PERMUTE, dims=(1, 0)))),
    RM.Entry("half", 6, (2,), (RM.Step(RM.RAW, nbytes=8),)),
]


def recipe_map() -> bytes:
    return RM.encode(RECIPE_ENTRIES, [struct.pack("<2f", 0.5, 0.5)])[0]


def recipe_payload(
    version=R.VERSION, reserved=0, header=None, graph=RECIPE_GRAPH, map_payload=None, header_len=None, tail=b""
) -> bytes:
    """A RECIPE payload laid out as et_tensorrt.format.recipe.encode does, with any field overridden (damaged cases)."""
    import json

    text = json.dumps(RECIPE_HEADER).encode() if header is None else header
    mapped = recipe_map() if map_payload is None else map_payload
    head = struct.pack(
        "<IIIIQQ", version, reserved, len(text) if header_len is None else header_len, 0, len(graph), len(mapped)
    )
    out = head + text
    out += bytes((-len(out)) % 64) + graph
    out += bytes((-len(out)) % 64) + mapped
    return out + tail


def valid_recipe_blob(payload: bytes | None = None, engine: bytes | None = ENGINE) -> bytes:
    """The fixture program (GRAPH + WEIGHTS), an ENGINE unless None, and a RECIPE (``payload`` as given)."""
    return B.write_blob(
        IO,
        engine=engine,
        graph=GRAPH,
        weights=WEIGHTS,
        recipe=recipe_payload() if payload is None else payload,
        metadata=METADATA,
        exec_device_type=1,
    )


def valid_named_recipe_blob() -> bytes:
    """The engine and every weight named data, and a RECIPE over those WEIGHTS entries (what a lowering with
    named_data and device_build writes: the recipe rebuilds its initializers from the named bytes)."""
    named = [
        *NAMED,
        *(
            B.NamedRef(B.NAMED_WEIGHT, i, f"et_tensorrt:{i}" * 8, B.tensor_span(WEIGHTS[i].tensor).nbytes)
            for i in (2, 3)
        ),
    ]
    return B.write_blob(
        IO, graph=GRAPH, weights=WEIGHTS, named=named, recipe=recipe_payload(), metadata=METADATA, exec_device_type=1
    )


def valid_v2_blob() -> bytes:
    """Version 2 (still read): version 3 without DIGESTS, so nothing is checked against a digest."""
    return B.write_sections([(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_ENGINE, ENGINE)], 1, 0, version=2)


def with_digests(payload: bytes) -> bytes:
    """A v3 engine blob whose DIGESTS payload is ``payload`` (IO_TABLE and ENGINE are its other sections)."""
    sections = [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_ENGINE, ENGINE)]
    return B.write_sections([*sections, (B.SECTION_DIGESTS, payload)], 1, 0, digests=False)


def flip_byte(blob: bytes, kind: int) -> bytes:
    """``blob`` with one byte in the middle of section ``kind``'s payload inverted."""
    _, _, offset, size = next(entry for entry in _section_table(blob) if entry[0] == kind)
    data = bytearray(blob)
    data[offset + size // 2] ^= 0xFF
    return bytes(data)


def valid_v1_blob() -> bytes:
    """Version 1 (still read): IO_TABLE + ENGINE + PROGRAM (a torch.export.save archive) + METADATA."""
    import json

    return B.write_sections(
        [
            (B.SECTION_IO_TABLE, B.encode_io_table(IO)),
            (B.SECTION_ENGINE, ENGINE),
            (B.SECTION_PROGRAM, PROGRAM),
            (B.SECTION_METADATA, json.dumps(METADATA).encode()),
        ],
        1,
        0,
        version=1,
        alignment=1,
    )


def _patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _io_entry_raw(role=0, dtype=6, dev_type=0, dev_index=0, name=b"x", dims=((1, 1, 1),)) -> bytes:
    raw = struct.pack("<BBbbHH", role, dtype, dev_type, dev_index, len(name), len(dims)) + name
    for d in dims:
        raw += struct.pack("<qqq", *d)
    return raw


def _with_io(io_payload: bytes) -> bytes:
    return B.write_sections([(B.SECTION_IO_TABLE, io_payload), (B.SECTION_ENGINE, ENGINE)], 1, 0)


def weight_entry_raw(
    kind=0, dtype=6, sizes=(4,), strides=(1,), flags=0, name=b"w", offset=64, nbytes=16, reserved=0
) -> bytes:
    raw = struct.pack("<BBBBHHQQ", kind, dtype, len(sizes), flags, len(name), reserved, offset, nbytes) + name
    return raw + struct.pack(f"<{len(sizes)}q", *sizes) + struct.pack(f"<{len(strides)}q", *strides)


def with_weights(payload: bytes, *, weights_alignment: int = B.ALIGNMENT) -> bytes:
    """A blob whose WEIGHTS payload is ``payload`` (as given: tables for the damaged-blob cases). With a
    ``weights_alignment`` below 64 the WEIGHTS payload is placed off the 64-byte grid (an unknown section
    before it shifts it when the table happens to land it on the grid)."""
    for shift in (b"", b"\0" * 8):
        sections = [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_GRAPH, GRAPH)]
        sections += [(99, shift)] if shift else []
        data = B.write_sections([*sections, (B.SECTION_WEIGHTS, payload)], 1, 0, alignment=weights_alignment)
        offset = next(o for k, _, o, _ in _section_table(data) if k == B.SECTION_WEIGHTS)
        if weights_alignment >= B.ALIGNMENT or offset % B.ALIGNMENT:
            return data
    raise AssertionError("could not place WEIGHTS off the 64-byte grid")


def _section_table(data: bytes) -> list[tuple[int, int, int, int]]:
    count = struct.unpack_from("<I", data, 12)[0]
    return [struct.unpack_from("<IIQQ", data, B.HEADER_SIZE + 24 * i) for i in range(count)]


def weights_payload(*entries: bytes, count: int | None = None, data_size: int = 128) -> bytes:
    table = struct.pack("<II", len(entries) if count is None else count, 0) + b"".join(entries)
    table += b"\0" * ((-len(table)) % 64)
    return table + b"\0" * data_size


def damaged_blobs() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, fragment of the reader's error message)."""
    good = valid_blob()
    sec0 = B.HEADER_SIZE  # first section table entry
    one_entry = struct.pack("<I", 1) + _io_entry_raw()
    io_table = B.encode_io_table(IO)
    w = weight_entry_raw
    st = state_entry_raw
    nd = named_entry_raw
    # the DIGESTS payload of with_digests' sections: count, reserved, (IO_TABLE, crc), (ENGINE, crc)
    digest_entries = B.encode_digests([(B.SECTION_IO_TABLE, io_table), (B.SECTION_ENGINE, ENGINE)])
    return {
        "empty": (b"", "truncated"),
        "short_header": (good[:20], "truncated"),
        "truncated": (good[:-1], "truncated"),
        "truncated_in_table": (_patch(good[:40], 16, "<Q", 40), "section table"),
        "padded": (good + b"\0", "truncated or padded"),
        "wrong_magic": (b"XTRT" + good[4:], "magic"),
        "unknown_version": (_patch(good, 4, "<H", 4), "version"),
        "version_zero": (_patch(good, 4, "<H", 0), "version"),
        "unknown_flags": (_patch(good, 6, "<H", 4), "unknown flags"),
        "named_flag_without_section": (_patch(good, 6, "<H", B.FLAG_NAMED_DATA), "named-data flag without"),
        "named_section_without_flag": (_patch(valid_named_blob(), 6, "<H", 0), "without the header's named-data"),
        "state_flag_without_state": (_patch(good, 6, "<H", B.FLAG_STATE), "state flag without a STATE section"),
        "state_without_state_flag": (_patch(valid_stateful_blob(), 6, "<H", 0), "without the header's state flag"),
        "v1_state_flag": (_patch(valid_v1_blob(), 6, "<H", B.FLAG_STATE), "unknown flags"),
        "bad_header_size": (_patch(good, 8, "<I", 64), "header size"),
        "too_many_sections": (_patch(good, 12, "<I", 17), "too many sections"),
        "bad_exec_device": (_patch(good, 24, "<b", 5), "device type"),
        "section_past_end": (_patch(good, sec0 + 16, "<Q", len(good)), "outside"),
        "section_overlaps_table": (_patch(good, sec0 + 8, "<Q", 0), "outside"),
        "duplicate_section": (B.write_sections([(1, io_table), (1, io_table), (2, ENGINE)], 1, 0), "twice"),
        "missing_io_table": (B.write_sections([(B.SECTION_ENGINE, ENGINE)], 1, 0), "missing the IO_TABLE"),
        "v1_missing_program": (B.write_sections([(1, io_table)], 1, 0, version=1), "missing the PROGRAM"),
        "v2_program_section": (B.write_sections([(1, io_table), (B.SECTION_PROGRAM, PROGRAM)], 1, 0), "only version 1"),
        "v2_no_engine_no_graph": (B.write_sections([(1, io_table)], 1, 0), "neither an ENGINE nor a GRAPH"),
        "v2_graph_without_weights": (B.write_sections([(1, io_table), (B.SECTION_GRAPH, GRAPH)], 1, 0), "without"),
        "v2_refit_map_without_engine": (
            B.write_sections(
                [
                    (1, io_table),
                    (B.SECTION_GRAPH, GRAPH),
                    (B.SECTION_WEIGHTS, weights_payload()),
                    (B.SECTION_REFIT_MAP, b""),
                ],
                1,
                0,
            ),
            "REFIT_MAP",
        ),
        "metadata_not_utf8": (B.write_sections([(1, io_table), (2, ENGINE), (4, b"\xff\xfe")], 1, 0), "METADATA"),
        "io_table_short": (_with_io(b"\x01\x00"), "ends early"),
        "io_entry_count_too_big": (_with_io(struct.pack("<I", 2) + _io_entry_raw()), "ends early"),
        "io_entry_cut_in_dims": (_with_io(one_entry[:-5]), "ends early"),
        "io_trailing_bytes": (_with_io(one_entry + b"\0"), "trailing"),
        "io_unknown_role": (_with_io(struct.pack("<I", 1) + _io_entry_raw(role=3)), "role"),
        "io_size_rank_2": (
            _with_io(struct.pack("<I", 1) + _io_entry_raw(role=2, dtype=4, dims=((1, 1, 1),) * 2)),
            "rank 2",
        ),
        "io_size_float": (_with_io(struct.pack("<I", 1) + _io_entry_raw(role=2, dtype=6)), "int64"),
        "io_unknown_device": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dev_type=3)), "device type"),
        "io_unknown_dtype": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dtype=200)), "dtype code"),
        "io_rank_too_big": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dims=((1, 1, 1),) * 17)), "rank"),
        "io_min_gt_max": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dims=((5, 5, 4),))), "invalid range"),
        "io_name_not_utf8": (_with_io(struct.pack("<I", 1) + _io_entry_raw(name=b"x\xa4y")), "not UTF-8"),
        "weights_misaligned_section": (with_weights(weights_payload(w()), weights_alignment=8), "aligned"),
        "weights_count_too_big": (with_weights(weights_payload(w(), count=10**6)), "more than its table"),
        "weights_reserved": (with_weights(struct.pack("<II", 0, 7)), "reserved"),
        "weights_unknown_kind": (with_weights(weights_payload(w(kind=3))), "unknown kind"),
        "weights_quantized_dtype": (with_weights(weights_payload(w(dtype=12))), "dtype code"),
        "weights_unknown_dtype": (with_weights(weights_payload(w(dtype=200))), "dtype code"),
        "weights_rank_too_big": (with_weights(weights_payload(w(sizes=(1,) * 17, strides=(1,) * 17))), "rank"),
        "weights_unknown_flags": (with_weights(weights_payload(w(flags=2))), "flags"),
        "weights_empty_name": (with_weights(weights_payload(w(name=b""))), "name"),
        "weights_name_not_utf8": (with_weights(weights_payload(w(name=b"\xc0\xaf"))), "name"),
        "weights_duplicate_name": (with_weights(weights_payload(w(), w(offset=128))), "repeats"),
        "weights_negative_size": (with_weights(weights_payload(w(sizes=(-4,), nbytes=0))), "negative"),
        "weights_negative_stride": (with_weights(weights_payload(w(sizes=(4,), strides=(-1,)))), "negative"),
        "weights_nbytes_vs_shape": (with_weights(weights_payload(w(nbytes=12))), "address 16"),
        "weights_overflowing_shape": (
            with_weights(weights_payload(w(sizes=(2**40, 2**40), strides=(2**40, 1), nbytes=16))),
            "addresses more than",
        ),
        "weights_misaligned_offset": (with_weights(weights_payload(w(offset=96))), "aligned"),
        "weights_data_past_end": (with_weights(weights_payload(w(offset=192))), "outside"),
        "weights_data_in_table": (with_weights(weights_payload(w(offset=0))), "outside"),
        "weights_entry_truncated": (with_weights(struct.pack("<II", 1, 0) + w()[:20]), "truncated"),
        "weights_huge_offset": (with_weights(weights_payload(w(offset=2**64 - 64))), "outside"),
        "weights_empty_with_offset": (
            with_weights(weights_payload(w(sizes=(0,), nbytes=0, offset=2**40))),
            "empty entry's offset is 0",
        ),
        "digests_missing": (
            B.write_sections([(1, io_table), (2, ENGINE)], 1, 0, digests=False),
            "has no DIGESTS section",
        ),
        "digests_reserved": (with_digests(struct.pack("<II", 2, 1)), "DIGESTS reserved"),
        "digests_count_mismatch": (
            with_digests(struct.pack("<II", 1, 0) + digest_entries[8:16]),
            "lists 1 section\\(s\\), the table has 2",
        ),
        "digests_duplicate": (
            with_digests(struct.pack("<II", 2, 0) + digest_entries[16:24] * 2),
            "DIGESTS lists ENGINE twice",
        ),
        "digests_absent_section": (
            with_digests(struct.pack("<II", 2, 0) + digest_entries[8:16] + struct.pack("<II", 6, 0)),
            "DIGESTS lists WEIGHTS, which the blob does not have",
        ),
        "digests_trailing": (with_digests(digest_entries + b"\0"), "DIGESTS has trailing bytes"),
        "digests_truncated": (with_digests(digest_entries[:-4]), "DIGESTS ends early"),
        "digest_mismatch_engine": (flip_byte(good, B.SECTION_ENGINE), "ENGINE section fails its digest"),
        "digest_mismatch_io_table": (flip_byte(good, B.SECTION_IO_TABLE), "IO_TABLE section fails its digest"),
        "named_count_too_big": (with_named(nd(), count=10**6), "more than it holds"),
        "named_layout_unknown": (with_named(nd(), layout=2), "NAMED_DATA has layout 2, which is not known"),
        "named_crc_count_too_big": (with_named(nd(crc32=0), layout=1, count=2), "more than it holds"),
        "named_crc_reserved": (with_named(nd(crc32=0, crc_reserved=1), layout=1), "entry 0 reserved field"),
        "named_crc_missing": (with_named(nd(key=b"\0" * 16), layout=1), "NAMED_DATA ends early"),
        "named_crc_in_layout_0": (with_named(nd(crc32=0)), "trailing"),
        "named_entry_reserved": (with_named(nd(reserved=1)), "reserved field"),
        "named_trailing_bytes": (with_named(nd(), tail=b"\0"), "trailing"),
        "named_truncated": (with_named(nd(key=b"0123456789abcdef0123")[:-4]), "NAMED_DATA ends early"),
        "named_unknown_target": (with_named(nd(target=2)), "unknown target"),
        "named_engine_with_index": (with_named(nd(), nd(target=0, index=3, nbytes=4), engine=False), "has an index"),
        "named_engine_twice": (with_named(nd(target=0, nbytes=4), nd(target=0, nbytes=4), engine=False), "again"),
        "named_weight_twice": (with_named(nd(), nd()), "names WEIGHTS entry 0 again"),
        "named_empty_key": (with_named(nd(key=b"")), "key"),
        "named_key_not_utf8": (with_named(nd(key=b"\xc0\xaf")), "key"),
        "named_engine_and_section": (with_named(nd(), nd(target=0, nbytes=4)), "both an ENGINE section"),
        "named_weight_out_of_range": (with_named(nd(), nd(index=9, nbytes=0)), "names WEIGHTS entry 9 of 5"),
        "named_weight_size": (with_named(nd(nbytes=47)), "the entry addresses 48"),
        "named_weight_with_offset": (with_named(nd(), nd(index=1, nbytes=6)), "has an offset"),
        "state_count_too_big": (with_state(st(), count=10**6), "more than it holds"),
        "state_reserved": (with_state(reserved=1), "reserved"),
        "state_entry_truncated": (with_state(st()[:30], count=1), "STATE ends early"),
        "state_trailing_bytes": (with_state(st(), tail=b"\0"), "trailing"),
        "state_unknown_dtype": (with_state(st(dtype=200)), "dtype code"),
        "state_rank_too_big": (with_state(st(sizes=(1,) * 17)), "rank"),
        "state_unknown_update": (with_state(st(update=2)), "update kind"),
        "state_unknown_init": (with_state(st(init=2)), "initial contents kind"),
        "state_unknown_position_kind": (with_state(st(position_kind=2)), "position kind"),
        "state_in_place_unguarded": (with_state(st(position_input=-1)), "without a position guard"),
        "state_in_place_rank_1": (with_state(st(sizes=(16,))), "rank < 2"),
        "state_empty_name": (with_state(st(name=b"")), "name"),
        "state_name_not_utf8": (with_state(st(name=b"\xc0\xaf")), "name"),
        "state_duplicate_name": (with_state(st(), st()), "repeats"),
        "state_negative_size": (with_state(st(sizes=(1, -2, 16, 4))), "negative"),
        "state_overflowing_shape": (with_state(st(sizes=(2**40, 2**40, 1, 1))), "more than 2\\^63 elements"),
        "state_initial_bytes_vs_shape": (with_state(st(update=1, init=1, initial=b"\0" * 8)), "initial bytes"),
        "state_initial_past_end": (
            with_state(st(update=1, init=1, initial=b"")[:-8] + struct.pack("<Q", 512)),
            "STATE",
        ),
        "state_guard_out_of_range": (with_state(st(position_input=9)), "guards an input that is not a tensor"),
        "state_guard_negative": (with_state(st(position_input=-5)), "invalid position guard"),
        "state_length_dim_missing": (
            with_state(st(position_kind=1, length_input=1, length_dim=3)),
            "write length from a dim no input has",
        ),
        "recipe_without_weights": (
            B.write_sections([(1, io_table), (2, ENGINE), (B.SECTION_RECIPE, recipe_payload())], 1, 0),
            "RECIPE without the WEIGHTS",
        ),
        "recipe_version_zero": (valid_recipe_blob(recipe_payload(version=0)), "RECIPE has version 0"),
        "recipe_reserved": (valid_recipe_blob(recipe_payload(reserved=1)), "RECIPE reserved field"),
        "recipe_truncated_head": (valid_recipe_blob(recipe_payload()[:20]), "RECIPE ends early"),
        "recipe_empty_header": (valid_recipe_blob(recipe_payload(header=b"")), "empty header or graph"),
        "recipe_header_not_utf8": (valid_recipe_blob(recipe_payload(header=b"{\xff}")), "RECIPE header is not UTF-8"),
        "recipe_header_past_end": (
            valid_recipe_blob(recipe_payload(header_len=2**31)),
            "RECIPE graph lies outside the section",
        ),
        "recipe_trailing_bytes": (valid_recipe_blob(recipe_payload(tail=b"\0")), "RECIPE map does not end the section"),
        "recipe_map_bad_weight": (
            valid_recipe_blob(
                recipe_payload(
                    map_payload=RM.encode([RM.Entry("w", 6, (3, 4), (RM.Step(RM.SOURCE, weight=99),))], [])[0]
                )
            ),
            "RECIPE map entry 0 \\('w'\\) step 0 names WEIGHTS entry 99 of 5",
        ),
        "recipe_map_truncated": (
            valid_recipe_blob(recipe_payload(map_payload=recipe_map()[:30])),
            "RECIPE map ends early",
        ),
        "digest_mismatch_recipe": (flip_byte(valid_recipe_blob(), B.SECTION_RECIPE), "RECIPE section fails its digest"),
        "guard_count_past_end": (with_guards(counts=(3, 0)), "INPUT_GUARDS declares more entries than it holds"),
        "guard_trailing_bytes": (with_guards(tail=b"\0"), "INPUT_GUARDS has trailing bytes"),
        "guard_no_such_argument": (with_guards(dims=[(7, 0, 0, 0, 1, 0)]), "names argument 7, not one"),
        "guard_no_such_dim": (with_guards(dims=[(1, 1, 0, 0, 1, 0)]), "names dim 1, which its argument does not"),
        "guard_reserved": (with_guards(dims=[(0, 0, 0, 5, 1, 0)]), "dim entry 0 has a non-zero reserved field"),
        "guard_scale_zero": (with_guards(dims=[(0, 0, 0, 0, 0, 0)]), "has a scale below 1"),
        "guard_symbol_split": (
            with_guards(dims=[(0, 0, 0, 0, 1, 0), (1, 0, 1, 0, 1, 0), (0, 1, 0, 0, 1, 0)]),
            "the entries of symbol 0 are not adjacent",
        ),
        "guard_index_on_float": (with_guards(indices=[(0, 0, 10)]), "guards an input that is not int32 or int64"),
        "guard_index_bound_zero": (with_guards(indices=[(1, 0, 0)]), "has a bound below 1"),
    }


def write_fixture_files(directory) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in [
        ("valid", valid_blob()),
        ("valid_no_engine", valid_blob_without_engine()),
        ("valid_engine_only", valid_engine_only_blob()),
        ("valid_unknown_section", valid_blob_with_unknown_section()),
        ("valid_v1", valid_v1_blob()),
        ("valid_v2", valid_v2_blob()),
        ("valid_stateful", valid_stateful_blob()),
        ("valid_named", valid_named_blob()),
        ("valid_recipe", valid_recipe_blob()),
        ("valid_recipe_only", valid_recipe_blob(engine=None)),
        ("valid_named_recipe", valid_named_recipe_blob()),
        ("valid_guarded", valid_guarded_blob()),
    ] + [(f"bad_{k}", v[0]) for k, v in damaged_blobs().items()]:
        path = directory / f"{name}.etrt"
        path.write_bytes(data)
        paths.append(path)
    return paths


def corrupt_delegate_magic(pte: bytes, which: int = 0) -> bytes:
    """The same program with the magic of its ``which``-th delegate blob overwritten (``ETRT`` -> ``XTRT``)."""
    from et_tensorrt.inspection import delegate_blobs

    blobs = delegate_blobs(pte)
    assert blobs, "no delegate blob inside this program"
    at = pte.index(blobs[which])
    data = bytearray(pte)
    data[at] = ord("X")
    return bytes(data)
