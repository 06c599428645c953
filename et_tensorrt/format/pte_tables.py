"""The tables of a ``.pte`` that ``inspect`` and the LLM commands read (methods, their I/O, operators, delegates
and where each delegate's bytes lie), read straight from the flatbuffer (ExecuTorch's ``program.fbs``); and a
``.ptd``'s key table (``flat_tensor.fbs``: where each named datum lies, :func:`ptd_layout`).

ExecuTorch's own Python reader (``deserialize_pte_binary``) imports ``executorch.exir`` (seconds) and decodes every
table; this reads only these fields, with ``struct`` (nothing to import). Every offset is bounds-checked: a damaged
file raises :class:`PteTableError` naming the field, never reads past the bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Field slots, in program.fbs declaration order.
_PROGRAM_PLANS, _PROGRAM_DELEGATE_DATA, _PROGRAM_SEGMENTS = 1, 3, 4
_PLAN_NAME, _PLAN_CONTAINER, _PLAN_VALUES, _PLAN_INPUTS, _PLAN_OUTPUTS = 0, 1, 2, 3, 4
_PLAN_OPERATORS, _PLAN_DELEGATES = 6, 7
_TENSOR_SCALAR_TYPE, _TENSOR_SIZES, _TENSOR_DYNAMISM = 0, 2, 8
# The KernelTypes union (EValue.val): its type codes, named as ExecuTorch's Python schema classes are.
_KERNEL_TYPES = (
    None,
    "Null",
    "Int",
    "Bool",
    "Double",
    "Tensor",
    "String",
    "IntList",
    "DoubleList",
    "BoolList",
    "TensorList",
    "OptionalTensorList",
)
INLINE, SEGMENT = 0, 1  # DataLocation of a delegate's bytes


class PteTableError(ValueError):
    """The flatbuffer does not hold the table or field it should."""


@dataclass(frozen=True)
class Value:
    kind: str  # a KernelTypes name: "Tensor", "Int", "Null", ...
    scalar_type: int = 0
    sizes: tuple[int, ...] = ()
    dynamic: bool = False
    value: bool | int | float | None = None  # an Int, Bool or Double value: the value the program holds


# Int {int_val: long}, Bool {bool_val: bool}, Double {double_val: double}: the one field of each scalar table.
_SCALAR_FORMATS = {"Int": "<q", "Bool": "<?", "Double": "<d"}


@dataclass(frozen=True)
class Delegate:
    id: str
    location: int  # INLINE or SEGMENT
    index: int  # into backend_delegate_data (INLINE) or segments (SEGMENT)
    compile_specs: tuple[tuple[str, bytes], ...]


@dataclass
class Plan:
    name: str
    values: list[Value] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    operators: list[tuple[str, str]] = field(default_factory=list)  # (name, overload)
    delegates: list[Delegate] = field(default_factory=list)
    input_spec: str = ""  # ContainerMetadata.encoded_inp_str: the inputs' pytree spec (torch's treespec JSON)


class _Reader:
    def __init__(self, data, file: str = "program"):
        self.data, self.file = memoryview(data), file  # file: what errors call the bytes

    def _unpack(self, fmt: str, at: int, what: str):
        if at < 0 or at + struct.calcsize(fmt) > len(self.data):
            raise PteTableError(f"{what} at byte {at:,} lies outside the {len(self.data):,}-byte {self.file}")
        return struct.unpack_from(fmt, self.data, at)[0]

    def root(self) -> int:
        return self._unpack("<I", 0, "the root table offset")

    def _slot(self, table: int, slot: int) -> int:
        """The field's position in the table, 0 when absent."""
        vtable = table - self._unpack("<i", table, "a table's vtable offset")
        size = self._unpack("<H", vtable, "a vtable")
        if 4 + 2 * slot + 2 > size:
            return 0
        offset = self._unpack("<H", vtable + 4 + 2 * slot, "a vtable entry")
        return table + offset if offset else 0

    def scalar(self, table: int, slot: int, fmt: str, default=0):
        at = self._slot(table, slot)
        return self._unpack(fmt, at, "a scalar field") if at else default

    def ref(self, table: int, slot: int) -> int:
        """The table, vector or string a field points to; 0 when absent."""
        at = self._slot(table, slot)
        return at + self._unpack("<I", at, "a field's offset") if at else 0

    def string(self, table: int, slot: int) -> str:
        at = self.ref(table, slot)
        if not at:
            return ""
        n = self._unpack("<I", at, "a string's length")
        self._unpack(f"<{n}s", at + 4, "a string")
        return bytes(self.data[at + 4 : at + 4 + n]).decode("utf-8", "replace")

    def _length(self, at: int, width: int) -> int:
        n = self._unpack("<I", at, "a vector's length")
        if at + 4 + n * width > len(self.data):
            raise PteTableError(f"a vector of {n:,} elements at byte {at:,} ends past the {self.file}")
        return n

    def tables(self, table: int, slot: int) -> list[int]:
        at = self.ref(table, slot)
        if not at:
            return []
        elements = (at + 4 + 4 * i for i in range(self._length(at, 4)))
        return [e + self._unpack("<I", e, "a vector element") for e in elements]

    def numbers(self, table: int, slot: int, fmt: str) -> list[int]:
        at = self.ref(table, slot)
        if not at:
            return []
        width = struct.calcsize(fmt)
        n = self._length(at, width)
        return list(struct.unpack_from(f"<{n}{fmt}", self.data, at + 4))

    def bytes_view(self, table: int, slot: int) -> memoryview:
        at = self.ref(table, slot)
        if not at:
            return self.data[:0]
        n = self._length(at, 1)
        return self.data[at + 4 : at + 4 + n]


def _value(r: _Reader, evalue: int) -> Value:
    code = r.scalar(evalue, 0, "<B")
    kind = _KERNEL_TYPES[code] if code < len(_KERNEL_TYPES) else f"KernelTypes({code})"
    if kind in _SCALAR_FORMATS:
        table, default = r.ref(evalue, 1), {"Int": 0, "Bool": False, "Double": 0.0}[kind]  # flatbuffers omit defaults
        return Value(kind, value=r.scalar(table, 0, _SCALAR_FORMATS[kind], default) if table else default)
    if kind != "Tensor":
        return Value(kind or "None")
    tensor = r.ref(evalue, 1)
    return Value(
        "Tensor",
        r.scalar(tensor, _TENSOR_SCALAR_TYPE, "<b"),
        tuple(r.numbers(tensor, _TENSOR_SIZES, "i")),
        r.scalar(tensor, _TENSOR_DYNAMISM, "<b") != 0,
    )


def _input_spec(r: _Reader, plan: int) -> str:
    container = r.ref(plan, _PLAN_CONTAINER)
    return r.string(container, 0) if container else ""


def _delegate(r: _Reader, table: int) -> Delegate:
    processed = r.ref(table, 1)
    specs = tuple((r.string(s, 0), bytes(r.bytes_view(s, 1))) for s in r.tables(table, 2))
    return Delegate(r.string(table, 0), r.scalar(processed, 0, "<b"), r.scalar(processed, 1, "<I"), specs)


@dataclass
class PteTables:
    plans: list[Plan]
    _reader: _Reader
    _inline: list[int]  # BackendDelegateInlineData tables
    _segments: list[tuple[int, int]]  # (offset, size) of each DataSegment
    _segment_base: int

    def delegate_bytes(self, delegate: Delegate) -> memoryview:
        """A delegate's processed bytes (a view of the program's), inline or in a segment after the flatbuffer."""
        r = self._reader
        if delegate.location == INLINE and delegate.index < len(self._inline):
            return r.bytes_view(self._inline[delegate.index], 0)
        if delegate.location == SEGMENT and delegate.index < len(self._segments):
            offset, size = self._segments[delegate.index]
            start = self._segment_base + offset
            if start + size <= len(r.data):
                return r.data[start : start + size]
        raise PteTableError(
            f"delegate {delegate.id}: its bytes (location {delegate.location}, index {delegate.index}) are not in "
            "the program"
        )


def method_names(data) -> list[str]:
    """The program's method names (constant methods included), in order: the cheapest read of a .pte."""
    r = _Reader(data)
    return [r.string(plan, _PLAN_NAME) for plan in r.tables(r.root(), _PROGRAM_PLANS)]


def read_tables(data, segment_base: int = 0) -> PteTables:
    """The methods of a whole program; ``segment_base``: where its segments start (the extended header's)."""
    r = _Reader(data)
    root = r.root()
    plans = []
    for table in r.tables(root, _PROGRAM_PLANS):
        plans.append(
            Plan(
                name=r.string(table, _PLAN_NAME),
                values=[_value(r, v) for v in r.tables(table, _PLAN_VALUES)],
                inputs=r.numbers(table, _PLAN_INPUTS, "i"),
                outputs=r.numbers(table, _PLAN_OUTPUTS, "i"),
                operators=[(r.string(op, 0), r.string(op, 1)) for op in r.tables(table, _PLAN_OPERATORS)],
                delegates=[_delegate(r, d) for d in r.tables(table, _PLAN_DELEGATES)],
                input_spec=_input_spec(r, table),
            )
        )
    segments = [(r.scalar(s, 0, "<Q"), r.scalar(s, 1, "<Q")) for s in r.tables(root, _PROGRAM_SEGMENTS)]
    return PteTables(plans, r, r.tables(root, _PROGRAM_DELEGATE_DATA), segments, segment_base)


# flat_tensor.fbs: FlatTensor {version, segments: [DataSegment {offset, size}], named_data: [NamedData {key,
# segment_index}]}; its extended header (at byte 8, "FH01") holds where the segments start.
_FLAT_SEGMENTS, _FLAT_NAMED_DATA = 1, 2
_FLAT_HEADER_MAGIC, _FLAT_SEGMENT_BASE = b"FH01", 32


def ptd_layout(data) -> dict[str, tuple[int, int]]:
    """Where each key's bytes lie in a .ptd: key -> (offset in the file, size). PteTableError for a file that is not
    one, or whose data ends past its bytes."""
    r = _Reader(data, ".ptd")
    if bytes(r.data[8:12]) != _FLAT_HEADER_MAGIC:
        raise PteTableError("no FlatTensor header (FH01 at byte 8): not a .ptd")
    base = r._unpack("<Q", _FLAT_SEGMENT_BASE, "the segment base offset")
    root = r.root()
    segments = [(r.scalar(t, 0, "<Q"), r.scalar(t, 1, "<Q")) for t in r.tables(root, _FLAT_SEGMENTS)]
    out = {}
    for entry in r.tables(root, _FLAT_NAMED_DATA):
        key, index = r.string(entry, 0), r.scalar(entry, 1, "<I")
        if index >= len(segments):
            raise PteTableError(f"named data {key!r} names segment {index}, of {len(segments)}")
        offset, size = segments[index]
        if base + offset + size > len(r.data):
            raise PteTableError(f"named data {key!r} ends past the file")
        out[key] = (base + offset, size)
    return out
