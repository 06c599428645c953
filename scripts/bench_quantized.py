"""Quantized programs, et_tensorrt beside XNNPACK in one run (issue 28).

The issue's four cases on its model sizes, our PT2E quantizer, and ExecuTorch's llama (tiny config) with 8da4w
(et_tensorrt.testing.quantized_models says how each is quantized):

| case | model |
|---|---|
| PT2E, XNNPACKQuantizer per channel | ConvNet, 5 convolutions, 8.6 MB of fp32 weights |
| PT2E, et_tensorrt's TensorRTQuantizer | the same ConvNet |
| torchao int8 weight-only (PerAxis(0)) | MLP 4 x Linear(1024, 1024), 16.8 MB |
| torchao int4 weight-only (PerGroup(32)) | the same MLP |
| torchao 8da4w (int4 PerGroup(32), dynamic int8 activations) | the same MLP |
| ExecuTorch llama, 8da4w | examples/models/llama, dim 64, 2 layers, vocab 128, KV cache |
| PT2E (both quantizers) on ResNet-18 | torchvision's code, random init, 46.8 MB (only where torchvision imports) |

Per case and backend: partitions and quantization nodes left on the host, the ``.pte`` size — ours engine-only
(no embedded program: what ships to a GPU) — over the same backend's fp32 ``.pte`` of the float model, the
lowering time (no build cache), and the error against the quantized eager model as a share of the output's
absmax (``vs eager``); for 8da4w also against its weight-only reading (``vs reading``: what TensorRT runs).
Ours run through ``Runner`` from a ``weights="both"`` lowering; **without a GPU that is the embedded program on
the CPU** (the same quantized weights and the arithmetic the engine runs), and ``onnx`` is onnxruntime on the
engine's ONNX against that program (``validate=True``). XNNPACK's programs run in ExecuTorch's runtime. The
llama row decodes 18 tokens one per call (ours with the KV cache in the delegate) and reports the worst step.

``--sizes``: instead, where int8 starts to pay: 3-layer MLPs of growing width and one of three layer shapes, fp32,
fp16 (``precision``) and int8 (PT2E ``TensorRTQuantizer`` W8A8, torchao int8 weight-only), each ``.pte`` lowered
with ``weights="both"`` (runs on the CPU machine: the fallback runs the embedded program) and ``"engine-only"``
(what ships to a GPU), with its engines' bytes (TensorRT's own serialization) beside it.

    python scripts/bench_quantized.py [--cases ...] [--json out.json]
    python scripts/bench_quantized.py --sizes [--widths 16,64,256,512,1024]
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field

import torch
from bench_common import xnnpack_edge  # this folder (the script's own) is on sys.path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import et_tensorrt  # noqa: E402
from et_tensorrt.inspection import inspect_bytes  # noqa: E402
from et_tensorrt.parity import error_share  # noqa: E402
from et_tensorrt.testing import decoders  # noqa: E402
from et_tensorrt.testing import quantized_models as qm  # noqa: E402

CONV_WIDTHS = (64, 128, 256, 256, 512)
MLP_WIDTH, MLP_LAYERS = 1024, 4
CASES = (
    "pt2e_xnnpack",
    "pt2e_tensorrt",
    "int8_weight_only",
    "int4_weight_only",
    "8da4w",
    "llama_8da4w",
    "resnet18_pt2e_xnnpack",
    "resnet18_pt2e_tensorrt",
)
RESNET = "resnet18_"
TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]


@dataclass
class Row:
    case: str
    backend: str
    weights_mb: float = 0.0  # the float model's weights
    partitions: int = 0
    quant_on_host: int = 0  # quantization nodes left for host kernels
    pte_mb: float | None = None
    fp32_pte_mb: float | None = None
    ratio: float | None = None
    lower_s: float | None = None
    vs_eager: float | None = None
    vs_reading: float | None = None
    onnx_error: float | None = None
    notes: list = field(default_factory=list)


def _models(case: str):
    torch.manual_seed(0)
    if case.startswith(RESNET):  # torchvision's code, random init; its C++ ops cannot load beside CPU torch
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_plugins"))
        import torchvision_op_schemas  # noqa: F401  (before torchvision: see that file)

        torchvision = importlib.import_module("torchvision")
        return torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    if case.startswith("pt2e"):
        return qm.ConvNet(CONV_WIDTHS).eval(), (torch.randn(1, 3, 64, 64),)
    return qm.Mlp(MLP_WIDTH, MLP_LAYERS).eval(), (torch.randn(8, MLP_WIDTH),)


def _weight_mb(model) -> float:
    return sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6


def _xnnpack_lower(program):
    return xnnpack_edge(program).to_executorch().buffer


def _measure(row: Row, lower) -> bytes:
    """Times ``lower()`` (the .pte's bytes) and fills the row's size, ratio over its fp32 .pte, partitions and
    quantization nodes left for host kernels from it."""
    t0 = time.perf_counter()
    pte = lower()
    row.lower_s = time.perf_counter() - t0
    row.pte_mb = len(pte) / 1e6
    row.ratio = row.pte_mb / row.fp32_pte_mb
    forward = inspect_bytes(pte).method("forward")
    row.partitions = len(forward.delegates)
    row.quant_on_host = sum(1 for op in forward.operators if "quantize" in op or "choose_qparams" in op)
    return pte


def _compare(row: Row, out: torch.Tensor, quantized, reference, inputs) -> None:
    """The row's errors of ``out`` against the quantized eager model and, where it differs, the reading."""
    with torch.no_grad():
        row.vs_eager = error_share(out, quantized(*inputs))
        if reference is not quantized:
            row.vs_reading = error_share(out, reference(*inputs))


def ours(row: Row, program, quantized, inputs, reference) -> Row:
    _measure(row, lambda: et_tensorrt.lower(program, weights="engine-only", cache=False))
    both = et_tensorrt.lower(program, weights="both", validate=True)
    (delegate,) = inspect_bytes(both).method("forward").delegates
    row.onnx_error = max(delegate.blob.metadata.get("validation_max_abs_error", {}).values(), default=None)
    _compare(row, et_tensorrt.Runner(both).run(list(inputs))[0], quantized, reference, inputs)
    return row


def xnnpack(row: Row, program, quantized, inputs, reference) -> Row:
    from et_tensorrt.testing import run_executorch

    try:
        pte = _measure(row, lambda: _xnnpack_lower(program))
    except Exception as e:  # noqa: BLE001
        row.notes.append(f"{type(e).__name__}: {str(e)[:200]}")
        return row
    _compare(row, run_executorch(pte, inputs)[0], quantized, reference, inputs)
    return row


def model_case(case: str) -> list[Row]:
    try:
        model, inputs = _models(case)
    except ImportError as e:
        return [Row(case, "et_tensorrt", notes=[f"not run: {e}"])]
    fp32_program = torch.export.export(model, inputs)
    fp32_ours = len(et_tensorrt.lower(fp32_program, weights="engine-only")) / 1e6
    fp32_xnnpack = len(_xnnpack_lower(fp32_program)) / 1e6
    quantized = qm.quantize(case.removeprefix(RESNET), model, inputs)
    reference = qm.reference(case.removeprefix(RESNET), quantized)
    program = torch.export.export(quantized, inputs)  # both backends lower this one program
    weights_mb = _weight_mb(model)
    return [
        ours(Row(case, "et_tensorrt", weights_mb, fp32_pte_mb=fp32_ours), program, quantized, inputs, reference),
        xnnpack(Row(case, "xnnpack", weights_mb, fp32_pte_mb=fp32_xnnpack), program, quantized, inputs, reference),
    ]


def _decode(decoder, pte) -> tuple[float, float]:
    steps = decoders.decode(decoder, pte, TOKENS)
    return max(s.max_error for s in steps), max(s.state_bytes for s in steps)


def llama_case() -> list[Row]:
    float_decoder = decoders.executorch_llama()
    weights_mb = _weight_mb(float_decoder.eager)
    fp32_ours = len(et_tensorrt.lower(float_decoder.program, weights="engine-only")) / 1e6
    fp32_xnnpack = len(_xnnpack_lower(float_decoder.program)) / 1e6
    rows = []
    decoder = decoders.executorch_llama(quantize="8da4w")  # eager: the weight-only reading
    row = Row("llama_8da4w", "et_tensorrt", weights_mb, fp32_pte_mb=fp32_ours)
    _measure(row, lambda: et_tensorrt.lower(decoder.program, weights="engine-only", cache=False))
    both = et_tensorrt.lower(decoder.program, weights="both")
    error, state_bytes = _decode(decoder, both)
    row.vs_reading = error  # absolute: logits of a random-weight model
    row.notes.append(
        f"{len(TOKENS)} tokens, worst abs error vs the weight-only reading; state bytes/step {state_bytes}"
    )
    rows.append(row)

    xdecoder = decoders.executorch_llama(quantize="8da4w")
    xrow = Row("llama_8da4w", "xnnpack", weights_mb, fp32_pte_mb=fp32_xnnpack)
    pte = _measure(xrow, lambda: _xnnpack_lower(xdecoder.program))
    from executorch.runtime import Runtime

    # Runner loads through ExecuTorch's runtime library, where XnnpackBackend registers only once ExecuTorch's own
    # runtime is loaded (the other cases' run_executorch did that; run alone, the decode failed with error 32)
    Runtime.get()
    xrow.vs_reading, _ = _decode(xdecoder, pte)
    xrow.notes.append("vs the weight-only reading: XNNPACK quantizes activations dynamically")
    rows.append(xrow)
    return rows


SIZE_WIDTHS = (16, 64, 256, 512, 1024)
SIZE_LAYERS = 3
SIZE_CASES = ("fp32", "fp16", "pt2e_tensorrt", "int8_weight_only")  # fp16: the fp32 model, precision="fp16"


def _engine_bytes(pte: bytes) -> int:
    blobs = [d.blob for d in inspect_bytes(pte).method("forward").delegates if d.ours]
    return sum(len(b.engine) if b.named_engine is None else b.named_engine.nbytes for b in blobs)


def _size_models(widths):
    """(name, model, inputs): 3 x Linear(w, w) per width, and a 3-layer MLP of three shapes (16 -> 64 -> 32 -> 10)."""
    for width in widths:
        torch.manual_seed(0)
        yield f"3 x Linear({width}, {width})", qm.Mlp(width, SIZE_LAYERS).eval(), (torch.randn(8, width),)
    torch.manual_seed(0)
    linear, relu = torch.nn.Linear, torch.nn.ReLU
    model = torch.nn.Sequential(linear(16, 64), relu(), linear(64, 32), relu(), linear(32, 10))
    yield "Linear 16-64-32-10", model.eval(), (torch.randn(8, 16),)


def size_rows(widths) -> list[dict]:
    """Per model and case: the weights' bytes in fp32, and per ``weights`` mode the .pte's and its engines' bytes."""
    rows = []
    for name, model, inputs in _size_models(widths):
        for case in SIZE_CASES:
            quantized = model if case in ("fp32", "fp16") else qm.quantize(case, model, inputs)
            program = torch.export.export(quantized, inputs)
            precision = "fp16" if case == "fp16" else "fp32"
            row = {"model": name, "case": case, "weights_bytes": int(_weight_mb(model) * 1e6)}
            for mode in ("both", "engine-only"):
                pte = et_tensorrt.lower(program, weights=mode, precision=precision, cache=False)
                row[mode] = len(pte)
                row[f"{mode} engine"] = _engine_bytes(pte)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def size_markdown(rows: list[dict]) -> str:
    lines = [
        "| model | fp32 weights (B) | case | .pte both (B) | .pte engine-only (B) | engine (B) | vs fp32 |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    fp32 = {r["model"]: r["engine-only"] for r in rows if r["case"] == "fp32"}
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['weights_bytes']:,} | {r['case']} | {r['both']:,} | {r['engine-only']:,} "
            f"| {r['engine-only engine']:,} | {r['engine-only'] / fp32[r['model']]:.2f} |"
        )
    return "\n".join(lines)


def markdown(rows: list[Row]) -> str:
    def f(v, fmt=".2f"):
        return "–" if v is None else format(v, fmt)

    def pct(v):
        return "–" if v is None else f"{100 * v:.2f} %"

    lines = [
        "| case | backend | weights (MB) | partitions | Q/DQ on host | .pte (MB) | fp32 .pte (MB) | ratio | lower (s) "
        "| vs eager | vs reading | onnx vs program |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        reading = f(r.vs_reading, ".2g") if r.case == "llama_8da4w" else pct(r.vs_reading)
        lines.append(
            f"| {r.case} | {r.backend} | {f(r.weights_mb, '.1f')} | {r.partitions} | {r.quant_on_host} | {f(r.pte_mb)} "
            f"| {f(r.fp32_pte_mb)} | {f(r.ratio)} | {f(r.lower_s, '.1f')} | {pct(r.vs_eager)} | {reading} "
            f"| {f(r.onnx_error, '.1g')} |"
        )
    notes = [f"- {r.case} / {r.backend}: {n}" for r in rows for n in r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", type=str, default="")
    parser.add_argument("--sizes", action="store_true", help="the int8 size sweep of 3-layer MLPs instead")
    parser.add_argument("--widths", default=",".join(map(str, SIZE_WIDTHS)))
    args = parser.parse_args()
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    if args.sizes:
        print(size_markdown(size_rows([int(w) for w in args.widths.split(",")])))
        return
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("ET_TENSORRT_CACHE_DIR", os.path.join(tmp, "cache"))
        for case in args.cases.split(","):
            new = llama_case() if case == "llama_8da4w" else model_case(case)
            for r in new:
                print(json.dumps(asdict(r)), flush=True)
            rows += new
    print()
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([asdict(r) for r in rows], fh, indent=1)


if __name__ == "__main__":
    main()
