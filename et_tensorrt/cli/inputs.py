"""Programs and their inputs: loading a ``.pt2`` or an inputs file, the inputs a program or a ``.pte``
expects, random inputs of those shapes, and checking given inputs against them."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..inspection import format_spec
from .common import CliError, UsageError, quiet_native_stderr


class InputSpec(NamedTuple):
    name: str  # "" when the program does not record one (a .pte)
    shape: tuple[int, ...]  # a dynamic dim holds its example size (a .pte: the upper bound)
    dtype: torch.dtype
    ranges: tuple | None = None  # per dim: (min, max or None) when dynamic, None when static; None: unknown (.pte)

    def dims(self) -> list:
        """Each dim as :func:`et_tensorrt.inspection.format_shape` takes it: an int, or (min, max, example)."""
        ranges = self.ranges or (None,) * len(self.shape)
        return [s if r is None else (*r, s) for s, r in zip(self.shape, ranges, strict=True)]

    def text(self) -> str:
        """``float32(1..32 (opt 4), 16)``: a dynamic dim shows its declared range and its example size."""
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


def _records_cuda(path: str) -> bool:
    """Whether a .pt2 archive records tensors on a cuda device (its JSON tensor metadata says so)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(
                re.search(rb'"device":\s*\{"type":\s*"cuda"', archive.read(name))
                for name in archive.namelist()
                if name.endswith(".json")
            )
    except (OSError, zipfile.BadZipFile):
        return False


def _is_pte(path: str) -> bool:
    from ..inspection import NotAProgramError, check_file

    try:
        check_file(path)
    except (NotAProgramError, OSError):
        return False
    return True


def load_program(path: str):
    """The ExportedProgram in ``path`` (the parser has checked that it is a file)."""
    if _is_pte(path):
        raise CliError(
            f"{path!r} is already an ExecuTorch program (.pte), lowered before: `et-tensorrt run {path}` runs it, "
            f"`et-tensorrt inspect {path}` shows what it holds; this command takes a torch.export.save program (.pt2)"
        )
    try:
        return torch.export.load(path)
    except Exception as e:
        if not torch.cuda.is_available() and _records_cuda(path):
            raise CliError(
                f"{path!r} holds tensors saved on a cuda device, and this torch cannot load them "
                f"(torch {torch.__version__}, torch.cuda.is_available() is False): export the program on the "
                "host (ExecuTorch's usual way), or run on a machine with CUDA"
            ) from e
        raise CliError(f"{path!r} is not a torch.export.save program ({type(e).__name__}: {e})") from e


def load_programs(named: Sequence[tuple[str | None, str]]):
    """``[METHOD=]PROGRAM.pt2`` arguments (the parser's (method or None, path) pairs), loaded and their inputs
    printed: (the ExportedProgram, its path) for one unnamed program, else (method -> ExportedProgram, the paths)
    for the methods of one program (et_tensorrt.lower's dict)."""
    if len(named) == 1 and named[0][0] is None:
        path = named[0][1]
        program = load_program(path)
        print(f"{path}: {describe_specs(program_input_specs(program))}")
        return program, path
    if any(name is None for name, _ in named):
        raise UsageError("several programs are methods of one: name each one, METHOD=PROGRAM.pt2")
    if len({name for name, _ in named}) != len(named):
        raise UsageError("a method is named twice: each METHOD=PROGRAM.pt2 names a method of its own")
    programs = {}
    for name, path in named:
        programs[name] = load_program(path)
        print(f"{name} = {path}: {describe_specs(program_input_specs(programs[name]))}")
    return programs, ", ".join(path for _, path in named)


def load_inputs(path: str) -> list[torch.Tensor]:
    """``torch.save`` of a tensor, or of a tuple/list of tensors (the positional inputs)."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CliError(f"inputs file {path!r} could not be read by torch.load: {e}") from e
    if isinstance(obj, torch.Tensor):
        obj = [obj]
    if not isinstance(obj, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in obj):
        raise CliError(f"inputs file {path!r} must hold a tensor or a list/tuple of tensors, not {type(obj).__name__}")
    return list(obj)


def random_inputs(specs: Sequence[InputSpec], seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for spec in specs:
        if spec.dtype.is_floating_point:
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
    """Each user input of an ExportedProgram, from its placeholder's ``meta["val"]`` and the program's declared
    dim ranges (``range_constraints``)."""
    user_inputs = set(program.graph_signature.user_inputs)
    specs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise CliError(f"input {node.name!r} is not a tensor ({type(val).__name__}); pass inputs with --inputs")
            shape = tuple(_concrete(d) for d in val.shape)
            ranges = tuple(_dim_range(d, program.range_constraints) for d in val.shape)
            specs.append(InputSpec(node.name, shape, val.dtype, ranges))
    return specs


def check_inputs(inputs: Sequence[torch.Tensor], specs: Sequence[InputSpec]) -> None:
    """Count, dtype and shape (static dims, dynamic ranges) of ``inputs`` against an ExportedProgram's ``specs``."""
    if len(inputs) != len(specs):
        count = f"{len(specs)} input{'s' * (len(specs) != 1)}"
        raise CliError(f"the program takes {count} ({describe_specs(specs)}), got {len(inputs)}")
    for i, (t, spec) in enumerate(zip(inputs, specs, strict=True)):
        label = f"input {i} ({spec.name})"
        if t.dtype != spec.dtype:
            raise CliError(f"{label}: dtype {t.dtype} does not match the program's {spec.text()}")
        if not spec.accepts(tuple(t.shape)):
            raise CliError(f"{label}: shape {tuple(t.shape)} does not match the program's {spec.text()}")


def check_pte_inputs(inputs: Sequence[torch.Tensor], specs: Sequence[InputSpec], method: str = "forward") -> None:
    """Count and dtype of ``inputs`` against a .pte's method inputs, named as the inputs' summary names them
    (``float64``). Shapes and layout are the Runner's to check: a .pte records upper bounds, not which dims vary."""
    if len(inputs) != len(specs):
        count = f"{len(specs)} input{'s' * (len(specs) != 1)}"
        raise CliError(f"method {method!r} takes {count} ({describe_specs(specs)}), got {len(inputs)}")
    for i, (t, spec) in enumerate(zip(inputs, specs, strict=True)):
        if t.dtype != spec.dtype:
            given = format_spec(str(t.dtype).replace("torch.", ""), tuple(t.shape))
            raise CliError(
                f"input {i} of method {method!r} is {given} but the program takes {spec.text()}: convert it "
                f"(tensor.to({spec.dtype}))"
            )


def pte_input_specs(path: str, debug: bool = False) -> list[InputSpec]:
    """Method inputs as ExecuTorch's method meta records them; for a dynamic tensor the sizes are the upper
    bound memory was planned for (whether a dim is dynamic is not recorded)."""
    from executorch.runtime import Runtime

    from ..inspection import scalar_name

    try:
        with quiet_native_stderr(debug):  # ExecuTorch logs its refusal before raising it
            meta = Runtime.get().load_program(path).metadata("forward")
    except Exception as e:
        raise CliError(f"{path!r} could not be loaded by ExecuTorch ({type(e).__name__}: {e})") from e
    specs = []
    for i in range(meta.num_inputs()):
        try:
            info = meta.input_tensor_meta(i)
        except Exception as e:
            raise CliError(f"method input {i} is not a tensor, which `run` cannot generate ({e})") from e
        dtype = getattr(torch, scalar_name(info.dtype()), None)
        if not isinstance(dtype, torch.dtype):
            raise CliError(f"method input {i} has ExecuTorch dtype {info.dtype()}, which torch does not have")
        specs.append(InputSpec("", tuple(info.sizes()), dtype))
    return specs
