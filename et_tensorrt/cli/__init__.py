"""The `et-tensorrt` / `python -m et_tensorrt` command line.

Commands: demo, lower, explain, inspect, run, prepare, check, generate, describe, cache (`et-tensorrt COMMAND
--help` for each).
Exit status: 0 success; 1 error (one `error:` line on stderr; `--debug` shows the traceback); 2 bad
command line (checked before any work); 3 `check`/`demo` did not pass; 4 the lowering delegated nothing
(`--allow-no-delegate` accepts that).
"""

from __future__ import annotations

import importlib
import sys

from ..errors import OptionError
from .common import (
    EXIT_ERROR,
    EXIT_MISMATCH,
    EXIT_NOTHING_DELEGATED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    NothingDelegated,
    UsageError,
    executorch_logs,
    load_torch,
    quiet_third_party,
)
from .parser import build_parser

# command -> "module:function" of this package, imported once the command line is parsed (most import torch).
COMMANDS = {
    "demo": "commands:cmd_demo",
    "lower": "commands:cmd_lower",
    "explain": "explain:cmd_explain",
    "inspect": "inspect:cmd_inspect",
    "run": "commands:cmd_run",
    "prepare": "prepare:cmd_prepare",
    "check": "commands:cmd_check",
    "generate": "generate:cmd_generate",
    "describe": "commands:cmd_describe",
    "cache": "cache:cmd_cache",
}
# Commands that load torch and the native module only when they need them (the rest: before they start).
_LIGHT = {"inspect", "generate", "cache"}
# Commands that take torch.export.save programs ([METHOD=]PROGRAM.pt2).
_TAKE_PROGRAMS = ("explain", "lower", "check")

__all__ = [
    "EXIT_ERROR",
    "EXIT_MISMATCH",
    "EXIT_NOTHING_DELEGATED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "NothingDelegated",
    "UsageError",
    "build_parser",
    "main",
]


def _check_environment(command: str) -> None:
    """Settings read from the environment, checked like arguments."""
    from ..builder.build_cache import max_bytes

    try:
        max_bytes()
        if command != "cache":
            from ..runtime.device_build import prepare_policy
            from ..runtime.executors import fallback_policy

            fallback_policy()
            prepare_policy()
    except ValueError as e:
        raise UsageError(str(e)) from None


def _check_files(args) -> None:
    """The files are what the command takes, told without torch (a text file or a state dict is refused at once)."""
    if args.command in _TAKE_PROGRAMS:
        from .methods import method_to_check
        from .program_file import check_method_names, check_program_file

        check_method_names(args.program)
        if args.command == "check":
            method_to_check(args.program, args.method)
        for _, path in args.program:
            check_program_file(path)
    elif args.command == "run":
        from .methods import choose_method, pte_methods

        choose_method(args.pte, args.method, pte_methods(args.pte))
    elif args.command == "prepare":
        from .. import inspection

        try:
            inspection.check_file(args.pte)
        except inspection.NotAProgramError as e:
            raise CliError(str(e)) from e


def _check_build_options(args) -> None:
    """What the installed builder cannot do on this machine (``--weights refit`` without a GPU), before any work."""
    from ..lowering import check_buildable
    from .lowering import LoweringRequest

    check_buildable(LoweringRequest.from_args(args).build)


def main(argv: list[str] | None = None) -> int:
    args = build_parser(COMMANDS, __doc__).parse_args(argv)
    with quiet_third_party(args.debug), executorch_logs(args.debug):
        try:
            _check_files(args)
            if args.command in ("run", "check", "demo", "lower", "cache", "prepare"):
                _check_environment(args.command)
            if args.command not in _LIGHT:
                load_torch(args.debug)
            if args.command in ("lower", "check"):
                _check_build_options(args)
            module, function = COMMANDS[args.command].split(":")
            return getattr(importlib.import_module(f".{module}", __name__), function)(args)
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return EXIT_ERROR
        except Exception as e:  # one clear line unless --debug
            if args.debug:
                raise
            status = e.status if isinstance(e, CliError) else EXIT_USAGE if isinstance(e, OptionError) else EXIT_ERROR
            text = str(e).strip()
            message = text.splitlines()[0] if text else ""
            # et_tensorrt's own errors name what was wrong and what to do: their class name would only be noise.
            ours = isinstance(e, (CliError, OptionError)) or type(e).__module__ == "et_tensorrt.errors"
            prefix = "error" if ours else f"error: {type(e).__name__}"
            print(f"{prefix}: {message}" if message else prefix, file=sys.stderr)
            return status
