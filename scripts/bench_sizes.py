""".pte size per ``weights`` mode next to XNNPACK's, and host memory after loading a .pte.

Sizes: resnet18 and vit_b_16 (torchvision code, random init) and a weight-heavy MLP (4 x Linear(1024, 1024)),
lowered with ``weights="both"`` (engine + embedded program), ``"refit"`` (weight-stripped engine refitted at
init from the program's weights) and ``"engine-only"``, and with XNNPACK; ``refit / weights`` is the .pte over
the model's own weight bytes (parameters + buffers; target <= 1.15), ``raw`` the REFIT_MAP bytes stored raw.

RSS: a child process imports the runtime, loads a ``weights="both"`` MLP .pte with ``Runner`` and runs it once
on the host (the PyTorch fallback: no GPU here); RSS above the child's baseline (after imports) is reported
after loading and after the first run, over the .pte's size (target <= 1.1). ``--rss-only`` with
``PYTHONPATH`` pointing at another checkout measures that tree (before/after numbers).

    python scripts/bench_sizes.py [--models mlp,resnet18,vit_b_16] [--rss-only]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_plugins"))

MODES = ("both", "refit", "engine-only")


class MLPStack:
    """4 x Linear(1024, 1024) with ReLU: 16.8 MB of fp32 weights."""

    @staticmethod
    def make():
        import torch

        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers).eval(), (torch.randn(8, 1024),)


def _torchvision(name: str):
    def make():
        import torch
        import torchvision
        import torchvision_op_schemas  # noqa: F401  (torchvision's C++ ops cannot load beside CPU torch)

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        return model, (torch.randn(1, 3, 224, 224),)

    return make


MODELS = {"mlp": MLPStack.make, "resnet18": _torchvision("resnet18"), "vit_b_16": _torchvision("vit_b_16")}


def weight_bytes(model) -> int:
    tensors = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def refit_raw_bytes(data: bytes) -> int:
    from et_tensorrt.inspection import inspect_bytes

    return sum(
        int(d.blob.metadata.get("refit_raw_bytes", 0))
        for d in inspect_bytes(data).method("forward").delegates
        if d.ours
    )


def sizes(names: list[str]) -> list[dict]:
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from et_tensorrt import lower
    from et_tensorrt.errors import EngineBuildError

    rows = []
    for name in names:
        model, args = MODELS[name]()
        ep = torch.export.export(model, args)
        row = {"model": name, "weights_MB": weight_bytes(model) / 1e6}
        for mode in MODES:
            try:
                data = lower(ep, weights=mode)
            except EngineBuildError as e:  # refit without a GPU: TensorRT-RTX cannot build a stripped engine
                row[mode] = None
                row.setdefault("notes", []).append(f"{mode}: {str(e)[:120]}")
                continue
            row[mode] = len(data) / 1e6
            if mode == "refit":
                row["raw_MB"] = refit_raw_bytes(data) / 1e6
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        row["xnnpack"] = (
            len(to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer) / 1e6
        )
        row["refit/weights"] = row["refit"] / row["weights_MB"] if row["refit"] else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


_RSS_CHILD = r"""
import gc, json, sys, torch
from et_tensorrt.runtime.runner import Runner

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

x = torch.randn(8, 1024)
warm = Runner(sys.argv[2])  # pays one-time costs (kernels, imports, the executor's code) before the baseline
warm.run([x])
del warm
gc.collect()
base = rss()
runner = Runner(sys.argv[1])
runner._native.num_inputs("forward")  # loads the method: every delegate initialized
loaded = rss()
runner.run([x])
ran = rss()
print(json.dumps({"base": base, "loaded": loaded, "ran": ran}))
"""


def rss(tmp: str) -> dict:
    """RSS of a child process around loading (and running once) a weights="both" MLP stack .pte."""
    import torch

    from et_tensorrt import lower

    model, args = MLPStack.make()
    path = os.path.join(tmp, "mlp_both.pte")
    warm = os.path.join(tmp, "warm.pte")
    with open(path, "wb") as f:
        f.write(lower(torch.export.export(model, args)))
    with open(warm, "wb") as f:  # a small program run first, so one-time allocations are in the baseline
        f.write(lower(torch.export.export(torch.nn.Linear(1024, 1024).eval(), args), min_block_size=1))
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, path, warm],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "ET_TENSORRT_FALLBACK": "pytorch"},
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    size = os.path.getsize(path)
    row = {"pte_MB": size / 1e6, "loaded_MB": (r["loaded"] - r["base"]) / 1e6, "ran_MB": (r["ran"] - r["base"]) / 1e6}
    row["loaded/pte"] = row["loaded_MB"] / row["pte_MB"]
    row["ran/pte"] = row["ran_MB"] / row["pte_MB"]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,resnet18,vit_b_16")
    parser.add_argument("--rss-only", action="store_true")
    args = parser.parse_args()
    import torchvision_op_schemas  # noqa: F401  (before anything imports torchvision, see that file)

    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("ET_TENSORRT_CACHE_DIR", os.path.join(tmp, "cache"))
        memory = rss(tmp)
        rows = [] if args.rss_only else sizes(args.models.split(","))
    print()
    if rows:
        print("| model | weights (MB) | both | refit | engine-only | XNNPACK | refit / weights | refit raw (MB) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")

        def mb(v, fmt=".1f"):
            return "n/a" if v is None else format(v, fmt)

        for r in rows:
            print(
                f"| {r['model']} | {r['weights_MB']:.1f} | {mb(r['both'])} | {mb(r['refit'])} | "
                f"{mb(r['engine-only'])} | {r['xnnpack']:.1f} | {mb(r['refit/weights'], '.3f')} | "
                f"{mb(r.get('raw_MB'), '.2f')} |"
            )
        print()
    print("| .pte (MB) | RSS after load (MB) | after first run (MB) | load / .pte | run / .pte |")
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {memory['pte_MB']:.1f} | {memory['loaded_MB']:.1f} | {memory['ran_MB']:.1f} | "
        f"{memory['loaded/pte']:.2f} | {memory['ran/pte']:.2f} |"
    )


if __name__ == "__main__":
    main()
