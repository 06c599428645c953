"""The delegate's state: the partition's mutable buffers, kept across calls, and shared by the program's methods.

A state belongs to the loaded program, keyed by its buffer name: :func:`acquire` hands every executor of one loaded
program (its ``program_scope``, extension/runtime/program_scope.h) the same tensor for a name, made from the STATE
table's initial contents by the first delegate that needs it and freed when the last one that holds it closes. A
``prefill`` and a ``decode`` method therefore read and write one KV cache on the device, whichever runs; two loads of
one program (two ``Runner`` s) hold two.

With PyTorch, the embedded program is functional: a buffer's new value is a BUFFER_MUTATION output (``index_put`` of
the cache, ``add`` of a counter, the sum that ends an SSM scan). ``write_in_place`` rewrites it so that each call
updates the state tensors themselves, no copy of a state made:

* a cache write the program makes only once becomes ``index_put_``/``index_copy_`` into the state;
* a new value an operator computes whole, in the state's shape and dtype, once every read of the old value is done
  (a recurrent state: conv and SSM states), is computed into the state by that operator's ``out=`` overload;
* any other new value (a view of a larger result, say) is ``copy_``-ed into its state at the end of the call.
"""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind, OutputKind

from ..errors import StateSharingError
from ..format.dtypes import scalar_type_dtype
from . import shared

aten = torch.ops.aten
_IN_PLACE = {aten.index_put.default: aten.index_put_.default, aten.index_copy.default: aten.index_copy_.default}
# What a call does to a state (the executors' state_updates; the C++ delegate counts the bytes of "copied back").
IN_PLACE, COPIED_BACK, SWAPPED = "in place", "copied back", "double-buffered"


_states = shared.Registry()  # (program scope, buffer name) -> the one Slot the program's methods bind


class Slot:
    """One state's memory. ``tensor``: what the delegates read and write now. ``spare``: the other buffer of a
    double-buffered state (a TensorRT engine that cannot alias its output to the state writes the new value there,
    and the two trade places: nothing is copied). ``pinned``: how many delegates hold ``tensor``'s address for good
    (a PyTorch executor's graph, a CUDA graph); while any does, the buffers do not trade places."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor, self.spare, self.pinned = tensor, None, 0

    def spare_buffer(self) -> torch.Tensor:
        if self.spare is None:
            self.spare = torch.empty_like(self.tensor)
        return self.spare

    def swap(self) -> None:
        self.tensor, self.spare = self.spare, self.tensor


class States:
    """One executor's states: buffer name -> Slot (shared ones are the loaded program's); ``close`` lets go."""

    def __init__(self, slots: dict[str, Slot], shared_keys: list[tuple[int, str]]):
        self.slots = slots
        self._keys = shared_keys
        self._pins = 0

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        """Buffer name -> the tensor each state is now."""
        return {name: slot.tensor for name, slot in self.slots.items()}

    def pin(self) -> dict[str, torch.Tensor]:
        """Holds every state at its present address until :meth:`close` (the tensors, to bind once)."""
        self._pins += 1
        for slot in self.slots.values():
            slot.pinned += 1
        return self.tensors

    def close(self) -> None:
        for slot in self.slots.values():
            slot.pinned -= self._pins
        self._pins = 0
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
                held.slots[e.name] = Slot(e.initial_tensor(device))
                continue
            if not scope:
                raise StateSharingError(
                    f"the state {e.name!r} is shared by the methods {', '.join(e.methods)}, but this program "
                    "carries no named data, so its delegates cannot tell which loaded program they belong to; "
                    "lower it again with named_data='pte' or 'ptd' (the default for several methods)"
                )
            key = (scope, e.name)
            slot, maker = _states.acquire(key, lambda e=e: Slot(e.initial_tensor(device)), method)
            held._keys.append(key)
            t = slot.tensor
            dtype = scalar_type_dtype(e.dtype)
            if t.dtype != dtype or tuple(t.shape) != tuple(e.shape) or t.device != device:
                raise StateSharingError(
                    f"method {method!r} needs the state {e.name!r} as {_spec(dtype, e.shape, device)}, but method "
                    f"{maker!r} holds it as {_spec(t.dtype, t.shape, t.device)}: the methods cannot share it (run "
                    "them on one device, or lower them from one model)"
                )
            held.slots[e.name] = slot
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
    order = {n: i for i, n in enumerate(graph.nodes)}
    values = list(output.args[0])
    returned = {v for v, s in zip(values, program.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT}
    how = {}
    for i, spec in enumerate(program.graph_signature.output_specs):
        if spec.kind != OutputKind.BUFFER_MUTATION or spec.target not in names:
            continue
        state, value = nodes[placeholders[spec.target]], values[i]
        if value.target in _IN_PLACE and value.args[0] is state and list(state.users) == [value]:
            value.target = _IN_PLACE[value.target]  # same arguments; returns the state itself
            how[spec.target] = IN_PLACE
            continue
        if value not in returned and _slice_write(graph, value, state, order):
            how[spec.target] = IN_PLACE
            values[i] = state  # the write (a copy_ into a view of it) ran before anything reads the new value
            continue
        out = _out_overload(value, state, order) if value not in returned else None
        if out is not None:
            value.target, value.kwargs = out, {**value.kwargs, "out": state}  # returns the state itself
            how[spec.target] = IN_PLACE
            continue
        with graph.inserting_before(output):
            values[i] = graph.call_function(aten.copy_.default, (state, value))
            values[i].meta["val"] = value.meta.get("val")
        how[spec.target] = COPIED_BACK
    output.args = (tuple(values),)
    graph.lint()
    program.graph_module.recompile()
    return how


def _slice_write(graph: torch.fx.Graph, value: torch.fx.Node, state: torch.fx.Node, order: dict) -> bool:
    """``slice_scatter(state, rows, dim, start, end)`` (``state.narrow(...).copy_(rows)`` functionalized) done in
    place: ``copy_`` into the slice of the state, and every reader of the new value reads the state. Only when
    the graph reads the old state (and its views) before the write; returns whether it rewrote."""
    if value.op != "call_function" or value.target != aten.slice_scatter.default or value.args[0] is not state:
        return False
    readers = _readers(state) - {value}
    rows, *bounds = value.args[1:]
    aliased = rows in readers and isinstance(rows.target, torch._ops.OpOverload) and _returns_alias(rows.target)
    if any(order[r] > order[value] for r in readers) or state in value.args[1:] or aliased:
        return False  # a later read of the old state, or rows that are a view of it (an overlapping copy)
    with graph.inserting_before(value):
        view = graph.call_function(aten.slice.Tensor, (state, *bounds))
        view.meta["val"] = rows.meta.get("val") if isinstance(rows, torch.fx.Node) else None
        graph.call_function(aten.copy_.default, (view, rows))
    value.replace_all_uses_with(state)
    graph.erase_node(value)
    return True


def _out_overload(value: torch.fx.Node, state: torch.fx.Node, order: dict) -> torch._ops.OpOverload | None:
    """The ``out=`` overload of the operator computing ``value``, when it can compute into the state: ``value`` has
    the state's shape and dtype, and the graph reads the state (and any view of it) only before ``value``, never in
    ``value``'s own arguments (an operator writing its output while reading an overlapping input is undefined)."""
    target = value.target if value.op == "call_function" else None
    computed, held = value.meta.get("val"), state.meta.get("val")
    if not isinstance(target, torch._ops.OpOverload) or not isinstance(computed, torch.Tensor):
        return None
    if not isinstance(held, torch.Tensor) or computed.shape != held.shape or computed.dtype != held.dtype:
        return None
    if _returns_alias(target):  # a view: the state would alias another value, not hold its own copy
        return None
    readers = _readers(state)
    if value in readers or any(order[r] > order[value] for r in readers):
        return None
    return _out_variant(target)


def _returns_alias(target: torch._ops.OpOverload) -> bool:
    return any(r.alias_info is not None for r in target._schema.returns)


def _readers(state: torch.fx.Node) -> set[torch.fx.Node]:
    """Every node reading ``state`` or a view of it (through the operators that return an alias of an input)."""
    readers, views = set(), [state]
    while views:
        for user in views.pop().users:
            readers.add(user)
            if isinstance(user.target, torch._ops.OpOverload) and _returns_alias(user.target):
                views.append(user)
    return readers


def _out_variant(target: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The overload of ``target``'s operator with the same arguments and a trailing keyword-only ``out`` it writes
    (``aten.sum.dim_IntList`` -> ``aten.sum.IntList_out``), or None."""
    schema = target._schema
    if len(schema.returns) != 1:
        return None
    arguments = [(a.name, str(a.type)) for a in schema.arguments]
    for name in target.overloadpacket.overloads():
        candidate = getattr(target.overloadpacket, name)
        args = candidate._schema.arguments
        if (
            args
            and args[-1].name == "out"
            and args[-1].kwarg_only
            and args[-1].alias_info is not None
            and args[-1].alias_info.is_write
            and [(a.name, str(a.type)) for a in args[:-1]] == arguments
        ):
            return candidate
    return None
