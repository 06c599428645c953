"""`Runner`: runs a `.pte` through ExecuTorch's C++ Module/Method with our descriptors.

Inputs are described with their real devices (errors name the input, the method and the device).
Callers may pass preallocated ``outputs`` (e.g. CUDA tensors): outputs the program left unplanned are
written in place (``Method::set_output_data_ptr``), others are copied into them.

Programs are loaded with ExecuTorch's ``InternalConsistency`` verification (its flatbuffer verifier and
semantic checks), as ExecuTorch's own Python runtime does: a corrupt ``.pte`` is a RunnerError, not a
crash. ``verify=False`` skips it for files you trust (docs/security.md has its measured cost).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import threading
from collections.abc import Sequence

import torch

from .. import _C
from ..errors import OptionError, RunnerError
from . import layer_profile
from .device_build import policy
from .profiling import ProfileTable

# Set to exactly 1 (the C++ runtime reads them): named data used without checking it against the CRC-32s its blobs
# record (files you trust: docs/security.md); ExecuTorch's own log lines shown while a Runner loads and runs (held
# back otherwise: its RunnerError says what happened; `et-tensorrt --debug` sets it).
TRUST_NAMED_DATA_ENV = _C.TRUST_NAMED_DATA_ENV
EXECUTORCH_LOGS_ENV = _C.EXECUTORCH_LOGS_ENV

# ExecuTorch's CPU kernels (for the ops our delegate does not take). Its static initializers register them into
# libexecutorch.so; ExecuTorch's own Python binding links the same library (same soname), so whichever loads it
# first, the kernels are registered once.
KERNELS_LIBRARY = "libexecutorch_kernels_optimized.so"
_kernels_loaded = False
_kernels_lock = threading.Lock()


def _executorch_lib_dirs() -> list[str]:
    """``lib/`` folders to look in: first the one of the libexecutorch.so our extension loaded, then the wheel's."""
    dirs = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if path.endswith("/libexecutorch.so"):
                    dirs.append(os.path.dirname(path))
                    break
    except OSError:
        pass
    import executorch  # a namespace package: one portion per installed copy

    dirs.extend(os.path.join(p, "lib") for p in executorch.__path__)
    return dirs


def _kernels_already_mapped() -> bool:
    """Whether a kernel library is in the process already (ExecuTorch's Python binding needs it; importing the
    package loads that binding). Asked by soname: loading another copy by path, e.g. the wheel's beside a
    runtime-only prefix's, would register every kernel a second time, which ExecuTorch answers with an abort."""
    try:
        ctypes.CDLL(KERNELS_LIBRARY, mode=os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


def load_kernels() -> None:
    """Register ExecuTorch's CPU kernels into libexecutorch.so by loading the kernel library itself.

    Not through ``executorch.extension.pybindings.portable_lib``: that module imports ``executorch.exir`` (the
    ahead-of-time stack and its dependencies), which a runtime-only install does not need.
    """
    global _kernels_loaded
    with _kernels_lock:
        if _kernels_loaded:
            return
        if _kernels_already_mapped():
            _kernels_loaded = True
            return
        dirs = _executorch_lib_dirs()
        for d in dirs:
            path = os.path.join(d, KERNELS_LIBRARY)
            if os.path.isfile(path):
                ctypes.CDLL(path)
                _kernels_loaded = True
                return
        raise RunnerError(
            f"ExecuTorch's kernel library {KERNELS_LIBRARY} is not in {dirs}; install "
            "executorch>=1.5.1,<1.6 (its wheel ships it in executorch/lib)"
        )


def record_plans() -> _C.PlanRecording:
    """The delegate plans of calls made through ExecuTorch's own runtime (which has no Runner)::

    with et_tensorrt.record_plans() as rec:
        method.execute([x])
    rec.plans  # every delegate call's PlacementPlan on this thread inside the block, in order
    """
    return _C.PlanRecording()


class Runner:
    """``prepare``: whether loading a method may build a TensorRT engine for this GPU when a blob's own engine
    does not run here (et_tensorrt.runtime.device_build): ``"auto"`` / True (use the engine cache, else build,
    with one log line naming the time), ``"cache"`` / False (a prepared engine only: ``et-tensorrt prepare``),
    ``"off"`` (the blobs' own engines only); None (default): ``ET_TENSORRT_PREPARE``, unset meaning auto.
    ``data_path``: the .ptd holding the program's named data kept outside the .pte (a lowering with
    ``named_data="ptd"``); it is mapped, and the delegates' weights are views of it. Each engine and weight read from
    it is checked against the CRC-32 its blob records when its method loads (TRUST_NAMED_DATA_ENV skips that), and a
    .ptd that is truncated, not one, or another program's is a RunnerError naming it.
    ``profile``: ``True`` attaches ExecuTorch's ETDump generator to every method as it loads (docs/profiling.md):
    :meth:`profile_table` is the delegates' events per phase, :meth:`write_etdump` the ETDump for
    ``executorch.devtools.Inspector``; ``"layers"`` also times each TensorRT engine layer (TensorRT's IProfiler, on a
    GPU; refused with CUDA-graph replay). ``False`` (default): no tracer at all, and nothing is timed."""

    def __init__(
        self,
        program: str | os.PathLike | bytes | bytearray | memoryview,
        *,
        verify: bool = True,
        data_path: str | os.PathLike | None = None,
        prepare: bool | str | None = None,
        profile: bool | str = False,
    ):
        from .device_build import check_policy

        self._prepare = None if prepare is None else check_policy(prepare)
        if profile not in (False, True, "layers"):
            raise OptionError(f"profile={profile!r}: use True (the delegates' phases), 'layers' (and each TensorRT "
                              "layer) or False")  # fmt: skip
        self._profile = _C.EventProfile() if profile else None
        # layer profilers: asked for; with profile=True as ET_TENSORRT_LAYER_PROFILE says; never without a profile
        self._layers = True if profile == "layers" else None if profile else False
        load_kernels()
        if isinstance(program, (bytes, bytearray, memoryview)):
            self._source, self._from = bytes(program), _C.ProgramRunner.from_bytes
        else:
            path = os.fspath(program)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"no program at {path!r}")
            self._source, self._from = path, _C.ProgramRunner.from_file
        self._data_path = "" if data_path is None else os.fspath(data_path)
        if self._data_path and not os.path.isfile(self._data_path):
            raise FileNotFoundError(f"no data file at {self._data_path!r}")
        self._verify = verify
        with self._loading():
            self._native = self._from(self._source, verify, self._data_path, self._profile)
        self._loaded: set[str] = set()  # methods loaded (their delegates have chosen): calls need no policy
        # One call at a time per Runner: ExecuTorch's Method holds its inputs and outputs as state, so
        # two threads sharing a Runner would read each other's results. Separate Runners run in parallel.
        self._lock = threading.Lock()
        self._in_place: Sequence[bool] = ()
        self._closed_plan: _C.MethodPlan | None = None

    @property
    def method_names(self) -> list[str]:
        return sorted(self._require().method_names())

    def run(
        self,
        inputs: Sequence[torch.Tensor | bool | int | float],
        method: str = "forward",
        outputs: Sequence[torch.Tensor] | None = None,
    ) -> list[torch.Tensor]:
        """``inputs``: one per method input, in order: a tensor, or for a value input (an export keeps a Python bool,
        int or float its model took, e.g. ``return_dict=True``) that value; the method takes only the value it was
        exported with."""
        native = self._require()
        if isinstance(inputs, torch.Tensor):
            inputs = [inputs]
        given = None if outputs is None else list(outputs)
        with self._lock:
            if method in self._loaded:  # the per-call path: nothing here is built per call that a call can skip
                results, self._in_place = native.run(list(inputs), method, given)
            else:
                with self._loading():  # a method loads on its first call: its delegates choose then
                    results, self._in_place = native.run(list(inputs), method, given)
                self._loaded.add(method)
        return list(results)

    def load_method(self, method: str = "forward") -> None:
        """Loads ``method`` now (its delegates choose their executors and load their engines or programs), as
        ExecuTorch's ``Module.load_method`` does; otherwise it loads on its first call. The LLM drivers load theirs
        when they are made, as TextLLMRunner's ``load()`` does, so that a generation's time is its calls'."""
        native = self._require()
        with self._lock:
            if method not in self._loaded:
                with self._loading():
                    native.num_inputs(method)  # loads the method (ProgramRunner::ensure_loaded)
                self._loaded.add(method)

    @contextlib.contextmanager
    def _loading(self):
        """Around whatever loads methods: their delegates choose (the device-build policy) and get a layer
        profiler where asked."""
        with policy(self._prepare), layer_profile.policy(self._layers):
            yield

    def profile_table(self) -> ProfileTable:
        """The delegates' events since the Runner loaded (or the last :meth:`write_etdump`): one row per event name
        (``init``, ``input copies``, the executor's run, ``output copies``, each layer with ``profile="layers"``),
        with calls, median and total microseconds and the bytes copied."""
        return ProfileTable.from_events(self._require_profile().events())

    def write_etdump(self, path: str | os.PathLike) -> int:
        """Writes the ETDump of everything since the Runner loaded (or the last write) to ``path``, for
        ``executorch.devtools.Inspector(etdump_path=path)``; the profile then starts over. Returns its size."""
        profile = self._require_profile()
        with self._lock:  # not while a call is logging into it
            data = profile.take_etdump()
        with open(path, "wb") as f:
            f.write(data)
        return len(data)

    def _require_profile(self):
        if self._profile is None:
            raise RunnerError("this Runner was made without profile=True: nothing was traced")
        return self._profile

    @property
    def last_plan(self) -> _C.MethodPlan | None:
        """The plan of this Runner's last call (also after a failed call): each method input and output end to end,
        ExecuTorch's own copies included; :attr:`last_plans` is every delegate's plan of that call, in order."""
        native = self._native
        return self._closed_plan if native is None else native.last_plan()

    @property
    def outputs_written_in_place(self) -> list[bool]:
        """Per output of the last call: whether it was written into the caller's tensor (``outputs=``)."""
        return list(self._in_place)

    @property
    def last_plans(self) -> list[_C.PlacementPlan]:
        """Every delegate's placement plan of the last call, in call order."""
        return [] if self.last_plan is None else list(self.last_plan.delegates)

    def reset(self) -> None:
        """Starts over: the program's methods are loaded again, so every delegate's state (a KV cache, its
        counters) holds its initial contents. Decoding a new sequence does not need this: its positions restart
        at 0 and the attention mask hides the rows a longer previous sequence left behind."""
        native = self._require()
        with self._lock:
            self._native = None
            del native  # the old methods (and their delegates' device state) go before the new ones load
            self._loaded.clear()
            # What the old methods' PyTorch programs leave are reference cycles (fx GraphModules: their generated
            # classes and graphs; the executors drop the graphs' metadata when they close), which only the cyclic
            # collector frees. Collected now, young, they are gone before the new load allocates; left to it, the
            # loads alive at its generation-1 passes wait in its oldest generation for a full collection while new
            # loads fill fresh pymalloc arenas: 10,000 resets held 6 MB more (issue 45). Generations 0 and 1 only:
            # about 1 ms, where a full collection costs 0.2 s.
            gc.collect(1)
            with self._loading():  # the profile goes on: the new methods log into it too
                self._native = self._from(self._source, self._verify, self._data_path, self._profile)
            self._in_place = ()

    def close(self) -> None:
        native, self._native = self._native, None
        if native is not None:
            self._closed_plan = native.last_plan()

    def _require(self):
        if self._native is None:
            raise RunnerError("this Runner was closed; create a new one")
        return self._native

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
