"""Per-layer engine time (issue 52 item 3, docs/profiling.md): TensorRT's ``IProfiler`` on a TensorRT executor's
execution context, opted into at load (``Runner(..., profile="layers")``, or ``ET_TENSORRT_LAYER_PROFILE=1`` for
ExecuTorch's own runtime). After each run the delegate takes the layers' times (``take_layer_times``) and, where an
event tracer is attached, logs one ETDump event per layer, named by the layer (``extension/runtime/layer_events.h``).

TensorRT times each layer of an eager enqueue; a replayed CUDA graph (``cuda_graph.py``) has no layers to time, so
the two are refused together at load. An executor without TensorRT (the PyTorch fallback) has no layers: a profile
there shows the delegate's phases only.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator

LAYER_PROFILE_ENV = "ET_TENSORRT_LAYER_PROFILE"
CUDA_GRAPH_REFUSAL = (
    "per-layer profiling (profile='layers' or ET_TENSORRT_LAYER_PROFILE=1) cannot be combined with CUDA-graph "
    "replay: TensorRT's IProfiler times the layers of an eager enqueue, and a replayed graph runs none; load with "
    "ET_TENSORRT_CUDA_GRAPH=off (or a program lowered without cuda_graph), or profile without layers"
)

_policy: contextvars.ContextVar[bool | None] = contextvars.ContextVar("et_tensorrt_layer_profile", default=None)


def enabled() -> bool:
    """Whether a TensorRT executor loading now gets a layer profiler: the Runner's choice while it loads, else
    ``ET_TENSORRT_LAYER_PROFILE`` (1/on; unset: off)."""
    chosen = _policy.get()
    if chosen is not None:
        return chosen
    value = os.environ.get(LAYER_PROFILE_ENV, "").strip().lower()
    if value in ("", "0", "off", "false", "no"):
        return False
    if value in ("1", "on", "true", "yes"):
        return True
    raise ValueError(f"{LAYER_PROFILE_ENV}={value!r} is not one of on, off (or unset: off)")


@contextlib.contextmanager
def policy(on: bool | None) -> Iterator[None]:
    """Layer profiling for the executors loaded inside the block (None: as the environment says)."""
    token = _policy.set(on)
    try:
        yield
    finally:
        _policy.reset(token)


class LayerTimes:
    """The layer times of the executor's last run, in the order TensorRT reported them."""

    def __init__(self):
        self._times: list[tuple[str, float]] = []

    def start_run(self) -> None:
        """A new run: the last one's times go (an untraced call's would otherwise pile up)."""
        self._times.clear()

    def report(self, layer: str, ms: float) -> None:
        self._times.append((layer, float(ms)))

    def take(self) -> list[tuple[str, float]]:
        """(layer name, milliseconds) of the last run; empty until the next run."""
        times, self._times = self._times, []
        return times


_PROFILER_CLASSES: dict[str, type] = {}


def profiler(trt_module, times: LayerTimes):
    """An instance of ``trt_module.IProfiler`` that reports into ``times`` (TensorRT calls ``report_layer_time``
    once per layer of each run)."""
    base = trt_module.IProfiler
    cls = _PROFILER_CLASSES.get(trt_module.__name__)
    if cls is None:

        class _Profiler(base):
            def __init__(self, sink: LayerTimes):
                base.__init__(self)  # TensorRT's bindings need their base initialised explicitly
                self.sink = sink

            def report_layer_time(self, layer_name, ms):
                self.sink.report(layer_name, ms)

        cls = _PROFILER_CLASSES[trt_module.__name__] = _Profiler
    return cls(times)


def trt_module_of(engine):
    """The TensorRT module (either flavour's bindings) whose engine this is: its ``IProfiler`` is the one its
    contexts take."""
    module = sys.modules.get(type(engine).__module__)
    if module is None or not hasattr(module, "IProfiler"):
        raise TypeError(f"{type(engine).__module__}.{type(engine).__name__} is no TensorRT engine (no IProfiler)")
    return module


def attach(context, trt_module) -> tuple[LayerTimes, object]:
    """Puts a layer profiler on ``context``: (its times, the profiler, which the caller keeps alive)."""
    times = LayerTimes()
    made = profiler(trt_module, times)
    context.profiler = made
    return times, made
