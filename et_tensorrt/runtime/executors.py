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
        _place_factories(module, device)
        self._module = module.to(device)

    def run(self, inputs: Sequence[torch.Tensor], outputs: Sequence[Optional[torch.Tensor]]) -> list[torch.Tensor]:
        with torch.no_grad():
            result = self._module(*inputs)
        return list(result) if isinstance(result, (tuple, list)) else [result]


def _place_factories(module: torch.fx.GraphModule, device: torch.device) -> None:
    """The embedded program is the partition's host form (every device argument cpu: ONNX has no device);
    ``Module.to`` moves its weights, this moves what its factory ops and casts create (``arange(...,
    device=cpu)``) to the execution device too. A partition holds no device-changing cast, so every device
    argument in it means "the engine's device"."""
    if device.type == "cpu":
        return
    changed = False
    for node in module.graph.nodes:
        if node.op == "call_function" and isinstance(node.kwargs.get("device"), torch.device):
            node.kwargs = {**node.kwargs, "device": device}
            changed = True
    if changed:
        module.recompile()


class TensorRTExecutor:
    """Deserializes the engine once; one execution context; binds addresses per call, runs on torch's stream."""

    kind = "tensorrt"
    writes_in_place = True

    def __init__(self, blob: Blob, device: torch.device, engine):
        self.device = device
        self.reason = ""
        self._engine = engine
        self._context = engine.create_execution_context()
        self._inputs = [e.name for e in blob.inputs]
        self._outputs = [e.name for e in blob.outputs]
        self._dtypes = {e.name: _torch_dtype(e.dtype) for e in blob.outputs}

    def run(self, inputs, outputs):
        with torch.cuda.device(self.device):
            for name, t in zip(self._inputs, inputs):
                self._context.set_input_shape(name, tuple(t.shape))
                self._context.set_tensor_address(name, t.data_ptr())
            results = []
            for name, out in zip(self._outputs, outputs):
                if out is None:  # not shareable: the delegate copies it into place afterwards
                    shape = tuple(self._context.get_tensor_shape(name))
                    out = torch.empty(shape, dtype=self._dtypes[name], device=self.device)
                self._context.set_tensor_address(name, out.data_ptr())
                results.append(out)
            stream = torch.cuda.current_stream(self.device)
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
