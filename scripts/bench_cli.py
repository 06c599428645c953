"""How long the command line takes to answer: ``--help``, ``--version``, an argument error, ``inspect`` of the demo's
.pte, ``generate``'s refusal of it (not an LLM), ``cache size``, and the refusals of files that are not programs
(``explain`` of a text file and of a state dict), each in a fresh process (``python -m et_tensorrt``), against
``python -c pass``. The package's own time is the difference.

    python scripts/bench_cli.py [--pte model.pte] [--repeat 5] [--before OTHER-CHECKOUT]

Without ``--pte`` it writes the demo's program first (``et-tensorrt demo -o``, untimed). It times this checkout's
et_tensorrt (its folder goes first on PYTHONPATH); ``--before``: another checkout's too (its native modules built or
copied in), each command of the two one after the other, so that both columns see the same machine load.
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


def _environment(checkout: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def wall_seconds(argv: list[str], repeat: int, checkout: Path = REPO, cwd: Path = REPO) -> float:
    """Median wall time of ``argv`` in a fresh process (one untimed run first warms the file cache)."""
    env = _environment(checkout)
    samples = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if i:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pte", help="the .pte `inspect` reads (default: the demo's, written now)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--before", type=Path, help="another checkout to time side by side (e.g. main's)")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "et_tensorrt"]
    checkouts = {"after": REPO, **({"before": args.before.resolve()} if args.before else {})}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        pte = args.pte or str(work / "demo.pte")
        if not args.pte:
            subprocess.run([*cli, "demo", "-o", pte], env=_environment(REPO), cwd=REPO, capture_output=True, check=True)
        (work / "notes.txt").write_text("not a program\n")
        subprocess.run(
            [sys.executable, "-c", "import torch; torch.save({'w': torch.ones(4, 4)}, 'state_dict.pt')"], cwd=work
        )
        baseline = wall_seconds([sys.executable, "-c", "pass"], args.repeat)
        cases = {
            "--help": ["--help"],
            "--version": ["--version"],
            "argument error (run --repeat 0)": ["run", "--repeat", "0", pte],
            f"inspect demo .pte ({os.path.getsize(pte):,} B)": ["inspect", pte],
            "generate demo .pte (refused: not an LLM)": ["generate", pte, "--tokenizer", pte, "--prompt", "hi"],
            "cache size": ["cache", "size"],
            "explain a text file (refused)": ["explain", "notes.txt"],
            "explain a state dict (refused)": ["explain", "state_dict.pt"],
        }
        rows = [
            (name, {k: wall_seconds([*cli, *argv], args.repeat, checkout, work) for k, checkout in checkouts.items()})
            for name, argv in cases.items()
        ]
    print(f"median of {args.repeat} fresh processes; `python -c pass`: {baseline:.3f} s\n")
    columns = [k for k in ("before", "after") if k in checkouts]
    print("| command | " + " | ".join(f"{k}: wall (s) | {k}: own (s)" for k in columns) + " |")
    print("|---|" + "---:|---:|" * len(columns))
    for name, seconds in rows:
        cells = " | ".join(f"{fmt(seconds[k], '.3f')} | {fmt(seconds[k] - baseline, '.3f')}" for k in columns)
        print(f"| `{name}` | {cells} |")


if __name__ == "__main__":
    main()
