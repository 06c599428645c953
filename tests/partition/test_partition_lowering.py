"""End to end: a host-exported model lowered through ExecuTorch with the real backend.

Loading the program on the pip runtime needs the backend registered in C++ (the lead's work).
"""

import torch
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules

from et_tensorrt.backend import EtTensorRTBackend
from et_tensorrt.compile_specs import (
    BACKEND_ID,
    EXECUTION_DEVICE,
    METHOD_INPUT_NAMES,
    PARTITION_COUNT,
    PARTITION_INDEX,
    decode,
)
from et_tensorrt.partition import TensorRTPartitioner


class Small(torch.nn.Module):
    def forward(self, x):
        y = (x * 2.0).relu() + 1.0
        return torch.nonzero(y > 1.5), y.sigmoid()


def _check(edge_manager, partitioner):
    assert EtTensorRTBackend.__name__ == BACKEND_ID
    gm = edge_manager.exported_program().graph_module
    lowered = get_lowered_submodules(gm)
    assert len(lowered) == 1
    module = lowered[0][1]
    assert module.backend_id == BACKEND_ID
    assert decode(module.compile_specs) == {
        EXECUTION_DEVICE: "cuda:0",
        PARTITION_INDEX: "1",  # progress lines: "engine 1/1"
        PARTITION_COUNT: "1",
        METHOD_INPUT_NAMES: '["x"]',  # what run --inputs takes by name (issue 54 row 5)
    }
    assert len(module.processed_bytes) > 0
    # nonzero stays outside, as the report says.
    assert str(partitioner.report.host_nodes["aten_nonzero_default"]).startswith("unsupported-op")
    remaining = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert any("nonzero" in t for t in remaining)
    assert edge_manager.to_executorch().buffer


def test_to_edge_transform_and_lower():
    ep = torch.export.export(Small(), (torch.randn(8),))
    partitioner = TensorRTPartitioner(min_block_size=2)
    _check(to_edge_transform_and_lower(ep, partitioner=[partitioner]), partitioner)


def test_to_edge_then_to_backend():
    ep = torch.export.export(Small(), (torch.randn(8),))
    partitioner = TensorRTPartitioner(min_block_size=2)
    _check(to_edge(ep).to_backend(partitioner), partitioner)
