"""Text generation with a program lowered with et_tensorrt: ExecuTorch's own C++ ``TextLLMRunner`` for a one-``forward``
program, :class:`MethodsDriver` (``Runner`` over ``prefill`` and ``decode``) for a two-method one.

``TextLLMRunner`` (``executorch.extension.llm.runner``) links the same ``libexecutorch.so`` our backend is
registered in (``import et_tensorrt``), so it runs our delegate with no glue. It reads the model's facts from
constant methods (:func:`~et_tensorrt.llm.llm_methods`: lower with ``constant_methods=llm_methods(...)``), calls
``forward`` with the tokens and their start position, and keeps the position across ``generate`` calls until
``reset``; the KV cache stays in the delegate the whole time (docs/stateful-decode.md).

It prints the text it generates to the process's stdout from C++ (its Python token callback raises
``UnicodeDecodeError`` on the partial UTF-8 tokens a byte-level tokenizer yields), so :class:`TextGenerator`
reads what it prints through the file descriptor.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass

from ..errors import RunnerError
from .constants import _method_names, missing_methods


def _check_files(model, tokenizer, data_path) -> None:
    files = (("program", model), ("tokenizer", tokenizer), *((("data file", data_path),) if data_path else ()))
    for what, path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no {what} at {os.fspath(path)!r}")
    if data_path:  # ExecuTorch reads a .ptd's key table unverified: a damaged one is refused here, by name
        from et_tensorrt import _C

        _C.check_data_file(os.fspath(data_path), os.fspath(model))


@dataclass
class Generation:
    text: bytes  # what the runner printed: the prompt is not echoed; bytes, as a random model's need not be UTF-8
    prompt_tokens: int
    generated_tokens: int
    seconds: float  # the runner's own inference time (prefill + decode)
    # Bytes each decode step (one token) moved between host and device, one entry per step; empty when not
    # measured. `bytes_counted` says what the numbers include.
    step_bytes: tuple[int, ...] = ()
    bytes_counted: str = ""
    # Bytes of state each decode step copied back into the delegate's states (0: the KV cache updated in place);
    # empty when not measured.
    state_bytes: tuple[int, ...] = ()
    stopped: str = ""  # why generation stopped: STOP_EOS, STOP_MAX_NEW_TOKENS or STOP_CONTEXT ("" not known)

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else 0.0


STOP_EOS = "an end-of-sequence token"
STOP_MAX_NEW_TOKENS = "max_new_tokens"
STOP_CONTEXT = "the end of the context"


def cannot_start(position: int, prompt_tokens: int, context: int) -> str | None:
    """Why a prompt of ``prompt_tokens`` tokens cannot be continued from ``position`` in a cache of ``context``
    positions (one is left for the first generated token, as TextLLMRunner requires), in one line; None if it can.
    Every front door says it in these words."""
    if prompt_tokens < 1:
        return "the prompt is empty (it encodes to no token): give text to continue"
    if prompt_tokens >= context:
        return (
            f"the prompt is {prompt_tokens} tokens and the program's cache holds {context} (get_max_context_len): "
            "shorten the prompt, or lower the model with a longer cache"
        )
    if position + prompt_tokens >= context:
        return (
            f"the context is full: {position} of its {context} positions are used and the prompt needs "
            f"{prompt_tokens} more; reset() to start over"
        )
    return None


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


def _stopped(messages: list[tuple[str, str]], generated: int, asked: int) -> str:
    """Why TextLLMRunner stopped, from what it logged: it resolves max_new_tokens against the context left (an info
    line) and generates that many less the prefill's token unless an end-of-sequence token comes first."""
    resolved = [int(m.group(1)) for _, text in messages if (m := _RESOLVED.search(text))]
    if not resolved:
        return ""
    if generated < resolved[-1] - 1:
        return STOP_EOS
    return STOP_CONTEXT if resolved[-1] < asked else STOP_MAX_NEW_TOKENS


def _check_max_new_tokens(n: int) -> None:
    if n < 1:
        raise ValueError(f"max_new_tokens is {n}: ask for at least 1 token")


class _ExecuTorchLog:
    """What ExecuTorch logs on this thread inside the block, with its level (et_tensorrt._C.ExecuTorchLogCapture):
    ``messages`` [(level, text)], ``errors`` the texts logged at error level."""

    def __enter__(self):
        from .. import _C

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


class _Streamed:
    """What native code writes to stdout inside the block (``.text``, bytes), also handed to ``on_piece`` as it
    arrives, from a thread that drains a pipe (the runner flushes each token). The runner's closing
    ``PyTorchObserver {...}`` line is held back from ``on_piece``. Python's own ``sys.stdout`` keeps writing to the
    real stdout meanwhile, so ``on_piece`` may print. An exception ``on_piece`` raises stops the pieces, not the
    draining (a full pipe would block the runner), and is raised when the block ends."""

    _OBSERVER = b"PyTorchObserver "

    def __init__(self, on_piece=None):
        self.on_piece, self.text, self._chunks, self._failure = on_piece, b"", [], None

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

    def _pump(self) -> None:
        held, at_line_start = b"", True  # held: a line's start that may be the observer's
        while chunk := os.read(self._read, 1 << 16):
            self._chunks.append(chunk)
            if self.on_piece is None:
                continue
            *lines, rest = (held + chunk).split(b"\n")
            shown, held = [], b""
            for line in lines:
                if not (at_line_start and line.startswith(self._OBSERVER)):
                    shown.append(line + b"\n")
                at_line_start = True
            if at_line_start and rest and (rest.startswith(self._OBSERVER) or self._OBSERVER.startswith(rest)):
                held = rest
            elif rest:
                shown.append(rest)
                at_line_start = False
            if shown:
                self._show(b"".join(shown))
        if held and not held.startswith(self._OBSERVER):
            self._show(held)

    def _show(self, piece: bytes) -> None:
        try:
            self.on_piece(piece)
        except BaseException as e:  # noqa: BLE001 - raised on the caller's thread by __exit__
            self._failure, self.on_piece = e, None

    def __exit__(self, *exc):
        ctypes.CDLL(None).fflush(None)  # C's stdio buffer, should the runner not have flushed its last token
        ours, sys.stdout = sys.stdout, self._python_stdout
        ours.close()  # flushed; the descriptor stays (closefd=False) until:
        os.dup2(self._saved, 1)  # closes the pipe's last write end: the thread reads to its end
        os.close(self._saved)
        self._thread.join()
        os.close(self._read)
        self.text = b"".join(self._chunks)
        if self._failure is not None and exc[0] is None:
            raise self._failure


class TextGenerator:
    """``TextLLMRunner`` of one ``.pte`` and tokenizer file (a HF ``tokenizer.json``, tiktoken or SentencePiece); a
    program of ``prefill`` and ``decode`` methods (:func:`export_prefill_decode`) is driven by :class:`MethodsDriver`
    instead, as TextLLMRunner calls ``forward`` only (an ``encoder``/``decoder`` program: :class:`Transcriber`)."""

    def __new__(cls, model, tokenizer, data_path=None):
        if cls is TextGenerator and os.path.isfile(model):
            with open(model, "rb") as f:
                names = _method_names(f.read())
            if {"prefill", "decode"} <= names and "forward" not in names:
                return MethodsDriver(model, tokenizer, data_path)
        return super().__new__(cls)

    def __init__(
        self, model: str | os.PathLike, tokenizer: str | os.PathLike, data_path: str | os.PathLike | None = None
    ):
        """``data_path``: the .ptd holding the program's named data (a lowering with ``named_data="ptd"``)."""
        from .. import load_native
        from ..compile_specs import BACKEND_ID
        from ..format.pte_tables import read_tables

        load_native()  # the backend registered in libexecutorch.so (the command line's process defers it)
        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        missing = missing_methods(pte)
        forward = [plan for plan in read_tables(pte).plans if plan.name == "forward"]
        # our delegate calls per forward call: how the recorded plans group into decode steps
        self._delegates = sum(d.id == BACKEND_ID for plan in forward for d in plan.delegates)
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an LLM program TextLLMRunner can drive: it has no method(s) "
                f"{', '.join(missing)}; lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
            )
        with _Captured(2) as log:  # the runner (and its tokenizers, at import) log what they read: kept in .log
            from executorch.extension.llm.runner import TextLLMRunner

            with _ExecuTorchLog() as logged:  # after the import: its Python bindings install their log function
                try:
                    data = os.fspath(data_path) if data_path else None
                    self._runner = TextLLMRunner(os.fspath(model), os.fspath(tokenizer), data)
                    failure = None
                except RuntimeError as exc:
                    failure = exc
        self.log = log.text.decode("utf-8", "replace")  # what ExecuTorch and the runner logged since load
        if failure is not None:
            raise _failed("TextLLMRunner", f"load {os.fspath(model)}", failure, logged.errors)

    def generate(self, prompt: str, max_new_tokens: int = 16, temperature: float = 0.0, on_token=None) -> Generation:
        """Continues the sequence (the runner keeps its position; :meth:`reset` starts over). ``on_token``: called
        with each piece of text (bytes) as the runner prints it, from another thread."""
        from executorch.extension.llm.runner import GenerationConfig

        _check_max_new_tokens(max_new_tokens)
        if not prompt:  # TextLLMRunner takes "" as "continue a prefill() of its own", which this class does not expose
            raise RunnerError(f"cannot generate: {cannot_start(0, 0, 1)}")
        config = GenerationConfig()
        config.max_new_tokens = max_new_tokens
        config.temperature = temperature
        config.echo = False
        text, s, plans, logged = _native_generate(
            self, "TextLLMRunner", lambda stats: self._runner.generate(prompt, config, stats_callback=stats), on_token
        )
        seconds = (s.inference_end_ms - s.inference_start_ms) / 1e3
        steps = self._decode_step_bytes(plans, s.num_generated_tokens)
        counted = "the copies the et_tensorrt delegates made (their placement plans); ExecuTorch's own copies at the "
        counted += "method boundary are not seen from here"
        return Generation(
            text.rstrip(b"\n"),
            s.num_prompt_tokens,
            s.num_generated_tokens,
            seconds,
            steps,
            counted if steps else "",
            stopped=_stopped(logged, s.num_generated_tokens, max_new_tokens),
        )

    def _decode_step_bytes(self, plans, generated: int) -> tuple[int, ...]:
        """Bytes each decode step's forward call moved: the recorded delegate plans, ``self._delegates`` a call, the
        last ``generated - 1`` calls (the prompt's call yields the first token)."""
        calls = [plans[i : i + self._delegates] for i in range(0, len(plans), self._delegates or 1)]
        if not self._delegates or generated < 2 or len(calls) < generated - 1:
            return ()
        return tuple(sum(p.bytes_copied for p in call) for call in calls[len(calls) - (generated - 1) :])

    def reset(self) -> None:
        """The next ``generate`` starts at position 0 (the cache rows it leaves are masked, not cleared)."""
        self._runner.reset()


def _native_generate(owner, runner: str, generate, on_token) -> tuple[bytes, object, list, list]:
    """(the text, the last ``Stats``, the et_tensorrt delegate plans recorded, what ExecuTorch logged as (level,
    text)) of ``generate(stats_callback)``, a call of ExecuTorch's C++ runner ``runner``: what it prints streamed to
    ``on_token``, its log appended to ``owner.log``; a failure is one RunnerError saying why (:func:`_failed`)."""
    from ..runtime.runner import record_plans

    stats = []
    with _Streamed(on_token) as out, _Captured(2) as log, record_plans() as calls, _ExecuTorchLog() as logged:
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
    # the runner ends with one "PyTorchObserver {json stats}" line of its own
    text = b"\n".join(line for line in out.text.split(b"\n") if not line.startswith(b"PyTorchObserver "))
    return text, stats[-1], calls.plans, logged.messages


def _byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2's): printable character -> the byte it stands for."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(visible), 0
    for b in range(256):
        if b not in visible:
            visible.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(visible, chars)}


class MethodsDriver:
    """Generates text with a program of ``prefill`` (the prompt, one call) and ``decode`` (one token a call) methods
    through :class:`et_tensorrt.Runner`, greedy or sampled, as TextLLMRunner does with ``forward``: the prompt's
    tokens as they are (no BOS added), the position kept across :meth:`generate` calls until :meth:`reset`, stopping
    at an id of ``get_eos_ids`` or the context's end. Both methods bind the one KV cache in the delegate
    (docs/stateful-decode.md). Takes a HF ``tokenizer.json`` (the ``tokenizers`` package)."""

    def __init__(self, model, tokenizer, data_path=None):
        from tokenizers import Tokenizer

        from ..format.pte_tables import read_tables
        from ..runtime.runner import Runner

        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        missing = missing_methods(pte, ("prefill", "decode"))
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an LLM program of prefill and decode methods: it has no method(s) "
                f"{', '.join(missing)}; lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
            )
        self._tokenizer = Tokenizer.from_file(os.fspath(tokenizer))
        self._runner = Runner(pte, data_path=data_path)
        self._context, eos = _constants(pte, "get_max_context_len", "get_eos_ids")
        self._context, self._eos = int(self._context[0]), {int(t) for t in eos}
        # ExecuTorch's convention (extension/llm/runner): a one-element second input is the start position, else
        # the positions of the tokens (HF's cache_position)
        prefill = next(plan for plan in read_tables(pte).plans if plan.name == "prefill")
        self._start_only = len(prefill.inputs) > 1 and math.prod(prefill.values[prefill.inputs[1]].sizes) == 1
        self._position = 0
        self._bytes = _byte_decoder()
        self.log = ""

    def _inputs(self, tokens: list[int]) -> list:
        import torch

        ids = torch.tensor([tokens], dtype=torch.long)
        start = self._position
        if self._start_only:
            return [ids, torch.tensor([start], dtype=torch.long)]
        return [ids, torch.arange(start, start + len(tokens), dtype=torch.long)]

    def _piece(self, token: int) -> bytes:
        text = self._tokenizer.id_to_token(token) or ""
        return bytes(self._bytes[c] for c in text if c in self._bytes)

    def generate(self, prompt: str, max_new_tokens: int = 16, temperature: float = 0.0, on_token=None) -> Generation:
        """``on_token``: called with each piece of text (bytes) as it is generated."""
        import time

        _check_max_new_tokens(max_new_tokens)
        tokens = self._tokenizer.encode(prompt, add_special_tokens=False).ids
        why = cannot_start(self._position, len(tokens), self._context)
        if why:
            raise RunnerError(f"cannot generate: {why}")
        asked, max_new_tokens = max_new_tokens, min(max_new_tokens, self._context - self._position - len(tokens))
        began = time.perf_counter()
        logits = self._runner.run(self._inputs(tokens), method="prefill")[0]
        self._position += len(tokens)
        out, generated, steps = [], 0, []
        while generated < max_new_tokens:
            token = next_token(logits, temperature)
            generated += 1
            if token in self._eos:
                break
            out.append(self._piece(token))
            if on_token is not None:
                on_token(out[-1])
            if generated == max_new_tokens:
                break
            logits = self._runner.run(self._inputs([token]), method="decode")[0]
            steps.append(self._runner.last_plan.bytes_copied)
            self._position += 1
        counted = "every copy of the decode call, the method boundary's included (Runner's placement plan)"
        seconds = time.perf_counter() - began
        stopped = STOP_EOS if token in self._eos else STOP_CONTEXT if max_new_tokens < asked else STOP_MAX_NEW_TOKENS
        return Generation(
            b"".join(out), len(tokens), generated, seconds, tuple(steps), counted if steps else "", stopped=stopped
        )

    def reset(self) -> None:
        """The next ``generate`` starts at position 0 (the cache rows it leaves are masked, not cleared)."""
        self._position = 0


def next_token(logits, temperature: float = 0.0) -> int:
    """The token after the last position of ``logits``: the likeliest (``temperature`` 0), else drawn from their
    softmax at ``temperature``."""
    import torch

    last = logits.reshape(-1, logits.shape[-1])[-1].float()
    if temperature > 0:
        return int(torch.multinomial(torch.softmax(last / temperature, -1), 1))
    return int(last.argmax())


def _constants(pte: bytes, *names: str) -> list[list]:
    """What the program's constant methods return (ints: ExecuTorch's own runtime reads them; Runner runs tensors)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return [list(program.load_method(name).execute([])) for name in names]
