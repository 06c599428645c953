"""Text generation with ExecuTorch's own C++ ``TextLLMRunner`` on a program lowered with et_tensorrt.

``TextLLMRunner`` (``executorch.extension.llm.runner``) links the same ``libexecutorch.so`` our backend is
registered in (``import et_tensorrt``), so it runs our delegate with no glue. It reads the model's facts from
constant methods (:func:`llm_methods`: lower with ``constant_methods=llm_methods(...)``), calls ``forward``
with the tokens and their start position, and keeps the position across ``generate`` calls until ``reset``;
the KV cache stays in the delegate the whole time (docs/stateful-decode.md).

It prints the text it generates to the process's stdout from C++ (its Python token callback raises
``UnicodeDecodeError`` on the partial UTF-8 tokens a byte-level tokenizer yields), so :class:`TextGenerator`
reads what it prints through the file descriptor.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import RunnerError

# What TextLLMRunner reads from the program (ExecuTorch's extension/llm/runner), besides "forward".
REQUIRED_METHODS = (
    "get_max_seq_len",
    "get_max_context_len",
    "get_vocab_size",
    "get_bos_id",
    "get_eos_ids",
    "use_kv_cache",
    "enable_dynamic_shape",
)


def missing_methods(pte: bytes) -> list[str]:
    """The methods TextLLMRunner needs that ``pte`` lacks."""
    from .inspection import inspect_bytes

    names = {m.name for m in inspect_bytes(pte).methods}
    return [n for n in ("forward", *REQUIRED_METHODS) if n not in names]


def llm_methods(
    *,
    max_seq_len: int,
    vocab_size: int,
    bos_id: int,
    eos_ids: Sequence[int],
    max_context_len: int | None = None,
    use_kv_cache: bool = True,
    enable_dynamic_shape: bool = True,
) -> dict:
    """The constant methods ExecuTorch's LLM runners read (as ``export_llama`` writes them)."""
    methods = {
        "get_max_seq_len": max_seq_len,
        "get_max_context_len": max_context_len or max_seq_len,
        "get_vocab_size": vocab_size,
        "get_bos_id": bos_id,
        "get_eos_ids": list(eos_ids),
        "use_kv_cache": use_kv_cache,
        "enable_dynamic_shape": enable_dynamic_shape,
    }
    assert set(methods) == set(REQUIRED_METHODS)
    return methods


@dataclass
class Generation:
    text: bytes  # what the runner printed: the prompt is not echoed; bytes, as a random model's need not be UTF-8
    prompt_tokens: int
    generated_tokens: int
    seconds: float  # the runner's own inference time (prefill + decode)

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else 0.0


def _reasons(log: str) -> str:
    """ExecuTorch's error lines in ``log`` (why a load or call failed: the exception only says that it did)."""
    lines = [line.split("] ", 1)[-1] for line in log.splitlines() if line.startswith("E ")]
    return f" ({'; '.join(lines[-3:])})" if lines else ""


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


class TextGenerator:
    """``TextLLMRunner`` of one ``.pte`` and tokenizer file (a HF ``tokenizer.json``, tiktoken or SentencePiece)."""

    def __init__(
        self, model: str | os.PathLike, tokenizer: str | os.PathLike, data_path: str | os.PathLike | None = None
    ):
        """``data_path``: the .ptd holding the program's named data (a lowering with ``named_data="ptd"``)."""
        import et_tensorrt  # noqa: F401  (registers the backend in libexecutorch.so)

        files = (("program", model), ("tokenizer", tokenizer), *((("data file", data_path),) if data_path else ()))
        for what, path in files:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"no {what} at {os.fspath(path)!r}")
        if data_path:  # ExecuTorch reads a .ptd's key table unverified: a damaged one is refused here, by name
            from et_tensorrt import _C

            _C.check_data_file(os.fspath(data_path), os.fspath(model))
        with open(model, "rb") as f:
            missing = missing_methods(f.read())
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an LLM program TextLLMRunner can drive: it has no method(s) "
                f"{', '.join(missing)}; lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
            )
        with _Captured(2) as log:  # the runner (and its tokenizers, at import) log what they read: kept in .log
            from executorch.extension.llm.runner import TextLLMRunner

            try:
                data = os.fspath(data_path) if data_path else None
                self._runner = TextLLMRunner(os.fspath(model), os.fspath(tokenizer), data)
                failure = None
            except RuntimeError as exc:
                failure = exc
        self.log = log.text.decode("utf-8", "replace")  # what ExecuTorch and the runner logged since load
        if failure is not None:
            raise RunnerError(f"TextLLMRunner could not load {os.fspath(model)}: {failure}{_reasons(self.log)}")

    def generate(self, prompt: str, max_new_tokens: int = 16, temperature: float = 0.0) -> Generation:
        """Continues the sequence (the runner keeps its position; :meth:`reset` starts over)."""
        from executorch.extension.llm.runner import GenerationConfig

        config = GenerationConfig()
        config.max_new_tokens = max_new_tokens
        config.temperature = temperature
        config.echo = False
        stats = []
        with _Captured(1) as out, _Captured(2) as log:
            try:
                self._runner.generate(prompt, config, stats_callback=stats.append)
                failure = None
            except RuntimeError as exc:
                failure = exc
        self.log += log.text.decode("utf-8", "replace")
        if failure is not None:
            # ExecuTorch logs why (a delegate's refusal, a missing method) on stderr; the exception only says
            # that it failed
            raise RunnerError(f"TextLLMRunner could not generate: {failure}{_reasons(self.log)}")
        text = out.text
        if not stats:
            raise RunnerError("TextLLMRunner reported no statistics (its log: TextGenerator.log)")
        s = stats[-1]
        seconds = (s.inference_end_ms - s.inference_start_ms) / 1e3
        # the runner ends with one "PyTorchObserver {json stats}" line of its own
        text = b"\n".join(line for line in text.split(b"\n") if not line.startswith(b"PyTorchObserver "))
        return Generation(text.rstrip(b"\n"), s.num_prompt_tokens, s.num_generated_tokens, seconds)

    def reset(self) -> None:
        """The next ``generate`` starts at position 0 (the cache rows it leaves are masked, not cleared)."""
        self._runner.reset()
