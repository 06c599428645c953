"""The profile table's bookkeeping and the layer profiler's, without a lowering or a GPU (issue 52 items 3-4)."""

from __future__ import annotations

import types

import pytest
import torch

from et_tensorrt.runtime import executors, layer_profile
from et_tensorrt.runtime.profiling import ProfileTable


def test_rows_count_calls_median_total_and_bytes_in_first_seen_order():
    table = ProfileTable.from_events(
        [
            ("init", 0, 5_000, b"executor=pytorch"),
            ("input copies", 10_000, 11_000, b"bytes=64"),
            ("pytorch fallback", 11_000, 14_000, b"executor=pytorch; state_bytes=8"),
            ("input copies", 20_000, 23_000, b"bytes=64"),
            ("pytorch fallback", 23_000, 24_000, b"executor=pytorch; state_bytes=8"),
            ("input copies", 30_000, 32_000, b"bytes=0"),
        ]
    )
    assert table.names == ["init", "input copies", "pytorch fallback"]
    copies = table.row("input copies")
    assert (copies.calls, copies.median_us, copies.total_us, copies.bytes) == (3, 2.0, 6.0, 128)
    assert table.row("pytorch fallback").bytes is None  # state_bytes is not a copy of the phase
    assert table.row("init").calls == 1
    text = str(table)
    assert text.splitlines()[0].split() == ["event", "calls", "median", "us", "total", "us", "bytes"]
    assert "128" in text.splitlines()[3]
    with pytest.raises(KeyError, match="events: init, input copies, pytorch fallback"):
        table.row("tensorrt")


def test_layer_times_keep_the_last_run_only():
    times = layer_profile.LayerTimes()
    times.start_run()
    times.report("conv1", 0.5)
    times.start_run()  # an untraced run's layers do not pile up
    times.report("conv1", 0.25)
    times.report("relu", 0.125)
    assert times.take() == [("conv1", 0.25), ("relu", 0.125)]
    assert times.take() == []


def test_profiler_is_tensorrts_iprofiler_reporting_into_the_times():
    trt = pytest.importorskip("tensorrt_rtx")
    context = types.SimpleNamespace(profiler=None)
    layer_times, made = layer_profile.attach(context, trt)
    assert context.profiler is made and isinstance(made, trt.IProfiler)
    made.report_layer_time("gemm", 0.75)  # what TensorRT calls once per layer of a run
    assert layer_times.take() == [("gemm", 0.75)]


def test_layer_profile_policy_reads_the_runner_first_then_the_environment(monkeypatch):
    monkeypatch.delenv(layer_profile.LAYER_PROFILE_ENV, raising=False)
    assert not layer_profile.enabled()
    with layer_profile.policy(True):
        assert layer_profile.enabled()
    monkeypatch.setenv(layer_profile.LAYER_PROFILE_ENV, "on")
    assert layer_profile.enabled()
    with layer_profile.policy(None):
        assert layer_profile.enabled()
    monkeypatch.setenv(layer_profile.LAYER_PROFILE_ENV, "maybe")
    with pytest.raises(ValueError, match="ET_TENSORRT_LAYER_PROFILE='maybe'"):
        layer_profile.enabled()


class _FakeExecutor:
    """What _profiled asks of a TensorRT executor: its device, engine, and the two calls it may make."""

    def __init__(self):
        self.device = torch.device("cuda", 0)
        self._engine = types.SimpleNamespace()
        self.closed = False
        self.profiled_with = None

    def close(self):
        self.closed = True

    def profile_layers(self, module):
        self.profiled_with = module


def _parsed(cuda_graph: bool) -> dict:
    return {"metadata": b'{"cuda_graph": true}' if cuda_graph else b"{}"}


def test_layer_profiling_with_cuda_graph_replay_is_refused_at_load(monkeypatch):
    monkeypatch.delenv("ET_TENSORRT_CUDA_GRAPH", raising=False)
    executor = _FakeExecutor()
    with layer_profile.policy(True), pytest.raises(ValueError, match="cannot be combined with CUDA-graph replay"):
        executors._profiled(executor, _parsed(cuda_graph=True))
    assert executor.closed  # its hold on the program's engine and states goes with it


def test_layer_profiling_attaches_to_an_eager_tensorrt_executor(monkeypatch):
    monkeypatch.delenv("ET_TENSORRT_CUDA_GRAPH", raising=False)
    executor = _FakeExecutor()
    module = types.SimpleNamespace(IProfiler=object)
    monkeypatch.setattr(layer_profile, "trt_module_of", lambda engine: module)
    with layer_profile.policy(True):
        assert executors._profiled(executor, _parsed(cuda_graph=False)) is executor
    assert executor.profiled_with is module
    monkeypatch.setenv("ET_TENSORRT_CUDA_GRAPH", "off")  # the graph turned off at run time: profiling may go on
    with layer_profile.policy(True):
        assert executors._profiled(_FakeExecutor(), _parsed(cuda_graph=True)) is not None


def test_without_layer_profiling_nothing_is_attached(monkeypatch):
    monkeypatch.delenv(layer_profile.LAYER_PROFILE_ENV, raising=False)
    monkeypatch.setenv("ET_TENSORRT_CUDA_GRAPH", "off")
    executor = _FakeExecutor()
    assert executors._profiled(executor, _parsed(cuda_graph=False)) is executor
    assert executor.profiled_with is None


def test_trt_module_of_names_what_is_no_engine():
    with pytest.raises(TypeError, match="is no TensorRT engine"):
        layer_profile.trt_module_of(object())
