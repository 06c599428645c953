"""Running the real command (the ``run_cli`` fixture: in process, or in a fresh interpreter where the claim needs
one), and reading what it printed."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()

    @property
    def noise(self) -> list[str]:
        """stderr lines other than notices: the backend's and the runtime's ("  [et_tensorrt] ...", e.g. "runs
        with PyTorch on cpu") and the command's own ("note: ...")."""
        return [line for line in self.stderr_lines if not line.startswith(("  [et_tensorrt] ", "note: "))]

    @property
    def imported(self) -> set[str]:
        """The modules the command imported, when it ran with ``PYTHONPROFILEIMPORTTIME=1`` (its ``import time:``
        lines on stderr)."""
        lines = [line for line in self.stderr_lines if line.startswith("import time:") and "|" in line]
        return {line.rsplit("|", 1)[1].strip() for line in lines}

    def imported_torch(self) -> list[str]:
        return sorted(m for m in self.imported if m == "torch" or m.startswith("torch."))

    @property
    def error_line(self) -> str:
        """The one line a failing command prints on stderr (nothing else may be there but notices)."""
        assert "Traceback" not in self.stderr, self.stderr
        assert len(self.noise) == 1, self.stderr
        (line,) = self.noise
        assert line.startswith("error: "), line
        return line


def _fresh(*args, cwd: Path, env: dict | None = None, timeout: int = 600) -> Result:
    """``python -m et_tensorrt ARGS`` in a fresh process, in ``cwd``, importing this checkout's et_tensorrt
    (the session's engine cache comes with the environment)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment.pop("ET_TENSORRT_FALLBACK", None)
    environment.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "et_tensorrt", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@contextlib.contextmanager
def _captured_fds():
    """What anything in this process writes to fds 1 and 2 inside the block, Python's and native code's alike (as
    a subprocess's pipes would see it); Python's ``sys.stdout``/``sys.stderr`` write to those fds meanwhile."""
    streams = {1: "stdout", 2: "stderr"}
    for name in streams.values():
        getattr(sys, name).flush()
    files = {fd: tempfile.TemporaryFile() for fd in streams}
    saved = {fd: os.dup(fd) for fd in streams}
    python = {name: getattr(sys, name) for name in streams.values()}
    texts: dict[str, str] = {}
    try:
        for fd, name in streams.items():
            os.dup2(files[fd].fileno(), fd)
            setattr(sys, name, open(fd, "w", closefd=False, encoding="utf-8", errors="backslashreplace"))
        yield texts
    finally:
        ctypes.CDLL(None).fflush(None)  # C's stdio buffers (ExecuTorch's runner prints with printf)
        for fd, name in streams.items():
            getattr(sys, name).flush()
            setattr(sys, name, python[name])
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            files[fd].seek(0)
            texts[name] = files[fd].read().decode("utf-8", errors="backslashreplace")
            files[fd].close()


def _in_process(*args, cwd: Path, env: dict | None = None, timeout: int = 600) -> Result:
    """The same command through ``et_tensorrt.cli.main`` in this process: ``cwd``, the environment (TMPDIR too) and
    Python's warning filters as a fresh process would have them for the call, put back after it (``timeout`` is the
    subprocess's; a call here cannot be cut short)."""
    from et_tensorrt import cli

    saved_cwd, saved_env, saved_tempdir = os.getcwd(), dict(os.environ), tempfile.tempdir
    os.environ.pop("ET_TENSORRT_FALLBACK", None)
    os.environ.update(env or {})
    tempfile.tempdir = None  # read again from TMPDIR, as a new process would
    os.chdir(cwd)
    try:
        with _captured_fds() as texts, warnings.catch_warnings():
            warnings.resetwarnings()
            try:
                status = cli.main([str(a) for a in args])
            except SystemExit as e:  # argparse: --help, --version, a bad command line
                status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            except BaseException:  # what python -m would print before exiting 1
                traceback.print_exc()
                status = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
    return Result(status or 0, texts["stdout"], texts["stderr"])


# What needs a new interpreter: which modules a command imports (import time), and nothing else here.
_FRESH_ENV = ("PYTHONPROFILEIMPORTTIME",)


def _run(*args, cwd: Path, env: dict | None = None, timeout: int = 600, fresh: bool = False) -> Result:
    """In this process (``cli.main``), or in a fresh one where the claim needs it: ``fresh=True``, or an
    environment only an interpreter's start reads."""
    fresh = fresh or any(name in (env or {}) for name in _FRESH_ENV)
    return (_fresh if fresh else _in_process)(*args, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture(scope="session")
def run_cli():
    """``run_cli(*args, cwd=..., env=..., fresh=False)`` -> Result: in process unless ``fresh`` (a claim about a new
    interpreter: its imports, a crash isolated)."""
    return _run
