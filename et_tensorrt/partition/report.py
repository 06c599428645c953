"""What the partitioner decided, node by node: `Reason`, `PartitionReport`, `explain`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .._text import table

REPORT_WIDTH = 100  # the printed report fits a 100-column terminal (the decision column wraps)


@dataclass(frozen=True)
class Reason:
    """Why a node stays on the host: a stable id (``code``) and a human ``detail``.

    Codes: ``cast:device-change``, ``device:host-output``, ``device:host-input``,
    ``device:mismatch``, ``unsupported-op``, ``dtype:float64``, ``dtype:complex``,
    ``dtype:unsupported``, ``producer-refused``, ``user:torch_executed_ops``, ``min_block_size``.
    """

    code: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.code} ({self.detail})" if self.detail else self.code


@dataclass(frozen=True)
class NodeDecision:
    name: str
    op: str  # "aten.mul.Tensor" (edge ops are shown by the aten op they wrap)
    devices: str  # recorded output device(s), "" when the node produces no tensor
    partition: Optional[str] = None  # the delegation tag, None when kept on host
    reason: Optional[Reason] = None  # why kept on host, None when delegated


@dataclass
class PartitionReport:
    """Every call node of one program: delegated (to which partition) or kept on host (why)."""

    engine_device: str
    placed: bool  # the graph recorded device tensors (see the placement rule in et_tensorrt.partition)
    nodes: List[NodeDecision] = field(default_factory=list)
    warned: Tuple[str, ...] = ()  # nodes named in a PlacementWarning

    @property
    def partitions(self) -> Dict[str, Tuple[str, ...]]:
        """Delegation tag -> node names, in graph order."""
        out: Dict[str, List[str]] = {}
        for d in self.nodes:
            if d.partition is not None:
                out.setdefault(d.partition, []).append(d.name)
        return {tag: tuple(names) for tag, names in out.items()}

    @property
    def host_nodes(self) -> Dict[str, Reason]:
        """Node name -> reason it stays on the host."""
        return {d.name: d.reason for d in self.nodes if d.partition is None}

    @property
    def delegated(self) -> Dict[str, str]:
        """Node name -> delegation tag."""
        return {d.name: d.partition for d in self.nodes if d.partition is not None}

    def __str__(self) -> str:
        placement = "placed" if self.placed else "unplaced (the runtime copies at the boundary)"
        head = (
            f"et_tensorrt partition report: engine {self.engine_device}, graph {placement}\n"
            f"{len(self.partitions)} partition(s), {len(self.delegated)} node(s) delegated, "
            f"{len(self.host_nodes)} kept on host"
        )
        rows = [("node", "op", "device", "decision")]
        for d in self.nodes:
            rows.append((d.name, d.op, d.devices or "-", d.partition or f"host: {_why(d)}"))
        return head + "\n" + "\n".join(table(rows, width=REPORT_WIDTH))


def _why(decision: NodeDecision) -> str:
    """The reason, without a detail that only repeats the op (the op has its own column)."""
    reason = decision.reason
    return reason.code if reason.detail == decision.op else str(reason)


def explain(exported_program, **partitioner_options) -> PartitionReport:
    """Report what `TensorRTPartitioner(**partitioner_options)` would do; tags nothing, raises nothing
    for ``require_full_compilation`` and emits no warnings (the report lists them in ``.warned``).

    Works on an edge program and on a plain ``torch.export`` program (aten ops).
    """
    from .partitioner import TensorRTPartitioner  # partitioner imports this module

    return TensorRTPartitioner(**partitioner_options).analyze(exported_program)
