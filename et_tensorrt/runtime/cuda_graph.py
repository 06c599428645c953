"""A delegate's call replayed as a CUDA graph (``BuildOptions.cuda_graph``; ExecuTorch's CUDA backend calls it
``enable_cuda_graph_for_method``): a decode step is many small kernels, and launching them one by one from Python
costs more than running them.

A graph replays the kernels it captured with the addresses they were captured with. What keeps those fixed:

- **inputs**: the delegate copies each into a buffer it reuses while the shape stays (the plan says ``copy fixed``:
  a decode step's token and position, a few bytes), so the caller's own pointers need not repeat;
- **results**: the executor's own buffers (captured with the graph), copied into the caller's memory by the
  delegate right after (``copy result``: the logits);
- **state** (a KV cache): the loaded program's tensors, allocated once, never moved while it is loaded
  (``Runner.reset`` loads the methods again: new delegates, new graphs); a state the TensorRT executor would
  double-buffer is pinned instead (``pin_states``: copied back after each call, as the plan says).

A graph is captured per call signature (shapes, size values, input addresses) after that signature ran
:data:`WARMUP_CALLS` times eagerly (TensorRT sets itself up for new shapes on its first enqueue), and at most
:data:`MAX_GRAPHS` are kept: a prefill whose length changes every call runs eagerly past them. A capture that
fails (an operation that synchronizes with the host, a TensorRT that cannot be captured) leaves the executor
eager for good, saying why (``graph_state``); nothing is computed twice and nothing is skipped: the call whose
capture failed runs eagerly.

``ET_TENSORRT_CUDA_GRAPH``: unset, as lowered; ``on``, every delegate on a CUDA device; ``off``, none.
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger("et_tensorrt")

CUDA_GRAPH_ENV = "ET_TENSORRT_CUDA_GRAPH"
WARMUP_CALLS = 1
MAX_GRAPHS = 4
FIXED_ADDRESSES = "a CUDA graph reads and writes the addresses it was captured with"


def policy(lowered: bool) -> bool:
    """Whether a delegate lowered with ``cuda_graph=lowered`` replays its calls as a graph here."""
    value = os.environ.get(CUDA_GRAPH_ENV, "").strip().lower()
    if value in ("", "default"):
        return lowered
    if value in ("1", "on", "true", "yes"):
        return True
    if value in ("0", "off", "false", "no"):
        return False
    raise ValueError(f"{CUDA_GRAPH_ENV}={value!r} is not one of on, off (or unset: as the program was lowered)")


def _signature(inputs) -> tuple:
    return tuple(("size", v) if isinstance(v, int) else (v.data_ptr(), tuple(v.shape), v.dtype) for v in inputs)


class _Graph:
    def __init__(self, graph, results: list[torch.Tensor]):
        self.graph, self.results = graph, results


class GraphedExecutor:
    """Wraps a TensorRT or PyTorch executor on a CUDA device; the C++ delegate reads ``fixed_addresses`` (its
    inputs staged, its results copied) and calls :meth:`run`."""

    writes_in_place = False  # results are the graph's own buffers
    native = None  # every call goes through run(): the PyTorch executor's C++ interpreter cannot be captured
    fixed_addresses = FIXED_ADDRESSES

    def __init__(self, executor, graphs=None):
        self._executor = executor
        if hasattr(executor, "pin_states"):  # a double-buffered state would move under the captured addresses
            executor.pin_states()
        self._graphs: dict[tuple, _Graph] = {}
        self._eager_calls: dict[tuple, int] = {}
        self._pool = None  # one memory pool for this delegate's graphs
        self._torch_cuda = graphs or torch.cuda  # CUDAGraph, graph, graph_pool_handle (tests stand in for them)
        self.replays = 0
        self.captures = 0
        self.disabled = ""  # why calls run eagerly for good

    def __getattr__(self, name):  # device, kind, reason, state, state_updates, origin, engine_key, close
        return getattr(self._executor, name)

    @property
    def path(self) -> str:  # read once by the delegate, for every plan: what it does, not how far it got
        return f"{getattr(self._executor, 'path', self._executor.kind)}, replayed as a CUDA graph"

    @property
    def graph_state(self) -> str:
        if self.disabled:
            return f"eager: {self.disabled}"
        return f"CUDA graph ({self.captures} captured, {self.replays} replays)"

    def run(self, inputs, outputs):
        nothing = [None] * len(outputs)  # the executor writes its own buffers: they are the graph's
        if self.disabled:
            return self._executor.run(inputs, nothing)
        key = _signature(inputs)
        held = self._graphs.get(key)
        if held is not None:
            held.graph.replay()
            self.replays += 1
            return held.results
        seen = self._eager_calls.get(key, 0)
        if seen < WARMUP_CALLS or len(self._graphs) >= MAX_GRAPHS:
            if len(self._eager_calls) < 64 * MAX_GRAPHS:  # bounded: a prefill of every length is not remembered
                self._eager_calls[key] = seen + 1
            return self._executor.run(inputs, nothing)
        return self._capture(key, inputs, nothing)

    def _capture(self, key: tuple, inputs, nothing):
        cuda = self._torch_cuda
        graph = cuda.CUDAGraph()
        if self._pool is None:
            self._pool = cuda.graph_pool_handle()
        try:
            # Captured on a side stream: nothing runs yet (the executor enqueues on the current stream, which
            # torch makes the capturing one).
            with cuda.graph(graph, pool=self._pool):
                results = self._executor.run(inputs, nothing)
        except Exception as e:  # this call runs eagerly, and every later one
            self.disabled = f"the call could not be captured as a CUDA graph ({type(e).__name__}: {e})"
            log.warning("et_tensorrt: %s; it runs without one", self.disabled)
            return self._executor.run(inputs, nothing)
        graph.replay()  # this call's work
        self._graphs[key] = _Graph(graph, list(results))
        self._eager_calls.pop(key, None)
        self.captures += 1
        return self._graphs[key].results

    def close(self) -> None:
        self._graphs.clear()
        self._executor.close()
