#!/usr/bin/env python3
"""The suite's durations, per test module, from pytest JUnit reports (``--junitxml``: .ci/run writes one).

    python scripts/test_durations.py REPORT.xml [REPORT.xml ...] [--write] [--top N] [--markdown]

Prints the modules, slowest first: seconds (the sum of their tests' times, a module-scoped fixture's set-up counted
in its first test), tests, and the tier they ran in (``slow`` where every test of the module has the mark, ``mixed``,
``fast``); then the totals per tier. ``--write`` stores the seconds in ``tests/durations.json``, which
``tests/conftest.py`` reads to hand the slowest modules to pytest-xdist's workers first and to put every test of
``SLOW_SECONDS`` or more in the slow tier. Several reports (a run
continued later, one per tier) are merged by test id, the last one winning.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DURATIONS = REPO / "tests" / "durations.json"


def node_path(classname: str) -> tuple[str, list[str]]:
    """``tests.backend.test_x`` or ``tests.backend.test_x.TestCase`` -> (``tests/backend/test_x.py``, classes)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (REPO / candidate).is_file():
            return candidate, parts[end:]
    return "/".join(parts) + ".py", []


def read_reports(paths: list[str]) -> dict[str, tuple[str, float, bool]]:
    """pytest node id -> (module, seconds, slow)."""
    tests: dict[str, tuple[str, float, bool]] = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            module, classes = node_path(case.get("classname", ""))
            slow = any(p.get("name") == "tier" and p.get("value") == "slow" for p in case.iter("property"))
            name = case.get("name", "").removesuffix(f"@{module}")  # pytest-xdist's group, in --dist loadgroup
            node = "::".join([module, *classes, name])
            tests[node] = (module, float(case.get("time") or 0), slow)
    return tests


def per_module(tests: dict[str, tuple[str, float, bool]]) -> list[tuple[str, float, int, str]]:
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for module, time, slow in tests.values():
        seconds[module] += time
        counts[module][0] += 1
        counts[module][1] += slow
    rows = []
    for module, total in seconds.items():
        n, slow = counts[module]
        rows.append((module, total, n, "slow" if slow == n else "fast" if slow == 0 else "mixed"))
    return sorted(rows, key=lambda r: -r[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", help="JUnit XML files (pytest --junitxml)")
    parser.add_argument("--write", action="store_true", help=f"store the seconds in {DURATIONS.relative_to(REPO)}")
    parser.add_argument("--top", type=int, default=30, help="modules to print (default 30; 0: all)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    tests = read_reports(args.reports)
    rows = per_module(tests)
    shown = rows if args.top == 0 else rows[: args.top]
    if args.markdown:
        print("| module | tier | tests | seconds |\n|---|---|---:|---:|")
        for module, total, n, tier in shown:
            print(f"| `{module}` | {tier} | {n} | {total:.0f} |")
    else:
        for module, total, n, tier in shown:
            print(f"{total:8.1f} s  {n:4d} tests  {tier:5s}  {module}")
    tiers: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for _, time, slow in tests.values():
        tiers["slow" if slow else "fast"][0] += time
        tiers["slow" if slow else "fast"][1] += 1
    for tier, (time, n) in sorted(tiers.items()):
        print(f"{tier} tier: {n} tests, {time / 60:.1f} min of test time (one worker)")
    if args.write:
        recorded = {
            "modules": {m: round(t, 1) for m, t, _, _ in rows},
            # tests of a second or more (the slow tier's rule reads these; the rest are fast)
            "tests": {node: round(t, 1) for node, (_, t, _) in tests.items() if t >= 1.0},
        }
        DURATIONS.write_text(json.dumps(recorded, indent=0, sort_keys=True) + "\n")
        print(f"wrote {DURATIONS.relative_to(REPO)} ({len(rows)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
