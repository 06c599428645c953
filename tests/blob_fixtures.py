"""Delegate blob fixtures (format v1), generated in code.

Shared by the Python reader's tests and, later, the C++ reader's tests: ``valid_blob()`` must parse;
every entry of ``damaged_blobs()`` must be rejected (BlobFormatError in Python, an Error in C++). The
``expect`` string is a fragment of the Python reader's message. ``write_fixture_files(dir)`` dumps them
all as ``<name>.etrt`` files for a reader in another language.
"""

from __future__ import annotations

import struct
from pathlib import Path

from et_tensorrt import blob as B

ENGINE = b"vtrt" + bytes(range(60))  # placeholder engine payload: readers never interpret ENGINE bytes
PROGRAM = b"PK\x03\x04" + b"fake torch.export.save archive" * 3
METADATA = {"trt_flavour": "tensorrt_rtx", "trt_version": "1.7.1.116", "precision": "fp32"}

IO = [
    B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange(1, 4, 64), B.DimRange.static(8)), B.DEVICE_CUDA, 0),
    B.IOEntry(B.ROLE_INPUT, "ids", 4, (B.DimRange(1, 4, 64),), B.DEVICE_CPU, 0),
    B.IOEntry(B.ROLE_OUTPUT, "out", 6, (B.DimRange(1, 4, 64), B.DimRange.static(4)), B.DEVICE_CUDA, 1),
    B.IOEntry(B.ROLE_OUTPUT, "scalar", 5, (), B.DEVICE_CUDA, 0),
]


def valid_blob() -> bytes:
    return B.write_blob(B.Blob(io=IO, program=PROGRAM, engine=ENGINE, metadata=METADATA, exec_device_type=1, exec_device_index=0))


def valid_blob_without_engine() -> bytes:
    return B.write_blob(B.Blob(io=IO, program=PROGRAM, engine=None, metadata={}, exec_device_type=1))


def valid_blob_with_unknown_section() -> bytes:
    """Unknown section kinds are skipped by readers (forward compatibility)."""
    return B.write_sections(
        [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (99, b"future"), (B.SECTION_PROGRAM, PROGRAM)], 1, 0
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
    return B.write_sections([(B.SECTION_IO_TABLE, io_payload), (B.SECTION_PROGRAM, PROGRAM)], 1, 0)


def damaged_blobs() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, fragment of the Python reader's error message)."""
    good = valid_blob()
    sec0 = B.HEADER_SIZE  # first section table entry
    one_entry = struct.pack("<I", 1) + _io_entry_raw()
    return {
        "empty": (b"", "truncated"),
        "short_header": (good[:20], "truncated"),
        "truncated": (good[:-1], "truncated"),
        "truncated_in_table": (_patch(good[:40], 16, "<Q", 40), "section table"),
        "padded": (good + b"\0", "truncated or padded"),
        "wrong_magic": (b"XTRT" + good[4:], "magic"),
        "unknown_version": (_patch(good, 4, "<H", 2), "version"),
        "version_zero": (_patch(good, 4, "<H", 0), "version"),
        "unknown_flags": (_patch(good, 6, "<H", 1), "flags"),
        "bad_header_size": (_patch(good, 8, "<I", 64), "header_size"),
        "too_many_sections": (_patch(good, 12, "<I", 17), "section_count"),
        "bad_exec_device": (_patch(good, 24, "<b", 5), "device type"),
        "section_past_end": (_patch(good, sec0 + 16, "<Q", len(good)), "outside"),
        "section_overlaps_table": (_patch(good, sec0 + 8, "<Q", 0), "outside"),
        "duplicate_section": (
            B.write_sections([(1, B.encode_io_table(IO)), (1, B.encode_io_table(IO)), (3, PROGRAM)], 1, 0),
            "duplicate",
        ),
        "missing_io_table": (B.write_sections([(B.SECTION_PROGRAM, PROGRAM)], 1, 0), "missing"),
        "missing_program": (B.write_sections([(B.SECTION_IO_TABLE, B.encode_io_table(IO))], 1, 0), "missing"),
        "io_table_short": (_with_io(b"\x01\x00"), "ends"),
        "io_entry_count_too_big": (_with_io(struct.pack("<I", 2) + _io_entry_raw()), "ends early"),
        "io_entry_cut_in_dims": (_with_io(one_entry[:-5]), "ends early"),
        "io_trailing_bytes": (_with_io(one_entry + b"\0"), "trailing"),
        "io_unknown_role": (_with_io(struct.pack("<I", 1) + _io_entry_raw(role=3)), "role"),
        "io_size_rank_2": (_with_io(struct.pack("<I", 1) + _io_entry_raw(role=2, dtype=4, dims=((1, 1, 1),) * 2)), "rank 2"),
        "io_size_float": (_with_io(struct.pack("<I", 1) + _io_entry_raw(role=2, dtype=6)), "int64"),
        "io_unknown_device": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dev_type=3)), "device type"),
        "io_rank_too_big": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dims=((1, 1, 1),) * 17)), "rank"),
        "io_min_gt_max": (_with_io(struct.pack("<I", 1) + _io_entry_raw(dims=((5, 5, 4),))), "min 5 > max 4"),
    }


def write_fixture_files(directory) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in [
        ("valid", valid_blob()),
        ("valid_no_engine", valid_blob_without_engine()),
        ("valid_unknown_section", valid_blob_with_unknown_section()),
    ] + [(f"bad_{k}", v[0]) for k, v in damaged_blobs().items()]:
        path = directory / f"{name}.etrt"
        path.write_bytes(data)
        paths.append(path)
    return paths
