"""Files we write whole or not at all: a ``.pte``, its ``.ptd``, a prepared program.

:func:`replacing` hands out a temp file beside each destination (same folder, so the rename stays on one file
system); when the block ends it flushes and fsyncs every temp, then renames each over its destination and fsyncs
the folder. A save that fails (a full disk: ``ENOSPC``) or is killed (``SIGKILL``) leaves each destination as it
was, its previous file or nothing, never a truncated one. A failed save removes its temps; a killed one leaves its
``.<name>.<pid>-<random>.partial`` beside the destination, which the next save there removes once that pid is gone.
A new file gets the mode a plain ``open(path, "wb")`` would give it (0666 less the umask); a replaced one keeps its
previous file's mode (``mkstemp`` makes its temp 0600, which the rename would otherwise carry over).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

PARTIAL_SUFFIX = ".partial"


def _open(path: str) -> BinaryIO:
    """The temp file's writer (tests inject a disk that fills up here)."""
    return open(path, "wb")


def _umask() -> int:
    """This process's umask, read without changing it where Linux says it (else set and put back at once)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: str) -> int:
    """The permission bits the file at ``path`` should have once saved: its previous file's, else a new file's."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_dead_partials(folder: str, name: str) -> None:
    """Temps a killed save of ``name`` left in ``folder`` (their writer's pid is gone)."""
    prefix = f".{name}."
    with contextlib.suppress(OSError):
        for entry in os.listdir(folder):
            if not (entry.startswith(prefix) and entry.endswith(PARTIAL_SUFFIX)):
                continue
            pid = entry[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, entry))


def _failed(exc: OSError, path: str, written: int) -> OSError:
    """``exc`` naming the destination and what became of it (same errno: callers may test for ENOSPC)."""
    reason = exc.strerror or str(exc)
    done = f" after {written:,} bytes" if written else ""
    return OSError(
        exc.errno or errno.EIO,
        f"cannot write {path}: {reason}{done}; the file at that path was left as it was (free space or write "
        "elsewhere, then save again)",
    )


class _Writer:
    """The temp file as the block sees it: records that it was the last one written (an error then names its
    destination); everything else is the file's own."""

    def __init__(self, temp: _Temp, raw: BinaryIO, last: list):
        self._temp, self._raw, self._last = temp, raw, last

    def write(self, data) -> int:
        self._last[0] = self._temp
        return self._raw.write(data)

    def __getattr__(self, name):
        return getattr(self._raw, name)


class _Temp:
    def __init__(self, path: str, last: list):
        self.path = os.path.abspath(os.fspath(path))
        folder, name = os.path.split(self.path)
        _remove_dead_partials(folder, name)
        fd, self.temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.{os.getpid()}-", suffix=PARTIAL_SUFFIX)
        os.close(fd)
        self.file = _Writer(self, _open(self.temp), last)

    def finish(self) -> None:
        # the mode last (a read-only previous file's mode would have stopped the temp's writer opening it)
        os.fchmod(self.file.fileno(), _mode_for(self.path))
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.temp)


@contextlib.contextmanager
def replacing(*paths: str | os.PathLike) -> Iterator[tuple[BinaryIO, ...]]:
    """One binary file per destination in ``paths``, written in the block; each replaces its destination only
    when the whole block succeeded and every file is on disk (renamed in the order given: put the file that
    names the others last). An ``OSError`` in the block or in finishing names the destination it hit."""
    temps: list[_Temp] = []
    last: list[_Temp | None] = [None]  # the temp written last: a write error in the block is about it
    current = None
    try:
        for path in paths:
            current = os.fspath(path)
            temps.append(_Temp(current, last))
        current = None
        yield tuple(t.file for t in temps)
        for t in temps:
            current = t.path
            t.finish()
        for t in temps:
            current = t.path
            os.replace(t.temp, t.path)
        current = None
        for folder in {os.path.dirname(t.path) for t in temps}:
            _fsync_folder(folder)
    except OSError as exc:
        failed = current or (last[0] or temps[0]).path
        written = _written(temps, failed)
        for t in temps:
            t.discard()
        raise _failed(exc, failed, written) from exc
    except BaseException:
        for t in temps:
            t.discard()
        raise


def _written(temps: list[_Temp], path: str) -> int:
    for t in temps:
        if t.path == path:
            with contextlib.suppress(OSError, ValueError):
                return os.path.getsize(t.temp) if t.file.closed else t.file.tell()
    return 0


def _fsync_folder(folder: str) -> None:
    """The renames themselves on disk (a crash right after a save keeps the new files)."""
    with contextlib.suppress(OSError):  # some file systems cannot open or sync a folder
        fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes(path: str | os.PathLike, data) -> int:
    """``data`` (a bytes-like object) written atomically to ``path``; returns its length."""
    with replacing(path) as (f,):
        f.write(data)
    return memoryview(data).nbytes
