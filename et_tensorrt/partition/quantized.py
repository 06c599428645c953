"""Quantized programs in the partitioner: Q/DQ chains go into the engine with the ops they feed, or the
lowering stops before any work.

Each quantization node gets a verdict (``et_tensorrt.quantization.qdq``): a Q/DQ TensorRT runs is delegated
like any op (it counts as plumbing, not toward ``min_block_size``); one it cannot run is refused
(``unsupported-quantization``). After grouping, :func:`check` raises one ``QuantizationError`` naming every
quantization node that would stay on the host (ExecuTorch's runtime has no kernel for them: the lowering
would otherwise end in ExecuTorch's "Missing out variants"), a Q/DQ pair split between partitions, FP8 without
FP8 target archs, or (``strict_quantization``) an activation quantization TensorRT cannot express; otherwise
it warns once with the number of activation Q/DQ pairs that will run in float.
"""

from __future__ import annotations

import re
import warnings

from torch.fx import Node

from ..errors import QuantizationError, QuantizationWarning
from ..quantization import qdq
from .report import PartitionReport
from .supported_ops import op_name

# TensorRT-RTX's FP8 GEMMs need compute capability 8.9 or later (measured in docs/quantization.md: its builder
# refuses sm80/sm86 targets for a network with FP8).
FP8_ARCHS = ("sm89", "sm120", "sm121")


def _arch_number(arch: str) -> int | None:
    digits = re.sub(r"^sm_?", "", arch.lower()).replace(".", "")
    return int(digits) if digits.isdigit() else None


def fp8_arch_problem(target_archs) -> str | None:
    """Why these target archs cannot take an FP8 engine, or None."""
    if not target_archs:
        return (
            "an FP8 engine needs explicit target archs that have FP8 (TensorRT-RTX: " + ", ".join(FP8_ARCHS) + "); "
            "lower with target_archs=['sm89'] (or sm120)"
        )
    old = [a for a in target_archs if a != "current" and (_arch_number(a) or 0) < 89]
    if old:
        return (
            f"target archs {old} have no FP8 (compute capability below 8.9); lower with target_archs among "
            + ", ".join(FP8_ARCHS)
        )
    return None


def _fix_for_host(node: Node, report: PartitionReport) -> str:
    """What to do about a quantization node the partition left on the host for a non-quantization reason."""
    host = report.host_nodes
    readers = [u.name for u in node.users if u.name in host and qdq.read(u) is None]
    if readers:
        return (
            f"it feeds {', '.join(readers)}, which stays on the host: let TensorRT run that op "
            "(see its reason in the report) or leave it unquantized"
        )
    return "let TensorRT run the ops it feeds (lower min_block_size, or drop them from torch_executed_ops)"


def check(
    exported_program, report: PartitionReport, verdicts: dict[str, qdq.Verdict], build, value_problems=()
) -> None:
    """Raise the one QuantizationError this quantized program earns, or warn about the dropped activation
    quantization (``build``: the lowering's BuildOptions; ``value_problems``: ``qdq.value_problems`` of the
    program before ``to_edge``, named as it names its nodes)."""
    if not verdicts and not value_problems:
        return
    graph_nodes = {n.name: n for n in exported_program.graph.nodes}
    host = report.host_nodes
    delegated = report.delegated
    problems = list(value_problems)
    reads = {n: qdq.read(graph_nodes[n]) for n in verdicts}
    for name, verdict in verdicts.items():
        node = graph_nodes[name]
        op = op_name(node.target)
        if name in host:
            if verdict.action == qdq.REFUSE:
                problems.append(f"{name} ({op}, {verdict.what}): {verdict.why}; {verdict.fix}")
            else:
                problems.append(
                    f"{name} ({op}) would stay on the host ({host[name]}), where ExecuTorch has no kernel for it; "
                    + _fix_for_host(node, report)
                )
            continue
        # A quantize's dequantize (and a choose_qparams' readers) must be in its engine; a DQ's float result may leave.
        split = [u.name for u in node.users if delegated.get(u.name) != delegated[name]]
        if split and reads[name].kind != qdq.DEQUANTIZE:
            problems.append(
                f"{name} ({op}) and {', '.join(split)} fall into different partitions; a quantize and its "
                "dequantize must be in one engine: lower with a smaller min_block_size or keep fewer ops on the host"
            )
    dropped = [n for n, v in verdicts.items() if v.action == qdq.DROP and reads[n].kind == qdq.DEQUANTIZE]
    if build.strict_quantization:
        for name in dropped:
            v = verdicts[name]
            problems.append(f"{name} ({v.what}): {v.why}; strict_quantization=True refuses to run it in float")
    if build.weights == "refit":  # the REFIT_MAP carries no INT4 or FP8 element type
        narrow = [
            n
            for n, v in verdicts.items()
            if v.action == qdq.KEEP and (reads[n].bits == 4 or reads[n].dtype in qdq.FP8_DTYPES)
        ]
        if narrow:
            problems.append(
                f"{', '.join(narrow)} (int4 / FP8 weights): weights='refit' cannot refit INT4 or FP8 initializers (the "
                "REFIT_MAP has no such element type); lower with weights='both' or 'engine-only'"
            )
    fp8 = [n for n, v in verdicts.items() if v.action != qdq.DROP and reads[n].dtype in qdq.FP8_DTYPES]
    if fp8:
        problem = fp8_arch_problem(build.target_archs)
        if problem is not None:
            problems.append(f"{', '.join(fp8)} (FP8): {problem}")
    if problems:  # one line (the command line prints an error's first line): numbered problems
        listing = " ".join(f"[{i}] {p}" for i, p in enumerate(problems, 1))
        raise QuantizationError(
            f"et_tensorrt cannot lower this quantized program ({len(problems)} problem(s)); nothing was built: "
            + listing
        )
    if dropped:
        reasons = sorted({verdicts[n].why for n in dropped})
        warnings.warn(
            f"et_tensorrt: {len(dropped)} activation quantize/dequantize pair(s) TensorRT cannot express were "
            f"dropped ({'; '.join(reasons)}): those activations run in the engine's float precision, the weights "
            "stay quantized. Lower with strict_quantization=True to refuse instead",
            QuantizationWarning,
            stacklevel=3,
        )
