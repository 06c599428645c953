"""Stage ``build`` (skipped on a cache hit): the TensorRT engine built from the ONNX
(builder/engine_builder.py), streamed into a new build-cache entry (the partition's RECIPE after it) or a temp
file, and the I/O table.

When TensorRT refuses the partition (or validate did) and ``pass_through_build_failures`` is off, the
partition is left to the host (``fall_back``): no engine, and the runtime runs the embedded program with
PyTorch; with it on, the refusal is raised, labelled."""

from __future__ import annotations

import logging
from collections import Counter

import torch
from torch.export import ExportedProgram

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend.stages.job import PartitionJob, stats
from et_tensorrt.builder import build_cache
from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.builder.engine_builder import build_engine
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.format import blob as blob_mod

logger = logging.getLogger("et_tensorrt")


def _io_entries(export, engine_built: bool = True) -> list:
    """The I/O table: arguments (tensors, sizes) in order, then outputs. With an engine, dims are its profile
    range (the union of its profiles); without one, the program's declared ranges (unbounded stays -1)."""
    entries = []
    for role, infos in ((blob_mod.ROLE_INPUT, export.delegate_inputs), (blob_mod.ROLE_OUTPUT, export.delegate_outputs)):
        for info in infos:
            if info.is_size:
                value = (info.value,) if engine_built else info.declared_dims
                entries.append(
                    blob_mod.IOEntry(blob_mod.ROLE_SIZE, info.name, blob_mod.scalar_type_code(torch.int64), value)
                )
                continue
            dev_type, dev_index = blob_mod.device_code(info.device)
            entries.append(
                blob_mod.IOEntry(
                    role=role,
                    name=info.name,
                    dtype=blob_mod.scalar_type_code(info.dtype),
                    dims=info.dims if engine_built else info.declared_dims,
                    device_type=dev_type,
                    device_index=dev_index,
                )
            )
    return entries


def _describe(label: str, edge_program: ExportedProgram, n_nodes: int, build: cs.BuildOptions) -> dict:
    """What a cache entry is, for `et-tensorrt cache list`."""
    ops = Counter(
        str(getattr(n.target, "__name__", n.target)).removeprefix("aten.").split(".")[0]
        for n in edge_program.graph.nodes
        if n.op == "call_function"
    )
    inputs = [
        "x".join(str(d) for d in n.meta["val"].shape)
        for n in user_input_nodes(edge_program)
        if isinstance(n.meta.get("val"), torch.Tensor)
    ]
    return {
        "label": label,
        "nodes": n_nodes,
        "ops": ", ".join(f"{op} x{k}" for op, k in ops.most_common(3)),
        "inputs": inputs,
        "precision": build.precision,
    }


def fall_back(job: PartitionJob, exc: EngineBuildError) -> None:
    """The partition refused (by validate or the build): raised, labelled, under ``pass_through_build_failures``;
    else left to the host. Called while ``exc`` is being handled."""
    if job.build.pass_through_build_failures:
        raise EngineBuildError(f"{job.label}: {exc}") from exc
    stats["fallbacks"] += 1
    job.fallback = job.metadata["fallback_reason"] = str(exc)
    logger.warning("%s: left to the host (PyTorch runs the partition): %s", job.label, exc)


def _cache_entry(job: PartitionJob, io: list) -> build_cache.Entry | None:
    """The build-cache entry the engine is streamed into (None: not cached). Its header is known before the build:
    the engine's I/O table, the export's facts, the validation outcome; the RECIPE (stage ``recipe``) follows the
    engine in the entry."""
    if job.key is None or job.program_error is not None:
        return None
    return build_cache.Entry(
        key=job.key,
        engine=b"",
        io=io,
        metadata=job.export_metadata,
        onnx_sha256=job.export.digest(),
        validation=job.validation,
        info=_describe(job.label, job.edge_program, job.n_nodes, job.build),
        recipe=job.recipe,
    )


def run(job: PartitionJob) -> None:
    export = job.export
    if job.fallback is None:  # validate did not refuse the partition
        try:
            sink = build_cache.engine_writer(_cache_entry(job, _io_entries(export)))
            result = build_engine(export, job.settings, sink)
            job.engine = result.engine  # held in the file it was streamed to (a cache entry or a temp file)
            job.metadata.update(build_seconds=round(result.seconds, 3))
            stats["built"] += 1
            logger.info(
                "%s: %d nodes, onnx %.2f s, build %.2f s, %d KiB",
                job.label,
                job.n_nodes,
                export.seconds,
                result.seconds,
                (len(job.engine) + 1023) // 1024,
            )
        except EngineBuildError as exc:
            fall_back(job, exc)
    job.io_entries = _io_entries(export, engine_built=job.engine is not None)
