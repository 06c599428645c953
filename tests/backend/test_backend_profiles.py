"""Optimization profiles: declared ranges recovered from the program before to_edge, and several profiles
from the user's opt sizes (builder/profiles.py, partition/dynamic_dims.py)."""

import pytest
import torch
from torch.export import Dim

from et_tensorrt.builder.profiles import (
    DynamicDim,
    decode_dynamic_dims,
    encode_dynamic_dims,
    recovered_lower,
    split_range,
    symbol_ranges,
)
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.partition.dynamic_dims import declared_ranges, dim_names, resolve_opt_sizes


class Two(torch.nn.Module):
    def forward(self, x, y):
        return x.relu(), y * 2


def _export(min_batch=1):
    batch = Dim("batch", min=min_batch, max=64)
    return torch.export.export(
        Two(),
        (torch.randn(4, 3), torch.randn(4, 16)),
        dynamic_shapes=({0: batch}, {0: batch, 1: Dim("seq", min=1, max=128)}),
    )


def test_split_range_cuts_between_opts_at_their_geometric_mean():
    assert split_range(1, 64, (1, 64)) == [(1, 1, 8), (9, 64, 64)]
    assert split_range(1, 64, (64, 1, 8)) == [(1, 1, 2), (3, 8, 22), (23, 64, 64)]
    assert split_range(2, 9, (5,)) == [(2, 5, 9)]


@pytest.mark.parametrize("opts", [(0, 8), (1, 65), (4, 4)])
def test_split_range_refuses_opts_outside_or_repeated(opts):
    with pytest.raises(EngineBuildError):
        split_range(1, 64, opts)


def test_only_the_0_1_narrowing_is_taken_back():
    assert recovered_lower(2, 8, (1, 8)) == 1  # to_edge's 0/1 specialization
    assert recovered_lower(2, None, (0, -1)) == 1  # never below 1
    assert recovered_lower(2, 8, (1, 16)) == 2  # another upper bound: not the same declaration
    assert recovered_lower(3, 8, (1, 8)) == 3  # a real lower bound of the program
    assert recovered_lower(2, 8, None) == 2


def test_declared_ranges_and_names_come_from_the_exported_program():
    ep = _export()
    ranges = declared_ranges(ep)
    assert sorted(ranges.values()) == [(1, 64), (1, 128)]
    names = dim_names(ep)
    assert names["batch"] == names["x:0"] == names["y:0"]
    assert names["seq"] == names["y:1"]


def test_a_derived_dim_bounds_its_symbol():
    class Conv(torch.nn.Module):
        def forward(self, x):
            return x * 2

    ep = torch.export.export(Conv(), (torch.randn(1, 64),), dynamic_shapes=({1: Dim("h", min=1, max=8) * 16},))
    assert list(declared_ranges(ep).values()) == [(1, 8)]  # 16*s in [16, 128]
    [(symbol, a, b)] = {dim_names(ep)["x:1"]}
    assert (a, b) == (16, 0)
    assert resolve_opt_sizes({"x:1": [16, 128]}, ep) == {symbol: (1, 8)}
    with pytest.raises(ValueError, match="not a size that dim can take"):
        resolve_opt_sizes({"x:1": 40}, ep)


def test_unknown_opt_size_names_list_the_known_ones():
    with pytest.raises(ValueError, match="known: batch, seq, x:0, y:0, y:1"):
        resolve_opt_sizes({"beam": 4}, _export())


def test_recovered_range_and_several_profiles_per_symbol():
    ep = _export()
    [batch, seq] = sorted(declared_ranges(ep), key=lambda s: declared_ranges(ep)[s][1])
    from executorch.exir import to_edge

    edge = to_edge(ep).exported_program()
    plain = symbol_ranges(edge)
    assert {str(s): r[0] for s, r in plain.profile.items()} == {batch: 2, seq: 2}  # to_edge narrowed both
    dims = {batch: DynamicDim((1, 64), (1, 64)), seq: DynamicDim((1, 128), (16,))}
    dims = decode_dynamic_dims(encode_dynamic_dims(dims))  # the compile spec round trip
    ranges = symbol_ranges(edge, dynamic_dims=dims)
    by_name = {str(s): r for s, r in ranges.profile.items()}
    assert by_name == {batch: (1, 1, 64), seq: (1, 16, 128)}
    assert [{str(s): r for s, r in p.items()} for p in ranges.profiles] == [
        {batch: (1, 1, 8), seq: (1, 16, 128)},
        {batch: (9, 64, 64), seq: (1, 16, 128)},
    ]


class ConvHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def _blob(pte_edge):
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    from et_tensorrt.format import blob as B

    [(_, lowered, _)] = get_lowered_submodules(pte_edge.exported_program().graph_module)
    return B.read_blob(lowered.processed_bytes)


def test_batch_declared_from_1_runs_at_1():
    """ExecuTorch's to_edge narrows Dim(min=1) to 2; the engine is built from 1 and batch 1 runs."""
    import et_tensorrt
    from et_tensorrt.format import blob as B

    model = ConvHead().eval()
    dynamic = ({0: Dim("batch", min=1, max=8)},)
    pte = et_tensorrt.lower(model, (torch.randn(2, 3, 8, 8),), dynamic_shapes=dynamic, min_block_size=1)
    runner = et_tensorrt.Runner(pte)
    for batch in (1, 2, 8):
        x = torch.randn(batch, 3, 8, 8)
        [got] = runner.run([x])
        torch.testing.assert_close(got, model(x))
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(model, (torch.randn(2, 3, 8, 8),), dynamic_shapes=dynamic)
    blob = _blob(to_edge_transform_and_lower(ep, partitioner=[et_tensorrt.TensorRTPartitioner(min_block_size=1)]))
    assert blob.inputs[0].dims[0] == B.DimRange(1, 2, 8)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_a_low_precision_engine_keeps_the_dynamic_batch(precision):
    """fp16/bf16 re-export the partition in that precision; the re-export keeps the declared range (it used
    to fail: the casting wrapper takes its inputs as one tuple, the dynamic shapes were given per input)."""
    import et_tensorrt
    from et_tensorrt.format import blob as B
    from et_tensorrt.testing import Tester

    dynamic = ({0: Dim("batch", min=1, max=8)},)
    tester = Tester(ConvHead().eval(), (torch.randn(2, 3, 8, 8),), dynamic)
    tester.lower(min_block_size=1, precision=precision, validate=True).check_partitions(1)
    ((blob, _),) = tester.lowered_blobs()
    assert blob.engine, blob.metadata.get("fallback_reason")
    if precision == "fp16":
        assert set(blob.metadata["validation_max_abs_error"]) == {e.name for e in blob.outputs}
    else:  # onnxruntime's CPU provider has no bf16 convolution: the check says it compared nothing
        assert "validation_max_abs_error" not in blob.metadata
        assert "onnxruntime cannot run this bf16 ONNX" in blob.metadata["validation_inconclusive"]
    assert blob.inputs[0].dims[0] == B.DimRange(1, 2, 8) and blob.metadata["precision"] == precision
    for batch in (1, 3, 8):
        tester.run_runner([torch.randn(batch, 3, 8, 8)]).check_parity(
            tolerances=et_tensorrt.parity.for_precision(precision)
        )


def test_opt_sizes_build_one_profile_each_and_the_table_holds_their_union():
    from executorch.exir import to_edge_transform_and_lower

    import et_tensorrt
    from et_tensorrt.format import blob as B

    ep = torch.export.export(
        ConvHead().eval(), (torch.randn(2, 3, 8, 8),), dynamic_shapes=({0: Dim("batch", min=1, max=64)},)
    )
    partitioner = et_tensorrt.TensorRTPartitioner(min_block_size=1, opt_sizes={"batch": [1, 64]})
    blob = _blob(to_edge_transform_and_lower(ep, partitioner=[partitioner]))
    assert blob.engine is not None
    assert blob.inputs[0].dims[0] == B.DimRange(1, 1, 64)
    [name] = [e.name for e in blob.inputs]
    assert [p[name][0] for p in blob.metadata["optimization_profiles"]] == [[1, 1, 8], [9, 64, 64]]


def test_the_runtime_selects_the_first_profile_holding_every_argument():
    from et_tensorrt.runtime.executors import choose_profile

    # engine inputs: x (batch, 3) and a size shape input n
    profiles = [[[(1, 8), (3, 3)], [(1, 8)]], [[(9, 64), (3, 3)], [(1, 64)]]]
    assert choose_profile(profiles, [(1, 3), 4]) == 0
    assert choose_profile(profiles, [(9, 3), 4]) == 1
    assert choose_profile(profiles, [(8, 3), 9]) is None  # n fits only profile 1, the batch only profile 0
    assert choose_profile(profiles, [(65, 3), 4]) is None
