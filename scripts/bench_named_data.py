"""What checking named data costs at load: a program saved with ``named_data="ptd"``, loaded with its .ptd through
``Runner`` and its method loaded (where each delegate checks every engine and weight it reads against the CRC-32
its blob records), with the check (the default) and without (``ET_TENSORRT_TRUST_NAMED_DATA=1``), alternately,
median of ``--repeat`` loads each; warm (the .ptd in the page cache) and cold (its pages dropped first with
``posix_fadvise(DONTNEED)``, so the load reads it from disk).

    python scripts/bench_named_data.py [--layers 4] [--width 4096] [--repeat 5]

The model is ``--layers`` Linear(width, width) layers (64 MiB of float32 weights each at width 4096); the .ptd
holds the weights and the engine TensorRT-RTX built for them. No GPU is needed: the engine is checked, not
deserialized, and the partition runs with PyTorch. The last line is a JSON summary (ms per GB of .ptd).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch


def save(folder: Path, layers: int, width: int):
    import et_tensorrt

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).eval()
    x = torch.randn(2, width)
    return et_tensorrt.save(folder / "big.pte", model, (x,), min_block_size=1, named_data="ptd", cache=False)


def drop_pages(path: str) -> None:
    """Evict ``path``'s pages from the page cache (this file only: other processes are not affected)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_ms(saved, trusted: bool, cold: bool) -> float:
    """Runner construction and the method's load (its delegates' init), in ms."""
    import et_tensorrt
    from et_tensorrt.runtime.runner import TRUST_NAMED_DATA_ENV

    if trusted:
        os.environ[TRUST_NAMED_DATA_ENV] = "1"
    else:
        os.environ.pop(TRUST_NAMED_DATA_ENV, None)
    if cold:
        drop_pages(saved.data_path)
    start = time.perf_counter()
    runner = et_tensorrt.Runner(saved.path, data_path=saved.data_path)
    runner._native.num_inputs("forward")  # loads the method: every delegate's init
    elapsed = (time.perf_counter() - start) * 1e3
    del runner
    return elapsed


def main() -> None:
    import logging

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)  # one fallback line per load otherwise
    with tempfile.TemporaryDirectory() as tmp:
        saved = save(Path(tmp), args.layers, args.width)
        gb = saved.ptd_bytes / 1e9
        rows = {}
        for cold in (False, True):
            times = {True: [], False: []}
            load_ms(saved, False, cold)  # warm-up (kernels, the embedded program's first load)
            for _ in range(args.repeat):
                for trusted in (False, True):
                    times[trusted].append(load_ms(saved, trusted, cold))
            checked, trusted = statistics.median(times[False]), statistics.median(times[True])
            rows["cold" if cold else "warm"] = {
                "checked_ms": round(checked, 1),
                "trusted_ms": round(trusted, 1),
                "check_ms": round(checked - trusted, 1),
                "check_ms_per_gb": round((checked - trusted) / gb, 1),
            }
        print(f".ptd: {saved.ptd_bytes / 2**20:.0f} MiB ({args.layers} x Linear({args.width}, {args.width}) + engine)")
        print("| page cache | load, checked (ms) | load, trusted (ms) | check (ms) | check per GB (ms) |")
        print("|---|---:|---:|---:|---:|")
        for name, r in rows.items():
            print(f"| {name} | {r['checked_ms']} | {r['trusted_ms']} | {r['check_ms']} | {r['check_ms_per_gb']} |")
        print(json.dumps({"ptd_bytes": saved.ptd_bytes, "cpus": os.cpu_count(), **rows}))


if __name__ == "__main__":
    main()
