"""What the partitioner changes in the ATen program before ExecuTorch decomposes it (ExecuTorch calls
``Partitioner.transform_for_pre_decomposition`` from ``to_edge_transform_and_lower``). Both keep dynamic
programs dynamic and whole; neither changes what the program computes:

- **Sizes read from the inputs.** A size read from an intermediate tensor's shape (``x.shape`` inside swin's
  window attention) is recomputed from the program's inputs' shapes, right after them
  (``sizes.read_sizes_from``). A size on the host then never makes an engine return a tensor only for its
  shape, and ``to_edge``'s re-trace binds every size expression to these nodes.
- **Splits as slices.** ExecuTorch 1.5.1's edge verifier (``exir/verification/arg_validator.py``) calls
  ``len()`` on the first tensor an op returning ``Tensor[]`` produces, which guards its dim 0 to the example
  size: GPT-2's ``split`` of q, k, v pins a dynamic batch to the example's. A split along a static dim is
  the same as one slice per piece, which returns a tensor.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx import Node

from ..sizes import read_sizes_from
from .supported_ops import op_name

_SPLITS = ("aten.split.Tensor", "aten.split_with_sizes.default")


def _reads_intermediate_size(node: Node) -> bool:
    return (
        node.op == "call_function"
        and op_name(node.target) == "aten.sym_size.int"
        and isinstance(node.args[0], Node)
        and node.args[0].op != "placeholder"
    )


def _split_pieces(node: Node) -> list[tuple[int, int]] | None:
    """(start, end) per piece of a split along a static dim whose first piece has a dynamic dim 0, else None."""
    if node.op != "call_function" or op_name(node.target) not in _SPLITS:
        return None
    val = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
    pieces = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(pieces, (list, tuple)) or not pieces:
        return None
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    dim = dim % val.dim()
    if not isinstance(val.shape[dim], int) or not isinstance(pieces[0].shape[0], torch.SymInt):
        return None
    if any(not isinstance(p.shape[dim], int) for p in pieces):
        return None
    bounds, start = [], 0
    for piece in pieces:
        bounds.append((start, start + piece.shape[dim]))
        start += piece.shape[dim]
    if not all(u.target is operator.getitem and all(w.op != "output" for w in u.users) for u in node.users):
        return None  # a piece the program returns keeps its name in the signature: leave that split alone
    return bounds


def _splits_to_slices(graph: torch.fx.Graph) -> int:
    changed = 0
    for node in list(graph.nodes):
        bounds = _split_pieces(node)
        if bounds is None:
            continue
        source = node.args[0]
        dim = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % source.meta["val"].dim()
        for user in list(node.users):
            start, end = bounds[user.args[1]]
            with graph.inserting_before(user):
                piece = graph.call_function(torch.ops.aten.slice.Tensor, (source, dim, start, end))
            piece.meta = dict(user.meta)
            user.replace_all_uses_with(piece)
            graph.erase_node(user)
        graph.erase_node(node)
        changed += 1
    return changed


def transform(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` itself when there is nothing to change, else a changed copy (the caller's program is untouched)."""
    if not any(_reads_intermediate_size(n) or _split_pieces(n) is not None for n in ep.graph.nodes):
        return ep
    gm = copy.deepcopy(ep.graph_module)
    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder" and n.name in user]
    changed = _splits_to_slices(gm.graph) + read_sizes_from(gm.graph, inputs)
    if not changed:
        return ep
    gm.graph.lint()
    gm.recompile()
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=copy.deepcopy(ep.graph_signature),
        state_dict=ep.state_dict,
        range_constraints=ep.range_constraints,
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        example_inputs=ep.example_inputs,
        constants=ep.constants,
        verifiers=[ep.verifier],
    )
