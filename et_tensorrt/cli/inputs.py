"""A program's inputs: what an ExportedProgram or a ``.pte`` method takes (tensors, and the Python values an export
kept as inputs: a ``bool`` keyword such as ``return_dict=True``), an inputs file, random inputs of those shapes, and
checking given inputs against them.

A program's inputs are flat, in the order its input spec flattens ``(args, kwargs)`` (the ``.pte``'s order); an
inputs file holds them in that order, or as a dict by input name (keyword inputs by their keyword)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..inspection import format_spec
from ..partition.method_inputs import decode_names, keyword_names, user_input_names
from .common import CliError

VALUE_TYPES = (bool, int, float)  # the Python values ExecuTorch takes as method inputs (Bool, Int, Double)


class InputSpec(NamedTuple):
    name: str  # "" when the program does not record one (a .pte's positional inputs)
    shape: tuple[int, ...]  # a dynamic dim holds its example size (a .pte: the upper bound)
    dtype: torch.dtype | None  # None: a value input (``value``)
    ranges: tuple | None = None  # per dim: (min, max or None) when dynamic, None when static; None: unknown (.pte)
    value: bool | int | float | None = None  # a value input: the one value the program takes (its export's)

    @property
    def is_value(self) -> bool:
        return self.dtype is None

    def dims(self) -> list:
        """Each dim as :func:`et_tensorrt.inspection.format_shape` takes it: an int, or (min, max, example)."""
        ranges = self.ranges or (None,) * len(self.shape)
        return [s if r is None else (*r, s) for s, r in zip(self.shape, ranges, strict=True)]

    def text(self) -> str:
        """``float32(1..32 (opt 4), 16)``: a dynamic dim shows its declared range and its example size;
        ``bool True``: a value input."""
        if self.is_value:
            return f"{type(self.value).__name__} {self.value!r}"
        return format_spec(str(self.dtype).replace("torch.", ""), self.dims())

    def accepts(self, shape: Sequence[int]) -> bool:
        """Whether a tensor of ``shape`` fits: static dims equal, dynamic dims inside their range."""
        if len(shape) != len(self.shape):
            return False
        for size, dim in zip(shape, self.dims(), strict=True):
            low, high = (dim, dim) if isinstance(dim, int) else dim[:2]
            if size < low or (high is not None and size > high):
                return False
        return True


def describe_specs(specs: Sequence[InputSpec]) -> str:
    """``x float32(2, 16), y int64(8)``: what a program takes, in order."""
    return ", ".join(f"{s.name} {s.text()}" if s.name else s.text() for s in specs)


def load_inputs(path: str) -> list | dict:
    """``torch.save`` of a tensor; of a list/tuple of tensors and Python values (``bool``, ``int``, ``float``), the
    flat inputs in order; or of a dict of them by input name."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CliError(f"inputs file {path!r} could not be read by torch.load: {e}") from e
    if isinstance(obj, torch.Tensor):
        return [obj]
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else None
    if items is None or not all(isinstance(v, (torch.Tensor, *VALUE_TYPES)) for v in items):
        raise CliError(
            f"inputs file {path!r} must hold a tensor, a list/tuple of tensors and Python values (bool, int, float) "
            f"in the program's input order, or a dict of them by input name; it holds {_what(obj)}"
        )
    return dict(obj) if isinstance(obj, dict) else list(obj)


def _what(obj) -> str:
    if isinstance(obj, (list, tuple, dict)):
        items = obj.values() if isinstance(obj, dict) else obj
        kinds = sorted({type(v).__name__ for v in items if not isinstance(v, (torch.Tensor, *VALUE_TYPES))})
        return f"a {type(obj).__name__} with {', '.join(kinds)} item(s)"
    return f"a {type(obj).__name__}"


def arrange(given: list | dict, specs: Sequence[InputSpec], where: str) -> list:
    """The inputs in the program's order: a list as given, a dict by the specs' names."""
    if not isinstance(given, dict):
        return list(given)
    unnamed = [str(i) for i, s in enumerate(specs) if not s.name]
    if unnamed:
        raise CliError(
            f"{where} records no name for input(s) {', '.join(unnamed)} (positional inputs): give the inputs as a "
            f"list in the program's order ({describe_specs(specs)})"
        )
    names = [s.name for s in specs]
    unknown, missing = sorted(set(given) - set(names)), [n for n in names if n not in given]
    if unknown or missing:
        problems = ([f"no input named {', '.join(map(repr, unknown))}"] if unknown else []) + (
            [f"missing {', '.join(map(repr, missing))}"] if missing else []
        )
        raise CliError(
            f"the inputs file's names do not match {where}'s inputs ({'; '.join(problems)}): it takes "
            f"{describe_specs(specs)}"
        )
    return [given[n] for n in names]


def random_inputs(specs: Sequence[InputSpec], seed: int) -> list:
    """Random tensors of the specs' shapes; a value input takes its one value."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for spec in specs:
        if spec.is_value:
            out.append(spec.value)
        elif spec.dtype.is_floating_point:
            out.append(torch.randn(spec.shape, generator=generator).to(spec.dtype))
        elif spec.dtype == torch.bool:
            out.append(torch.randint(0, 2, spec.shape, generator=generator).bool())
        else:
            out.append(torch.randint(0, 8, spec.shape, generator=generator).to(spec.dtype))
    return out


def _concrete(d) -> int:
    if isinstance(d, int):
        return d
    hint = getattr(getattr(d, "node", None), "hint", None)
    return int(hint) if hint is not None else 2


def _bound(value) -> int | None:
    """A range end as an int; None for an unbounded one (torch's ``int_oo``)."""
    try:
        return int(value)
    except (TypeError, OverflowError, ValueError):
        return None


def _dim_range(d, range_constraints) -> tuple | None:
    """(min, max or None) of a dynamic dim as the program declares it (a derived ``16*s`` dim: 16*min..16*max)."""
    if isinstance(d, int):
        return None
    from torch.utils._sympy.value_ranges import bound_sympy

    bounds = bound_sympy(d.node.expr, range_constraints)
    return _bound(bounds.lower), _bound(bounds.upper)


def program_input_specs(program) -> list[InputSpec]:
    """Each user input of an ExportedProgram, in its flat order: a tensor from its placeholder's ``meta["val"]`` and
    the program's declared dim ranges (``range_constraints``), a value input (``ConstantArgument``) with its value.
    Named by its keyword where it is a keyword input, else by its placeholder."""
    from torch.export.graph_signature import ConstantArgument, InputKind

    values = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    user = [s.arg for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    specs = []
    for name, arg in zip(user_input_names(program), user, strict=True):
        val = arg.value if isinstance(arg, ConstantArgument) else values.get(arg.name)
        if isinstance(val, VALUE_TYPES):
            specs.append(InputSpec(name, (), None, value=val))
        elif isinstance(val, torch.SymInt):
            raise CliError(f"input {name!r} is an int the program takes as a symbol: pass inputs with --inputs")
        elif not isinstance(val, torch.Tensor):
            raise CliError(f"input {name!r} is not a tensor ({type(val).__name__}); pass inputs with --inputs")
        else:
            shape = tuple(_concrete(d) for d in val.shape)
            ranges = tuple(_dim_range(d, program.range_constraints) for d in val.shape)
            specs.append(InputSpec(name, shape, val.dtype, ranges))
    return specs


def _value_problem(label: str, given, spec: InputSpec) -> str | None:
    """Why ``given`` cannot be the value input ``spec``, or None. ExecuTorch takes exactly the exported value."""
    if isinstance(given, torch.Tensor) or type(given) is not type(spec.value) or given != spec.value:
        shown = (
            f"a tensor {format_spec(str(given.dtype).replace('torch.', ''), tuple(given.shape))}"
            if isinstance(given, torch.Tensor)
            else f"{type(given).__name__} {given!r}"
        )
        return (
            f"{label} is a value the program was exported with ({spec.text()}), which it takes as it is; got "
            f"{shown}: export again with the value you need"
        )
    return None


def _count_problem(inputs: Sequence, specs: Sequence[InputSpec], what: str) -> str | None:
    if len(inputs) == len(specs):
        return None
    count = f"{len(specs)} input{'s' * (len(specs) != 1)}"
    return f"{what} takes {count} ({describe_specs(specs)}), got {len(inputs)}"


def check_inputs(inputs: Sequence, specs: Sequence[InputSpec]) -> None:
    """Count, dtype and shape (static dims, dynamic ranges) of ``inputs`` against an ExportedProgram's ``specs``."""
    problem = _count_problem(inputs, specs, "the program")
    if problem:
        raise CliError(problem)
    for i, (t, spec) in enumerate(zip(inputs, specs, strict=True)):
        label = f"input {i} ({spec.name})"
        if spec.is_value:
            problem = _value_problem(label, t, spec)
            if problem:
                raise CliError(problem)
            continue
        if not isinstance(t, torch.Tensor):
            raise CliError(f"{label} is a tensor {spec.text()}, got {type(t).__name__} {t!r}")
        if t.dtype != spec.dtype:
            raise CliError(f"{label}: dtype {t.dtype} does not match the program's {spec.text()}")
        if not spec.accepts(tuple(t.shape)):
            raise CliError(f"{label}: shape {tuple(t.shape)} does not match the program's {spec.text()}")


def check_pte_inputs(inputs: Sequence, specs: Sequence[InputSpec], method: str = "forward") -> None:
    """Count, dtype and values of ``inputs`` against a .pte's method inputs, named as the inputs' summary names them
    (``float64``). Shapes and layout are the Runner's to check: a .pte records upper bounds, not which dims vary."""
    problem = _count_problem(inputs, specs, f"method {method!r}")
    if problem:
        raise CliError(problem)
    for i, (t, spec) in enumerate(zip(inputs, specs, strict=True)):
        label = f"input {i} of method {method!r}"
        if spec.is_value:
            problem = _value_problem(label, t, spec)
            if problem:
                raise CliError(problem)
        elif not isinstance(t, torch.Tensor):
            raise CliError(f"{label} is a tensor {spec.text()}, got {type(t).__name__} {t!r}")
        elif t.dtype != spec.dtype:
            given = format_spec(str(t.dtype).replace("torch.", ""), tuple(t.shape))
            raise CliError(
                f"{label} is {given} but the program takes {spec.text()}: convert it (tensor.to({spec.dtype}))"
            )


def recorded_input_names(plan) -> list[str]:
    """A .pte method's input names, as the program it was lowered from named them (what ``check --inputs`` takes):
    recorded by our partitioner in its delegates' compile specs; else the pytree spec's keywords ("" for a
    positional input), all the .pte itself records."""
    from ..compile_specs import METHOD_INPUT_NAMES

    for delegate in plan.delegates:
        for key, value in delegate.compile_specs:
            if key == METHOD_INPUT_NAMES:
                names = decode_names(bytes(value))
                if len(names) == len(plan.inputs):
                    return names
    keywords = keyword_names(plan.input_spec) if plan.input_spec else []
    return [name or "" for name in keywords]


def pte_input_specs(path: str, plan) -> list[InputSpec]:
    """A .pte method's inputs as its plan records them: for a dynamic tensor the sizes are the upper bound memory
    was planned for (whether a dim is dynamic is not recorded); a value input holds its value."""
    from ..inspection import scalar_name

    names = recorded_input_names(plan)
    specs = []
    for i, index in enumerate(plan.inputs):
        value = plan.values[index]
        name = names[i] if len(names) == len(plan.inputs) else ""
        if value.value is not None:
            specs.append(InputSpec(name, (), None, value=value.value))
            continue
        if value.kind != "Tensor":
            raise CliError(f"{path}: method input {i} is a {value.kind}, which `run` cannot pass")
        dtype = getattr(torch, scalar_name(value.scalar_type), None)
        if not isinstance(dtype, torch.dtype):
            raise CliError(f"method input {i} has ExecuTorch dtype {value.scalar_type}, which torch does not have")
        specs.append(InputSpec(name, tuple(value.sizes), dtype))
    return specs
