"""Large payloads held where they already are — a tensor's memory, a region of a file — never joined into ``bytes``.

ExecuTorch serializes named data (``NamedDataStore``) and program segments as a ``Cord`` of ``bytes`` and
``FileBackedData`` (executorch/exir/_serialize/_cord.py), which it writes to the .pte/.ptd piece by piece.
:class:`HeldData` has that interface (``len``, ``prefix``, ``sha256``, ``to_bytes``, ``write_to_file``, ``close``)
for data that is not a whole file of its own: :class:`TensorData` (the program's weight, written straight from its
memory) and :class:`FileRegion` (an engine TensorRT streamed to disk, or the engine in a build-cache entry). So a
model's weights and engines reach the .pte/.ptd without a copy in memory (builder/named_data.py hands them to
ExecuTorch). This module imports nothing of ExecuTorch: the device build (et_tensorrt.runtime.device_build) holds
its engines as :class:`FileRegion` too, where only ExecuTorch's runtime is installed.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import tempfile
import weakref
import zlib

_CHUNK = 8 * 1024 * 1024
HELD_PREFIX = ".held-"  # private hard links to entries (held_data.private_link): removed by their owner when it goes


class HeldData:
    """Bytes held elsewhere, written where ExecuTorch writes the file. Immutable: deep copies are the object itself
    (ExecuTorch deep-copies programs; a copy of the data would double it)."""

    def __init__(self, nbytes: int, sha256: bytes | None = None):
        self._size = int(nbytes)
        self._sha256 = sha256
        self._crc32: int | None = None
        self._finalizer = None

    def __len__(self) -> int:
        return self._size

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def sha256(self) -> bytes:
        if self._sha256 is None:
            digest = hashlib.sha256()
            for chunk in self.chunks():
                digest.update(chunk)
            self._sha256 = digest.digest()
        return self._sha256

    def crc32(self) -> int:
        """zlib's CRC-32 of the bytes (what a blob's NAMED_DATA records beside the key), computed once."""
        if self._crc32 is None:
            crc = 0
            for chunk in self.chunks():
                crc = zlib.crc32(chunk, crc)
            self._crc32 = crc
        return self._crc32

    def chunks(self):
        raise NotImplementedError

    def prefix(self, size: int) -> bytes:
        out = bytearray()
        for chunk in self.chunks():
            out += chunk[: size - len(out)]
            if len(out) >= size:
                break
        return bytes(out)

    def to_bytes(self) -> bytes:
        return b"".join(bytes(c) for c in self.chunks()) if self._size else b""

    __bytes__ = to_bytes

    def write_to_file(self, outfile) -> None:
        for chunk in self.chunks():
            outfile.write(chunk)

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


class TensorData(HeldData):
    """A dense host tensor's storage span (``blob.tensor_span``), read in place."""

    def __init__(self, span, sha256: bytes | None = None):
        super().__init__(0 if span is None else span.nbytes, sha256)
        self._span = span  # a uint8 numpy array over the tensor's memory (it keeps the tensor alive)

    def chunks(self):
        if self._size:
            view = memoryview(self._span).cast("B")
            for start in range(0, self._size, _CHUNK * 8):
                yield view[start : start + _CHUNK * 8]


class FileRegion(HeldData):
    """``nbytes`` bytes at ``offset`` of the file at ``path``; with ``owned`` the file is removed when this object
    goes (a private temp file or a private hard link to a cache entry). With ``fd`` (an open descriptor of that
    file, which this object then owns and closes) the bytes are read through it: the file may be replaced or
    removed meanwhile (a cache entry held where no private link can be made: a read-only cache)."""

    def __init__(
        self,
        path: str | os.PathLike,
        offset: int,
        nbytes: int,
        sha256: bytes | None = None,
        owned=False,
        fd: int | None = None,
    ):
        super().__init__(nbytes, sha256)
        self._path = os.fspath(path)
        self.offset = int(offset)
        self._fd = fd
        if fd is not None:
            self._finalizer = weakref.finalize(self, os.close, fd)
        elif owned:
            self._finalizer = weakref.finalize(self, _remove, self._path)

    @property
    def nbytes(self) -> int:
        return self._size

    @property
    def path(self) -> str:
        return self._path

    def _open(self):
        """The file, read from the region's start: through the held descriptor when there is one (a file
        description of its own, so readers keep their own offsets, and the file read even once removed)."""
        f = open(f"/proc/self/fd/{self._fd}" if self._fd is not None else self._path, "rb")
        f.seek(self.offset)
        return f

    def chunks(self):
        with self._open() as f:
            left = self._size
            while left:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    raise OSError(f"{self._path} ended {left} bytes before the data it holds")
                left -= len(chunk)
                yield chunk

    def write_to_file(self, outfile) -> None:
        with self._open() as f:
            _copy(f, outfile, self._size, self._path)

    def view(self) -> memoryview:
        """The bytes as a read-only view of the mapped file (no copy: what TensorRT deserializes from); the map
        lives as long as the view and anything made from it."""
        if not self._size:
            return memoryview(b"")
        with self._open() as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(mapped)[self.offset : self.offset + self._size]


def _copy(src, dst, nbytes: int, what: str) -> None:
    left = nbytes
    while left:
        chunk = src.read(min(_CHUNK, left))
        if not chunk:
            raise OSError(f"{what} ended {left} bytes early")
        dst.write(chunk)
        left -= len(chunk)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def private_link(path: str | os.PathLike, folder) -> str:
    """A private name for the file at ``path`` (which someone else may replace or remove: a build-cache entry) in
    ``folder``: a hard link (no copy), or where the file system has none, a copy. The caller owns it."""
    fd, private = tempfile.mkstemp(dir=folder, prefix=HELD_PREFIX, suffix=".engine")
    os.close(fd)
    try:
        os.unlink(private)
        os.link(path, private)
    except OSError:
        with open(path, "rb") as src, open(private, "wb") as dst:
            _copy(src, dst, os.fstat(src.fileno()).st_size, os.fspath(path))
    return private
