"""``EtTensorRTBackend``: ExecuTorch's AOT hook that turns one partition into a delegate blob.

edge partition -> aten ExportedProgram -> build cache lookup (backend/build_cache.py, keyed by the partition
itself; a hit goes straight to the blob) -> ONNX (in memory) -> [onnxruntime validation] -> TensorRT engine
(stored in the cache) -> blob (docs/blob-format.md) with the engine and the aten program (GRAPH:
torch.export's JSON, WEIGHTS: raw tensors; nothing pickled, see et_tensorrt.embedded_program).

When TensorRT refuses the partition and ``pass_through_build_failures`` is off, the blob carries no ENGINE
section and the runtime runs the embedded program with PyTorch (ExecuTorch cannot un-delegate after
preprocess); a warning names the op.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import time
from collections import Counter
from dataclasses import dataclass

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from et_tensorrt import blob as blob_mod
from et_tensorrt import compile_specs as cs
from et_tensorrt import trt
from et_tensorrt.backend import build_cache
from et_tensorrt.backend.edge_to_aten import edge_to_aten, on_host, user_input_nodes, user_output_nodes
from et_tensorrt.backend.engine_builder import BuildSettings, build_engine
from et_tensorrt.backend.onnx_export import OnnxExport, export_onnx, find_float64, partition_io
from et_tensorrt.backend.profiles import decode_dynamic_dims
from et_tensorrt.backend.state_lifting import engine_program, find_states
from et_tensorrt.backend.state_validation import validate_steps
from et_tensorrt.backend.validation import ValidationInconclusive
from et_tensorrt.backend.validation import validate as validate_onnx
from et_tensorrt.embedded_program.writer import check_graph, serialize_program
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


def _program(aten_ep: ExportedProgram) -> tuple[tuple[bytes, list] | None, EngineBuildError | None]:
    """(GRAPH, WEIGHTS) of the embedded program, not yet checked by the safe loader's rules (a cache hit
    needs no check: its GRAPH passed when the entry was stored), or the error that refuses it."""
    try:
        return serialize_program(aten_ep, check=False), None
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
    _record_devices(export, recorded)

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


def _validation(aten_ep: ExportedProgram, export: OnnxExport, precision: str, label: str, states) -> dict:
    try:
        if states:  # the state carried over consecutive calls, as the delegate will
            return {"validation_max_abs_error": validate_steps(aten_ep, export, states, precision)}
        return {"validation_max_abs_error": validate_onnx(aten_ep, export, precision)}
    except ValidationInconclusive as exc:  # nothing compared: say so, build anyway
        logger.warning("%s: ONNX not validated: %s", label, exc)
        return {"validation_inconclusive": str(exc)}


def _refit_map(export, weights, aten_ep, label: str):
    """The partition's REFIT_MAP: a recipe per ONNX initializer (verified against the blob, see _verify_refit)."""
    from et_tensorrt.backend.refit_derivation import derive_refit_map

    plan = derive_refit_map(export.model_bytes, weights, aten_ep)
    if plan.raw_bytes:
        logger.info(
            "%s: refit map stores %d bytes raw (initializers not rebuilt from the program's weights)",
            label,
            plan.raw_bytes,
        )
    return plan


def _verify_refit(export, data: bytes) -> None:
    """Every ONNX initializer rebuilt from the written blob (through the C++ reader's parse of WEIGHTS and
    REFIT_MAP, as the runtime will) equals the bytes the engine was built with; EngineBuildError otherwise."""
    from et_tensorrt.backend.refit_derivation import verify_refit_map
    from et_tensorrt.embedded_program.loader import weight_tensors

    blob = blob_mod.read_blob(data)
    names = [w.name for w in blob.weights]
    verify_refit_map(export.model_bytes, blob.refit_entries, weight_tensors(blob), blob.refit_map, names)


def _export(engine_ep, precision, max_factor, dynamic_dims, states) -> OnnxExport:
    """The ONNX export of the engine program, its trailing inputs and outputs named as the states' bindings."""
    export = export_onnx(engine_ep, precision, max_factor, dynamic_dims)
    export.state_count = len(states)
    n_in, n_out = len(export.inputs) - len(states), len(export.outputs) - len(states)
    for i, state in enumerate(states):
        state.input_name, state.output_name = export.inputs[n_in + i].name, export.outputs[n_out + i].name
        if state.in_place:
            export.aliased[state.output_name] = state.input_name
    return export


def state_table(states) -> bytes:
    """The blob's STATE section for the partition's states (state_lifting.State)."""
    from et_tensorrt import state_table as table

    entries = []
    for s in states:
        guard = s.guard
        entries.append(
            table.StateEntry(
                name=s.buffer,
                dtype=s.dtype,
                shape=s.shape,
                input_name=s.input_name,
                output_name=s.output_name,
                update=table.UPDATE_IN_PLACE if s.in_place else table.UPDATE_WRITE_BACK,
                initial=table.initial_bytes(s.initial),
                position_input=guard.input if guard else table.NO_INPUT,
                position_kind=guard.kind if guard else 0,
                length_input=guard.length_input if guard else table.NO_INPUT,
                length_dim=guard.length_dim if guard else 0,
                length_value=guard.length_value if guard else 0,
            )
        )
    return table.encode_state_table(entries)


class EtTensorRTBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
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
        # Where state is lifted: the partition's mutable buffers become engine inputs/outputs (state_lifting).
        in_place = "" if precision == "fp32" else f"in-place writes need an fp32 engine ({precision} casts its inputs)"
        states = find_states(aten_ep, in_place)
        engine_ep = engine_program(aten_ep, states)
        metadata = {
            "trt_flavour": trt.flavour(),
            "trt_version": trt.version(),
            "precision": precision,
            "target_archs": list(settings.target_archs),
            "execution_device": device,
            "nodes": n_nodes,
            "weights": build.weights,
        }

        # The build cache is keyed before the ONNX export: a hit skips export, validation and the build.
        t0 = time.perf_counter()
        program, program_error = _program(aten_ep)
        key = (
            _cache_key(engine_ep, recorded, program, build, options, states)
            if build.cache and program is not None
            else None
        )
        entry = build_cache.load(key) if key is not None else None
        if entry is not None and build.validate and entry.validation is None:
            entry = None  # built without the onnxruntime check this lowering asks for: build again, checked
        dynamic_dims = decode_dynamic_dims(options.get(cs.DYNAMIC_DIMS, ""))
        export = None
        if entry is not None and (_recorders or build.weights == "refit"):
            # `et-tensorrt check` runs each engine's ONNX, and a REFIT_MAP is derived from its initializers:
            # export it now, and use the cached engine only if this is byte for byte the ONNX it was built from.
            export = _export(engine_ep, precision, build.unbounded_max_factor, dynamic_dims, states)
            _record_devices(export, recorded)
            if hashlib.sha256(export.model_bytes).hexdigest() != entry.onnx_sha256:
                logger.info("%s: the ONNX export differs from the cached engine's; building again", label)
                entry = None
        lookup_s = time.perf_counter() - t0
        metadata["cache"] = "off" if key is None else "hit" if entry is not None else "miss"
        if key is not None:
            metadata["engine_cache_key"] = key

        engine = None
        if entry is not None:
            engine, io_entries = entry.engine, entry.io
            for state, (input_name, output_name) in zip(states, entry.metadata.get("state_bindings", [])):
                state.input_name, state.output_name = input_name, output_name
            metadata.update(entry.metadata, cache_seconds=round(lookup_s, 3))
            if build.validate:
                metadata.update(entry.validation)
            stats["cache_hits"] += 1
            logger.info(
                "%s: %d nodes, from the build cache in %.2f s, %d KiB",
                label,
                n_nodes,
                lookup_s,
                (len(engine) + 1023) // 1024,
            )
        else:
            # The loader's verdict on the program is raised after the build, so a TensorRT refusal is what
            # a partition of an unsupported op reports.
            program_error = _checked(program, program_error)
            if export is None:
                t0 = time.perf_counter()
                export = _export(engine_ep, precision, build.unbounded_max_factor, dynamic_dims, states)
                _record_devices(export, recorded)
                export.seconds = time.perf_counter() - t0
            onnx_s = export.seconds
            export_metadata = {"onnx_opset": export.opset, "profile_max_picked": export.picked_max}
            if states:
                export_metadata["state_bindings"] = [[s.input_name, s.output_name] for s in states]
            if export.profile_count > 1 or any(i.is_size for i in export.inputs):
                export_metadata["optimization_profiles"] = _profiles_metadata(export)
            metadata.update(export_metadata, onnx_seconds=round(onnx_s, 3))
            if export.picked_max:
                logger.info(
                    "%s: unbounded dynamic dims built up to %s (compile spec %s)",
                    label,
                    export.picked_max,
                    UNBOUNDED_MAX_FACTOR,
                )
            validation = None
            try:
                f64 = find_float64(aten_ep)
                if f64 is not None:
                    raise EngineBuildError(
                        f"node {f64} uses float64, which TensorRT silently narrows to float32; "
                        "cast the model to float32 or keep this op on the host"
                    )
                if build.validate:
                    validation = _validation(engine_ep, export, precision, label, states)
                    metadata.update(validation)
                result = build_engine(export, settings)
                engine = result.engine
                metadata.update(build_seconds=round(result.seconds, 3))
                stats["built"] += 1
                logger.info(
                    "%s: %d nodes, onnx %.2f s, build %.2f s, %d KiB",
                    label,
                    n_nodes,
                    onnx_s,
                    result.seconds,
                    (len(engine) + 1023) // 1024,
                )
            except EngineBuildError as exc:
                if build.pass_through_build_failures:
                    raise EngineBuildError(f"{label}: {exc}") from exc
                stats["fallbacks"] += 1
                metadata["fallback_reason"] = str(exc)
                logger.warning("%s: left to the host (PyTorch runs the partition): %s", label, exc)
            io_entries = _io_entries(export, engine_built=engine is not None)
            if engine is not None and key is not None and program_error is None:
                build_cache.store(
                    build_cache.Entry(
                        key=key,
                        engine=engine,
                        io=io_entries,
                        metadata=export_metadata,
                        onnx_sha256=hashlib.sha256(export.model_bytes).hexdigest(),
                        validation=validation,
                        info=_describe(label, edge_program, n_nodes, build),
                    )
                )

        # The embedded program (checked by the runtime's own safe-loader checks).
        if program_error is not None:
            raise program_error
        graph, weights = program
        refit = None
        if engine is not None and build.weights == "refit":
            refit = _refit_map(export, weights, aten_ep, label)
            metadata.update(refit_entries=len(refit.entries), refit_raw_bytes=refit.raw_bytes)
        elif engine is not None and build.weights == "engine-only":
            graph, weights = None, []  # the smallest blob: runs only where the engine deserializes
        elif engine is None and build.weights != "both":
            metadata["weights_mode_dropped"] = f"{build.weights}: no engine was built, the program is kept"
        data = blob_mod.write_blob(
            io_entries,
            engine=engine,
            graph=graph,
            weights=weights,
            refit_map=refit.payload if refit is not None else None,
            state=state_table(states) if states else None,
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
