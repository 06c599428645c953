"""The call targets an embedded program may contain, derived from what lowering can put there.

A partition's aten program holds only what the partitioner delegates (``supported_ops.SUPPORTED_OPS``)
after ``edge_to_aten`` rewrote it: an edge op becomes its aten op or that op's view form (``_view_op``),
adaptive pooling becomes plain pooling (``ADAPTIVE_POOLING``), and the rewrites write a few targets of
their own (``edge_to_aten.REWRITE_TARGETS``, ``op_rewrites.TARGETS``, and the arithmetic that spells quantize and
dequantize: ``quant_legalization.HOST_TARGETS``). That set, minus any op that could
address memory it was not given (``as_strided``-like views, storage or size surgery) or mutate its inputs, is
the allowlist; every other target in a file is refused by name, before torch resolves it to anything.
"""

from __future__ import annotations

import re
from functools import cache

import torch

# Packets that build views from caller-chosen strides or offsets, or rewire/resize storage: never in an
# embedded program, whatever the op tables say. (``_local_scalar_dense``, ``.item()``, is not one: it reads
# the one element of a tensor it checks holds exactly one.)
_UNCHECKED_MEMORY = re.compile(
    r"^(as_strided|_reshape_alias|set_|resize|_unsafe_(?!view$)|from_file|_make_|_nested_|_sparse_|sparse_|"
    r"_efficientzerotensor|lift_fresh)"
)


def _resolve(name: str):
    """``aten.add.Tensor`` -> the OpOverload, or None when torch has no such op."""
    parts = name.split(".")
    if len(parts) != 3:
        return None
    namespace, packet, overload = parts
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    except (AttributeError, RuntimeError):
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def unsafe_reason(op: torch._ops.OpOverload) -> str | None:
    """Why an op may not be in an embedded program, or None."""
    packet = op._schema.name.split("::")[-1]
    if _UNCHECKED_MEMORY.match(packet):
        return "it addresses or resizes memory by caller-chosen sizes/strides"
    if op._schema.is_mutable:
        return "it writes to its inputs"
    return None


@cache
def allowed_targets() -> frozenset[str]:
    """Serialized target strings (``torch.ops.aten.add.Tensor``, ``_operator.mul``) an embedded program may use."""
    # Local: the op tables of the builder and the partitioner load when a program is first checked, not with the
    # runtime that imports this package.
    from et_tensorrt.builder import op_rewrites
    from et_tensorrt.builder.edge_to_aten import REWRITE_TARGETS, _view_op
    from et_tensorrt.builder.quant_legalization import HOST_TARGETS
    from et_tensorrt.partition.argument_limits import ADAPTIVE_POOLING
    from et_tensorrt.partition.supported_ops import SUPPORTED_OPS

    names = set(SUPPORTED_OPS) | set(ADAPTIVE_POOLING.values()) | set(REWRITE_TARGETS) | set(op_rewrites.TARGETS)
    names |= set(HOST_TARGETS)  # quantize/dequantize as aten arithmetic (quant_legalization.host_program)
    out = set()
    for name in names:
        if name.startswith(("_operator.", "torch.sym_")):  # SymInt arithmetic, serialized by its Python name
            out.add(name)
            continue
        op = _resolve(name)
        if op is None:
            continue  # operator.getitem (never serialized as a node) or an op this torch lacks
        for form in {op, _view_op(op)}:
            if form.namespace == "aten" and unsafe_reason(form) is None:
                out.add(f"torch.ops.{form}")
    return frozenset(out)
