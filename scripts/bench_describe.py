"""Per-input cost of describe_inputs vs the standard DLPack hand-off vs ExecuTorch's own conversion.

Side by side in one run, medians of repeated timings, printed as ns/input and ratios.
Goal (issue 2): describe <= 1.5x dlpack per input.

    python scripts/bench_describe.py [--repeat 2000]
"""

import argparse

import torch
from bench_common import median_per_call  # this folder (the script's own) is on sys.path
from torch.utils.dlpack import to_dlpack

import et_tensorrt


def median_ns(fn, repeat, n_inputs):
    return median_per_call(fn, repeat, 5) * 1e9 / n_inputs


def executorch_method(n):
    """A program that takes n inputs and returns the first; ExecuTorch converts every input per call."""
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    class TakeFirst(torch.nn.Module):
        def forward(self, *xs):
            return xs[0] + 0

    args = tuple(torch.zeros(4) for _ in range(n))
    program = to_edge(torch.export.export(TakeFirst(), args)).to_executorch()
    loaded = Runtime.get().load_program(program.buffer)
    method = loaded.load_method("forward")
    method.keep_program_alive = loaded  # ExecuTorch's Method does not own its Program (use-after-free)
    return method, list(args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    print(f"torch {torch.__version__}; ns per input, median of 5 x {args.repeat} calls")
    print(
        f"{'inputs':>6} {'describe_inputs':>16} {'to_dlpack':>10} {'ET Method.execute':>18}"
        f" {'describe/dlpack':>16} {'describe/ET':>12}"
    )
    for n in (1, 8, 64):
        tensors = [torch.randn(4, 4) for _ in range(n)]
        describe = median_ns(lambda: et_tensorrt.describe_inputs(tensors), args.repeat, n)
        dlpack = median_ns(lambda: [to_dlpack(t) for t in tensors], args.repeat, n)
        method, et_inputs = executorch_method(n)
        et = median_ns(lambda: method.execute(et_inputs), max(args.repeat // 10, 50), n)
        print(f"{n:>6} {describe:>16.0f} {dlpack:>10.0f} {et:>18.0f} {describe / dlpack:>16.2f} {describe / et:>12.2f}")


if __name__ == "__main__":
    main()
