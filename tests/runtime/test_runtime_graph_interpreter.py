"""The PyTorch executor's C++ GraphInterpreter computes exactly what the graph's own Python code computes
(same aten kernels, so bit-exact), on graphs that exercise every kind of step and argument: weights,
Python numbers where a Tensor is taken (wrapped numbers keep eager's type promotion), tensor lists,
optional-tensor lists, multi-output ops with getitem, size arithmetic on dynamic dims, defaults and kwargs."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.runtime import graph_program


def _both(model, inputs, dynamic_shapes=None, call_inputs=None):
    program = torch.export.export(model.eval(), tuple(inputs), dynamic_shapes=dynamic_shapes).run_decompositions()
    lifted = graph_program.lifted_tensors(program, torch.device("cpu"))
    native = graph_program.encode(program, lifted)
    call_inputs = list(call_inputs or inputs)
    expected = program.module()(*call_inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    return native.run(call_inputs), expected


class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 0.5))

    def forward(self, x, ids):
        h = torch.relu(self.lin(x)) * self.scale + 1  # weights, a buffer, a Python number as a Tensor
        values, where = h.max(dim=-1)  # two returns: getitem steps
        picked = h[ids]  # index.Tensor: an optional-tensor list
        both = torch.cat([h, picked], dim=0)  # a tensor list
        return both.sum(dim=0, keepdim=True), values, where


def test_mixed_graph_is_bit_exact():
    torch.manual_seed(0)
    got, expected = _both(Mixed(), [torch.randn(4, 8), torch.tensor([3, 0, 1])])
    assert len(got) == 3
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and torch.equal(g, e)


class ScalarPromotion(torch.nn.Module):
    def forward(self, half, ints):
        # wrapped numbers do not promote a 0-dim half tensor to float64, nor int32 to int64
        return half * 2.5, ints + 3, ints * 0.5


def test_python_numbers_promote_as_in_eager():
    got, expected = _both(
        ScalarPromotion(), [torch.tensor(1.5, dtype=torch.float16), torch.arange(4, dtype=torch.int32)]
    )
    assert [g.dtype for g in got] == [e.dtype for e in expected] == [torch.float16, torch.int32, torch.float32]
    for g, e in zip(got, expected):
        assert torch.equal(g, e)


class Reshape(torch.nn.Module):
    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        return x.reshape(b * t // 2, 2).sum(dim=1).view(b, t // 2) - (t % 3)


def test_size_arithmetic_on_dynamic_dims():
    dims = ({0: torch.export.Dim("b", min=1, max=16), 1: torch.export.Dim("t", min=1, max=32) * 2},)
    for shape in [(3, 4), (2, 6), (5, 10)]:
        x = torch.randn(*shape)
        got, expected = _both(Reshape(), [torch.randn(2, 8)], dims, call_inputs=[x])
        assert torch.equal(got[0], expected[0]) and got[0].shape == expected[0].shape


def test_a_higher_order_op_is_not_encodable_and_names_the_node():
    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda y: y + 1, lambda y: y - 1, (x,))

    program = torch.export.export(Cond(), (torch.randn(3),))
    with pytest.raises(graph_program.NotEncodable, match="true_graph|cond|get_attr"):
        graph_program.encode(program, graph_program.lifted_tensors(program, torch.device("cpu")))


def test_the_delegate_uses_the_interpreter(mlp_tester):
    """Lowered partitions on this machine run through the C++ path: no Python per call."""
    mlp_tester.runner.run([torch.randn(2, 8)])
    (plan,) = mlp_tester.runner.last_plans
    assert plan.executor == "pytorch" and plan.executor_detail == "C++ graph interpreter"
