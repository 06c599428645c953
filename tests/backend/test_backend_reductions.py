"""Reductions over all dims and no-op views lower (the ONNX exporter needs the dims spelled out)."""

import torch

import et_tensorrt


class AllDims(torch.nn.Module):
    def forward(self, x):
        total = x.mean() + x.amax() - x.amin() + torch.mean(x, dim=None, keepdim=True) + torch.sum(x, dim=None)
        return total, x[0], x.squeeze(0)[:, 1:4], torch.squeeze(x, dim=1)  # the last squeeze changes nothing


def test_all_dim_reductions_slices_and_selects_lower_and_match_eager():
    x = torch.randn(1, 6, 6)
    pte = et_tensorrt.lower(AllDims(), (x,), min_block_size=1, validate=True)
    assert et_tensorrt.lower.last_report.host_nodes == {}
    for got, want in zip(et_tensorrt.Runner(pte).run([x]), AllDims()(x)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
