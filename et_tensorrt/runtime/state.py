"""The delegate's own state with PyTorch: the partition's mutable buffers, kept by the executor across calls.

The embedded program is functional: a buffer's new value is a BUFFER_MUTATION output (``index_put`` of the
cache, ``add`` of a counter). ``write_in_place`` rewrites it so that each call updates the state tensors
themselves: a cache write the program makes only once becomes ``index_put_``/``index_copy_`` into the state
(no copy of the cache), any other new value is ``copy_``-ed into its state at the end of the call. The state
tensors are the executor's (fresh copies of the STATE table's initial contents, on its device), so two loads
of one program never share them.
"""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind, OutputKind

aten = torch.ops.aten
_IN_PLACE = {aten.index_put.default: aten.index_put_.default, aten.index_copy.default: aten.index_copy_.default}


def initial_state(entries, device: torch.device) -> dict[str, torch.Tensor]:
    """Buffer name -> a fresh tensor with its initial contents on ``device`` (state_table.StateEntry)."""
    return {e.name: e.initial_tensor(device) for e in entries}


def write_in_place(program: torch.export.ExportedProgram, names) -> dict[str, str]:
    """Rewrites ``program``'s graph so every BUFFER_MUTATION of a buffer in ``names`` writes into the buffer's
    placeholder; returns buffer -> "in place" or "copied back" (what each call does)."""
    graph = program.graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    placeholders = {s.target: s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.BUFFER}
    nodes = {n.name: n for n in graph.nodes}
    values = list(output.args[0])
    how = {}
    for i, spec in enumerate(program.graph_signature.output_specs):
        if spec.kind != OutputKind.BUFFER_MUTATION or spec.target not in names:
            continue
        state, value = nodes[placeholders[spec.target]], values[i]
        if value.target in _IN_PLACE and value.args[0] is state and list(state.users) == [value]:
            value.target = _IN_PLACE[value.target]  # same arguments; returns the state itself
            how[spec.target] = "in place"
            continue
        with graph.inserting_before(output):
            values[i] = graph.call_function(aten.copy_.default, (state, value))
            values[i].meta["val"] = value.meta.get("val")
        how[spec.target] = "copied back"
    output.args = (tuple(values),)
    graph.lint()
    program.graph_module.recompile()
    return how
