"""Compile-spec keys shared by the partitioner (AOT) and the backend (preprocess + C++ runtime).

Why our own key for the execution device: ExecuTorch 1.5.1's ``PropagateDevicePass`` reacts to a
compile spec named ``target_device`` by inserting ``et_copy._h2d_copy``/``_d2h_copy`` around the
delegate, kernels the CPU ExecuTorch wheel cannot run. Our delegate does boundary copies itself from
the input descriptors, so the device travels under ``EXECUTION_DEVICE`` instead.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from executorch.exir.backend.compile_spec_schema import CompileSpec

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
# Set by the partitioner: JSON, per symbol: the range declared at export and the user's opt sizes
# (et_tensorrt.backend.profiles.DynamicDim).
DYNAMIC_DIMS = "et_tensorrt.dynamic_dims"
# Set by the partitioner per partition, for build progress lines ("engine 2/5").
PARTITION_INDEX = "et_tensorrt.partition_index"
PARTITION_COUNT = "et_tensorrt.partition_count"

PRECISIONS = ("fp32", "fp16", "bf16")


def encode(options: Mapping[str, object]) -> list[CompileSpec]:
    """Options (key -> str/bool/int) as ExecuTorch compile specs, in a stable order."""
    specs = []
    for key in sorted(options):
        value = options[key]
        if isinstance(value, bool):
            value = "1" if value else "0"
        specs.append(CompileSpec(key, str(value).encode()))
    return specs


def decode(specs: Iterable[CompileSpec]) -> dict[str, str]:
    """Compile specs back into ``key -> str`` (unknown keys are kept, so callers can warn)."""
    out = {}
    for spec in specs:
        value = spec.value
        out[spec.key] = value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
    return out


def flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in options:
        return default
    return options[key].strip().lower() in ("1", "true", "yes", "on")
