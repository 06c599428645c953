"""A GPU machine stood in for on a CPU-only one, to run the device-build path (et_tensorrt.runtime.device_build)
for real up to deserialization: torch reports one CUDA device of the given compute capability, TensorRT-RTX may
build for it (standing in for the TensorRT builder such a GPU has: TensorRT-RTX 1.7.1 cannot name SM90, so it
builds its default portable engine), and the engine deserializer records the bytes it is handed and returns a
stand-in engine instead of deserializing them (never without a GPU: the runtime may crash).

    with fake_gpu("sm90") as seen:
        executor, choice = executors.create_executor(blob, cuda_devices=1)
    seen.engines  # the engine bytes the delegate would have deserialized
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from unittest import mock


class FakeEngine:
    """What TensorRTExecutor asks of an engine at creation, for a partition without state or size inputs."""

    num_optimization_profiles = 1

    def __init__(self, data: bytes):
        self.data = data

    def create_execution_context(self):
        return object()

    def is_shape_inference_io(self, name) -> bool:
        return False


@dataclass
class Seen:
    engines: list[bytes] = field(default_factory=list)  # handed to the deserializer, in order
    flavours: list[str] = field(default_factory=list)  # the TensorRT module each was handed to


@contextlib.contextmanager
def fake_gpu(sm: str = "sm90", name: str = "NVIDIA H200 (faked)") -> Iterator[Seen]:
    import torch

    from et_tensorrt import trt
    from et_tensorrt.runtime import device_build, engine_loading

    seen = Seen()
    real_targets = trt.Flavour.targets_for

    def targets_for(flavour, wanted):
        found = real_targets(flavour, wanted)
        return () if found is None and flavour.is_rtx and wanted == sm else found

    def deserialize(module, data, runtime=None, logger=None):
        seen.engines.append(bytes(data))
        seen.flavours.append(module.__name__)
        return FakeEngine(bytes(data)), ""

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
        stack.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: 1))
        stack.enter_context(mock.patch.object(torch.cuda, "device", lambda device: contextlib.nullcontext()))
        stack.enter_context(mock.patch.object(device_build, "this_gpu", lambda device: device_build.Gpu(name, sm)))
        stack.enter_context(mock.patch.object(trt.Flavour, "targets_for", targets_for))
        stack.enter_context(mock.patch.object(engine_loading, "deserialize_engine", deserialize))
        yield seen
