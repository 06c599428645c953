"""Adaptive 2-D average pooling over static sizes is delegated (any windows); adaptive max pooling when its
windows are equal (input size a multiple of the output size) and no indices are read; otherwise they are
refused by name, with the reason."""

import torch
from executorch.exir import EdgeCompileConfig, to_edge

from et_tensorrt import explain


class Adaptive(torch.nn.Module):
    def forward(self, x):
        equal_avg = torch.nn.functional.adaptive_avg_pool2d(x, (2, 3))  # 8x9 -> 2x3: windows 4x3
        equal_max = torch.nn.functional.adaptive_max_pool2d(x, (4, 1))
        unequal_avg = torch.nn.functional.adaptive_avg_pool2d(x, (3, 3))  # 8 is no multiple of 3: matmuls
        unequal_max = torch.nn.functional.adaptive_max_pool2d(x, (3, 3))
        _, indices = torch.nn.functional.adaptive_max_pool2d(x, (2, 3), return_indices=True)
        return equal_avg, equal_max, unequal_avg, unequal_max, indices


def test_adaptive_pooling_decisions_name_the_limit():
    edge = to_edge(  # adaptive_max_pool2d is not core ATen: ExecuTorch's IR check would refuse it first
        torch.export.export(Adaptive(), (torch.randn(1, 2, 8, 9),)),
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    report = explain(edge.exported_program(), min_block_size=1)
    refused = {name: str(reason) for name, reason in report.host_nodes.items()}
    assert refused == {
        "aten_adaptive_max_pool2d_default_1": "unsupported-args (aten.adaptive_max_pool2d.default: adaptive max "
        "and 3-D pooling are delegated only when the static input size is a multiple of the output size (equal "
        "windows: a plain pooling))",
        "getitem_1": "producer-refused (aten_adaptive_max_pool2d_default_1 stays on host)",
        "aten_adaptive_max_pool2d_default_2": "unsupported-args (aten.adaptive_max_pool2d.default: TensorRT's "
        "MaxPool has no indices output)",
        "getitem_2": "producer-refused (aten_adaptive_max_pool2d_default_2 stays on host)",  # its indices
    }
    delegated = {name for names in report.partitions.values() for name in names}
    assert {
        "aten__adaptive_avg_pool2d_default",
        "aten__adaptive_avg_pool2d_default_1",
        "aten_adaptive_max_pool2d_default",
    } <= delegated
