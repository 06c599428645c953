"""``generate``: text from a prompt with ExecuTorch's C++ TextLLMRunner driving the program (et_tensorrt.llm)."""

from __future__ import annotations

from ..errors import RunnerError
from .common import EXIT_OK, CliError


def cmd_generate(args) -> int:
    from ..llm import TextGenerator

    try:
        generator = TextGenerator(args.pte, args.tokenizer, data_path=args.data)
        result = generator.generate(args.prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    except RunnerError as e:
        raise CliError(str(e)) from e
    if args.debug:
        print(generator.log, end="")
    print(args.prompt + result.text.decode("utf-8", "replace"))
    print(
        f"\n{result.prompt_tokens} prompt token(s), {result.generated_tokens} generated in {result.seconds:.3f} s "
        f"({result.tokens_per_second:.0f} tokens/s) by TextLLMRunner; the KV cache stays in the delegate"
    )
    return EXIT_OK
