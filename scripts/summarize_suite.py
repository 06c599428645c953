#!/usr/bin/env python3
"""Summarize ExecuTorch backend-suite JSON reports (pytest-json-report) into one comparison table.

    python scripts/summarize_suite.py REPORT.json [REPORT.json ...] [--details] [--json]

One row per flow (reports of the same flow, e.g. a run continued later, are merged by test id). Columns:

* tests / passed / failed / skipped - pytest items and their outcomes (``error``, ``xpassed``
  count as failed, ``xfailed`` as skipped);
* subtests - ``lower_and_run_model`` calls recorded by the suite (metadata ``subtests``);
* delegated - fraction of subtests with ``Delegated == "True"``;
* deleg. pass - delegated subtests whose ``Result`` is ``Pass`` (what "a backend ran it and got the
  right numbers" means; an undelegated subtest passes without running anything);
* node ratio - mean over all subtests that recorded node counts of
  ``Delegated Nodes / (Delegated Nodes + Undelegated Nodes)``;
* deleg. skip - delegated subtests the runner then skipped (``Result == "Skip"``); should be 0;
* wall - the report's ``duration`` (pytest session wall time).

``--details`` lists every failed subtest/test and every delegated-then-skipped subtest with its
error; ``--json`` prints the rows as JSON instead of a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field

FAILED_OUTCOMES = {"failed", "error", "xpassed"}
SKIPPED_OUTCOMES = {"skipped", "xfailed"}


@dataclass
class Row:
    flow: str
    tests: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    subtests: int = 0
    delegated: int = 0
    delegated_pass: int = 0
    delegated_skip: int = 0
    ratio_sum: float = 0.0
    ratio_n: int = 0
    wall_s: float = 0.0
    failures: list[dict] = field(default_factory=list)
    delegated_skips: list[dict] = field(default_factory=list)

    @property
    def delegated_fraction(self) -> float:
        return self.delegated / self.subtests if self.subtests else 0.0

    @property
    def mean_ratio(self) -> float:
        return self.ratio_sum / self.ratio_n if self.ratio_n else 0.0


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _error_of(test: dict) -> str:
    for phase in ("setup", "call", "teardown"):
        info = test.get(phase) or {}
        if info.get("outcome") in FAILED_OUTCOMES:
            crash = info.get("crash") or {}
            msg = crash.get("message") or info.get("longrepr") or ""
            return str(msg).strip().splitlines()[-1][:300] if msg else ""
    if "???" in test:
        return str(test["???"].get("longrepr", "process crashed"))[:300]
    return ""


def _flow_of(report: dict, path: str) -> str:
    flows = {
        st.get("Flow")
        for t in report.get("tests", [])
        for st in (t.get("metadata") or {}).get("subtests", [])
        if st.get("Flow")
    }
    return flows.pop() if len(flows) == 1 else os.path.splitext(os.path.basename(path))[0]


def summarize(path: str) -> Row:
    with open(path) as f:
        report = json.load(f)
    return summarize_reports([(path, report)])


def summarize_reports(reports: list[tuple]) -> Row:
    """One row from one or more (path, report) of the same flow (e.g. a run continued in a second
    session): tests are merged by node id, the later report winning; wall times add up."""
    by_id: dict[str, dict] = {}
    for _, report in reports:
        for t in report.get("tests", []):
            by_id[t.get("nodeid")] = t
    tests = list(by_id.values())
    path, first = reports[0]
    row = Row(flow=_flow_of(first, path), wall_s=sum(float(r.get("duration", 0.0)) for _, r in reports))
    for t in tests:
        row.tests += 1
        outcome = t.get("outcome")
        if outcome == "passed":
            row.passed += 1
        elif outcome in FAILED_OUTCOMES:
            row.failed += 1
        elif outcome in SKIPPED_OUTCOMES:
            row.skipped += 1
        subtests = (t.get("metadata") or {}).get("subtests", [])
        failed_subtest = False
        for st in subtests:
            row.subtests += 1
            delegated = st.get("Delegated") == "True"
            result = st.get("Result")
            if delegated:
                row.delegated += 1
                if result == "Pass":
                    row.delegated_pass += 1
                elif result == "Skip":
                    row.delegated_skip += 1
                    row.delegated_skips.append(
                        {"test": st.get("Test ID"), "subtest": st.get("Subtest"), "error": st.get("Error", "")}
                    )
            if result == "Fail":
                failed_subtest = True
                row.failures.append(
                    {
                        "test": st.get("Test ID") or t.get("nodeid"),
                        "subtest": st.get("Subtest"),
                        "detail": st.get("Result Detail", ""),
                        "delegated": delegated,
                        "error": (st.get("Error") or "").replace("\n", " ")[:400],
                    }
                )
            d, u = _int(st.get("Delegated Nodes")), _int(st.get("Undelegated Nodes"))
            if d is not None and u is not None and d + u > 0:
                row.ratio_sum += d / (d + u)
                row.ratio_n += 1
        if outcome in FAILED_OUTCOMES and not failed_subtest:
            row.failures.append(
                {"test": t.get("nodeid"), "subtest": None, "detail": outcome, "delegated": None, "error": _error_of(t)}
            )
    return row


def _wall(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s"


def table(rows: list[Row]) -> str:
    head = [
        "flow",
        "tests",
        "passed",
        "failed",
        "skipped",
        "subtests",
        "delegated",
        "deleg. pass",
        "node ratio",
        "deleg. skip",
        "wall",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        cells = [
            r.flow,
            r.tests,
            r.passed,
            r.failed,
            r.skipped,
            r.subtests,
            f"{r.delegated}/{r.subtests} ({r.delegated_fraction:.3f})",
            f"{r.delegated_pass}",
            f"{r.mean_ratio:.3f}",
            r.delegated_skip,
            _wall(r.wall_s),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def details(rows: list[Row]) -> str:
    out = []
    for r in rows:
        out.append(f"\n## {r.flow}: {len(r.failures)} failure(s), {len(r.delegated_skips)} delegated-then-skipped")
        for f in r.failures:
            sub = "" if f["subtest"] is None else f" #{f['subtest']}"
            out.append(f"- FAIL {f['test']}{sub} [{f['detail']}] delegated={f['delegated']}: {f['error']}")
        for s in r.delegated_skips:
            out.append(f"- DELEGATED+SKIP {s['test']} #{s['subtest']}: {s['error'][:300]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="pytest-json-report files, one per flow")
    parser.add_argument("--details", action="store_true", help="list failures and delegated skips")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args(argv)

    groups: dict[str, list[tuple]] = {}  # flow -> reports, in command-line order
    for path in args.reports:
        if not os.path.exists(path):
            print(f"warning: {path} missing (run did not finish?)", file=sys.stderr)
            continue
        with open(path) as f:
            report = json.load(f)
        groups.setdefault(_flow_of(report, path), []).append((path, report))
    rows = [summarize_reports(reports) for reports in groups.values()]
    if args.json:
        payload = [dict(asdict(r), delegated_fraction=r.delegated_fraction, mean_ratio=r.mean_ratio) for r in rows]
        print(json.dumps(payload, indent=2))
    else:
        print(table(rows))
        if args.details:
            print(details(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
