"""Ops in the table whose TensorRT conversion has argument limits are refused by name, with the limit."""

import torch

from et_tensorrt import explain


class Limits(torch.nn.Module):
    def forward(self, x):
        flat = torch.argmax(x)  # no dim: TensorRT's ArgMax needs one
        along = torch.argmax(x, dim=1)  # fine
        pooled = torch.nn.functional.max_pool2d(x.unsqueeze(0), 2, dilation=2)  # dilation: refused
        plain = torch.nn.functional.max_pool2d(x.unsqueeze(0), 2)  # fine
        return flat, along, pooled, plain


def test_argument_limits_are_named_and_the_rest_is_delegated():
    report = explain(torch.export.export(Limits(), (torch.randn(1, 6, 6),)), min_block_size=1)
    refused = {name: str(reason) for name, reason in report.host_nodes.items()}
    # max_pool2d is max_pool2d_with_indices in the edge program lowering partitions
    assert refused == {
        "aten_argmax_default": "unsupported-args (aten.argmax.default: TensorRT's ArgMax/ArgMin needs an explicit "
        "dim on an input of rank >= 2)",
        "aten_max_pool2d_with_indices_default": "unsupported-args (aten.max_pool2d_with_indices.default: "
        "TensorRT's MaxPool takes no dilation)",
        "getitem": "producer-refused (aten_max_pool2d_with_indices_default stays on host)",
    }
    delegated = {name for names in report.partitions.values() for name in names}
    assert {"aten_argmax_default_1", "aten_max_pool2d_with_indices_default_1"} <= delegated
