"""The one place that imports TensorRT: full ``tensorrt`` when present, else ``tensorrt_rtx``.

Both expose the same builder/parser Python API for what we use (Builder, OnnxParser, BuilderConfig,
optimization profiles). Differences handled here: TensorRT-RTX networks are always strongly typed and
RTX can target compute capabilities ahead of time (``config.set_compute_capability``).
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from et_tensorrt.errors import EngineBuildError

_FLAVOURS = ("tensorrt", "tensorrt_rtx")


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


@cache
def _load() -> tuple[str, ModuleType]:
    errors = []
    for name in _FLAVOURS:
        try:
            module = importlib.import_module(name)
            # The registry's `tensorrt` meta-package can import without its libraries: require the API.
            if not hasattr(module, "Builder"):
                raise ImportError(f"{name} has no Builder")
            return name, module
        except Exception as exc:  # noqa: BLE001 - any failure means "try the next flavour"
            errors.append(f"{name}: {exc}")
    raise EngineBuildError(
        "no TensorRT Python package could be imported (" + "; ".join(errors) + "); install one with "
        "`pip install tensorrt-rtx` (or `pip install tensorrt` for full TensorRT where its wheels install)"
    )


def module() -> ModuleType:
    """The imported TensorRT module (``tensorrt`` or ``tensorrt_rtx``)."""
    return _load()[1]


def flavour() -> str:
    """``"tensorrt"`` or ``"tensorrt_rtx"``."""
    return _load()[0]


def version() -> str:
    return str(getattr(module(), "__version__", "unknown"))


def is_rtx() -> bool:
    return flavour() == "tensorrt_rtx"


def network_flags() -> int:
    """Network creation flags: strongly typed (precision comes from the ONNX tensor types)."""
    trt = module()
    if is_rtx():
        return 0  # TensorRT-RTX networks are strongly typed; the flag does not exist there
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    return 0 if flag is None else (1 << int(flag))


def supports_target_archs() -> bool:
    trt = module()
    return hasattr(trt, "ComputeCapability") and hasattr(trt.IBuilderConfig, "set_compute_capability")


def compute_capability(arch: str):
    """``"sm86"`` / ``"86"`` / ``"8.6"`` -> ``ComputeCapability.SM86`` (or EngineBuildError)."""
    trt = module()
    text = arch.strip().lower().replace(".", "")
    if text.startswith("sm_"):
        text = text[3:]
    elif text.startswith("sm"):
        text = text[2:]
    if text == "current":
        return trt.ComputeCapability.CURRENT
    value = getattr(trt.ComputeCapability, f"SM{text}", None)
    if value is None:
        known = [k.lower() for k in trt.ComputeCapability.__members__ if k.startswith("SM")]
        raise EngineBuildError(f"unknown TensorRT target architecture {arch!r}; {flavour()} {version()} knows {known}")
    return value


class CollectingLogger:
    """Factory for a TensorRT logger that keeps warnings/errors so error messages can quote them."""

    @staticmethod
    def create():
        trt = module()

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
