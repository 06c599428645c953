"""What a `.pte` holds, read without running it: methods, their I/O, and our delegates' blobs.

:func:`inspect_bytes` reads the flatbuffer's tables directly (``format/pte_tables.py``: ExecuTorch's ``exir``,
seconds to import, is not needed); :func:`named_data` and :func:`delegate_blobs` use ExecuTorch's own deserializer
(``deserialize_pte_binary``, which also moves delegate segments back inline). Every delegate whose backend id is
``EtTensorRTBackend`` is decoded with :func:`et_tensorrt.format.blob.read_blob` (the runtime's C++ reader).
Passive: nothing here loads the program into a runtime, deserializes an engine or the embedded program, or needs
a GPU.
"""

from __future__ import annotations

import os
import struct
import textwrap
import zipfile
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import NamedTuple

from ._text import table
from .format import input_guards as guards_mod
from .format.dtypes import scalar_type_name as scalar_name  # torch's names by the format's one table: no torch

# A .pte is a flatbuffer whose file identifier (bytes 4..8) is "ET" + a two-digit schema version, then
# ExecuTorch's extended header: "eh00", its length, the flatbuffer's size, the segments' offset and size.
_IDENT_OFFSET = 4
_EXTENDED_MAGIC = b"eh00"
_EXTENDED_HEADER_MIN = 32  # magic, length, flatbuffer size, segment base (an older header stops here)
_EXTENDED_HEADER_END = 40  # ... and the segments' size
_ZIP_MAGIC = b"PK\x03\x04"


def _backend_id() -> str:
    # compile_specs imports ExecuTorch's exir (seconds): only once a program is really parsed.
    from .compile_specs import BACKEND_ID

    return BACKEND_ID


class NotAProgramError(ValueError):
    """The bytes are not an ExecuTorch program."""


@dataclass(frozen=True)
class ValueInfo:
    """One method input or output as the program records it."""

    kind: str  # "tensor", or the EValue kind ("int", "null", ...)
    dtype: str = ""
    sizes: tuple = ()  # for a dynamic tensor: the upper bound memory was planned for
    dynamic: bool = False
    value: bool | int | float | None = None  # an int, bool or float: the value the program holds

    def __str__(self) -> str:
        if self.kind != "tensor":
            return self.kind if self.value is None else f"{self.kind} {self.value!r}"
        text = format_spec(self.dtype, self.sizes)
        return text + ", dynamic: memory planned for these upper bounds" if self.dynamic else text


@dataclass
class DelegateInfo:
    method: str
    index: int  # position in the method's delegate list
    backend_id: str
    size: int  # processed bytes
    compile_specs: dict = field(default_factory=dict)
    blob: object = None  # et_tensorrt.format.blob.Blob for our delegates
    blob_version: int | None = None  # from the blob header, even when the rest does not parse
    blob_error: str = ""

    @property
    def ours(self) -> bool:
        return self.backend_id == _backend_id()


@dataclass
class MethodInfo:
    name: str
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    delegates: list[DelegateInfo]
    operators: list[str]  # the kernels the method calls on the host (not delegated)


@dataclass
class ProgramInfo:
    size: int
    schema: str  # flatbuffer file identifier, e.g. "ET12"
    methods: list[MethodInfo]

    def method(self, name: str) -> MethodInfo:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(f"no method {name!r}; the program has {[m.name for m in self.methods]}")


def check_header(data: bytes, source: str = "input", size: int | None = None) -> str:
    """The flatbuffer identifier, or NotAProgramError naming what the bytes are instead. ``data``: at least the
    first 32 bytes; ``size``: the whole file's (default ``len(data)``), checked against the size the extended
    header records, so a truncated file is refused before ExecuTorch reads it. Cheap: no ExecuTorch import."""
    size = len(data) if size is None else size
    if bytes(data[:4]) == _ZIP_MAGIC:
        raise NotAProgramError(_zip_message(source))
    ident = bytes(data[_IDENT_OFFSET : _IDENT_OFFSET + 4])
    if len(data) < 8 or ident[:2] != b"ET" or not ident[2:].isdigit():
        raise NotAProgramError(
            f"{source} is not an ExecuTorch program (no 'ETnn' flatbuffer identifier at byte 4; found {ident!r})"
        )
    if bytes(data[8:12]) == _EXTENDED_MAGIC and size < _EXTENDED_HEADER_MIN:
        raise NotAProgramError(
            f"{source} is truncated: {size:,} bytes, which ends inside ExecuTorch's {_EXTENDED_HEADER_MIN}-byte "
            "extended header (an incomplete copy or download: write or copy the .pte again)"
        )
    header = _extended_header(bytes(data[:_EXTENDED_HEADER_END]))
    expected = None if header is None else header.file_size
    if expected is not None and size < expected:
        raise NotAProgramError(
            f"{source} is truncated: {size:,} bytes, but its header says the program is {expected:,} bytes "
            "(an incomplete copy or download: write or copy the .pte again)"
        )
    return ident.decode()


class _ExtendedHeader(NamedTuple):
    """ExecuTorch's extended header ("eh00" at byte 8): where the flatbuffer ends and the segments lie."""

    program_size: int  # the flatbuffer's bytes, from the file's start
    segment_base: int  # where the segments start
    segment_data_size: int  # 0: not recorded (an older, 24-byte header)

    @property
    def file_size(self) -> int:
        """The size the file must have: the flatbuffer, and the segments after it when the header records them."""
        if not self.segment_data_size:
            return self.program_size
        return max(self.program_size, self.segment_base + self.segment_data_size)


def _extended_header(head: bytes) -> _ExtendedHeader | None:
    """The extended header of a file starting with ``head``; None without one."""
    if len(head) < _EXTENDED_HEADER_MIN or head[8:12] != _EXTENDED_MAGIC:
        return None
    length, program_size, segment_base = struct.unpack_from("<IQQ", head, 12)
    recorded = length >= 32 and len(head) >= _EXTENDED_HEADER_END
    return _ExtendedHeader(program_size, segment_base, struct.unpack_from("<Q", head, 32)[0] if recorded else 0)


def _zip_message(source: str) -> str:
    """A zip archive where a .pte was expected: a torch.export program when it holds one."""
    try:
        with zipfile.ZipFile(source) as archive:
            exported = any(name.split("/")[-1] == "archive_format" for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        exported = False
    if exported:
        return (
            f"{source} is a torch.export program (.pt2), not an ExecuTorch .pte: lower it first "
            f"(et-tensorrt lower {source} -o model.pte)"
        )
    return f"{source} is a zip archive, not an ExecuTorch .pte"


def read_file(path: str | os.PathLike) -> bytes:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb") as f:
        data = f.read()
    check_header(data, path)
    return data


def read_flatbuffer(path: str | os.PathLike) -> bytes:
    """A program file's flatbuffer, without the segments after it (the extended header says where it ends): all
    that method names, I/O and delegate tables need, a few KiB of a multi-GB LLM. Checked as :func:`check_file`."""
    path = os.fspath(path)
    check_file(path)
    with open(path, "rb") as f:
        head = f.read(_EXTENDED_HEADER_END)
        header = _extended_header(head)
        return head + f.read(None if header is None else max(header.program_size - len(head), 0))


def check_file(path: str | os.PathLike) -> str:
    """``check_header`` on a file, reading only its first bytes."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(_EXTENDED_HEADER_END)
    return check_header(head, path, os.path.getsize(path))


def _delegate_bytes(program, delegate) -> bytes:
    ref = delegate.processed
    if int(ref.location) == 0:  # INLINE (deserialize_pte_binary moves segments back inline)
        return bytes(program.backend_delegate_data[ref.index].data)
    raise NotAProgramError(f"delegate {delegate.id}: data location {ref.location} could not be read")


def _blob_version(data: bytes) -> int | None:
    if len(data) >= 6 and data[:4] == b"ETRT":
        return struct.unpack_from("<H", data, 4)[0]
    return None


def _deserialize_pte(data: bytes, source: str):
    """ExecuTorch's Python flatbuffer reader (no runtime): the whole file (``PTEFile``: its Program, delegate
    segments inline, and its named data), or NotAProgramError naming ``source``."""
    try:
        from executorch.exir._serialize._program import deserialize_pte_binary

        return deserialize_pte_binary(bytes(data))
    except Exception as e:  # a corrupt flatbuffer raises anything from struct.error to IndexError
        raise NotAProgramError(f"{source} could not be parsed as an ExecuTorch program: {type(e).__name__}: {e}") from e


def _deserialize(data: bytes, source: str):
    """The Program of :func:`_deserialize_pte`."""
    return _deserialize_pte(data, source).program


def named_data(pte, data_path: str | os.PathLike | None = None) -> dict[str, bytes | memoryview]:
    """The named data a program keeps (key -> its bytes): inside its ``.pte`` (``named_data="pte"``) and, given
    ``data_path``, in its ``.ptd`` (``named_data="ptd"``; read-only views of the mapped file, never read whole).
    ``pte``: the program's bytes, or the file :func:`_deserialize_pte` already read (not parsed again)."""
    if isinstance(pte, (bytes, bytearray, memoryview)):
        check_header(pte)
        pte = _deserialize_pte(pte, "input")
    store = pte.named_data
    out = {} if store is None else {key: bytes(store.buffers[e.buffer_index]) for key, e in store.pte_data.items()}
    if data_path is not None:
        out.update(_ptd_data(data_path))
    return out


def _ptd_data(path: str | os.PathLike) -> dict[str, memoryview]:
    """A .ptd's named data (ExecuTorch's flat_tensor file: header, flatbuffer, segments), each datum a view of
    the mapped file. Only the flatbuffer (the keys and offsets, a few KiB) is decoded."""
    import mmap

    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as e:  # an empty file
            raise NotAProgramError(f"{os.fspath(path)} is not a .ptd (ExecuTorch named data): {e}") from e
    view = memoryview(mapped)
    return {key: view[start : start + size] for key, (start, size) in ptd_layout(view, path).items()}


def ptd_layout(data, path: str | os.PathLike = "input") -> dict[str, tuple[int, int]]:
    """Where each key's bytes lie in a .ptd (``data``: its bytes or a view of them): key -> (offset in the file,
    size). Raises NotAProgramError for a file that is not one (or ends before its data)."""
    from .format import pte_tables

    try:
        return pte_tables.ptd_layout(data)
    except pte_tables.PteTableError as e:
        raise NotAProgramError(f"{os.fspath(path)} could not be read as a .ptd (ExecuTorch named data): {e}") from e


def delegate_blobs(pte: bytes, backend_id: str | None = None) -> list[bytes]:
    """The processed bytes of every delegate of ``backend_id`` (default: ours) in a program, in method and
    delegate order: the one way to find blobs in a ``.pte`` (no magic-byte scans)."""
    check_header(pte)
    program = _deserialize(pte, "input")
    return [_delegate_bytes(program, d) for _, d in _delegates_of(program, backend_id)]


def _delegates_of(program, backend_id: str | None = None) -> list[tuple[str, object]]:
    """(method, delegate reference) of each delegate of ``backend_id`` (default: ours) in a deserialized Program,
    in method and delegate order."""
    wanted = backend_id or _backend_id()
    return [(plan.name, d) for plan in program.execution_plan for d in plan.delegates if d.id == wanted]


def _segment_base(head: bytes) -> int:
    """Where the segments start (ExecuTorch's extended header); 0 without one."""
    header = _extended_header(head)
    return 0 if header is None else header.segment_base


def _tables_value(value) -> ValueInfo:
    if value.kind != "Tensor":
        return ValueInfo(value.kind.lower(), value=value.value)
    return ValueInfo("tensor", scalar_name(value.scalar_type), value.sizes, value.dynamic)


def inspect_bytes(data: bytes, source: str = "input") -> ProgramInfo:
    """Parse a whole program (raises NotAProgramError when it is not one). The flatbuffer's tables are read
    directly (format/pte_tables.py: no ExecuTorch import), our delegates' blobs by the C++ reader."""
    from .compile_specs import decode
    from .errors import BlobFormatError
    from .format.blob import read_blob
    from .format.pte_tables import PteTableError, read_tables

    schema = check_header(data, source)
    try:
        tables = read_tables(data, _segment_base(bytes(data[:_EXTENDED_HEADER_END])))
        methods = []
        for plan in tables.plans:
            delegates = []
            for i, d in enumerate(plan.delegates):
                payload = bytes(tables.delegate_bytes(d))
                specs = [SimpleNamespace(key=key, value=value) for key, value in d.compile_specs]
                info = DelegateInfo(plan.name, i, d.id, len(payload), decode(specs))
                if info.ours:
                    info.blob_version = _blob_version(payload)
                    try:
                        info.blob = read_blob(payload)
                    except BlobFormatError as e:
                        info.blob_error = str(e)
                delegates.append(info)
            methods.append(
                MethodInfo(
                    name=plan.name,
                    inputs=[_tables_value(plan.values[i]) for i in plan.inputs],
                    outputs=[_tables_value(plan.values[i]) for i in plan.outputs],
                    delegates=delegates,
                    operators=[f"{name}.{overload}" if overload else name for name, overload in plan.operators],
                )
            )
    except (PteTableError, IndexError) as e:
        raise NotAProgramError(f"{source} could not be parsed as an ExecuTorch program: {type(e).__name__}: {e}") from e
    return ProgramInfo(size=len(data), schema=schema, methods=methods)


def inspect_file(path: str | os.PathLike) -> ProgramInfo:
    return inspect_bytes(read_file(path), os.fspath(path))


# ------------------------------------------------------------------------------------------ formatting


def format_dim(low: int, high: int | None = None, opt: int | None = None) -> str:
    """One dim, the one way specs print it: ``16`` (static), ``1..32 (opt 4)`` (dynamic: the declared range, and
    the size engines are tuned for, by default the traced example's), ``2..inf`` (no upper bound)."""
    if high == low and opt in (None, low):
        return str(low)
    text = f"{low}..{'inf' if high is None else high}"
    return text if opt is None else f"{text} (opt {opt})"


def format_shape(dims) -> str:
    """``(1..32 (opt 4), 16)``: each dim an int (static) or ``(low, high, opt)`` as :func:`format_dim` takes."""
    return "(" + ", ".join(format_dim(*d) if isinstance(d, tuple) else str(d) for d in dims) + ")"


def format_spec(dtype: str, dims) -> str:
    """A tensor spec: ``float32(1..32 (opt 4), 16)``."""
    return dtype + format_shape(dims)


def blob_dims(dims) -> list:
    """Blob dim ranges (``DimRange``, max -1 unbounded) as :func:`format_shape` takes them."""
    return [d.min if d.is_static else (d.min, None if d.max == -1 else d.max, d.opt) for d in dims]


def _kib(n: int) -> str:
    return f"{n:,} B" if n < 10 * 1024 else f"{n / 1024:,.1f} KiB"


def format_program(info: ProgramInfo, source: str = "") -> str:
    lines = [
        f"{source or 'program'}: {info.size:,} bytes, ExecuTorch flatbuffer {info.schema}, "
        f"{len(info.methods)} method(s)"
    ]
    for m in info.methods:
        ours = [d for d in m.delegates if d.ours]
        lines.append("")
        lines.append(
            f"method {m.name!r}: {len(m.inputs)} input(s), {len(m.outputs)} output(s), "
            f"{len(m.delegates)} delegate(s) ({len(ours)} {_backend_id()}), "
            f"{len(m.operators)} host kernel(s)"
        )
        for i, v in enumerate(m.inputs):
            lines.append(f"  input  {i}: {v}")
        for i, v in enumerate(m.outputs):
            lines.append(f"  output {i}: {v}")
        if m.operators:
            lines.append(f"  host kernels: {', '.join(m.operators)}")
        for d in m.delegates:
            lines.append("")
            lines.extend("  " + line for line in format_delegate(d))
    return "\n".join(lines)


_QTYPE_NAMES = {"float8_e4m3fn": "fp8"}


def quantization_text(meta: dict) -> str:
    """The engine's quantized precision from its METADATA (``quantization``, stage legalize_quant): weights and
    activations, e.g. "weights int4 (4), activations fp32 (2 activation Q/DQ dropped: run in float)"; "" when the
    partition holds no quantization."""
    q = meta.get("quantization")
    if not isinstance(q, dict):
        return ""

    def kinds(counts) -> str:
        counts = counts if isinstance(counts, dict) else {}
        return ", ".join(f"{_QTYPE_NAMES.get(k, k)} ({v})" for k, v in sorted(counts.items()))

    weights = kinds(q.get("weights")) or meta.get("precision", "?")
    activations = kinds(q.get("activations")) or meta.get("precision", "?")
    text = f"weights {weights}, activations {activations}"
    dropped = q.get("dropped_activation_qdq") or 0
    if dropped:
        text += f" ({dropped} activation Q/DQ TensorRT cannot express dropped: they run in float)"
    return text


def format_delegate(d: DelegateInfo) -> list:
    head = f"delegate {d.index}: {d.backend_id}, {_kib(d.size)}"
    if not d.ours:
        return [head + " (not ours: contents not shown)"]
    lines = [head + f", blob format version {d.blob_version if d.blob_version is not None else '?'}"]
    if d.blob is None:
        return lines + [f"  blob unreadable: {d.blob_error}"]
    b, meta = d.blob, d.blob.metadata
    exec_dev = b.execution_device
    if b.digests_verified:
        lines.append("  integrity: every section matches its CRC-32 (DIGESTS)")
    else:
        lines.append(f"  integrity: not checked (format {b.version} has no section digests; lower the model again)")
    specs = ", ".join(f"{k.replace('et_tensorrt.', '')}={v}" for k, v in sorted(d.compile_specs.items()))
    lines.extend(
        textwrap.wrap(
            f"execution device {exec_dev}; compile specs: {specs}",
            96,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    )
    named_engine = b.named_engine
    if b.engine is not None or named_engine is not None:
        engine = f"{_kib(len(b.engine))}" if named_engine is None else f"{_kib(named_engine.nbytes)} in named data"
        if meta.get("cache") == "hit":
            engine += ", from the build cache"
        elif meta.get("build_seconds") is not None:
            engine += f", built in {meta['build_seconds']} s"
    else:
        engine = (
            "none: the partition runs with PyTorch (" + str(meta.get("fallback_reason", "no reason recorded")) + ")"
        )
    lines.append(f"  engine: {engine}")
    if b.graph is not None:
        named = sum(1 for i in range(len(b.weights)) if b.named_weight(i) is not None)
        program = (
            f"graph {_kib(len(b.graph))}, {len(b.weights)} weight(s) "
            f"{_kib(sum(w.nbytes for w in b.weights))} (raw, no pickle"
            + (f"; {named} in named data" if named else "")
            + ")"
        )
    elif b.program is not None:
        program = f"version-1 torch.export archive, {_kib(len(b.program))} (read by the safe loader)"
    else:
        program = "none (engine-only blob)"
    lines.append(f"  embedded program: {program}")
    if b.named:
        where = {"pte": "inside the .pte", "ptd": "in the .ptd beside the .pte"}.get(meta.get("named_data"), "")
        lines.append(
            f"  named data: {len(b.named)} key(s), {_kib(sum(n.nbytes for n in b.named))}"
            + (f" {where}" if where else "")
            + " (ExecuTorch's NamedDataMap; stored once per program)"
        )
        lines.append(
            "  named data integrity: each key's CRC-32 recorded, checked at load"
            if b.named_digests
            else "  named data integrity: not checked (no CRC-32 recorded: lowered before et_tensorrt recorded them; "
            "save the model again)"
        )
    targets = meta.get("target_archs") or []
    lines.append(
        f"  TensorRT: {meta.get('trt_flavour', '?')} {meta.get('trt_version', '?')}, precision "
        f"{meta.get('precision', '?')}, targets {', '.join(targets) if targets else 'default (builder)'}, "
        f"ONNX opset {meta.get('onnx_opset', '?')}, {meta.get('nodes', '?')} node(s)"
    )
    recipe = b.recipe
    if recipe is not None and not recipe.usable:
        lines.append(f"  build recipe: layout version {recipe.version}, newer than this et_tensorrt reads")
    elif recipe is not None:
        lines.append(
            f"  build recipe: graph {_kib(len(recipe.graph))}, {len(recipe.entries)} initializer(s) from WEIGHTS, "
            f"{_kib(recipe.raw_bytes)} raw (builds the engine for other GPUs)"
        )
    quantization = quantization_text(meta)
    if quantization:
        lines.append(f"  quantized: {quantization}")
    if meta.get("profile_max_picked"):
        lines.append(f"  unbounded dims built up to: {meta['profile_max_picked']}")
    rows = [("role", "name", "device", "spec (dynamic dims: min..max (opt))")]
    for e in b.io:
        spec = format_spec(scalar_name(e.dtype), blob_dims(e.dims))
        rows.append(("input" if e.role == 0 else "output", e.name, e.device, spec))
    lines.extend(table(rows, indent="  "))
    if b.input_guards:  # checked before each call (docs/blob-format.md, INPUT_GUARDS)
        lines.append("  input guards (what the exported program requires of its inputs together, checked per call):")
        lines.extend(f"    {line}" for line in guards_mod.describe(b.input_guards))
    if b.states:
        total = _kib(sum(e.nbytes for e in b.states))
        lines.append(f"  state the delegate owns on {exec_dev} ({total}, docs/stateful-decode.md):")
        # A state several methods declare is one buffer of the loaded program (docs/stateful-decode.md).
        shared = any(e.shared for e in b.states)
        rows = [("state", "spec", "update", "initial", "write positions") + (("shared by",) if shared else ())]
        for e in b.states:
            guard = "-" if e.position_input < 0 else f"input {e.position_input}"
            if e.position_input >= 0 and e.position_kind == 1:
                guard += " (start)"
            rows.append(
                (
                    e.name,
                    format_spec(scalar_name(e.dtype), e.shape),
                    "in place" if e.in_place else "copied back",
                    "zeros" if e.initial is None else "bytes",
                    guard,
                )
                + ((", ".join(e.methods) or "-",) if shared else ())
            )
        lines.extend(table(rows, indent="  "))
    return lines
