"""``bench_runtime.py --tracer [--before DIR]``: what profiling costs a ``Runner.run`` call (issue 52), side by side in
one run, per model of bench_runtime's table:

  Runner, before  | Runner, profile off | Runner, profile=True

"before" is a copy of the package from before the profile existed (DIR holds its ``et_tensorrt/`` with its own
built ``_C``), run in a child interpreter on the same .pte and inputs; the other two run in this process. Each round
measures the three in turn (the child first); every round is shown, then the rounds' median and minimum, so a load
change on a shared machine shows up as rounds that disagree rather than as a difference between columns.
Without --before the first column is left out.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from bench_common import median_per_call

HERE = Path(__file__).resolve().parent


def runner_us(pte: str, shape: tuple[int, ...], calls: int, blocks: int, profile: bool) -> float:
    """Median microseconds per ``Runner.run`` of ``pte`` on a seeded input of ``shape``."""
    from et_tensorrt import Runner

    torch.manual_seed(0)
    x = torch.randn(*shape)
    runner = Runner(pte, profile=True) if profile else Runner(pte)
    return median_per_call(lambda: runner.run([x]), calls, blocks, warmup=max(3, calls // 5)) * 1e6


def child_us(before: Path, pte: str, shape: tuple[int, ...], calls: int, blocks: int) -> float:
    """``runner_us`` with profile off in a child interpreter importing the package under ``before``, with this
    process's torch threads."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(before), str(HERE)]))
    code = (  # the parent's torch threads: more on a small shared machine make the calls wait on each other
        f"import json, torch, bench_tracer; torch.set_num_threads({torch.get_num_threads()}); "
        f"print(json.dumps(bench_tracer.runner_us({pte!r}, {tuple(shape)!r}, {calls}, {blocks}, False)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=before)
    if proc.returncode != 0:
        raise SystemExit(f"the 'before' package under {before} failed:\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(models: dict, args) -> int:
    from et_tensorrt import lower

    before = Path(args.before).resolve() if args.before else None
    if before is not None and not (before / "et_tensorrt" / "__init__.py").is_file():
        raise SystemExit(f"--before {before}: no et_tensorrt/ package there")
    folder = Path(tempfile.mkdtemp(prefix="et_trt_bench_tracer_"))
    columns = (["before"] if before else []) + ["profile off", "profile=True"]
    print(
        f"Runner.run, median us/call of {args.blocks} blocks x {args.calls} calls, {args.rounds} rounds "
        f"(torch threads {torch.get_num_threads()}; before: {before or '-'})"
    )
    header = f"{'model':<22}{'round':<7}" + "".join(f"{c:>15}" for c in columns) + f"{'on / off':>10}"
    print(header)
    print("-" * len(header))
    for name, (cls, shape) in models.items():
        torch.manual_seed(0)
        model = cls().eval()
        with torch.no_grad():
            pte = folder / f"{name.split()[0]}.pte"
            pte.write_bytes(lower(torch.export.export(model, (torch.randn(*shape),)), min_block_size=1))
        per_round = []
        for r in range(args.rounds):
            row = {}
            if before:
                row["before"] = child_us(before, str(pte), shape, args.calls, args.blocks)
            row["profile off"] = runner_us(str(pte), shape, args.calls, args.blocks, profile=False)
            row["profile=True"] = runner_us(str(pte), shape, args.calls, args.blocks, profile=True)
            per_round.append(row)
            _print_row(name, str(r + 1), row, columns)
        # the median says what a round typically saw; the minimum, what a call costs when nothing else runs
        for label, pick in (("median", statistics.median), ("min", min)):
            _print_row(name, label, {c: pick(row[c] for row in per_round) for c in columns}, columns)
    return 0


def _print_row(name: str, label: str, row: dict, columns: list[str]) -> None:
    cells = "".join(f"{row[c]:>15.1f}" for c in columns)
    print(f"{name:<22}{label:<7}{cells}{row['profile=True'] / row['profile off']:>9.2f}x")
