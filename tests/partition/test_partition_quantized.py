"""Quantize/dequantize nodes in the partitioner (issue 28): kept whole, partitioned with the ops they feed, and
each quantization node read once (``et_tensorrt.quantization.qdq``) into what TensorRT does with it.

No engine is built here: ``explain`` shows the decisions, ``lower`` refuses before any work.
"""

from __future__ import annotations

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed's ops)

import et_tensorrt
from et_tensorrt.partition import ReasonCode
from et_tensorrt.quantization import qdq
from et_tensorrt.testing import quantized_models as qm

qd = torch.ops.quantized_decomposed


@pytest.mark.parametrize(
    ("block_size", "shape", "expected"),
    [
        ((64, 128), (64, 128), ("tensor", None, 0)),
        ((1, 128), (64, 128), ("channel", 0, 0)),  # torchao PerAxis(0): one scale per row
        ((1, 32), (64, 128), ("block", 1, 32)),  # PerGroup(32): blocks along the input dim
        ((1, 1, 128), (2, 5, 128), ("token", None, 0)),  # 8da4w's activations: one scale per token
        ((1, 3, 3), (8, 3, 3), ("channel", 0, 0)),
        ((1, 2, 3), (8, 4, 3), ("unsupported", None, 0)),  # blocks along two dims
    ],
)
def test_affine_block_size_reads_as_a_granularity(block_size, shape, expected):
    assert qdq.affine_granularity(block_size, shape) == expected


def test_torchao_ops_stay_whole_and_go_with_the_linear_they_feed():
    """torchao's affine ops are CompositeImplicitAutograd: without ops_to_not_decompose they would reach the
    partitioner as arithmetic. They reach it whole, and the weight DQ, the dropped dynamic activation chain and
    the linear layers are one partition."""
    torch.manual_seed(0)
    model = qm.quantize_torchao(qm.Mlp().eval(), "8da4w")
    report = et_tensorrt.explain(torch.export.export(model, (torch.randn(4, 128),)), min_block_size=1)
    ops = [d.op for d in report.nodes]
    assert ops.count("torchao.dequantize_affine.default") == 4  # 2 weights, 2 activations
    assert ops.count("torchao.choose_qparams_affine.default") == 2
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)


class _Quantized(torch.nn.Module):
    """A linear layer over a weight dequantized from ``dtype`` (zero point ``zero_point``); with ``leak`` the
    program also returns its quantized activation."""

    def __init__(self, dtype=torch.int8, zero_point=0, leak=False):
        super().__init__()
        qmin, qmax = (0, 255) if dtype == torch.uint8 else (-127, 127)
        self.register_buffer("weight", torch.randint(qmin, qmax, (8, 16)).to(dtype))
        self.args = (0.05, zero_point, qmin, qmax, dtype)
        self.leak = leak

    def forward(self, x):
        q = qd.quantize_per_tensor.default(x, 0.1, 3, -128, 127, torch.int8)  # an asymmetric activation
        a = qd.dequantize_per_tensor.default(q, 0.1, 3, -128, 127, torch.int8)
        y = torch.nn.functional.linear(a, qd.dequantize_per_tensor.default(self.weight, *self.args)).relu()
        return (y, q) if self.leak else y


def _explain(model):
    return et_tensorrt.explain(torch.export.export(model, (torch.randn(2, 16),)), min_block_size=1)


def test_activation_with_a_zero_point_is_delegated_to_run_in_float():
    report = _explain(_Quantized())
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)


def test_uint8_weights_are_refused_with_the_reason():
    report = _explain(_Quantized(dtype=torch.uint8))
    refused = {n: r for n, r in report.host_nodes.items() if r.code == ReasonCode.UNSUPPORTED_QUANTIZATION}
    assert len(refused) == 1, str(report)
    assert "weight uint8 per tensor: TensorRT quantizes weights to int8, int4 or FP8" in str(
        next(iter(refused.values()))
    )
    qm.refused_before_any_work(
        _Quantized(dtype=torch.uint8), (torch.randn(2, 16),), r"(?s)nothing was built.*uint8.*TensorRTQuantizer"
    )


def test_quantized_values_leaving_the_program_are_refused():
    """An activation quantization TensorRT cannot express is dropped only when nothing but its dequantize reads
    the quantized values; a program that returns them cannot have it dropped."""
    report = _explain(_Quantized(leak=True))
    reasons = [str(r) for r in report.host_nodes.values() if r.code == ReasonCode.UNSUPPORTED_QUANTIZATION]
    assert reasons and "the quantized values leave it" in reasons[0], str(report)


def test_nonzero_weight_zero_point_is_read_before_to_edge():
    """ExecuTorch hands partitioners FakeTensor weights; a weight's zero point is read from the program before
    to_edge, and a nonzero one stops the lowering before any work."""
    qm.refused_before_any_work(
        _Quantized(zero_point=2), (torch.randn(2, 16),), r"(?s)dequantize_per_tensor.*zero point is not 0"
    )


def test_pt2e_dynamic_quantization_goes_with_the_linear():
    """XNNPACK's dynamic config (``--pt2e_quantize xnnpack_dynamic``): choose_qparams computes float64 scales at
    run time; the chain, its getitems included, is read as quantization (dropped later), not refused as float64."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    torch.manual_seed(0)
    inputs = (torch.randn(4, 128),)
    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    converted = qm.quantize_pt2e_with(qm.Mlp(), inputs, XNNPACKQuantizer().set_global(config))
    report = et_tensorrt.explain(torch.export.export(converted, inputs), min_block_size=1)
    assert sum(d.op == "quantized_decomposed.choose_qparams.tensor" for d in report.nodes) == 2
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)
