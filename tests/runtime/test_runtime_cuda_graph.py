"""A delegate's call replayed as a CUDA graph (runtime/cuda_graph.py), without a GPU: a stand-in for
``torch.cuda``'s graph API that behaves like one (a capture records the engine's launches and runs nothing; a replay
runs them again at the addresses they were recorded with) drives the real TensorRTExecutor over a fake engine that
computes from the addresses it is bound to. The C++ delegate's side (inputs staged into buffers it reuses, results
copied out, both said in the plan) runs for real."""

from __future__ import annotations

import contextlib
import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.format import blob as B
from et_tensorrt.format import state_table as S
from et_tensorrt.format.dtypes import scalar_type_code
from et_tensorrt.runtime import cuda_graph, executors


def _floats(address: int, n: int) -> torch.Tensor:
    return torch.from_numpy(np.ctypeslib.as_array((ctypes.c_float * n).from_address(address)))


class FakeCuda:
    """``torch.cuda``'s CUDAGraph / graph / graph_pool_handle, for the engine below."""

    def __init__(self, fail: str = ""):
        self.capturing = None
        self.fail = fail

    class CUDAGraph:
        def __init__(self):
            self.launches = []

        def replay(self):
            for launch in self.launches:
                launch()

    def graph_pool_handle(self):
        return "pool"

    @contextlib.contextmanager
    def graph(self, graph, pool=None):
        if self.fail:
            raise RuntimeError(self.fail)
        self.capturing = graph
        try:
            yield
        finally:
            self.capturing = None


class AccumulatingContext:
    """An engine with a state updated in place: ``total += x`` then ``y = 2 * total`` (one float each)."""

    def __init__(self, cuda: FakeCuda):
        self.cuda, self.addresses, self.launched = cuda, {}, 0

    def set_input_shape(self, name, shape):
        pass

    def get_tensor_shape(self, name):
        return (1,)

    def set_tensor_address(self, name, address):
        self.addresses[name] = address

    def execute_async_v3(self, stream):
        bound = dict(self.addresses)  # what a graph records: the addresses of this launch

        def launch():
            self.launched += 1
            total = _floats(bound["t"], 1) + _floats(bound["x"], 1)
            _floats(bound["t_out"], 1).copy_(total)
            _floats(bound["y"], 1).copy_(2 * total)

        if self.cuda.capturing is not None:
            self.cuda.capturing.launches.append(launch)
        else:
            launch()
        return True


def _graphed(monkeypatch, fail: str = ""):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: SimpleNamespace(cuda_stream=1))
    f32 = B.scalar_type_code(torch.float32)
    io = [
        B.IOEntry(B.ROLE_INPUT, "x", f32, (B.DimRange.static(1),)),
        B.IOEntry(B.ROLE_OUTPUT, "y", f32, (B.DimRange.static(1),)),
    ]
    states = [S.StateEntry("total", scalar_type_code(torch.float32), (1,), "t", "t_out", S.UPDATE_IN_PLACE, None)]
    cuda = FakeCuda(fail)
    context = AccumulatingContext(cuda)
    names = ["x", "t", "y", "t_out"]
    engine = SimpleNamespace(
        create_execution_context=lambda: context,
        num_optimization_profiles=1,
        num_io_tensors=len(names),
        get_tensor_name=names.__getitem__,
        get_aliased_input_tensor=lambda name: "t" if name == "t_out" else None,
    )
    blob = B.Blob(io=io, program=b"", states=states)
    executor = executors.TensorRTExecutor(blob, torch.device("cpu"), engine)
    return cuda_graph.GraphedExecutor(executor, graphs=cuda), context


def test_captured_after_one_eager_call_then_replayed_reading_the_staged_input_each_time(monkeypatch):
    graphed, context = _graphed(monkeypatch)
    staged = torch.zeros(1)  # the delegate's reused input buffer: one address, new contents every call
    results = []
    for value in (1.0, 2.0, 3.0, 4.0, 5.0):
        staged.fill_(value)
        (y,) = graphed.run([staged], [None])
        results.append(float(y))
    assert results == [2.0, 6.0, 12.0, 20.0, 30.0]  # 2 * running total: each call updated the state once
    assert float(graphed.state["total"]) == 15.0
    assert (graphed.captures, graphed.replays, context.launched) == (1, 3, 5)
    assert graphed.graph_state == "CUDA graph (1 captured, 3 replays)"


def test_an_input_at_another_address_is_captured_again(monkeypatch):
    graphed, _ = _graphed(monkeypatch)
    first, second = torch.ones(1), torch.ones(1)
    outputs = [float(graphed.run([x], [None])[0]) for x in (first, first, second, second, first)]
    assert outputs == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert (graphed.captures, graphed.replays) == (2, 1)


def test_past_the_graph_limit_calls_run_eagerly(monkeypatch):
    graphed, _ = _graphed(monkeypatch)
    inputs = [torch.ones(1) for _ in range(cuda_graph.MAX_GRAPHS + 2)]
    for x in inputs:
        graphed.run([x], [None])
        graphed.run([x], [None])
    assert graphed.captures == cuda_graph.MAX_GRAPHS
    assert float(graphed.state["total"]) == 2.0 * len(inputs)


def test_a_capture_that_fails_leaves_the_executor_eager_and_says_why(monkeypatch):
    graphed, context = _graphed(monkeypatch, fail="operation not permitted when stream is capturing")
    x = torch.ones(1)
    outputs = [float(graphed.run([x], [None])[0]) for _ in range(4)]
    assert outputs == [2.0, 4.0, 6.0, 8.0] and context.launched == 4
    assert graphed.captures == 0
    assert graphed.graph_state.startswith("eager: the call could not be captured as a CUDA graph (RuntimeError")


def test_the_policy_follows_the_lowering_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(cuda_graph.CUDA_GRAPH_ENV, raising=False)
    assert cuda_graph.policy(True) and not cuda_graph.policy(False)
    monkeypatch.setenv(cuda_graph.CUDA_GRAPH_ENV, "off")
    assert not cuda_graph.policy(True)
    monkeypatch.setenv(cuda_graph.CUDA_GRAPH_ENV, "on")
    assert cuda_graph.policy(False)
    monkeypatch.setenv(cuda_graph.CUDA_GRAPH_ENV, "sometimes")
    with pytest.raises(ValueError, match="ET_TENSORRT_CUDA_GRAPH='sometimes' is not one of on, off"):
        cuda_graph.policy(True)


def test_the_plan_says_inputs_are_staged_and_results_copied_for_a_graph(mlp_blob):
    cuda = torch.device("cuda", 0)
    x = _C._relabel(et_tensorrt.describe(torch.randn(2, 8)), cuda)
    out = _C._relabel(et_tensorrt.describe(torch.empty(2, 4)), cuda)
    plan = _C.plan_placement(
        mlp_blob, [x], [out], cuda, "tensorrt", False, reads_in_place=False, fixed_addresses=cuda_graph.FIXED_ADDRESSES
    )
    assert (plan.inputs[0].action, plan.inputs[0].bytes) == ("copy fixed", 64)
    assert (plan.outputs[0].action, plan.outputs[0].bytes) == ("copy result", 32)
    assert plan.inputs[0].reason == plan.outputs[0].reason == cuda_graph.FIXED_ADDRESSES
    assert plan.bytes_copied == 96


class _FixedAddresses:
    """What the delegate sees of a graphed executor (``fixed_addresses``), around the MLP's PyTorch executor; it
    records the address of each input it is handed."""

    fixed_addresses = cuda_graph.FIXED_ADDRESSES
    writes_in_place = False
    native = None

    def __init__(self, executor):
        self._executor, self.addresses = executor, []

    def __getattr__(self, name):
        return getattr(self._executor, name)

    def run(self, inputs, outputs):
        self.addresses.append(inputs[0].data_ptr())
        return self._executor.run(inputs, outputs)


def test_the_delegate_stages_each_input_into_one_buffer_for_a_graphed_executor(monkeypatch, mlp_tester):
    made = []
    real = executors.pytorch_executor

    def wrapped(parsed, device, reason):
        made.append(_FixedAddresses(real(parsed, device, reason)))
        return made[-1]

    monkeypatch.setattr(executors, "pytorch_executor", wrapped)
    runner = et_tensorrt.Runner(mlp_tester.pte)
    inputs = [torch.randn(2, 8) for _ in range(3)]
    for x in inputs:  # three caller tensors, three addresses
        (y,) = runner.run([x])
        torch.testing.assert_close(y, mlp_tester.expected([x])[0])
    (executor,) = made
    assert len(set(executor.addresses)) == 1 and executor.addresses[0] not in {x.data_ptr() for x in inputs}
    delegate = runner.last_plans[0]
    assert (delegate.inputs[0].action, delegate.inputs[0].reason) == ("copy fixed", cuda_graph.FIXED_ADDRESSES)
    assert (delegate.outputs[0].action, delegate.outputs[0].reason) == ("copy result", cuda_graph.FIXED_ADDRESSES)
