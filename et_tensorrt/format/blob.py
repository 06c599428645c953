"""The delegate blob (docs/blob-format.md is the contract): the writer, and Python's view of the one reader.

Parsing is done by the C++ reader the runtime uses (extension/format/blob_reader.cpp, bound without torch as
``et_tensorrt.format._reader.parse_blob``); :func:`read_blob` only fills the dataclasses below from its result, so
reading a blob loads no torch (``et-tensorrt inspect``). Dtypes are ExecuTorch ScalarType codes here, as the bytes
store them (``format/dtypes.py`` names them and translates them to torch's); only the writer needs torch.
The writer is Python because preprocess is: :func:`write_blob` writes format version 3 (version 2 with a
DIGESTS section: a CRC-32 of every other section, which the reader checks before it parses any of them).
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format import _reader, state_table
from et_tensorrt.format import input_guards as guards_mod
from et_tensorrt.format import recipe as recipe_mod
from et_tensorrt.format import refit_map as refit_map_mod
from et_tensorrt.format.dtypes import scalar_type_code

if TYPE_CHECKING:  # the writer takes tensors; reading a blob imports no torch
    import torch

MAGIC = b"ETRT"
VERSION = 3  # written; versions 1 (PROGRAM = a torch.export.save archive) and 2 (no DIGESTS) are still read
OLDEST_VERSION = 1
HEADER_SIZE = 32
SECTION_ENTRY_SIZE = 24
MAX_SECTIONS = 16
MAX_RANK = 16
ALIGNMENT = 64  # section payloads and every WEIGHTS datum start at multiples of this (in the blob)

SECTION_IO_TABLE = 1
SECTION_ENGINE = 2
SECTION_PROGRAM = 3  # version 1 only
SECTION_METADATA = 4
SECTION_GRAPH = 5
SECTION_WEIGHTS = 6
SECTION_REFIT_MAP = 7  # weight-stripped engines: how to rebuild each engine weight (format/refit_map.py)
SECTION_STATE = 8  # the state tensors the delegate owns across calls (format/state_table.py)
SECTION_DIGESTS = 9  # version 3 on: (kind, CRC-32) of every other section
SECTION_RECIPE = 10  # how to build the engine on the device: weightless ONNX + initializer recipes (format/recipe.py)
SECTION_NAMED_DATA = 11  # the ENGINE and WEIGHTS data that live in ExecuTorch's named data, by key
SECTION_INPUT_GUARDS = 12  # what the program requires of its arguments beyond their ranges (format/input_guards.py)
# Header flag bit 0: the blob has a STATE section. Readers refuse unknown flags, so one that predates STATE
# refuses a stateful blob instead of running its engine without the state.
FLAG_STATE = 1
# Header flag bit 1: the blob has a NAMED_DATA section (its engine or weights are not in the blob): a reader that
# predates it refuses the blob instead of running without them.
FLAG_NAMED_DATA = 2
NAMED_ENGINE = 0  # NAMED_DATA targets: the engine, a WEIGHTS entry
NAMED_WEIGHT = 1
# NAMED_DATA layouts (the u32 after its entry count): 0, entries without a digest (written before digests were
# recorded; still read, the named bytes unchecked); 1, each entry records the CRC-32 of its named bytes.
NAMED_LAYOUT_UNCHECKED = 0
NAMED_LAYOUT_CRC32 = 1

ROLE_INPUT = 0
ROLE_OUTPUT = 1
# A size argument: ExecuTorch passes an integer (a SymInt the partition reads), not a tensor. dtype int64,
# device cpu, rank 1: dims[0] is the range of its value. Name: the engine's 0-d int64 input, or "" when the
# engine computes the size from its tensor inputs' shapes (then nothing is bound).
ROLE_SIZE = 2
_LONG = 4  # ExecuTorch ScalarType Long: a size entry's dtype
_ROLES = (ROLE_INPUT, ROLE_OUTPUT, ROLE_SIZE)

DEVICE_CPU = 0
DEVICE_CUDA = 1
_DEVICE_NAMES = {DEVICE_CPU: "cpu", DEVICE_CUDA: "cuda"}

WEIGHT_KINDS = ("parameter", "buffer", "constant")  # WEIGHTS kind codes 0, 1, 2

_HEADER = struct.Struct("<4sHHIIQbb6s")
_SECTION = struct.Struct("<IIQQ")
_ENTRY_FIXED = struct.Struct("<BBbbHH")
_DIM = struct.Struct("<qqq")
_WEIGHTS_HEAD = struct.Struct("<II")
_WEIGHT_FIXED = struct.Struct("<BBBBHHQQ")
assert _HEADER.size == HEADER_SIZE and _SECTION.size == SECTION_ENTRY_SIZE and _WEIGHT_FIXED.size == 24


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


def device_name(device_type: int, index: int) -> str:
    """``(DEVICE_CUDA, 1)`` -> ``"cuda:1"``; ``"cpu"`` for the host (the inverse of :func:`device_code`)."""
    return "cpu" if device_type == DEVICE_CPU else f"{_DEVICE_NAMES[device_type]}:{index}"


@dataclass(frozen=True)
class DimRange:
    min: int
    opt: int
    max: int  # -1: unbounded

    @property
    def is_static(self) -> bool:
        return self.min == self.opt == self.max

    @staticmethod
    def static(n: int) -> DimRange:
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
        return device_name(self.device_type, self.device_index)


@dataclass(frozen=True)
class Weight:
    """A tensor to write into WEIGHTS: its graph-signature name and kind ("parameter", "buffer", "constant")."""

    name: str
    kind: str
    tensor: torch.Tensor
    persistent: bool = True


@dataclass(frozen=True)
class NamedRef:
    """A NAMED_DATA entry: the data of ``target`` (NAMED_ENGINE, or NAMED_WEIGHT entry ``index``) is ExecuTorch
    named data ``key`` of ``nbytes`` bytes (the program's NamedDataMap, inside the .pte or in a .ptd) whose CRC-32
    is ``crc32`` (None: not recorded, a blob written before digests were)."""

    target: int
    index: int
    key: str
    nbytes: int
    crc32: int | None = None


@dataclass(frozen=True)
class WeightEntry:
    """A WEIGHTS table entry as the reader validated it; ``offset`` is from the start of the blob."""

    name: str
    kind: str
    dtype: int  # ExecuTorch ScalarType code (format/dtypes.py: scalar_type_dtype for torch's)
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    nbytes: int
    persistent: bool = True
    named: bool = False  # its bytes are ExecuTorch named data (a NAMED_DATA entry), not in the blob


@dataclass
class Blob:
    """A parsed blob. Payloads are ``bytes`` from :func:`read_blob`, views of the runtime's copy in the delegate."""

    io: list[IOEntry]
    engine: bytes | memoryview | None = None
    graph: bytes | memoryview | None = None  # version 2: torch.export JSON of the partition
    weights: list[WeightEntry] = field(default_factory=list)  # version 2: the WEIGHTS table
    data: bytes | memoryview | None = None  # the whole blob (WEIGHTS offsets index into it)
    program: bytes | memoryview | None = None  # version 1: torch.export.save archive
    refit_map: bytes | memoryview | None = None
    refit_entries: list = field(default_factory=list)  # refit_map.Entry, as the reader parsed them
    states: list = field(default_factory=list)  # state_table.StateEntry, as the reader parsed them
    named: list[NamedRef] = field(default_factory=list)  # the data the blob leaves to ExecuTorch's named data
    recipe: object | None = None  # recipe.Recipe: the RECIPE section, None without one
    input_guards: guards_mod.InputGuards = field(default_factory=guards_mod.InputGuards)
    # The delegate's WEIGHTS as tensors viewing its buffer (no copy; the delegate keeps the buffer alive for
    # them); None from read_blob, where the loader copies each weight out of ``data``.
    weight_views: list | None = None
    metadata: dict = field(default_factory=dict)
    exec_device_type: int = DEVICE_CUDA
    exec_device_index: int = 0
    version: int = VERSION
    digests_verified: bool = False  # the reader checked every section against DIGESTS (version 3)

    @property
    def execution_device(self) -> str:
        """Where the partition was lowered to run: "cpu" or "cuda:N" (the header's execution device)."""
        return device_name(self.exec_device_type, self.exec_device_index)

    @property
    def inputs(self) -> list[IOEntry]:
        """The delegate's arguments in order: tensors and sizes."""
        return [e for e in self.io if e.role in (ROLE_INPUT, ROLE_SIZE)]

    @property
    def outputs(self) -> list[IOEntry]:
        return [e for e in self.io if e.role == ROLE_OUTPUT]

    @property
    def has_program(self) -> bool:
        """Whether the blob embeds the partition's program (GRAPH + WEIGHTS, or a version-1 PROGRAM)."""
        return self.graph is not None or self.program is not None

    @property
    def named_engine(self) -> NamedRef | None:
        """Where the engine is when it is named data (no ENGINE section), else None."""
        return next((n for n in self.named if n.target == NAMED_ENGINE), None)

    def named_weight(self, index: int) -> NamedRef | None:
        """Where WEIGHTS entry ``index`` is when it is named data (not in the blob), else None."""
        if not self.weights[index].named:
            return None
        return next(n for n in self.named if n.target == NAMED_WEIGHT and n.index == index)

    @property
    def named_digests(self) -> bool:
        """Whether every NAMED_DATA entry records the CRC-32 its named bytes are checked against at init (layout 1);
        False for a blob without named data or written before digests were recorded."""
        return bool(self.named) and all(n.crc32 is not None for n in self.named)

    @property
    def has_engine(self) -> bool:
        return self.engine is not None or self.named_engine is not None

    def weight_bytes(self, entry: WeightEntry) -> memoryview:
        if entry.named:
            key = self.named_weight(self.weights.index(entry)).key
            raise BlobFormatError(
                f"weight {entry.name!r} is ExecuTorch named data {key!r}, not in the blob: "
                "read it through the program's data (the .pte's named data, or its .ptd)"
            )
        return memoryview(self.data)[entry.offset : entry.offset + entry.nbytes]

    @staticmethod
    def from_parsed(parsed: dict, data, *, copy: bool = True, metadata: bool = True) -> Blob:
        """The dataclass from the reader's dict (``_reader.parse_blob``, or the delegate's). ``copy`` turns payload
        views into ``bytes``; ``metadata`` decodes METADATA's JSON (the runtime never needs it)."""

        def payload(key):
            view = parsed[key]
            return None if view is None else (bytes(view) if copy else view)

        io = []
        roles = {"input": ROLE_INPUT, "output": ROLE_OUTPUT, "size": ROLE_SIZE}
        for key in ("inputs", "outputs"):
            for e in parsed[key]:
                io.append(
                    IOEntry(
                        roles[e["role"]], e["name"], e["dtype"], tuple(DimRange(*d) for d in e["dims"]), *e["device"]
                    )
                )
        weights = [
            WeightEntry(
                w["name"],
                w["kind"],
                w["dtype"],
                tuple(w["sizes"]),
                tuple(w["strides"]),
                w["offset"],
                w["nbytes"],
                w["persistent"],
                w["named"],
            )
            for w in parsed["weights"]
        ]
        meta = {}
        if metadata and parsed["metadata"] is not None:
            try:
                meta = json.loads(bytes(parsed["metadata"]).decode("utf-8"))
            except ValueError as exc:
                raise BlobFormatError(f"delegate blob: METADATA is not JSON: {exc}") from exc
            if not isinstance(meta, dict):
                raise BlobFormatError("delegate blob: METADATA is not a JSON object")
        exec_type, exec_index = parsed["execution_device"]
        return Blob(
            io=io,
            engine=payload("engine"),
            graph=payload("graph"),
            weights=weights,
            data=(bytes(data) if copy else data) if weights else None,
            program=payload("program"),
            refit_map=payload("refit_map"),
            refit_entries=refit_map_mod.from_parsed(parsed.get("refit_entries") or []),
            states=state_table.from_parsed(parsed.get("states") or []),
            named=[
                NamedRef(n["target"], n["index"], n["key"], n["nbytes"], n["crc32"])
                for n in parsed.get("named_data") or []
            ],
            recipe=recipe_mod.Recipe.from_parsed(parsed.get("recipe"), copy=copy),
            input_guards=guards_mod.from_parsed(parsed.get("input_guards")),
            weight_views=parsed.get("weight_views"),
            metadata=meta,
            exec_device_type=exec_type,
            exec_device_index=exec_index,
            version=parsed["version"],
            digests_verified=bool(parsed.get("digests_verified")),
        )


# --------------------------------------------------------------------------------------------- writer


def encode_io_table(entries: Sequence[IOEntry]) -> bytes:
    parts = [struct.pack("<I", len(entries))]
    for e in entries:
        if e.role not in _ROLES:
            raise BlobFormatError(f"I/O entry {e.name!r}: unknown role {e.role}")
        if e.role == ROLE_SIZE and (len(e.dims) != 1 or e.dtype != _LONG):
            raise BlobFormatError(
                f"size entry {e.name!r}: rank {len(e.dims)}, dtype {e.dtype}; a size has rank 1 "
                "(its value range) and dtype int64"
            )
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


def _pad(n: int, alignment: int) -> int:
    return (alignment - n % alignment) % alignment


def _dense(t: torch.Tensor) -> bool:
    """Whether t's strides address every element exactly once, without gaps (any dim order)."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _storage_span(t: torch.Tensor):
    """(uint8 array over the storage span t addresses, strides): a dense tensor keeps its strides (its
    storage span, in memory order); an expanded or overlapping one is made contiguous. No copy when t is a
    dense host tensor."""
    import torch

    t = t.detach().cpu()
    if t.numel() == 0:
        return None, tuple(t.stride())
    if not _dense(t):
        t = t.contiguous()
    span = torch.as_strided(t, (t.numel(),), (1,)).contiguous()  # the span of storage t addresses
    return span.view(torch.uint8).numpy(), tuple(t.stride())


def tensor_storage(t: torch.Tensor) -> tuple[bytes, tuple[int, ...]]:
    """(raw bytes, strides) for WEIGHTS (see :func:`_storage_span`)."""
    span, strides = _storage_span(t)
    return (b"" if span is None else span.tobytes()), strides


def tensor_span(t: torch.Tensor):
    """The uint8 numpy array WEIGHTS (and named data) store for ``t``: its storage span in memory order, a view
    of its memory when it is a dense host tensor; None for an empty tensor."""
    return _storage_span(t)[0]


def weights_pieces(weights: Sequence[Weight], named: frozenset[int] = frozenset()) -> list:
    """The WEIGHTS payload as pieces (the table, padding, each tensor's bytes as a view of its memory): u32 count,
    u32 0, entries, then each datum at a 64-aligned payload offset. The entries in ``named`` (indexes) keep no data
    here: their bytes are named data (offset 0)."""
    if len(weights) > 0xFFFFFFFF:
        raise BlobFormatError(f"{len(weights)} weights do not fit the WEIGHTS table")
    entries = []
    for i, w in enumerate(weights):
        if w.kind not in WEIGHT_KINDS:
            raise BlobFormatError(f"weight {w.name!r}: kind {w.kind!r} is not one of {WEIGHT_KINDS}")
        if w.tensor.dim() > MAX_RANK:
            raise BlobFormatError(f"weight {w.name!r}: rank {w.tensor.dim()} > {MAX_RANK}")
        span, strides = _storage_span(w.tensor)
        entries.append((w, None if i in named else span, 0 if span is None else span.nbytes, strides))
    table_size = _WEIGHTS_HEAD.size + sum(
        _WEIGHT_FIXED.size + len(w.name.encode("utf-8")) + 16 * w.tensor.dim() for w, _, _, _ in entries
    )
    table = [_WEIGHTS_HEAD.pack(len(entries), 0)]
    offset = table_size + _pad(table_size, ALIGNMENT)
    datas = []
    for w, span, nbytes, strides in entries:
        name = w.name.encode("utf-8")
        if len(name) > 0xFFFF:
            raise BlobFormatError(f"weight name too long ({len(name)} bytes)")
        flags = 1 if (w.kind == "buffer" and w.persistent) else 0
        dtype = scalar_type_code(w.tensor.dtype)
        here = span is not None
        table.append(
            _WEIGHT_FIXED.pack(
                WEIGHT_KINDS.index(w.kind), dtype, w.tensor.dim(), flags, len(name), 0, offset if here else 0, nbytes
            )
        )
        table.append(name)
        table.append(struct.pack(f"<{w.tensor.dim()}q", *w.tensor.shape))
        table.append(struct.pack(f"<{len(strides)}q", *strides))
        if here:
            datas.append((offset, span))
            offset += nbytes + _pad(nbytes, ALIGNMENT)
    head = b"".join(table)
    assert len(head) == table_size
    pieces, at = [head], table_size
    for offset, span in datas:
        pieces += [bytes(offset - at), memoryview(span).cast("B")]
        at = offset + span.nbytes
    return pieces


def encode_weights(weights: Sequence[Weight]) -> bytes:
    """The WEIGHTS payload as one ``bytes`` (:func:`weights_pieces` joined)."""
    return b"".join(weights_pieces(weights))


def encode_named_data(refs: Sequence[NamedRef]) -> bytes:
    """The NAMED_DATA payload: u32 count, u32 layout, then per entry u8 target, u8 0, u16 key length, u32 index, u64
    nbytes, (layout 1) u32 CRC-32 of the named bytes and u32 0, the key (UTF-8). Layout 1 when every entry has its
    CRC-32, 0 when none has (a blob read back from before digests were recorded, rewritten by ``prepare``)."""
    recorded = {r.crc32 is not None for r in refs}
    if len(recorded) > 1:
        raise BlobFormatError("NAMED_DATA entries with and without a CRC-32: record one for every entry")
    layout = NAMED_LAYOUT_UNCHECKED if recorded == {False} else NAMED_LAYOUT_CRC32
    parts = [struct.pack("<II", len(refs), layout)]
    for r in refs:
        key = r.key.encode("utf-8")
        if not key or len(key) > 0xFFFF:
            raise BlobFormatError(f"named data key of {len(key)} bytes (1 to 65535)")
        parts.append(struct.pack("<BBHIQ", r.target, 0, len(key), r.index, r.nbytes))
        if layout == NAMED_LAYOUT_CRC32:
            parts.append(struct.pack("<II", r.crc32, 0))
        parts.append(key)
    return b"".join(parts)


def _pieces(payload) -> list:
    """A section payload as a list of bytes-like pieces (a list is a payload in pieces, never joined twice)."""
    return list(payload) if isinstance(payload, list) else [payload]


def _crc32(payload) -> int:
    crc = 0
    for piece in _pieces(payload):
        crc = zlib.crc32(piece, crc)
    return crc


def _nbytes(payload) -> int:
    return sum(memoryview(p).nbytes for p in _pieces(payload))


def encode_digests(sections: Sequence[tuple[int, bytes]]) -> bytes:
    """The DIGESTS payload: u32 count, u32 reserved, then (u32 kind, u32 CRC-32 of the payload) per section."""
    entries = [struct.pack("<II", kind, _crc32(payload)) for kind, payload in sections]
    return struct.pack("<II", len(entries), 0) + b"".join(entries)


def write_sections(
    sections: Sequence[tuple[int, bytes]],
    exec_device_type: int,
    exec_device_index: int,
    *,
    version: int = VERSION,
    flags: int = 0,
    magic: bytes = MAGIC,
    alignment: int = ALIGNMENT,
    digests: bool = True,
) -> bytes:
    """Low-level writer (also used by the fixtures to make deliberately odd blobs). Each payload starts at
    a multiple of ``alignment`` (zero padding between payloads). Payloads may be any bytes-like object, or a
    list of them (one payload in pieces: joined once, into the blob).
    From version 3 a DIGESTS section of the others is appended (``digests=False``: not, for the fixtures)."""
    if version >= 3 and digests:
        sections = [*sections, (SECTION_DIGESTS, encode_digests(sections))]
    if len(sections) > MAX_SECTIONS:
        raise BlobFormatError(f"{len(sections)} sections > {MAX_SECTIONS}")
    offset = HEADER_SIZE + SECTION_ENTRY_SIZE * len(sections)
    table, placed = [], []
    for kind, payload in sections:
        size = _nbytes(payload)
        offset += _pad(offset, alignment)
        table.append(_SECTION.pack(kind, 0, offset, size))
        placed.append((offset, payload))
        offset += size
    header = _HEADER.pack(
        magic, version, flags, HEADER_SIZE, len(sections), offset, exec_device_type, exec_device_index, b"\0" * 6
    )
    pieces, at = [header, *table], HEADER_SIZE + SECTION_ENTRY_SIZE * len(sections)
    for start, payload in placed:
        pieces += [bytes(start - at), *_pieces(payload)]
        at = start + _nbytes(payload)
    return b"".join(pieces)  # one copy of each payload


def write_blob(
    io: Sequence[IOEntry],
    *,
    engine=None,
    graph: bytes | None = None,
    weights: Sequence[Weight] = (),
    refit_map: bytes | None = None,
    state: bytes | None = None,
    recipe: bytes | None = None,
    metadata: dict | None = None,
    named: Sequence[NamedRef] = (),
    guards: guards_mod.InputGuards | None = None,
    exec_device_type: int = DEVICE_CUDA,
    exec_device_index: int = 0,
) -> bytes:
    """A version-3 blob: ENGINE only ("engine-only"), or ENGINE and/or GRAPH + WEIGHTS (the program); with a
    REFIT_MAP (format/refit_map.py) the ENGINE is weight-stripped and rebuilt from WEIGHTS ("refit"); ``state``:
    the STATE table (state_table.encode_state_table) of a partition that owns mutable buffers;
    ``recipe``: the RECIPE payload (recipe.encode), whose initializers are rebuilt from WEIGHTS (in
    the blob or named). ``engine``: bytes, or a file region (builder/held_data.py), read into the blob.
    ``guards``: what the program requires of its arguments beyond their ranges (an INPUT_GUARDS section).
    ``named``: the engine and weights whose data is ExecuTorch named data instead (a NAMED_DATA section; the
    engine is then None)."""
    named_engine = any(r.target == NAMED_ENGINE for r in named)
    if named_engine and engine is not None:
        raise BlobFormatError("the engine is in the blob or named data, not both")
    if graph is None and weights:
        raise BlobFormatError("WEIGHTS without a GRAPH: the weights belong to the embedded program")
    if graph is None and engine is None and not named_engine:
        raise BlobFormatError("a blob needs an ENGINE, a GRAPH + WEIGHTS program, or both")
    if refit_map is not None and ((engine is None and not named_engine) or graph is None):
        raise BlobFormatError("a REFIT_MAP needs the ENGINE it refits and the WEIGHTS it refits it from")
    if recipe is not None and graph is None:
        raise BlobFormatError("a RECIPE needs the WEIGHTS its initializers are rebuilt from")
    sections = [(SECTION_IO_TABLE, encode_io_table(io))]
    if engine is not None:  # a file region's bytes are copied once, from the mapped file into the blob
        sections.append(
            (SECTION_ENGINE, engine if isinstance(engine, (bytes, bytearray, memoryview)) else engine.view())
        )
    if graph is not None:
        named_weights = frozenset(r.index for r in named if r.target == NAMED_WEIGHT)
        sections.append((SECTION_GRAPH, graph))
        sections.append((SECTION_WEIGHTS, weights_pieces(weights, named_weights)))
    if refit_map is not None:
        sections.append((SECTION_REFIT_MAP, refit_map))
    if state is not None:
        sections.append((SECTION_STATE, state))
    if recipe is not None:
        sections.append((SECTION_RECIPE, recipe))
    if named:
        sections.append((SECTION_NAMED_DATA, encode_named_data(named)))
    if guards:
        sections.append((SECTION_INPUT_GUARDS, guards_mod.encode(guards)))
    if metadata:
        sections.append((SECTION_METADATA, json.dumps(metadata, sort_keys=True).encode("utf-8")))
    return write_sections(sections, exec_device_type, exec_device_index, flags=_flags_for(sections))


def _flags_for(sections: list[tuple[int, object]]) -> int:
    """The header flags that follow from which sections a blob has (readers that predate them then refuse it)."""
    kinds = {kind for kind, _ in sections}
    return (FLAG_STATE if SECTION_STATE in kinds else 0) | (FLAG_NAMED_DATA if SECTION_NAMED_DATA in kinds else 0)


def replace_sections(data: bytes, changes: dict[int, bytes | None]) -> bytes:
    """``data`` (a blob the reader accepts) with the sections in ``changes`` replaced, added, or (None) removed,
    written again as version 3 (its DIGESTS recomputed); the header's execution device is kept, its flags follow
    the sections (STATE, NAMED_DATA)."""
    blob = read_blob(data, copy=False)  # refuse a damaged blob before copying any of it
    count = struct.unpack_from("<I", data, 12)[0]
    sections = []
    for i in range(count):
        kind, _, offset, size = _SECTION.unpack_from(data, HEADER_SIZE + SECTION_ENTRY_SIZE * i)
        if kind != SECTION_DIGESTS and kind not in changes:
            sections.append((kind, memoryview(data)[offset : offset + size]))
    sections += [(kind, payload) for kind, payload in changes.items() if payload is not None]
    return write_sections(sections, blob.exec_device_type, blob.exec_device_index, flags=_flags_for(sections))


# --------------------------------------------------------------------------------------------- reader


def read_blob(data, *, copy: bool = True) -> Blob:
    """Parse a blob with the runtime's C++ reader; every structural problem raises BlobFormatError. ``copy=False``:
    the sections are views of ``data`` (bytes), not copies of them."""
    data = bytes(data)
    return Blob.from_parsed(_reader.parse_blob(data), data, copy=copy)


def program_digest(blob: Blob) -> str:
    """A partition's identity on both sides: the digest of the program its blob embeds, GRAPH and every
    weight's bytes (``preprocess`` records its ONNX export under it; the runtime's call records carry it).
    An engine-only blob is identified by its engine."""
    digest = hashlib.sha256()
    if blob.graph is not None:
        digest.update(bytes(blob.graph))
        for index, entry in enumerate(blob.weights):
            digest.update(entry.name.encode("utf-8"))
            named = blob.named_weight(index)  # its key names its bytes (a digest of them)
            digest.update(named.key.encode("utf-8") if named is not None else blob.weight_bytes(entry))
    elif blob.program is not None:
        digest.update(bytes(blob.program))
    elif blob.engine is not None:
        digest.update(bytes(blob.engine))
    elif blob.named_engine is not None:
        digest.update(blob.named_engine.key.encode("utf-8"))
    return digest.hexdigest()
