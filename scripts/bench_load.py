"""What program verification costs at load: ``Runner(path)`` (InternalConsistency, the default) vs
``Runner(path, verify=False)`` (Minimal), side by side in one run, median of ``--repeat`` loads each.

    python scripts/bench_load.py [--repeat 30] [--layers 200] [--width 256]

Programs: a small MLP lowered with et_tensorrt (one delegate), and a deep MLP lowered for ExecuTorch's
portable kernels (no delegate: every op is an instruction in the flatbuffer the verifier walks; its
weights are in a segment). Times cover ``Runner(...)`` only (Module::load: header, verification,
program tables); method loading (delegate init) is the same with and without verification.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch


def deep_mlp_pte(layers: int, width: int) -> bytes:
    from executorch.exir import to_edge

    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*blocks).eval()
    ep = torch.export.export(model, (torch.randn(1, width),))
    return to_edge(ep).to_executorch().buffer


def small_lowered_pte() -> bytes:
    import et_tensorrt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    return et_tensorrt.lower(model, (torch.randn(2, 8),), min_block_size=1)


def median_load_ms(path: Path, verify: bool, repeat: int) -> float:
    from et_tensorrt import Runner

    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        Runner(path, verify=verify)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--layers", type=int, default=200)
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args()
    from et_tensorrt.runtime.runner import load_kernels

    load_kernels()
    programs = {
        "MLP 8-16-4, et_tensorrt delegate": small_lowered_pte(),
        f"MLP {args.layers}x{args.width}, portable kernels": deep_mlp_pte(args.layers, args.width),
    }
    print("| program | .pte size | load, verified (ms) | load, verify=False (ms) | verification cost |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in programs.items():
            path = Path(tmp) / "p.pte"
            path.write_bytes(data)
            median_load_ms(path, True, 3)  # warm the page cache and the kernel registry
            verified, minimal = [], []
            for _ in range(3):  # interleaved, so both see the same machine load
                verified.append(median_load_ms(path, True, args.repeat))
                minimal.append(median_load_ms(path, False, args.repeat))
            v, m = statistics.median(verified), statistics.median(minimal)
            print(f"| {name} | {len(data) / 1024:,.0f} KiB | {v:.3f} | {m:.3f} | {v - m:+.3f} ms ({v / m:.2f}x) |")


if __name__ == "__main__":
    main()
