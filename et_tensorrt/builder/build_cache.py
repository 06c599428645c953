"""On-disk cache of built partitions, keyed *before* the ONNX export.

The key (:func:`partition_key`) hashes what decides the engine: the partition's aten program (GRAPH JSON and
every weight's bytes), its I/O dtypes, devices and dim ranges, the build options that shape the engine, and
the tools that build it (TensorRT flavour and version, torch/onnxscript versions, this package's version, the
local GPU when no target is named, the safe loader's rules) plus :data:`FORMAT_VERSION`. A hit therefore skips
the ONNX export, onnxruntime validation and the TensorRT build; the entry carries everything else the blob
needs from the export (the engine's I/O table with the ONNX names, the opset, the picked profile maxima).

One file per entry, ``<key>.etrc`` (layout: ``_HEAD``, then the engine as the builder streamed it, then the
partition's RECIPE when the lowering made one, then a JSON header (written last, when the build's facts are known;
the RECIPE's length is in it); a sha256 of all that follows ``_HEAD`` sits in ``_HEAD``). A loaded entry's engine
is never read into memory: it is a region of the entry file (``held_data.FileRegion``). The engines the device
builds (et_tensorrt.runtime.device_build) are entries of the same folder and layout, keyed by the partition, the
GPU and the TensorRT that built them. Writes go to a temp file in the same folder and are renamed into place
(``os.replace``), so a reader sees a whole entry or none; an entry that fails its checks is a miss and is
removed. The folder is bounded (:func:`max_bytes`): after each store the least recently used entries go (a hit
touches the entry's mtime, the LRU clock).

Location: ``ET_TENSORRT_CACHE_DIR``, default ``~/.cache/et_tensorrt/engines``; limit:
``ET_TENSORRT_CACHE_MAX_BYTES`` (bytes, or with a K/M/G/T suffix; 0 stores nothing).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from et_tensorrt import __version__, trt
from et_tensorrt.builder.held_data import HELD_PREFIX, FileRegion, private_link
from et_tensorrt.errors import OptionError
from et_tensorrt.format.blob import DimRange, IOEntry, Weight

logger = logging.getLogger("et_tensorrt")

ENV_CACHE_DIR = "ET_TENSORRT_CACHE_DIR"
ENV_CACHE_MAX_BYTES = "ET_TENSORRT_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 10 * 2**30
# Bump when the key's inputs or the entry layout change: old entries then simply miss. 3: the engine streamed in
# by the builder, the partition's RECIPE, then the header (two layouts were each called 2, each without the other).
FORMAT_VERSION = 3
SUFFIX = ".etrc"
LEGACY_SUFFIX = ".engine"  # entries of the ONNX-keyed cache before format 1 (removed by clear())
# TensorRT-RTX runtime caches (compiled kernels) the delegate keeps per engine and GPU (runtime/runtime_cache.py):
# files of this folder, removed by clear() too.
RUNTIME_FOLDER = "runtime"
RUNTIME_SUFFIX = ".rtcache"
TEMP_PREFIX = ".tmp-"  # files being written (runtime/runtime_cache.py too); removed by clear(), and when stale
_STALE_TEMP_SECONDS = 3600  # a temp file this old belongs to a writer that died
_STALE_HELD_SECONDS = 7 * 24 * 3600  # a held link this old belongs to a process that died (it holds no space
# of its own while its entry is there)

_MAGIC = b"ETRTCACH"
# magic, format version, header length, payload length (engine + recipe), sha256(payload + header)
_HEAD = struct.Struct("<8sIIQ32s")
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 8 * 1024 * 1024
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
# A folder that takes no new file or link: read-only (a prepared cache on read-only media), not ours, full
_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EMLINK, errno.EXDEV)

# Process-wide counters (tests read them to prove a hit without timing).
stats = {"hits": 0, "misses": 0, "stores": 0, "evictions": 0, "corrupt": 0}

_source: contextvars.ContextVar[str | None] = contextvars.ContextVar("et_tensorrt_cache_source", default=None)
_noticed: set[tuple[str, str]] = set()  # (folder, what) already told: one notice per cause, not one per partition


def _notice(what: str, exc: OSError, consequence: str) -> None:
    """One warning per cache folder and cause (``what``: "write", "read", ...) for the process: a full or
    read-only cache costs builds (or disk), never a lowering, and says so once."""
    folder = str(cache_dir())
    if (folder, what) in _noticed:
        return
    _noticed.add((folder, what))
    reason = exc.strerror or str(exc)
    logger.warning("build cache: cannot %s %s (%s); %s", what, folder, reason, consequence)


def cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "et_tensorrt" / "engines"


def max_bytes() -> int:
    """The size limit of the cache folder, from ``ET_TENSORRT_CACHE_MAX_BYTES`` (OptionError when unreadable)."""
    text = os.environ.get(ENV_CACHE_MAX_BYTES)
    if text is None or not text.strip():
        return DEFAULT_MAX_BYTES
    m = _SIZE_RE.match(text)
    if m is None:
        raise OptionError(
            f"{ENV_CACHE_MAX_BYTES}={text!r} is not a size; give bytes (e.g. 2000000000) or a number with "
            "K, M, G or T (powers of 1024), or 0 to store nothing"
        )
    number, unit = int(m.group(1)), m.group(2).lower()
    return number * 1024 ** ("kmgt".index(unit) + 1) if unit else number


@contextlib.contextmanager
def describing(source: str) -> Iterator[None]:
    """While active, entries stored record ``source`` (a model's name or file) for ``et-tensorrt cache list``."""
    token = _source.set(source)
    try:
        yield
    finally:
        _source.reset(token)


# ------------------------------------------------------------------------------------------------ the key


class _Hasher:
    """sha256 over named, length-prefixed fields: no two different inputs feed the same byte stream."""

    def __init__(self) -> None:
        self._h = hashlib.sha256(b"et_tensorrt-partition-cache\0")

    def field(self, name: str, data: bytes | memoryview) -> None:
        self._h.update(struct.pack("<IQ", len(name), len(data)) + name.encode())
        self._h.update(data)

    def json(self, name: str, value: object) -> None:
        self.field(name, json.dumps(value, sort_keys=True, default=str, separators=(",", ":")).encode())

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _dims(dims: Sequence[DimRange]) -> list:
    return [[d.min, d.opt, d.max] for d in dims]


# torch's shape symbols: sizes (s27), data-dependent values (u60, unbacked floats zuf0)
_SYMBOL_RE = re.compile(rb"(?<![A-Za-z0-9_])(zuf|s|u)(\d+)(?![A-Za-z0-9_])")


def canonical_symbols(graph: bytes) -> bytes:
    """``graph`` with torch's shape symbols renumbered in the order they first appear (s0, s1, ..., u0, ...). Their
    numbers count what the process traced before (the unbacked ones, ``u``, across exports), so the same partition
    lowered twice in one process, or after another model, would otherwise miss the cache."""
    renamed: dict[bytes, bytes] = {}
    counts: dict[bytes, int] = {}

    def renumber(m: re.Match) -> bytes:
        if m.group(0) not in renamed:
            prefix = m.group(1)
            counts[prefix] = counts.get(prefix, -1) + 1
            renamed[m.group(0)] = prefix + str(counts[prefix]).encode()
        return renamed[m.group(0)]

    return _SYMBOL_RE.sub(renumber, graph)


def partition_key(graph: bytes, weights: Sequence[Weight], facts: Mapping[str, object]) -> str:
    """The cache key of one partition: its GRAPH payload (its shape symbols renumbered), every weight (name, kind,
    dtype, shape and values), and ``facts`` (JSON-able: the arguments' dtypes, devices and ranges, the engine-shaping
    options, the tool versions of :func:`tool_versions`)."""
    from et_tensorrt.builder.named_data import tensor_digest  # local: named_data imports exir (not on the device)

    h = _Hasher()
    h.json("format", FORMAT_VERSION)
    h.json("facts", dict(facts))
    h.field("graph", canonical_symbols(graph))
    for w in weights:
        meta = [w.name, w.kind, str(w.tensor.dtype), list(w.tensor.shape), list(w.tensor.stride()), w.persistent]
        h.json("weight", meta)
        # the SHA-256 of its stored bytes, computed once per process (named data keys reuse it)
        h.field("values", tensor_digest(w.tensor))
    return h.hexdigest()


@functools.cache
def _program_checks_digest() -> str:
    """Digest of the safe loader's rules (et_tensorrt/embedded_program): a hit skips checking a GRAPH the
    cache has seen pass, so a change of those rules must miss."""
    folder = Path(__file__).resolve().parent.parent / "embedded_program"
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def tool_versions(target_archs: Sequence[str]) -> dict:
    """What builds the engine besides the options: TensorRT, the ONNX exporter, this package, and the local
    GPU when the engine is built for the builder's default target (no explicit ``target_archs``)."""
    from importlib import metadata

    import torch

    def installed(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    gpu = None if target_archs else trt.local_sm()
    return {
        "program_checks": _program_checks_digest(),
        "trt_flavour": trt.flavour(),
        "trt_version": trt.version(),
        "torch": torch.__version__,
        "onnxscript": installed("onnxscript"),
        "onnx": installed("onnx"),
        "et_tensorrt": __version__,
        "default_target_gpu": gpu,
    }


# ---------------------------------------------------------------------------------------------- entries


@dataclass
class Entry:
    """One cached partition: the engine and what the blob needs from the ONNX export that built it."""

    key: str
    engine: bytes | FileRegion  # loaded: the entry file's engine bytes, held where they are (held_data.FileRegion)
    io: list[IOEntry]  # the engine's I/O table (ONNX names, engine dim ranges)
    metadata: dict = field(default_factory=dict)  # blob METADATA from the export (opset, picked maxima, ...)
    onnx_sha256: str = ""  # digest of the ONNX the engine was built from
    validation: dict | None = None  # the onnxruntime validation outcome, when it ran
    info: dict = field(default_factory=dict)  # what it is, for `cache list`: source, label, nodes, ops, inputs
    recipe: bytes | None = None  # the partition's RECIPE section (device_build), None when it was made without one
    build_seconds: float | None = None  # how long the engine took to build (recorded when it was stored)


@dataclass(frozen=True)
class EntryInfo:
    """An entry as ``cache list`` shows it (read from the header only)."""

    key: str
    path: Path
    size: int
    last_used: float  # the file's mtime: the LRU clock
    created: float
    engine_bytes: int
    info: dict


def _path(key: str) -> Path:
    return cache_dir() / f"{key}{SUFFIX}"


def _io_json(entries: Sequence[IOEntry]) -> list:
    return [[e.role, e.name, e.dtype, _dims(e.dims), e.device_type, e.device_index] for e in entries]


def _io_from_json(rows: list) -> list[IOEntry]:
    return [IOEntry(r, n, d, tuple(DimRange(*x) for x in dims), t, i) for r, n, d, dims, t, i in rows]


def _header(entry: Entry) -> bytes:
    return json.dumps(
        {
            "key": entry.key,
            "created": time.time(),
            "io": _io_json(entry.io),
            "metadata": entry.metadata,
            "onnx_sha256": entry.onnx_sha256,
            "validation": entry.validation,
            "info": entry.info,
            "recipe_len": None if entry.recipe is None else len(entry.recipe),
            "build_seconds": entry.build_seconds,
        },
        sort_keys=True,
    ).encode("utf-8")


class EngineWriter:
    """Where a build streams its engine (TensorRT writes it in chunks: the engine is never whole in memory).

    With an ``entry`` (its ``engine`` unused) the chunks go into a new build-cache entry, after its fixed head;
    :meth:`commit` appends the entry's ``recipe`` and its JSON header (so what is known only after the build, its
    time, is in it), completes the head (lengths, sha256), moves the entry into place (unless it exceeds the
    limit) and returns the engine as a private hard link to it (the cache may evict the entry at any time).
    Without one, the chunks go to a private temp file. Either way ``commit`` returns a
    :class:`~et_tensorrt.builder.held_data.FileRegion` of the engine alone that removes its file when it goes.

    A cache that cannot take the engine (a full disk: ``ENOSPC`` in the middle of the stream) costs the caching,
    not the build: the chunks so far move to a private temp file and the rest follow there (one notice). TensorRT
    swallows what its stream writer raises, so a failure to write the engine anywhere is kept in :attr:`error`
    (the builder raises it) and the writer answers 0 bytes written, which ends the build."""

    def __init__(self, entry: Entry | None = None):
        self._entry = entry
        self._engine_sha = hashlib.sha256()
        self._entry_sha = hashlib.sha256()
        self.nbytes = 0
        self.stored = False  # whether commit() moved the entry into the cache
        self.error: OSError | None = None  # why the engine could not be written anywhere
        self._offset = _HEAD.size if entry is not None else 0
        directory = cache_dir() if entry is not None else Path(tempfile.gettempdir())
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._tmp, self._file = self._create(directory, SUFFIX if entry else ".engine")
        if entry is not None:
            self._put(bytes(_HEAD.size))  # completed by commit()

    @staticmethod
    def _create(directory: Path, suffix: str):
        fd, path = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=suffix)
        return path, os.fdopen(fd, "wb", buffering=0)  # unbuffered: what write() accepted is in the file

    def _put(self, data) -> None:
        view = memoryview(data).cast("B")
        while view.nbytes:
            view = view[self._file.write(view) :]

    def write(self, chunk) -> int:
        if self.error is not None:
            return 0
        try:
            self._put(chunk)
        except OSError as exc:
            try:
                if self._entry is None or not self._spill(exc):
                    raise
                self._put(chunk)
            except OSError as last:  # nowhere to write it: the build ends, and the builder raises this
                self.error = OSError(last.errno, f"cannot write the engine to {self._tmp}: {last.strerror or last}")
                return 0
        self._engine_sha.update(chunk)
        self._entry_sha.update(chunk)
        n = memoryview(chunk).nbytes
        self.nbytes += n
        return n

    def _spill(self, exc: OSError) -> bool:
        """The cache entry could not take a chunk: the engine so far moves to a private temp file (this writer is
        then one without an entry). Whether it could."""
        _notice("write to", exc, "engines are built and used without being cached")
        try:
            tmp, file = self._create(Path(tempfile.gettempdir()), ".engine")
        except OSError:
            return False
        try:
            with open(self._tmp, "rb") as src:
                src.seek(self._offset)
                left = self.nbytes
                while left:
                    chunk = src.read(min(_CHUNK, left))
                    if not chunk:
                        raise OSError(f"{self._tmp} ended {left} bytes early")
                    view = memoryview(chunk)
                    while view.nbytes:
                        view = view[file.write(view) :]
                    left -= len(chunk)
        except OSError:
            file.close()
            os.unlink(tmp)
            return False
        self.abort()
        self._entry, self._offset, self._tmp, self._file, self._dir = None, 0, tmp, file, Path(tmp).parent
        return True

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)

    def commit(self, hold: bool = True, build_seconds: float | None = None) -> FileRegion | None:
        """Completes the engine (``build_seconds``: recorded in the entry); returns it held (``hold``) or None."""
        sha = self._engine_sha.digest()

        def private() -> FileRegion | None:  # the written file itself, ours alone: removed when the region goes
            return FileRegion(self._tmp, self._offset, self.nbytes, sha, owned=True) if hold else self.abort()

        if self._entry is None:
            self._file.close()
            return private()
        entry = self._entry
        if build_seconds is not None:
            entry.build_seconds = round(build_seconds, 3)
        if entry.info.get("source") is None and _source.get() is not None:
            entry.info["source"] = _source.get()
        recipe, header = entry.recipe or b"", _header(entry)
        payload = self.nbytes + len(recipe)
        try:
            for part in (recipe, header):
                self._put(part)
                self._entry_sha.update(part)
            self._file.seek(0)
            self._put(_HEAD.pack(_MAGIC, FORMAT_VERSION, len(header), payload, self._entry_sha.digest()))
            self._file.close()
        except OSError as exc:  # the engine itself is whole in the file: used, not cached
            with contextlib.suppress(OSError):
                self._file.close()
            _notice("write to", exc, "engines are built and used without being cached")
            return private()
        key, limit = entry.key, max_bytes()
        size = _HEAD.size + payload + len(header)
        if size > limit:
            logger.info("build cache: %s entry of %d bytes exceeds the limit %d; not stored", key[:16], size, limit)
            return private()
        held = None
        try:
            # Our own name for the engine first (a link to the temp file, before the entry can be replaced or
            # evicted)
            if hold:
                held = FileRegion(private_link(self._tmp, self._dir), self._offset, self.nbytes, sha, owned=True)
            os.replace(self._tmp, _path(key))
        except OSError as exc:
            _notice("write to", exc, "engines are built and used without being cached")
            return private()  # (a held link made before the failure removes itself)
        stats["stores"] += 1
        self.stored = True
        evict(limit, keep=key)
        return held


def engine_writer(entry: Entry | None) -> EngineWriter:
    """An :class:`EngineWriter` for a new entry, or a plain private file where the cache cannot be written (a
    read-only home must not fail lowering: one notice)."""
    if entry is not None:
        try:
            return EngineWriter(entry)
        except OSError as exc:
            _notice("write to", exc, "engines are built and used without being cached")
    return EngineWriter(None)


class _Corrupt(Exception):
    pass


def _read_head(f, file_size: int) -> tuple[int, bytes, dict]:
    """(payload length, sha256 recorded, header with its bytes under "raw"); leaves ``f`` at the payload."""
    raw = f.read(_HEAD.size)
    if len(raw) != _HEAD.size:
        raise _Corrupt("shorter than its fixed header")
    magic, version, header_len, payload_len, digest = _HEAD.unpack(raw)
    if magic != _MAGIC:
        raise _Corrupt("not a cache entry (bad magic)")
    if version != FORMAT_VERSION:
        raise _Corrupt(f"entry format {version}, this version reads {FORMAT_VERSION}")
    if _HEAD.size + payload_len + header_len != file_size:
        raise _Corrupt(f"size {file_size} does not match its header ({_HEAD.size + payload_len + header_len})")
    f.seek(_HEAD.size + payload_len)
    header_bytes = f.read(header_len)
    f.seek(_HEAD.size)
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except ValueError as exc:
        raise _Corrupt(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _Corrupt("header is not a JSON object")
    return payload_len, digest, {"raw": header_bytes, **header}


def _recipe_len(header: dict, payload_len: int) -> int | None:
    """The RECIPE's length at the end of the payload (None: the entry has none)."""
    recipe_len = header.get("recipe_len")
    if recipe_len is None:
        return None
    if isinstance(recipe_len, bool) or not isinstance(recipe_len, int) or not 0 < recipe_len <= payload_len:
        raise _Corrupt(f"recipe length {recipe_len!r} outside its payload of {payload_len} bytes")
    return recipe_len


def _discard(path: Path, why: str) -> None:
    stats["corrupt"] += 1
    logger.warning("build cache: removing %s (%s); the partition is built again", path.name, why)
    with contextlib.suppress(OSError):
        path.unlink()


def discard(key: str, why: str) -> None:
    """Removes ``key``'s entry as bad (a caller's own check failed): it is built again."""
    _discard(_path(key), why)


def load(key: str) -> Entry | None:
    """The entry for ``key``, or None (a miss). An entry that fails its checks is removed and is a miss. The
    engine is checked by reading it in chunks and held as a private hard link to the entry (never read whole) or,
    where the folder takes no link (a read-only cache, prepared ahead), through an open descriptor of the entry:
    loading never needs to write. The RECIPE (a few KiB) is read."""
    path = _path(key)
    held = fd = None
    try:
        # Read through a name of our own (a writer may replace the entry, or another process evict it, meanwhile):
        # the engine is then held as a region of that file, checked here chunk by chunk, never read whole.
        fd = os.open(path, os.O_RDONLY)
        try:
            held = private_link(path, cache_dir())
        except OSError as exc:  # keeps the entry's file open instead (it outlives an eviction)
            if exc.errno not in _CANNOT_WRITE:
                raise
        with open(held if held is not None else f"/proc/self/fd/{fd}", "rb") as f:
            size = os.fstat(f.fileno()).st_size
            payload_len, digest, header = _read_head(f, size)
            header_bytes = header.pop("raw")
            check = hashlib.sha256()
            recipe_len = _recipe_len(header, payload_len)
            engine_sha = hashlib.sha256()
            engine_len = left = payload_len - (recipe_len or 0)
            while left:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    break
                check.update(chunk)
                engine_sha.update(chunk)
                left -= len(chunk)
            recipe = f.read(recipe_len) if recipe_len is not None else None
            check.update(recipe or b"")
            check.update(header_bytes)
        if held is not None:
            engine = FileRegion(held, _HEAD.size, engine_len, engine_sha.digest(), owned=True)
        else:
            engine = FileRegion(path, _HEAD.size, engine_len, engine_sha.digest(), fd=fd)
            fd = None  # the region owns it now
        held = None  # the region owns it now
    except FileNotFoundError:
        stats["misses"] += 1
        return None
    except _Corrupt as exc:
        _discard(path, str(exc))
        stats["misses"] += 1
        return None
    except OSError as exc:
        logger.warning("build cache: cannot read %s (%s); building", path, exc)
        stats["misses"] += 1
        return None
    finally:
        if held is not None:
            with contextlib.suppress(OSError):
                os.unlink(held)
        if fd is not None:
            os.close(fd)
    try:
        if left or (recipe is not None and len(recipe) != recipe_len) or check.digest() != digest:
            raise _Corrupt("checksum mismatch")
        if header.get("key") != key:
            raise _Corrupt(f"holds the key {str(header.get('key'))[:16]}..., not its file name's")
        entry = Entry(
            key=key,
            engine=engine,
            io=_io_from_json(header["io"]),
            metadata=dict(header["metadata"]),
            onnx_sha256=str(header["onnx_sha256"]),
            validation=header["validation"],
            info=dict(header["info"]),
            recipe=recipe,
            build_seconds=header.get("build_seconds"),
        )
    except (_Corrupt, KeyError, TypeError, ValueError) as exc:
        _discard(path, str(exc) if isinstance(exc, _Corrupt) else f"malformed header ({exc!r})")
        stats["misses"] += 1
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # the LRU clock: a hit makes the entry the most recently used
    stats["hits"] += 1
    return entry


def store(entry: Entry) -> bool:
    """Writes ``entry`` (its engine ``bytes`` or a held region) atomically, then evicts least recently used entries
    beyond the limit. Never raises for a file-system problem: returns whether it was stored."""
    engine = entry.engine
    try:
        writer = EngineWriter(entry)
    except OSError as exc:
        logger.warning("build cache: cannot write to %s (%s)", cache_dir(), exc)
        return False
    try:
        for chunk in engine.chunks() if isinstance(engine, FileRegion) else (engine,):
            writer.write(chunk)
        writer.commit(hold=False, build_seconds=entry.build_seconds)
    except OSError as exc:
        writer.abort()
        logger.warning("build cache: cannot write to %s (%s)", cache_dir(), exc)
        return False
    return writer.stored


# ------------------------------------------------------------------------------------ listing and eviction


def _entry_files() -> list[tuple[Path, os.stat_result]]:
    out = []
    try:
        names = os.listdir(cache_dir())
    except OSError:
        return out
    for name in names:
        if not name.endswith(SUFFIX) or not _KEY_RE.match(name[: -len(SUFFIX)]):
            continue
        path = cache_dir() / name
        with contextlib.suppress(OSError):
            out.append((path, path.stat()))
    return out


def evict(limit: int, keep: str | None = None) -> int:
    """Removes least recently used entries until the folder's entries fit ``limit`` bytes (and temp files a
    dead writer left); ``keep`` (the entry just stored) goes last. Returns how many entries went."""
    now = time.time()
    with contextlib.suppress(OSError):
        for name in os.listdir(cache_dir()):
            path = cache_dir() / name
            stale = _STALE_TEMP_SECONDS if name.startswith(TEMP_PREFIX) else _STALE_HELD_SECONDS
            if name.startswith((TEMP_PREFIX, HELD_PREFIX)):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > stale:
                        path.unlink()
    files = sorted(_entry_files(), key=lambda p: (p[0].name == f"{keep}{SUFFIX}", p[1].st_mtime_ns))
    total = sum(st.st_size for _, st in files)
    removed = 0
    for path, st in files:
        if total <= limit:
            break
        with contextlib.suppress(FileNotFoundError):  # another process may have evicted it already
            path.unlink()
            removed += 1
        total -= st.st_size
    stats["evictions"] += removed
    return removed


def entries() -> list[EntryInfo]:
    """Every readable entry, most recently used first (headers only; unreadable files are skipped)."""
    out = []
    for path, st in _entry_files():
        try:
            with open(path, "rb") as f:
                payload_len, _, header = _read_head(f, st.st_size)
                engine_len = payload_len - (_recipe_len(header, payload_len) or 0)
        except (OSError, _Corrupt):
            continue
        info = header.get("info") if isinstance(header.get("info"), dict) else {}
        created = header.get("created")
        out.append(
            EntryInfo(
                key=path.name[: -len(SUFFIX)],
                path=path,
                size=st.st_size,
                last_used=st.st_mtime,
                created=float(created) if isinstance(created, (int, float)) else st.st_mtime,
                engine_bytes=engine_len,
                info=info,
            )
        )
    return sorted(out, key=lambda e: e.last_used, reverse=True)


def total_bytes() -> int:
    """Bytes the entries take (what the limit bounds)."""
    return sum(st.st_size for _, st in _entry_files())


def clear() -> tuple[int, int]:
    """Removes every entry, legacy ``*.engine`` file, temp file and TensorRT-RTX runtime cache; returns (files
    removed, bytes freed)."""
    count = freed = 0
    runtime = cache_dir() / RUNTIME_FOLDER
    with contextlib.suppress(OSError):
        names = [(cache_dir(), n) for n in os.listdir(cache_dir())]
        if runtime.is_dir():
            names += [(runtime, n) for n in os.listdir(runtime)]
        for folder, name in names:
            path = folder / name
            ours = name.endswith((SUFFIX, LEGACY_SUFFIX, RUNTIME_SUFFIX)) or name.startswith((TEMP_PREFIX, HELD_PREFIX))
            if not ours or not path.is_file():
                continue
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                path.unlink()
                count += 1
                freed += size
    return count, freed
