"""Engines really build (TensorRT on CPU) for a set of small models; blobs describe the partitions."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.format import blob as B
from et_tensorrt.testing import SplitPartitioner, Tester, check_blob, run_program


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * 0.5  # the scalar becomes a baked-in constant


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return torch.softmax(self.fc(torch.flatten(y, 1)), dim=-1)


class Block(torch.nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, 4 * d)
        self.ff2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class Casts(torch.nn.Module):
    def forward(self, x, ids):
        a = (x * 10).to(torch.int32)
        b = ids.to(torch.int32)
        c = torch.cat([a, b], dim=1)
        return c.to(torch.int64) + 1, c.to(torch.float32) * x.sum()


class TwoParts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.sin(torch.relu(self.a(x))))


def _lower_case(model, args, dynamic_shapes=None, host_ops=()):
    torch.manual_seed(0)
    tester = Tester(model, args, dynamic_shapes).lower_with(SplitPartitioner(host_ops=host_ops))
    blobs = tester.lowered_blobs()
    tester.to_executorch()  # must serialize to a .pte
    return model, args, blobs


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return _lower_case(MLP(), (torch.randn(4, 8),))


@pytest.fixture(scope="module")
def convnet():
    torch.manual_seed(0)
    model = ConvNet()
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    return _lower_case(model, (torch.randn(2, 3, 8, 8),))


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    return _lower_case(Block(), (torch.randn(2, 5, 16),))


@pytest.fixture(scope="module")
def casts():
    return _lower_case(Casts(), (torch.randn(3, 4), torch.randint(0, 100, (3, 2), dtype=torch.int64)))


@pytest.fixture(scope="module")
def dynamic():
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=64)
    return _lower_case(MLP(), (torch.randn(4, 8),), dynamic_shapes=({0: batch},))


@pytest.fixture(scope="module")
def two_parts():
    torch.manual_seed(0)
    return _lower_case(TwoParts(), (torch.randn(3, 8),), host_ops=("aten.sin",))


CASES = ["mlp", "convnet", "block", "casts", "dynamic", "two_parts"]


@pytest.mark.parametrize("case", CASES)
def test_engine_builds_and_blob_describes_partition(case, request):
    model, args, blobs = request.getfixturevalue(case)
    assert len(blobs) == (2 if case == "two_parts" else 1)
    for blob, partition in blobs:
        check_blob(blob, partition)


@pytest.mark.parametrize("case", ["mlp", "convnet", "block", "casts", "dynamic"])
def test_embedded_program_computes_the_model(case, request):
    model, args, blobs = request.getfixturevalue(case)
    [(blob, partition)] = blobs
    program = check_blob(blob, partition)
    got = run_program(program, args)
    with torch.no_grad():
        want = model(*args)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def test_weights_and_scalars_are_baked_in(mlp):
    _, _, [(blob, _)] = mlp
    assert [e.role for e in blob.io] == [B.ROLE_INPUT, B.ROLE_OUTPUT]
    assert blob.inputs[0].dims == (B.DimRange.static(4), B.DimRange.static(8))
    assert blob.outputs[0].dims == (B.DimRange.static(4), B.DimRange.static(4))


def test_int_casts_keep_integer_io(casts):
    _, _, [(blob, _)] = casts
    assert [e.dtype for e in blob.inputs] == [6, 4]  # Float, Long
    assert [e.dtype for e in blob.outputs] == [4, 6]
    assert blob.outputs[0].dims == (B.DimRange.static(3), B.DimRange.static(6))


def test_dynamic_batch_range_is_recorded(dynamic):
    _, _, [(blob, _)] = dynamic
    [x] = blob.inputs
    batch, feat = x.dims
    # torch.export narrows Dim(min=1) to [2, 64] (0/1 specialization); the example size is the opt
    assert (batch.min, batch.opt, batch.max) == (2, 4, 64)
    assert feat == B.DimRange.static(8)
    assert blob.outputs[0].dims[0] == batch
    assert blob.metadata["profile_max_picked"] == {}


def test_two_partitions_each_get_an_engine(two_parts):
    _, _, blobs = two_parts
    (first, _), (second, _) = blobs
    assert first.engine != second.engine
    assert first.outputs[0].dims == second.inputs[0].dims == (B.DimRange.static(3), B.DimRange.static(8))
