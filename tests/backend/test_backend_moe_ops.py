"""The ops of transformers' default experts code lower whole: ``histc`` (not in Core ATen) and the grouped matmuls
(``transformers::grouped_mm_fallback``, ``aten._grouped_mm``) are rewritten into core ops before ExecuTorch
decomposes the program, ``sort`` is TensorRT's TopK, ``empty_like`` keeps a dynamic size. Engines are built from
ONNX that onnxruntime checked against PyTorch; the programs run through the delegate and match eager."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from et_tensorrt import explain
from et_tensorrt.parity import for_precision
from et_tensorrt.partition.argument_limits import TOPK_MAX_K
from et_tensorrt.testing import Tester

pytest.importorskip("transformers.integrations.moe")  # registers transformers::grouped_mm_fallback

GROUPS = 4


def _lowers_whole(tester: Tester) -> Tester:
    tester.lower(min_block_size=1, validate=True).check_partitions(1).check_delegated_all()
    tester.check_blobs()  # each partition has an engine
    return tester


class Counts(torch.nn.Module):
    """histc over a given range (values outside it and on its edges included) and over the data's own range."""

    def forward(self, x):
        return torch.histc(x, bins=5, min=-1.0, max=1.5), torch.histc(x * 3, bins=3)


def test_histc_lowers_whole_and_counts_like_pytorch():
    x = torch.tensor([[-1.0, 1.5, 2.0, -3.0], [0.25, 0.2, 1.0, -0.5]])
    tester = _lowers_whole(Tester(Counts(), (x,), ({0: Dim("rows", min=1, max=8)},)))
    tester.run_both().check_parity(exact=True)
    for rows in (1, 3, 7):
        tester.run_runner([torch.randn(rows, 4)]).check_parity(exact=True)


class Routed(torch.nn.Module):
    """transformers' grouped experts: rows sorted by expert, their offsets from histc and cumsum, one grouped
    matmul (``fallback``: transformers' custom op; else ``aten._grouped_mm``), the rows put back in order."""

    def __init__(self, fallback: bool):
        super().__init__()
        torch.manual_seed(0)
        dtype = torch.float32 if fallback else torch.bfloat16  # PyTorch's _grouped_mm takes bfloat16 only
        self.weight = torch.nn.Parameter(torch.randn(GROUPS, 16, 8, dtype=dtype))
        self.fallback = fallback

    def forward(self, x, experts):
        ids, perm = torch.sort(experts)
        rows = x[perm]
        offsets = torch.cumsum(torch.histc(ids.float(), bins=GROUPS, min=0, max=GROUPS - 1), 0, dtype=torch.int32)
        if self.fallback:
            out = torch.ops.transformers.grouped_mm_fallback(rows, self.weight, offsets)
        else:
            out = torch._grouped_mm(rows, self.weight, offs=offsets)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.size(0))
        return out[inverse]


def test_grouped_matmul_gathered_and_dense():
    """At most GROUPS rows: each row gathers its expert's weight; more rows (a dynamic count): every expert
    computed, each row's picked. Both as transformers' loop over the experts computes them."""
    experts = torch.tensor([3, 0, 3])
    static = _lowers_whole(Tester(Routed(fallback=True), (torch.randn(3, 16), experts)))
    static.run_both().check_parity()
    rows = Dim("rows", min=2, max=64)
    inputs, shapes = (torch.randn(6, 16), experts.repeat(2)), ({0: rows}, {0: rows})
    dynamic = _lowers_whole(Tester(Routed(fallback=True), inputs, shapes))
    for n in (2, 5, 64):
        dynamic.run_runner([torch.randn(n, 16), torch.randint(0, GROUPS, (n,))]).check_parity()


def test_bfloat16_grouped_matmul():
    """What transformers' default experts code exports to for bfloat16 weights: ``aten._grouped_mm`` with offsets."""
    x, experts = torch.randn(5, 16, dtype=torch.bfloat16), torch.tensor([3, 0, 3, 1, 0])
    tester = Tester(Routed(fallback=False), (x, experts)).lower(min_block_size=1, validate=True)
    tester.check_partitions(1).check_delegated_all()
    for blob, _ in tester.lowered_blobs():  # onnxruntime takes no bf16 inputs (and lacks bf16 kernels): not checked
        assert len(blob.engine) > 1024 and "bf16 inputs" in blob.metadata["validation_inconclusive"]
    tester.run_both().check_parity(tolerances=for_precision("bf16"))


class Sorted(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=0)[0] * 2


def test_sort_is_refused_past_what_topk_sorts():
    ok = torch.export.export(Sorted(), (torch.randn(6, 2),), dynamic_shapes=({0: Dim("n", max=TOPK_MAX_K)},))
    assert not explain(ok, min_block_size=1).host_nodes
    too_long = torch.export.export(Sorted(), (torch.randn(6, 2),), dynamic_shapes=({0: Dim("n", max=TOPK_MAX_K + 1)},))
    reasons = [str(r) for r in explain(too_long, min_block_size=1).host_nodes.values()]
    assert any(f"TopK sorts at most {TOPK_MAX_K} elements, this dim has up to {TOPK_MAX_K + 1}" in r for r in reasons)
