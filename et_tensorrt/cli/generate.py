"""``generate``: text from a prompt, printed as it is generated (et_tensorrt.llm). A program of one ``forward``
method is run by ExecuTorch's C++ TextLLMRunner, one of ``prefill`` and ``decode`` methods by
et_tensorrt.llm.MethodsDriver, a multimodal one (``token_embedding``, ``text_decoder``, an encoder: ``--image`` or
``--audio``) by ExecuTorch's C++ MultimodalRunner, one of ``encoder`` and ``decoder`` methods (a transcript of
``--audio``, or a text encoder-decoder's output) by et_tensorrt.llm.Transcriber. A file that is none of these is
refused from its flatbuffer's method names, before torch or ExecuTorch load (seconds)."""

from __future__ import annotations

import codecs
import statistics
import sys

from .common import EXIT_OK, CliError, UsageError, backend_log, load_torch, quiet_native_stderr
from .data_file import data_file
from .progress import notice


def _runner_kind(pte: str) -> str:
    """ "TextLLMRunner", "MethodsDriver", "MultimodalRunner" or "Transcriber" (et_tensorrt.llm.runner.opening, the
    choice the Python API makes too), from the method names alone; CliError for a program none can run."""
    from .. import inspection
    from ..errors import RunnerError
    from ..format.pte_tables import PteTableError
    from ..llm.runner.driver_choice import driver_kind

    try:
        return driver_kind(inspection.read_flatbuffer(pte), pte)
    except (inspection.NotAProgramError, PteTableError, RunnerError) as e:
        raise CliError(str(e)) from e


class _Text:
    """The text on stdout as it is generated: the prompt when the first piece comes (the load's notices, such as
    the fallback to PyTorch, are on stderr before it), then each piece (bytes) at once, a UTF-8 character split
    across pieces waiting for its end. Notices that come while it streams are held and shown once it ends, on a
    line of their own: never inside the text."""

    def __init__(self, prompt: str, notes):
        self._prompt, self._notes, self._started = prompt, notes, False
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def _start(self) -> None:
        if not self._started:
            self._started = True
            sys.stdout.write(self._prompt)
            self._notes.hold_notes()

    def piece(self, piece: bytes) -> None:
        self._start()
        sys.stdout.write(self._decoder.decode(piece))
        sys.stdout.flush()

    def end(self) -> None:
        """The text is done, its line ended (a generation of no token still shows its prompt); the held notices
        follow it."""
        self._start()
        sys.stdout.write(self._decoder.decode(b"", final=True) + "\n")
        sys.stdout.flush()
        self._notes.show_held()


def _bytes_line(steps, counted: str) -> str:
    if not steps:
        return "bytes moved per decode step: not measured (no decode step, or no et_tensorrt delegate call seen)"
    return (
        f"bytes moved per decode step: median {statistics.median(steps):,.0f} B (min {min(steps):,} B, max "
        f"{max(steps):,} B, {len(steps)} step(s)); counted: {counted}"
    )


_TAKES = {"MultimodalRunner": ("image", "audio"), "Transcriber": ("audio",)}  # the media each driver takes
_TAKES_WHAT = {
    "image": "a vision-language program (token_embedding, text_decoder, vision_encoder: export_multimodal)",
    "audio": "a speech encoder-decoder (export_encoder_decoder) or an audio LLM (export_multimodal)",
}
_IS = {
    "TextLLMRunner": "a text LLM",
    "MethodsDriver": "a text LLM",
    "MultimodalRunner": "a multimodal LLM",
    "Transcriber": "an encoder-decoder",
}


def cmd_generate(args) -> int:
    kind = _runner_kind(args.pte)
    media = {flag: getattr(args, flag) for flag in ("image", "audio") if getattr(args, flag) is not None}
    for flag in media:
        if flag not in _TAKES.get(kind, ()):
            raise CliError(f"--{flag} takes {_TAKES_WHAT[flag]}; {args.pte} is {_IS[kind]} ({kind})")
    if args.prompt is None and not (kind == "Transcriber" and media):
        raise CliError("give --prompt (the text to continue)" + (", or --audio" if kind == "Transcriber" else ""))
    data = data_file(args.pte, args.data)
    load_torch(args.debug)
    from ..errors import InputShapeError, OptionError, RunnerError
    from ..llm.runner.opening import driver_class
    from ..llm.sampling import Sampling

    asked = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
    try:  # judged before any work (top-k's TensorRT limit)
        Sampling(**{k: v for k, v in asked.items() if v is not None})
    except ValueError as e:
        raise UsageError(str(e)) from e
    if kind in ("MultimodalRunner", "Transcriber"):  # their samplers take a temperature, no top-k/top-p or seed
        refused = [f"--{k.replace('_', '-')}" for k, v in (*asked.items(), ("seed", args.seed)) if v is not None]
        refused = [flag for flag in refused if flag != "--temperature"]
        if refused:
            raise UsageError(f"{', '.join(refused)}: {kind} samples with a temperature only; leave them out")
        options = {"temperature": args.temperature or 0.0, **media}
    else:
        options = {"seed": args.seed, **asked}

    notice(f"loading {args.pte} ({kind}) ...")
    limit = args.max_new_tokens or (None if kind == "Transcriber" and media else 16)
    try:
        with quiet_native_stderr(args.debug):  # ExecuTorch's load-time log lines (its errors arrive as exceptions)
            generator = driver_class(kind)(args.pte, args.tokenizer, data_path=data)
        with backend_log(args.debug) as notes:  # the drivers' Runner notes where it runs ("runs with PyTorch on cpu")
            text = _Text("" if kind == "Transcriber" else args.prompt, notes)
            try:
                result = generator.generate(args.prompt or "", max_new_tokens=limit, on_token=text.piece, **options)
            finally:
                text.end()
    except (RunnerError, InputShapeError, OptionError) as e:
        raise CliError(str(e)) from e
    if args.debug:
        print(generator.log, end="")
    by = {
        "TextLLMRunner": "TextLLMRunner",
        "MultimodalRunner": "MultimodalRunner",
        "MethodsDriver": "et_tensorrt.llm.MethodsDriver (prefill and decode methods)",
        "Transcriber": "et_tensorrt.llm.Transcriber (the encoder once, the decoder a token a call)",
    }[kind]
    prompt = "decoder prompt" if kind == "Transcriber" else "prompt"
    how = f"\ntokens: {result.sampling}" if result.sampling else ""
    print(
        f"\n{result.prompt_tokens} {prompt} token(s), {result.generated_tokens} generated in {result.seconds:.3f} s "
        f"({result.tokens_per_second:.0f} tokens/s) by {result.by or by}; the KV cache stays in the "
        f"delegate{how}"
    )
    if result.stopped:
        print(f"stopped at {result.stopped}")
    print(_bytes_line(result.step_bytes, result.bytes_counted))
    return EXIT_OK
