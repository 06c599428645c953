"""What the partitioner changes in the ATen program before ExecuTorch decomposes it (ExecuTorch calls
``Partitioner.transform_for_pre_decomposition`` from ``to_edge_transform_and_lower``). None changes what the
program computes:

- **Core ATen.** Ops ExecuTorch refuses or cannot run (``histc``, transformers' grouped matmuls, ``empty_like``)
  become the core ops they equal (``core_rewrites``), so every front door lowers them; ExecuTorch's own
  ``llama.gated_delta_rule`` (Qwen3.5's linear attention: a CPU kernel) becomes the chunked rule of
  ``delta_rule`` (``run_decompositions`` traces it, for a dynamic token count too); its ``llama.custom_sdpa`` and
  ``llama.update_cache`` (gemma4, voxtral_realtime) become attention and an in-place cache write
  (``llama_custom_ops``).

The other two keep dynamic programs dynamic and whole:

- **Sizes read from the inputs.** A size read from an intermediate tensor's shape (``x.shape`` inside swin's
  window attention) is recomputed from the program's inputs' shapes, right after them
  (``sizes.read_sizes_from``). A size on the host then never makes an engine return a tensor only for its
  shape, and ``to_edge``'s re-trace binds every size expression to these nodes.
- **Splits as slices.** ExecuTorch 1.5.1's edge verifier (``exir/verification/arg_validator.py``) calls
  ``len()`` on the first tensor an op returning ``Tensor[]`` produces, which guards its dim 0 to the example
  size: GPT-2's ``split`` of q, k, v pins a dynamic batch to the example's, a MoE expert's ``chunk`` of its
  gate and up projections a dynamic number of tokens (a prefill then builds for its example length only). A
  split, chunk or unbind along a static dim is one slice (select) per piece, which returns a tensor.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, TensorArgument
from torch.fx import Node

from ..builder.op_rewrites import Rewriter
from ..sizes import read_sizes_from
from . import core_rewrites, delta_rule, llama_custom_ops
from .supported_ops import op_name

# Ops returning a list of pieces of their input along ``dim`` (args[2]): each piece is a slice of it.
_SPLITS = (
    "aten.split.Tensor",
    "aten.split_with_sizes.default",
    "aten.unsafe_split.Tensor",
    "aten.unsafe_split_with_sizes.default",
    "aten.tensor_split.sections",
    "aten.tensor_split.indices",
    "aten.chunk.default",  # a gated MLP's ``gate, up = x.chunk(2, -1)`` (MoE experts)
    "aten.unsafe_chunk.default",
)
_UNBIND = "aten.unbind.int"  # each piece a select along args[1]


def _reads_intermediate_size(node: Node) -> bool:
    return (
        node.op == "call_function"
        and op_name(node.target) == "aten.sym_size.int"
        and isinstance(node.args[0], Node)
        and node.args[0].op != "placeholder"
    )


def _dim(node: Node, position: int) -> int:
    dim = node.args[position] if len(node.args) > position else node.kwargs.get("dim", 0)
    return dim % node.args[0].meta["val"].dim()


def _split_pieces(node: Node) -> list[tuple] | None:
    """Per piece, the (op, args) that computes it from the split's input (a slice or a select), for a split along
    a static dim whose first piece has a dynamic dim 0; else None."""
    name = op_name(node.target) if node.op == "call_function" else None
    if name not in _SPLITS and name != _UNBIND:
        return None
    val = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
    pieces = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(pieces, (list, tuple)) or not pieces:
        return None
    if not all(isinstance(p, torch.Tensor) and p.dim() > 0 for p in pieces):
        return None
    dim = _dim(node, 1 if name == _UNBIND else 2)
    if not isinstance(val.shape[dim], int) or not isinstance(pieces[0].shape[0], torch.SymInt):
        return None
    if not all(u.target is operator.getitem for u in node.users):
        return None
    if name == _UNBIND:
        return [(torch.ops.aten.select.int, (dim, i)) for i in range(len(pieces))]
    if any(not isinstance(p.shape[dim], int) for p in pieces):
        return None
    bounds, start = [], 0
    for piece in pieces:
        bounds.append((torch.ops.aten.slice.Tensor, (dim, start, start + piece.shape[dim])))
        start += piece.shape[dim]
    return bounds


def _replace(node: Node, new: Node, outputs: dict[str, str]) -> None:
    """``node`` replaced by ``new`` and erased; ``outputs`` gets ``new``'s name where the program returns ``node``
    (its signature names its outputs)."""
    if any(user.op == "output" for user in node.users):
        outputs[node.name] = new.name
    node.replace_all_uses_with(new)
    node.graph.erase_node(node)


def _splits_to_slices(graph: torch.fx.Graph, outputs: dict[str, str]) -> int:
    changed = 0
    for node in list(graph.nodes):
        pieces = _split_pieces(node)
        if pieces is None:
            continue
        for user in list(node.users):
            op, args = pieces[user.args[1]]
            with graph.inserting_before(user):
                piece = graph.call_function(op, (node.args[0], *args))
            piece.meta = dict(user.meta)
            _replace(user, piece, outputs)
        graph.erase_node(node)
        changed += 1
    return changed


def _to_core_aten(gm: torch.fx.GraphModule, user_inputs: set[str], outputs: dict[str, str]) -> int:
    nodes = [n for n in gm.graph.nodes if core_rewrites.rewritable(n)]
    if nodes:
        rewriter = Rewriter(gm, user_inputs)
        for node in nodes:
            _replace(node, core_rewrites.rewrite(node, rewriter), outputs)
    return len(nodes)


def transform(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` itself when there is nothing to change, else a changed copy (the caller's program is untouched)."""
    if any(llama_custom_ops.is_cache_update(n) for n in ep.graph.nodes):
        # before any run_decompositions: it would wrap the mutating op in auto_functionalized
        gm = copy.deepcopy(ep.graph_module)
        renamed: dict[str, str] = {}
        llama_custom_ops.cache_updates_to_copies(gm.graph, renamed)
        ep = _rebuilt(ep, gm, renamed)
    table = delta_rule.decompositions(ep.graph) | llama_custom_ops.decompositions(ep.graph)
    if table:
        ep = ep.run_decompositions(table)
    if not any(
        _reads_intermediate_size(n) or _split_pieces(n) is not None or core_rewrites.rewritable(n)
        for n in ep.graph.nodes
    ):
        return ep
    gm = copy.deepcopy(ep.graph_module)
    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder" and n.name in user]
    # first: the sizes these rewrites read are then read from the inputs, and their pieces split as slices
    renamed: dict[str, str] = {}
    changed = _to_core_aten(gm, user, renamed) + _splits_to_slices(gm.graph, renamed)
    changed += read_sizes_from(gm.graph, inputs)
    if not changed:
        return ep
    return _rebuilt(ep, gm, renamed)


def _rebuilt(ep: ExportedProgram, gm: torch.fx.GraphModule, renamed: dict[str, str]) -> ExportedProgram:
    """``ep`` with ``gm``'s graph (``renamed``: its outputs' new names)."""
    gm.graph.lint()
    gm.recompile()
    signature = copy.deepcopy(ep.graph_signature)
    for spec in signature.output_specs:
        if isinstance(spec.arg, TensorArgument) and spec.arg.name in renamed:
            spec.arg = TensorArgument(name=renamed[spec.arg.name])
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=ep.state_dict,
        range_constraints=ep.range_constraints,
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        example_inputs=ep.example_inputs,
        constants=ep.constants,
        verifiers=[ep.verifier],
    )
