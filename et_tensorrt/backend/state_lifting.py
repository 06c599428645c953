"""Where state is lifted: the partition's mutable buffers become the engine's state inputs and outputs.

A buffer the partitioner handed to this partition (partition/mutable_state.py) arrives as a BUFFER input
with a BUFFER_MUTATION output. ``find_states`` describes each one (a ``State``): its shape, dtype, initial
contents, and how the engine updates it:

- **in place**: a write along the sequence axis of a 4-D cache ``[B, H, S_max, D]`` (HF ``StaticLayer``'s
  ``index_copy_``, ExecuTorch ``KVCache``'s ``index_put_`` at ``input_pos`` or at ``arange(S) +
  input_pos[0].item()``) becomes ``et_tensorrt::kv_cache_update`` (ONNX TensorScatter, TensorRT's
  IKVCacheUpdateLayer): the engine's cache output aliases its cache input, one device buffer;
- **write back**: any other mutation (HF's ``cumulative_length``, counters) is an ordinary engine output that
  the delegate copies into its state on the device after the call; the reason says why it is not in place.

An in-place write needs a position the delegate can check before the engine writes (``PositionGuard``: the
delegate input that holds the positions, or the start and the write's length): TensorRT's layer does not
check bounds, so a write the delegate cannot check stays a write back.

``engine_program`` returns the program the ONNX export sees: states as trailing user inputs and outputs (in
``states`` order), cache writes as ``kv_cache_update``. The embedded program (GRAPH) keeps the original form.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

from et_tensorrt.backend.value_slices import gathers_for_value_slices, scatters_for_value_slices, slice_length
from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.builder.kv_cache_op import AXIS, kv_cache_update

aten = torch.ops.aten
POSITIONS = 0  # the guard input holds every write position (consecutive)
START = 1  # the guard input's element 0 is the first position of a write of `length` positions
_KV_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # IKVCacheUpdateLayer's


@dataclass
class PositionGuard:
    input: int  # the delegate input (argument index) holding the positions
    kind: int  # POSITIONS or START
    length_input: int = -1  # START: the delegate input whose dim `length_dim` is the write length; -1: constant
    length_dim: int = 0
    length_value: int = 0


@dataclass
class State:
    buffer: str  # the buffer's fully qualified name: one state per name, per program
    placeholder: str  # its placeholder in the partition's program
    value: str  # the node that computes its new value
    dtype: torch.dtype
    shape: tuple[int, ...]
    initial: torch.Tensor  # contents at load (zeros for a fresh KV cache)
    in_place: bool
    reason: str = ""  # why not in place
    guard: PositionGuard | None = None
    update: torch.fx.Node | None = None  # in place: the written rows and the positions (nodes of the program)
    positions: torch.fx.Node | None = None
    input_name: str = ""  # the engine's binding names, once exported
    output_name: str = ""

    @property
    def nbytes(self) -> int:
        return self.initial.numel() * self.initial.element_size()


def find_states(ep: ExportedProgram) -> list[State]:
    """One State per BUFFER_MUTATION of ``ep``, in the dtype ``ep`` holds it (the engine's precision: a partition
    lowered with fp16/bf16 arrives rewritten into it, backend/precision.py)."""
    signature = ep.graph_signature
    nodes = {n.name: n for n in ep.graph.nodes}
    output = next(n for n in ep.graph.nodes if n.op == "output")
    placeholder_of = {s.target: s.arg.name for s in signature.input_specs if s.kind == InputKind.BUFFER}
    inputs = user_input_nodes(ep)
    states = []
    for value, spec in zip(output.args[0], signature.output_specs):
        if spec.kind != OutputKind.BUFFER_MUTATION:
            continue
        placeholder = nodes[placeholder_of[spec.target]]
        initial = ep.state_dict.get(spec.target)
        if initial is None:
            initial = ep.constants[spec.target]  # a non-persistent buffer
        state = State(
            spec.target,
            placeholder.name,
            value.name,
            initial.dtype,
            tuple(initial.shape),
            initial.detach(),
            in_place=False,
        )
        site = _cache_write(value, placeholder)
        if isinstance(site, str):
            state.reason = site
        else:
            state.positions, state.update = site
            state.guard = _guard(state.positions, inputs, _slice_length(value))
            if state.guard is None:
                state.reason = (
                    f"its write position ({state.positions.name}) is not read from a delegate input, so it cannot be "
                    "checked"
                )
            else:
                state.in_place = True
        states.append(state)
    return states


def _cache_write(value: torch.fx.Node, placeholder: torch.fx.Node):
    """(positions, update) when ``value`` writes rows of the 4-D cache ``placeholder`` along axis -2, else why
    it is not such a write."""
    cache = placeholder.meta.get("val")
    if not isinstance(cache, torch.Tensor) or cache.dim() != 4:
        return "not a 4-D cache [B, H, S_max, D]"
    if cache.dtype not in _KV_DTYPES:
        return f"TensorRT's KV-cache layer updates float32/float16/bfloat16, not {cache.dtype}"
    if value.op != "call_function" or value.args[0] is not placeholder:
        return "its new value is not a write into it"
    if value.target == aten.index_put.default:
        indices, update = value.args[1], value.args[2]
        accumulate = value.args[3] if len(value.args) > 3 else value.kwargs.get("accumulate", False)
        if accumulate or len(indices) != 3 or indices[0] is not None or indices[1] is not None:
            return "an index_put that does not write whole rows along the sequence axis"
        positions = _unwrapped(indices[2])
    elif value.target == aten.index_copy.default:
        dim, positions, update = value.args[1], value.args[2], value.args[3]
        if dim not in (2, -2):
            return f"an index_copy along dim {dim}, not the sequence axis"
    elif value.target == aten.slice_scatter.default:
        # ``cache.narrow(2, start, S).copy_(rows)`` (ExecuTorch's Gemma 4 KV cache): rows written at one position
        update, dim, start, end, step = (list(value.args[1:]) + [0, None, None, 1][len(value.args) - 2 :])[:5]
        if dim not in (2, -2) or step != 1 or not isinstance(start, torch.fx.Node) or slice_length(start, end) is None:
            return "a slice_scatter that does not write rows [start, start + S) along the sequence axis"
        positions = start
        update = _copied_rows(update, placeholder)
    else:
        return f"its new value comes from {getattr(value.target, '__name__', value.target)}, not a cache write"
    if any(user is not value and not _copy_destination(user, placeholder) for user in placeholder.users):
        return "the program also reads the cache before the write"
    rows = update.meta.get("val") if isinstance(update, torch.fx.Node) else None
    pos = positions.meta.get("val") if isinstance(positions, torch.fx.Node) else None
    if not isinstance(rows, torch.Tensor) or not 2 <= rows.dim() <= 4 or rows.dtype != cache.dtype:
        return f"the written rows ({_describe(rows)}) are not rows [.., S, D] of the cache's dtype"
    lead = [1] * (4 - rows.dim()) + list(rows.shape)
    if any(
        not isinstance(n, int) or n not in (1, c) for n, c in ((lead[0], cache.shape[0]), (lead[1], cache.shape[1]))
    ):
        return f"the written rows ({_describe(rows)}) do not broadcast to the cache's batch and heads"
    if lead[3] != cache.shape[3]:
        return f"the written rows ({_describe(rows)}) are not as wide as the cache's {cache.shape[3]}"
    if isinstance(pos, torch.SymInt):  # the first position of a slice write
        return positions, update
    if not isinstance(pos, torch.Tensor) or pos.dim() != 1 or pos.dtype not in (torch.int32, torch.int64):
        return f"its positions ({_describe(pos)}) are not a 1-D integer tensor"
    return positions, update


def _copy_destination(node: torch.fx.Node, placeholder: torch.fx.Node) -> bool:
    """Whether ``node`` is the slice of the cache that functionalization's ``copy(slice, rows)`` overwrites
    (``narrow(...).copy_(rows)``): its values are never read."""
    return (
        node.op == "call_function"
        and node.target in (aten.slice.Tensor, aten.slice_copy.Tensor)
        and all(u.op == "call_function" and u.target == aten.copy.default and u.args[0] is node for u in node.users)
    )


def _copied_rows(update, placeholder: torch.fx.Node):
    """The rows a slice write stores: ``src`` of ``copy(slice(cache), src)`` when their shapes match, else
    ``update`` itself."""
    if (
        isinstance(update, torch.fx.Node)
        and update.op == "call_function"
        and update.target == aten.copy.default
        and isinstance(update.args[0], torch.fx.Node)
        and update.args[0].args[0] is placeholder
        and _copy_destination(update.args[0], placeholder)
    ):
        src = update.args[1]
        if isinstance(src, torch.fx.Node) and src.meta.get("val") is not None:
            if tuple(src.meta["val"].shape) == tuple(update.meta["val"].shape):
                return src
    return update


def _slice_length(value: torch.fx.Node):
    """A slice write's row count (``slice_length`` of its bounds); None for the other writes."""
    if value.target != aten.slice_scatter.default:
        return None
    return slice_length(value.args[3], value.args[4])


def _unwrapped(index):
    """``i`` for op_rewrites' ``where(i < 0, i + size, i)``: a negative write position is refused by the guard
    before the call, so the wrap never applies to a write that runs."""
    if isinstance(index, torch.fx.Node) and index.op == "call_function" and index.target == aten.where.self:
        negative, wrapped, plain = index.args
        if (
            isinstance(negative, torch.fx.Node)
            and negative.target == aten.lt.Scalar
            and negative.args == (plain, 0)
            and isinstance(wrapped, torch.fx.Node)
            and wrapped.target == aten.add.Scalar
            and wrapped.args[0] is plain
        ):
            return plain
    return index


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return type(value).__name__


def _guard(positions: torch.fx.Node, inputs: list[torch.fx.Node], length=None) -> PositionGuard | None:
    """How the delegate checks the write before the call: ``positions`` is the positions tensor, or (a slice
    write) the SymInt of the first position with ``length`` its number of rows."""
    index = {n: i for i, n in enumerate(inputs)}
    if positions in index:
        return PositionGuard(index[positions], POSITIONS)
    if isinstance(positions.meta.get("val"), torch.SymInt):
        return _start_guard(_scalar_source(positions), length, index, inputs)
    if positions.op == "call_function" and positions.target == aten.add.Tensor:
        for ramp, start in (positions.args[:2], positions.args[1::-1]):
            source = _scalar_source(start) if isinstance(start, torch.fx.Node) else None
            guard = _start_guard(source, _ramp_length(ramp), index, inputs)
            if guard is not None:
                return guard
    return None


def _start_guard(source, length, index: dict, inputs: list[torch.fx.Node]) -> PositionGuard | None:
    """A START guard: the write begins at element 0 of the delegate input ``source`` and is ``length`` rows."""
    if length is None or source not in index:
        return None
    if isinstance(length, int):
        return PositionGuard(index[source], START, length_value=length)
    found = _size_source(length, inputs)
    if found is None:
        return None
    return PositionGuard(index[source], START, length_input=found[0], length_dim=found[1])


def _ramp_length(node) -> int | torch.fx.Node | None:
    """L for ``arange(0, L)`` / ``arange(L)`` (an int or the node of its SymInt), else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    if node.target == aten.arange.start_step and node.args[0] == 0 and (len(node.args) < 3 or node.args[2] == 1):
        return node.args[1]
    if node.target == aten.arange.default:
        return node.args[0]
    return None


_PASS_THROUGH = (aten._local_scalar_dense.default, aten.item.default, aten.scalar_tensor.default, aten._to_copy.default)


def _scalar_source(node: torch.fx.Node) -> torch.fx.Node | None:
    """The placeholder whose element 0 this scalar is, through copies, casts, ``.item()`` and ``select(x, 0, 0)``."""
    for _ in range(8):
        if node.op == "placeholder":
            return node
        if node.op != "call_function":
            return None
        if node.target in _PASS_THROUGH:
            node = node.args[0]
        elif node.target == aten.copy.default:  # copy(buffer, src): the value is src's
            node = node.args[1]
        elif node.target in (aten.select.int, aten.select_copy.int) and tuple(node.args[1:]) == (0, 0):
            node = node.args[0]
        else:
            return None
        if not isinstance(node, torch.fx.Node):
            return None
    return None


def _size_source(node: torch.fx.Node, inputs: list[torch.fx.Node]) -> tuple[int, int] | None:
    """(input, dim) whose size is the SymInt ``node``."""
    if node.op == "call_function" and node.target == aten.sym_size.int and node.args[0] in inputs:
        return inputs.index(node.args[0]), int(node.args[1])
    value = node.meta.get("val")
    if not isinstance(value, torch.SymInt):
        return None
    for i, n in enumerate(inputs):
        shape = getattr(n.meta.get("val"), "shape", ())
        for d, size in enumerate(shape):
            if isinstance(size, torch.SymInt) and size.node.expr == value.node.expr:
                return i, d
    return None


def engine_program(ep: ExportedProgram, states: list[State]) -> ExportedProgram:
    """``ep`` with each state a user input (after the delegate's own) and a user output (after its outputs),
    in ``states`` order, each in-place write a ``kv_cache_update``, and slices at values read from tensors
    gathers (value_slices). ``ep`` itself is not modified."""
    gm = copy.deepcopy(ep.graph_module)
    gathers = gathers_for_value_slices(gm)
    # the slice writes that become TensorRT's KV-cache update stay slices until the loop below replaces them
    scatters = scatters_for_value_slices(gm, keep={s.value for s in states if s.in_place})
    if not gathers and not scatters and not states:
        return ep
    graph = gm.graph
    nodes = {n.name: n for n in graph.nodes} | scatters  # a written-back state's value may be a scatter now
    output = next(n for n in graph.nodes if n.op == "output")
    mutated = {s.buffer for s in states}
    old_values = list(output.args[0])
    user_values = [v for v, s in zip(old_values, ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    state_values = []
    for state in states:
        value = nodes[state.value]
        if state.in_place:
            cache, positions, update = nodes[state.placeholder], nodes[state.positions.name], nodes[state.update.name]
            with graph.inserting_before(value):
                first = _first_position(graph, positions)
                batch, heads, _, width = cache.meta["val"].shape
                indices = graph.call_function(aten.expand.default, (first, [batch]))
                indices.meta["val"] = first.meta["val"].expand(batch)
                update = _as_rows(graph, update, [batch, heads, -1, width])
                write = graph.call_function(torch.ops.et_tensorrt.kv_cache_update.default, (cache, update, indices))
                write.meta["val"] = value.meta["val"]
            value.replace_all_uses_with(write)
            graph.erase_node(value)
            value = write
        state_values.append(value)
    # The states' placeholders move after the last user input (torch.export orders lifted inputs first).
    last = [n for n in graph.nodes if n.op == "placeholder"][-1]
    for state in states:
        node = nodes[state.placeholder]
        if node is not last:
            last.append(node)
            last = node
    output.args = (tuple(user_values) + tuple(state_values),)
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()
    state_inputs = [
        InputSpec(InputKind.USER_INPUT, TensorArgument(s.placeholder), target=None, persistent=None) for s in states
    ]
    kept = [copy.deepcopy(s) for s in ep.graph_signature.input_specs if s.target not in mutated]
    outputs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(v.name), target=None) for v in user_values]
    outputs += [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(v.name), target=None) for v in state_values]
    signature = ExportGraphSignature(input_specs=kept + state_inputs, output_specs=outputs)
    return ExportedProgram(
        root=gm,
        graph=graph,
        graph_signature=signature,
        state_dict={k: v for k, v in ep.state_dict.items() if k not in mutated},
        range_constraints=dict(ep.range_constraints),
        module_call_graph=_call_graph(signature),
        constants={k: v for k, v in ep.constants.items() if k not in mutated},
    )


def _first_position(graph: torch.fx.Graph, positions: torch.fx.Node) -> torch.fx.Node:
    """The write's first position as a 1-element int64 tensor: ``positions[0:1]``, or a slice write's start."""
    value = positions.meta["val"]
    if isinstance(value, torch.Tensor):
        first = graph.call_function(aten.slice.Tensor, (positions, 0, 0, 1))
        first.meta["val"] = value[0:1]
        return first
    scalar = graph.call_function(aten.scalar_tensor.default, (positions,), {"dtype": torch.int64})
    first = graph.call_function(aten.unsqueeze.default, (scalar, 0))
    fake = next(n.meta["val"] for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)).fake_mode
    with fake:
        scalar.meta["val"] = torch.scalar_tensor(0, dtype=torch.int64)
        first.meta["val"] = scalar.meta["val"].unsqueeze(0)
    return first


def _as_rows(graph: torch.fx.Graph, rows: torch.fx.Node, shape: list) -> torch.fx.Node:
    """``rows`` broadcast to the 4-D ``[B, H, S, D]`` TensorScatter takes (index_put broadcasts them)."""
    value = rows.meta["val"]
    while value.dim() < 4:
        rows = graph.call_function(aten.unsqueeze.default, (rows, 0))
        value = value.unsqueeze(0)
        rows.meta["val"] = value
    if list(value.shape[:2]) != shape[:2]:
        rows = graph.call_function(aten.expand.default, (rows, shape))
        value = value.expand(shape)
        rows.meta["val"] = value
    return rows


def _call_graph(signature: ExportGraphSignature) -> list:
    """The root call signature: the user inputs in, a flat tuple of every output out."""
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.utils import _pytree as pytree

    in_spec = pytree.tree_flatten((tuple(signature.user_inputs), {}))[1]
    out_spec = pytree.tree_flatten(tuple(signature.user_outputs))[1]
    return [ModuleCallEntry("", ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec))]


__all__ = ["AXIS", "POSITIONS", "START", "PositionGuard", "State", "engine_program", "find_states", "kv_cache_update"]
