"""``generate``: text from a prompt, printed as it is generated (et_tensorrt.llm). A program of one ``forward``
method is run by ExecuTorch's C++ TextLLMRunner, one of ``prefill`` and ``decode`` methods by
et_tensorrt.llm.MethodsDriver, a multimodal one (``token_embedding``, ``text_decoder``, an encoder: ``--image`` or
``--audio``) by ExecuTorch's C++ MultimodalRunner. A file that is none of these is refused from its flatbuffer's
method names, before torch or ExecuTorch load (seconds)."""

from __future__ import annotations

import codecs
import statistics
import sys

from .common import EXIT_OK, CliError, backend_log, load_torch, quiet_native_stderr
from .data_file import data_file
from .progress import notice


def _runner_kind(pte: str) -> str:
    """ "TextLLMRunner", "MethodsDriver" or "MultimodalRunner", from the method names alone; CliError for a program
    none can run."""
    from .. import inspection
    from ..format.pte_tables import PteTableError, method_names
    from ..llm.constants import is_multimodal, missing_methods

    try:
        flatbuffer = inspection.read_flatbuffer(pte)
        names = set(method_names(flatbuffer))
    except (inspection.NotAProgramError, PteTableError) as e:
        raise CliError(str(e)) from e
    if is_multimodal(names):
        missing = missing_methods(flatbuffer, ("token_embedding", "text_decoder"))
        if missing:
            raise CliError(f"{pte} lacks the method(s) {', '.join(missing)} MultimodalRunner reads: export it with "
                           "et_tensorrt.llm.export_multimodal")  # fmt: skip
        return "MultimodalRunner"
    two = {"prefill", "decode"} <= names and "forward" not in names
    missing = missing_methods(flatbuffer, ("prefill", "decode") if two else ("forward",))
    if missing:
        raise CliError(
            f"{pte} is not an LLM program `generate` can run: it has no method(s) {', '.join(missing)} (it has "
            f"{', '.join(sorted(names)) or 'none'}); lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
        )
    return "MethodsDriver" if two else "TextLLMRunner"


def _show_pieces():
    """A callback printing each piece (bytes) at once; a UTF-8 character split across pieces waits for its end."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def show(piece: bytes) -> None:
        sys.stdout.write(decoder.decode(piece))
        sys.stdout.flush()

    return show


def _bytes_line(steps, counted: str) -> str:
    if not steps:
        return "bytes moved per decode step: not measured (no decode step, or no et_tensorrt delegate call seen)"
    return (
        f"bytes moved per decode step: median {statistics.median(steps):,.0f} B (min {min(steps):,} B, max "
        f"{max(steps):,} B, {len(steps)} step(s)); counted: {counted}"
    )


def cmd_generate(args) -> int:
    kind = _runner_kind(args.pte)
    media = {"image": args.image, "audio": args.audio} if kind == "MultimodalRunner" else {}
    for flag in ("image", "audio"):
        if getattr(args, flag) and flag not in media:
            raise CliError(f"--{flag} takes a multimodal program (token_embedding, text_decoder and an encoder: "
                           f"et_tensorrt.llm.export_multimodal); {args.pte} is a text LLM ({kind})")  # fmt: skip
    data = data_file(args.pte, args.data)
    load_torch(args.debug)
    from ..errors import InputShapeError, OptionError, RunnerError
    from ..llm import MultimodalGenerator, TextGenerator

    notice(f"loading {args.pte} ({kind}) ...")
    try:
        with quiet_native_stderr(args.debug):  # ExecuTorch's load-time log lines (its errors arrive as exceptions)
            make = MultimodalGenerator if media else TextGenerator
            generator = make(args.pte, args.tokenizer, data_path=data)
        print(args.prompt, end="", flush=True)
        with backend_log(args.debug):  # MethodsDriver's Runner notes where it runs ("runs with PyTorch on cpu")
            result = generator.generate(
                args.prompt,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
                on_token=_show_pieces(),
                **media,
            )
    except (RunnerError, InputShapeError, OptionError) as e:
        print(flush=True)
        raise CliError(str(e)) from e
    if args.debug:
        print(generator.log, end="")
    by = kind if kind != "MethodsDriver" else "et_tensorrt.llm.MethodsDriver (prefill and decode methods)"
    print(
        f"\n\n{result.prompt_tokens} prompt token(s), {result.generated_tokens} generated in {result.seconds:.3f} s "
        f"({result.tokens_per_second:.0f} tokens/s) by {by}; the KV cache stays in the delegate"
    )
    print(_bytes_line(result.step_bytes, result.bytes_counted))
    return EXIT_OK
