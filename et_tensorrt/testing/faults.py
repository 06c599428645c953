"""Disk faults for reliability tests and scripts/bench_reliability.py, where no small file system can be mounted:
a disk that fills up (``ENOSPC``) and a read-only folder (``EROFS``), injected where et_tensorrt opens the files
it writes (``atomic_file._open``, ``build_cache.EngineWriter._create``) and where it makes names in a folder.
A real one behaves the same: :func:`tmpfs` and :func:`read_only_mount` make them where this process may mount
(the tests use both; the benchmark prefers the real ones)."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock


class _Filling:
    """A file of a disk with ``budget[0]`` bytes left: a write takes what is left and raises ENOSPC for the
    rest."""

    def __init__(self, raw, budget: list[int], path: str):
        self._raw, self._budget, self._path = raw, budget, path

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        taken = min(view.nbytes, self._budget[0])
        self._budget[0] -= taken
        if taken:
            self._raw.write(view[:taken])
        if taken < view.nbytes:  # what fit is written, as a real disk does, and the rest refused
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return taken

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._raw.close()


def _inside(path, folder: Path) -> bool:
    return Path(os.fspath(path)).resolve().parent == folder


@contextlib.contextmanager
def full_disk(folder: str | os.PathLike, free_bytes: int) -> Iterator[None]:
    """Files et_tensorrt writes in ``folder`` (saves and build-cache entries) share ``free_bytes`` of space."""
    from et_tensorrt import atomic_file
    from et_tensorrt.builder import build_cache

    folder = Path(folder).resolve()
    budget = [free_bytes]
    open_file, create = atomic_file._open, build_cache.EngineWriter._create

    def opening(path):
        raw = open_file(path)
        return _Filling(raw, budget, path) if _inside(path, folder) else raw

    def creating(directory, suffix):
        path, raw = create(directory, suffix)
        return path, (_Filling(raw, budget, path) if Path(directory).resolve() == folder else raw)

    with (
        mock.patch.object(atomic_file, "_open", opening),
        mock.patch.object(build_cache.EngineWriter, "_create", staticmethod(creating)),
    ):
        yield


@contextlib.contextmanager
def read_only(folder: str | os.PathLike) -> Iterator[None]:
    """``folder`` takes no new name (file, link, rename, removal), as on read-only media; its files read as
    before."""
    folder = Path(folder).resolve()

    def refused(path):
        return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    def guard(fn, *path_args):
        def call(*args, **kwargs):
            for i in path_args:
                if i < len(args) and _inside(args[i], folder):
                    raise refused(args[i])
            return fn(*args, **kwargs)

        return call

    mkstemp = tempfile.mkstemp

    def making(*args, dir=None, **kwargs):  # noqa: A002 - tempfile's own name
        if dir is not None and Path(dir).resolve() == folder:
            raise refused(dir)
        return mkstemp(*args, dir=dir, **kwargs)

    with contextlib.ExitStack() as patches:
        patches.enter_context(mock.patch.object(tempfile, "mkstemp", making))
        for name, where in (("link", (1,)), ("replace", (1,)), ("unlink", (0,)), ("remove", (0,)), ("utime", (0,))):
            patches.enter_context(mock.patch.object(os, name, guard(getattr(os, name), *where)))
        yield


# Real ones, where this process may mount (root, or a container that allows it): each yields None where it may not.


def _mount(*args: str) -> bool:
    import subprocess

    try:
        return subprocess.run(["mount", *args], capture_output=True).returncode == 0
    except OSError:  # no mount command
        return False


def _unmount(folder: Path) -> None:
    import subprocess

    subprocess.run(["umount", str(folder)], check=True, capture_output=True)


@contextlib.contextmanager
def tmpfs(size: int) -> Iterator[Path | None]:
    """A fresh folder on a tmpfs of ``size`` bytes (a disk that really fills up), or None where mounting fails."""
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="et-small-disk-"))
    try:
        if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
            yield None
            return
        try:
            yield folder
        finally:
            _unmount(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def read_only_mount(source: str | os.PathLike) -> Iterator[Path | None]:
    """``source``'s files seen through a read-only bind mount (EROFS on every write), or None where mounting
    fails."""
    folder = Path(tempfile.mkdtemp(prefix="et-read-only-"))
    try:
        if not _mount("--bind", os.fspath(source), str(folder)):
            yield None
            return
        try:
            if not _mount("-o", "remount,bind,ro", str(folder)):
                raise OSError(f"cannot remount {folder} read-only")
            yield folder
        finally:
            _unmount(folder)
    finally:
        with contextlib.suppress(OSError):
            folder.rmdir()
