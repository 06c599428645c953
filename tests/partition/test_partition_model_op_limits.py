"""The ops real models need are delegated; what TensorRT cannot do with them is refused by name, with the
limit (unsupported-args), and the rest of the graph still delegated."""

import torch
from executorch.exir import EdgeCompileConfig, to_edge

from et_tensorrt import ReasonCode, explain

F = torch.nn.functional


def _refused(model, args, **options) -> dict:
    report = explain(torch.export.export(model, args), min_block_size=1, **options)
    return {name: str(reason) for name, reason in report.host_nodes.items()}


class IntegerBitwise(torch.nn.Module):
    def forward(self, a, b, m):
        return a & b, ~m, (m | (a > 0)) ^ m


def test_bitwise_ops_are_delegated_on_bool_tensors_only():
    args = (torch.randint(0, 8, (4,)), torch.randint(0, 8, (4,)), torch.rand(4) > 0.5)
    assert _refused(IntegerBitwise(), args) == {
        "aten_bitwise_and_tensor": "unsupported-args (aten.bitwise_and.Tensor: TensorRT has no bitwise operations "
        "on torch.int64 (bool tensors are delegated))"
    }


class BooleanIndex(torch.nn.Module):
    def forward(self, x, m):
        return x[m] * 2, x[:, torch.tensor([2, 0])]


def test_a_boolean_mask_index_is_refused_integer_indices_are_delegated():
    refused = _refused(BooleanIndex(), (torch.randn(3, 4), torch.rand(3, 4) > 0.5))
    assert refused["aten_index_tensor"] == (
        "unsupported-args (aten.index.Tensor: a boolean-mask index computed from the inputs selects a "
        "data-dependent number of elements (TensorRT-RTX has no NonZero; a constant mask is delegated); index "
        "with integer tensors, or use torch.where)"
    )
    assert "aten_index_tensor_1" not in refused


class IndexPutLimits(torch.nn.Module):
    def forward(self, x, n, rows, m, v):
        return (
            torch.index_put(n, (rows,), torch.ones(2, 3, dtype=torch.int64), accumulate=True),  # integers
            torch.ops.aten.index_put(x, [m], v),  # one value per selected element: a data-dependent count
            torch.index_put(x, (rows,), torch.ones(2, 3), accumulate=True),  # delegated
            torch.ops.aten.index_put(x, [m], torch.tensor(1.0)),  # delegated (a where)
        )


def test_index_put_limits():
    args = (
        torch.randn(4, 3),
        torch.zeros(4, 3, dtype=torch.int64),
        torch.tensor([0, 2]),
        torch.rand(4, 3) > 0.5,
        torch.randn(12),
    )
    refused = _refused(IndexPutLimits(), args)
    assert {n: r.split(":")[0] for n, r in refused.items()} == {
        "aten_index_put_default": "unsupported-args (aten.index_put.default",
        "aten_index_put_default_1": "unsupported-args (aten.index_put.default",
    }
    assert "accumulate=True is delegated for a floating-point tensor" in refused["aten_index_put_default"]
    assert "boolean mask" in refused["aten_index_put_default_1"]


class TopK(torch.nn.Module):
    def forward(self, x):
        return tuple(torch.topk(x, 4000)) + tuple(torch.topk(x, 5))


def test_topk_beyond_tensorrts_k_is_refused():
    refused = _refused(TopK(), (torch.randn(2, 5000),))
    assert refused["aten_topk_default"] == (
        "unsupported-args (aten.topk.default: TensorRT's TopK takes k <= 3840, got 4000)"
    )
    assert {r.split(" ")[0] for n, r in refused.items() if n != "aten_topk_default"} == {"producer-refused"}


class AdaptivePools(torch.nn.Module):
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (3, 5)), F.adaptive_max_pool2d(x, (3, 5))


def test_unequal_adaptive_average_pooling_is_delegated_max_pooling_refused():
    edge = to_edge(  # adaptive_max_pool2d is not core ATen: ExecuTorch's IR check would refuse it first
        torch.export.export(AdaptivePools(), (torch.randn(1, 2, 8, 9),)),
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    report = explain(edge.exported_program(), min_block_size=1)
    refused = {n: str(r) for n, r in report.host_nodes.items()}
    assert refused.pop("aten_adaptive_max_pool2d_default").startswith(
        "unsupported-args (aten.adaptive_max_pool2d.default: adaptive max and 3-D pooling are delegated only when"
    )
    assert set(refused.values()) == {"producer-refused (aten_adaptive_max_pool2d_default stays on host)"}
    assert "aten__adaptive_avg_pool2d_default" in report.delegated


def test_adaptive_average_pooling_is_refused_only_when_its_output_size_is_dynamic():
    class Pool(torch.nn.Module):
        def forward(self, x):
            # (3, 3) over a dynamic width: delegated (averaging matrices computed from the width);
            # (3, None) keeps the dynamic width as the output's: no fixed number of windows.
            return F.adaptive_avg_pool2d(x, (3, 3)), F.adaptive_avg_pool2d(x, (3, None))

    width = torch.export.Dim("width", min=4, max=32)
    ep = torch.export.export(Pool(), (torch.randn(1, 2, 8, 9),), dynamic_shapes=({3: width},))
    report = explain(ep, min_block_size=1)
    assert "aten__adaptive_avg_pool2d_default" in report.delegated
    reason = report.host_nodes["aten__adaptive_avg_pool2d_default_1"]  # (the size it reads stays with it)
    assert reason.code == ReasonCode.UNSUPPORTED_ARGS
    assert "delegated only with a static output size" in reason.detail


def test_attention_with_dropout_is_refused_where_it_survives_decomposition():
    class Attention(torch.nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5) + F.scaled_dot_product_attention(q, q, q)

    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    edge = to_edge(
        torch.export.export(Attention(), (torch.randn(1, 2, 4, 8),)),
        compile_config=EdgeCompileConfig(preserve_ops=[sdpa], _check_ir_validity=False),
    )
    report = explain(edge.exported_program(), min_block_size=1)
    assert {n: str(r) for n, r in report.host_nodes.items()} == {
        "aten_scaled_dot_product_attention_default": "unsupported-args (aten.scaled_dot_product_attention.default: "
        "dropout_p must be 0 (an engine runs inference))"
    }


class Restrides(torch.nn.Module):
    def forward(self, x):
        return (
            torch.as_strided(x, (2, 3), (1, 2)) + 1,  # a transpose of the storage: not a reshape
            torch.as_strided(x, (3, 2), (2, 1)) + 1,  # row-major: a reshape, delegated
            torch.as_strided(x, (1, 6, 1), (99, 1, 7)) + 1,  # size-1 dims' strides are never used: a reshape
            torch.as_strided(x, (2, 2), (2, 1), 2) + 1,  # an offset into the storage
        )


def test_as_strided_is_delegated_only_as_a_reshape():
    refused = _refused(Restrides(), (torch.randn(2, 3),))
    why = (
        "unsupported-args (aten.as_strided_copy.default: as_strided is delegated only where it equals a reshape "
        "(static row-major sizes and strides, offset 0))"
    )
    assert refused == {"aten_as_strided_copy_default": why, "aten_as_strided_copy_default_3": why}
