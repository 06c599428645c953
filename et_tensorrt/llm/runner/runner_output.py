"""What ExecuTorch's C++ runners (TextLLMRunner, MultimodalRunner) print and log, read back: their text streamed
through the stdout file descriptor (:class:`_Streamed`), a file descriptor captured (:class:`_Captured`), their
log lines on this thread (:class:`_ExecuTorchLog`), and a failure or a stop in one line."""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
import threading

from ...errors import RunnerError
from .outcome import (
    STOP_CONTEXT,
    STOP_EOS,
    STOP_MAX_NEW_TOKENS,
    cannot_start,
)

# What TextLLMRunner logs (at Error level) when it refuses a prompt (extension/llm/runner/text_llm_runner.cpp),
# as (pattern, its groups -> (position, prompt tokens, context)).
_RUNNER_REFUSALS = (
    (re.compile(r"pos_ (\d+) \+ num_prompt_tokens (\d+) >= max_context_len (\d+)"), lambda p, n, c: (p, n, c)),
    (re.compile(r"num_prompt_tokens (\d+) >= max_context_len (\d+)"), lambda n, c: (0, n, c)),
    (re.compile(r"Expected at least 1 prompt token|Empty prompt requires a prior prefill"), lambda: (0, 0, 1)),
)


def _failed(runner: str, what: str, failure: Exception, errors: list[str]) -> RunnerError:
    """A native runner's failure in one line: the prompt it refused in :func:`cannot_start`'s words, else its
    exception and the last lines it logged at error level (the exception only says that it failed)."""
    for line in reversed(errors):
        for pattern, fields in _RUNNER_REFUSALS:
            found = pattern.search(line)
            why = found and cannot_start(*fields(*map(int, found.groups())))
            if why:
                return RunnerError(f"cannot generate: {why}")
    logged = "; ".join(errors[-3:])
    return RunnerError(f"{runner} could not {what}: {failure}" + (f" ({logged})" if logged else ""))


_RESOLVED = re.compile(r"Max new tokens resolved: (\d+)")


def _stopped(messages: list[tuple[str, str]], ended: bool, asked: int) -> str:
    """Why TextLLMRunner stopped: at an end-of-sequence token (``ended``), else from what it logged: it resolves
    max_new_tokens against the context left (an info line) and generates that many."""
    if ended:
        return STOP_EOS
    resolved = [int(m.group(1)) for _, text in messages if (m := _RESOLVED.search(text))]
    if not resolved:
        return ""
    return STOP_CONTEXT if resolved[-1] < asked else STOP_MAX_NEW_TOKENS


class _ExecuTorchLog:
    """What ExecuTorch logs on this thread inside the block, with its level (et_tensorrt._C.ExecuTorchLogCapture):
    ``messages`` [(level, text)], ``errors`` the texts logged at error level."""

    def __enter__(self):
        from ... import _C

        self._capture = _C.ExecuTorchLogCapture()
        self._capture.__enter__()
        return self

    def __exit__(self, *exc):
        self._capture.__exit__(*exc)

    @property
    def messages(self) -> list[tuple[str, str]]:
        return list(self._capture.messages)

    @property
    def errors(self) -> list[str]:
        return [text for level, text in self.messages if level in "EF"]


class _Captured:
    """What native code writes to file descriptor ``fd`` inside the block (``.text``, bytes)."""

    def __init__(self, fd: int):
        self.fd, self.text = fd, b""

    def __enter__(self):
        (sys.stdout if self.fd == 1 else sys.stderr).flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(self.fd)
        os.dup2(self._file.fileno(), self.fd)
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, self.fd)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read()
        self._file.close()


_OBSERVER = b"PyTorchObserver "  # the runner's closing line of statistics


def _runner_text(output: bytes, ends: tuple[bytes, ...]) -> tuple[bytes, bool]:
    """(the text TextLLMRunner generated, whether it stopped at an end-of-sequence token) from what it printed: the
    pieces, then, at an EOS id, that token's own text (``ends``: each EOS token's) and a newline, then a newline
    and its ``PyTorchObserver {...}`` line. The EOS token's text is not the model's text."""
    cut = output.rfind(b"\n" + _OBSERVER)
    body = output[:cut] if cut >= 0 else b"" if output.startswith(_OBSERVER) else output
    for end in ends:
        if body.endswith(end + b"\n"):
            return body[: -len(end) - 1], True
    return body, False


class _Streamed:
    """What native code writes to stdout inside the block (``.text``, bytes), also handed to ``on_piece`` as it
    arrives, from a thread that drains a pipe (the runner flushes each token). What may still turn out to be the
    runner's own ending (an EOS token's text, ``ends``, its newlines and its ``PyTorchObserver {...}`` line:
    :func:`_runner_text`) is held back until it is known not to be; :attr:`generated` is the text without it, and
    ``on_piece`` sees exactly that. Python's own ``sys.stdout`` keeps writing to the real stdout meanwhile, so
    ``on_piece`` may print. An exception ``on_piece`` raises stops the pieces, not the draining (a full pipe would
    block the runner), and is raised when the block ends."""

    def __init__(self, on_piece=None, ends: tuple[bytes, ...] = ()):
        self.on_piece, self.text, self._failure = on_piece, b"", None
        self.ends = tuple(e for e in ends if e)
        self._tails = (b"\n" + _OBSERVER, *(e + b"\n\n" + _OBSERVER for e in self.ends))
        self._data, self._shown = bytearray(), 0
        self.generated, self.ended_at_eos = b"", False

    def __enter__(self):
        sys.stdout.flush()
        self._read, write = os.pipe()
        self._saved = os.dup(1)
        os.dup2(write, 1)
        os.close(write)
        self._python_stdout = sys.stdout
        sys.stdout = open(self._saved, "w", closefd=False, encoding=getattr(sys.stdout, "encoding", None))
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()
        return self

    def _held(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` (up to the observer line) may still be the runner's ending."""
        for size in range(min(len(data), max(map(len, self._tails))), 0, -1):
            if any(tail.startswith(data[-size:]) for tail in self._tails):
                return size
        return 0

    def _pump(self) -> None:
        while chunk := os.read(self._read, 1 << 16):
            self._data += chunk
            if self.on_piece is None:
                continue
            data = bytes(self._data)
            cut = data.find(b"\n" + _OBSERVER)
            text = data[:cut] if cut >= 0 else b"" if data.startswith(_OBSERVER) else data
            ready = len(text) - self._held(text)
            if ready > self._shown:
                self._show(data[self._shown : ready])
                self._shown = ready

    def _show(self, piece: bytes) -> None:
        try:
            self.on_piece(piece)
        except BaseException as e:  # noqa: BLE001 - raised on the caller's thread by __exit__
            self._failure, self.on_piece = e, None

    def __exit__(self, *exc):
        ctypes.CDLL(None).fflush(None)  # C's stdio buffer, should the runner not have flushed its last token
        os.dup2(self._saved, 1)  # closes the pipe's last write end: the thread reads to its end
        # Only then is Python's stdout put back: ``on_piece`` may be printing to ours from the thread (all of the
        # text, when the runner held the GIL throughout), and a file closed under it would lose the rest.
        self._thread.join()
        ours, sys.stdout = sys.stdout, self._python_stdout
        ours.close()  # flushed; it leaves its descriptor open (closefd=False) for:
        os.close(self._saved)
        os.close(self._read)
        self.text = bytes(self._data)
        self.generated, self.ended_at_eos = _runner_text(self.text, self.ends)
        if self.on_piece is not None and len(self.generated) > self._shown:
            self._show(self.generated[self._shown :])
        if self._failure is not None and exc[0] is None:
            raise self._failure


def _native_generate(owner, runner: str, generate, on_token, ends=()) -> tuple[bytes, bool, object, list, list]:
    """(the text, whether it ended at an end-of-sequence token, the last ``Stats``, the et_tensorrt delegate plans
    recorded, what ExecuTorch logged as (level, text)) of ``generate(stats_callback)``, a call of ExecuTorch's C++
    runner ``runner``: what it prints streamed to ``on_token`` (without its ending: ``ends``, each EOS token's text,
    and its statistics line), its log appended to ``owner.log``; a failure is one RunnerError saying why
    (:func:`_failed`)."""
    from ...runtime.runner import record_plans

    stats = []
    with _Streamed(on_token, ends) as out, _Captured(2) as log, record_plans() as calls, _ExecuTorchLog() as logged:
        try:
            generate(stats.append)
            failure = None
        except RuntimeError as exc:
            failure = exc
    owner.log += log.text.decode("utf-8", "replace")
    if failure is not None:
        raise _failed(runner, "generate", failure, logged.errors)
    if not stats:
        raise RunnerError(f"{runner} reported no statistics (its log: {type(owner).__name__}.log)")
    return out.generated, out.ended_at_eos, stats[-1], calls.plans, logged.messages
