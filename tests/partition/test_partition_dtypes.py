"""TensorRT cannot take complex tensors and narrows float64 silently: both stay on the host."""

import torch

from et_tensorrt.partition import TensorRTPartitioner, explain
from et_tensorrt.partition.supported_ops import dtype_refusal


class ToDouble(torch.nn.Module):
    def forward(self, x):
        return (x.relu() * 2.0).double().sin()


class Complex(torch.nn.Module):
    def forward(self, x):
        c = torch.view_as_complex(x)
        return torch.view_as_real(c * c).relu()


def test_float64_refused(fake_edge, partition_recording):
    partitioner = TensorRTPartitioner(min_block_size=1)
    _, warnings = partition_recording(partitioner, fake_edge(ToDouble, lambda: (torch.empty(8, device="cuda"),)))
    report = partitioner.report
    assert report.partitions == {"et_tensorrt_0": ("aten_relu_default", "aten_mul_tensor")}
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "dim_order_ops__to_dim_order_copy_default": (
            "dtype:float64 (dim_order_ops__to_dim_order_copy_default is torch.float64)"
        ),
        "aten_sin_default": "dtype:float64 (aten_sin_default is torch.float64)",
    }
    assert warnings == []  # a dtype refusal drops no device


def test_complex_refused(fake_export):
    # explain on the torch.export program reports the edge program lowering partitions.
    report = explain(fake_export(Complex, lambda: (torch.empty(8, 2, device="cuda"),)), min_block_size=1)
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "aten_view_as_complex_copy_default": "unsupported-op (aten.view_as_complex_copy.default)",
        "aten_mul_tensor": "dtype:complex (aten_mul_tensor is torch.complex64)",
        "aten_view_as_real_copy_default": "unsupported-op (aten.view_as_real_copy.default)",
    }
    assert report.delegated == {"aten_relu_default": "et_tensorrt_0"}


def test_dtype_rules():
    assert dtype_refusal(torch.float32) is None
    assert dtype_refusal(torch.bool) is None
    assert dtype_refusal(torch.float64) == "dtype:float64"
    assert dtype_refusal(torch.complex128) == "dtype:complex"
    assert dtype_refusal(torch.uint16) == "dtype:unsupported"
