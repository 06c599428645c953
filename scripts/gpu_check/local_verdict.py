"""The verdict of ``scripts/gpu_check.sh --local``: every step ran, every CPU row passed, every GPU row skipped.

python local_verdict.py OUT_DIR     (OUT_DIR holds callN.json and gpu_check.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from checks import NO_GPU, REFIT_NOT_BUNDLED

CPU_ROWS = (
    "import et_tensorrt's runtime without executorch.exir",
    ": blob carries an engine",
    ": runs, matches eager",
    "next token chosen in the engine, fed back: eager greedy (issue 46)",
    "no executorch.exir imported",
)


def main() -> int:
    out = Path(sys.argv[1])
    problems = []
    calls = sorted(out.glob("call*.json"), key=lambda p: int(p.stem[4:]))
    reports = [json.loads(p.read_text()) for p in calls]
    if not reports or reports[-1]["status"] != "done":
        problems.append(f"the last call did not finish: {[r['status'] for r in reports]}")
    steps = {name: s for r in reports for name, s in r["steps"].items() if s["status"] != "pending"}
    for name, step in steps.items():
        if step["status"] != "ok":
            problems.append(f"step {name}: {step['status']}: {step['detail']}")
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    for r in rows:
        cpu_row = any(r["check"].endswith(c) or r["check"] == c for c in CPU_ROWS)
        if cpu_row and r["result"] != "PASS":
            problems.append(f"{r['check']}: {r['result']} {r['detail']}")
        elif r["result"] == "FAIL":
            problems.append(f"{r['check']}: FAIL {r['detail']}")
        elif r["result"] == "SKIP" and r["detail"] not in (NO_GPU, REFIT_NOT_BUNDLED):
            problems.append(f"{r['check']}: skipped for another reason than no GPU: {r['detail']}")
    passed = sum(r["result"] == "PASS" for r in rows)
    skipped = sum(r["result"] == "SKIP" for r in rows)
    for name, step in steps.items():
        print(f"[local] step {name:10} {step['status']:6} {step.get('seconds', '')!s:>6} s  {step['detail'][:110]}")
    if problems:
        print("[local] FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(
        f"[local] {len(reports)} calls; {passed} rows passed on the CPU, {skipped} skipped (GPU rows: {NO_GPU}; "
        "refit: no refit program, lowered without a GPU)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
