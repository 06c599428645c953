"""Stage ``cache_lookup``: the build cache (builder/build_cache.py), keyed before the ONNX export by the
partition itself (its embedded program, I/O facts, build options, tool versions, states). A hit fills the
engine, I/O table and metadata from the entry and marks the job ``from_cache``: to_onnx, validate and build
are skipped. A miss checks the embedded program with the safe loader's rules (a hit's passed when its entry
was stored)."""

from __future__ import annotations

import logging
import time

from torch.export import ExportedProgram

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend.stages.job import PartitionJob, _recorders, stats
from et_tensorrt.backend.stages.to_onnx import export_program, record_devices
from et_tensorrt.builder import build_cache
from et_tensorrt.builder.onnx_export import OnnxExport, partition_io
from et_tensorrt.builder.profiles import decode_dynamic_dims
from et_tensorrt.builder.quant_legalization import host_program
from et_tensorrt.embedded_program.writer import check_graph, serialize_program
from et_tensorrt.errors import EngineBuildError

logger = logging.getLogger("et_tensorrt")


def _program(aten_ep: ExportedProgram) -> tuple[tuple[bytes, list] | None, EngineBuildError | None]:
    """(GRAPH, WEIGHTS) of the embedded program, not yet checked by the safe loader's rules (a cache hit
    needs no check: its GRAPH passed when the entry was stored), or the error that refuses it. Quantize and
    dequantize are spelled as aten arithmetic there, over the same quantized weights (``host_program``)."""
    try:
        return serialize_program(host_program(aten_ep), check=False), None
    except EngineBuildError as exc:
        return None, exc


def _checked(program: tuple[bytes, list] | None, error: EngineBuildError | None) -> EngineBuildError | None:
    """The error that refuses the program, checking its GRAPH with the safe loader's rules."""
    if program is None:
        return error
    try:
        check_graph(program[0])
    except EngineBuildError as exc:
        return exc
    return None


def _cache_key(
    aten_ep: ExportedProgram,
    recorded: ExportedProgram,
    program: tuple[bytes, list],
    build: cs.BuildOptions,
    options: dict[str, str],
    states=(),
) -> str | None:
    """The partition's build-cache key, or None when its arguments' ranges cannot be read (the export then
    says why)."""
    try:
        dynamic_dims = decode_dynamic_dims(options.get(cs.DYNAMIC_DIMS, ""))
        inputs, outputs, _, _ = partition_io(aten_ep, build.unbounded_max_factor, dynamic_dims)
    except EngineBuildError:
        return None
    export = OnnxExport(b"", 0, inputs, outputs)
    record_devices(export, recorded)

    def fact(info) -> list:
        return [
            bool(info.name),
            str(info.dtype),
            str(info.device),
            repr(info.dims),
            repr(info.declared_dims),
            repr(info.profiles),
            repr(info.value),
        ]

    graph, weights = program
    facts = {
        "inputs": [fact(i) for i in inputs],
        "outputs": [fact(o) for o in outputs],
        "dynamic_dims": options.get(cs.DYNAMIC_DIMS, ""),
        "options": build.engine_options(),
        "tools": build_cache.tool_versions(build.target_archs),
        # how each state is updated (in place: a TensorScatter in the ONNX) shapes the engine too
        "states": [[s.buffer, s.in_place, repr(s.guard)] for s in states],
    }
    return build_cache.partition_key(graph, weights, facts)


def _serve(job: PartitionJob, lookup_s: float) -> None:
    """A hit: the engine, I/O table, state bindings and metadata from the cache entry."""
    entry = job.entry
    job.engine, job.io_entries, job.recipe = entry.engine, entry.io, entry.recipe
    for state, (input_name, output_name) in zip(job.states, entry.metadata.get("state_bindings", [])):
        state.input_name, state.output_name = input_name, output_name
    job.metadata.update(entry.metadata, cache_seconds=round(lookup_s, 3))
    if job.build.validate:
        job.metadata.update(entry.validation)
    stats["cache_hits"] += 1
    logger.info(
        "%s: %d nodes, from the build cache in %.2f s, %d KiB",
        job.label,
        job.n_nodes,
        lookup_s,
        (len(job.engine) + 1023) // 1024,
    )


def run(job: PartitionJob) -> None:
    build = job.build
    t0 = time.perf_counter()
    job.program, job.program_error = _program(job.aten_ep)
    key = job.key = (
        _cache_key(job.engine_ep, job.recorded, job.program, build, job.options, job.states)
        if build.cache and job.program is not None
        else None
    )
    entry = build_cache.load(key) if key is not None else None
    if entry is not None and build.validate and entry.validation is None:
        entry = None  # built without the onnxruntime check this lowering asks for: build again, checked
    if entry is not None and build.device_build and entry.recipe is None:
        entry = None  # stored by a lowering without a recipe: build again, with one
    job.dynamic_dims = decode_dynamic_dims(job.options.get(cs.DYNAMIC_DIMS, ""))
    if entry is not None and (_recorders or build.weights == "refit"):
        # `et-tensorrt check` runs each engine's ONNX, and a REFIT_MAP is derived from its initializers:
        # export it now, and use the cached engine only if this is byte for byte the ONNX it was built from.
        job.export = export_program(job)
        if job.export.digest() != entry.onnx_sha256:
            logger.info("%s: the ONNX export differs from the cached engine's; building again", job.label)
            entry = None
    lookup_s = time.perf_counter() - t0
    job.metadata["cache"] = "off" if key is None else "hit" if entry is not None else "miss"
    if key is not None:
        job.metadata["engine_cache_key"] = key

    job.entry = entry
    job.from_cache = entry is not None
    if job.from_cache:
        _serve(job, lookup_s)
    else:
        # The loader's verdict on the program is raised after the build (by embed), so a TensorRT refusal
        # is what a partition of an unsupported op reports.
        job.program_error = _checked(job.program, job.program_error)
