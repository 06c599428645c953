"""Lowering time of a small MLP and conv net, split into what can be measured separately:

  export      torch.export.export
  partition   to_edge + TensorRTPartitioner analysis (explain on the edge program)
  onnx        ONNX export inside the backend's preprocess (blob METADATA onnx_seconds, summed)
  engine      TensorRT engine build (blob METADATA build_seconds, summed)
  lower       the whole et_tensorrt.lower() call (to_edge, partition, preprocess, to_executorch)
  rest        lower - onnx - engine: to_edge, partitioning, edge->aten, blob writing, serialization

then the same lowering again in the same process: a cache hit (the engine comes from
ET_TENSORRT_CACHE_DIR, which the cold run starts empty; the ONNX export still runs, its bytes are
the cache key).

    python scripts/bench_lowering.py
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_runtime import MODELS  # noqa: E402


def blob_seconds(data: bytes):
    from et_tensorrt.inspection import inspect_bytes

    ours = [d for d in inspect_bytes(data).method("forward").delegates if d.ours]
    onnx = sum(float(d.blob.metadata.get("onnx_seconds", 0.0)) for d in ours)
    build = sum(float(d.blob.metadata.get("build_seconds", 0.0)) for d in ours)
    hits = sum(bool(d.blob.metadata.get("cache_hit")) for d in ours)
    return len(ours), onnx, build, hits


def main():
    cache = tempfile.mkdtemp(prefix="et_trt_cold_cache_")
    os.environ["ET_TENSORRT_CACHE_DIR"] = cache  # empty: the first lowering builds every engine
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    from executorch.exir import to_edge

    from et_tensorrt import explain, lower
    from et_tensorrt import trt

    # Pay one-time imports (exir, onnx exporter, TensorRT) before timing anything.
    t = time.perf_counter()
    warm = torch.export.export(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),))
    lower(warm, min_block_size=1)
    warmup = time.perf_counter() - t

    rows = []
    for name, (cls, shape) in MODELS.items():
        torch.manual_seed(0)
        model = cls().eval()
        x = torch.randn(*shape)
        t = time.perf_counter()
        ep = torch.export.export(model, (x,))
        export_s = time.perf_counter() - t
        t = time.perf_counter()
        explain(to_edge(ep).exported_program(), min_block_size=1)
        partition_s = time.perf_counter() - t
        runs = []
        for label in ("cold", "cache hit"):
            t = time.perf_counter()
            data = lower(ep, min_block_size=1)
            total = time.perf_counter() - t
            n, onnx, build, hits = blob_seconds(data)
            runs.append((label, total, onnx, build, n, hits))
        rows.append((name, export_s, partition_s, runs))

    print(f"torch {torch.__version__}, {trt.flavour()} {trt.version()}, {os.cpu_count()} CPU(s), "
          f"CUDA {'yes' if torch.cuda.is_available() else 'no'}; one-time imports + first lowering {warmup:.1f} s")
    header = (f"{'model':<22}{'run':<11}{'export':>8}{'partition':>11}{'onnx':>8}{'engine':>8}"
              f"{'rest':>8}{'lower':>8}{'engines':>9}{'hits':>6}{'vs cold':>9}")
    print(header)
    print("-" * len(header))
    for name, export_s, partition_s, runs in rows:
        cold_total = runs[0][1]
        for label, total, onnx, build, n, hits in runs:
            print(f"{name:<22}{label:<11}{export_s:>8.2f}{partition_s:>11.2f}{onnx:>8.2f}{build:>8.3f}"
                  f"{total - onnx - build:>8.2f}{total:>8.2f}{n:>9}{hits:>6}{total / cold_total:>8.2f}x")
    print("seconds; 'partition' is measured apart from 'lower' (which partitions again inside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
