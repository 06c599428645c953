"""RSS growth over many Runner.run and describe calls (a leak shows as steady growth).

    python scripts/leak_check.py [--runs 10000] [--describes 10000] [--limit-mb 20]

Lowers a tiny MLP once (et_tensorrt.lower(model, (x,), min_block_size=1); cached under
build/reliability-cache like the reliability tests), warms up, then measures resident memory before
and after N Runner.run calls and N describe calls. Exits 1 when either grows by more than the limit.
Warm-up matters: the first calls allocate ExecuTorch's planned memory, torch's allocator caches and
the delegate's staging buffers, none of which is a leak.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(name: str, fn, n: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    gc.collect()
    before = rss_mb()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - t
    gc.collect()
    after = rss_mb()
    growth = after - before
    print(
        f"{name}: {n} calls in {elapsed:.1f} s ({elapsed / n * 1e6:.0f} us/call); RSS {before:.1f} -> {after:.1f} MB "
        f"(growth {growth:+.2f} MB, {growth * 1024 * 1024 / n:+.1f} B/call)",
        flush=True,
    )
    return growth


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--describes", type=int, default=10000)
    ap.add_argument("--limit-mb", type=float, default=20.0, help="allowed RSS growth per phase")
    args = ap.parse_args()

    import torch

    import et_tensorrt
    from et_tensorrt.runtime.runner import Runner

    spec = importlib.util.spec_from_file_location(
        "_rel_runner", ROOT / "tests" / "reliability" / "test_reliability_runner.py"
    )
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    t = time.perf_counter()
    pte = helpers.lowered_pte()
    print(
        f"lowered tiny MLP: {len(pte)} bytes in {time.perf_counter() - t:.1f} s (cache under build/reliability-cache)"
    )
    model = helpers.make_model()

    runner = Runner(pte)
    x = torch.randn(2, 4)
    (y,) = runner.run([x])
    torch.testing.assert_close(y, model(x).detach())

    out = torch.empty(2, 3)
    failures = []
    g_run = measure("Runner.run", lambda: runner.run([x]), args.runs, warmup=200)
    g_out = measure("Runner.run(outputs=)", lambda: runner.run([x], outputs=[out]), args.runs // 2, warmup=200)
    t4 = torch.randn(8, 16)
    g_desc = measure("describe", lambda: et_tensorrt.describe(t4), args.describes, warmup=500)
    g_inputs = measure(
        "describe_inputs x4", lambda: et_tensorrt.describe_inputs([t4, t4, x, y]), args.describes, warmup=500
    )
    for name, g in [
        ("Runner.run", g_run),
        ("Runner.run(outputs=)", g_out),
        ("describe", g_desc),
        ("describe_inputs", g_inputs),
    ]:
        if g > args.limit_mb:
            failures.append(f"{name} grew {g:.1f} MB > {args.limit_mb} MB")
    print("leak check:", "PASS" if not failures else "FAIL: " + "; ".join(failures), f"(limit {args.limit_mb} MB)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
