"""Dynamic-shape rows, et_tensorrt and XNNPACK side by side in one run: partitions, delegated-node ratio,
lowering seconds, and whether the program runs and matches eager PyTorch at several sizes (including 1).

    python scripts/bench_dynamic.py                       # all rows but swin_v2_t (~15 min on 2 busy cores)
    python scripts/bench_dynamic.py --rows bert_batch,resnet18 --no-xnnpack
    python scripts/bench_dynamic.py --rows swin_v2_t      # ExecuTorch's models-suite swin, dynamic H/W (slow)
    python scripts/bench_dynamic.py --assume-ops aten.any.dim,aten.cumsum.default --markdown

Models are random-init (tiny `transformers` configs, torchvision with BatchNorm statistics estimated first);
nothing is downloaded. On a machine without a GPU our partitions run through the PyTorch program embedded
in each blob: parity checks partitioning, lowering and the runtime, not TensorRT's numbers (engines are
still built, which is part of the lowering time). Delegated ratio: ExecuTorch's `get_delegation_info`
(delegated / all call nodes of the edge program), the same count for both flows.

`--assume-ops` adds ops to the partitioner's table in this process only (an experiment, e.g. the op
coverage of issue 13 before it lands); rows measured so are marked `*` and the ops listed.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import bench_models  # this folder (the script's own) is on sys.path
import torch
from bench_common import xnnpack_edge
from torch.export import Dim


@dataclass
class Case:
    """A model, its example inputs, its dynamic shapes and the sizes to run it at."""

    model: torch.nn.Module
    inputs: tuple
    dynamic_shapes: tuple
    make_inputs: Callable[..., tuple]  # (sizes) -> inputs
    run_sizes: list = field(default_factory=list)  # kwargs of make_inputs


# The zoo's helpers (scripts/bench_models.py): the torchvision import that declares its op schemas first,
# BatchNorm statistics estimated from random batches, the tiny transformer models.
_torchvision = bench_models._import_torchvision
_estimate_batch_norm = bench_models._estimate_batch_norm


def resnet18() -> Case:
    torch.manual_seed(0)
    model = _estimate_batch_norm(_torchvision().models.resnet18(weights=None), (4, 3, 224, 224))
    make = lambda batch=2: (torch.randn(batch, 3, 224, 224),)  # noqa: E731
    return Case(model, make(), ({0: Dim("batch", min=1, max=8)},), make, [dict(batch=b) for b in (1, 3, 8)])


def swin_v2_t() -> Case:
    """As ExecuTorch's models suite declares it (backends/test/suite/models/test_torchvision.py)."""
    torch.manual_seed(0)
    model = _torchvision().models.swin_v2_t().eval()
    make = lambda h=224, w=224: (torch.randn(1, 3, h, w),)  # noqa: E731
    dynamic = ({2: Dim("height", min=1, max=16) * 16, 3: Dim("width", min=1, max=16) * 16},)
    return Case(model, make(), dynamic, make, [dict(h=224, w=224), dict(h=160, w=192)])


def _tokens(model, names, key, seq_names=None, mask=False, dynamic_seq=True, **fixed) -> Case:
    """Token inputs (``names``) of shape (batch, seq); ``seq_names``: a seq Dim name per input."""
    seq_names = seq_names or ["seq"] * len(names)

    def make(batch=2, seq=8, **seqs):
        out = []
        for name, seq_name in zip(names, seq_names):
            s = seqs.get(seq_name, seq)
            if name == "attention_mask":  # a padded batch: the last position of the first sequence is masked
                m = torch.ones(batch, s, dtype=torch.int64)
                m[0, s - 1 :] = 0 if s > 1 else 1
                out.append(m)
            else:
                out.append(torch.randint(0, bench_models.TINY["vocab"], (batch, s)))
        return tuple(out)

    batch = Dim("batch", min=1, max=8)
    seq_dims = {n: Dim(n, min=1, max=32) for n in dict.fromkeys(seq_names)}
    # forward(*args): one entry, holding the spec of every positional tensor
    dynamic = (tuple({0: batch, **({1: seq_dims[s]} if dynamic_seq else {})} for s in seq_names),)
    wrapped = bench_models._HFWrapper(model.eval(), names, key, **fixed)
    if dynamic_seq:
        sizes = [dict(batch=1, seq=1), dict(batch=3, seq=5), dict(batch=8, seq=32)]
    else:
        sizes = [dict(batch=b) for b in (1, 3, 8)]
    return Case(wrapped, make(), dynamic, make, sizes)


def _zoo():
    """The model zoo's tiny transformer models (transformers imports torchvision when it is installed)."""
    bench_models._before_transformers()
    return bench_models


def bert_batch() -> Case:
    return _tokens(
        _zoo().bert_model(), ("input_ids", "attention_mask"), "last_hidden_state", mask=True, dynamic_seq=False
    )


def bert() -> Case:
    return _tokens(_zoo().bert_model(), ("input_ids", "attention_mask"), "last_hidden_state", mask=True)


def gpt2() -> Case:
    return _tokens(_zoo().gpt2_model(), ("input_ids",), "logits", use_cache=False)


def t5() -> Case:
    return _tokens(
        _zoo().t5_model(),
        ("input_ids", "decoder_input_ids"),
        "logits",
        seq_names=["seq", "target_seq"],
        use_cache=False,
    )


def llama() -> Case:
    return _tokens(_zoo().llama_model(), ("input_ids",), "logits", use_cache=False)


ROWS = {
    "resnet18": ("resnet18, batch 1..8", resnet18),
    "bert_batch": ("BERT, batch 1..8", bert_batch),
    "bert": ("BERT, batch 1..8 x seq 1..32", bert),
    "gpt2": ("GPT-2 (eager attention), batch x seq", gpt2),
    "t5": ("T5, batch x seq x target seq", t5),
    "llama": ("Llama, batch x seq", llama),
    "swin_v2_t": ("swin_v2_t, H, W in 16..256 (models suite)", swin_v2_t),
}
DEFAULT_ROWS = [r for r in ROWS if r != "swin_v2_t"]


@dataclass
class Result:
    partitions: int | str = "-"
    ratio: str = "-"
    lower_s: str = "-"
    runs: str = "-"
    host: str = ""  # what stays on the host (et_tensorrt: op -> count of the largest groups)


def _ratio(edge) -> tuple[int, str]:
    from executorch.devtools.backend_debug import get_delegation_info
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    gm = edge.exported_program().graph_module
    info = get_delegation_info(gm)
    total = info.num_delegated_nodes + info.num_non_delegated_nodes
    ratio = info.num_delegated_nodes / total if total else 0.0
    return len(get_lowered_submodules(gm)), f"{ratio:.3f} ({info.num_delegated_nodes}/{total})"


def _compare(got: list, expected) -> float:
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    worst = 0.0
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            raise AssertionError(f"shape {tuple(g.shape)} != eager {tuple(e.shape)}")
        worst = max(worst, float((g.float() - e.float()).abs().max()) if e.numel() else 0.0)
    return worst


def _runs(case: Case, run) -> str:
    cells = []
    for sizes in case.run_sizes:
        label = "x".join(str(v) for v in sizes.values())
        inputs = case.make_inputs(**sizes)
        try:
            with torch.no_grad():
                expected = case.model(*inputs)
            err = _compare(run(inputs), expected)
            cells.append(f"{label}: {'ok' if err <= 1e-3 else 'MISMATCH'} ({err:.1e})")
        except Exception as exc:  # noqa: BLE001 - a row records what failed, the run goes on
            cells.append(f"{label}: FAIL ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
    return "; ".join(cells)


def lower_et_tensorrt(case: Case, ep) -> Result:
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    import et_tensorrt
    from et_tensorrt.backend import (
        EtTensorRTBackend,  # noqa: F401  (registers the backend by name)
        preprocess,
    )

    fallbacks = preprocess.stats["fallbacks"]
    start = time.perf_counter()
    # A partition TensorRT cannot build is left to PyTorch (and counted) rather than failing the row.
    partitioner = et_tensorrt.TensorRTPartitioner(compile_specs={"et_tensorrt.pass_through_build_failures": "0"})
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    pte = edge.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
    ).buffer
    seconds = time.perf_counter() - start
    partitions, ratio = _ratio(edge)
    host: dict[str, int] = {}
    for name, reason in partitioner.report.host_nodes.items():
        op = next(d.op for d in partitioner.report.nodes if d.name == name)
        key = f"{op.replace('aten.', '')} ({reason.code})"
        host[key] = host.get(key, 0) + 1
    top = ", ".join(f"{k} x{v}" for k, v in sorted(host.items(), key=lambda kv: -kv[1])[:4])
    if preprocess.stats["fallbacks"] > fallbacks:
        top += f"; {preprocess.stats['fallbacks'] - fallbacks} engine build(s) failed (PyTorch runs them)"
    runner = et_tensorrt.Runner(pte)
    return Result(partitions, ratio, f"{seconds:.1f}", _runs(case, lambda x: runner.run(list(x))), top)


def lower_xnnpack(case: Case, ep) -> Result:
    from executorch.runtime import Runtime

    start = time.perf_counter()
    edge = xnnpack_edge(ep)
    pte = edge.to_executorch().buffer
    seconds = time.perf_counter() - start
    partitions, ratio = _ratio(edge)
    program = Runtime.get().load_program(pte)  # a Method does not keep its Program alive: hold it
    method = program.load_method("forward")
    return Result(partitions, ratio, f"{seconds:.1f}", _runs(case, lambda x: method.execute(list(x))))


def assume_ops(names: list[str]) -> None:
    """Experiment only: let the partitioner delegate ``names`` (the engine builder converts what ONNX has)."""
    from et_tensorrt.partition import partitioner, supported_ops

    extra = frozenset(names)
    supported_ops.SUPPORTED_OPS = supported_ops.SUPPORTED_OPS | extra
    partitioner.SUPPORTED_OPS = supported_ops.SUPPORTED_OPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help=f"comma list of {', '.join(ROWS)}")
    parser.add_argument("--no-xnnpack", action="store_true")
    parser.add_argument("--assume-ops", default="", help="comma list of op names to add to the op table")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore")
    assumed = [o for o in args.assume_ops.split(",") if o]
    if assumed:
        assume_ops(assumed)
    header = ["model", "flow", "partitions", "delegated ratio", "lower s", "runs (size: parity)", "on the host"]
    table = []
    for key in args.rows.split(","):
        title, build = ROWS[key]
        case = build()
        start = time.perf_counter()
        ep = torch.export.export(case.model, case.inputs, dynamic_shapes=case.dynamic_shapes)
        export_s = time.perf_counter() - start
        print(f"== {title}: exported in {export_s:.1f} s", flush=True)
        flows = [("et_tensorrt" + ("*" if assumed else ""), lower_et_tensorrt)]
        if not args.no_xnnpack:
            flows.append(("xnnpack", lower_xnnpack))
        for flow, lower in flows:
            try:
                r = lower(case, ep)
            except Exception as exc:  # noqa: BLE001
                r = Result(runs=f"lowering FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            row = [title, flow, str(r.partitions), r.ratio, r.lower_s, r.runs, r.host]
            table.append(row)
            print("  " + " | ".join(row[1:]), flush=True)
    if args.markdown:
        print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(c.replace("|", "/") for c in row) + " |")
        if assumed:
            print(f"\n`*` op table extended in-process with: {', '.join(assumed)}")


if __name__ == "__main__":
    main()
