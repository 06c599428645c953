"""Adaptive pooling with equal windows lowers to plain TensorRT pooling and matches eager.

``adaptive_max_pool2d`` is not core ATen, so ``to_edge``'s strict IR check refuses it before any
partitioner runs; it is lowered here with the check off, as ExecuTorch's backend suite does."""

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

import et_tensorrt
from et_tensorrt import TensorRTPartitioner


class AdaptivePools(torch.nn.Module):
    def forward(self, x):
        values = torch.nn.functional.adaptive_max_pool2d(x, (2, 3))
        avg = torch.nn.functional.adaptive_avg_pool2d(x, (4, 1))
        global_avg = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        return values, avg, global_avg


def _lowers_whole_and_matches_eager(model, x):
    partitioner = TensorRTPartitioner(min_block_size=1)
    edge = to_edge_transform_and_lower(
        torch.export.export(model, (x,)),
        partitioner=[partitioner],
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    assert partitioner.report.host_nodes == {}
    got = et_tensorrt.Runner(edge.to_executorch().buffer).run([x])
    want = model(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_adaptive_pooling_lowers_and_matches_eager():
    _lowers_whole_and_matches_eager(AdaptivePools(), torch.randn(2, 3, 8, 9))


class Pools3d(torch.nn.Module):
    def forward(self, x):
        adaptive_avg = torch.nn.functional.adaptive_avg_pool3d(x, (2, 1, 3))
        adaptive_max = torch.nn.functional.adaptive_max_pool3d(x, (4, 2, 1))
        plain_max = torch.nn.functional.max_pool3d(x, 2)
        plain_avg = torch.nn.functional.avg_pool3d(x, (2, 2, 3), stride=1, padding=1)
        return adaptive_avg, adaptive_max, plain_max, plain_avg


def test_3d_pooling_lowers_and_matches_eager():
    _lowers_whole_and_matches_eager(Pools3d(), torch.randn(2, 3, 4, 6, 9))
