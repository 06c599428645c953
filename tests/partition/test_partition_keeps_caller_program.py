"""Lowering never changes the caller's ExportedProgram: a lifted tensor constant the engine takes is still
there afterwards, so ``ep.module()`` (what eager references are computed from) keeps working."""

import torch
from executorch.exir import to_edge_transform_and_lower

import et_tensorrt.backend  # noqa: F401  (preprocess found by class name)
from et_tensorrt import TensorRTPartitioner


class ScaleByConstant(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * torch.tensor([1.0, 2.0, 3.0, 4.0])  # a lifted tensor constant


def test_lifted_constants_of_the_callers_program_survive_lowering():
    x = torch.randn(2, 4)
    ep = torch.export.export(ScaleByConstant(), (x,))
    constants = dict(ep.constants)
    assert constants, "the model must lift a tensor constant for this test to mean anything"
    edge = to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(min_block_size=1)])
    assert "lowered_module_0" in edge.exported_program().graph_module.code  # the engine took the constant
    assert ep.constants.keys() == constants.keys()
    torch.testing.assert_close(ep.module()(x), ScaleByConstant()(x))
