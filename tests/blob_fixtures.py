"""Delegate blob fixtures (format v2, and v1 for the read-only path), generated in code.

``valid_blob()`` must parse; every entry of ``damaged_blobs()`` must be rejected by the one reader (the
C++ reader, through ``_C.parse_blob`` and ``blob.read_blob``) with a BlobFormatError whose message holds
the ``expect`` fragment. ``write_fixture_files(dir)`` dumps them all as ``<name>.etrt`` files.
"""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from et_tensorrt import blob as B

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
    """A v2 blob whose WEIGHTS payload is ``payload`` (as given: tables for the damaged-blob cases)."""
    return B.write_sections(
        [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_GRAPH, GRAPH), (B.SECTION_WEIGHTS, payload)],
        1,
        0,
        alignment=weights_alignment,
    )


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
    return {
        "empty": (b"", "truncated"),
        "short_header": (good[:20], "truncated"),
        "truncated": (good[:-1], "truncated"),
        "truncated_in_table": (_patch(good[:40], 16, "<Q", 40), "section table"),
        "padded": (good + b"\0", "truncated or padded"),
        "wrong_magic": (b"XTRT" + good[4:], "magic"),
        "unknown_version": (_patch(good, 4, "<H", 3), "version"),
        "version_zero": (_patch(good, 4, "<H", 0), "version"),
        "unknown_flags": (_patch(good, 6, "<H", 1), "flags"),
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
