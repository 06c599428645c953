"""The one place that imports TensorRT, and the one place its two flavours differ.

Flavours: full TensorRT (``tensorrt``: data-center GPUs, Jetson's JetPack) and TensorRT-RTX (``tensorrt_rtx``).
Both expose the same builder, parser and runtime Python API for what we use (Builder, OnnxParser with
``load_model_proto``/``load_initializer``, BuilderConfig, optimization profiles, Refitter, Runtime). What
differs lives in :class:`Flavour`:

- **networks**: TensorRT-RTX networks are always strongly typed (no flag); TensorRT's are strongly typed through
  ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` (precision then comes from the ONNX tensor types in both).
- **targets**: TensorRT-RTX builds ahead of time, without a GPU, for named compute capabilities
  (``config.set_compute_capability``; by default its documented portable set, SM75 only when asked); TensorRT
  builds for the GPU it runs on and has no target API. So an RTX engine runs where its targets name the GPU; a
  TensorRT engine on the GPU model it was built on.
- **runtime config**: TensorRT-RTX's ``IRuntimeConfig`` adds a runtime (JIT kernel) cache, CUDA-graph and
  dynamic-shape strategies; TensorRT's has only the allocation strategy. Neither is set today: contexts are
  made with the engine's defaults in both.
- **builder flags**: weight stripping (STRIP_PLAN, REFIT_IDENTICAL) exists in both (TensorRT-RTX builds it only
  with a GPU); REQUIRE_USER_ALLOCATION is RTX-only. :meth:`Flavour.builder_flag` names what is missing.
- **serialization**: both stream the engine out as they serialize it (``build_serialized_network_to_stream``
  with an ``IStreamWriter``); a TensorRT without it (before 10.x, JetPack 6's 10.3) hands the whole engine over
  at once. :meth:`Flavour.build_to` hides which.

An engine runs only with the flavour and version that built it (no version-compatible engines: those embed a
lean runtime, i.e. host code, which the delegate refuses). ``module()`` / ``flavour()`` / ``version()`` are the
builder lowering uses (``tensorrt`` when importable, else ``tensorrt_rtx``); :func:`get` loads a named flavour
(the runtime deserializes an engine with the flavour that built it); :func:`builders` lists the importable ones.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from et_tensorrt.errors import EngineBuildError

_FLAVOURS = ("tensorrt", "tensorrt_rtx")
LABELS = {"tensorrt": "TensorRT", "tensorrt_rtx": "TensorRT-RTX"}
# TensorRT-RTX's targets when none is named (its docs: portable across compute capability 8.0, 8.6, 8.9, 12.0
# and later; Turing (SM75) only when named). Members of its ComputeCapability outside this set are named only.
_RTX_UNNAMED_EXCLUDES = ("sm75",)


def data_type_name(dtype) -> str | None:
    """The ``DataType`` member name (both flavours) of a torch dtype, None where TensorRT has none: the engine
    builder checks its network's I/O against it, the refit hands weights over with it."""
    import torch

    return {
        torch.float32: "FLOAT",
        torch.float16: "HALF",
        torch.bfloat16: "BF16",
        torch.int32: "INT32",
        torch.int64: "INT64",
        torch.bool: "BOOL",
        torch.uint8: "UINT8",
        torch.int8: "INT8",
    }.get(dtype)


def sm_name(capability: tuple[int, int]) -> str:
    """``(9, 0)`` -> ``"sm90"`` (the spelling of targets, cache keys and messages)."""
    return f"sm{capability[0]}{capability[1]}"


def local_sm() -> str | None:
    """This machine's first CUDA GPU as ``"sm90"``, or None without one: what a build without named targets (full
    TensorRT) makes its engine for."""
    import torch

    return sm_name(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None


def normalize_arch(arch: str) -> str:
    """``"sm86"`` / ``"sm_86"`` / ``"86"`` / ``"8.6"`` -> ``"sm86"``; ``"current"`` stays."""
    text = arch.strip().lower().replace(".", "")
    if text.startswith("sm_"):
        text = text[3:]
    elif text.startswith("sm"):
        text = text[2:]
    return text if text == "current" else f"sm{text}"


@dataclass(frozen=True, eq=False)
class Flavour:
    """One imported TensorRT flavour: its name (``tensorrt`` or ``tensorrt_rtx``) and module."""

    name: str
    module: ModuleType

    @property
    def version(self) -> str:
        return str(getattr(self.module, "__version__", "unknown"))

    @property
    def label(self) -> str:
        """``"TensorRT 11.4"`` / ``"TensorRT-RTX 1.7.1"`` (TensorRT-RTX: major.minor.patch; TensorRT: major.minor)."""
        parts = self.version.split(".")
        return f"{LABELS.get(self.name, self.name)} {'.'.join(parts[: 3 if self.is_rtx else 2])}"

    @property
    def is_rtx(self) -> bool:
        return self.name == "tensorrt_rtx"

    @property
    def can_build(self) -> bool:
        """Whether this is a builder (the lean and dispatch runtimes are not)."""
        return hasattr(self.module, "Builder") and hasattr(self.module, "OnnxParser")

    def network_flags(self) -> int:
        """Network creation flags: strongly typed (precision comes from the ONNX tensor types)."""
        if self.is_rtx:
            return 0  # TensorRT-RTX networks are strongly typed; the flag does not exist there
        flags = getattr(self.module, "NetworkDefinitionCreationFlag", None)
        flag = getattr(flags, "STRONGLY_TYPED", None)
        return 0 if flag is None else (1 << int(flag))

    def supports_target_archs(self) -> bool:
        return hasattr(self.module, "ComputeCapability") and hasattr(
            getattr(self.module, "IBuilderConfig", None), "set_compute_capability"
        )

    def known_targets(self) -> tuple[str, ...]:
        """The compute capabilities this flavour can name as build targets (``()``: none, it builds for its GPU)."""
        if not self.supports_target_archs():
            return ()
        names = [normalize_arch(k) for k in self.module.ComputeCapability.__members__ if k.startswith("SM")]
        return tuple(sorted(names, key=lambda n: int(n[2:]) if n[2:].isdigit() else 0))

    def default_targets(self) -> tuple[str, ...]:
        """What an engine built without named targets runs on: TensorRT-RTX's portable set; ``()`` for TensorRT
        (the GPU it was built on, recorded separately)."""
        return tuple(t for t in self.known_targets() if t not in _RTX_UNNAMED_EXCLUDES) if self.is_rtx else ()

    def target_problem(self, arch: str) -> str | None:
        """Why this flavour cannot build for ``arch`` (``"sm90"``), or None."""
        caps = getattr(self.module, "ComputeCapability", None)
        if caps is None:
            return f"{self.label} builds for the GPU it runs on; it cannot name target {arch!r}"
        text = normalize_arch(arch)
        if text != "current" and getattr(caps, text.upper(), None) is None:
            return (
                f"{self.label} cannot build for {arch!r} (its targets: {', '.join(self.known_targets())}); a GPU "
                "outside them builds its engine on the device from the blob's build recipe (device_build, the "
                "default; `et-tensorrt prepare`)"
            )
        return None

    def compute_capability(self, arch: str):
        """``"sm86"`` / ``"86"`` / ``"8.6"`` -> ``ComputeCapability.SM86`` (or EngineBuildError)."""
        problem = self.target_problem(arch)
        if problem:
            raise EngineBuildError(problem)
        text = normalize_arch(arch)
        return (
            self.module.ComputeCapability.CURRENT
            if text == "current"
            else getattr(self.module.ComputeCapability, text.upper())
        )

    def targets_for(self, sm: str) -> tuple[str, ...] | None:
        """The targets a build for the GPU ``sm`` (``"sm90"``) names: ``(sm,)`` for TensorRT-RTX when it knows it,
        ``()`` for TensorRT (it builds for the GPU it runs on), None when this flavour cannot build for it."""
        if not self.supports_target_archs():
            return ()
        return (sm,) if sm in self.known_targets() else None

    def build_to(self, builder, network, config, sink) -> bool:
        """Builds and serializes the engine into ``sink`` (``write(chunk) -> int``): streamed chunk by chunk where
        the flavour can (the engine is then never whole in memory), else as the one ``IHostMemory``. Whether
        TensorRT built it."""
        t = self.module
        if hasattr(t, "IStreamWriter") and hasattr(builder, "build_serialized_network_to_stream"):

            class Writer(t.IStreamWriter):
                def __init__(self):
                    t.IStreamWriter.__init__(self)

                def write(self, data) -> int:
                    return sink.write(data)

            return bool(builder.build_serialized_network_to_stream(network, config, Writer()))
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            return False
        sink.write(memoryview(serialized))
        return True

    def builder_flag(self, name: str):
        """``BuilderFlag.<name>``, or EngineBuildError naming the flavour that lacks it."""
        value = getattr(getattr(self.module, "BuilderFlag", None), name, None)
        if value is None:
            raise EngineBuildError(f"{self.label} ({self.version}) has no BuilderFlag.{name}")
        return value


def option_problems(target_archs, weights: str) -> list[str]:
    """What the builder lowering uses cannot do with these build options on this machine, judged before any work:
    a target it cannot name, ``current`` without a GPU, a weight-stripped engine (``weights="refit"``) without a
    GPU (measured with TensorRT-RTX 1.7.1: any refittable build JIT-compiles through Myelin, which needs CUDA;
    TensorRT builds only on a GPU). Empty without a builder: the build says what to install."""
    try:
        flavour = default()
    except EngineBuildError:
        return []
    problems = [p for p in (flavour.target_problem(a) for a in target_archs) if p]
    gpu = local_sm()
    if gpu is None and any(normalize_arch(a) == "current" for a in target_archs):
        problems.append(
            "target 'current' is this machine's GPU, and it has none: name the targets (e.g. sm86), or leave them "
            "to the builder's default"
        )
    if weights == "refit" and gpu is None:
        problems.append(
            f"{flavour.label} cannot build a weight-stripped (refittable) engine without a GPU (its builder needs "
            "CUDA for refittable weights): lower with weights 'both' or 'engine-only' here, or with 'refit' on a "
            "machine with a GPU"
        )
    return problems


def engine_runs_on(
    built_by: str, built_version: str, targets: tuple[str, ...], sm: str, runtime: Flavour | None
) -> str:
    """Why an engine built by ``built_by`` ``built_version`` for ``targets`` (TensorRT-RTX's; ``()`` with TensorRT:
    the GPU it was built on, which must then be ``sm``'s model, checked by the caller) does not run on ``sm`` with
    the ``runtime`` flavour importable here, or ``""`` when it may."""
    label = LABELS.get(built_by, built_by)
    if runtime is None:
        return f"its engine needs {label} {built_version}, which is not installed here"
    if runtime.version != built_version:
        return f"its engine was built by {label} {built_version}; this machine has {runtime.version}"
    if targets and sm not in targets:
        return f"its engine targets {', '.join(targets)}, not this GPU ({sm})"
    return ""


@cache
def _import(name: str) -> tuple[ModuleType | None, str]:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable here"
        return None, f"{name}: {exc}"
    # The registry's `tensorrt` meta-package can import without its libraries: require the runtime API.
    if not hasattr(module, "Runtime"):
        return None, f"{name} has no Runtime"
    return module, ""


@cache
def get(name: str) -> Flavour | None:
    """The named flavour when importable here, else None (:func:`import_error` says why)."""
    module, _ = _import(name)
    return None if module is None else Flavour(name, module)


def import_error(name: str) -> str:
    return _import(name)[1]


def builders() -> list[Flavour]:
    """The importable TensorRT builders, ``tensorrt`` first."""
    return [f for f in (get(n) for n in _FLAVOURS) if f is not None and f.can_build]


@cache
def default() -> Flavour:
    """The builder lowering uses: ``tensorrt`` when importable, else ``tensorrt_rtx`` (EngineBuildError if none)."""
    found = builders()
    if found:
        return found[0]
    errors = [import_error(n) or f"{n} has no Builder" for n in _FLAVOURS]
    raise EngineBuildError(
        "no TensorRT Python package could be imported (" + "; ".join(errors) + "); install one with "
        "`pip install tensorrt-rtx` (or `pip install tensorrt` for full TensorRT where its wheels install)"
    )


def module() -> ModuleType:
    """The imported TensorRT module lowering builds with (``tensorrt`` or ``tensorrt_rtx``)."""
    return default().module


def flavour() -> str:
    """``"tensorrt"`` or ``"tensorrt_rtx"``."""
    return default().name


def version() -> str:
    return default().version


class CollectingLogger:
    """Factory for a TensorRT logger that keeps warnings/errors so error messages can quote them."""

    @staticmethod
    def create(trt: ModuleType | None = None):
        trt = trt if trt is not None else module()

        class _Logger(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)
                self.messages: list[tuple[object, str]] = []

            def log(self, severity, msg):
                if severity <= trt.ILogger.Severity.WARNING:
                    self.messages.append((severity, msg))

            def errors(self) -> list[str]:
                return [m for s, m in self.messages if s <= trt.ILogger.Severity.ERROR]

        return _Logger()
