"""Device rules: where the graph recorded each tensor, and which nodes that keeps off the engine.

Read only ``meta["val"]`` of the node and of its tensor inputs: that is the placement the model was
exported with. See the package docstring for the placed / unplaced rule.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.fx import Node

from .report import Reason, ReasonCode
from .supported_ops import CAST_OPS, aten_op, op_name


def engine_device(target_device) -> torch.device:
    """The engine's device; ``"cuda"`` means ``cuda:0`` (an engine runs on one concrete device)."""
    device = torch.device(target_device)
    if device.type != "cuda":
        raise ValueError(f"TensorRT engines run on a cuda device, not {device}")
    return torch.device("cuda", 0 if device.index is None else device.index)


def tensors(val) -> list[torch.Tensor]:
    """The tensors in a ``meta["val"]`` (a tensor, or a list/tuple of them; SymInts are skipped)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t for v in val for t in tensors(v)]
    return []


def input_nodes(node: Node) -> Iterator[Node]:
    """Nodes among ``node``'s args and kwargs (lists flattened), in argument order."""
    seen = set()
    for arg in node.all_input_nodes:
        if arg not in seen:
            seen.add(arg)
            yield arg


def is_placed(graph: torch.fx.Graph) -> bool:
    """True when the graph recorded any tensor on a device other than the host."""
    return any(t.device.type != "cpu" for n in graph.nodes for t in tensors(n.meta.get("val")))


def on_engine(device: torch.device, engine: torch.device) -> bool:
    if device.type != engine.type:
        return False
    return device.index is None or device.index == engine.index


def is_host_scalar(t: torch.Tensor) -> bool:
    """A 0-d host tensor (a Python scalar lifted by to_edge, or a CPU scalar PyTorch lets mix with
    device tensors): it is baked into the engine or copied, it does not pin its consumer to the host."""
    return t.dim() == 0 and t.device.type == "cpu"


def _device_argument(node: Node):
    """The ``device`` argument of a cast, bound through the op's schema (positional or keyword)."""
    op = aten_op(node.target)
    schema = getattr(op, "_schema", None)
    if schema is None:
        return None
    for i, arg in enumerate(schema.arguments):
        if arg.name == "device":
            if not arg.kwarg_only and i < len(node.args):
                return node.args[i]
            return node.kwargs.get("device")
    if op_name(node.target) == "aten.to.other" and len(node.args) > 1:
        other = tensors(node.args[1].meta.get("val")) if isinstance(node.args[1], Node) else []
        return other[0].device if other else None
    return None


def cast_devices(node: Node):
    """``(source, target)`` devices of a cast that changes device, else None (dtype-only cast)."""
    if op_name(node.target) not in CAST_OPS:
        return None
    target = _device_argument(node)
    if target is None:
        return None
    target = torch.device(target)
    source = node.args[0] if node.args else None
    src_vals = tensors(source.meta.get("val")) if isinstance(source, Node) else []
    if not src_vals:
        return None
    src = src_vals[0].device
    same = src.type == target.type and (target.index is None or src.index == target.index)
    return None if same else (src, target)


def cast_refusal(node: Node, engine: torch.device) -> Reason | None:
    """Rule 2: a cast whose device argument moves data off the engine's device.

    A TensorRT engine cannot produce a host tensor; absorbing the cast would drop its device.
    A cast onto the engine's device (host -> cuda) passes this rule; its host input keeps it out
    under rule 1 in a placed graph.
    """
    change = cast_devices(node)
    if change is None or on_engine(change[1], engine):
        return None
    return Reason(ReasonCode.CAST_DEVICE_CHANGE, f"{change[0]} -> {change[1]}")


def placement_refusal(node: Node, engine: torch.device, placed: bool) -> Reason | None:
    """Rule 1: every output and every tensor input recorded on the engine's device.

    Unplaced (host-exported) graphs refuse nothing here; 0-d host inputs never refuse.
    """
    if not placed:
        return None
    for t in tensors(node.meta.get("val")):
        if not on_engine(t.device, engine):
            code = ReasonCode.DEVICE_HOST_OUTPUT if t.device.type == "cpu" else ReasonCode.DEVICE_MISMATCH
            return Reason(code, f"output on {t.device}")
    for arg in input_nodes(node):
        for t in tensors(arg.meta.get("val")):
            if on_engine(t.device, engine) or is_host_scalar(t):
                continue
            code = ReasonCode.DEVICE_HOST_INPUT if t.device.type == "cpu" else ReasonCode.DEVICE_MISMATCH
            return Reason(code, f"input {arg.name} on {t.device}")
    return None


def recorded_devices(node: Node) -> str:
    return ",".join(sorted({str(t.device) for t in tensors(node.meta.get("val"))}))
