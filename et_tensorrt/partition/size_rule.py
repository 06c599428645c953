"""The partitioning rule for scalars: sizes flow into partitions, never out of them (docs/dynamic-shapes.md)."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..sizes import is_size
from . import device_rules
from .report import Reason, ReasonCode
from .supported_ops import op_name


def _is_symbolic(node: Node) -> bool:
    """A node whose value is a scalar (a SymInt from ``sym_size``, shape arithmetic), not a tensor."""
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


_SIZE_QUERIES = frozenset({"aten.sym_size.int", "aten.sym_numel.default"})


def _only_shape_read(query: Node, tag: str, tags: dict[str, str]) -> bool:
    """Whether ``query`` reads the shape of a tensor from outside partition ``tag`` that nothing else in the
    partition reads: delegating the query would make the whole tensor a partition input."""
    tensor = query.args[0]
    if not isinstance(tensor, Node) or tags.get(tensor.name) == tag:
        return False
    return not any(tags.get(u.name) == tag and not _is_symbolic(u) for u in tensor.users)


def symbolic_crossings(calls: list[Node], tags: dict[str, str]) -> dict[str, Reason]:
    """Sizes flow into partitions, never out of them (engines return tensors only).

    A delegated scalar read outside its partition stays on the host, which computes its own sizes (from the
    program's inputs, see ``transform_for_pre_decomposition``). A partition may read an integer size computed
    outside it: ExecuTorch passes it as an integer argument and the engine computes it from its own inputs'
    shapes, or takes it as a shape input (``builder/size_inputs.py``). Other scalars (floats, bools) are not
    sizes: a delegated node reading one computed outside its partition stays on the host."""
    crossings: dict[str, Reason] = {}
    for node in calls:
        tag = tags.get(node.name)
        if tag is None:
            continue
        if _is_symbolic(node) and any(tags.get(u.name) != tag for u in node.users):
            crossings[node.name] = Reason(
                ReasonCode.SYMBOLIC_BOUNDARY, "a scalar (size) read outside the partition; engines return tensors only"
            )
        elif op_name(node.target) in _SIZE_QUERIES and _only_shape_read(node, tag, tags):
            crossings[node.name] = Reason(
                ReasonCode.SYMBOLIC_BOUNDARY,
                f"reads only the shape of {node.args[0].name}, which the partition does not otherwise take: "
                "the size is passed in, not the tensor",
            )
        for source in device_rules.input_nodes(node):
            if (
                source.op == "call_function"
                and _is_symbolic(source)
                and not is_size(source)
                and tags.get(source.name) != tag
            ):
                crossings[node.name] = Reason(
                    ReasonCode.SYMBOLIC_BOUNDARY,
                    f"reads {source.name}, a non-integer scalar computed outside the partition",
                )
    return crossings
