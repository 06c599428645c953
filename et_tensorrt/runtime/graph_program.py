"""A partition's lifted aten graph, encoded for the C++ ``GraphInterpreter`` (the PyTorch executor's fast path).

Each call_function node becomes one step: an aten (or prims) operator resolved by its schema name, with
every schema argument encoded as a slot (a graph input, a lifted weight, an earlier result) or a constant;
``operator.getitem`` and integer arithmetic on sizes are steps of their own. Anything else (higher-order
ops, other Python callables, get_attr submodules) raises :class:`NotEncodable` naming the node, and the
executor keeps the Python path for that partition.
"""

from __future__ import annotations

import operator

import torch
from torch.export.graph_signature import InputKind, OutputKind

from .. import _C

_INT_OPS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.floordiv: "floordiv",
    operator.mod: "mod",
    operator.neg: "neg",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.lt: "lt",
    operator.le: "le",
    operator.gt: "gt",
    operator.ge: "ge",
    torch.sym_max: "max",
    torch.sym_min: "min",
}
_CONSTANT_TYPES = (bool, int, float, str, torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Tensor)


class NotEncodable(Exception):
    """The graph holds something the C++ interpreter does not run; the message names the node."""


def lifted_tensors(
    program: torch.export.ExportedProgram, device: torch.device, state: dict[str, torch.Tensor] | None = None
) -> list[torch.Tensor | None]:
    """One entry per placeholder, in order: the parameter, buffer or constant it takes (detached, on
    ``device``), or None for a user input. A buffer in ``state`` (the delegate's own, see runtime/state.py) is
    that tensor itself, and its mutation is allowed; any other buffer mutation or state is refused."""
    state = state or {}
    out: list[torch.Tensor | None] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(None)
            continue
        if spec.kind == InputKind.BUFFER and spec.target in state:
            out.append(state[spec.target])
            continue
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = program.state_dict.get(spec.target)
            if value is None:
                value = program.constants[spec.target]  # non-persistent buffers live with the constants
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            value = program.constants[spec.target]
        else:
            raise RuntimeError(
                f"the partition's program takes a {spec.kind.name} input ({spec.arg.name}), "
                "which the PyTorch executor cannot provide"
            )
        out.append(value.detach().to(device))
    for spec in program.graph_signature.output_specs:
        if spec.kind == OutputKind.BUFFER_MUTATION and spec.target in state:
            continue  # written into the delegate's state by the program itself
        if spec.kind != OutputKind.USER_OUTPUT:
            raise RuntimeError(
                f"the partition's program has a {spec.kind.name} output ({spec.arg.name}) the blob's STATE table "
                "does not list, which a delegate cannot carry out"
            )
    return out


def user_output_positions(program: torch.export.ExportedProgram) -> list[int]:
    return [i for i, s in enumerate(program.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]


def encode(program: torch.export.ExportedProgram, lifted: list[torch.Tensor | None]) -> _C.GraphInterpreter:
    """The C++ interpreter for ``program`` (``lifted`` from :func:`lifted_tensors`), or NotEncodable."""
    graph = program.graph_module.graph
    slot: dict[torch.fx.Node, int] = {}
    lifted_values, lifted_slots, input_slots = [], [], []
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, lifted, strict=True):
        slot[node] = len(slot)
        if value is None:
            input_slots.append(slot[node])
        else:
            lifted_values.append(value)
            lifted_slots.append(slot[node])

    output_node = next(n for n in graph.nodes if n.op == "output")
    last_use: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        for source in node.all_input_nodes:
            last_use[source] = node

    steps = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op != "call_function":
            raise NotEncodable(f"node {node.name} is a {node.op}")
        slot[node] = len(slot)
        release = [slot[s] for s in slot if last_use.get(s, s) is node and s is not node]
        if not node.users:
            release.append(slot[node])  # nobody reads it: drop it right away
        steps.append(_step(node, slot, release))

    outputs = output_node.args[0]
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    output_slots = []
    for i in user_output_positions(program):
        value = outputs[i]
        if not isinstance(value, torch.fx.Node):
            raise NotEncodable(f"output {i} is the constant {value!r}, not a graph value")
        output_slots.append(slot[value])
    return _C.GraphInterpreter(lifted_values, lifted_slots, input_slots, steps, output_slots, len(slot))


def _step(node: torch.fx.Node, slot: dict, release: list[int]) -> tuple:
    target = node.target
    if target is operator.getitem:
        source, index = node.args
        if not isinstance(source, torch.fx.Node) or not isinstance(index, int):
            raise NotEncodable(f"node {node.name}: getitem of {source!r}[{index!r}]")
        return ("getitem", slot[source], index, slot[node], release)
    if target in _INT_OPS:
        if node.kwargs:
            raise NotEncodable(f"node {node.name}: keyword arguments to {target}")
        return ("int", _INT_OPS[target], [_encode(a, node, slot, tensor=False) for a in node.args], slot[node], release)
    if not isinstance(target, torch._ops.OpOverload):
        raise NotEncodable(f"node {node.name} calls {target}, which is not an operator")
    schema = target._schema
    encoded, positional = [], list(node.args)
    for i, arg in enumerate(schema.arguments):
        if not arg.kwarg_only and i < len(positional):
            value = positional[i]
        elif arg.name in node.kwargs:
            value = node.kwargs[arg.name]
        elif arg.has_default_value():
            encoded.append(("default",))
            continue
        else:
            raise NotEncodable(f"node {node.name}: {schema.name}.{schema.overload_name} lacks argument {arg.name}")
        encoded.append(_encode(value, node, slot, tensor=_takes_tensor(arg.type)))
    return ("op", schema.name, schema.overload_name, encoded, slot[node], release)


def _takes_tensor(arg_type) -> bool:
    if isinstance(arg_type, torch._C.OptionalType):
        arg_type = arg_type.getElementType()
    return isinstance(arg_type, torch._C.TensorType)


def _contains_node(value) -> bool:
    if isinstance(value, torch.fx.Node):
        return True
    return isinstance(value, (list, tuple)) and any(_contains_node(v) for v in value)


def _encode(value, node: torch.fx.Node, slot: dict, *, tensor: bool) -> tuple:
    if isinstance(value, torch.fx.Node):
        if tensor and not isinstance(value.meta.get("val"), torch.Tensor):
            return ("slot_number", slot[value])  # a computed size where a Tensor is taken: eager wraps it
        return ("slot", slot[value])
    if value is None:
        return ("none",)
    if isinstance(value, (list, tuple)):
        if _contains_node(value):
            return ("list", [_encode(v, node, slot, tensor=False) for v in value])
        return ("const", list(value))
    if tensor and isinstance(value, (bool, int, float)):
        return ("number", value)  # a Python number where the schema takes a Tensor: eager wraps it
    if isinstance(value, _CONSTANT_TYPES):
        return ("const", value)
    raise NotEncodable(f"node {node.name}: argument {value!r} of type {type(value).__name__}")
