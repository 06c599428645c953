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
from .constants import SAMPLING_METHODS, _method_names, missing_methods
from .tokenizer_identity import check_tokenizer


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
    generated_tokens: int  # every token chosen, the prompt call's first one included (and an EOS that ended it)
    seconds: float  # the runner's own inference time (prefill + decode)
    # Bytes each decode step (one token) moved between host and device, one entry per step; empty when not
    # measured. `bytes_counted` says what the numbers include.
    step_bytes: tuple[int, ...] = ()
    bytes_counted: str = ""
    # Bytes of state each decode step copied back into the delegate's states (0: the KV cache updated in place);
    # empty when not measured.
    state_bytes: tuple[int, ...] = ()
    stopped: str = ""  # why generation stopped: STOP_EOS, STOP_MAX_NEW_TOKENS or STOP_CONTEXT ("" not known)
    by: str = ""  # who generated it: TextLLMRunner, or MethodsDriver and the methods it called
    sampling: str = ""  # how each token was chosen (greedy or the sampler and its seed) and where

    @property
    def ended_at_eos(self) -> bool:
        """Whether the last generated token is an end-of-sequence id (counted; its text not in ``text``)."""
        return self.stopped == STOP_EOS

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


def _stopped(messages: list[tuple[str, str]], ended: bool, asked: int) -> str:
    """Why TextLLMRunner stopped: at an end-of-sequence token (``ended``), else from what it logged: it resolves
    max_new_tokens against the context left (an info line) and generates that many."""
    if ended:
        return STOP_EOS
    resolved = [int(m.group(1)) for _, text in messages if (m := _RESOLVED.search(text))]
    if not resolved:
        return ""
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


class TextGenerator:
    """``TextLLMRunner`` of one ``.pte`` and tokenizer file (a HF ``tokenizer.json``, tiktoken or SentencePiece). A
    program of ``prefill`` and ``decode`` methods (:func:`export_prefill_decode`), or one that chooses its token in
    the engine (``export_causal_lm(sampling=...)``: TextLLMRunner reads float logits only), is driven by
    :class:`MethodsDriver` instead (an ``encoder``/``decoder`` program: :class:`Transcriber`).

    Sampling: ExecuTorch's TextLLMRunner (executorch 1.5.1) samples with a ``Sampler`` it seeds from the clock
    (``std::time``), and neither its ``GenerationConfig`` nor its Python binding takes a seed; it calls ``forward``
    with the tokens and the position alone, so no seed or counter can reach the program either. So a sampled
    sequence (``temperature > 0``) of a one-``forward`` program is generated by :class:`MethodsDriver` calling that
    same ``forward`` (the path that takes a seed: the same text for the same seed), greedy ones by TextLLMRunner."""

    def __new__(cls, model, tokenizer, data_path=None):
        if cls is TextGenerator and os.path.isfile(model):  # the driver the command line chooses too
            from .driver_choice import METHODS_DRIVER, driver_kind

            with open(model, "rb") as f:
                pte = f.read()
            try:
                kind = driver_kind(pte, os.fspath(model))
            except RunnerError:  # __init__ refuses it, saying what a one-forward program lacks
                kind = None
            if kind == METHODS_DRIVER:
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
        check_tokenizer(pte, model, tokenizer)
        self._files = (model, tokenizer, data_path)
        self._driver: MethodsDriver | None = None  # generates the sampled sequences (above)
        self._holder: str | None = None  # which of the two holds the current sequence: "runner", "driver", None
        self.log = ""
        self._runner = self._load_runner()
        (eos,) = _constants(pte, "get_eos_ids")
        self._ends = _token_texts(tokenizer, [int(t) for t in eos])

    def _load_runner(self):
        model, tokenizer, data_path = self._files
        with _Captured(2) as log:  # the runner (and its tokenizers, at import) log what they read: kept in .log
            from executorch.extension.llm.runner import TextLLMRunner

            with _ExecuTorchLog() as logged:  # after the import: its Python bindings install their log function
                try:
                    data = os.fspath(data_path) if data_path else None
                    runner = TextLLMRunner(os.fspath(model), os.fspath(tokenizer), data)
                    failure = None
                except RuntimeError as exc:
                    failure = exc
        self.log += log.text.decode("utf-8", "replace")  # what ExecuTorch and the runner logged since load
        if failure is not None:
            raise _failed("TextLLMRunner", f"load {os.fspath(model)}", failure, logged.errors)
        return runner

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 16,
        temperature: float | None = None,
        on_token=None,
        *,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        """Continues the sequence (:meth:`reset` starts over). Greedy (``temperature`` 0, the default) by
        TextLLMRunner; sampled (:class:`~et_tensorrt.llm.sampling.Sampling`'s ``temperature``, ``top_k``, ``top_p``)
        by :class:`MethodsDriver` with ``seed`` (default: drawn from torch's generator), which needs a HF
        ``tokenizer.json``; with another tokenizer and no seed, TextLLMRunner's own sampler (clock-seeded, top-p
        0.9: not reproducible). ``on_token``: called with each piece of text (bytes) as it is generated (from
        another thread for TextLLMRunner)."""
        sampling = _sampling(None, temperature, top_k, top_p)
        _seed(seed, sampling)  # checked now, whichever runs
        if not sampling.greedy or self._holder == "driver":
            driver = self._sampling_driver(seed)
            if driver is not None:
                if self._holder == "runner":
                    raise RunnerError(
                        "TextLLMRunner generated this sequence greedily and holds its KV cache, which the seeded "
                        "sampler (MethodsDriver over forward: TextLLMRunner takes no seed) cannot read; reset() first"
                    )
                self._holder = "driver"
                return driver.generate(
                    prompt, max_new_tokens, temperature, on_token, top_k=top_k, top_p=top_p, seed=seed
                )
        self._holder = "runner"
        return self._generate(prompt, max_new_tokens, sampling, on_token)

    def _sampling_driver(self, seed) -> MethodsDriver | None:
        """The :class:`MethodsDriver` of this program, made once: None when the tokenizer is not a HF
        ``tokenizer.json`` and no seed was asked for (TextLLMRunner's own sampler runs then)."""
        if self._driver is None:
            try:
                from tokenizers import Tokenizer

                Tokenizer.from_file(os.fspath(self._files[1]))
            except Exception as exc:  # noqa: BLE001 - the tokenizers package reads HF tokenizer.json files only
                if seed is not None:
                    raise RunnerError(
                        f"seeded sampling drives this program through et_tensorrt.llm.MethodsDriver, which reads a HF "
                        f"tokenizer.json, and {os.fspath(self._files[1])} is not one ({exc}); TextLLMRunner samples "
                        "with a clock-seeded sampler and takes no seed (executorch 1.5.1): generate greedily, or "
                        "without a seed (not reproducible), or with the model's tokenizer.json"
                    ) from exc
                return None
            self._driver = MethodsDriver(*self._files)
        return self._driver

    def _generate(self, prompt: str, max_new_tokens: int, sampling, on_token) -> Generation:
        from executorch.extension.llm.runner import GenerationConfig

        _check_max_new_tokens(max_new_tokens)
        if not prompt:  # TextLLMRunner takes "" as "continue a prefill() of its own", which this class does not expose
            raise RunnerError(f"cannot generate: {cannot_start(0, 0, 1)}")
        config = GenerationConfig()
        config.max_new_tokens = max_new_tokens
        config.temperature = sampling.temperature
        config.echo = False
        text, ended, s, plans, logged = _native_generate(
            self,
            "TextLLMRunner",
            lambda stats: self._runner.generate(prompt, config, stats_callback=stats),
            on_token,
            self._ends,
        )
        seconds = (s.inference_end_ms - s.inference_start_ms) / 1e3
        # TextLLMRunner counts its decode calls: the prompt's call chose the first token before them
        steps = self._decode_step_bytes(plans, s.num_generated_tokens)
        counted = "the copies the et_tensorrt delegates made (their placement plans); ExecuTorch's own copies at the "
        counted += "method boundary are not seen from here"
        how = str(sampling) + ("" if sampling.greedy else ", TextLLMRunner's own sampler (seeded from the clock)")
        return Generation(
            text, s.num_prompt_tokens, s.num_generated_tokens + 1, seconds, steps, counted if steps else "",
            stopped=_stopped(logged, ended, max_new_tokens), by="TextLLMRunner",
            sampling=how + "; chosen on the host from the logits",
        )  # fmt: skip

    def _decode_step_bytes(self, plans, steps: int) -> tuple[int, ...]:
        """Bytes each decode step's forward call moved: the recorded delegate plans, ``self._delegates`` a call, the
        last ``steps`` calls (the first calls took the prompt)."""
        calls = [plans[i : i + self._delegates] for i in range(0, len(plans), self._delegates or 1)]
        if not self._delegates or steps < 1 or len(calls) < steps:
            return ()
        return tuple(sum(p.bytes_copied for p in call) for call in calls[len(calls) - steps :])

    def reset(self) -> None:
        """The next ``generate`` starts at position 0 (the cache rows it leaves are masked, not cleared)."""
        self._runner.reset()
        if self._driver is not None:
            self._driver.reset()
        self._holder = None


def _token_texts(tokenizer, ids: list[int]) -> tuple[bytes, ...]:
    """What TextLLMRunner prints for each of ``ids`` (its EOS tokens), read with ExecuTorch's own C++ tokenizers
    (pytorch_tokenizers: the runner's, for every format it reads); empty when none reads the file."""
    try:
        import pytorch_tokenizers as pt
    except ImportError:
        return ()
    path = os.fspath(tokenizer)
    kinds = ("CppHFTokenizer",) if path.endswith(".json") else ("CppTiktoken", "CppSPTokenizer", "CppLlama2cTokenizer")
    for kind in kinds:
        with _Captured(2):
            try:
                reader = getattr(pt, kind)()
                reader.load(path)
                return tuple(reader.decode(i).encode("utf-8") for i in ids)
            except Exception:  # noqa: BLE001 - not this format: the next one
                continue
    return ()


def _native_generate(owner, runner: str, generate, on_token, ends=()) -> tuple[bytes, bool, object, list, list]:
    """(the text, whether it ended at an end-of-sequence token, the last ``Stats``, the et_tensorrt delegate plans
    recorded, what ExecuTorch logged as (level, text)) of ``generate(stats_callback)``, a call of ExecuTorch's C++
    runner ``runner``: what it prints streamed to ``on_token`` (without its ending: ``ends``, each EOS token's text,
    and its statistics line), its log appended to ``owner.log``; a failure is one RunnerError saying why
    (:func:`_failed`)."""
    from ..runtime.runner import record_plans

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
    """Generates text with an LLM program through :class:`et_tensorrt.Runner`, as TextLLMRunner does with ``forward``:
    ``prefill`` (the prompt, one call) then ``decode`` (one token a call), or ``forward`` for both; the prompt's tokens
    as they are (no BOS added), the position kept across :meth:`generate` calls until :meth:`reset`, stopping at an id
    of ``get_eos_ids`` or the context's end. The methods bind the one KV cache in the delegate
    (docs/stateful-decode.md). A program that chooses its token (``export_causal_lm(sampling=...)``) feeds each call's
    token to the next as it is; one that returns logits has the host choose from them with the same sampler and draws
    (:mod:`et_tensorrt.llm.sampling`). Takes a HF ``tokenizer.json`` (the ``tokenizers`` package)."""

    def __init__(self, model, tokenizer, data_path=None):
        from tokenizers import Tokenizer

        from ..runtime.runner import Runner

        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        names = _method_names(pte)
        decoding = ("prefill", "decode") if {"prefill", "decode"} <= names else ("forward",)
        missing = missing_methods(pte, decoding)
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an LLM program of prefill and decode methods, nor of forward: it has no "
                f"method(s) {', '.join(missing)}; lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
            )
        check_tokenizer(pte, model, tokenizer)
        self._tokenizer = Tokenizer.from_file(os.fspath(tokenizer))
        self._runner = Runner(pte, data_path=data_path)
        self.signature, self._context, self._eos = _program_facts(pte, decoding, names)
        for method in dict.fromkeys((self.signature.prefill, self.signature.decode)):
            # loaded now, as TextLLMRunner's load() loads its method: a generation's seconds are its calls'
            self._runner.load_method(method)
        self._position = 0
        self._bytes = _byte_decoder()
        self.log = ""

    def _piece(self, token: int) -> bytes:
        text = self._tokenizer.id_to_token(token) or ""
        return bytes(self._bytes[c] for c in text if c in self._bytes)

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 16,
        temperature: float | None = None,
        on_token=None,
        *,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        """``temperature``/``top_k``/``top_p``: :class:`~et_tensorrt.llm.sampling.Sampling`'s (its defaults; a
        program that chooses its token samples as it was exported to, and these, when given, must say the same).
        ``seed``: the draws' (the same seed, the same text, on every machine); default one drawn from torch's
        generator (``torch.manual_seed`` makes it repeat). ``on_token``: called with each piece of text (bytes) as
        it is generated."""
        import time

        from .token_loop import TokenLoop

        _check_max_new_tokens(max_new_tokens)
        sampling = _sampling(self.signature, temperature, top_k, top_p)
        seed = _seed(seed, sampling)
        tokens = self._tokenizer.encode(prompt, add_special_tokens=False).ids
        why = cannot_start(self._position, len(tokens), self._context)
        if why:
            raise RunnerError(f"cannot generate: {why}")
        asked, max_new_tokens = max_new_tokens, min(max_new_tokens, self._context - self._position - len(tokens))
        loop = TokenLoop(self._runner, self.signature, sampling, seed)
        began = time.perf_counter()
        token = loop.first(tokens, self._position)
        self._position += len(tokens)
        out, generated, steps, ended = [], 0, [], False
        while True:
            value = int(token)  # the host reads the token's 8 bytes: to stream its text and see the end
            generated += 1
            if value in self._eos:
                ended = True
                break
            out.append(self._piece(value))
            if on_token is not None:
                on_token(out[-1])
            if generated == max_new_tokens:
                break
            token = loop.next(token, self._position)
            steps.append(self._runner.last_plan.bytes_copied)
            self._position += 1
        counted = "every copy of the decode call, the method boundary's included (Runner's placement plan)"
        seconds = time.perf_counter() - began
        where = "chosen in the program" if self.signature.head is not None else "chosen on the host from the logits"
        how = str(sampling) + ("" if sampling.greedy else f", seed {seed}") + f"; {where}"
        stopped = STOP_EOS if ended else STOP_CONTEXT if max_new_tokens < asked else STOP_MAX_NEW_TOKENS
        return Generation(
            b"".join(out), len(tokens), generated, seconds, tuple(steps), counted if steps else "",
            stopped=stopped, by=f"et_tensorrt.llm.MethodsDriver ({self.signature.prefill}/"
            f"{self.signature.decode} methods)", sampling=how,
        )  # fmt: skip

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


_LONG = 4  # ExecuTorch's ScalarType::Long


def _program_facts(pte: bytes, decoding: tuple[str, ...], names: set[str]):
    """(:class:`~.token_loop.Signature`, the context length, the EOS ids) of an LLM program, from its plans and its
    constant methods."""
    from ..format.pte_tables import read_tables
    from .sampling import CHOICE_INPUTS, Sampling
    from .token_loop import Signature

    prefill, decode = (decoding * 2)[:2]
    plans = {plan.name: plan for plan in read_tables(pte).plans}
    first = plans[prefill]
    # ExecuTorch's convention (extension/llm/runner): a one-element second input is the start position, else
    # the positions of the tokens (HF's cache_position)
    start_only = len(first.inputs) > 1 and math.prod(first.values[first.inputs[1]].sizes) == 1
    context, eos, dynamic = _constants(pte, "get_max_context_len", "get_eos_ids", "enable_dynamic_shape")
    head, choices, ranks, vocab = None, False, 0, 0
    if set(SAMPLING_METHODS) <= names:
        temperature, top_k, top_p = (values[0] for values in _constants(pte, *SAMPLING_METHODS))
        head = Sampling(float(temperature), int(top_k), float(top_p), logits=len(plans[decode].outputs) > 1)
        choices = not head.greedy and len(plans[decode].inputs) == 2 + len(CHOICE_INPUTS)
        if choices:  # the request's temperature, top-k and top-p are inputs: top-k at most what the head ranks
            vocab = int(_constants(pte, "get_vocab_size")[0][0])
            ranks = head.candidates(vocab)
    elif plans[decode].outputs and plans[decode].values[plans[decode].outputs[0]].scalar_type == _LONG:
        raise RunnerError(
            f"the {decode} method returns integers (a chosen token?) but the program does not say how it chooses "
            "them: lower it with constant_methods including et_tensorrt.llm.sampling.sampling_methods(...), as "
            "export_causal_lm(..., sampling=...) makes them"
        )
    whole = prefill == "prefill" or bool(dynamic[0])
    signature = Signature(prefill, decode, start_only, whole, head, choices, ranks, vocab)
    return signature, int(context[0]), {int(t) for t in eos}


def _sampling(signature, temperature, top_k, top_p):
    """The :class:`Sampling` a generate call asks for: on a program whose sampling head takes its choices as inputs
    (``signature.choices``), the request, the program's own choices its defaults, top-k checked against what the head
    ranks; on one whose head fixed them at export, that head (a request that differs is refused); else the request
    with Sampling's defaults (temperature 0: greedy)."""
    from .sampling import TOPK_MAX_K, Sampling

    head = signature.head if signature is not None else None
    asked = {k: v for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if v is not None}
    if head is None:
        return Sampling(**asked)
    if signature.choices and not head.greedy:
        wanted = Sampling(**{"temperature": head.temperature, "top_k": head.top_k, "top_p": head.top_p, **asked})
        if not wanted.greedy and signature.ranks and (wanted.top_k or signature.vocab) > signature.ranks:
            whole = f" (the whole vocabulary of {signature.vocab:,} tokens)" if not wanted.top_k else ""
            asked_for = f"top_k={wanted.top_k}{whole}"
            raise RunnerError(
                f"{asked_for}: this program's sampling head ranks the {signature.ranks} likeliest tokens (its top_k "
                f"at export: TensorRT's TopK takes its k when the engine is built), so a request asks top_k 1 .. "
                f"{signature.ranks}; or export the program with a larger top_k (at most {TOPK_MAX_K})"
            )
        return Sampling(wanted.temperature, wanted.top_k, wanted.top_p, logits=head.logits)
    differs = {k: v for k, v in asked.items() if getattr(head, k) != v and not (head.greedy and k != "temperature")}
    if differs:
        wanted = ", ".join(f"{k}={v!r}" for k, v in differs.items())
        raise RunnerError(
            f"this program chooses its token in the engine ({head}, chosen at export): it cannot sample with "
            f"{wanted}; leave them out, or export another program (export_causal_lm(..., sampling=...): a sampled "
            "head takes temperature, top-k and top-p per request; sampling=None returns the logits, which any "
            "sampling reads)"
        )
    return head


def _seed(seed, sampling) -> int:
    """The draws' seed: the one given (an int64), else one drawn from torch's default generator."""
    import torch

    if seed is None:
        return 0 if sampling.greedy else int(torch.randint(0, 2**62, (1,)))
    if isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**63:
        raise ValueError(f"seed is an integer that fits int64, not {seed!r}")
    return seed


def _constants(pte: bytes, *names: str) -> list[list]:
    """What the program's constant methods return (ints: ExecuTorch's own runtime reads them; Runner runs tensors)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return [list(program.load_method(name).execute([])) for name in names]
