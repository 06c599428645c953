"""``PartitionJob``: one partition on its way through preprocess's stages, and the per-process state
around them (the ``stats`` counters, the engine counter, the active ``record_exports()`` maps)."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from et_tensorrt import compile_specs as cs

if TYPE_CHECKING:
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from torch.export import ExportedProgram

    from et_tensorrt.backend.refit_derivation import RefitPlan
    from et_tensorrt.backend.state_lifting import State
    from et_tensorrt.builder import build_cache
    from et_tensorrt.builder.engine_builder import BuildSettings
    from et_tensorrt.builder.held_data import FileRegion
    from et_tensorrt.builder.onnx_export import OnnxExport
    from et_tensorrt.errors import EngineBuildError
    from et_tensorrt.format import blob as blob_mod

_engine_counter = itertools.count(1)
# Per-process counters (tests and tools read them): engines built, cache hits, host fallbacks.
stats = {"partitions": 0, "built": 0, "cache_hits": 0, "fallbacks": 0}
_recorders: list[dict] = []  # the active record_exports() maps


@dataclass(frozen=True)
class PartitionExport:
    """What preprocess made of one partition: its label ("engine 2/3"), build options and ONNX export."""

    label: str
    options: cs.BuildOptions
    export: OnnxExport


@contextlib.contextmanager
def record_exports():
    """Collects, while active, the ONNX export of every partition preprocessed in this process, by
    :func:`et_tensorrt.format.blob.program_digest` (``et-tensorrt check`` runs them with onnxruntime on the user's
    inputs)."""
    exports: dict[str, PartitionExport] = {}
    _recorders.append(exports)
    try:
        yield exports
    finally:
        _recorders.remove(exports)


@dataclass(eq=False)
class PartitionJob:
    """One partition's inputs and everything the stages make of it, in the order they make it (the stage
    that writes each field is named beside it; see stages/__init__.py)."""

    # inputs
    edge_program: ExportedProgram
    compile_specs: list[CompileSpec]
    # the program's methods (preprocess_multimethod): this partition's method, and per state it shares with other
    # methods the methods that declare it, with the named datum that marks the program (backend/state_sharing.py)
    method: str = ""
    methods: int = 1  # how many methods the program has (named_data="auto" stores their weights once when several)
    shared_states: dict[str, tuple[str, ...]] = field(default_factory=dict)
    program_marker: tuple[str, bytes] | None = None
    # options
    options: dict[str, str] = field(default_factory=dict)  # the decoded compile specs
    build: cs.BuildOptions | None = None
    settings: BuildSettings | None = None
    device: str = ""  # the execution device, as the compile spec spells it ("cuda:0")
    exec_device: tuple[int, int] = (0, 0)  # its blob code: (device type, index)
    label: str = ""  # "engine 2/3", in log lines and errors
    n_nodes: int = 0  # call_function nodes of the edge partition
    # to_aten
    recorded: ExportedProgram | None = None  # the aten program, on the devices the partition recorded
    aten_ep: ExportedProgram | None = None  # the same on the host: ONNX, validation, the embedded program
    # legalize_quant
    quantization: dict | None = None  # what the partition's quantization became (quant_legalization.Summary)
    # lift_state
    states: list[State] = field(default_factory=list)
    engine_ep: ExportedProgram | None = None  # the aten program with the states as trailing inputs/outputs
    # metadata (then every later stage adds to it)
    metadata: dict = field(default_factory=dict)
    # cache_lookup
    program: tuple[bytes, list] | None = None  # the embedded program's (GRAPH, WEIGHTS)
    program_error: EngineBuildError | None = None  # what refuses it (raised by embed, after the build)
    key: str | None = None  # the build-cache key; None when the cache is off or cannot key the partition
    entry: build_cache.Entry | None = None  # the cache entry this partition is served from
    from_cache: bool = False  # served from the build cache: to_onnx, validate and build are skipped
    dynamic_dims: dict = field(default_factory=dict)
    # to_onnx (or cache_lookup, when a hit must be checked against the ONNX)
    export: OnnxExport | None = None
    export_metadata: dict = field(default_factory=dict)  # what a cache entry stores for its hits' metadata
    # validate
    validation: dict | None = None
    fallback: str | None = None  # why the partition is left to the host (validate or build)
    # recipe (or cache_lookup, on a hit)
    recipe: bytes | None = None  # the RECIPE section (build.device_build)
    recipe_map: RefitPlan | None = None  # its initializer map (a weights="refit" REFIT_MAP reuses it)
    # build (or cache_lookup, on a hit)
    engine: FileRegion | None = None  # held in the file it was streamed to (a cache entry's, or a temp file)
    io_entries: list[blob_mod.IOEntry] = field(default_factory=list)
    # embed
    graph: bytes | None = None
    weights: list = field(default_factory=list)
    refit: RefitPlan | None = None
    named: list = field(default_factory=list)  # blob.NamedRef: the engine and weights left to named data
    data_store: object = None  # their NamedDataStoreOutput (PreprocessResult.data_store_output)
    # serialize
    blob: bytes = b""
