"""Run fuzz inputs in child processes so that a crash is counted, not fatal (shared by the fuzz_* scripts).

The parent hands a child a range of input indices; the child regenerates each input from (seed, index),
writes the index to a progress file before running it, counts outcomes, and writes them as JSON at the
end. A child that dies (signal, abort) or outlives its time is a *crash* / *hang* at the index in the
progress file: the parent saves that input, counts it, and goes on from the next index in a new child.

Code from a fuzzed file running is watched for in the child with an audit hook (unpickling a global,
spawning a process, opening anything under the canary directory) and by checking that the canary
directory stays empty.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SUSPICIOUS_EVENTS = ("pickle.find_class", "os.system", "subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork")


def install_code_watch(canary: str, events: list[str]) -> None:
    """Record audit events that mean code chosen by a file ran (the fuzzed inputs never need any)."""

    def hook(event: str, args) -> None:
        if event in SUSPICIOUS_EVENTS:
            events.append(f"{event} {args!r}"[:300])
        elif event == "open" and args and isinstance(args[0], str) and args[0].startswith(canary):
            events.append(f"open {args[0]}")

    sys.addaudithook(hook)


def child_loop(
    start: int, stop: int, progress: str, result: str, canary: str, run_one: Callable[[int], list[str]]
) -> None:
    """Run inputs [start, stop); ``run_one(index)`` returns the outcome labels to count for one input."""
    events: list[str] = []
    install_code_watch(canary, events)
    outcomes: dict[str, int] = {}
    progress_path = Path(progress)
    for index in range(start, stop):
        progress_path.write_text(str(index))
        for label in run_one(index):
            outcomes[label] = outcomes.get(label, 0) + 1
    Path(result).write_text(json.dumps({"outcomes": outcomes, "code_events": events}))


def run_batches(
    *,
    script: str,
    seed: int,
    inputs: int,
    batch: int,
    batch_timeout: int,
    artifacts: Path,
    child_args: list[str],
    save_input: Callable[[int, Path], str],
    figures_file: str | None,
    name: str,
) -> tuple[int, dict]:
    """The parent: batches of children over ``inputs`` indices; prints the figures and returns (exit
    status: 1 on a crash, hang or code run; figures). ``save_input(index, artifacts)`` writes a crashing
    input and returns its label."""
    artifacts.mkdir(parents=True, exist_ok=True)
    canary = artifacts / "canary"
    canary.mkdir(exist_ok=True)
    totals: dict[str, int] = {}
    crashes, hangs, code_events = [], [], []
    index, t0 = 0, time.time()
    while index < inputs:
        stop = min(inputs, index + batch)
        progress, result = artifacts / f"progress-{name}-{seed}", artifacts / f"result-{name}-{seed}.json"
        for p in (progress, result):
            p.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            script,
            "--child",
            "--seed",
            str(seed),
            "--start",
            str(index),
            "--stop",
            str(stop),
            "--artifacts",
            str(artifacts),
            "--progress",
            str(progress),
            "--result",
            str(result),
            "--canary",
            str(canary),
            *child_args,
        ]
        try:
            proc = subprocess.run(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=batch_timeout + 2 * (stop - index)
            )
            rc, tail = proc.returncode, proc.stderr.decode(errors="replace")[-2000:]
        except subprocess.TimeoutExpired:
            rc, tail = None, "timeout"
        if rc == 0 and result.exists():
            batch_result = json.loads(result.read_text())
            for k, v in batch_result["outcomes"].items():
                totals[k] = totals.get(k, 0) + v
            code_events += batch_result["code_events"]
            index = stop
            continue
        failed = int(progress.read_text()) if progress.exists() else index
        label = save_input(failed, artifacts)
        (hangs if rc is None else crashes).append(failed)
        print(
            f"{'HANG' if rc is None else 'CRASH'} at input {failed} ({label}, exit {rc})\n"
            + "\n".join("   | " + line for line in tail.strip().splitlines()[-6:]),
            flush=True,
        )
        index = failed + 1  # the inputs before it ran cleanly; their outcome counts are lost with the child
    leftovers = sorted(str(p) for p in canary.iterdir())
    figures = {
        "fuzzer": name,
        "seed": seed,
        "inputs": inputs,
        "crashes": len(crashes),
        "hangs": len(hangs),
        "code_runs": len(code_events) + len(leftovers),
        "seconds": round(time.time() - t0, 1),
        "outcomes": dict(sorted(totals.items())),
    }
    for e in code_events + leftovers:
        print(f"CODE RAN: {e}")
    print(json.dumps(figures), flush=True)
    if figures_file:
        with open(figures_file, "a") as f:
            f.write(json.dumps(figures) + "\n")
    return (1 if crashes or hangs or code_events or leftovers else 0), figures


def fuzz_parser(doc: str, *, inputs: int, batch: int, batch_timeout: int, models: str, artifacts: str):
    """The options every whole-file fuzzer takes (fuzz_pte.py, fuzz_program.py) and the hidden child ones;
    ``artifacts`` is the default folder ($ARTIFACTS overrides it)."""
    import argparse
    import os

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", type=int, default=inputs)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--batch-timeout", type=int, default=batch_timeout)
    p.add_argument("--models", default=models, help="seed models (scripts/fuzz_pte.py), comma-separated")
    p.add_argument("--artifacts", default=os.environ.get("ARTIFACTS", artifacts))
    p.add_argument("--figures", help="append the figures (one JSON line) to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for flag in ("--start", "--stop"):
        p.add_argument(flag, type=int, help=argparse.SUPPRESS)
    for flag in ("--progress", "--result", "--canary"):
        p.add_argument(flag, help=argparse.SUPPRESS)
    return p


def fuzz_main(parser, child: Callable, parent: Callable[..., int]) -> int:
    """A child runs its batch of inputs (exit 0); the parent drives the children and returns the status."""
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    return parent(args)
