"""require_full_compilation=True raises PartitionError listing every refused node and its reason."""

import pytest
from models import HostBranch, seed_inputs

from et_tensorrt.errors import PartitionError
from et_tensorrt.partition import TensorRTPartitioner, explain


def test_raises_with_every_refusal(fake_edge, tagged):
    ep = fake_edge(HostBranch, seed_inputs)
    with pytest.raises(PartitionError) as info:
        TensorRTPartitioner(min_block_size=1, require_full_compilation=True)(ep)
    message = str(info.value)
    assert "3 node(s)" in message
    for line in (
        "dim_order_ops__to_dim_order_copy_default: cast:device-change (cuda:0 -> cpu)",
        "aten_arange_start_step: device:host-output (output on cpu)",
        "aten_cat_default: device:host-output (output on cpu)",
    ):
        assert line in message
    assert "aten_mul_tensor" not in message


def test_min_block_size_refusals_are_listed_too(fake_edge):
    with pytest.raises(PartitionError, match=r"aten_mul_tensor: min_block_size \(partition of 1 < 2\)"):
        TensorRTPartitioner(min_block_size=2, require_full_compilation=True)(fake_edge(HostBranch, seed_inputs))


def test_explain_reports_instead_of_raising(fake_edge):
    report = explain(fake_edge(HostBranch, seed_inputs), min_block_size=1, require_full_compilation=True)
    assert len(report.host_nodes) == 3
