"""The ops real models need (issue 13) lower whole: exported to ONNX, checked by onnxruntime against PyTorch
(validate=True), built by TensorRT, run through the delegate and matched against eager.

Each test lowers one small model whose outputs cover an op family; argument limits are in
tests/partition/test_partition_model_op_limits.py."""

from __future__ import annotations

import torch
from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules

import et_tensorrt
from et_tensorrt import compile_specs as cs
from et_tensorrt.format import blob as B

F = torch.nn.functional


def _blobs(pte: bytes) -> list:
    from et_tensorrt.inspection import inspect_bytes

    return [d.blob for d in inspect_bytes(pte).method("forward").delegates if d.ours]


def _lowers_whole_and_matches(model, args, rtol=1e-5, atol=1e-5):
    pte = et_tensorrt.lower(model, args, min_block_size=1, validate=True)
    report = et_tensorrt.lower.last_report
    assert report.host_nodes == {}, report
    assert len(report.partitions) == 1
    (blob,) = _blobs(pte)
    assert blob.engine, blob.metadata.get("fallback_reason")
    errors = blob.metadata["validation_max_abs_error"]  # onnxruntime ran the engine's ONNX
    assert all(0.0 <= e <= 1e-4 for e in errors.values()), errors
    got = et_tensorrt.Runner(pte).run(list(args))
    want = model(*args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)
    return blob


class Masks(torch.nn.Module):
    """any/all over a dim, dims and everything; bitwise and logical and/or/xor/not of bool tensors."""

    def forward(self, x, m):
        positive = x > 0
        anded = (positive & m) | ~m
        return (
            torch.any(positive, dim=1),
            torch.all(positive, dim=-1, keepdim=True),
            torch.any(positive, dim=(0, 2)),
            torch.all(m),
            anded ^ positive,
            torch.logical_xor(x, m),
            torch.any(x, dim=2),  # any of a float tensor: nonzero
            torch.ops.aten.where.ScalarSelf(m, 1.5, x),  # masked_fill can arrive in these forms
            torch.ops.aten.where.ScalarOther(m, x, -2.0),
        )


def test_any_all_and_bitwise_ops_of_bool_tensors():
    _lowers_whole_and_matches(Masks(), (torch.randn(2, 3, 4), torch.rand(2, 3, 4) > 0.5))


class Indexing(torch.nn.Module):
    def forward(self, x, rows, cols):
        return (
            x[rows] * 2,  # index.Tensor on dim 0
            x[:, cols],  # after a sliced dim (negative indices wrap around)
            x[rows[:, None], cols[None, :]],  # broadcast indices (they reach index through views)
            x[rows, :, cols[:2]],  # non-adjacent indexed dims
        )


def test_advanced_indexing_with_integer_tensors_and_negative_indices():
    x = torch.randn(4, 3, 5)
    _lowers_whole_and_matches(Indexing(), (x, torch.tensor([3, 0]), torch.tensor([-1, 0, 2])))


class ConstantMasks(torch.nn.Module):
    """Boolean masks known when lowering (a buffer, a literal, a 2-D mask): static output shapes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("keep", torch.tensor([True, False, True, True, False]))
        self.register_buffer("grid", torch.tensor([[True, False, False], [False, True, True]]))

    def forward(self, x, rows):
        literal = torch.tensor([False, True, True])
        return (
            x[:, :, self.keep] * 2,  # after two dims
            x[self.grid] + 1,  # a 2-D mask over dims 0 and 1
            x[rows][:, literal],  # next to integer indexing
        )


def test_constant_boolean_masks_are_integer_indices():
    from et_tensorrt.partition.constant_masks import fold_constant_masks

    args = (torch.randn(2, 3, 5), torch.tensor([1, 0, 1]))
    program = torch.export.export(ConstantMasks(), args)
    folded = fold_constant_masks(program)
    assert folded is not program and not program.range_constraints.keys() <= folded.range_constraints.keys()
    outputs = [n.meta["val"] for n in folded.graph.output_node().args[0]]
    assert [tuple(o.shape) for o in outputs] == [(2, 3, 3), (3, 5), (3, 2, 5)]  # static sizes, no u0
    assert sum(1 for n in program.graph.nodes if "mask_positions" in n.name) == 0  # the caller's is untouched
    report = et_tensorrt.explain(program, min_block_size=1)
    _lowers_whole_and_matches(ConstantMasks(), args)
    assert report.partitions.keys() == et_tensorrt.lower.last_report.partitions.keys()


class IndexPut(torch.nn.Module):
    def forward(self, x, rows, values, mask, scale):
        return (
            torch.index_put(x, (rows,), values),  # ScatterND
            torch.index_put(x, (rows,), values, accumulate=True),  # repeated rows add up
            x.masked_fill(mask, 0.0),
            torch.ops.aten.index_put(x, [mask], torch.tensor(3.0)),  # a boolean mask: where
            torch.ops.aten.index_put(x, [None, mask[0]], scale, True),  # mask after a dim, accumulate
        )


def test_index_put_plain_accumulated_and_masked():
    x = torch.randn(4, 6)
    rows = torch.tensor([1, 3, 1, -1])  # 1 twice: accumulate adds both; -1 is the last row
    args = (x, rows, torch.randn(4, 6), torch.rand(4, 6) > 0.5, torch.randn(1))
    _lowers_whole_and_matches(IndexPut(), args)


class CumsumTopkLog1p(torch.nn.Module):
    def forward(self, x, mask):
        positions = torch.cumsum(mask, dim=1) - 1  # GPT-2's position ids from an attention mask
        values, indices = torch.topk(x, 3, dim=-1)
        low, low_indices = torch.topk(x, 2, dim=0, largest=False)
        total = torch.cumsum(x, 0, dtype=torch.float32)
        return positions, total, values, indices, low, low_indices, torch.log1p(x.abs())


def test_cumsum_topk_and_log1p():
    _lowers_whole_and_matches(CumsumTopkLog1p(), (torch.randn(5, 7), torch.randint(0, 2, (2, 9))))


class Upsample(torch.nn.Module):
    def forward(self, x):
        return (
            F.interpolate(x, size=(9, 13), mode="bilinear"),  # .vec with sizes
            F.interpolate(x, size=(9, 13), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=1.5, mode="bilinear"),  # .vec with scales
            F.interpolate(x, scale_factor=(2.0, 3.0), mode="bilinear", align_corners=True),
            F.interpolate(x, size=(3, 4), mode="bilinear"),  # down
            F.interpolate(x, size=(10, 7), mode="nearest"),
            F.interpolate(x, scale_factor=2, mode="nearest"),
        )


def test_upsample_bilinear_and_nearest_through_resize():
    blob = _lowers_whole_and_matches(Upsample(), (torch.randn(2, 3, 5, 6),))
    assert len(blob.outputs) == 7


class UpsampleSizesOverload(torch.nn.Module):
    def forward(self, x):
        return (
            torch.ops.aten.upsample_bilinear2d.default(x, [7, 8], True, None, None),
            torch.ops.aten.upsample_nearest2d.default(x, [10, 12]),
        )


def test_upsample_sizes_overloads():
    """The non-core ``.default`` overloads (sizes and optional scales); ExecuTorch's IR check refuses them
    before any partitioner runs, so they are lowered with it off, as the backend suite does."""
    x = torch.randn(1, 2, 5, 6)
    partitioner = et_tensorrt.TensorRTPartitioner(min_block_size=1, compile_specs={cs.VALIDATE: True})
    edge = to_edge_transform_and_lower(
        torch.export.export(UpsampleSizesOverload(), (x,)),
        partitioner=[partitioner],
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    assert partitioner.report.host_nodes == {}
    for g, w in zip(et_tensorrt.Runner(edge.to_executorch().buffer).run([x]), UpsampleSizesOverload()(x)):
        torch.testing.assert_close(g, w)


class AdaptiveAvgPool(torch.nn.Module):
    def forward(self, x, y):
        return (
            F.adaptive_avg_pool2d(x, (3, 4)),  # 8x9 -> 3x4: unequal, overlapping windows
            F.adaptive_avg_pool2d(x, (5, None)),  # one dim kept
            F.adaptive_avg_pool2d(x, 7)[0],  # a square output size
            F.adaptive_avg_pool1d(y, 4),  # 1-D: a 2-D pooling in the edge program
        )


def test_adaptive_average_pooling_with_unequal_windows():
    _lowers_whole_and_matches(AdaptiveAvgPool(), (torch.randn(2, 3, 8, 9), torch.randn(2, 3, 10)))


def test_averaging_matrix_is_pytorchs_windows():
    from et_tensorrt.builder.op_rewrites import averaging_matrix

    x = torch.randn(11)
    for out in (1, 3, 4, 7, 11, 15):
        want = F.adaptive_avg_pool1d(x[None, None], out)[0, 0]
        torch.testing.assert_close(averaging_matrix(11, out, torch.float32) @ x, want)


class Attention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return (
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2),
        )


def test_scaled_dot_product_attention_where_it_survives_decomposition():
    """ExecuTorch's decompositions turn attention into matmul/softmax (and any.dim), which lower too; a
    program that keeps it (``preserve_ops``) gets it delegated whole."""
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    args = (q, k, v, torch.rand(5, 5) > 0.3)
    edge = to_edge(
        torch.export.export(Attention(), args),
        compile_config=EdgeCompileConfig(preserve_ops=[sdpa], _check_ir_validity=False),
    )
    ops = [getattr(n.target, "_op", None) for n in edge.exported_program().graph.nodes]
    assert ops.count(sdpa) == 2
    partitioner = et_tensorrt.TensorRTPartitioner(min_block_size=1, compile_specs={cs.VALIDATE: True})
    edge = edge.to_backend(partitioner)
    assert partitioner.report.host_nodes == {}
    (lowered,) = [lm for _, lm, _ in get_lowered_submodules(edge.exported_program().graph_module)]
    blob = B.read_blob(lowered.processed_bytes)
    assert blob.engine and len(blob.metadata["validation_max_abs_error"]) == 2
    got = et_tensorrt.Runner(edge.to_executorch().buffer).run(list(args))
    for g, w in zip(got, Attention()(*args)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # the decomposed form (lower's default path) is delegated whole as well
    _lowers_whole_and_matches(Attention(), args)
