"""A partition holding more than ``max_partition_weights`` bytes is split where it is safe (weight_split.py): an
engine's build then needs that much weights, not the model's. Cuts never pass a size or a tuple between pieces and
never separate a KV cache's readers from its writer (the delegate still owns every cache)."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import explain
from et_tensorrt.testing import decoders

LAYER = 64 * 64 * 4  # bytes of one Linear(64, 64, bias=False)


def _stack(layers: int = 6):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(64, 64, bias=False) for _ in range(layers)]).eval()


@pytest.mark.parametrize(("limit", "partitions"), [(None, 1), (6 * LAYER, 1), (2 * LAYER, 3), (2 * LAYER + 1, 3)])
def test_a_stack_splits_into_pieces_of_at_most_the_limit(limit, partitions):
    report = explain(
        torch.export.export(_stack(), (torch.randn(2, 64),)), min_block_size=1, max_partition_weights=limit
    )
    assert len(report.partitions) == partitions
    # each piece holds its linears whole: a weight's transpose is never cut from the mm that reads it
    assert all(
        sum("permute" in n for n in nodes) == sum("_mm_" in n + "_" for n in nodes)
        for nodes in report.partitions.values()
    )


def test_a_piece_never_cut_below_one_layer_holds_it_whole():
    """A limit under one weight cannot be met: each piece holds one linear, no piece is empty."""
    report = explain(torch.export.export(_stack(3), (torch.randn(2, 64),)), min_block_size=1, max_partition_weights=1)
    assert len(report.partitions) == 3


def test_no_size_crosses_a_cut():
    """With a dynamic batch the linears read sizes computed in the partition: a cut never carries one out of it."""

    class Dynamic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

        def forward(self, x):
            y = self.a(x).reshape(x.shape[0], 8, 8)
            return self.b(y.reshape(x.shape[0], 64))

    x = torch.randn(4, 64)
    program = torch.export.export(Dynamic().eval(), (x,), dynamic_shapes=({0: torch.export.Dim("b", max=32)},))
    report = explain(program, min_block_size=1, max_partition_weights=LAYER)
    assert len(report.partitions) >= 2 and not report.host_nodes


def test_a_split_decoder_keeps_every_cache_owned_and_decodes_like_eager():
    decoder = decoders.executorch_llama(layers=4)
    per_layer = sum(p.numel() * p.element_size() for n, p in decoder.eager.named_parameters() if "layers.0." in n)
    pte = et_tensorrt.lower(decoder.program, cache=False, max_partition_weights=int(per_layer * 1.5))
    report = et_tensorrt.lower.last_report
    assert len(report.partitions) >= 3
    assert len(report.states) == 8 and all(s.partition is not None for s in report.states)
    steps = decoders.decode(decoder, pte, [3, 5, 7, 11])
    assert max(s.max_error for s in steps) < 1e-4
    assert all(s.state_bytes == 0 for s in steps)  # every cache updated in place by its delegate


def test_a_bad_limit_is_refused():
    with pytest.raises(ValueError, match="max_partition_weights"):
        et_tensorrt.lower(_stack(), (torch.randn(2, 64),), max_partition_weights=0)
