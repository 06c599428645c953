"""What the partitioner decided, node by node: `ReasonCode`, `Reason`, `NodeDecision`, `PartitionReport`.

A data module: the partitioner (``partitioner.py``, with ``explain``) fills these in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .._text import table


class ReasonCode(StrEnum):
    """The stable id of why a node stays on the host (a ``str``: ``code == "min_block_size"`` holds).

    The rules are in ``et_tensorrt.partition``'s docstring; the detail string of a ``Reason`` says which
    device, op, dtype or limit."""

    # Rule 1, placement (only in a placed graph)
    DEVICE_HOST_OUTPUT = "device:host-output"  # an output recorded on the host
    DEVICE_HOST_INPUT = "device:host-input"  # a (non 0-d) tensor input recorded on the host
    DEVICE_MISMATCH = "device:mismatch"  # recorded on a device other than the engine's
    # Rule 2, casts
    CAST_DEVICE_CHANGE = "cast:device-change"  # a cast that moves data off the engine's device
    # Rule 3, capability
    UNSUPPORTED_OP = "unsupported-op"  # the op is not in supported_ops.SUPPORTED_OPS
    UNSUPPORTED_ARGS = "unsupported-args"  # in the table, but these arguments exceed TensorRT's limits
    PRODUCER_REFUSED = "producer-refused"  # a getitem of a multi-output node kept on the host
    UNSUPPORTED_QUANTIZATION = "unsupported-quantization"  # a Q/DQ TensorRT cannot run (quantization.qdq)
    DTYPE_FLOAT64 = "dtype:float64"  # TensorRT would narrow it to float32 silently
    DTYPE_COMPLEX = "dtype:complex"
    DTYPE_UNSUPPORTED = "dtype:unsupported"  # any other dtype TensorRT lacks
    # Rule 4, user choice
    USER_TORCH_EXECUTED_OPS = "user:torch_executed_ops"
    # Grouping
    MIN_BLOCK_SIZE = "min_block_size"  # its partition has fewer compute nodes than min_block_size
    VIEW_ONLY = "view-only"  # its partition only reshapes (and is not the whole graph)
    SYMBOLIC_BOUNDARY = "symbolic-boundary"  # a scalar (size) would cross a partition boundary


REPORT_WIDTH = 100  # the printed report fits a 100-column terminal (the decision column wraps)
# The decision column keeps room for a partition name (every delegated row stays on one line); node and op
# names are shortened only as much as that needs. A host reason longer than the room wraps.
_DECISION_ROOM = 16
_ELISION = "~"


@dataclass(frozen=True)
class Reason:
    """Why a node stays on the host: a stable ``code`` and a human ``detail``."""

    code: ReasonCode
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.code} ({self.detail})" if self.detail else str(self.code)


@dataclass(frozen=True)
class NodeDecision:
    name: str
    op: str  # "aten.mul.Tensor" (edge ops are shown by the aten op they wrap)
    devices: str  # recorded output device(s), "" when the node produces no tensor
    partition: str | None = None  # the delegation tag, None when kept on host
    reason: Reason | None = None  # why kept on host, None when delegated


@dataclass
class PartitionReport:
    """Every call node of one program: delegated (to which partition) or kept on host (why)."""

    engine_device: str
    placed: bool  # the graph recorded device tensors (see the placement rule in et_tensorrt.partition)
    nodes: list[NodeDecision] = field(default_factory=list)
    warned: tuple[str, ...] = ()  # nodes named in a PlacementWarning
    states: list = field(default_factory=list)  # mutable_state.StateDecision per mutated buffer

    @property
    def partitions(self) -> dict[str, tuple[str, ...]]:
        """Delegation tag -> node names, in graph order."""
        out: dict[str, list[str]] = {}
        for d in self.nodes:
            if d.partition is not None:
                out.setdefault(d.partition, []).append(d.name)
        return {tag: tuple(names) for tag, names in out.items()}

    @property
    def host_nodes(self) -> dict[str, Reason]:
        """Node name -> reason it stays on the host."""
        return {d.name: d.reason for d in self.nodes if d.partition is None}

    @property
    def delegated(self) -> dict[str, str]:
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
        rows, shortened = _fit_names(rows, REPORT_WIDTH)
        if shortened:
            head += f"\n(long node and op names are shortened with '{_ELISION}' to fit {REPORT_WIDTH} columns)"
        states = "".join(f"\n{s}" for s in self.states)
        return head + states + "\n" + "\n".join(table(rows, width=REPORT_WIDTH))


def _why(decision: NodeDecision) -> str:
    """The reason, without a detail that only repeats the op (the op has its own column)."""
    reason = decision.reason
    return reason.code if reason.detail == decision.op else str(reason)


def _fit_names(rows: list[tuple], width: int) -> tuple[list[tuple], bool]:
    """Shortens the node and op columns (the widest first) until the decision column has ``_DECISION_ROOM``:
    a conv net's ``aten__native_batch_norm_legit_no_training_default_12`` would leave it no room. Names lose their
    middle (see ``_elide``)."""
    node_w, op_w = (max(len(r[i]) for r in rows) for i in (0, 1))
    device_w = max(len(r[2]) for r in rows)
    budget = width - _DECISION_ROOM - (device_w + 2) - 4  # node and op together, each followed by two spaces
    floor = max(len(rows[0][0]), len(rows[0][1]), 2 * len(_ELISION) + 8)
    while node_w + op_w > budget and max(node_w, op_w) > floor:
        if node_w >= op_w:
            node_w -= 1
        else:
            op_w -= 1
    fitted = [(_elide(r[0], node_w), _elide(r[1], op_w), *r[2:]) for r in rows]
    return fitted, fitted != rows


def _elide(text: str, width: int) -> str:
    """``aten._native_batch_norm_le~.default``, ``aten__native_batch_norm_l~_19``: the start (which op) and the
    last ``.``/``_`` part (the overload, the node's number) stay."""
    if len(text) <= width:
        return text
    keep = width - len(_ELISION)
    last = max(text.rfind("."), text.rfind("_"))
    tail = len(text) - last if 0 < last and len(text) - last <= keep // 2 else keep // 3
    return text[: keep - tail] + _ELISION + text[len(text) - tail :]
