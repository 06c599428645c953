"""et_tensorrt: an ExecuTorch delegate for TensorRT that is honest about where every tensor lives.

Importing the package loads the native module (descriptors, and the delegate runtime registered into
ExecuTorch's ``libexecutorch.so``). The ahead-of-time parts (partitioner, lowering) import ExecuTorch's
``exir`` and are loaded on first use; the third-party noise that loading them and running them triggers
(torchao, torch's pytree and ONNX exporter) is held back while they run, and only then (``_quiet.py``).
"""

import importlib

import torch  # noqa: F401  (the native module needs torch's libraries loaded first)

from . import _C  # noqa: F401
from ._quiet import QuietCall, quiet_dependencies
from .descriptors import Device, TensorDescriptor, describe, describe_inputs, translate_device
from .errors import (
    BlobFormatError,
    EngineBuildError,
    EngineRefusedError,
    InputShapeError,
    LayoutError,
    OptionError,
    PartitionError,
    PlacementError,
    PlacementWarning,
    ProgramRefusedError,
    QuantizationError,
    QuantizationWarning,
    RunnerError,
    UnmatchedOpWarning,
    UnsupportedDeviceError,
    UnsupportedDtypeError,
    ValidationError,
)

__version__ = "0.1.0"  # setup.py reads this line

# One backend registry: libexecutorch.so's, which ExecuTorch's own Python runtime uses too.
if not _C.register_backend():
    import warnings

    warnings.warn("et_tensorrt: another library already registered the backend id 'EtTensorRTBackend'", stacklevel=2)

# name -> module that defines it; imported on first access (PEP 562) to keep `import et_tensorrt` light.
_LAZY = {
    "TensorRTPartitioner": ".partition",
    "PartitionReport": ".partition",
    "ReasonCode": ".partition",
    "explain": ".partition",
    "EtTensorRTBackend": ".backend",
    "BuildOptions": ".compile_specs",
    "lower": ".lowering",
    "save": ".lowering",
    "Runner": ".runtime.runner",
    "record_plans": ".runtime.runner",
}

__all__ = [
    "BlobFormatError",
    "Device",
    "EngineBuildError",
    "EngineRefusedError",
    "InputShapeError",
    "LayoutError",
    "OptionError",
    "PartitionError",
    "PlacementError",
    "PlacementWarning",
    "ProgramRefusedError",
    "QuantizationError",
    "QuantizationWarning",
    "RunnerError",
    "TensorDescriptor",
    "UnmatchedOpWarning",
    "UnsupportedDeviceError",
    "UnsupportedDtypeError",
    "ValidationError",
    "describe",
    "describe_inputs",
    "translate_device",
    *_LAZY,
]


# Called inside _quiet.quiet_dependencies: the third-party noise they trigger is held back while they run.
_QUIET_CALLS = {"explain", "lower", "save"}


def __getattr__(name):
    if name in _LAZY:
        with quiet_dependencies():  # the subpackage may itself load lazily (partition/): quiet its getattr too
            value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        value = QuietCall(value) if name in _QUIET_CALLS else value
        globals()[name] = value  # imported once
        return value
    raise AttributeError(f"module 'et_tensorrt' has no attribute {name!r}")
