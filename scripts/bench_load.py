"""What program verification costs at load: ``Runner(path)`` (InternalConsistency, the default) vs
``Runner(path, verify=False)`` (Minimal), side by side in one run, median of ``--repeat`` loads each.

    python scripts/bench_load.py [--repeat 30] [--layers 200] [--width 256]

Programs: a small MLP lowered with et_tensorrt (one delegate), and a deep MLP lowered for ExecuTorch's
portable kernels (no delegate: every op is an instruction in the flatbuffer the verifier walks; its
weights are in a segment). Times cover ``Runner(...)`` only (Module::load: header, verification,
program tables); method loading (delegate init) is the same with and without verification.

A second table times the delegate's embedded-program load for the small MLP's partition: the safe loader on
the blob's GRAPH + WEIGHTS (format 2), the safe loader on the same program as a torch.export.save archive
(format 1), and ``torch.export.load`` of that archive (what the runtime called before format 2).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
from bench_common import median_per_call  # this folder (the script's own) is on sys.path


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

    return median_per_call(lambda: Runner(path, verify=verify), 1, repeat) * 1e3


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
    program_load_table(programs["MLP 8-16-4, et_tensorrt delegate"], args.repeat)


def program_load_table(pte: bytes, repeat: int) -> None:
    import io

    from et_tensorrt.embedded_program import load_program
    from et_tensorrt.format.blob import Blob, read_blob
    from et_tensorrt.inspection import delegate_blobs

    blob = read_blob(delegate_blobs(pte)[0])
    buf = io.BytesIO()
    torch.export.save(load_program(blob), buf)
    archive = buf.getvalue()
    v1 = Blob(io=blob.io, program=archive, version=1)
    loads = {
        "safe loader, GRAPH + WEIGHTS (format 2)": lambda: load_program(blob),
        "safe loader, torch.export.save archive (format 1)": lambda: load_program(v1),
        "torch.export.load of the archive (before format 2)": lambda: torch.export.load(io.BytesIO(archive)),
    }
    print()
    print("| embedded program load (MLP partition) | median ms |")
    print("|---|---:|")
    for name, load in loads.items():
        print(f"| {name} | {median_per_call(load, 1, repeat, warmup=1) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
