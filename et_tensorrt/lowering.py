"""One call from a model to a `.pte`: export -> TensorRTPartitioner -> to_executorch."""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from . import trt
from .compile_specs import BuildOptions
from .errors import OptionError

_PARTITIONER_OPTIONS = (
    "target_device",
    "min_block_size",
    "torch_executed_ops",
    "require_full_compilation",
    "opt_sizes",
    "own_mutable_buffers",
    "max_partition_weights",
)


def _split_options(options: Mapping[str, Any], build_options: BuildOptions | None) -> tuple[dict, BuildOptions]:
    """Partitioner keyword arguments vs :class:`BuildOptions` fields (by field name or compile-spec key),
    checked now: an unknown name is a TypeError, a bad value an OptionError."""
    fields = BuildOptions.keys()  # field name -> compile-spec key
    field_of_key = {key: name for name, key in fields.items()}
    partitioner, build = {}, {}
    for key, value in options.items():
        if key in _PARTITIONER_OPTIONS:
            partitioner[key] = value
        elif key in fields or key in field_of_key:
            build[field_of_key.get(key, key)] = value
        else:
            raise TypeError(
                f"unknown lowering option {key!r}; expected one of {sorted(_PARTITIONER_OPTIONS + tuple(fields))}"
            )
    return partitioner, (build_options or BuildOptions()).replace(**build)


def check_buildable(build: BuildOptions) -> None:
    """OptionError for build options the installed builder cannot honour on this machine (a target it cannot name,
    a refit engine without a GPU), before any work. With ``pass_through_build_failures=False`` such a build is left
    to PyTorch instead, as asked."""
    problems = trt.option_problems(build.target_archs, build.weights) if build.pass_through_build_failures else []
    if problems:
        raise OptionError("; ".join(problems))


Programs = torch.nn.Module | torch.export.ExportedProgram | Mapping[str, torch.export.ExportedProgram]


def lower(model: Programs, example_inputs: Sequence[torch.Tensor] = (), **options: Any) -> bytes:
    """Lower a model (or an ExportedProgram) to ExecuTorch program bytes with our delegate.

    Several methods (ExecuTorch's convention: a dict of ExportedPrograms by method name, e.g. ``{"prefill": ep_p,
    "decode": ep_d}``) make one program: a buffer they all update (a KV cache) is one state of the loaded program
    that every method's delegate binds (docs/stateful-decode.md), and by default (``named_data="auto"``: the backend
    makes it ``pte`` for several methods, whichever front door lowered them) a weight or engine they share is stored
    once. ``lower.last_reports`` holds each method's partition report.

    ``dynamic_shapes``: torch.export's, for a module. ``zero_copy_inputs=True`` leaves method inputs out of
    ExecuTorch's memory plan, so the runtime (and our delegate) see the caller's own pointers instead of a copy
    in a planned buffer. ``zero_copy_outputs=True`` leaves method outputs unplanned too: :class:`Runner` then
    writes them into the caller's ``outputs`` tensors (e.g. on the GPU) or into tensors it allocates;
    ExecuTorch's own Python runtime cannot run such a program (it has no memory for the outputs).
    Other options go to :class:`TensorRTPartitioner` (``target_device``, ``min_block_size``,
    ``torch_executed_ops``, ``require_full_compilation``, ``opt_sizes``: one TensorRT profile per listed size,
    see docs/dynamic-shapes.md; ``own_mutable_buffers``, default True: the delegate owns the mutable buffers
    its partitions update, such as KV caches, see docs/stateful-decode.md; ``max_partition_weights``, default
    1 GiB: a partition holding more weight bytes is split, so building one engine never needs more) or are
    :class:`BuildOptions` fields (``precision``, ``target_archs``, ``validate``, ``pass_through_build_failures``,
    ``workspace_bytes``, ``unbounded_max_factor``, ``cache``, ``weights``: ``both``, ``refit`` or
    ``engine-only``, ``named_data``: ``auto``, ``off`` or ``pte``; ``ptd`` writes a file of its own: use :func:`save`;
    ``device_build``: a RECIPE in each blob so a GPU the engine does not run on builds its own, default True;
    ``strict_quantization``: refuse activation quantization TensorRT cannot express, see docs/quantization.md),
    given one by one or as ``build_options`` (keywords override its fields). ``constant_methods``: methods that
    return a constant (ExecuTorch's; an LLM runner reads its ``get_max_seq_len``, ``use_kv_cache``, ... there,
    see :func:`et_tensorrt.llm.llm_methods`; default: the ``constant_methods`` the methods carry, as
    :func:`et_tensorrt.llm.export_encoder_decoder`'s do). ``progress``: True shows each partition's stages as they
    run (a bar on a terminal, log lines otherwise), or an :class:`et_tensorrt.progress.Progress` to show and record
    them. ``etrecord``: a path to write ExecuTorch's ETRecord of the lowering to (it holds copies of the exported
    and edge programs, weights included), which ``executorch.devtools.Inspector`` reads with an ETDump to show the
    delegate's events against each partition's source ops (docs/profiling.md). Every option is checked before any
    work: a bad value raises ``OptionError`` (or ``ValueError``).
    The program comes back as one ``bytes`` (a copy of it all): for a large model, :func:`save` writes the files
    piece by piece instead.
    """
    return lower_program(model, example_inputs, _in_memory=True, _caller="lower", **options).buffer


def lower_program(
    model: Programs,
    example_inputs: Sequence[torch.Tensor] = (),
    *,
    dynamic_shapes: Any | None = None,
    zero_copy_inputs: bool = True,
    zero_copy_outputs: bool = False,
    build_options: BuildOptions | None = None,
    constant_methods: Mapping[str, Any] | None = None,
    progress: Any = None,
    etrecord: str | os.PathLike | None = None,
    _in_memory: bool = False,
    _caller: str = "lower_program",
    **options: Any,
):
    """:func:`lower`'s work, returning ExecuTorch's ``ExecutorchProgramManager`` (the program not yet joined into
    bytes: ``write_to_file`` and ``write_tensor_data_to_file`` write it piece by piece). ``_in_memory``: the
    caller joins it into bytes (:func:`lower`), which has nowhere to put a .ptd; ``_caller``: the front door an
    error names (``lower``, ``save``)."""
    from executorch.exir import to_edge_transform_and_lower

    from . import progress as steps

    methods = isinstance(model, Mapping)
    if constant_methods is None:  # an exporter's methods that carry their own (llm.export_encoder_decoder's)
        constant_methods = getattr(model, "constant_methods", None)
    graphed = _graphed_methods(options, model if methods else {"": None})  # "": the one method, forward
    partitioner_options, build = _split_options(options, build_options)
    check_buildable(build)
    if methods:
        _check_methods(model, example_inputs, dynamic_shapes)
    else:
        _check_model(model, example_inputs, _caller)
    if etrecord is not None:
        _check_writable(etrecord, "etrecord")
    if _in_memory and build.named_data == "ptd":
        raise OptionError(
            "named_data='ptd' writes the weights to a .ptd file beside the .pte: use et_tensorrt.save(path, ...) "
            "(or named_data='pte' for one program in memory)"
        )
    # One partitioner per method (each keeps its method's report), made now: its options are checked before any work.
    partitioners = {
        name: _partitioner(partitioner_options, build if graphed is None else build.replace(cuda_graph=name in graphed))
        for name in (model if methods else [""])
    }
    with steps.reporting(progress):
        with steps.step("program", "export"):
            if methods:
                program = {name: export(ep) for name, ep in model.items()}
            else:
                program = export(model, example_inputs, dynamic_shapes)
        declared = {
            name or "forward": _declared_dims(ep) for name, ep in (program.items() if methods else [("", program)])
        }
        shape_envs = _shape_envs(program.values() if methods else [program])
        _drop_pending_symbols(shape_envs)
        try:
            # ExecuTorch hands preprocess every method's partitions
            with _declared_ranges_kept(), steps.step("program", "partition and lower"):
                edge = to_edge_transform_and_lower(
                    program,
                    partitioner={name: [p] for name, p in partitioners.items()} if methods else [partitioners[""]],
                    constant_methods=dict(constant_methods) if constant_methods else None,
                    generate_etrecord=etrecord is not None,
                )
            lower.last_reports = {name or "forward": p.report for name, p in partitioners.items()}
            lower.last_report = list(lower.last_reports.values())[-1]
            del program
            with _declared_ranges_kept(), steps.step("program", "to_executorch"):
                manager = edge.to_executorch(
                    executorch_config(zero_copy_inputs=zero_copy_inputs, zero_copy_outputs=zero_copy_outputs)
                )
        finally:  # a failed lowering leaves none pending either
            _drop_pending_symbols(shape_envs)
        if etrecord is not None:
            with steps.step("program", "write ETRecord"):
                _write_etrecord(manager, etrecord)
    _warn_narrowed(declared, manager)
    _forget_lowered_modules()
    return manager


def _check_writable(path: str | os.PathLike, option: str) -> None:
    """OptionError before any work when ``path`` cannot be written: a folder, or in a folder that is missing or not
    writable."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OptionError(f"{option} {path!r} is a folder; name the file to write")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise OptionError(f"{option} {path!r}: the folder {folder!r} does not exist or is not writable")


def _write_etrecord(manager, path: str | os.PathLike) -> None:
    """The lowering's ETRecord (ExecuTorch's: the exported, edge and ExecuTorch programs, with each delegate's
    debug-handle map) written to ``path``, for ``executorch.devtools.Inspector`` (docs/profiling.md, "ETRecord")."""
    try:
        manager.get_etrecord().save(os.fspath(path))
    except OSError as e:
        raise OSError(e.errno, f"cannot write the ETRecord {os.fspath(path)!r}: {e.strerror}") from e
    finally:
        manager._etrecord = None  # it holds copies of the programs and their weights: gone with the file written


def _declared_dims(program) -> list[tuple[int, str, int, int, int]]:
    """(user input index, its name, dim, declared min, declared max or -1) of each dynamic user input dim."""
    from torch.export.graph_signature import InputKind

    from .partition.dynamic_dims import input_dim_ranges

    ranges = input_dim_ranges(program)
    user = [s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    return [(user.index(name), name, dim, low, high) for (name, dim), (low, high) in ranges.items() if name in user]


def _warn_narrowed(declared: Mapping[str, list], manager) -> None:
    """ExecuTorch plans each method input at the largest size the lowered program allows, and its runtime refuses a
    larger one, whatever range the engine was built for; where that size is below the declared maximum (a guard
    some stage installs that :func:`_declared_ranges_kept` does not leave out), the lowering says so, with the
    range kept."""
    import warnings

    from .errors import DynamicRangeWarning

    narrowed = []
    for plan in manager.executorch_program.execution_plan:
        for index, name, dim, low, high in declared.get(plan.name, []):
            if index >= len(plan.inputs):
                continue
            sizes = getattr(plan.values[plan.inputs[index]].val, "sizes", None)
            if sizes is not None and dim < len(sizes) and (high == -1 or sizes[dim] < high):
                where = f"{name} dim {dim}" + (f" of method {plan.name!r}" if len(declared) > 1 else "")
                shown = "unbounded" if high == -1 else high
                narrowed.append(f"{where}: declared {low}..{shown}, kept {low}..{sizes[dim]}")
    if narrowed:
        warnings.warn(
            f"et_tensorrt: the lowered program takes dynamic dims over less than their declared range: "
            f"{'; '.join(narrowed)}. Larger inputs are refused (InputShapeError); the dims' other sizes run",
            DynamicRangeWarning,
            stacklevel=3,
        )


@contextlib.contextmanager
def _declared_ranges_kept():
    """ExecuTorch re-runs the program's fake tensors after export (``to_edge``'s view-copy pass; ``to_executorch``
    runs each delegate's original program for its outputs' shapes), and torch's fake convolution asks there whether
    oneDNN (mkldnn) would pick its kernel: one of its tests, ``numel > 20480``, is guarded at the example's size,
    which keeps every dim it reads to that side. A stride-20 Conv1d over up to 32,000 samples traced at 8,000 is kept
    to 20,480 (``Dim`` or ``20 * Dim``), and ExecuTorch plans, and its runtime holds, the input to that. Nothing the
    lowering computes depends on which CPU kernel would run, so it runs those stages with oneDNN off (process-wide
    while they run): no kernel choice is guarded, the declared range is kept. Only that switch: torch's own
    ``mkldnn.flags()`` also sets oneDNN's TF32 flag, which warns on every CPU without an Intel GPU."""
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _shape_envs(programs) -> list:
    """The ShapeEnv (torch's symbolic sizes and values) of each program that has one. torch.export reuses it when the
    same module is exported again, e.g. another method of one model."""
    from .partition.constant_masks import program_fake_mode

    modes = [program_fake_mode(program) for program in programs]
    return [mode.shape_env for mode in modes if mode is not None and mode.shape_env is not None]


def _drop_pending_symbols(shape_envs) -> None:
    """ExecuTorch's ``to_edge`` leaves the data-dependent symbols (``.item()``: ExecuTorch's llama reads its position
    so) of its retraces pending in the program's ShapeEnv, which the next export of the same module reuses: its
    decomposition then fails (``PendingUnbackedSymbolNotFound``). Pending ones belong to a trace that has ended, so
    they go before and after a lowering. (Hidden while every lowering exported ONNX, which binds them.)"""
    for env in shape_envs:
        pending = getattr(env, "pending_fresh_unbacked_symbols", None)
        if pending:
            pending.clear()


def _graphed_methods(options: dict, programs: Mapping) -> set[str] | None:
    """``cuda_graph`` naming methods (``"decode"`` or a list of names): those methods' delegates replay as CUDA
    graphs, the others not; taken out of ``options``. None: a bool (or absent), for every method alike."""
    value = options.get("cuda_graph")
    if value is None or isinstance(value, bool):
        return None
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, set)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise OptionError(f"cuda_graph {value!r} is neither True/False nor method names")
    unknown = sorted(set(names) - {name or "forward" for name in programs})
    if unknown:
        raise OptionError(
            f"cuda_graph names {', '.join(map(repr, unknown))}, which the program does not have (its methods: "
            f"{', '.join(name or 'forward' for name in programs)})"
        )
    del options["cuda_graph"]
    return {"" if n == "forward" and "" in programs else n for n in names}


def _check_methods(programs: Mapping, example_inputs, dynamic_shapes) -> None:
    """Several methods come as ExportedPrograms by method name, exported already (their inputs and dynamic shapes
    with them)."""
    if not programs:
        raise OptionError("no methods to lower: the dict of methods is empty")
    for name, ep in programs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise OptionError(f"method name {name!r} is not an identifier")
        if not isinstance(ep, torch.export.ExportedProgram):
            raise OptionError(
                f"method {name!r} is a {type(ep).__name__}; several methods are lowered from ExportedPrograms "
                "(torch.export.export each one first)"
            )
    if example_inputs or dynamic_shapes is not None:
        raise OptionError("example_inputs and dynamic_shapes belong to torch.export of each method, not to lower()")


def _check_model(model, example_inputs, caller: str) -> None:
    """One method comes as an ExportedProgram, or as a module with the example inputs its forward takes (else
    torch.export's own error, "missing a required argument: 'input'", says nothing of what to pass)."""
    path = "path, " if caller == "save" else ""
    how = (
        f"et_tensorrt.{caller} takes an ExportedProgram, or a torch.nn.Module with its example inputs: "
        f"et_tensorrt.{caller}({path}model, (x,)) or et_tensorrt.{caller}({path}torch.export.export(model, (x,)))"
    )
    if isinstance(model, torch.export.ExportedProgram):
        return
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"the model is a {type(model).__name__}: {how}")
    if isinstance(example_inputs, torch.Tensor):
        raise TypeError(f"the example inputs are one tensor, not a tuple of them: {how}")
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # a forward Python cannot describe: torch.export says what it needs
        return
    try:
        signature.bind(*example_inputs)
    except TypeError:
        takes = ", ".join(signature.parameters)
        given = f"{len(example_inputs)} example input(s)" if len(example_inputs) else "no example inputs"
        raise TypeError(f"{type(model).__name__}.forward takes ({takes}) and was given {given}: {how}") from None


def _forget_lowered_modules() -> None:
    """Two process-wide caches keep every lowered module alive after its lowering, and with it its blobs and named
    data (engines, the model's weights): ExecuTorch 1.5.1's unbounded ``lru_cache`` on
    ``exir.backend.utils.is_same_node`` (keyed by graph nodes) and torch's fake-tensor dispatch cache (keyed with
    the lowered module of each delegate call). Cleared once a lowering is done, a large model's memory goes when
    its program does."""
    from executorch.exir.backend import utils
    from torch._subclasses.fake_tensor import FakeTensorMode

    if hasattr(utils.is_same_node, "cache_clear"):
        utils.is_same_node.cache_clear()
    FakeTensorMode.cache_clear()


def make_partitioner(options: Mapping[str, Any], build_options: BuildOptions | None = None):
    """The ``TensorRTPartitioner`` :func:`lower` uses for these options (checked here, see ``_split_options``)."""
    return _partitioner(*_split_options(options, build_options))


def _partitioner(partitioner_options: Mapping[str, Any], build: BuildOptions):
    from .backend import EtTensorRTBackend  # noqa: F401  (ExecuTorch finds preprocess by class name)
    from .partition import TensorRTPartitioner

    return TensorRTPartitioner(**partitioner_options, compile_specs=build.to_specs())


def export(
    model: torch.nn.Module | torch.export.ExportedProgram,
    example_inputs: Sequence[torch.Tensor] = (),
    dynamic_shapes: Any | None = None,
    *,
    strict: bool = False,
) -> torch.export.ExportedProgram:
    """``torch.export`` as :func:`lower` does it (an ExportedProgram is taken as it is), constant masks folded."""
    from .partition.constant_masks import fold_constant_masks

    if isinstance(model, torch.export.ExportedProgram):
        program = model
    else:
        program = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=strict)
    # Constant boolean masks become integer positions first, so their outputs' sizes are static (explain does too).
    return fold_constant_masks(program)


def executorch_config(*, zero_copy_inputs: bool = True, zero_copy_outputs: bool = False):
    """``to_executorch``'s config for :func:`lower`: ExecuTorch's defaults with method inputs (and, when asked,
    outputs) left out of the memory plan, so the runtime sees the caller's own tensors."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    return ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(
            alloc_graph_input=not zero_copy_inputs, alloc_graph_output=not zero_copy_outputs
        )
    )


lower.last_report = None  # the PartitionReport of the last lowering (of its last method, for several)
lower.last_reports = {}  # method name -> its PartitionReport


@dataclass(frozen=True)
class SavedProgram:
    """What :func:`save` wrote: the .pte, and the .ptd beside it when the program keeps named data outside it."""

    path: str
    data_path: str | None
    pte_bytes: int
    ptd_bytes: int


def data_path_for(path: str | os.PathLike) -> str:
    """The .ptd that :func:`save` writes beside ``path`` (``model.pte`` -> ``model.ptd``)."""
    root, _ = os.path.splitext(os.fspath(path))
    return root + ".ptd"


def write_program(program, path: str | os.PathLike) -> SavedProgram:
    """An ``ExecutorchProgramManager`` written to ``path`` and, when it keeps named data outside the .pte (one
    external tag, as ``named_data="ptd"`` makes), to :func:`data_path_for` ``path``; piece by piece, never joined
    in memory. Atomic (:func:`et_tensorrt.atomic_file.replacing`): a save that fails (a full disk) or is killed
    leaves the files at those paths as they were; an ``OSError`` names the file."""
    from .atomic_file import replacing

    path = os.fspath(path)
    data = dict(program._tensor_data or {})  # ExecuTorch's serialized .ptd files by external tag
    if len(data) > 1:
        raise OptionError(f"the program keeps named data in {len(data)} external files ({sorted(data)}); expected one")
    data_path = data_path_for(path) if data else None
    # the .ptd renamed into place first: the .pte, which needs it, last
    with replacing(*filter(None, (data_path, path))) as files:
        if data:
            (cord,) = data.values()
            cord.write_to_file(files[0])
        program.write_to_file(files[-1])
    size = os.path.getsize
    return SavedProgram(path, data_path, size(path), size(data_path) if data_path else 0)


def save(path: str | os.PathLike, *args: Any, progress: Any = None, **kwargs: Any) -> SavedProgram:
    """:func:`lower`, then write the program to ``path`` piece by piece (the weights are never joined into one
    ``bytes``); with ``named_data="ptd"`` the engines and weights go to a .ptd beside it (``model.pte`` ->
    ``model.ptd``), which the program needs to run (``Runner(path, data_path=...)``)."""
    from . import progress as steps

    with steps.reporting(progress) as shown:
        program = lower_program(*args, progress=shown, _caller="save", **kwargs)
        with steps.step("program", "write"):
            return write_program(program, path)
