"""The `et-tensorrt` / `python -m et_tensorrt` command line."""

from __future__ import annotations

import argparse
import sys

import torch


def _cmd_describe(args) -> int:
    from . import describe_inputs

    examples = {
        "contiguous float32": torch.randn(2, 3),
        "channels-last": torch.randn(1, 3, 4, 4).to(memory_format=torch.channels_last),
        "permuted int64": torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1),
        "0-d scalar": torch.tensor(1.5),
        "empty": torch.empty(0, 8),
    }
    if torch.cuda.is_available():
        examples["cuda:0 activation"] = torch.randn(4, 4, device="cuda")
    for (name, tensor), desc in zip(examples.items(), describe_inputs(list(examples.values()))):
        print(f"{name:>20}: {desc!r}")
    print(f"{'expanded (refused)':>20}: ", end="")
    try:
        describe_inputs([torch.randn(3, 1).expand(3, 4)])
    except ValueError as e:
        print(f"{type(e).__name__}: {e}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="et-tensorrt", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("describe", help="print ExecuTorch descriptors of a few example tensors").set_defaults(
        func=_cmd_describe
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # one clear line unless --debug
        if args.debug:
            raise
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
