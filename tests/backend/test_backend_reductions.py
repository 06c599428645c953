"""Reductions over all dims and no-op views lower (the ONNX exporter needs the dims spelled out), and a
reduction's ``dtype`` casts its input first, as in PyTorch (the exporter alone casts the result)."""

import torch

from et_tensorrt.parity import ASSERT_CLOSE_FP32, Tolerances
from et_tensorrt.testing import Tester


class AllDims(torch.nn.Module):
    def forward(self, x):
        total = x.mean() + x.amax() - x.amin() + torch.mean(x, dim=None, keepdim=True) + torch.sum(x, dim=None)
        return total, x[0], x.squeeze(0)[:, 1:4], torch.squeeze(x, dim=1)  # the last squeeze changes nothing


def test_all_dim_reductions_slices_and_selects_lower_and_match_eager():
    x = torch.randn(1, 6, 6)
    tester = Tester(AllDims(), (x,)).lower(min_block_size=1, validate=True).check_delegated_all()
    tester.run_runner().check_parity(tolerances=Tolerances(rtol=1e-6, atol=1e-6))


class MeanAsFloat(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dtype=torch.float32), torch.sum(x.half(), dim=1, dtype=torch.float32)


def test_reduction_dtype_casts_the_input_before_reducing():
    # An int64 mean computed in integers and then cast is off by up to 1 (mean([1, 2]) = 1): onnxruntime
    # checks the engine's ONNX against PyTorch (validate=True) and would refuse to build.
    x = torch.randint(0, 10, (5, 10))
    tester = Tester(MeanAsFloat(), (x,)).lower(min_block_size=1, validate=True).check_delegated_all()
    tester.run_runner().check_parity(tolerances=ASSERT_CLOSE_FP32)
