"""Compile-spec keys shared by the partitioner (AOT) and the backend (preprocess + C++ runtime), and
:class:`BuildOptions`, the one description of how an engine is built.

Why our own key for the execution device: ExecuTorch 1.5.1's ``PropagateDevicePass`` reacts to a
compile spec named ``target_device`` by inserting ``et_copy._h2d_copy``/``_d2h_copy`` around the
delegate, kernels the CPU ExecuTorch wheel cannot run. Our delegate does boundary copies itself from
the input descriptors, so the device travels under ``EXECUTION_DEVICE`` instead.

This module imports no ExecuTorch at load time (the CLI checks options before it pays for ``exir``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import OptionError

# The backend id: the BackendDetails subclass name, the C++ registry name. Not "TensorRTBackend",
# which Torch-TensorRT's own ExecuTorch delegate registers.
BACKEND_ID = "EtTensorRTBackend"

EXECUTION_DEVICE = "et_tensorrt.execution_device"  # b"cuda:0"
PRECISION = "et_tensorrt.precision"  # b"fp32" | b"fp16" | b"bf16"
TARGET_ARCHS = "et_tensorrt.target_archs"  # b"sm80,sm86" (TensorRT-RTX ahead-of-time targets)
VALIDATE = "et_tensorrt.validate"  # b"1" | b"0": check the ONNX with onnxruntime against PyTorch
PASS_THROUGH_BUILD_FAILURES = "et_tensorrt.pass_through_build_failures"  # b"1" | b"0"
WORKSPACE_BYTES = "et_tensorrt.workspace_bytes"  # decimal bytes
UNBOUNDED_MAX_FACTOR = "et_tensorrt.unbounded_max_factor"  # profile max of an unbounded dim = factor x opt
WEIGHTS = "et_tensorrt.weights"  # b"both" | b"refit" | b"engine-only": where the blob keeps the weights
CACHE = "et_tensorrt.cache"  # b"1" | b"0": reuse and store built partitions in the on-disk build cache
NAMED_DATA = "et_tensorrt.named_data"  # b"off" | b"pte" | b"ptd": engines and weights in ExecuTorch's named data
DEVICE_BUILD = "et_tensorrt.device_build"  # b"1" | b"0": a RECIPE in each blob, to build the engine on the device
# b"1" | b"0": refuse activation quantization TensorRT cannot express instead of running it in float
STRICT_QUANTIZATION = "et_tensorrt.strict_quantization"
# b"1" | b"0": a method whose partition computes what another method's engine does runs that engine (one copy)
SHARE_ENGINES = "et_tensorrt.share_engines"
# b"1" | b"0": on a CUDA device, each call is replayed as a CUDA graph once its shapes repeat (runtime/cuda_graph.py)
CUDA_GRAPH = "et_tensorrt.cuda_graph"
# Set by the partitioner: JSON, per symbol: the range declared at export and the user's opt sizes
# (et_tensorrt.builder.profiles.DynamicDim).
DYNAMIC_DIMS = "et_tensorrt.dynamic_dims"
# Set by the partitioner: JSON, the names of the method's inputs in the program it was lowered from (keywords, else
# placeholders: partition/method_inputs.py), kept in the .pte so that `run --inputs` takes what `check --inputs` does.
METHOD_INPUT_NAMES = "et_tensorrt.method_input_names"
# Set by the partitioner per partition, for build progress lines ("engine 2/5").
PARTITION_INDEX = "et_tensorrt.partition_index"
PARTITION_COUNT = "et_tensorrt.partition_count"

PRECISIONS = ("fp32", "fp16", "bf16")
# both: engine with its weights + the embedded program (runs anywhere); refit: weight-stripped engine, refitted
# at init from the program's WEIGHTS (each weight stored once); engine-only: no program (runs only on a GPU).
WEIGHTS_MODES = ("both", "refit", "engine-only")
# off: each blob carries its engine and weights; pte / ptd: they are ExecuTorch named data (NamedDataStore), stored
# once per program (shared by its partitions and methods), inside the .pte or in a .ptd file beside it; auto: pte for a
# program of several methods, off for one (decided by the backend, which sees the methods: every front door gets it).
NAMED_DATA_MODES = ("auto", "off", "pte", "ptd")
_ARCH = re.compile(r"^(sm_?)?\d{2,3}[a-z]?$|^\d+\.\d+$|^current$")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


# ------------------------------------------------------------------------------- value checks and codecs


def _precision(value: Any) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in PRECISIONS:
        raise OptionError(f"precision {value!r} is not one of {', '.join(PRECISIONS)}")
    return text


def _weights_mode(value: Any) -> str:
    text = value.strip().lower().replace("_", "-") if isinstance(value, str) else value
    if text not in WEIGHTS_MODES:
        raise OptionError(f"weights {value!r} is not one of {', '.join(WEIGHTS_MODES)}")
    return text


def _named_data(value: Any) -> str:
    text = str(value).strip().lower() if isinstance(value, (str, bool)) or value is None else value
    text = {"false": "off", "none": "off", "0": "off", "": "off"}.get(text, text)
    if text not in NAMED_DATA_MODES:
        raise OptionError(f"named_data {value!r} is not one of {', '.join(NAMED_DATA_MODES)}")
    return text


def _archs(value: Any) -> tuple[str, ...]:
    """``"sm80,sm86"`` or ``["sm80", "86"]`` -> ``("sm80", "86")`` (format only; TensorRT checks the rest)."""
    items = value.replace(";", ",").split(",") if isinstance(value, str) else value
    try:
        archs = tuple(str(a).strip().lower() for a in items if str(a).strip())
    except TypeError:
        raise OptionError(f"target_archs must be a string or a list of strings, got {value!r}") from None
    bad = [a for a in archs if not _ARCH.match(a)]
    if bad:
        raise OptionError(f"target_archs {bad} are not architecture names (expected e.g. sm80, sm86, 8.9, current)")
    return archs


def _flag(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise OptionError(f"{name} must be true or false, got {value!r}")

    return check


def _flag_text(value: bool) -> str:
    return "1" if value else "0"


def _positive_int(name: str, *, optional: bool = False) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        if value is None or (optional and isinstance(value, str) and not value.strip()):
            if optional:
                return None
            raise OptionError(f"{name} must be an integer >= 1, got None")
        try:
            number = int(value, 10) if isinstance(value, str) else value
        except ValueError:
            number = None
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
        return number

    return check


def _option(
    key: str,
    default: Any,
    doc: str,
    check: Callable[[Any], Any],
    encode: Callable[[Any], str] = str,
    *,
    shapes_engine: bool = True,
):
    """A BuildOptions field: its compile-spec key, what it means, how a value is checked (and normalized:
    the same function reads a Python value and a compile-spec string), how it is written as a spec, and
    whether it can change the engine (then it is part of the build cache's key)."""
    metadata = {"key": key, "doc": doc, "check": check, "encode": encode, "shapes_engine": shapes_engine}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class BuildOptions:
    """How ``preprocess`` builds each partition's engine (Torch-TensorRT's ``CompilationSettings`` pattern).

    The one source of truth for build options: :func:`et_tensorrt.lower`, the command line, the
    conformance flow and ``preprocess`` all read these fields. Values are checked (and normalized) when
    the object is made, so a bad value is an :class:`~et_tensorrt.errors.OptionError` before any work.
    They travel to ``preprocess`` as compile specs: :meth:`to_specs` / :meth:`from_specs`.
    To add an option: one field here with its key (and the key constant above).
    """

    precision: str = _option(PRECISION, "fp32", "engine precision: fp32, fp16 or bf16", _precision)
    target_archs: tuple[str, ...] = _option(
        TARGET_ARCHS,
        (),
        "TensorRT-RTX ahead-of-time GPU targets (e.g. sm80, sm86); empty: the builder's default",
        _archs,
        ",".join,
    )
    validate: bool = _option(
        VALIDATE,
        False,
        "check each partition's ONNX with onnxruntime against PyTorch before building",
        _flag("validate"),
        _flag_text,
        shapes_engine=False,  # a cache entry records whether it was validated (build_cache.Entry.validation)
    )
    pass_through_build_failures: bool = _option(
        PASS_THROUGH_BUILD_FAILURES,
        True,
        "a partition TensorRT refuses fails the lowering (False: it runs with PyTorch, with a warning)",
        _flag("pass_through_build_failures"),
        _flag_text,
        shapes_engine=False,  # only built engines are cached
    )
    workspace_bytes: int | None = _option(
        WORKSPACE_BYTES,
        None,
        "TensorRT builder workspace limit in bytes; None: TensorRT's default",
        _positive_int("workspace_bytes", optional=True),
    )
    unbounded_max_factor: int = _option(
        UNBOUNDED_MAX_FACTOR,
        2,
        "an unbounded dynamic dim is built up to this factor x its example size",
        _positive_int("unbounded_max_factor"),
    )
    cache: bool = _option(
        CACHE,
        True,
        "reuse and store built partitions in the on-disk build cache (see `et-tensorrt cache`)",
        _flag("cache"),
        _flag_text,
        shapes_engine=False,
    )

    device_build: bool = _option(
        DEVICE_BUILD,
        True,
        "carry a build recipe in each blob (the ONNX graph without weight bytes, initializers rebuilt from the "
        "program's weights): a GPU the ahead-of-time engine does not run on builds its own engine at load time "
        "with the TensorRT installed there (docs/blob-format.md, RECIPE)",
        _flag("device_build"),
        _flag_text,
        shapes_engine=False,  # the ahead-of-time engine is the same; the cache entry keeps the recipe too
    )

    strict_quantization: bool = _option(
        STRICT_QUANTIZATION,
        False,
        "refuse activation quantization TensorRT cannot express (a nonzero zero point, dynamic or per-token "
        "scales) instead of running those activations in float with the weights still quantized",
        _flag("strict_quantization"),
        _flag_text,
        shapes_engine=False,  # it only refuses: an engine it lets through is the one built without it
    )

    weights: str = _option(
        WEIGHTS,
        "both",
        "where the blob keeps the weights: both (engine + embedded program), refit (weight-stripped engine "
        "refitted from the program's weights at init: each weight once) or engine-only (no program: runs only "
        "where the engine does)",
        _weights_mode,
    )

    named_data: str = _option(
        NAMED_DATA,
        "auto",
        "where engines and weights are stored: off (in each delegate blob), pte (ExecuTorch named data inside the "
        ".pte), ptd (named data in a .ptd file beside the .pte; et_tensorrt.save and `et-tensorrt lower` write "
        "it) or auto (pte for a program of several methods, off for one); with named data each weight is stored "
        "once per program, shared by every partition and method",
        _named_data,
        shapes_engine=False,
    )

    share_engines: bool = _option(
        SHARE_ENGINES,
        True,
        "a method whose partition computes what another method's engine does (decode: prefill at one token) runs "
        "that engine instead of building its own: one engine stored and loaded per program "
        "(backend/engine_sharing.py checks the weights, states, shapes and results first)",
        _flag("share_engines"),
        _flag_text,
        shapes_engine=False,  # which engine a partition runs, not what an engine is
    )

    cuda_graph: bool = _option(
        CUDA_GRAPH,
        False,
        "on a CUDA device, replay each call as a CUDA graph once its shapes repeat: one launch instead of one per "
        "kernel, for a decode step (ExecuTorch's CUDA backend: enable_cuda_graph_for_method). Its inputs are "
        "copied into fixed buffers and its results out of them; lower(methods, cuda_graph='decode') sets it for "
        "one method; ET_TENSORRT_CUDA_GRAPH=on|off overrides it at run time",
        _flag("cuda_graph"),
        _flag_text,
        shapes_engine=False,  # how a delegate calls its engine, not what the engine is
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](getattr(self, f.name)))

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Field name -> compile-spec key."""
        return {f.name: f.metadata["key"] for f in dataclasses.fields(cls)}

    @classmethod
    def describe(cls) -> dict[str, str]:
        """Field name -> what it means (for help texts)."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(cls)}

    def engine_options(self) -> dict[str, Any]:
        """The fields that can change the engine (field name -> value): the build cache keys on them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["shapes_engine"]}

    def to_specs(self) -> dict[str, str]:
        """Every field as ``compile-spec key -> value text`` (a field left at None is left out)."""
        return {
            f.metadata["key"]: f.metadata["encode"](getattr(self, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }

    @classmethod
    def from_specs(cls, specs: Mapping[str, object] | Iterable[Any]) -> BuildOptions:
        """The options in compile specs (a ``key -> value`` mapping or ExecuTorch ``CompileSpec``s); keys
        that are not build options (the execution device, the partition index) are ignored here."""
        options = specs if isinstance(specs, Mapping) else decode(specs)
        by_key = {key: name for name, key in cls.keys().items()}
        values = {}
        for key, value in options.items():
            if key in by_key:
                values[by_key[key]] = value.decode() if isinstance(value, (bytes, bytearray)) else value
        return cls(**values)

    def replace(self, **changes: Any) -> BuildOptions:
        return dataclasses.replace(self, **changes)


# Every key a compile spec of ours may carry (anything else is warned about by preprocess).
PARTITIONER_KEYS = (EXECUTION_DEVICE, PARTITION_INDEX, PARTITION_COUNT, DYNAMIC_DIMS, METHOD_INPUT_NAMES)
KNOWN_KEYS = frozenset(BuildOptions.keys().values()) | frozenset(PARTITIONER_KEYS)


def encode(options: Mapping[str, object]) -> list:
    """Options (key -> str/bool/int) as ExecuTorch compile specs, in a stable order."""
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    specs = []
    for key in sorted(options):
        value = options[key]
        if isinstance(value, bool):
            value = "1" if value else "0"
        specs.append(CompileSpec(key, str(value).encode()))
    return specs


def decode(specs: Iterable[Any]) -> dict[str, str]:
    """Compile specs back into ``key -> str`` (unknown keys are kept, so callers can warn)."""
    out = {}
    for spec in specs:
        value = spec.value
        out[spec.key] = value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
    return out
