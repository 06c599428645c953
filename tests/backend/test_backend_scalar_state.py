"""A 0-dim mutated buffer with a nonzero initial value (a step counter, a running scale) is a state like any other:
lowered as two methods that share it (its initial contents compared and stored as bytes: a 0-dim tensor has no
byte view of its own), counted on by both, and back at its initial value after ``Runner.reset``."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.format.state_table import initial_bytes


class Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.tensor(3.0))
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.count.add_(1.0)
        return torch.relu(self.linear(x)) * self.count + 1


@pytest.fixture(scope="module")
def counted():
    torch.manual_seed(0)
    model = Counted().eval()
    methods = {n: torch.export.export(model, (torch.randn(rows, 4),)) for n, rows in (("a", 2), ("b", 3))}
    return model, et_tensorrt.lower(methods)


def test_initial_bytes_of_a_0_dim_tensor():
    assert initial_bytes(torch.tensor(3.0)) == torch.tensor([3.0]).numpy().tobytes()
    assert initial_bytes(torch.tensor(0, dtype=torch.int64)) is None  # zeros: nothing stored


def test_both_methods_count_on_the_one_state_and_reset_restores_it(counted):
    model, pte = counted
    runner = Runner(pte)
    x, y = torch.randn(2, 4), torch.randn(3, 4)

    def expected(inputs, count):
        return torch.relu(model.linear(inputs)) * count + 1

    with torch.no_grad():
        assert torch.allclose(runner.run([x], "a")[0], expected(x, 4.0))
        assert torch.allclose(runner.run([y], "b")[0], expected(y, 5.0))  # b reads what a left
        (state,) = runner.last_plans[0].states
        assert state.name == "count" and list(state.methods) == ["a", "b"]
        runner.reset()
        assert torch.allclose(runner.run([y], "b")[0], expected(y, 4.0))  # from 3 again
