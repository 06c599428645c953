"""``EtTensorRTBackend``: ExecuTorch's AOT hook that turns one partition into a delegate blob.

edge partition -> aten ExportedProgram -> ONNX (in memory) -> [onnxruntime validation] -> TensorRT engine
(through the on-disk build cache) -> blob (docs/blob-format.md) with the engine and the aten program
(GRAPH: torch.export's JSON, WEIGHTS: raw tensors; nothing pickled, see et_tensorrt.embedded_program).

When TensorRT refuses the partition and ``pass_through_build_failures`` is off, the blob carries no ENGINE
section and the runtime runs the embedded program with PyTorch (ExecuTorch cannot un-delegate after
preprocess); a warning names the op.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from dataclasses import dataclass
from typing import List

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from et_tensorrt import compile_specs as cs
from et_tensorrt import blob as blob_mod
from et_tensorrt import trt
from et_tensorrt.backend.edge_to_aten import edge_to_aten, on_host, user_input_nodes, user_output_nodes
from et_tensorrt.backend.engine_builder import BuildSettings, build_engine
from et_tensorrt.backend.onnx_export import OnnxExport, export_onnx, find_float64
from et_tensorrt.backend.profiles import decode_dynamic_dims
from et_tensorrt.backend.validation import ValidationInconclusive, validate as validate_onnx
from et_tensorrt.embedded_program import serialize_program
from et_tensorrt.errors import EngineBuildError

logger = logging.getLogger("et_tensorrt")

PARTITION_INDEX = cs.PARTITION_INDEX
PARTITION_COUNT = cs.PARTITION_COUNT
UNBOUNDED_MAX_FACTOR = cs.UNBOUNDED_MAX_FACTOR

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
    :func:`et_tensorrt.blob.program_digest` (``et-tensorrt check`` runs them with onnxruntime on the user's inputs)."""
    exports: dict[str, PartitionExport] = {}
    _recorders.append(exports)
    try:
        yield exports
    finally:
        _recorders.remove(exports)


def _io_entries(export, engine_built: bool = True) -> list:
    """The I/O table: arguments (tensors, sizes) in order, then outputs. With an engine, dims are its profile
    range (the union of its profiles); without one, the program's declared ranges (unbounded stays -1)."""
    entries = []
    for role, infos in ((blob_mod.ROLE_INPUT, export.inputs), (blob_mod.ROLE_OUTPUT, export.outputs)):
        for info in infos:
            if info.is_size:
                value = (info.value,) if engine_built else info.declared_dims
                entries.append(blob_mod.IOEntry(blob_mod.ROLE_SIZE, info.name, blob_mod.scalar_type_code(torch.int64),
                                                value))
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


def _refit_map(export, weights, aten_ep, label: str):
    """The partition's REFIT_MAP: a recipe per ONNX initializer (verified against the blob, see _verify_refit)."""
    from et_tensorrt.backend.refit_derivation import derive_refit_map

    plan = derive_refit_map(export.model_bytes, weights, aten_ep)
    if plan.raw_bytes:
        logger.info("%s: refit map stores %d bytes raw (initializers not rebuilt from the program's weights)",
                    label, plan.raw_bytes)
    return plan


def _verify_refit(export, data: bytes) -> None:
    """Every ONNX initializer rebuilt from the written blob (through the C++ reader's parse of WEIGHTS and
    REFIT_MAP, as the runtime will) equals the bytes the engine was built with; EngineBuildError otherwise."""
    from et_tensorrt.backend.refit_derivation import verify_refit_map
    from et_tensorrt.embedded_program.loader import weight_tensor

    blob = blob_mod.read_blob(data)
    tensors = [weight_tensor(blob, w) for w in blob.weights]
    verify_refit_map(export.model_bytes, blob.refit_entries, tensors, blob.refit_map, [w.name for w in blob.weights])


def _record_devices(export, recorded: ExportedProgram) -> None:
    """The engine's I/O devices as the partition recorded them (the export ran on the host form)."""
    values = [n.meta["val"] for n in user_input_nodes(recorded)] + [
        o.meta["val"] for o in user_output_nodes(recorded) if isinstance(o, torch.fx.Node)
    ]
    for info, val in zip(export.inputs + export.outputs, values):
        if isinstance(val, torch.Tensor):  # a size input (a SymInt passed by value) has no device
            info.device = val.device


def _profiles_metadata(export) -> list:
    """Per optimization profile: engine input name -> [[min, opt, max], ...] (informational)."""
    from et_tensorrt.backend.engine_builder import profile_shapes

    return [
        {info.name: [[d.min, d.opt, d.max] for d in dims] for info, dims in zip(export.engine_inputs, shapes)}
        for shapes in profile_shapes(export)
    ]


class EtTensorRTBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: List[CompileSpec]) -> PreprocessResult:
        options = cs.decode(compile_specs)
        unknown = sorted(set(options) - cs.KNOWN_KEYS)
        if unknown:
            logger.warning("ignoring unknown compile specs: %s", ", ".join(unknown))
        build = cs.BuildOptions.from_specs(options)
        precision = build.precision
        device = options.get(cs.EXECUTION_DEVICE, "cuda:0").strip()
        exec_type, exec_index = blob_mod.device_code(device)
        settings = BuildSettings(
            precision=precision,
            target_archs=build.target_archs,
            workspace_bytes=build.workspace_bytes,
            strip_weights=build.weights == "refit",
        )

        seq = next(_engine_counter)
        label = f"engine {options.get(PARTITION_INDEX, seq)}"
        if PARTITION_COUNT in options:
            label += f"/{options[PARTITION_COUNT]}"
        stats["partitions"] += 1
        n_nodes = sum(1 for n in edge_program.graph.nodes if n.op == "call_function")

        recorded = edge_to_aten(edge_program)
        # ONNX, validation and the embedded program use one device, the host (see on_host); the blob's I/O
        # table keeps the devices the program recorded.
        aten_ep = on_host(recorded)
        metadata = {
            "trt_flavour": trt.flavour(),
            "trt_version": trt.version(),
            "precision": precision,
            "target_archs": list(settings.target_archs),
            "execution_device": device,
            "nodes": n_nodes,
            "weights": build.weights,
        }

        t0 = time.perf_counter()
        dynamic_dims = decode_dynamic_dims(options.get(cs.DYNAMIC_DIMS, ""))
        export = export_onnx(aten_ep, precision, build.unbounded_max_factor, dynamic_dims)
        _record_devices(export, recorded)
        onnx_s = time.perf_counter() - t0
        metadata.update(onnx_opset=export.opset, onnx_seconds=round(onnx_s, 3), profile_max_picked=export.picked_max)
        if export.profile_count > 1 or any(i.is_size for i in export.inputs):
            metadata["optimization_profiles"] = _profiles_metadata(export)
        if export.picked_max:
            logger.info("%s: unbounded dynamic dims built up to %s (compile spec %s)", label, export.picked_max, UNBOUNDED_MAX_FACTOR)

        engine = None
        try:
            f64 = find_float64(aten_ep)
            if f64 is not None:
                raise EngineBuildError(
                    f"node {f64} uses float64, which TensorRT silently narrows to float32; "
                    "cast the model to float32 or keep this op on the host"
                )
            if build.validate:
                try:
                    metadata["validation_max_abs_error"] = validate_onnx(aten_ep, export, precision)
                except ValidationInconclusive as exc:  # nothing compared: say so, build anyway
                    metadata["validation_inconclusive"] = str(exc)
                    logger.warning("%s: ONNX not validated: %s", label, exc)
            result = build_engine(export, settings)
            engine = result.engine
            metadata.update(build_seconds=round(result.seconds, 3), engine_cache_key=result.cache_key, cache_hit=result.cache_hit)
            stats["cache_hits" if result.cache_hit else "built"] += 1
            logger.info(
                "%s: %d nodes, onnx %.2f s, build %.2f s%s, %d KiB",
                label, n_nodes, onnx_s, result.seconds, " (cache hit)" if result.cache_hit else "", (len(engine) + 1023) // 1024,
            )
        except EngineBuildError as exc:
            if build.pass_through_build_failures:
                raise EngineBuildError(f"{label}: {exc}") from exc
            stats["fallbacks"] += 1
            metadata["fallback_reason"] = str(exc)
            logger.warning("%s: left to the host (PyTorch runs the partition): %s", label, exc)

        # The embedded program (checked by the runtime's own safe-loader checks; after the build, so a
        # TensorRT refusal is what a partition of an unsupported op reports).
        graph, weights = serialize_program(aten_ep)
        refit = None
        if engine is not None and build.weights == "refit":
            refit = _refit_map(export, weights, aten_ep, label)
            metadata.update(refit_entries=len(refit.entries), refit_raw_bytes=refit.raw_bytes)
        elif engine is not None and build.weights == "engine-only":
            graph, weights = None, []  # the smallest blob: runs only where the engine deserializes
        elif engine is None and build.weights != "both":
            metadata["weights_mode_dropped"] = f"{build.weights}: no engine was built, the program is kept"
        io_entries = _io_entries(export, engine_built=engine is not None)
        data = blob_mod.write_blob(
            io_entries,
            engine=engine,
            graph=graph,
            weights=weights,
            refit_map=refit.payload if refit is not None else None,
            metadata=metadata,
            exec_device_type=exec_type,
            exec_device_index=exec_index,
        )
        if refit is not None:
            _verify_refit(export, data)
        if _recorders:
            digest = blob_mod.program_digest(blob_mod.read_blob(data))
            for exports in _recorders:
                exports[digest] = PartitionExport(label, build, export)
        return PreprocessResult(processed_bytes=data)
