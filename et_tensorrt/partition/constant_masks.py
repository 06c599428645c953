"""Boolean-mask indexing with a constant mask becomes integer indexing, before lowering partitions.

``x[:, mask]`` with a boolean mask selects a data-dependent number of elements: ``torch.export`` gives the
output an unbacked size (``u0``) and TensorRT-RTX has no NonZero to compute it. When the mask is a constant
of the program (a buffer, a parameter or a lifted constant, possibly through a clone or a cast), the
selected positions are known when lowering: ``mask.nonzero()`` is computed here and the ``index`` reads
those integer positions instead, so every size downstream is static again (the program's metadata is
recomputed) and the op is an ordinary Gather. A mask computed from the inputs is left as it is (the
partitioner refuses it by name: ``argument_limits``).

``lower`` and ``explain`` both run :func:`fold_constant_masks` first, so they see the same program. The
caller's program is not modified: a copy is rewritten when there is something to rewrite.
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

aten = torch.ops.aten
# Ops whose output holds their input's values (a mask keeps its True positions through them).
_SAME_VALUES = (
    aten.clone.default,
    aten.alias.default,
    aten.lift_fresh_copy.default,
    aten.detach.default,
    aten.detach_.default,
)
_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def constant_value(program: ExportedProgram, node: torch.fx.Node) -> torch.Tensor | None:
    """The value of ``node`` when it is a constant of the program (through value-keeping ops), else None."""
    while node.op == "call_function" and (
        node.target in _SAME_VALUES or (node.target is aten._to_copy.default and "dtype" not in node.kwargs)
    ):
        node = node.args[0]
    if node.op != "placeholder":
        return None
    spec = next((s for s in program.graph_signature.input_specs if getattr(s.arg, "name", None) == node.name), None)
    if spec is None or spec.kind not in _STATE_KINDS:
        return None
    value = program.state_dict.get(spec.target)
    if value is None:
        value = program.constants.get(spec.target)
    return value if isinstance(value, torch.Tensor) else None


def _constant_mask(program: ExportedProgram, index) -> torch.Tensor | None:
    val = index.meta.get("val") if isinstance(index, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.dtype not in (torch.bool, torch.uint8):
        return None
    value = constant_value(program, index)
    return None if value is None else value.bool()


def _foldable(program: ExportedProgram) -> list[str]:
    names = []
    for node in program.graph.nodes:
        if node.op == "call_function" and node.target is aten.index.Tensor:
            if any(_constant_mask(program, i) is not None for i in node.args[1]):
                names.append(node.name)
    return names


def fold_constant_masks(program: ExportedProgram) -> ExportedProgram:
    """``program`` with every constant boolean mask of an ``index.Tensor`` replaced by its integer positions
    (``program`` itself when it has none)."""
    names = _foldable(program)
    if not names:
        return program
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    program = copy.deepcopy(program)
    gm = program.graph_module
    graph = gm.graph
    for node in [n for n in graph.nodes if n.name in names]:
        indices = []
        for index in node.args[1]:
            mask = _constant_mask(program, index)
            if mask is None:
                indices.append(index)
                continue
            device = index.meta["val"].device
            # A k-dim mask indexes k dims: one integer index per dim (nonzero's columns).
            for column in mask.nonzero().unbind(1):
                indices.append(_add_constant(program, f"{node.name}_mask_positions", column.contiguous(), device))
        node.args = (node.args[0], indices, *node.args[2:])
    graph.eliminate_dead_code()
    gm.recompile()
    # Sizes downstream of the folded index are static now: recompute every node's metadata.
    inputs = [n.meta["val"] for n in graph.nodes if n.op == "placeholder"]
    FakeTensorProp(gm, program_fake_mode(program)).propagate_dont_convert_inputs(*inputs)
    _drop_unused_state(program)
    used = set()
    for n in graph.nodes:
        val = n.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else [val]:
            sizes = v.shape if isinstance(v, torch.Tensor) else [v]
            used |= {sym for size in sizes if isinstance(size, torch.SymInt) for sym in size.node.expr.free_symbols}
    for symbol in [sym for sym in program.range_constraints if sym not in used and str(sym).startswith("u")]:
        del program.range_constraints[symbol]  # the unbacked size the mask made is gone
    return program


def program_fake_mode(program: ExportedProgram):
    """The FakeTensorMode (and with it the ShapeEnv) of ``program``'s inputs' metadata, or None."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode([n.meta["val"] for n in program.graph.nodes if n.op == "placeholder" and "val" in n.meta])


def _add_constant(program: ExportedProgram, stem: str, value: torch.Tensor, device: torch.device) -> torch.fx.Node:
    """A lifted-constant placeholder holding ``value``, placed where torch.export puts constants (before the
    user inputs); its metadata has ``value``'s static shape on ``device`` (the device the program recorded)."""
    graph = program.graph_module.graph
    specs = program.graph_signature.input_specs
    taken = {n.name for n in graph.nodes} | set(program.constants)
    name, i = stem, 0
    while name in taken:
        i += 1
        name = f"{stem}_{i}"
    position = next((k for k, spec in enumerate(specs) if spec.kind == InputKind.USER_INPUT), len(specs))
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if position < len(placeholders):
        with graph.inserting_before(placeholders[position]):
            node = graph.placeholder(name)
    else:
        with graph.inserting_after(placeholders[-1]):
            node = graph.placeholder(name)
    with program_fake_mode(program):
        node.meta["val"] = torch.empty(value.shape, dtype=value.dtype, device=device)
    program.constants[name] = value
    specs.insert(position, InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), name))
    return node


def _drop_unused_state(program: ExportedProgram) -> None:
    """Remove placeholders for constants no node reads any more (the masks themselves, when only indexing read them)."""
    graph = program.graph_module.graph
    specs = program.graph_signature.input_specs
    for node in [n for n in graph.nodes if n.op == "placeholder" and not n.users]:
        spec = next((s for s in specs if getattr(s.arg, "name", None) == node.name), None)
        if spec is None or spec.kind != InputKind.CONSTANT_TENSOR:
            continue  # parameters and buffers stay (the state dict is the model's); user inputs always stay
        specs.remove(spec)
        program.constants.pop(spec.target, None)
        graph.erase_node(node)
    program.graph_module.recompile()
