"""What every command shares: exit statuses, the errors that map to them, and keeping the terminal ours
(third-party loggers and warnings quieted, the backend's progress and notices on stderr, so that stdout holds the
command's results). Only the command line quiets anything: the library leaves logging and warnings to its caller."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

EXIT_OK = 0
EXIT_ERROR = 1  # the work failed (a file that does not parse, a lowering or run error)
EXIT_USAGE = 2  # the command line cannot work as written (argparse's own status)
EXIT_MISMATCH = 3  # `check` / `demo` did not pass
EXIT_NOTHING_DELEGATED = 4  # the lowering delegated nothing (see --allow-no-delegate)

# Loggers of libraries the CLI imports that talk at import or export time (torchao's "Failed to load
# ...so", torch's pytree deprecation, torch.export's load traceback, the ONNX exporter).
_THIRD_PARTY_LOGGERS = ("torchao", "torch", "executorch", "onnxscript", "onnx_ir", "onnxruntime", "tensorrt")


class CliError(Exception):
    """A user-facing error: printed as one ``error:`` line; ``status`` is the exit status."""

    status = EXIT_ERROR


class UsageError(CliError):
    """The command line itself is wrong (a value out of range, a path that cannot be used)."""

    status = EXIT_USAGE


class NothingDelegated(CliError):
    status = EXIT_NOTHING_DELEGATED


@contextlib.contextmanager
def quiet_third_party(debug: bool):
    """Third-party loggers below ERROR and Python warnings other than et_tensorrt's own are hidden
    (``--debug`` shows everything)."""
    if debug:
        yield
        return
    from ..errors import PlacementWarning, UnmatchedOpWarning

    saved = {name: logging.getLogger(name).level for name in _THIRD_PARTY_LOGGERS}
    for name in saved:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for category in (PlacementWarning, UnmatchedOpWarning):
                warnings.simplefilter("default", category)
            yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def load_torch(debug: bool) -> None:
    """torch and the native module (:func:`et_tensorrt.load_native`), inside :func:`quiet_third_party`: torch's
    import sets its loggers' levels, so they are quieted again."""
    from .. import load_native

    load_native()
    if not debug:
        for name in _THIRD_PARTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def executorch_logs(debug: bool):
    """``--debug``: ExecuTorch's own log lines ("E 00:00:00.01 executorch:method.cpp:...") shown while the command
    runs, which Runner holds back otherwise (its error says what happened); the environment is restored after."""
    if not debug:  # the runtime is not imported (torch) for nothing
        yield
        return
    from ..runtime.runner import EXECUTORCH_LOGS_ENV

    saved = os.environ.get(EXECUTORCH_LOGS_ENV)
    if debug:
        os.environ[EXECUTORCH_LOGS_ENV] = "1"
    try:
        yield
    finally:
        if debug and saved is None:
            os.environ.pop(EXECUTORCH_LOGS_ENV, None)
        elif debug:
            os.environ[EXECUTORCH_LOGS_ENV] = saved


@contextlib.contextmanager
def quiet_native_stderr(debug: bool):
    """Native libraries that write to file descriptor 2 (ExecuTorch's kernels print cpuinfo lines on the first
    run). Their text is dropped (``--debug`` shows it); a failure still arrives as a Python exception."""
    if debug:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _LogToStderr(logging.Handler):
    """The backend's progress ("engine i/n: ...") and the runtime's notes ("runs with PyTorch on cpu"), on stderr:
    a copy of it taken when the block starts, so that quiet_native_stderr inside the block does not hide them.
    Between :meth:`hold_notes` and :meth:`show_held` (text streaming to stdout: ``generate``) the notes wait, so
    that none lands inside the text on a terminal."""

    def __init__(self, level: int, stream):
        super().__init__(level)
        self.stream = stream
        self._held: list[str] | None = None

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("et_tensorrt: "):
            message = message[len("et_tensorrt: ") :]
        level = "" if record.levelno <= logging.INFO else f"{record.levelname.lower()}: "
        line = f"  [et_tensorrt] {level}{message}"
        if self._held is not None:
            self._held.append(line)
        else:
            print(line, file=self.stream, flush=True)

    def hold_notes(self) -> None:
        if self._held is None:
            self._held = []

    def show_held(self) -> list[str]:
        """Shows the notes held since :meth:`hold_notes` (and the next ones as they come); returns them. (Not
        ``release``: logging.Handler's lock has that name.)"""
        held, self._held = self._held or [], None
        for line in held:
            print(line, file=self.stream, flush=True)
        return held


def _stderr_copy():
    """A stream on a duplicate of file descriptor 2; sys.stderr itself where it has none (a test's capture)."""
    sys.stderr.flush()
    try:
        return open(os.dup(sys.stderr.fileno()), "w", buffering=1)  # closed by backend_log
    except (AttributeError, OSError, ValueError):
        return None


@contextlib.contextmanager
def backend_log(debug: bool):
    logger = logging.getLogger("et_tensorrt")
    copy = _stderr_copy()
    handler = _LogToStderr(logging.DEBUG if debug else logging.INFO, copy or sys.stderr)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(handler.level)
    logger.propagate = False
    try:
        yield handler  # generate holds its notes while the text streams (hold_notes, show_held)
    finally:
        handler.show_held()
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
        if copy is not None:
            copy.close()


def load_runtime(debug: bool) -> None:
    """ExecuTorch's kernel libraries (for the ops left on the host), loaded once, quietly."""
    from ..runtime.runner import load_kernels

    with quiet_native_stderr(debug):
        load_kernels()
