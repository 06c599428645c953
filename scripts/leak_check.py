"""RSS growth over many Runner.run and describe calls, Runner.reset() calls and loads (a leak shows as steady growth).

    python scripts/leak_check.py [--runs 10000] [--describes 10000] [--limit-mb 20]
                                 [--resets 10000] [--loads 1000] [--load-limit-mb 5] [--traced 200]

Lowers a tiny MLP once (et_tensorrt.lower(model, (x,), min_block_size=1); cached under
build/reliability-cache like the reliability tests), warms up, then measures resident memory before
and after N Runner.run calls and N describe calls. Exits 1 when either grows by more than the limit.
Warm-up matters: the first calls allocate ExecuTorch's planned memory, torch's allocator caches and
the delegate's staging buffers, none of which is a leak.

Loads (issue 45): ``--resets`` Runner.reset() calls and ``--loads`` new Runners (each runs once, which loads its
method and so the partition's program), of the MLP and of the same MLP exported with a dynamic batch (its sizes are
symbolic: its loads use torch's ShapeEnv); each must grow RSS by less than ``--load-limit-mb``. Then ``--traced``
more loads of each under tracemalloc give the Python bytes kept per load, and what the process holds of fx loads
(generated sources, their linecache entries, live ShapeEnvs) before and after (et_tensorrt/runtime/load_residue.py).
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
    if n <= 0:
        return 0.0  # the phase was not asked for (--runs 0, --describes 0)
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


def fx_held() -> dict[str, int]:
    """What the process holds of fx loads: generated sources, their linecache entries, live ShapeEnvs."""
    import linecache

    from torch.fx import graph_module
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gc.collect()
    return {
        "fx sources": len(graph_module._loader.eval_cache),
        "linecache entries": sum(key.startswith("<eval_with_key>") for key in linecache.cache),
        "ShapeEnvs": sum(type(o) is ShapeEnv for o in gc.get_objects()),
    }


def traced_per_call(fn, n: int, warmup: int) -> float:
    """Python bytes still held per call after ``n`` calls, traced from before ``warmup`` calls (what a bounded cache
    keeps is then allocated before the first measure)."""
    import tracemalloc

    tracemalloc.start(1)
    try:
        for _ in range(warmup):
            fn()
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(n):
            fn()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - start) / n
    finally:
        tracemalloc.stop()


def dynamic_pte(helpers) -> bytes:
    """The reliability MLP exported with a dynamic batch (2..16)."""
    import torch

    import et_tensorrt

    batch = torch.export.Dim("batch", min=2, max=16)
    with torch.no_grad():
        return et_tensorrt.lower(
            helpers.make_model(), (helpers.EXAMPLE,), dynamic_shapes=({0: batch},), min_block_size=1
        )


def check_loads(programs: dict, x, args) -> list[str]:
    """Resets and loads of each program: RSS growth, Python bytes kept per load, fx residue held."""
    from et_tensorrt.runtime.runner import Runner

    failures = []
    for name, pte in programs.items():
        runner = Runner(pte)
        runner.run([x])

        def reset(runner=runner):
            runner.reset()
            runner.run([x])

        def load(pte=pte):
            Runner(pte).run([x])

        held = fx_held()
        for what, fn, n in (("Runner.reset()", reset, args.resets), ("load (Runner(...).run)", load, args.loads)):
            if n <= 0:
                continue
            g = measure(f"{name}: {what}", fn, n, warmup=50)
            if g > args.load_limit_mb:
                failures.append(f"{name}: {n} x {what} grew {g:.1f} MB > {args.load_limit_mb} MB")
        if args.traced > 0:
            for what, fn in (("reset", reset), ("load", load)):
                kept = traced_per_call(fn, args.traced, warmup=20)
                print(f"{name}: {what}: {kept:+.0f} Python bytes kept per {what} (tracemalloc, {args.traced} calls)")
        after = fx_held()
        print(f"{name}: held of fx loads {held} -> {after}", flush=True)
        if after["fx sources"] > held["fx sources"] or after["linecache entries"] > held["linecache entries"]:
            failures.append(f"{name}: fx sources kept per load ({held} -> {after})")
    return failures


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--describes", type=int, default=10000)
    ap.add_argument("--limit-mb", type=float, default=20.0, help="allowed RSS growth per phase")
    ap.add_argument("--resets", type=int, default=10000, help="Runner.reset() calls per program (0: none)")
    ap.add_argument("--loads", type=int, default=1000, help="new Runners per program (0: none)")
    ap.add_argument("--load-limit-mb", type=float, default=5.0, help="allowed RSS growth over the resets, the loads")
    ap.add_argument("--traced", type=int, default=200, help="loads under tracemalloc per program and kind (0: none)")
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
    failures += check_loads({"mlp": pte, "mlp, dynamic batch": dynamic_pte(helpers)}, x, args)
    for name, g in [
        ("Runner.run", g_run),
        ("Runner.run(outputs=)", g_out),
        ("describe", g_desc),
        ("describe_inputs", g_inputs),
    ]:
        if g > args.limit_mb:
            failures.append(f"{name} grew {g:.1f} MB > {args.limit_mb} MB")
    print(
        "leak check:",
        "PASS" if not failures else "FAIL: " + "; ".join(failures),
        f"(limits {args.limit_mb} MB per run phase, {args.load_limit_mb} MB per load phase)",
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
