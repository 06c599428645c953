"""The delegate's state: the partition's mutable buffers, kept across calls, and shared by the program's methods.

A state belongs to the loaded program, keyed by its buffer name: :func:`acquire` hands every executor of one loaded
program (its ``program_scope``, extension/runtime/program_scope.h) the same tensor for a name, made from the STATE
table's initial contents by the first delegate that needs it and freed when the last one that holds it closes. A
``prefill`` and a ``decode`` method therefore read and write one KV cache on the device, whichever runs; two loads of
one program (two ``Runner`` s) hold two.

With PyTorch, the embedded program is functional: a buffer's new value is a BUFFER_MUTATION output (``index_put`` of
the cache, ``add`` of a counter). ``write_in_place`` rewrites it so that each call updates the state tensors
themselves: a cache write the program makes only once becomes ``index_put_``/``index_copy_`` into the state (no copy
of the cache), any other new value is ``copy_``-ed into its state at the end of the call.
"""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind, OutputKind

from ..errors import StateSharingError
from ..format.dtypes import scalar_type_dtype
from . import shared

aten = torch.ops.aten
_IN_PLACE = {aten.index_put.default: aten.index_put_.default, aten.index_copy.default: aten.index_copy_.default}


_states = shared.Registry()  # (program scope, buffer name) -> the one tensor the program's methods bind


class States:
    """One executor's states: buffer name -> tensor (shared ones are the loaded program's); ``close`` lets go."""

    def __init__(self, tensors: dict[str, torch.Tensor], shared_keys: list[tuple[int, str]]):
        self.tensors = tensors
        self._keys = shared_keys

    def close(self) -> None:
        for key in self._keys:
            _states.release(key)
        self._keys = []


def _spec(dtype: torch.dtype, shape, device) -> str:
    return f"{str(dtype).replace('torch.', '')}{tuple(shape)} on {device}"


def acquire(entries, device: torch.device, scope: int = 0, method: str = "") -> States:
    """The states of a delegate of ``method`` (state_table.StateEntry rows) on ``device``: a fresh tensor with its
    initial contents for a state only this method has; for one the program's methods share (``entry.methods``), the
    tensor the loaded program ``scope`` holds under its name, made now if no method holds it yet.
    StateSharingError when a shared state cannot be one buffer: no scope (the program carries no named data to tell
    which program a delegate belongs to), or another method holds it in another dtype, shape or device."""
    held = States({}, [])
    try:
        for e in entries:
            if not e.shared:
                held.tensors[e.name] = e.initial_tensor(device)
                continue
            if not scope:
                raise StateSharingError(
                    f"the state {e.name!r} is shared by the methods {', '.join(e.methods)}, but this program "
                    "carries no named data, so its delegates cannot tell which loaded program they belong to; "
                    "lower it again with named_data='pte' or 'ptd' (the default for several methods)"
                )
            key = (scope, e.name)
            t, maker = _states.acquire(key, lambda e=e: e.initial_tensor(device), method)
            held._keys.append(key)
            dtype = scalar_type_dtype(e.dtype)
            if t.dtype != dtype or tuple(t.shape) != tuple(e.shape) or t.device != device:
                raise StateSharingError(
                    f"method {method!r} needs the state {e.name!r} as {_spec(dtype, e.shape, device)}, but method "
                    f"{maker!r} holds it as {_spec(t.dtype, t.shape, t.device)}: the methods cannot share it (run "
                    "them on one device, or lower them from one model)"
                )
            held.tensors[e.name] = t
    except BaseException:
        held.close()  # this call's holds
        raise
    return held


def held_states() -> dict[tuple[int, str], int]:
    """(program scope, state name) -> how many delegates hold it: what the process holds now (tests, tools)."""
    return _states.holders()


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
