"""et_tensorrt: an ExecuTorch delegate for TensorRT that is honest about where every tensor lives.

Importing the package loads the native module (descriptors, and the delegate runtime registered into
ExecuTorch's ``libexecutorch.so``). The ahead-of-time parts (partitioner, lowering) import ExecuTorch's
``exir`` and are loaded on first use; the third-party noise that loading them and running them triggers
(torchao, torch's pytree and ONNX exporter) is held back while they run, and only then (``_quiet.py``).

The ``et-tensorrt`` command is the one exception: its process loads the native module (and torch, a second or
more) when a command needs it (:func:`load_native`, or first use of ``_C`` or a descriptor name), so that
``--help``, a bad argument or a refused file answer at once.
"""

import importlib
import os
import sys

from ._quiet import QuietCall, quiet_dependencies
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

_DESCRIPTORS = ("Device", "TensorDescriptor", "describe", "describe_inputs", "translate_device")
_native_loaded = False


def load_native() -> None:
    """torch, the native module and the descriptors, and the backend registered into ExecuTorch's one backend
    registry (``libexecutorch.so``'s, which ExecuTorch's own Python runtime uses too). Once; importing the package
    does it, except in the ``et-tensorrt`` command's process."""
    global _native_loaded
    if _native_loaded:
        return
    import torch  # noqa: F401  (the native module needs torch's libraries loaded first)

    native = importlib.import_module("._C", __name__)
    _filter_executorch_log(native)
    descriptors = importlib.import_module(".descriptors", __name__)
    globals().update({name: getattr(descriptors, name) for name in _DESCRIPTORS})
    if not native.register_backend():
        import warnings

        warnings.warn(
            "et_tensorrt: another library already registered the backend id 'EtTensorRTBackend'", stacklevel=3
        )
    _native_loaded = True


def _filter_executorch_log(native) -> None:
    """ExecuTorch's Python bindings install their log function when they load; it writes each line to Python's
    stderr and aborts the process on a line that is not UTF-8 (``executorch.runtime`` loading a damaged ``.ptd``
    logs its identifier bytes as they are). Loaded first (5 ms), they get our filter in front, which escapes such
    bytes, whatever the order of the user's imports."""
    try:
        importlib.import_module("executorch.extension.pybindings._C")
    except ImportError:  # an executorch without its Python runtime: nothing to put ours in front of
        pass
    native.install_log_filter()


def _command_line_process() -> bool:
    """Whether this process is the ``et-tensorrt`` command: its console script, or ``python -m et_tensorrt``
    (which imports the package while ``sys.argv[0]`` is still ``-m``)."""
    argv = getattr(sys, "argv", None) or [""]
    if os.path.basename(argv[0]) == "et-tensorrt":
        return True
    original = getattr(sys, "orig_argv", [])
    return argv[0] == "-m" and "-m" in original[:-1] and original[original.index("-m") + 1] == "et_tensorrt"


if not _command_line_process():
    load_native()

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
    "load_native",
    "translate_device",
    *_LAZY,
]


# Called inside _quiet.quiet_dependencies: the third-party noise they trigger is held back while they run.
_QUIET_CALLS = {"explain", "lower", "save"}


def __getattr__(name):
    if name == "_C" or name in _DESCRIPTORS:  # the command line's process: loaded on first use
        load_native()
        return globals()[name]
    if name in _LAZY:
        with quiet_dependencies():  # the subpackage may itself load lazily (partition/): quiet its getattr too
            value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        value = QuietCall(value) if name in _QUIET_CALLS else value
        globals()[name] = value  # imported once
        return value
    raise AttributeError(f"module 'et_tensorrt' has no attribute {name!r}")
