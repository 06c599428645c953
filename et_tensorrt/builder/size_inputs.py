"""Size arguments of a partition, computed inside the engine wherever its inputs allow.

A partition that reads a size it does not compute (``view(x, [batch, -1])`` with ``batch`` read on the host)
takes that size as an argument: ExecuTorch passes it as an integer, not a tensor. The engine does not need
it when one of its tensor inputs carries the size's symbols in its shape: ``engine_program`` replaces the
argument by ``sym_size`` of that input and arithmetic (an ONNX ``Shape`` + arithmetic, TensorRT shape
tensors). A size no tensor input carries stays an input of the engine: a 0-d int64 (a TensorRT shape
input, bound from host memory at run time).
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature

from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.sizes import SizeEmitter, is_size, replace_uses, size_expr, size_sources


def size_input_names(ep: ExportedProgram) -> list[str]:
    """The user inputs of ``ep`` that are sizes (SymInt), in argument order."""
    return [n.name for n in user_input_nodes(ep) if is_size(n)]


def engine_program(ep: ExportedProgram) -> tuple[ExportedProgram, list[str]]:
    """``ep`` with every size argument the engine can compute from its tensor inputs' shapes computed so,
    and the names of the size arguments it still takes. ``ep`` itself is not modified."""
    inputs = user_input_nodes(ep)
    sizes = [n for n in inputs if is_size(n)]
    if not sizes:
        return ep, []
    gm = copy.deepcopy(ep.graph_module)
    by_name = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    tensors = [by_name[n.name] for n in inputs if isinstance(n.meta.get("val"), torch.Tensor)]
    anchor = next(n for n in gm.graph.nodes if n.op != "placeholder")
    emitter = SizeEmitter(gm.graph, size_sources(tensors), anchor)
    derived, kept = set(), []
    for size in sizes:
        node = by_name[size.name]
        value = emitter.emit(size_expr(node.meta["val"]))
        if value is None:
            kept.append(size.name)
            continue
        replace_uses(node, value)
        gm.graph.erase_node(node)
        derived.add(size.name)
    if not derived:
        return ep, kept
    gm.graph.lint()
    gm.recompile()
    signature = ExportGraphSignature(
        input_specs=[copy.deepcopy(s) for s in ep.graph_signature.input_specs if s.arg.name not in derived],
        output_specs=copy.deepcopy(ep.graph_signature.output_specs),
    )
    program = ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=dict(ep.state_dict),
        range_constraints=dict(ep.range_constraints),
        module_call_graph=_call_graph(signature, ep),
        constants=dict(ep.constants),
    )
    return program, kept


def _call_graph(signature: ExportGraphSignature, ep: ExportedProgram) -> list:
    """The root call signature for the remaining user inputs (as ExecuTorch writes it for a partition)."""
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.utils import _pytree as pytree

    in_spec = pytree.tree_flatten((tuple(signature.user_inputs), {}))[1]
    out_spec = (
        ep.module_call_graph[0].signature.out_spec
        if ep.module_call_graph and ep.module_call_graph[0].signature
        else pytree.tree_flatten(signature.user_outputs)[1]
    )
    return [ModuleCallEntry("", ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec))]
