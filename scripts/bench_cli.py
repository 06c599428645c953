"""How long the command line takes to answer: ``--help``, an argument error, ``inspect`` of the demo's .pte and
``generate``'s refusal of it (not an LLM), each in a fresh process (``python -m et_tensorrt``), against
``python -c pass``. The package's own time is the difference.

    python scripts/bench_cli.py [--pte model.pte] [--repeat 5]

Without ``--pte`` it writes the demo's program first (``et-tensorrt demo -o``, untimed). Run it from the checkout
whose et_tensorrt you want timed (that folder goes first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import fmt

REPO = Path(__file__).resolve().parents[1]


def _environment() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def wall_seconds(argv: list[str], repeat: int) -> float:
    """Median wall time of ``argv`` in a fresh process (one untimed run first warms the file cache)."""
    env = _environment()
    samples = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if i:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pte", help="the .pte `inspect` reads (default: the demo's, written now)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each command (default 5)")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "et_tensorrt"]
    with tempfile.TemporaryDirectory() as folder:
        pte = args.pte or os.path.join(folder, "demo.pte")
        if not args.pte:
            subprocess.run([*cli, "demo", "-o", pte], env=_environment(), cwd=REPO, capture_output=True, check=True)
        baseline = wall_seconds([sys.executable, "-c", "pass"], args.repeat)
        cases = {
            "--help": ["--help"],
            "argument error (run --repeat 0)": ["run", "--repeat", "0", pte],
            f"inspect demo .pte ({os.path.getsize(pte):,} B)": ["inspect", pte],
            "generate demo .pte (refused: not an LLM)": ["generate", pte, "--tokenizer", pte, "--prompt", "hi"],
        }
        rows = [(name, wall_seconds([*cli, *argv], args.repeat)) for name, argv in cases.items()]
    print(f"median of {args.repeat} fresh processes; `python -c pass`: {baseline:.3f} s\n")
    print("| command | wall (s) | the package's own (s) |")
    print("|---|---:|---:|")
    for name, seconds in rows:
        print(f"| `{name}` | {fmt(seconds, '.3f')} | {fmt(seconds - baseline, '.3f')} |")


if __name__ == "__main__":
    main()
