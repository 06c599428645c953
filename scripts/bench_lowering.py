"""Lowering time, cold vs build-cache hit, for the model zoo's models (scripts/bench_models.py's static rows:
random weights, nothing downloaded), ExecuTorch's llama and a 4x1024 MLP stack:

  preprocess  seconds inside the backend's preprocess (every partition, summed): the part the build cache
              can save (ONNX export, validation, engine build) plus what it cannot (edge->aten, blob writing)
  lower       the whole et_tensorrt.lower() call (to_edge, partitioning, preprocess, to_executorch)

Each model is exported and lowered twice in one process with ET_TENSORRT_CACHE_DIR pointing at a fresh folder:
"cold" builds every engine, "hit" exports the same model again and lowers that (as a script run again in one
notebook does; ExecuTorch's llama numbers its position's ``.item()`` symbols otherwise the second time). The
backend's preprocess is timed by wrapping it, so the script measures any checkout of et_tensorrt (run it with
PYTHONPATH=<checkout>).

    python scripts/bench_lowering.py                      # every model
    python scripts/bench_lowering.py --models mlp,resnet18 --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# a model: () -> (its module, () -> an ExportedProgram of it)
Model = Callable[[], tuple[torch.nn.Module, Callable[[], torch.export.ExportedProgram]]]


def _exporter(model: torch.nn.Module, args: tuple):
    def export():
        with torch.no_grad():
            return torch.export.export(model, args)

    return model, export


def _zoo(name: str) -> Model:
    """A static row of the model zoo (scripts/bench_models.py: random init, BatchNorm statistics estimated)."""

    def build():
        from bench_models import ROWS

        row = next(r for r in ROWS if r.name == name and not r.dynamic)
        zoo = row.build()
        return _exporter(zoo.model.eval(), zoo.inputs)

    return build


def _mlp():
    torch.manual_seed(0)
    layers = [m for _ in range(4) for m in (torch.nn.Linear(1024, 1024), torch.nn.ReLU())]
    return _exporter(torch.nn.Sequential(*layers).eval(), (torch.randn(8, 1024),))


def _executorch_llama():
    """ExecuTorch's llama (examples/models/llama, use_kv_cache, 2 layers of 64), its prompt method: a dynamic
    number of tokens at a position it reads with ``.item()``."""
    from et_tensorrt.testing import decoders

    decoder = decoders.executorch_llama(dynamic=True)
    return decoder.eager, lambda: decoders.prefill_decode(decoder)["prefill"]


MODELS: dict[str, Model] = {
    "mlp 4x1024": _mlp,
    "executorch llama (prefill)": _executorch_llama,
    "bert tiny": _zoo("bert"),
    "gpt2 tiny": _zoo("gpt2"),
    "mobilenet_v3_small": _zoo("mobilenet_v3_small"),
    "resnet18": _zoo("resnet18"),
    "vit_b_16": _zoo("vit_b_16"),
}


class _PreprocessTimer:
    """Wraps EtTensorRTBackend's preprocess entries (ExecuTorch calls them by class: ``preprocess_multimethod``
    where the backend has it, which runs the partitions itself, else ``preprocess``) and sums their wall time."""

    def __init__(self):
        from et_tensorrt.backend.preprocess import EtTensorRTBackend

        self.seconds = 0.0
        if "preprocess_multimethod" in vars(EtTensorRTBackend):
            real = EtTensorRTBackend.preprocess_multimethod  # bound to the class
            EtTensorRTBackend.preprocess_multimethod = classmethod(lambda cls, *a: self._timed(real, *a))
        else:
            real_one = EtTensorRTBackend.preprocess
            EtTensorRTBackend.preprocess = staticmethod(lambda *a: self._timed(real_one, *a))

    def _timed(self, real, *args):
        start = time.perf_counter()
        try:
            return real(*args)
        finally:
            self.seconds += time.perf_counter() - start


def _hits(data: bytes) -> tuple[int, int]:
    from et_tensorrt.inspection import inspect_bytes

    ours = [d for d in inspect_bytes(data).method("forward").delegates if d.ours]
    hits = sum(d.blob.metadata.get("cache") == "hit" or bool(d.blob.metadata.get("cache_hit")) for d in ours)
    return len(ours), hits


def measure(name: str, build: Model, timer: _PreprocessTimer) -> dict:
    from et_tensorrt import lower

    model, export = build()
    row = {"model": name, "weights_mb": sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6}
    for run in ("cold", "hit"):
        ep = export()
        timer.seconds = 0.0
        start = time.perf_counter()
        data = lower(ep, min_block_size=1)
        row[f"{run}_lower_s"] = time.perf_counter() - start
        row[f"{run}_preprocess_s"] = timer.seconds
        row["partitions"], row[f"{run}_hits"] = _hits(data)
    row["preprocess_speedup"] = row["cold_preprocess_s"] / row["hit_preprocess_s"]
    row["lower_speedup"] = row["cold_lower_s"] / row["hit_lower_s"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="comma-separated names (prefixes) of: " + ", ".join(MODELS))
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args()
    chosen = [n for n in MODELS if not args.models or any(n.startswith(p.strip()) for p in args.models.split(","))]
    if not chosen:
        parser.error(f"--models {args.models!r} matches none of {', '.join(MODELS)}")

    os.environ["ET_TENSORRT_CACHE_DIR"] = tempfile.mkdtemp(prefix="et_trt_bench_cache_")  # cold: empty
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    import et_tensorrt
    from et_tensorrt import lower, trt

    start = time.perf_counter()  # one-time imports (exir, the ONNX exporter, TensorRT) before timing
    lower(torch.export.export(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)), min_block_size=1)
    warmup = time.perf_counter() - start
    timer = _PreprocessTimer()

    rows = []
    for name in chosen:
        rows.append(measure(name, MODELS[name], timer))
        r = rows[-1]
        print(
            f"{name}: preprocess {r['cold_preprocess_s']:.2f} -> {r['hit_preprocess_s']:.2f} s, "
            f"lower {r['cold_lower_s']:.2f} -> {r['hit_lower_s']:.2f} s",
            file=sys.stderr,
            flush=True,
        )

    print(
        f"et_tensorrt from {os.path.dirname(et_tensorrt.__file__)}; torch {torch.__version__}, "
        f"{trt.flavour()} {trt.version()}, {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}; "
        f"imports + first lowering {warmup:.1f} s"
    )
    header = ("model", "weights MB", "parts", "hits", "preprocess cold", "hit", "x", "lower cold", "hit", "x")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        cells = (
            r["model"],
            f"{r['weights_mb']:.1f}",
            r["partitions"],
            r["hit_hits"],
            f"{r['cold_preprocess_s']:.2f}",
            f"{r['hit_preprocess_s']:.2f}",
            f"{r['preprocess_speedup']:.1f}",
            f"{r['cold_lower_s']:.2f}",
            f"{r['hit_lower_s']:.2f}",
            f"{r['lower_speedup']:.2f}",
        )
        print("| " + " | ".join(map(str, cells)) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average": os.getloadavg()[0], "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
