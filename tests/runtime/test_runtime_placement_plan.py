"""Placement decisions for every (descriptor device, execution device) pair, on a real lowered blob.

``_C.plan_placement`` runs the same C++ planner the delegate runs per call; it moves no data. CUDA
descriptors are CPU tensors relabelled with ``_C._relabel`` (labels only: no copy is executed, so no
GPU is needed). The blob is the MLP's delegate blob read out of its ``.pte``: one float32 input of
static shape (2, 8) and one float32 output (2, 4).
"""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.format import _reader
from et_tensorrt.format import blob as B

CPU, CUDA0, CUDA1 = torch.device("cpu"), torch.device("cuda:0"), torch.device("cuda:1")


def desc(t: torch.Tensor, device: torch.device = CPU):
    d = et_tensorrt.describe(t)
    return d if device == CPU else _C._relabel(d, device)


def plan(blob, x, out, execution_device, x_device=CPU, out_device=CPU, *, executor="tensorrt", writes_in_place=True):
    return _C.plan_placement(
        blob, [desc(x, x_device)], [desc(out, out_device)], execution_device, executor, writes_in_place
    )


@pytest.fixture
def x():
    return torch.randn(2, 8)


@pytest.fixture
def out():
    return torch.empty(2, 4)


def test_the_blob_is_the_mlps(mlp_blob):
    parsed = _reader.parse_blob(mlp_blob)
    assert [i["dtype"] for i in parsed["inputs"]] == [6]  # ExecuTorch's Float: the reader returns codes
    assert parsed["inputs"][0]["dims"] == [(2, 2, 2), (8, 8, 8)]
    assert parsed["outputs"][0]["dims"] == [(2, 2, 2), (4, 4, 4)]
    assert parsed["execution_device"] == (B.DEVICE_CUDA, 0)


def test_relabel_changes_the_label_only(x):
    d = desc(x, CUDA1)
    assert d.device == CUDA1
    assert d.data_ptr == x.data_ptr()
    assert (d.sizes, d.dim_order, d.nbytes) == ((2, 8), (0, 1), 64)
    assert desc(x).device == CPU


@pytest.mark.parametrize("device", [CPU, CUDA0], ids=["cpu", "cuda0"])
def test_share_on_the_execution_device(mlp_blob, x, out, device):
    p = plan(mlp_blob, x, out, device, device, device)
    assert p.ok
    assert [(e.action, e.bytes, e.reason) for e in p.inputs + p.outputs] == [("share", 0, ""), ("share", 0, "")]
    assert p.inputs[0].data_ptr == x.data_ptr()
    assert p.outputs[0].data_ptr == out.data_ptr()
    assert (p.inputs[0].source, p.inputs[0].destination) == (device, device)
    assert p.bytes_copied == 0
    assert p.execution_device == device and p.executor == "tensorrt"


def test_host_input_is_copied_host_to_device(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CPU, CUDA0)
    e = p.inputs[0]
    assert (e.action, e.source, e.destination, e.bytes) == ("copy h2d", CPU, CUDA0, 64)
    assert "host memory" in e.reason
    assert p.outputs[0].action == "share"
    assert p.bytes_copied == 64


def test_other_gpu_input_is_copied_device_to_device(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CUDA1, CUDA0)
    e = p.inputs[0]
    assert (e.action, e.source, e.destination, e.bytes) == ("copy d2d", CUDA1, CUDA0, 64)
    assert "cuda:1" in e.reason and "cuda:0" in e.reason


def test_host_output_is_copied_device_to_host(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CUDA0, CPU)
    e = p.outputs[0]
    assert (e.action, e.source, e.destination, e.bytes) == ("copy d2h", CUDA0, CPU, 32)
    assert e.role == "output" and e.index == 0
    assert p.inputs[0].action == "share"


def test_non_contiguous_dim_order_on_the_execution_device_is_copied_for_layout(mlp_blob, out):
    transposed = torch.randn(8, 2).t()  # dense, dim order (1, 0)
    p = plan(mlp_blob, transposed, out, CUDA0, CUDA0, CUDA0)
    e = p.inputs[0]
    assert (e.action, e.source, e.destination, e.bytes) == ("copy layout", CUDA0, CUDA0, 64)
    assert "dim order" in e.reason


def test_executor_that_allocates_its_results_copies_them(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CUDA0, CUDA0, executor="pytorch", writes_in_place=False)
    assert p.inputs[0].action == "share"  # inputs are still shared with a PyTorch executor
    e = p.outputs[0]
    assert (e.action, e.bytes) == ("copy result", 32)
    assert p.executor == "pytorch"


def test_bytes_copied_sums_every_copy(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CPU, CPU)  # h2d input (64 B) + d2h output (32 B)
    assert [e.action for e in p.inputs + p.outputs] == ["copy h2d", "copy d2h"]
    assert p.bytes_copied == 64 + 32
    p = plan(mlp_blob, x, out, CUDA0, CUDA1, CUDA0, executor="pytorch", writes_in_place=False)
    assert p.bytes_copied == 64 + 32  # d2d input + copied result


@pytest.mark.parametrize(
    "make_input, x_device, exec_device, fragment",
    [
        (lambda: torch.randn(2, 8, dtype=torch.float64), CPU, CPU, "dtype float64 where the engine takes float32"),
        (lambda: torch.randn(2, 8, dtype=torch.float16), CUDA0, CUDA0, "dtype float16 where the engine takes float32"),
        (lambda: torch.randn(3, 8), CPU, CUDA0, "shape (3, 8) outside the engine's range (2, 8)"),
        (lambda: torch.randn(2, 8, 1), CUDA0, CUDA0, "outside the engine's range"),
        (lambda: torch.randn(2, 8), CUDA0, CPU, "labelled cuda:0 but the partition executes on the host"),
    ],
    ids=["float64", "float16", "batch-3", "rank-3", "cuda-input-cpu-exec"],
)
def test_reject(mlp_blob, out, make_input, x_device, exec_device, fragment):
    x = make_input()
    p = plan(mlp_blob, x, out, exec_device, x_device, exec_device)
    assert not p.ok
    e = p.inputs[0]
    assert e.action == "reject"
    assert fragment in e.reason, e.reason
    assert e.data_ptr == x.data_ptr()
    assert p.bytes_copied == 0  # rejected entries copy nothing
    assert p.outputs[0].action == "share"


def test_cuda_output_with_host_execution_is_rejected(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CPU, CPU, CUDA0)
    assert not p.ok
    assert p.outputs[0].action == "reject"
    assert "output planned on cuda:0" in p.outputs[0].reason


def test_every_rejection_is_listed(mlp_blob, out):
    bad = torch.randn(3, 8, dtype=torch.float64)
    wrong_out = torch.empty(2, 5)
    p = plan(mlp_blob, bad, wrong_out, CPU)
    assert [e.action for e in p.inputs + p.outputs] == ["reject", "reject"]
    assert "dtype" in p.inputs[0].reason  # dtype is checked before shape
    assert "shape (2, 5)" in p.outputs[0].reason


@pytest.mark.parametrize("n_inputs, n_outputs", [(0, 1), (2, 1), (1, 0), (1, 2)])
def test_count_mismatch_raises_placement_error(mlp_blob, n_inputs, n_outputs):
    inputs = [desc(torch.randn(2, 8)) for _ in range(n_inputs)]
    outputs = [desc(torch.empty(2, 4)) for _ in range(n_outputs)]
    with pytest.raises(et_tensorrt.PlacementError, match=rf"{n_inputs} inputs and {n_outputs} outputs.*has 1 and 1"):
        _C.plan_placement(mlp_blob, inputs, outputs, CPU)


def test_damaged_blob_raises_blob_format_error(mlp_blob, x, out):
    with pytest.raises(et_tensorrt.BlobFormatError, match="magic"):
        plan(b"XTRT" + mlp_blob[4:], x, out, CPU)


def test_repr_is_readable(mlp_blob, x, out):
    p = plan(mlp_blob, x, out, CUDA0, CPU, CPU)
    assert repr(p) == (
        "PlacementPlan(executor=tensorrt, device=cuda:0, bytes_copied=96)\n"
        "  input  0: copy h2d cpu -> cuda:0, 64 B  (host memory, engine on cuda:0)\n"
        "  output 0: copy d2h cuda:0 -> cpu, 32 B  (ExecuTorch planned this output in host memory)"
    )
    assert repr(p.inputs[0]) == "<input 0: copy h2d cpu -> cuda:0>"
    shared = plan(mlp_blob, x, out, CPU)
    assert repr(shared) == (
        "PlacementPlan(executor=tensorrt, device=cpu, bytes_copied=0)\n"
        "  input  0: share cpu -> cpu\n"
        "  output 0: share cpu -> cpu"
    )
