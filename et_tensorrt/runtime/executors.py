"""Executors the C++ delegate runs a partition with (one per delegate, created at init).

The C++ delegate (extension/runtime/delegate_handle.cpp) owns placement: it hands ``run`` input
tensors already on ``executor.device`` (shared caller memory or its own staging copies) and, for
outputs it could share, views of the caller's output memory. The executor computes and returns one
tensor per output; the delegate copies any result that is not already in the caller's memory.

Choice of executor: TensorRT where it can run (a CUDA device, a TensorRT runtime, and an engine that
deserializes for this GPU); otherwise the partition's exported program with PyTorch, on the execution
device when CUDA is usable and on the host when it is not, with one log line saying why.
``ET_TENSORRT_FALLBACK=error`` refuses instead of falling back.
"""

from __future__ import annotations

import io
import logging
import math
import os
import threading
from typing import Optional, Sequence

import torch

from ..blob import DEVICE_CUDA, Blob, read_blob

log = logging.getLogger("et_tensorrt")

FALLBACK_ENV = "ET_TENSORRT_FALLBACK"  # "pytorch" (default) or "error"

# torch.export.load keeps a process-wide "current deserializer" and is not thread-safe.
_LOAD_LOCK = threading.Lock()


class PyTorchExecutor:
    """Runs the partition's embedded ExportedProgram with PyTorch."""

    kind = "pytorch"
    writes_in_place = False

    def __init__(self, blob: Blob, device: torch.device, reason: str):
        self.device = device
        self.reason = reason
        with _LOAD_LOCK:
            program = torch.export.load(io.BytesIO(blob.program))
        module = program.module(check_guards=False)
        # The placement plan has already checked every input against the blob's dim ranges. torch's own
        # input check cannot: it tries to solve each size for its symbol and gives up on a computed size
        # such as (s + 7) // 8, the input of an engine fed by another partition.
        module.validate_inputs = False
        self._module = module.to(device)

    def run(self, inputs: Sequence, outputs: Sequence[Optional[torch.Tensor]]) -> list[torch.Tensor]:
        """``inputs``: tensors, and ints for size arguments (the program takes them as SymInt inputs)."""
        with torch.no_grad():
            result = self._module(*inputs)
        return list(result) if isinstance(result, (tuple, list)) else [result]


def choose_profile(profiles: list[list], arguments: Sequence) -> int | None:
    """The first optimization profile whose ranges hold every argument, or None.

    ``profiles[p][i]``: for engine input i, a list of (min, max) per dim, or for a size input the one (min, max)
    of its value; ``arguments[i]``: the tensor's shape or the size's value."""
    for index, ranges in enumerate(profiles):
        fits = True
        for limits, argument in zip(ranges, arguments):
            values = [argument] if isinstance(argument, int) else list(argument)
            if len(values) != len(limits) or any(not lo <= v <= hi for v, (lo, hi) in zip(values, limits)):
                fits = False
                break
        if fits:
            return index
    return None


class TensorRTExecutor:
    """Deserializes the engine once; one execution context; binds addresses per call, runs on torch's stream.

    Size arguments: a size the engine computes from its inputs' shapes (unnamed in the blob) is not bound; a
    named one is a 0-d int64 input, read from host memory when TensorRT needs its value to infer shapes (a
    shape input), else from device memory. With several optimization profiles the first one holding every
    argument is selected."""

    kind = "tensorrt"
    writes_in_place = True

    def __init__(self, blob: Blob, device: torch.device, engine):
        self.device = device
        self.reason = ""
        self._engine = engine
        self._context = engine.create_execution_context()
        self._arguments = blob.inputs  # tensors and sizes, in the delegate's argument order
        self._outputs = [e.name for e in blob.outputs]
        self._dtypes = {e.name: _torch_dtype(e.dtype) for e in blob.outputs}
        self._bound = [(i, e) for i, e in enumerate(self._arguments) if e.name]
        self._shape_inputs = {e.name for _, e in self._bound if e.is_size and engine.is_shape_inference_io(e.name)}
        self._size_memory = {
            e.name: torch.zeros((), dtype=torch.int64, device="cpu" if e.name in self._shape_inputs else device)
            for _, e in self._bound if e.is_size
        }
        self._profiles = self._profile_ranges() if engine.num_optimization_profiles > 1 else []
        self._profile = 0

    def _profile_ranges(self) -> list[list]:
        ranges = []
        for p in range(self._engine.num_optimization_profiles):
            row = []
            for _, e in self._bound:
                if e.name in self._shape_inputs:
                    lo, _, hi = self._engine.get_tensor_profile_values(p, e.name)
                    row.append([(lo[0], hi[0])])
                else:
                    lo, _, hi = self._engine.get_tensor_profile_shape(e.name, p)
                    row.append(list(zip(tuple(lo), tuple(hi))))
            ranges.append(row)
        return ranges

    def run(self, inputs, outputs):
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device)
            bound = [inputs[i] for i, _ in self._bound]
            if self._profiles:
                shapes = [v if isinstance(v, int) else tuple(v.shape) for v in bound]
                profile = choose_profile(self._profiles, shapes)
                if profile is None:
                    raise RuntimeError(f"no optimization profile of the engine holds the arguments {shapes}")
                if profile != self._profile:
                    self._context.set_optimization_profile_async(profile, stream.cuda_stream)
                    self._profile = profile
            for (_, entry), value in zip(self._bound, bound):
                if entry.is_size:
                    memory = self._size_memory[entry.name]
                    memory.fill_(int(value))  # host: TensorRT reads it at enqueue; device: ordered on the stream
                    self._context.set_tensor_address(entry.name, memory.data_ptr())
                    continue
                self._context.set_input_shape(entry.name, tuple(value.shape))
                self._context.set_tensor_address(entry.name, value.data_ptr())
            results = []
            for name, out in zip(self._outputs, outputs):
                shape = tuple(self._context.get_tensor_shape(name))  # this call's, from the bound inputs
                if out is None:  # not shareable: the delegate copies it into place afterwards
                    out = torch.empty(shape, dtype=self._dtypes[name], device=self.device)
                elif tuple(out.shape) != shape:  # the caller's planned (upper-bound) memory, contiguous
                    out = out.view(-1)[: math.prod(shape)].view(shape)
                self._context.set_tensor_address(name, out.data_ptr())
                results.append(out)
            if not self._context.execute_async_v3(stream.cuda_stream):
                raise RuntimeError("TensorRT execute_async_v3 failed")
            return results


def _torch_dtype(code: int) -> torch.dtype:
    from ..blob import SCALAR_TYPES

    name = {v: k for k, v in SCALAR_TYPES.items()}[code]
    return getattr(torch, name)


def _deserialize(blob: Blob, device: torch.device):
    """The engine, or (None, why not). Never deserializes without a GPU: the lean runtime can crash."""
    if blob.engine is None:
        return None, "the blob carries no engine (its build was left to PyTorch at lowering time)"
    if blob.exec_device_type != DEVICE_CUDA:
        return None, "the partition's execution device is the host"
    if not torch.cuda.is_available():
        return None, "no CUDA device is available"
    try:
        from .. import trt
    except ImportError as e:
        return None, f"no TensorRT runtime ({e})"
    try:
        mod = trt.module()
        with torch.cuda.device(device):
            engine = mod.Runtime(mod.Logger(mod.Logger.WARNING)).deserialize_cuda_engine(blob.engine)
    except Exception as e:  # a TensorRT that cannot even start here
        return None, f"TensorRT could not load the engine ({e})"
    if engine is None:
        return None, "the engine does not deserialize on this GPU (built for another GPU or TensorRT version)"
    return engine, ""


def create_executor(blob_bytes) -> PyTorchExecutor | TensorRTExecutor:
    blob = read_blob(blob_bytes)
    device = torch.device("cuda", blob.exec_device_index) if blob.exec_device_type == DEVICE_CUDA else torch.device("cpu")
    engine, reason = _deserialize(blob, device)
    if engine is not None:
        return TensorRTExecutor(blob, device, engine)
    if os.environ.get(FALLBACK_ENV, "pytorch").lower() == "error":
        raise RuntimeError(f"TensorRT cannot execute this partition here: {reason}; {FALLBACK_ENV}=error refuses "
                           "the PyTorch fallback (unset it to allow)")
    if device.type == "cuda" and not torch.cuda.is_available():
        device = torch.device("cpu")
    log.warning("et_tensorrt: partition runs with PyTorch on %s: %s", device, reason)
    return PyTorchExecutor(blob, device, reason)
