"""Every bad input the descriptor layer, the blob reader and the executor factory handle: the typed
error each raises (docs/reliability.md lists them), and that the next valid call still succeeds.

Runner-level rows (closed runner, shape/dtype mismatch at run, damaged .pte, TensorRT missing through
the whole stack) are in test_reliability_runner.py.
"""

import gc
import re
import sys
import weakref
from pathlib import Path

import blob_fixtures as F
import pytest
import torch
from dtypes import REFUSED_DTYPES

import et_tensorrt
from et_tensorrt import _C, describe, describe_inputs
from et_tensorrt.errors import (
    BlobFormatError,
    LayoutError,
    PlacementError,
    UnsupportedDeviceError,
    UnsupportedDtypeError,
)
from et_tensorrt.format import _reader

ROOT = Path(__file__).resolve().parents[2]


def valid_call_succeeds():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    d = describe(t)
    assert d.sizes == (2, 3) and d.data_ptr == t.data_ptr()


# --------------------------------------------------------------------------------- device / dtype


@pytest.mark.parametrize("device", ["meta"])
def test_unmodeled_device_is_refused(device):
    t = torch.empty(3, device=device)
    with pytest.raises(UnsupportedDeviceError, match="not modelled"):
        describe(t)
    with pytest.raises(UnsupportedDeviceError, match=r"input 1 of method 'forward' is on device meta"):
        describe_inputs([torch.zeros(2), t])
    with pytest.raises(UnsupportedDeviceError):
        et_tensorrt.translate_device("meta")
    with pytest.raises(UnsupportedDeviceError):
        et_tensorrt.translate_device("not-a-device")
    valid_call_succeeds()


@pytest.mark.parametrize("dtype", REFUSED_DTYPES, ids=str)
def test_each_refused_dtype(dtype):
    with pytest.raises(UnsupportedDtypeError, match="has no ExecuTorch ScalarType"):
        describe(torch.empty(4, dtype=dtype))
    valid_call_succeeds()


# -------------------------------------------------------------------------------------- layouts

BASE = torch.arange(24, dtype=torch.float32)
REFUSED_LAYOUTS = {
    "expanded": (lambda: torch.ones(3, 1).expand(3, 4), "expanded"),
    "stepped_slice": (lambda: BASE.reshape(4, 6)[:, ::2], "gaps"),
    "narrowed_rows": (lambda: BASE.reshape(4, 6)[:, :3], "gaps"),
    "overlapping": (lambda: torch.as_strided(BASE, (3, 4), (2, 1)), "overlapping"),
    "sparse_coo": (lambda: torch.eye(3).to_sparse(), "not strided"),
    "sparse_csr": (lambda: torch.eye(3).to_sparse_csr(), "not strided"),
    "conj_bit": (lambda: torch.ones(3, dtype=torch.complex64).conj(), "conjugate"),
    "neg_bit": (lambda: torch._neg_view(torch.ones(3)), "negative"),
    "rank_17": (lambda: torch.ones([1] * 17), "rank 17"),
    "size_over_int32": (lambda: torch.empty(0, 2**31), "32-bit"),
    "empty_outer_stride_over_int32": (lambda: torch.empty(0, 2**16, 2**16), "32-bit"),
}


@pytest.mark.parametrize("name", sorted(REFUSED_LAYOUTS))
def test_each_refused_layout(name):
    make, fragment = REFUSED_LAYOUTS[name]
    with pytest.raises(LayoutError, match=fragment):
        describe(make())
    valid_call_succeeds()


def test_undefined_or_non_tensor_inputs():
    with pytest.raises(TypeError, match="input 0 of method 'forward' is a list, not a torch.Tensor"):
        describe_inputs([[1, 2]])
    with pytest.raises(TypeError):
        describe(None)
    valid_call_succeeds()


# -------------------------------------------------------------------------------- empty and 0-d


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor(3.5),  # 0-d
        lambda: torch.empty(0),
        lambda: torch.empty(2, 0, 3),
        lambda: torch.empty(0, 3).t(),  # empty with permuted strides
        lambda: torch.ones(3, 1).expand(3, 4)[:0],  # empty view of an expanded tensor: addresses nothing
        lambda: torch.as_strided(BASE, (), (), 5),  # 0-d with a storage offset
    ],
)
def test_empty_and_zero_dim_are_described(make):
    t = make()
    d = describe(t)
    assert d.sizes == tuple(t.shape) and d.numel == t.numel() and d.data_ptr == t.data_ptr()
    assert d.nbytes == t.numel() * t.element_size()
    assert sorted(d.dim_order) == list(range(t.dim()))
    valid_call_succeeds()


# ----------------------------------------------------------------------------------------- blobs


@pytest.mark.parametrize("name", sorted(F.damaged_blobs()))
def test_truncated_garbled_wrong_version_blobs(name):
    data, _ = F.damaged_blobs()[name]
    with pytest.raises(BlobFormatError, match="^delegate blob: "):
        _reader.parse_blob(data)
    assert _reader.parse_blob(F.valid_blob())["version"] == 3


def test_blob_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError):
        _reader.parse_blob("ETRT not bytes")
    assert _reader.parse_blob(bytearray(F.valid_blob()))["version"] == 3


# ------------------------------------------------------------------------- placement: shape/dtype


def _host_blob():
    from et_tensorrt.format import blob as B

    io = [
        B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange(1, 2, 4), B.DimRange.static(3))),
        B.IOEntry(B.ROLE_OUTPUT, "y", 6, (B.DimRange(1, 2, 4), B.DimRange.static(3))),
    ]
    return B.write_blob(io, graph=F.GRAPH, exec_device_type=B.DEVICE_CPU)


@pytest.mark.parametrize(
    "x, reason",
    [
        (torch.zeros(5, 3), r"shape \(5, 3\) outside the engine's range \(1..4, 3\)"),
        (torch.zeros(2, 4), r"shape \(2, 4\) outside"),
        (torch.zeros(2, 3, 1), r"shape \(2, 3, 1\) outside"),
        (torch.zeros(2, 3, dtype=torch.float64), "dtype float64 where the engine takes float32"),
    ],
)
def test_shape_or_dtype_mismatch_is_rejected_by_the_plan(x, reason):
    blob = _host_blob()
    y = torch.zeros(2, 3)
    plan = _C.plan_placement(blob, describe_inputs([x]), describe_inputs([y]), torch.device("cpu"), "pytorch", False)
    assert not plan.ok
    assert plan.inputs[0].action == "reject"
    assert re.search(reason, plan.inputs[0].reason), plan.inputs[0].reason
    good = _C.plan_placement(
        blob, describe_inputs([torch.zeros(2, 3)]), describe_inputs([y]), torch.device("cpu"), "pytorch", False
    )
    assert good.ok and good.inputs[0].action == "share"


def test_argument_count_mismatch_is_a_placement_error():
    blob = _host_blob()
    with pytest.raises(PlacementError, match="1 inputs and 0 outputs, but its engine has 1 and 1"):
        _C.plan_placement(blob, describe_inputs([torch.zeros(2, 3)]), [], torch.device("cpu"))
    plan = _C.plan_placement(
        blob, describe_inputs([torch.zeros(2, 3)]), describe_inputs([torch.zeros(2, 3)]), torch.device("cpu")
    )
    assert plan.ok


def test_cuda_label_with_host_execution_is_rejected():
    """A descriptor labelled cuda (relabelled host memory here) cannot be read by a host executor."""
    blob = _host_blob()
    x = _C._relabel(describe(torch.zeros(2, 3)), torch.device("cuda", 0))
    plan = _C.plan_placement(blob, [x], describe_inputs([torch.zeros(2, 3)]), torch.device("cpu"), "pytorch", False)
    assert not plan.ok and "its memory cannot be read" in plan.inputs[0].reason


# ------------------------------------------------------------------------------ TensorRT missing


def test_tensorrt_missing_is_reported_by_create_executor(monkeypatch):
    """With a GPU present but no TensorRT runtime importable, create_executor names the reason; with
    ET_TENSORRT_FALLBACK=error it refuses with it."""
    import et_tensorrt
    from et_tensorrt.format import blob as B
    from et_tensorrt.runtime import executors

    blob = F.valid_blob()  # cuda:0 execution, carries an ENGINE section
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)
        m.setitem(sys.modules, "et_tensorrt.trt", None)  # import fails with ImportError
        m.delattr(et_tensorrt, "trt", raising=False)
        engine, _, reason = executors._deserialize(B.read_blob(blob), torch.device("cuda", 0))
        assert engine is None and reason.startswith("no TensorRT runtime (")
        m.setenv(executors.FALLBACK_ENV, "error")
        with pytest.raises(RuntimeError, match=r"TensorRT cannot execute this partition here: no TensorRT runtime"):
            executors.create_executor(blob, cuda_devices=1)
    # Unpatched, on this machine: the reason is the missing GPU, not TensorRT.
    engine, _, reason = executors._deserialize(B.read_blob(blob), torch.device("cuda", 0))
    if not torch.cuda.is_available():
        assert engine is None and reason == "no CUDA device is available"


# ------------------------------------------------------------------------ lifetimes (no runner)


def test_placement_plan_outlives_its_blob_descriptors_and_tensors():
    """A plan stores addresses as integers and copies its reasons: it never points into the blob,
    the descriptors or the tensors, so it stays readable after all of them are gone."""
    blob = bytearray(_host_blob())
    x = torch.zeros(5, 3)
    storage = weakref.ref(x.untyped_storage())
    ins, outs = describe_inputs([x]), describe_inputs([torch.zeros(2, 3)])
    address = x.data_ptr()
    plan = _C.plan_placement(blob, ins, outs, torch.device("cpu"), "pytorch", False)
    del blob, x, ins, outs
    gc.collect()
    assert storage() is None  # the plan keeps nothing alive ...
    assert plan.inputs[0].data_ptr == address and "outside" in plan.inputs[0].reason  # ... and is intact
    assert "reject" in repr(plan)


def test_parse_blob_result_keeps_its_buffer_alive():
    """Section payloads are views of the parsed buffer (no copies): they keep it alive, and a bytearray
    cannot be resized under them; the I/O table is copied out."""
    buf = bytearray(F.valid_blob())
    parsed = _reader.parse_blob(buf)
    with pytest.raises(BufferError):
        buf.extend(b"x")
    metadata = bytes(parsed["metadata"])
    del buf
    gc.collect()
    assert bytes(parsed["metadata"]) == metadata and b"trt_flavour" in metadata
    assert [e["name"] for e in parsed["inputs"]] == ["x", "ids"]


def test_relabelled_descriptor_keeps_the_memory_alive():
    t = torch.arange(4, dtype=torch.float32)
    storage = weakref.ref(t.untyped_storage())
    d = describe(t)
    r = _C._relabel(d, torch.device("cuda", 1))
    del t, d
    gc.collect()
    assert storage() is not None and r.device == torch.device("cuda", 1)
    del r
    gc.collect()
    assert storage() is None


def test_descriptor_of_a_view_keeps_the_base_storage_alive():
    base = torch.arange(24, dtype=torch.float32)
    storage = weakref.ref(base.untyped_storage())
    view = base.reshape(4, 6)[1:3]
    d = describe(view)
    address = view.data_ptr()
    del base, view
    gc.collect()
    assert storage() is not None and d.data_ptr == address
    del d
    gc.collect()
    assert storage() is None
