"""Executors the C++ delegate runs a partition with (one per delegate, created at init).

The C++ delegate (extension/runtime/delegate_handle.cpp) owns placement: it hands ``run`` input
tensors already on ``executor.device`` (shared caller memory or its own staging copies) and, for
outputs it could share, views of the caller's output memory. The executor computes and returns one
tensor per output; the delegate copies any result that is not already in the caller's memory.

Choice of executor: TensorRT where it can run (a CUDA device, a TensorRT runtime, and an engine that
deserializes for this GPU without host code, see engine_loading); otherwise the partition's embedded
program with PyTorch, on the execution device when CUDA is usable and on the host when it is not, with
one log line saying why. ``ET_TENSORRT_FALLBACK=error`` refuses instead of falling back. The embedded
program is loaded by the safe loader (et_tensorrt.embedded_program): no pickle, no eval.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from ..blob import DEVICE_CUDA, Blob, program_digest, scalar_type_dtype
from ..embedded_program import load_program
from ..errors import EngineRefusedError
from . import graph_program

log = logging.getLogger("et_tensorrt")

FALLBACK_ENV = "ET_TENSORRT_FALLBACK"  # "pytorch" (default) or "error"
FALLBACK_POLICIES = ("pytorch", "error")
# "0": the PyTorch executor runs the graph's Python code instead of the C++ interpreter (debugging, and tools
# that observe each executor call from Python, such as the GPU check's spy).
INTERPRETER_ENV = "ET_TENSORRT_GRAPH_INTERPRETER"

# torch.export's deserializer (under the safe loader) keeps a process-wide "current deserializer": not
# thread-safe.
_LOAD_LOCK = threading.Lock()


class PyTorchExecutor:
    """Runs the partition's embedded program (loaded by the safe loader, et_tensorrt.embedded_program) with PyTorch.

    Where the graph allows (aten operators, getitem, size arithmetic: every partition the partitioner makes
    today), ``native`` is a C++ GraphInterpreter that the delegate calls without Python or the GIL;
    otherwise ``run`` calls the lifted graph's generated code with the weights bound once.
    """

    kind = "pytorch"
    writes_in_place = False

    def __init__(self, blob: Blob, device: torch.device, reason: str):
        self.device = device
        self.reason = reason
        with _LOAD_LOCK:
            program = load_program(blob)
        lifted = graph_program.lifted_tensors(program, device)
        self.native, self.path = None, f"Python graph code ({INTERPRETER_ENV}=0)"
        if os.environ.get(INTERPRETER_ENV, "1") != "0":
            try:
                self.native = graph_program.encode(program, lifted)
                self.path = "C++ graph interpreter"
            except graph_program.NotEncodable as e:
                self.path = f"Python graph code ({e})"
        # The Python path (also used when the delegate is driven without the native interpreter). No grad
        # mode to enter: no lifted tensor requires grad, and the delegate's inputs never do.
        self._forward = program.graph_module.forward
        self._lifted = tuple(t for t in lifted if t is not None)
        self._user_outputs = graph_program.user_output_positions(program)
        if any(t is not None for t in lifted[len(self._lifted):]):  # torch.export lifts weights first
            raise RuntimeError("the partition's program takes user inputs before its weights")

    def run(self, inputs: Sequence[torch.Tensor], outputs: Sequence[Optional[torch.Tensor]]) -> list[torch.Tensor]:
        result = self._forward(*self._lifted, *inputs)
        return [result[i] for i in self._user_outputs]


class TensorRTExecutor:
    """Deserializes the engine once; one execution context; binds addresses per call, runs on torch's stream.

    The per-call path is kept short (it runs under the GIL, through TensorRT's Python API): input shapes are
    set only when they change, outputs the delegate cannot share go to buffers reused while their shape stays
    the same (the delegate copies them into ExecuTorch's memory right after, on the same stream), and the
    device is switched only when the caller's current device is another.
    """

    kind = "tensorrt"
    writes_in_place = True
    path = "TensorRT Python API"  # each call takes the GIL: no TensorRT C++ SDK can be installed here

    def __init__(self, blob: Blob, device: torch.device, engine):
        self.device = device
        self.reason = ""
        self._engine = engine
        self._context = engine.create_execution_context()
        self._index = device.index or 0
        self._input_names = [e.name for e in blob.inputs]
        self._output_names = [e.name for e in blob.outputs]
        self._output_dtypes = [scalar_type_dtype(e.dtype) for e in blob.outputs]
        self._shapes: tuple | None = None  # the input shapes the context was last given
        self._output_shapes: list[tuple] = []
        self._output_buffers: list[torch.Tensor | None] = [None] * len(self._output_names)

    def run(self, inputs, outputs):
        if torch.cuda.current_device() != self._index:
            with torch.cuda.device(self._index):
                return self._run(inputs, outputs)
        return self._run(inputs, outputs)

    def _run(self, inputs, outputs):
        context = self._context
        shapes = tuple(t.shape for t in inputs)
        if shapes != self._shapes:
            for name, shape in zip(self._input_names, shapes):
                context.set_input_shape(name, tuple(shape))
            self._output_shapes = [tuple(context.get_tensor_shape(name)) for name in self._output_names]
            self._shapes = shapes
        for name, t in zip(self._input_names, inputs):
            context.set_tensor_address(name, t.data_ptr())
        results = []
        for i, (name, out) in enumerate(zip(self._output_names, outputs)):
            if out is None:  # not shareable: a reused buffer, copied into place by the delegate right after
                out = self._output_buffers[i]
                if out is None or tuple(out.shape) != self._output_shapes[i]:
                    out = torch.empty(self._output_shapes[i], dtype=self._output_dtypes[i], device=self.device)
                    self._output_buffers[i] = out
            context.set_tensor_address(name, out.data_ptr())
            results.append(out)
        if not context.execute_async_v3(torch.cuda.current_stream(self._index).cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        return results


def _deserialize(blob: Blob, device: torch.device):
    """The engine, or (None, why not). Never deserializes without a GPU: the lean runtime can crash.
    Raises EngineRefusedError for an engine that needs host code (see engine_loading)."""
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
    from .engine_loading import deserialize_engine

    try:
        mod = trt.module()
        with torch.cuda.device(device):
            engine, reason = deserialize_engine(mod, blob.engine)
            if engine is not None and blob.refit_map is not None:
                return _refitted(mod, engine, blob)
            return engine, reason
    except EngineRefusedError:
        raise
    except Exception as e:  # a TensorRT that cannot even start here
        return None, f"TensorRT could not load the engine ({e})"


def _refitted(trt, engine, blob: Blob):
    """(engine, "") once the weight-stripped engine holds its weights again, else (None, why): a stripped
    engine without them computes garbage, so it is never used half refitted."""
    from .engine_loading import make_logger
    from .refit import RefitError, refit_engine

    try:
        count = refit_engine(trt, engine, blob, make_logger(trt))
    except RefitError as e:
        return None, f"the weight-stripped engine could not be refitted: {e}"
    log.info("et_tensorrt: refitted the weight-stripped engine (%d weights)", count)
    return engine, ""


def fallback_policy() -> str:
    """``ET_TENSORRT_FALLBACK``: ``pytorch`` (unset or empty) or ``error``; any other value is refused."""
    raw = os.environ.get(FALLBACK_ENV, "")
    value = raw.strip().lower() or "pytorch"
    if value not in FALLBACK_POLICIES:
        raise ValueError(f"{FALLBACK_ENV}={raw!r} is not one of {', '.join(FALLBACK_POLICIES)}")
    return value


@dataclass
class DelegateCall:
    """One delegate call seen by :func:`record_calls`, with host copies of what went in and came out."""

    partition: str  # et_tensorrt.blob.program_digest of the partition's program
    executor: str  # "tensorrt" or "pytorch"
    reason: str  # why not TensorRT ("" when TensorRT ran)
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


_recorders: list[list[DelegateCall]] = []  # the active record_calls() lists


@contextlib.contextmanager
def record_calls():
    """Collects every call of a delegate initialized while active (``et-tensorrt check`` reads which executor
    ran each partition, and on which inputs). Costs a host copy of every input and output."""
    calls: list[DelegateCall] = []
    _recorders.append(calls)
    try:
        yield calls
    finally:
        _recorders.remove(calls)


class _Recorded:
    """An executor whose calls are appended to the record_calls() lists active when it was made."""

    native = None  # every call goes through run() below, so it can be recorded

    def __init__(self, executor, partition: str, lists: list[list[DelegateCall]]):
        self._executor, self._partition, self._lists = executor, partition, lists
        self.path = f"{getattr(executor, 'path', executor.kind)}, recorded through Python"

    def __getattr__(self, name):  # device, kind, writes_in_place, reason: the C++ handle reads them
        return getattr(self._executor, name)

    def run(self, inputs, outputs):
        results = self._executor.run(inputs, outputs)
        call = DelegateCall(self._partition, self._executor.kind, self._executor.reason,
                            [t.detach().to("cpu", copy=True) for t in inputs],
                            [t.detach().to("cpu", copy=True) for t in results])
        for calls in self._lists:
            calls.append(call)
        return results


def create_executor(parsed: dict) -> PyTorchExecutor | TensorRTExecutor:
    """The executor for one partition, from the blob the C++ delegate already parsed (``parsed`` is
    ``blob_to_python``'s dict: its payloads are views of the delegate's copy, valid during this call)."""
    policy = fallback_policy()  # a bad value is refused before anything is loaded
    blob = Blob.from_parsed(parsed, parsed.get("data"), copy=False, metadata=False)
    executor = _create_executor(blob, policy)
    if _recorders:
        return _Recorded(executor, program_digest(blob), list(_recorders))
    return executor


def _create_executor(blob: Blob, policy: str) -> PyTorchExecutor | TensorRTExecutor:
    device = torch.device("cuda", blob.exec_device_index) if blob.exec_device_type == DEVICE_CUDA else torch.device("cpu")
    engine, reason = _deserialize(blob, device)
    if engine is not None:
        return TensorRTExecutor(blob, device, engine)
    if not blob.has_program:
        raise RuntimeError(f"TensorRT cannot execute this partition here ({reason}) and its blob carries no "
                           "program to run instead (an engine-only blob): run it where its engine does")
    if policy == "error":
        raise RuntimeError(f"TensorRT cannot execute this partition here: {reason}; {FALLBACK_ENV}=error refuses "
                           "the PyTorch fallback (unset it to allow)")
    if device.type == "cuda" and not torch.cuda.is_available():
        device = torch.device("cpu")
    log.warning("et_tensorrt: partition runs with PyTorch on %s: %s", device, reason)
    return PyTorchExecutor(blob, device, reason)
