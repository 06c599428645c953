"""Adaptive 2-D pooling is delegated when its windows are equal (input size a multiple of the output
size) and no indices are read; otherwise it is refused by name, with the reason."""

import torch

from et_tensorrt import explain


class Adaptive(torch.nn.Module):
    def forward(self, x):
        equal_avg = torch.nn.functional.adaptive_avg_pool2d(x, (2, 3))  # 8x9 -> 2x3: windows 4x3
        equal_max = torch.nn.functional.adaptive_max_pool2d(x, (4, 1))
        unequal = torch.nn.functional.adaptive_avg_pool2d(x, (3, 3))  # 8 is no multiple of 3
        _, indices = torch.nn.functional.adaptive_max_pool2d(x, (2, 3), return_indices=True)
        return equal_avg, equal_max, unequal, indices


def test_equal_windows_are_delegated_and_the_rest_refused_with_the_reason():
    report = explain(torch.export.export(Adaptive(), (torch.randn(1, 2, 8, 9),)), min_block_size=1)
    refused = {name: str(reason) for name, reason in report.host_nodes.items()}
    assert refused == {
        "adaptive_avg_pool2d_1": "unsupported-args (aten.adaptive_avg_pool2d.default: adaptive pooling is "
        "delegated only when the static input size is a multiple of the output size (equal windows: a plain "
        "pooling))",
        "adaptive_max_pool2d_1": "unsupported-args (aten.adaptive_max_pool2d.default: TensorRT's MaxPool has "
        "no indices output)",
        "getitem_2": "producer-refused (adaptive_max_pool2d_1 stays on host)",
        "getitem_3": "producer-refused (adaptive_max_pool2d_1 stays on host)",
    }
    delegated = {name for names in report.partitions.values() for name in names}
    assert {"adaptive_avg_pool2d", "adaptive_max_pool2d"} <= delegated
