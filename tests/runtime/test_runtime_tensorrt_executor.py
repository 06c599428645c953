"""The TensorRT executor's per-call path, against a fake TensorRT context (no GPU here): input shapes are
set only when they change, every call binds the addresses it is given, outputs the delegate cannot share go
to buffers reused while their shape stays the same, and the engine runs on torch's current stream."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from et_tensorrt.format import blob as B
from et_tensorrt.format.dtypes import scalar_type_code
from et_tensorrt.runtime import executors


class FakeContext:
    def __init__(self):
        self.calls = []
        self.shapes = {}

    def set_input_shape(self, name, shape):
        self.calls.append(("shape", name, shape))
        self.shapes[name] = shape

    def get_tensor_shape(self, name):
        return (self.shapes["x"][0], 4)  # the engine's output: (batch, 4)

    def set_tensor_address(self, name, address):
        self.calls.append(("address", name, address))

    def execute_async_v3(self, stream):
        self.calls.append(("execute", stream))
        return True


def _executor(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: SimpleNamespace(cuda_stream=1234))
    io = [
        B.IOEntry(B.ROLE_INPUT, "x", B.scalar_type_code(torch.float32), (B.DimRange(1, 2, 8), B.DimRange.static(8))),
        B.IOEntry(B.ROLE_OUTPUT, "y", B.scalar_type_code(torch.float32), (B.DimRange(1, 2, 8), B.DimRange.static(4))),
    ]
    blob = B.Blob(io=io, program=b"")
    context = FakeContext()
    engine = SimpleNamespace(create_execution_context=lambda: context, num_optimization_profiles=1)
    # The host stands in for cuda:0: the per-call logic is the same, the buffers are allocated where it says.
    return executors.TensorRTExecutor(blob, torch.device("cpu"), engine), context


def test_shapes_set_once_addresses_every_call_buffers_reused(monkeypatch):
    executor, context = _executor(monkeypatch)
    x1, x2 = torch.randn(2, 8), torch.randn(2, 8)
    (y1,) = executor.run([x1], [None])
    (y2,) = executor.run([x2], [None])
    shapes = [c for c in context.calls if c[0] == "shape"]
    assert shapes == [("shape", "x", (2, 8))]  # the second call has the same shape: not set again
    addresses = [c[2] for c in context.calls if c[0] == "address" and c[1] == "x"]
    assert addresses == [x1.data_ptr(), x2.data_ptr()]
    assert y1.data_ptr() == y2.data_ptr() and y1.shape == (2, 4)  # one reused output buffer
    assert [c for c in context.calls if c[0] == "execute"] == [("execute", 1234)] * 2


def test_a_new_shape_resets_the_shapes_and_the_buffer(monkeypatch):
    executor, context = _executor(monkeypatch)
    (y1,) = executor.run([torch.randn(2, 8)], [None])
    (y2,) = executor.run([torch.randn(5, 8)], [None])
    assert [c for c in context.calls if c[0] == "shape"] == [("shape", "x", (2, 8)), ("shape", "x", (5, 8))]
    assert y2.shape == (5, 4) and y2.data_ptr() != y1.data_ptr()


def test_a_shared_output_is_written_in_place(monkeypatch):
    executor, context = _executor(monkeypatch)
    out = torch.empty(2, 4)
    (y,) = executor.run([torch.randn(2, 8)], [out])
    assert y is out
    assert ("address", "y", out.data_ptr()) in context.calls


# ------------------------------------------------------------------ state (the blob's STATE table)


class StatefulContext(FakeContext):
    """A KV cache 'k' whose engine output 'k_out' aliases it, and a counter 'n' returned as 'n_out'."""

    def get_tensor_shape(self, name):
        return {"y": (self.shapes["x"][0], 4), "k_out": (1, 1, 8, 2), "n_out": (1,)}[name]

    def execute_async_v3(self, stream):
        super().execute_async_v3(stream)
        self.ran = True
        return True


def _stateful(monkeypatch, aliases=True):
    from et_tensorrt.format import state_table as S

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: SimpleNamespace(cuda_stream=1))
    io = [
        B.IOEntry(B.ROLE_INPUT, "x", B.scalar_type_code(torch.float32), (B.DimRange.static(2), B.DimRange.static(8))),
        B.IOEntry(B.ROLE_OUTPUT, "y", B.scalar_type_code(torch.float32), (B.DimRange.static(2), B.DimRange.static(4))),
    ]
    states = [
        S.StateEntry(
            "k_cache",
            scalar_type_code(torch.float32),
            (1, 1, 8, 2),
            "k",
            "k_out",
            S.UPDATE_IN_PLACE,
            None,
            position_input=0,
        ),
        S.StateEntry("count", scalar_type_code(torch.int64), (1,), "n", "n_out", S.UPDATE_WRITE_BACK, None),
    ]
    context = StatefulContext()
    names = ["x", "k", "n", "y", "k_out", "n_out"]
    engine = SimpleNamespace(
        create_execution_context=lambda: context,
        num_optimization_profiles=1,
        num_io_tensors=len(names),
        get_tensor_name=names.__getitem__,
        get_aliased_input_tensor=lambda name: ("k" if aliases else None) if name == "k_out" else None,
    )
    blob = B.Blob(io=io, program=b"", states=states)
    return executors.TensorRTExecutor(blob, torch.device("cpu"), engine), context


def test_an_in_place_state_is_one_buffer_bound_to_its_input_and_aliased_output(monkeypatch):
    executor, context = _stateful(monkeypatch)
    cache = executor.state["k_cache"]
    executor.run([torch.randn(2, 8)], [None])
    executor.run([torch.randn(2, 8)], [None])
    bound = {(c[1], c[2]) for c in context.calls if c[0] == "address"}
    assert ("k", cache.data_ptr()) in bound and ("k_out", cache.data_ptr()) in bound
    assert executor.state["k_cache"] is cache  # kept across calls: allocated once
    assert executor.state_updates == {"k_cache": "in place", "count": "double-buffered"}
    assert ("shape", "k", (1, 1, 8, 2)) in context.calls


def _addresses(context, name):
    return [c[2] for c in context.calls if c[:2] == ("address", name)]


def test_a_write_back_state_is_double_buffered_nothing_copied(monkeypatch):
    executor, context = _stateful(monkeypatch)
    first = executor.state["count"]
    executor.run([torch.randn(2, 8)], [None])
    second = executor.state["count"]  # the buffer the engine wrote: the state now
    assert second is not first and _addresses(context, "n_out") == [second.data_ptr()]
    executor.run([torch.randn(2, 8)], [None])
    assert executor.state["count"] is first  # the two trade places every call
    assert _addresses(context, "n") == [first.data_ptr(), second.data_ptr()]
    assert _addresses(context, "n_out") == [second.data_ptr(), first.data_ptr()]


def test_a_pinned_state_is_copied_from_its_output_after_the_call(monkeypatch):
    executor, context = _stateful(monkeypatch)
    executor.pin_states()  # what a CUDA graph does: its replays read and write the captured addresses
    assert executor.state_updates == {"k_cache": "in place", "count": "copied back"}
    counter = executor.state["count"]
    executor.run([torch.randn(2, 8)], [None])
    assert _addresses(context, "n_out")[0] != counter.data_ptr()
    buffer = executor._states[1]._buffer
    buffer.fill_(7)  # what the (fake) engine would have written: the call copies it into the state after running
    executor.run([torch.randn(2, 8)], [None])
    assert counter.item() == 7 and executor.state["count"] is counter


def test_an_engine_that_does_not_alias_the_cache_copies_it_back_and_says_so(monkeypatch):
    executor, context = _stateful(monkeypatch, aliases=False)
    assert executor.state_updates["k_cache"] == "copied back"
    executor.run([torch.randn(2, 8)], [None])
    k_out = [c[2] for c in context.calls if c[:2] == ("address", "k_out")][0]
    assert k_out != executor.state["k_cache"].data_ptr()


def test_two_executors_of_one_blob_own_separate_state(monkeypatch):
    first, _ = _stateful(monkeypatch)
    second, _ = _stateful(monkeypatch)
    assert first.state["k_cache"].data_ptr() != second.state["k_cache"].data_ptr()
