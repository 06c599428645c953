"""Executors the C++ delegate runs a partition with (one per delegate, created at init).

The C++ delegate (extension/runtime/delegate_handle.cpp) owns placement: it hands ``run`` input
tensors already on ``executor.device`` (shared caller memory or its own staging copies) and, for
outputs it could share, views of the caller's output memory. The executor computes and returns one
tensor per output; the delegate copies any result that is not already in the caller's memory.

Choice of executor: made once per delegate by the C++ delegate (extension/runtime/executor_choice.cpp) and
recorded in every placement plan (``executor``, ``execution_device``, ``executor_reason``). It asks
:func:`tensorrt_executor` only when the blob has an engine for a CUDA device this process has; otherwise, or
when the engine does not deserialize here (no TensorRT runtime, another GPU, host code, see engine_loading),
it builds :func:`pytorch_executor` on the recorded GPU if present, else on the host, and the reason says so.
A blob with a RECIPE whose own engine does not run on this GPU (or that has none) gets an engine built here,
or from the engine cache (device_build; the plan's ``engine_origin`` says which).
``ET_TENSORRT_FALLBACK=error`` refuses instead of falling back. The embedded program is loaded by the safe
loader (et_tensorrt.embedded_program): no pickle, no eval.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..embedded_program import load_program
from ..errors import EngineRefusedError
from ..format.blob import DEVICE_CUDA, Blob, program_digest
from ..format.dtypes import scalar_type_dtype
from . import cuda_graph, graph_program, layer_profile, load_residue, shared, state

log = logging.getLogger("et_tensorrt")

FALLBACK_ENV = "ET_TENSORRT_FALLBACK"  # "pytorch" (default) or "error"
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

    def __init__(self, blob: Blob, device: torch.device, reason: str, scope: tuple[int, str] = (0, "")):
        self.device = device
        self.reason = reason
        # What torch keeps of the load in its process-wide caches goes when the load ends (the source of the
        # module kept here when the executor closes): loads and resets hold no memory once they are gone.
        self._residue = load_residue.LoadResidue()
        with self._residue:
            program = self._load(blob, device, scope)
            self._residue.keep(program.graph_module)

    def _load(self, blob: Blob, device: torch.device, scope: tuple[int, str]) -> torch.export.ExportedProgram:
        with _LOAD_LOCK:
            program = load_program(blob)
        _place_factories(program.graph_module, device)
        # The delegate's state (the STATE table; a shared one is the loaded program's): updated by the program
        # itself, kept across calls, bound into the program once (pinned: never double-buffered).
        self._states = state.acquire(blob.states, device, *scope)
        self.state = self._states.pin()
        self.state_updates = state.write_in_place(program, self.state) if self.state else {}
        lifted = graph_program.lifted_tensors(program, device, self.state)
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
        if any(t is not None for t in lifted[len(self._lifted) :]):  # torch.export lifts weights first
            raise RuntimeError("the partition's program takes user inputs before its weights")
        return program

    def run(self, inputs: Sequence, outputs: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
        """``inputs``: tensors, and ints for size arguments (the program takes them as SymInt inputs)."""
        result = self._forward(*self._lifted, *inputs)
        return [result[i] for i in self._user_outputs]

    def close(self) -> None:
        """Lets go of the program's shared states and its generated source (the delegate calls it when its method
        goes)."""
        self._states.close()
        self._residue.close()
        # The graph's node metadata (fake tensors, their ShapeEnv, stack traces) hangs in the module's reference
        # cycles, which only a full collection would free once a long-lived program was promoted: dropped now, by
        # reference counting, a reset or a closed Runner leaves a few objects to the collector, not the program.
        module = getattr(self._forward, "__self__", None)
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                node.meta.clear()
        self._forward, self._lifted, self.native = None, (), None


def _place_factories(module: torch.fx.GraphModule, device: torch.device) -> None:
    """The embedded program is the partition's host form (every device argument cpu: ONNX has no device);
    its weights are moved with the lifted tensors, this moves what its factory ops and casts create (``arange(...,
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
    argument is selected.

    The per-call path is kept short (it runs under the GIL, through TensorRT's Python API): input shapes (and
    size values) are set only when they change, outputs the delegate cannot share go to buffers reused while
    their shape stays the same (the delegate copies them into ExecuTorch's memory right after, on the same
    stream), and the device is switched only when the caller's current device is another.

    State (the blob's STATE table): each state tensor is allocated once on the device and kept across calls. An
    in-place state is bound to its engine input and to the output the engine aliases to it (one address: the
    IKVCacheUpdateLayer writes the new rows into it). A write-back state (a conv or SSM state, a counter) is
    double-buffered: the engine reads one buffer and writes the new value into the other, which then is the state
    (runtime/state.py ``Slot``): nothing is copied. While another delegate holds the state's address for good (a
    PyTorch executor of another method, a CUDA graph: ``pinned``), the new value goes to a reused buffer instead and
    is copied into the state on the stream right after the call.
    """

    kind = "tensorrt"
    writes_in_place = True
    path = "TensorRT Python API"  # each call takes the GIL: no TensorRT C++ SDK can be installed here
    origin = ""  # where the engine came from: "" the blob's own; else device_build's "built here for sm90 ..."

    def __init__(
        self, blob: Blob, device: torch.device, engine, scope: tuple[int, str] = (0, ""), runtime_cache_path=None
    ):
        from . import runtime_cache

        self.device = device
        self.reason = ""
        self._engine = engine
        # TensorRT-RTX compiles kernels at the first call of each shape: its runtime cache keeps them on disk.
        self._context, self.runtime_cache = runtime_cache.execution_context(engine, runtime_cache_path)
        self._saved_after_first_call = self.runtime_cache is None
        self._index = device.index or 0
        self._arguments = blob.inputs  # tensors and sizes, in the delegate's argument order
        self._output_names = [e.name for e in blob.outputs]
        self._output_dtypes = [scalar_type_dtype(e.dtype) for e in blob.outputs]
        self._bound = [(i, e) for i, e in enumerate(self._arguments) if e.name]  # unnamed sizes: derived
        self._shape_inputs = {e.name for _, e in self._bound if e.is_size and engine.is_shape_inference_io(e.name)}
        self._size_memory = {
            e.name: torch.zeros((), dtype=torch.int64, device="cpu" if e.name in self._shape_inputs else device)
            for _, e in self._bound
            if e.is_size
        }
        self._profiles = self._profile_ranges() if engine.num_optimization_profiles > 1 else []
        self._profile = 0
        self._shapes: tuple | None = None  # the input shapes and size values the context was last given
        self._output_shapes: list[tuple] = []
        self._output_buffers: list[torch.Tensor | None] = [None] * len(self._output_names)
        self._held = state.acquire(blob.states, device, *scope)  # a shared state is the loaded program's
        try:
            self._states = [_StateBinding(e, self._held.slots[e.name], engine) for e in blob.states]
        except BaseException:
            self._held.close()  # no executor, no hold on the program's states
            raise
        self.state_updates = {b.name: b.update for b in self._states}
        self._layer_times: layer_profile.LayerTimes | None = None

    def profile_layers(self, trt_module) -> None:
        """Times every layer of each run with TensorRT's IProfiler (layer_profile.py): the delegate finds
        ``take_layer_times`` and logs the last run's layers into its ETDump. Off unless asked at load."""
        self._layer_times, self._profiler = layer_profile.attach(self._context, trt_module)
        self.take_layer_times = self._layer_times.take
        self.path = f"{type(self).path}, IProfiler per layer"

    @property
    def state(self) -> dict[str, torch.Tensor]:
        """Buffer name -> the tensor each state is now (a double-buffered one alternates)."""
        return self._held.tensors

    def pin_states(self) -> None:
        """From now on every state keeps its address (a CUDA graph replays the addresses it captured): a
        double-buffered state is copied back instead, and ``state_updates`` says so."""
        self._held.pin()
        for binding in self._states:
            binding.refresh()
        self.state_updates = {b.name: b.update for b in self._states}

    engine_key = None  # the program's shared engine this executor holds (tensorrt_executor)

    def close(self) -> None:
        """Lets go of the program's shared states and engine (the delegate calls it when its method goes), after
        saving the kernels TensorRT-RTX compiled."""
        if self.runtime_cache is not None:
            self.runtime_cache.save()
            self.runtime_cache = None
        self._held.close()
        if self.engine_key is not None:
            _engines.release(self.engine_key)
            self.engine_key = None

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
        if torch.cuda.current_device() != self._index:
            with torch.cuda.device(self._index):
                results = self._run(inputs, outputs)
        else:
            results = self._run(inputs, outputs)
        if not self._saved_after_first_call and not torch.cuda.is_current_stream_capturing():
            self._saved_after_first_call = True  # the first call compiled the kernels a next load would compile
            torch.cuda.current_stream(self._index).synchronize()
            self.runtime_cache.save()
        return results

    def _run(self, inputs, outputs):
        context = self._context
        stream = torch.cuda.current_stream(self._index).cuda_stream
        bound = [inputs[i] for i, _ in self._bound]
        shapes = tuple(v if isinstance(v, int) else tuple(v.shape) for v in bound)
        if shapes != self._shapes:
            if self._profiles:
                profile = choose_profile(self._profiles, shapes)
                if profile is None:
                    raise RuntimeError(f"no optimization profile of the engine holds the arguments {shapes}")
                if profile != self._profile:
                    context.set_optimization_profile_async(profile, stream)
                    self._profile = profile
            for (_, entry), value in zip(self._bound, bound):
                if entry.is_size:  # host: TensorRT reads it at enqueue; device: ordered on the stream
                    self._size_memory[entry.name].fill_(int(value))
                else:
                    context.set_input_shape(entry.name, tuple(value.shape))
            for binding in self._states:  # static shapes; set again with every profile switch
                context.set_input_shape(binding.input_name, binding.shape)
            self._output_shapes = [tuple(context.get_tensor_shape(name)) for name in self._output_names]
            self._shapes = shapes
        for (_, entry), value in zip(self._bound, bound):
            memory = self._size_memory[entry.name] if entry.is_size else value
            context.set_tensor_address(entry.name, memory.data_ptr())
        results = []
        for i, (name, out) in enumerate(zip(self._output_names, outputs)):
            shape = self._output_shapes[i]
            if out is None:  # not shareable: a reused buffer, copied into place by the delegate right after
                out = self._output_buffers[i]
                if out is None or tuple(out.shape) != shape:
                    out = torch.empty(shape, dtype=self._output_dtypes[i], device=self.device)
                    self._output_buffers[i] = out
            elif tuple(out.shape) != shape:  # the caller's planned (upper-bound) memory, contiguous
                out = out.view(-1)[: math.prod(shape)].view(shape)
            context.set_tensor_address(name, out.data_ptr())
            results.append(out)
        for binding in self._states:
            binding.bind(context)
        if self._layer_times is not None:
            self._layer_times.start_run()  # reported during the enqueue (enqueue_emits_profile, TensorRT's default)
        if not context.execute_async_v3(stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        for binding in self._states:
            binding.write_back()  # on torch's current stream: the one the engine ran on
        return results


class _StateBinding:
    """One state's engine bindings (TensorRTExecutor). In place only when the engine itself aliases the output to the
    input (``get_aliased_input_tensor``); a write-back state (a conv or SSM state, a counter) is double-buffered (the
    output is the slot's other buffer, and the two trade places after the call); a cache the engine does not alias,
    or any state while the slot is pinned, is copied back from a reused buffer. The plan says which (``update``)."""

    def __init__(self, entry, slot, engine):
        self.name, self.slot, self.shape = entry.name, slot, tuple(entry.shape)
        self.input_name, self.output_name = entry.input_name, entry.output_name
        for name in (self.input_name, self.output_name):
            if not name or name not in _tensor_names(engine):
                raise RuntimeError(f"the engine has no binding {name!r} for the state {self.name!r}")
        aliased = engine.get_aliased_input_tensor(self.output_name) if entry.in_place else None
        if entry.in_place and aliased != self.input_name:
            log.warning(
                "et_tensorrt: state %s: the engine does not alias %s to %s (it says %r); writing it elsewhere instead",
                self.name,
                self.output_name,
                self.input_name,
                aliased,
            )
        self.in_place = entry.in_place and aliased == self.input_name
        # A KV cache the engine would not alias is copied back rather than held twice (its rows are the memory)
        self._double = not entry.in_place
        self._buffer = None
        self._warned = False
        self.refresh()

    def refresh(self) -> None:
        """Decides the update from the slot's pins (at init, and when the executor pins its states)."""
        if self.in_place:
            self.update = state.IN_PLACE
        elif self.slot.pinned or not self._double:
            self.update = state.COPIED_BACK
            if self._buffer is None:
                self._buffer = torch.empty_like(self.slot.tensor)
        else:
            self.update = state.SWAPPED

    def bind(self, context) -> None:
        tensor = self.slot.tensor
        context.set_tensor_address(self.input_name, tensor.data_ptr())
        if self.in_place:  # the caller owns the one buffer the layer reads and writes (TensorRT requires one address)
            out = tensor
        elif self.update == state.SWAPPED and not self.slot.pinned:
            out = self.slot.spare_buffer()
        else:
            if self.update == state.SWAPPED and not self._warned:  # pinned since: another delegate holds the address
                self._warned = True
                log.warning(
                    "et_tensorrt: state %s is now held at its address by another delegate of this program: copied "
                    "back from now on (the plans say double-buffered)",
                    self.name,
                )
            if self._buffer is None:
                self._buffer = torch.empty_like(tensor)
            out = self._buffer
        self._out = out
        context.set_tensor_address(self.output_name, out.data_ptr())

    def write_back(self) -> None:
        if self.in_place:
            return
        if self._out is self.slot.spare:
            self.slot.swap()
        else:
            self.slot.tensor.copy_(self._out)


def _tensor_names(engine) -> set[str]:
    return {engine.get_tensor_name(i) for i in range(engine.num_io_tensors)}


def _deserialize(blob: Blob, device: torch.device):
    """(engine, origin, why not): the blob's own engine where it runs here; else, with a RECIPE, one built for
    this GPU or taken from the engine cache (device_build); else None and why. Never deserializes without a GPU:
    the lean runtime can crash. Raises EngineRefusedError for an engine that needs host code (engine_loading)."""
    if blob.engine is None and blob.recipe is None:
        return None, "", "the blob carries no engine (its build was left to PyTorch at lowering time)"
    if blob.exec_device_type != DEVICE_CUDA:
        return None, "", "the partition's execution device is the host"
    if not torch.cuda.is_available():  # the C++ choice checked already; a second guard before TensorRT
        return None, "", "no CUDA device is available"
    try:
        from .. import trt  # noqa: F401 - a TensorRT-free install stops here
        from . import device_build
    except ImportError as e:
        return None, "", f"no TensorRT runtime ({e})"
    from .engine_loading import deserialize_engine

    try:
        gpu = device_build.this_gpu(device) if blob.recipe is not None else None  # only a recipe's checks need it
        why = device_build.aot_fit(blob, gpu)
        if not why:
            runtime = device_build.aot_runtime(blob)
            if runtime is None:
                why = "no TensorRT runtime can be imported here"
            else:
                with torch.cuda.device(device):
                    engine, why = deserialize_engine(runtime.module, blob.engine)
                if engine is not None and blob.refit_map is not None:
                    engine, why = _refitted(runtime.module, engine, blob)
                if engine is not None:
                    return engine, "", ""
        for _attempt in range(2):  # a cached engine that does not deserialize is removed and built once more
            made = device_build.engine_for(blob, gpu, why)
            if isinstance(made, str):
                return None, "", made
            with torch.cuda.device(device):
                engine, reason = deserialize_engine(made.flavour.module, made.data.view())
            if engine is not None:
                return engine, made.origin, ""
            if not made.from_cache:
                return None, "", f"{why}; the engine built here does not deserialize: {reason}"
            from ..builder import build_cache

            build_cache.discard(made.key, f"the cached engine does not deserialize ({reason})")
        return None, "", why
    except EngineRefusedError:
        raise
    except Exception as e:  # a TensorRT that cannot even start here
        return None, "", f"TensorRT could not load the engine ({e})"


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
    """``ET_TENSORRT_FALLBACK`` as the delegate reads it: ``pytorch`` (unset or empty) or ``error``; any other
    value is a ValueError."""
    from .. import _C

    return _C.fallback_policy()


@dataclass
class DelegateCall:
    """One delegate call seen by :func:`record_calls`, with host copies of what went in and came out."""

    partition: str  # et_tensorrt.format.blob.program_digest of the partition's program
    executor: str  # "tensorrt" or "pytorch"
    reason: str  # why not TensorRT ("" when TensorRT ran)
    inputs: list[torch.Tensor | int]  # an int for a size argument
    outputs: list[torch.Tensor]
    # the delegate's states (the blob's STATE table, in its order) as the call found them and as it left them: the
    # engine's trailing inputs and outputs (backend/state_lifting.py), which the delegate binds itself
    states_before: list[torch.Tensor] = field(default_factory=list)
    states_after: list[torch.Tensor] = field(default_factory=list)


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

    def __init__(self, executor, partition: str, lists: list[list[DelegateCall]], states: list[str]):
        self._executor, self._partition, self._lists, self._state_names = executor, partition, lists, states
        self.path = f"{getattr(executor, 'path', executor.kind)}, recorded through Python"

    def __getattr__(self, name):  # device, kind, writes_in_place, reason: the C++ handle reads them
        return getattr(self._executor, name)

    def _states(self) -> list[torch.Tensor]:
        now = self._executor.state if self._state_names else {}
        return [now[name].detach().to("cpu", copy=True) for name in self._state_names]

    def run(self, inputs, outputs):
        before = self._states()
        results = self._executor.run(inputs, outputs)
        call = DelegateCall(
            self._partition,
            self._executor.kind,
            self._executor.reason,
            [t if isinstance(t, int) else t.detach().to("cpu", copy=True) for t in inputs],
            [t.detach().to("cpu", copy=True) for t in results],
            before,
            self._states(),
        )
        for calls in self._lists:
            calls.append(call)
        return results


def _blob(parsed: dict) -> Blob:
    """The blob the C++ delegate parsed (``blob_to_python``'s dict: payloads are views of the delegate's copy,
    valid during the call that hands it over)."""
    return Blob.from_parsed(parsed, parsed.get("data"), copy=False, metadata=False)


def _scope(parsed: dict) -> tuple[int, str]:
    """(loaded program, method) the delegate belongs to (extension/runtime/program_scope.h): the key of the states
    the program's methods share."""
    return parsed.get("program_scope", 0), parsed.get("method", "")


def _recorded(executor, blob: Blob):
    if not _recorders:
        return executor
    return _Recorded(executor, program_digest(blob), list(_recorders), [e.name for e in blob.states])


_engines = shared.Registry()  # (program scope, engine key, device) -> (engine, origin) its methods' delegates run


def _engine_key(blob: Blob, scope: int, device: torch.device) -> tuple | None:
    """The key of a named engine in its loaded program (methods that run one engine name the same datum,
    backend/engine_sharing.py), or None: deserialized for this delegate alone."""
    named = blob.named_engine
    return (scope, named.key, str(device)) if scope and named is not None else None


def tensorrt_executor(parsed: dict, device: torch.device) -> TensorRTExecutor | str:
    """The TensorRT executor on ``device``, or why no engine loads here (a string). Its ``origin`` says where a
    device-built engine came from (the plan's ``engine_origin``; "" for the blob's own). Delegates of one loaded
    program that run one engine share it, deserialized once (its memory on the device once); each has its own
    execution context."""
    blob = _blob(parsed)
    key = _engine_key(blob, parsed.get("program_scope", 0), device)

    def load():
        engine, origin, reason = _deserialize(blob, device)
        if engine is None:
            raise _NoEngine(reason)
        return engine, origin

    try:
        (engine, origin), _ = _engines.acquire(key, load) if key else (load(), "")
    except _NoEngine as e:
        return str(e)
    try:
        cache = _runtime_cache_path(blob, origin, device) if hasattr(engine, "create_runtime_config") else None
        executor = TensorRTExecutor(blob, device, engine, _scope(parsed), cache)
    except BaseException:
        if key:
            _engines.release(key)
        raise
    executor.origin = origin
    executor.engine_key = key
    return _recorded(_profiled(executor, parsed), blob)


def _profiled(executor: TensorRTExecutor, parsed: dict):
    """The executor as it runs: timed per layer where asked at load (layer_profile.py), else replayed as a CUDA
    graph where asked; both at once is refused, naming why."""
    if not layer_profile.enabled():
        return _graphed(executor, parsed)
    if _replays_graph(executor, parsed):
        executor.close()  # its hold on the program's engine and states
        raise ValueError(layer_profile.CUDA_GRAPH_REFUSAL)
    executor.profile_layers(layer_profile.trt_module_of(executor._engine))
    return executor


def _runtime_cache_path(blob: Blob, origin: str, device: torch.device):
    """Where this engine's TensorRT-RTX runtime cache is kept on this GPU (runtime_cache.py)."""
    from . import runtime_cache

    if origin:  # a device-built engine: the recipe's (its header holds the build options), for this GPU
        header = blob.recipe.header_bytes if blob.recipe is not None else b""
        engine = f"device-built|{program_digest(blob)}|{zlib.crc32(header):08x}"
    else:  # the blob's own engine, by its named-data key (a digest) or its CRC-32
        named = blob.named_engine
        engine = named.key if named is not None else f"crc32:{zlib.crc32(blob.engine):08x}"
    gpu = f"{torch.cuda.get_device_name(device)} sm{''.join(map(str, torch.cuda.get_device_capability(device)))}"
    return runtime_cache.path_for(engine, gpu)


def _graphed(executor, parsed: dict):
    """The executor, replayed as a CUDA graph where the partition was lowered with ``cuda_graph`` (or
    ET_TENSORRT_CUDA_GRAPH says so) and it runs on a CUDA device (runtime/cuda_graph.py)."""
    return cuda_graph.GraphedExecutor(executor) if _replays_graph(executor, parsed) else executor


def _replays_graph(executor, parsed: dict) -> bool:
    return executor.device.type == "cuda" and cuda_graph.policy(_lowered_with_graph(parsed))


def _lowered_with_graph(parsed: dict) -> bool:
    """The blob's METADATA says ``cuda_graph`` (BuildOptions.cuda_graph); the runtime reads nothing else there."""
    raw = parsed.get("metadata")
    if raw is None:
        return False
    try:
        return json.loads(bytes(raw).decode("utf-8")).get("cuda_graph") is True
    except (ValueError, AttributeError):  # the reader checked its digest: only a foreign writer's text gets here
        return False


class _NoEngine(Exception):
    """Why no engine loads here (tensorrt_executor returns it as its string)."""


def pytorch_executor(parsed: dict, device: torch.device, reason: str) -> PyTorchExecutor:
    """The partition's embedded program with PyTorch on ``device`` (chosen by the delegate), ``reason`` saying
    why not TensorRT."""
    blob = _blob(parsed)
    log.warning("et_tensorrt: partition runs with PyTorch on %s: %s", device, reason)
    return _recorded(_graphed(PyTorchExecutor(blob, device, reason, _scope(parsed)), parsed), blob)


def create_executor(blob, cuda_devices: int | None = None, named_data=None):
    """The executor the C++ delegate builds for ``blob`` (bytes), with its choice (a dict: executor, device,
    recorded_device, reason). ``cuda_devices`` fakes the CUDA device count (tests, fuzzers); ``named_data`` (key ->
    bytes-like) stands in for the program's named data (a blob with NAMED_DATA)."""
    from .. import _C

    return _C.create_executor(blob, cuda_devices, named_data)
