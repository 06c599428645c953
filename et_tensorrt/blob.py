"""Writer and reader of the delegate blob, format version 1 (docs/blob-format.md is the contract)."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from typing import Optional

from et_tensorrt.errors import BlobFormatError

MAGIC = b"ETRT"
VERSION = 1
HEADER_SIZE = 32
SECTION_ENTRY_SIZE = 24
MAX_SECTIONS = 16
MAX_RANK = 16

SECTION_IO_TABLE = 1
SECTION_ENGINE = 2
SECTION_PROGRAM = 3
SECTION_METADATA = 4
REQUIRED_SECTIONS = (SECTION_IO_TABLE, SECTION_PROGRAM)

ROLE_INPUT = 0
ROLE_OUTPUT = 1
# A size argument: ExecuTorch passes an integer (a SymInt the partition reads), not a tensor. dtype int64,
# device cpu, rank 1: dims[0] is the range of its value. Name: the engine's 0-d int64 input, or "" when the
# engine computes the size from its tensor inputs' shapes (then nothing is bound).
ROLE_SIZE = 2
_ROLES = (ROLE_INPUT, ROLE_OUTPUT, ROLE_SIZE)

DEVICE_CPU = 0
DEVICE_CUDA = 1
_DEVICE_NAMES = {DEVICE_CPU: "cpu", DEVICE_CUDA: "cuda"}

# ExecuTorch ScalarType codes.
SCALAR_TYPES = {
    "uint8": 0,
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "float16": 5,
    "float32": 6,
    "float64": 7,
    "bool": 11,
    "bfloat16": 15,
}

_HEADER = struct.Struct("<4sHHIIQbb6s")
_SECTION = struct.Struct("<IIQQ")
_ENTRY_FIXED = struct.Struct("<BBbbHH")
_DIM = struct.Struct("<qqq")
assert _HEADER.size == HEADER_SIZE and _SECTION.size == SECTION_ENTRY_SIZE and _ENTRY_FIXED.size == 8


def scalar_type_code(dtype) -> int:
    """``torch.float32`` (or ``"float32"``) -> ExecuTorch ScalarType code."""
    name = str(dtype).replace("torch.", "")
    if name not in SCALAR_TYPES:
        raise BlobFormatError(f"dtype {dtype} has no ExecuTorch ScalarType code in the blob format")
    return SCALAR_TYPES[name]


def device_code(device) -> tuple[int, int]:
    """``"cuda:1"`` / ``torch.device`` -> ``(device_type, index)``; index 0 when unspecified."""
    text = str(device)
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda"):
        raise BlobFormatError(f"device {text!r} is neither cpu nor cuda")
    idx = int(index) if index else 0
    if not 0 <= idx <= 127:
        raise BlobFormatError(f"device index {idx} does not fit in an i8")
    return (DEVICE_CPU if kind == "cpu" else DEVICE_CUDA), idx


@dataclass(frozen=True)
class DimRange:
    min: int
    opt: int
    max: int  # -1: unbounded

    @property
    def is_static(self) -> bool:
        return self.min == self.opt == self.max

    @staticmethod
    def static(n: int) -> "DimRange":
        return DimRange(n, n, n)


@dataclass(frozen=True)
class IOEntry:
    role: int  # ROLE_INPUT / ROLE_OUTPUT / ROLE_SIZE
    name: str
    dtype: int  # ExecuTorch ScalarType code
    dims: tuple[DimRange, ...]
    device_type: int = DEVICE_CPU
    device_index: int = 0

    @property
    def is_size(self) -> bool:
        return self.role == ROLE_SIZE

    @property
    def device(self) -> str:
        name = _DEVICE_NAMES[self.device_type]
        return name if self.device_type == DEVICE_CPU else f"{name}:{self.device_index}"


@dataclass
class Blob:
    io: list[IOEntry]
    program: bytes
    engine: Optional[bytes] = None
    metadata: dict = field(default_factory=dict)
    exec_device_type: int = DEVICE_CUDA
    exec_device_index: int = 0
    version: int = VERSION

    @property
    def inputs(self) -> list[IOEntry]:
        """The delegate's arguments in order: tensors and sizes."""
        return [e for e in self.io if e.role in (ROLE_INPUT, ROLE_SIZE)]

    @property
    def outputs(self) -> list[IOEntry]:
        return [e for e in self.io if e.role == ROLE_OUTPUT]


# --------------------------------------------------------------------------------------------- writer


def encode_io_table(entries: list[IOEntry]) -> bytes:
    parts = [struct.pack("<I", len(entries))]
    for e in entries:
        if e.role not in _ROLES:
            raise BlobFormatError(f"I/O entry {e.name!r}: unknown role {e.role}")
        if e.role == ROLE_SIZE and (len(e.dims) != 1 or e.dtype != SCALAR_TYPES["int64"]):
            raise BlobFormatError(f"size entry {e.name!r}: rank {len(e.dims)}, dtype {e.dtype}; a size has rank 1 "
                                  "(its value range) and dtype int64")
        if e.device_type not in _DEVICE_NAMES:
            raise BlobFormatError(f"I/O entry {e.name!r}: unknown device type {e.device_type}")
        if len(e.dims) > MAX_RANK:
            raise BlobFormatError(f"I/O entry {e.name!r}: rank {len(e.dims)} > {MAX_RANK}")
        name = e.name.encode("utf-8")
        if len(name) > 0xFFFF:
            raise BlobFormatError(f"I/O entry name too long ({len(name)} bytes)")
        parts.append(_ENTRY_FIXED.pack(e.role, e.dtype, e.device_type, e.device_index, len(name), len(e.dims)))
        parts.append(name)
        for d in e.dims:
            if d.max != -1 and d.min > d.max:
                raise BlobFormatError(f"I/O entry {e.name!r}: dim min {d.min} > max {d.max}")
            parts.append(_DIM.pack(d.min, d.opt, d.max))
    return b"".join(parts)


def write_sections(
    sections: list[tuple[int, bytes]],
    exec_device_type: int,
    exec_device_index: int,
    *,
    version: int = VERSION,
    flags: int = 0,
    magic: bytes = MAGIC,
) -> bytes:
    """Low-level writer (also used by the fixtures to make deliberately odd blobs)."""
    if len(sections) > MAX_SECTIONS:
        raise BlobFormatError(f"{len(sections)} sections > {MAX_SECTIONS}")
    table_end = HEADER_SIZE + SECTION_ENTRY_SIZE * len(sections)
    offset = table_end
    table = []
    for kind, payload in sections:
        table.append(_SECTION.pack(kind, 0, offset, len(payload)))
        offset += len(payload)
    total = offset
    header = _HEADER.pack(
        magic, version, flags, HEADER_SIZE, len(sections), total, exec_device_type, exec_device_index, b"\0" * 6
    )
    return header + b"".join(table) + b"".join(p for _, p in sections)


def write_blob(blob: Blob) -> bytes:
    sections = [(SECTION_IO_TABLE, encode_io_table(blob.io))]
    if blob.engine is not None:
        sections.append((SECTION_ENGINE, bytes(blob.engine)))
    sections.append((SECTION_PROGRAM, bytes(blob.program)))
    if blob.metadata:
        sections.append((SECTION_METADATA, json.dumps(blob.metadata, sort_keys=True).encode("utf-8")))
    return write_sections(sections, blob.exec_device_type, blob.exec_device_index, version=blob.version)


# --------------------------------------------------------------------------------------------- reader


def _decode_io_table(payload: bytes) -> list[IOEntry]:
    if len(payload) < 4:
        raise BlobFormatError("IO_TABLE ends before its entry count")
    (count,) = struct.unpack_from("<I", payload, 0)
    pos = 4
    entries = []
    for i in range(count):
        if pos + _ENTRY_FIXED.size > len(payload):
            raise BlobFormatError(f"IO_TABLE ends early in entry {i} of {count}")
        role, dtype, dev_type, dev_index, name_len, rank = _ENTRY_FIXED.unpack_from(payload, pos)
        pos += _ENTRY_FIXED.size
        if role not in _ROLES:
            raise BlobFormatError(f"IO_TABLE entry {i}: unknown role {role}")
        if role == ROLE_SIZE and (rank != 1 or dtype != SCALAR_TYPES["int64"]):
            raise BlobFormatError(f"IO_TABLE entry {i}: a size entry has rank {rank}, dtype {dtype}; it needs rank 1 "
                                  "(its value range) and dtype int64")
        if dev_type not in _DEVICE_NAMES:
            raise BlobFormatError(f"IO_TABLE entry {i}: unknown device type {dev_type}")
        if rank > MAX_RANK:
            raise BlobFormatError(f"IO_TABLE entry {i}: rank {rank} > {MAX_RANK}")
        end = pos + name_len + rank * _DIM.size
        if end > len(payload):
            raise BlobFormatError(f"IO_TABLE ends early in entry {i} of {count}")
        try:
            name = payload[pos : pos + name_len].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BlobFormatError(f"IO_TABLE entry {i}: name is not UTF-8") from exc
        pos += name_len
        dims = []
        for _ in range(rank):
            lo, opt, hi = _DIM.unpack_from(payload, pos)
            pos += _DIM.size
            if hi != -1 and lo > hi:
                raise BlobFormatError(f"IO_TABLE entry {i} ({name!r}): dim min {lo} > max {hi}")
            dims.append(DimRange(lo, opt, hi))
        entries.append(IOEntry(role, name, dtype, tuple(dims), dev_type, dev_index))
    if pos != len(payload):
        raise BlobFormatError(f"IO_TABLE has {len(payload) - pos} trailing bytes")
    return entries


def read_blob(data) -> Blob:
    """Parse a blob; every structural problem raises BlobFormatError."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise BlobFormatError(f"blob truncated: {len(data)} bytes, the header alone is {HEADER_SIZE}")
    magic, version, flags, header_size, count, total, dev_type, dev_index, _ = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise BlobFormatError(f"not an et_tensorrt blob: magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise BlobFormatError(f"unknown blob format version {version}; this build reads version {VERSION}")
    if flags != 0:
        raise BlobFormatError(f"unknown blob flags 0x{flags:04x}")
    if header_size != HEADER_SIZE:
        raise BlobFormatError(f"header_size {header_size}, expected {HEADER_SIZE}")
    if total != len(data):
        raise BlobFormatError(f"blob truncated or padded: header says {total} bytes, buffer has {len(data)}")
    if dev_type not in _DEVICE_NAMES:
        raise BlobFormatError(f"unknown execution device type {dev_type}")
    if count > MAX_SECTIONS:
        raise BlobFormatError(f"section_count {count} > {MAX_SECTIONS}")
    table_end = HEADER_SIZE + SECTION_ENTRY_SIZE * count
    if table_end > total:
        raise BlobFormatError("blob truncated inside the section table")
    sections: dict[int, bytes] = {}
    for i in range(count):
        kind, _reserved, offset, size = _SECTION.unpack_from(data, HEADER_SIZE + SECTION_ENTRY_SIZE * i)
        if offset < table_end or offset > total or size > total - offset:
            raise BlobFormatError(f"section {i} (kind {kind}) lies outside the blob: offset {offset}, size {size}")
        if kind in sections:
            raise BlobFormatError(f"duplicate section kind {kind}")
        sections[kind] = data[offset : offset + size]
    for kind in REQUIRED_SECTIONS:
        if kind not in sections:
            raise BlobFormatError(f"required section kind {kind} is missing")
    metadata = {}
    if SECTION_METADATA in sections:
        try:
            metadata = json.loads(sections[SECTION_METADATA].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BlobFormatError(f"METADATA is not UTF-8 JSON: {exc}") from exc
    return Blob(
        io=_decode_io_table(sections[SECTION_IO_TABLE]),
        program=sections[SECTION_PROGRAM],
        engine=sections.get(SECTION_ENGINE),
        metadata=metadata,
        exec_device_type=dev_type,
        exec_device_index=dev_index,
        version=version,
    )


def program_digest(program: bytes) -> str:
    """A partition's identity on both sides: the digest of the aten program its blob embeds (``preprocess``
    records its ONNX export under it; the runtime's call records carry it)."""
    return hashlib.sha256(bytes(program)).hexdigest()
