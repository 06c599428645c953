"""Per-call latency of a one-op program, a small MLP and a small conv net, side by side in one run:

  eager PyTorch | ExecuTorch, no delegate (portable/optimized kernels) | ExecuTorch + XNNPACK |
  ExecuTorch + et_tensorrt delegate through executorch.runtime | et_tensorrt.Runner

plus the bytes copied per call (the Runner's method plan) and a breakdown of one Runner call, read from
the plans' own timers: the executor's share (executor_ns), the delegate's own share around it
(delegate_ns: plan, bind, write back, lock), and the rest (ExecuTorch's Method, the runner, Python).
Medians of --blocks blocks of --calls calls each, after a warm-up; ratios are against eager PyTorch, and
"Runner / ExecuTorch" against ExecuTorch's own Method.execute of the same model undelegated.
Without a GPU the et_tensorrt delegate runs its partition with the PyTorch fallback executor.

    python scripts/bench_runtime.py [--calls 50] [--blocks 7]
    python scripts/bench_runtime.py --tracer [--before DIR] [--rounds 3]   # what profiling costs (bench_tracer.py)
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch
from bench_common import median_per_call  # this folder (the script's own) is on sys.path


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.net(x)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(y.mean(dim=(2, 3)))


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


MODELS = {
    "x + 1 (16)": (AddOne, (16,)),
    "mlp (8x64)": (MLP, (8, 64)),
    "convnet (1x3x32x32)": (ConvNet, (1, 3, 32, 32)),
}


def median_us(fn, calls, blocks):
    return median_per_call(fn, calls, blocks, warmup=max(3, calls // 5)) * 1e6


def et_method(buffer):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    method.keep_program_alive = program  # ExecuTorch's Method does not own its Program (use-after-free)
    return method


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a small shared machine more threads make "
        "tiny eager calls wait on each other; ExecuTorch's kernels are single-threaded)",
    )
    ap.add_argument(
        "--tracer",
        action="store_true",
        help="instead: Runner.run with profile off, profile=True and (--before) the package before it, side by side",
    )
    ap.add_argument("--before", metavar="DIR", help="with --tracer: a folder holding the earlier et_tensorrt/, built")
    ap.add_argument("--rounds", type=int, default=3, help="with --tracer: rounds of the three measurements")
    args = ap.parse_args()

    os.environ.setdefault("ET_TENSORRT_CACHE_DIR", tempfile.mkdtemp(prefix="et_trt_bench_"))
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.set_num_threads(args.threads)
    if args.tracer:
        import bench_tracer

        return bench_tracer.main(MODELS, args)

    from importlib.metadata import version

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower

    from et_tensorrt import Runner, lower

    rows = []
    for name, (cls, shape) in MODELS.items():
        torch.manual_seed(0)
        model = cls().eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            ep = torch.export.export(model, (x,))
            ref = model(x)
        portable = to_edge(ep).to_executorch().buffer
        xnnpack = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
        ours = lower(ep, min_block_size=1)

        m_portable, m_xnn, m_ours = et_method(portable), et_method(xnnpack), et_method(ours)
        runner = Runner(ours)
        for out in (m_portable.execute([x])[0], m_xnn.execute([x])[0], m_ours.execute([x])[0], runner.run([x])[0]):
            torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        copied = runner.last_plan.bytes_copied
        executor = f"{runner.last_plan.executor}: {runner.last_plans[0].executor_detail}"

        def eager():
            with torch.no_grad():
                model(x)

        timings = {
            "eager PyTorch": median_us(eager, args.calls, args.blocks),
            "ExecuTorch (no delegate)": median_us(lambda: m_portable.execute([x]), args.calls, args.blocks),
            "ExecuTorch + XNNPACK": median_us(lambda: m_xnn.execute([x]), args.calls, args.blocks),
            "ExecuTorch + et_tensorrt": median_us(lambda: m_ours.execute([x]), args.calls, args.blocks),
            "et_tensorrt.Runner": median_us(lambda: runner.run([x]), args.calls, args.blocks),
        }
        rows.append((name, timings, copied, executor, breakdown(runner, x, args.calls * args.blocks)))

    print(
        f"torch {torch.__version__}, executorch {version('executorch')}, "
        f"{os.cpu_count()} CPU(s), torch threads {torch.get_num_threads()}, "
        f"CUDA {'yes' if torch.cuda.is_available() else 'no'}; {args.blocks} blocks x {args.calls} calls"
    )
    header = f"{'model':<22}{'path':<28}{'median us/call':>16}{'vs eager':>10}"
    print(header)
    print("-" * len(header))
    for name, timings, copied, executor, parts in rows:
        base = timings["eager PyTorch"]
        for path, us in timings.items():
            print(f"{name:<22}{path:<28}{us:>16.1f}{us / base:>9.2f}x")
        ratio = timings["et_tensorrt.Runner"] / timings["ExecuTorch (no delegate)"]
        print(f"{name:<22}{'Runner / ExecuTorch':<28}{ratio:>15.2f}x")
        print(f"{name:<22}{'bytes copied/call':<28}{copied:>16,}   (executor {executor})")
        total, executor_us, delegate_us = parts
        print(
            f"{name:<22}{'Runner call breakdown':<28}{total:>16.1f}   = executor {executor_us:.1f} + delegate "
            f"{delegate_us:.1f} + ExecuTorch/runner/Python {total - executor_us - delegate_us:.1f}"
        )
    return 0


def breakdown(runner, x, calls: int) -> tuple[float, float, float]:
    """Median us per Runner call: whole call, executor share, the delegate's own share (summed over delegates)."""
    totals, executor, delegate = [], [], []
    for _ in range(max(calls, 200)):
        start = time.perf_counter()
        runner.run([x])
        totals.append((time.perf_counter() - start) * 1e6)
        executor.append(sum(p.executor_ns for p in runner.last_plans) / 1e3)
        delegate.append(sum(p.delegate_ns for p in runner.last_plans) / 1e3)
    return statistics.median(totals), statistics.median(executor), statistics.median(delegate)


if __name__ == "__main__":
    sys.exit(main())
