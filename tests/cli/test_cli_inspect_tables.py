"""format/pte_tables.py, the flatbuffer reader `inspect` and `generate` use instead of ExecuTorch's exir: the same
methods, I/O, operators and delegate bytes as ExecuTorch's own deserializer, and a damaged file refused by name."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import inspection
from et_tensorrt.format.pte_tables import PteTableError, method_names, read_tables


@pytest.fixture(scope="module")
def pte() -> bytes:
    class TwoOutputs(torch.nn.Module):
        def forward(self, x, n: int):
            y = torch.relu(torch.nn.functional.linear(x, torch.ones(4, 4)))
            return y, torch.cumsum(y, 0)

    program = torch.export.export(TwoOutputs(), (torch.randn(2, 4), 3))
    return et_tensorrt.lower(program, min_block_size=1, torch_executed_ops=("aten.cumsum.default",))


def test_tables_match_executorchs_deserializer(pte):
    theirs = inspection._deserialize_pte(pte, "input").program
    ours = read_tables(pte, inspection._segment_base(pte[:40]))
    assert method_names(pte) == [plan.name for plan in theirs.execution_plan] == [p.name for p in ours.plans]
    for mine, plan in zip(ours.plans, theirs.execution_plan, strict=True):
        assert (mine.inputs, mine.outputs) == (list(plan.inputs), list(plan.outputs))
        assert [v.kind for v in mine.values] == [type(v.val).__name__ for v in plan.values]
        tensors = [(v, e.val) for v, e in zip(mine.values, plan.values, strict=True) if v.kind == "Tensor"]
        assert all(v.sizes == tuple(t.sizes) and v.scalar_type == int(t.scalar_type) for v, t in tensors)
        assert mine.operators == [(op.name, op.overload) for op in plan.operators]
        assert len(mine.delegates) == len(plan.delegates) == 1
        for d, theirs_d in zip(mine.delegates, plan.delegates, strict=True):
            assert d.id == theirs_d.id
            assert dict(d.compile_specs) == {s.key: bytes(s.value) for s in theirs_d.compile_specs}
            assert bytes(ours.delegate_bytes(d)) == inspection._delegate_bytes(theirs, theirs_d)


@pytest.mark.parametrize("cut", [16, 200, 600])
def test_a_cut_flatbuffer_is_refused_by_name(pte, cut):
    with pytest.raises(PteTableError, match="outside the|ends past the|not in the program"):
        read_tables(pte[:cut])


def test_inspect_of_a_damaged_table_is_one_error(pte):
    damaged = bytearray(pte)
    damaged[0:4] = (len(pte) + 10).to_bytes(4, "little")  # the root table's offset points past the end
    with pytest.raises(inspection.NotAProgramError, match="could not be parsed as an ExecuTorch program"):
        inspection.inspect_bytes(bytes(damaged))


@pytest.fixture(scope="module")
def ptd(tmp_path_factory) -> bytes:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    path = tmp_path_factory.mktemp("ptd") / "mlp.pte"
    saved = et_tensorrt.save(path, model, (torch.randn(2, 8),), min_block_size=1, named_data="ptd")
    return open(saved.data_path, "rb").read()


def test_the_ptd_key_table_matches_executorchs_deserializer(ptd):
    from executorch.extension.flat_tensor.serialize.serialize import FlatTensorHeader, _deserialize_to_flat_tensor

    header = FlatTensorHeader.from_bytes(ptd[8 : 8 + FlatTensorHeader.EXPECTED_LENGTH])
    flat = _deserialize_to_flat_tensor(ptd[: header.flatbuffer_offset + header.flatbuffer_size])
    segments = [(header.segment_base_offset + s.offset, s.size) for s in flat.segments]
    theirs = {entry.key: segments[entry.segment_index] for entry in flat.named_data}
    assert inspection.ptd_layout(ptd) == theirs and len(theirs) == 5  # the engine, two weights, two biases


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:200], r"a vector's length at byte \d+ lies outside the 200-byte \.ptd"),
        (lambda d: b"\0" * 16 + d[16:], r"no FlatTensor header \(FH01 at byte 8\): not a \.ptd"),
    ],
    ids=["cut", "not-a-ptd"],
)
def test_a_damaged_ptd_key_table_is_refused_naming_the_file(ptd, damage, message):
    with pytest.raises(
        inspection.NotAProgramError, match=r"^x\.ptd could not be read as a \.ptd \(ExecuTorch named data\): " + message
    ):
        inspection.ptd_layout(damage(ptd), "x.ptd")
