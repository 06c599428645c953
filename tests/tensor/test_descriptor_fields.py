"""describe(): every field is read back from the ExecuTorch tensor and agrees with torch."""

import pytest
import torch

from et_tensorrt import TensorDescriptor, UnsupportedDtypeError, describe

SUPPORTED_DTYPES = [
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.complex32,
    torch.complex64,
    torch.complex128,
    torch.bool,
    torch.bfloat16,
    torch.float8_e5m2,
    torch.float8_e4m3fn,
    torch.float8_e5m2fnuz,
    torch.float8_e4m3fnuz,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bits8,
    torch.bits16,
]


def assert_matches(desc, t):
    assert isinstance(desc, TensorDescriptor)
    assert desc.device == t.device
    assert desc.dtype == t.dtype
    assert desc.sizes == tuple(t.shape)
    assert desc.numel == t.numel()
    assert desc.nbytes == t.numel() * t.element_size()
    assert desc.data_ptr == t.data_ptr()
    # Size-1 dims address nothing: their strides are normalized; every other stride is torch's.
    assert [s for s, n in zip(desc.strides, t.shape) if n != 1] == [s for s, n in zip(t.stride(), t.shape) if n != 1]


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_every_dtype_executorch_models(dtype):
    t = torch.empty((2, 3), dtype=dtype)
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.dim_order == (0, 1)


@pytest.mark.parametrize(
    "dtype, name",
    [
        (torch.int4, "Int4"),
        (torch.uint4, "UInt4"),
        (torch.float8_e8m0fnu, "Float8_e8m0fnu"),
        (torch.float4_e2m1fn_x2, "Float4_e2m1fn_x2"),
    ],
    ids=str,
)
def test_dtypes_executorch_lacks_are_refused_by_name(dtype, name):
    t = torch.empty((4,), dtype=torch.uint8).view(dtype)
    with pytest.raises(UnsupportedDtypeError, match=rf"dtype {name} has no ExecuTorch ScalarType"):
        describe(t)


def test_contiguous():
    t = torch.randn(2, 3, 4)
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.dim_order == (0, 1, 2)
    assert desc.strides == (12, 4, 1)


def test_channels_last():
    t = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.dim_order == (0, 2, 3, 1)
    assert desc.strides == t.stride()


def test_permutation_is_expressed_as_dim_order():
    t = torch.randn(3, 4, 5).permute(2, 0, 1)  # sizes (5, 3, 4), strides (1, 20, 5)
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.dim_order == (1, 2, 0)
    assert desc.strides == (1, 20, 5)


def test_dense_narrow_view_points_at_its_offset():
    base = torch.randn(6, 4)
    t = base[2:5]
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.data_ptr == base.data_ptr() + 2 * 4 * 4


def test_zero_dim():
    t = torch.tensor(3.5)
    desc = describe(t)
    assert_matches(desc, t)
    assert desc.sizes == () and desc.strides == () and desc.dim_order == ()
    assert desc.numel == 1 and desc.nbytes == 4


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 5)])
def test_empty(shape):
    t = torch.empty(shape)
    desc = describe(t)
    assert desc.sizes == shape
    assert desc.numel == 0 and desc.nbytes == 0
    assert desc.dim_order == tuple(range(len(shape)))


def test_size_one_dims_in_channels_last():
    t = torch.randn(2, 1, 4, 4).to(memory_format=torch.channels_last)
    assert_matches(describe(t), t)


def test_repr_is_readable():
    text = repr(describe(torch.zeros(2, 3, dtype=torch.int32)))
    assert text.startswith("TensorDescriptor(device=cpu, dtype=Int, sizes=(2, 3), dim_order=(0, 1), nbytes=24")


def test_fields_are_read_only():
    desc = describe(torch.zeros(2))
    with pytest.raises(AttributeError):
        desc.sizes = (3,)
