"""Parity: every model lowered once, run through et_tensorrt.Runner AND executorch.runtime, vs eager.

On a machine without CUDA each partition runs with the PyTorch executor (the partition's embedded
ExportedProgram). Why results are not always bit-exact: the embedded program is the *decomposed edge
graph* of the partition (``linear`` became ``permute_copy`` + ``addmm``, ``sum``/``softmax`` may reduce in
another order), so float results can differ from the eager module in the last bit (observed: up to
~2e-7 absolute on these sizes). Where the decomposition does not change the arithmetic (convolution +
batch norm, integer casts + cat, elementwise scalar ops) the result is observed bit-exact and asserted so.
The Runner and executorch.runtime run the same delegate, so they must agree with each other exactly.
"""

from __future__ import annotations

import pytest
import torch
from models import DYNAMIC_BATCH

from et_tensorrt.testing import Tester


class Block(torch.nn.Module):
    """A pre-norm transformer block: LayerNorm, 2-head attention (matmul/softmax), GELU MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, 4 * d)
        self.ff2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj(torch.matmul(att, v).transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class HostBetween(torch.nn.Module):
    """Linear -> sigmoid (forced onto the host) -> Linear: two partitions around one host op."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.sigmoid(self.a(x)))


class CastsCat(torch.nn.Module):
    def forward(self, x, ids):
        a = (x * 10).to(torch.int32)
        b = ids.to(torch.int32)
        c = torch.cat([a * 2, b + 1], dim=1)
        return c, torch.cat([x, ids.to(torch.float32)], dim=0)


class ThreeOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.fc(x)
        return h.relu(), h.sum(-1), x * 3


class ScalarConstant(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(3)
    return Tester(Block(), (torch.randn(2, 5, 16),)).lower(min_block_size=1)


@pytest.fixture(scope="module")
def host_between():
    torch.manual_seed(4)
    return Tester(HostBetween(), (torch.randn(3, 8),)).lower(
        min_block_size=1, torch_executed_ops=["aten.sigmoid.default"]
    )


@pytest.fixture(scope="module")
def casts_cat():
    torch.manual_seed(5)
    return Tester(CastsCat(), (torch.randn(2, 3), torch.randint(-50, 50, (2, 3)))).lower(min_block_size=1)


@pytest.fixture(scope="module")
def three_outputs():
    torch.manual_seed(6)
    return Tester(ThreeOutputs(), (torch.randn(3, 8),)).lower(min_block_size=1)


@pytest.fixture(scope="module")
def scalar_constant():
    return Tester(ScalarConstant(), (torch.randn(4, 5),)).lower(min_block_size=1)


def test_mlp(mlp_tester):
    """addmm (edge) vs linear (eager): last-bit differences, so tolerance, not bit equality."""
    mlp_tester.check_partitions(1).check_delegated_all()
    mlp_tester.run_both(torch.randn(2, 8)).check_parity()
    assert mlp_tester.runner.last_plan.executor == "pytorch"


def test_conv_net_is_bit_exact(conv_tester):
    """Convolution and batch norm decompose to the same aten kernels: observed bit-exact."""
    conv_tester.check_partitions(1).check_delegated_all()
    conv_tester.run_both(torch.randn(2, 3, 8, 8)).check_parity(exact=True)
    assert conv_tester.runner_outputs[0].shape == (2, 4, 3, 3)


def test_transformer_block(block):
    """LayerNorm, softmax, matmul, GELU and residuals, all in one partition; tolerance (addmm, reductions)."""
    block.check_partitions(1).check_delegated_all()
    block.run_both(torch.randn(2, 5, 16)).check_parity()


def test_host_op_between_two_partitions(host_between):
    """sigmoid forced onto the host (torch_executed_ops) splits the graph into two delegates; the host op runs
    on ExecuTorch's CPU kernels between them."""
    host_between.check_partitions(2).check_host_nodes(["aten_sigmoid_default"])
    assert "torch_executed_ops" in str(host_between.report.host_nodes["aten_sigmoid_default"])
    host_between.run_both(torch.randn(3, 8)).check_parity()
    # Every delegate's plan, in call order: the first reads the caller's x, the second the host op's output.
    x = host_between.last_inputs[0]
    first, second = host_between.runner.last_plans
    assert first.inputs[0].action == second.inputs[0].action == "share"
    assert first.inputs[0].data_ptr == x.data_ptr() != second.inputs[0].data_ptr
    # The method's input 0 is the first delegate's input 0; its output the second delegate's (copied out).
    plan = host_between.runner.last_plan
    assert plan.inputs[0].data_ptr == x.data_ptr() and plan.inputs[0].action == "share"
    assert plan.outputs[0].data_ptr == second.outputs[0].data_ptr
    assert plan.bytes_copied == first.bytes_copied + second.bytes_copied + plan.boundary_bytes


@pytest.mark.parametrize("batch", [DYNAMIC_BATCH[0], 7, DYNAMIC_BATCH[1]])
def test_dynamic_batch(dynamic_tester, batch):
    """One program, several batch sizes in the exported range (both ends included)."""
    dynamic_tester.check_partitions(1).check_delegated_all()
    dynamic_tester.run_both(torch.randn(batch, 8)).check_parity()
    assert dynamic_tester.runner_outputs[0].shape == (batch, 4)
    assert dynamic_tester.runner.last_plan.inputs[0].bytes == 0  # shared at every size


def test_int_casts_and_cat_are_exact(casts_cat):
    """float -> int32 truncation, int64 -> int32, cat of int32 and of float32: exact by nature."""
    casts_cat.check_partitions(1).check_delegated_all()
    x = torch.randn(2, 3) * 3
    ids = torch.randint(-50, 50, (2, 3))
    casts_cat.run_both([x, ids]).check_parity(exact=True)
    assert [o.dtype for o in casts_cat.runner_outputs] == [torch.int32, torch.float32]


def test_multiple_outputs(three_outputs):
    """Three outputs of different shapes come back in the model's order (tolerance: addmm, sum)."""
    three_outputs.check_partitions(1).check_delegated_all()
    three_outputs.run_both(torch.randn(3, 8)).check_parity()
    assert [tuple(o.shape) for o in three_outputs.runner_outputs] == [(3, 4), (3,), (3, 8)]
    assert len(three_outputs.runner.last_plan.outputs) == 3


def test_python_scalar_constant_is_exact(scalar_constant):
    """``x * 2.0 + 1``: the Python scalars become constants inside the delegate; elementwise, so exact."""
    scalar_constant.check_partitions(1).check_delegated_all()
    x = torch.randn(4, 5)
    scalar_constant.run_both([x]).check_parity(exact=True)
    # The scalars are baked in (or passed as constant inputs): a different x gives the new result.
    scalar_constant.run_both([x + 1]).check_parity(exact=True)


def test_runs_are_repeatable(mlp_tester):
    """Same input, same bits; a changed input (same buffer) gives the changed result (nothing stale)."""
    x = torch.randn(2, 8)
    first = mlp_tester.runner.run([x])[0]
    assert torch.equal(mlp_tester.runner.run([x])[0], first)
    x.mul_(-1)
    changed = mlp_tester.runner.run([x])[0]
    assert not torch.equal(changed, first)
    torch.testing.assert_close(changed, mlp_tester.expected([x])[0], rtol=1e-5, atol=1e-6)
