"""Parse the partition's ONNX with TensorRT's ONNX parser (its weights from memory: builder/onnx_weights.py) and
build a serialized engine: the one builder, used by lowering (the ONNX export) and on the device
(et_tensorrt.runtime.device_build: the RECIPE's graph, every initializer rebuilt from the blob's WEIGHTS and
handed over the same way). Imports neither ONNX nor ExecuTorch at load time (the device may have no ``onnx``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from et_tensorrt import trt
from et_tensorrt.builder import onnx_weights
from et_tensorrt.builder.build_cache import EngineWriter
from et_tensorrt.builder.held_data import FileRegion
from et_tensorrt.builder.onnx_export import OnnxExport, onnx_node_origin
from et_tensorrt.errors import EngineBuildError

logger = logging.getLogger("et_tensorrt")


@dataclass
class BuildSettings:
    precision: str = "fp32"
    target_archs: tuple[str, ...] = ()
    workspace_bytes: int | None = None
    # weights="refit": a weight-stripped engine (STRIP_PLAN) that assumes the refit weights are the build's
    # (REFIT_IDENTICAL, so TensorRT still optimizes with their values); the blob's REFIT_MAP restores them.
    strip_weights: bool = False
    flavour: str | None = None  # the TensorRT flavour that builds (et_tensorrt.trt); None: lowering's default


@dataclass
class BuildResult:
    engine: FileRegion  # the serialized engine, held in the file it was streamed to
    seconds: float


def profile_shapes(export: OnnxExport) -> list[list[tuple]]:
    """Per optimization profile, per engine input: its dims' ranges (a size input: its value's range, as the
    one-element range list of a 0-d shape input)."""
    shapes = []
    for p in range(export.profile_count):
        row = []
        for info in export.engine_inputs:
            if info.is_size:
                row.append((info.profiles[p] if info.profiles else info.value,))
            else:
                row.append(tuple(info.profiles[p]) if info.profiles else info.dims)
        shapes.append(row)
    return shapes


def _origin(export: OnnxExport, node_name: str) -> str | None:
    try:
        return onnx_node_origin(export.model, node_name) if node_name else None
    except ImportError:  # on the device without the onnx package: the parser's own words only
        return None


def _parser_errors(parser, export: OnnxExport) -> str:
    lines = []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        op = err.node_operator() or "?"
        name = err.node_name() or f"#{err.node()}"
        origin = _origin(export, err.node_name())
        where = f" from {origin}" if origin else ""
        lines.append(f"ONNX op {op} (node {name}{where}): {err.desc()}")
    return "; ".join(lines)


def _unsupported_ops(export: OnnxExport, parser) -> list[str]:
    """Ops of the ONNX graph the parser says it cannot take (best effort, for messages)."""
    graph = getattr(export.model, "graph", None)  # None: a serialized graph, on a device without onnx
    bad = []
    for op in sorted({n.op_type for n in graph.node if n.domain in ("", "ai.onnx")} if graph is not None else ()):
        try:
            if not parser.supports_operator(op):
                bad.append(op)
        except Exception:  # noqa: BLE001
            pass
    return bad


def build_network_engine(export: OnnxExport, settings: BuildSettings, sink) -> None:
    """Parse and build (no cache), the serialized engine written to ``sink`` (``write(chunk) -> int``, ``nbytes``;
    build_cache.EngineWriter). EngineBuildError names the op TensorRT rejected. ``export.initializers`` (the
    external weights) must stay alive until this returns: TensorRT reads them while it builds."""
    flavour = trt.get(settings.flavour) if settings.flavour else trt.default()
    if flavour is None or not flavour.can_build:
        raise EngineBuildError(
            f"no {settings.flavour} builder can be imported here ({trt.import_error(settings.flavour)})"
        )
    t = flavour.module
    log = trt.CollectingLogger.create(t)
    builder = t.Builder(log)
    network = builder.create_network(flavour.network_flags())
    parser = t.OnnxParser(network, log)
    if not onnx_weights.parse_tensorrt(parser, export):
        raise EngineBuildError(
            f"TensorRT ({flavour.name} {flavour.version}) rejected the partition: {_parser_errors(parser, export)}"
        )

    # The network must take/return exactly what the partition does (catches silent narrowing).
    for kind, count, get, infos in (
        ("input", network.num_inputs, network.get_input, export.engine_inputs),
        ("output", network.num_outputs, network.get_output, export.outputs),
    ):
        if count != len(infos):
            raise EngineBuildError(f"TensorRT network has {count} {kind}s, the partition {len(infos)}")
        for i, info in enumerate(infos):
            tensor = get(i)
            if tensor.name != info.name:
                raise EngineBuildError(f"TensorRT {kind} {i} is {tensor.name!r}, expected {info.name!r}")
            if tensor.dtype.name != trt.data_type_name(info.dtype):
                raise EngineBuildError(
                    f"TensorRT {kind} {info.name!r} has dtype {tensor.dtype.name}, the partition {info.dtype}"
                )

    _check_aliases(network, export, t, flavour)
    config = builder.create_builder_config()
    if settings.workspace_bytes:
        config.set_memory_pool_limit(t.MemoryPoolType.WORKSPACE, int(settings.workspace_bytes))
    if settings.strip_weights:
        for flag in ("STRIP_PLAN", "REFIT_IDENTICAL"):
            try:
                config.set_flag(flavour.builder_flag(flag))
            except EngineBuildError as e:
                raise EngineBuildError(
                    f"{e}: it cannot build weight-stripped engines; lower with weights='both'"
                ) from e
    if settings.target_archs:
        if not flavour.supports_target_archs():
            raise EngineBuildError(f"{flavour.name} {flavour.version} cannot build for explicit target architectures")
        config.num_compute_capabilities = len(settings.target_archs)
        for i, arch in enumerate(settings.target_archs):
            if not config.set_compute_capability(flavour.compute_capability(arch), i):
                raise EngineBuildError(f"TensorRT refused target architecture {arch!r}")
    inputs = export.engine_inputs
    shape_inputs = [
        info.name for i, info in enumerate(inputs) if network.get_input(i).is_shape_tensor and not info.is_size
    ]
    if shape_inputs:
        raise EngineBuildError(
            f"partition input(s) {', '.join(shape_inputs)} set a shape by their values (TensorRT shape tensors), "
            "which the partition's dim ranges do not bound; keep the op that reads them on the host"
        )
    # The ONNX exporter may leave a dim symbolic that the partition records as static (a size it re-derives
    # from other inputs): TensorRT then needs a profile too, pinned to the recorded size.
    network_dynamic = any(-1 in tuple(network.get_input(i).shape) for i in range(network.num_inputs))
    dynamic = any(not d.is_static for info in inputs for d in info.dims) or any(i.is_size for i in inputs)
    if network_dynamic or dynamic:
        for shapes in profile_shapes(export):  # one TensorRT optimization profile each
            profile = builder.create_optimization_profile()
            for i, (info, dims) in enumerate(zip(inputs, shapes)):
                if info.is_size:
                    (value,) = dims
                    if network.get_input(i).is_shape_tensor:  # a 0-d int64 whose value sets shapes
                        profile.set_shape_input(info.name, [value.min], [value.opt], [value.max])
                    profile.set_shape(info.name, (), (), ())
                    continue
                profile.set_shape(
                    info.name, tuple(d.min for d in dims), tuple(d.opt for d in dims), tuple(d.max for d in dims)
                )
            config.add_optimization_profile(profile)

    # Streamed out in chunks as TensorRT serializes it (never a whole engine in memory beside the builder's own
    # working copy of the weights): into a build-cache entry, or a private temp file.
    built = flavour.build_to(builder, network, config, sink)
    if getattr(sink, "error", None) is not None:  # TensorRT swallows what the stream writer raised
        raise EngineBuildError(f"{flavour.label} built the engine but it could not be stored: {sink.error}")
    if not built or sink.nbytes == 0:
        errors = log.errors()
        if settings.strip_weights and not _cuda_available():
            # Measured with TensorRT-RTX 1.7.1: any refittable build (STRIP_PLAN, REFIT, REFIT_IDENTICAL, or
            # weights marked refittable) JIT-compiles through Myelin, which needs a CUDA device.
            raise EngineBuildError(
                f"{flavour.name} {flavour.version} cannot build a weight-stripped (refittable) engine without a GPU "
                "(its builder needs CUDA for refittable weights); lower with weights='both' or 'engine-only' here, "
                "or lower with weights='refit' on a machine with a GPU"
                + (f" (TensorRT said: {'; '.join(errors)})" if errors else "")
            )
        bad = _unsupported_ops(export, parser)
        ops = f" (ops TensorRT reports unsupported: {', '.join(bad)})" if bad else ""
        raise EngineBuildError(
            f"TensorRT ({flavour.name} {flavour.version}) could not build the engine{ops}: "
            + ("; ".join(errors) if errors else "no error message")
        )


def _check_aliases(network, export: OnnxExport, t, flavour) -> None:
    """Each in-place state's output must come from an IKVCacheUpdateLayer over its own input: only then does the
    engine alias them (the runtime binds one buffer to both and checks ``get_aliased_input_tensor``)."""
    if not export.aliased:
        return
    kv = getattr(t.LayerType, "KV_CACHE_UPDATE", None)
    made = {}
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if kv is not None and layer.type == kv:
            made[layer.get_output(0).name] = layer.get_input(0).name
    for output, cache in export.aliased.items():
        if made.get(output) != cache:
            raise EngineBuildError(
                f"TensorRT ({flavour.name} {flavour.version}) did not make the state write {output!r} a KV-cache "
                f"update of its input {cache!r} (its ONNX TensorScatter); lower with own_mutable_buffers=False or "
                "report the model"
            )


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def build_engine(export: OnnxExport, settings: BuildSettings, sink=None) -> BuildResult:
    """Build (uncached: preprocess looks the partition up in ``build_cache`` before exporting the ONNX; the device
    build in its engine cache). The engine goes to ``sink`` (a ``build_cache.EngineWriter``: a new cache entry;
    default: a private temp file) and comes back held where it was written (``held_data.FileRegion``, never read
    into memory here)."""
    sink = sink if sink is not None else EngineWriter(None)
    start = time.perf_counter()
    try:
        build_network_engine(export, settings, sink)
    except BaseException:
        sink.abort()
        raise
    seconds = time.perf_counter() - start
    return BuildResult(sink.commit(build_seconds=seconds), seconds)
