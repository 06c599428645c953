"""A model exported on the host (ExecuTorch's usual way) is unplaced: placement refuses nothing."""

import torch
from executorch.exir import to_edge

from et_tensorrt.partition import TensorRTPartitioner


class HostModel(torch.nn.Module):
    def forward(self, x):
        counts = (x * 2.0).to(device="cpu", dtype=torch.int32)  # cpu -> cpu: no device change
        return torch.cat([counts, torch.arange(0, counts.shape[0], dtype=torch.int32)]) + 1


def test_everything_delegable(partition_recording, tagged):
    ep = to_edge(torch.export.export(HostModel(), (torch.randn(16),))).exported_program()
    partitioner = TensorRTPartitioner(min_block_size=1, require_full_compilation=True)
    result, warnings = partition_recording(partitioner, ep)

    report = partitioner.report
    assert not report.placed
    assert warnings == []
    assert report.host_nodes == {}
    calls = [n.name for n in ep.graph.nodes if n.op == "call_function"]
    assert report.partitions == {"et_tensorrt_0": tuple(calls)}
    assert "dim_order_ops__to_dim_order_copy_default" in calls
    assert set(tagged(result.tagged_exported_program).values()) == {"et_tensorrt_0"}


def test_unsupported_op_still_refused_when_unplaced():
    class NonZero(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x.relu() * 2.0)

    ep = to_edge(torch.export.export(NonZero(), (torch.randn(8),))).exported_program()
    report = TensorRTPartitioner(min_block_size=1).analyze(ep)
    assert str(report.host_nodes["aten_nonzero_default"]) == "unsupported-op (aten.nonzero.default)"
    # The rest of the refusals are export's symbolic-size checks on nonzero's output (not tensors).
    assert report.host_nodes["sym_size"].code == "min_block_size"  # plumbing alone: dropped
    assert all(not n.startswith("aten_") for n in report.host_nodes if n != "aten_nonzero_default")
    assert report.partitions == {"et_tensorrt_0": ("aten_relu_default", "aten_mul_tensor")}
