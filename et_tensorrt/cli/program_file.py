"""The ``torch.export.save`` programs the commands take (``explain``, ``lower``, ``check``): what a file is, told
without torch (:func:`check_program_file`, so that a text file or a state dict is refused at once), and the program
loaded as its user exported it.

A program exported from a library's model names that library's pytree node types in its input and output specs
(HF transformers' ``SequenceClassifierOutput``, a ``ModelOutput`` dataclass): ``torch.export.load`` cannot read it
unless a module registering them was imported first, which a command line cannot do. The commands read such a type
as the tuple of its children in their saved order (:class:`SavedNode`, its saved context kept as it was, so the
lowered program records the same spec): they flatten every output anyway, and nothing is imported for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import zipfile
from collections.abc import Sequence

from .common import CliError, UsageError

_SAVE_HINT = "save one with torch.export.save(torch.export.export(model, args, kwargs), 'model.pt2')"


def _is_pte(path: str) -> bool:
    from ..inspection import NotAProgramError, check_file

    try:
        check_file(path)
    except (NotAProgramError, OSError):
        return False
    return True


def _archive_entries(path: str) -> list[str] | None:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return None


def check_program_file(path: str) -> None:
    """CliError unless ``path`` is a ``torch.export.save`` archive (read without torch: a few milliseconds), naming
    what it is instead: an ExecuTorch program, a ``torch.save`` file (a state dict), not an archive at all."""
    if _is_pte(path):
        raise CliError(
            f"{path!r} is already an ExecuTorch program (.pte), lowered before: `et-tensorrt run {path}` runs it, "
            f"`et-tensorrt inspect {path}` shows what it holds; this command takes a torch.export.save program (.pt2)"
        )
    names = _archive_entries(path)
    if names is None:
        raise CliError(f"{path!r} is not a torch.export.save program (not a zip archive); {_SAVE_HINT}")
    leaves = {name.rsplit("/", 1)[-1] for name in names}
    if "data.pkl" in leaves:
        raise CliError(
            f"{path!r} is a torch.save file (a state dict, tensors or other objects), not a torch.export.save "
            f"program: export the model that uses them; {_SAVE_HINT}"
        )
    if not leaves & {"archive_format", "serialized_exported_program.json"}:
        raise CliError(f"{path!r} is a zip archive but not a torch.export.save program; {_SAVE_HINT}")


# "in_spec": "[1, {...}]" in the archive's model JSON: each a JSON string holding a pytree spec.
_SPEC = re.compile(rb'"(?:in_spec|out_spec)":\s*("(?:[^"\\]|\\.)*")')


def _json_members(archive: zipfile.ZipFile, models_only: bool = False):
    """The bytes of each JSON member of a ``torch.export.save`` archive (``models_only``: the graphs' own, under
    ``models/``), read one at a time."""
    for name in archive.namelist():
        if name.endswith(".json") and (not models_only or "/models/" in f"/{name}"):
            yield archive.read(name)


def _spec_types(path: str) -> set[str]:
    """The pytree node type names the program's input and output specs use."""
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type"):
                found.add(node["type"])
            for child in node.get("children_spec") or ():
                walk(child)

    with zipfile.ZipFile(path) as archive:
        for data in _json_members(archive, models_only=True):
            for match in _SPEC.finditer(data):
                with contextlib.suppress(ValueError, TypeError, IndexError):
                    walk(json.loads(json.loads(match.group(1)))[1])
    return found


class SavedNode(tuple):
    """A pytree node of a type this process does not have, read as the tuple of its children (``context``: the
    context as saved, written back unchanged). Subclassed once per type name (:func:`register_saved_nodes`)."""

    serialized_type_name = ""
    context = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}{tuple.__repr__(self)}"


def _stand_in(name: str) -> type:
    from torch.utils import _pytree as pytree

    cls = type(name.rsplit(".", 1)[-1], (SavedNode,), {"serialized_type_name": name})

    def unflatten(values, context):
        node = cls(values)
        node.context = context
        return node

    pytree.register_pytree_node(
        cls,
        lambda node: (list(node), node.context),
        unflatten,
        serialized_type_name=name,
        to_dumpable_context=lambda context: context,  # the saved text, as saved
        from_dumpable_context=lambda text: text,
        flatten_with_keys_fn=lambda node: ([(pytree.SequenceKey(i), v) for i, v in enumerate(node)], node.context),
    )
    return cls


def register_saved_nodes(path: str) -> list[str]:
    """A :class:`SavedNode` for each pytree type the program's specs name that this process has not registered;
    the names."""
    from torch.utils import _pytree as pytree

    missing = sorted(t for t in _spec_types(path) if t not in pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE)
    for name in missing:
        _stand_in(name)
    return missing


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def _load_log():
    """torch.export.load logs why it failed (a warning with the traceback) and raises "check the warnings above":
    the records, kept instead of shown, so that the error can say it."""
    logger = logging.getLogger("torch.export")
    records = _Records()
    saved = logger.level, logger.propagate
    logger.addHandler(records)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield records.records
    finally:
        logger.removeHandler(records)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _cause(e: Exception, records: list[logging.LogRecord]) -> str:
    """What went wrong: the exception torch.export.load logged before its own, else the one it raised."""
    for record in reversed(records):
        if record.exc_info and record.exc_info[1] is not None:
            e = record.exc_info[1]
            break
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _records_cuda(path: str) -> bool:
    """Whether a .pt2 archive records tensors on a cuda device (its JSON tensor metadata says so)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(re.search(rb'"device":\s*\{"type":\s*"cuda"', data) for data in _json_members(archive))
    except (OSError, zipfile.BadZipFile):
        return False


def _derived_input_dims(program) -> list[tuple]:
    """(``x dim 1 = 20*s60 in 4000..32000``, its range) for each user input dim that is a derived dim
    (``20 * Dim("samples")``): an expression of a symbol, not a symbol."""
    import sympy
    import torch
    from torch.export.graph_signature import InputKind

    user = {s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    found = []
    for node in program.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" and node.name in user else None
        for i, size in enumerate(getattr(val, "shape", ())):
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if expr is not None and expr.free_symbols and not isinstance(expr, sympy.Symbol):
                bounds = program.range_constraints.get(expr)
                span = f" in {bounds.lower}..{bounds.upper}" if bounds is not None else ""
                found.append((f"{node.name} dim {i} = {expr}{span}", bounds))
    return found


def _refuse_derived_dims(path: str, program) -> None:
    """torch 2.13's ``torch.export.load`` rebuilds a derived input dim so that the program cannot be decomposed
    (``run_decompositions``, which every lowering runs: "AssertionError: expected sympy.Symbol"); the same program
    straight from ``torch.export.export`` lowers."""
    derived = _derived_input_dims(program)
    if derived:
        bounds = next((b for _, b in derived if b is not None), None)
        direct = f"Dim('samples', min={bounds.lower}, max={bounds.upper})" if bounds is not None else "Dim(...)"
        raise CliError(
            f"{path} has a derived dynamic dim ({'; '.join(text for text, _ in derived)}), which a program read "
            "back by torch.export.load cannot be lowered with (torch's run_decompositions fails on it: 'expected "
            "sympy.Symbol'): lower the ExportedProgram torch.export.export returns from Python "
            f"(et_tensorrt.save('model.pte', program)), or export that dim directly ({direct}, not a multiple of "
            "another Dim) and save again"
        )


# The libraries whose import registers the custom ops programs exported from their models call: a command line
# imports nothing of the user's, so a .pt2 naming one of these namespaces has its library imported before it is read.
OP_LIBRARIES = {
    "transformers": "transformers.integrations.moe",  # grouped_mm_fallback: HF's MoE experts
    "llama": "executorch.extension.llm.custom_ops.custom_ops",  # ExecuTorch's custom_sdpa, update_cache, ...
    "quantized_decomposed": "torch.ao.quantization.fx._decomposed",
}


def _saved_op_targets(path: str) -> set[tuple[str, str]]:
    """(namespace, op) of each ``torch.ops.NS.OP.overload`` target the archive's graphs name."""
    found: set[tuple[str, str]] = set()
    with contextlib.suppress(OSError, zipfile.BadZipFile), zipfile.ZipFile(path) as archive:
        for data in _json_members(archive, models_only=True):
            found |= set(re.findall(rb'"target":\s*"torch\.ops\.(\w+)\.(\w+)', data))
    return {(ns.decode(), op.decode()) for ns, op in found}


def register_saved_ops(path: str) -> None:
    """Imports the library of each custom op the program calls that is not registered yet (``OP_LIBRARIES``); an op
    no known library registers is one error naming it and what to do."""
    import importlib

    import torch

    def registered(ns: str, op: str) -> bool:
        try:
            getattr(getattr(torch.ops, ns), op)
            return True
        except (AttributeError, RuntimeError):
            return False

    for ns, op in sorted(_saved_op_targets(path)):
        if registered(ns, op):
            continue
        if ns in OP_LIBRARIES:
            with contextlib.suppress(ImportError):
                importlib.import_module(OP_LIBRARIES[ns])
        if not registered(ns, op):
            raise CliError(
                f"{path} calls the custom op torch.ops.{ns}.{op}, which no library this command knows registers"
                + (f" (importing {OP_LIBRARIES[ns]} did not)" if ns in OP_LIBRARIES else "")
                + ": lower it from Python after importing the library that defines the op (et_tensorrt.save)"
            )


def load_program(path: str):
    """The ExportedProgram in ``path`` (the parser has checked that it is a file)."""
    import torch

    check_program_file(path)
    register_saved_nodes(path)
    register_saved_ops(path)
    with _load_log() as records:
        try:
            program = torch.export.load(path)
            _refuse_derived_dims(path, program)
            return program
        except CliError:
            raise
        except Exception as e:
            if not torch.cuda.is_available() and _records_cuda(path):
                raise CliError(
                    f"{path!r} holds tensors saved on a cuda device, and this torch cannot load them "
                    f"(torch {torch.__version__}, torch.cuda.is_available() is False): export the program on the "
                    "host (ExecuTorch's usual way), or run on a machine with CUDA"
                ) from e
            raise CliError(f"{path!r} could not be loaded by torch.export.load ({_cause(e, records)})") from e


def load_programs(named: Sequence[tuple[str | None, str]]):
    """``[METHOD=]PROGRAM.pt2`` arguments (the parser's (method or None, path) pairs), loaded and their inputs
    printed: (the ExportedProgram, its path) for one unnamed program, else (method -> ExportedProgram, the paths)
    for the methods of one program (et_tensorrt.lower's dict)."""
    from .inputs import describe_specs, program_input_specs

    check_method_names(named)
    if len(named) == 1 and named[0][0] is None:
        path = named[0][1]
        program = load_program(path)
        print(f"{path}: {describe_specs(program_input_specs(program))}")
        return program, path
    programs = {}
    for name, path in named:
        programs[name] = load_program(path)
        print(f"{name} = {path}: {describe_specs(program_input_specs(programs[name]))}")
    return programs, ", ".join(path for _, path in named)


def check_method_names(named: Sequence[tuple[str | None, str]]) -> None:
    if len(named) == 1 and named[0][0] is None:
        return
    if any(name is None for name, _ in named):
        raise UsageError("several programs are methods of one: name each one, METHOD=PROGRAM.pt2")
    if len({name for name, _ in named}) != len(named):
        raise UsageError("a method is named twice: each METHOD=PROGRAM.pt2 names a method of its own")
