"""A cache written with ``cache.narrow(2, start, S).copy_(rows)`` at a position read with ``.item()`` (ExecuTorch's
Gemma 4 KV cache) is updated in place, like an ``index_put`` at ``input_pos``: the delegate checks the write
(``start + S`` within the cache) before the engine runs, and the engine attends over ``narrow(cache, 2, 0,
start + S)``, a length read from the data."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import et_tensorrt
from et_tensorrt.backend.state_lifting import START, find_states
from et_tensorrt.errors import RunnerError

CACHE = 16


class SliceWriteCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 2, CACHE, 8), persistent=False)
        self.proj = torch.nn.Linear(8, 16)

    def forward(self, x, input_pos):
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start + x.size(1) <= CACHE)
        rows = self.proj(x).view(1, x.size(1), 2, 8).transpose(1, 2)
        self.k_cache.narrow(2, start, x.size(1)).copy_(rows)
        return self.k_cache.narrow(2, 0, start + x.size(1)).sum(2)


def _program(module):
    length = Dim("length", min=1, max=CACHE - 1)
    return torch.export.export(
        module, (torch.randn(1, 3, 8), torch.arange(3)), dynamic_shapes=({1: length}, {0: length})
    )


def test_the_slice_write_is_an_in_place_write_guarded_by_the_start():
    torch.manual_seed(0)
    (state,) = find_states(_program(SliceWriteCache().eval()).run_decompositions({}))
    assert state.in_place, state.reason
    assert state.guard.kind == START and state.guard.input == 1  # element 0 of input_pos
    assert (state.guard.length_input, state.guard.length_dim) == (0, 1)  # the write is x.size(1) rows


@pytest.fixture(scope="module")
def lowered():
    torch.manual_seed(0)
    module = SliceWriteCache().eval()
    eager = SliceWriteCache().eval()
    eager.load_state_dict(module.state_dict())
    return et_tensorrt.lower(_program(module)), eager


@pytest.mark.slow
def test_decodes_like_eager_with_the_cache_in_place(lowered):
    pte, eager = lowered
    runner, start = et_tensorrt.Runner(pte), 0
    for length in (3, 1, 1, 2):
        x, pos = torch.randn(1, length, 8), torch.arange(start, start + length)
        got = runner.run([x, pos])[0]
        with torch.no_grad():
            assert (got - eager(x, pos)).abs().max() < 1e-5
        (plan,) = runner.last_plans
        assert [(s.update, s.bytes) for s in plan.states] == [("in place", 0)]
        start += length


@pytest.mark.slow
def test_a_write_past_the_cache_is_refused_and_writes_nothing(lowered):
    pte, eager = lowered
    runner = et_tensorrt.Runner(pte)
    with pytest.raises(RunnerError, match=r"(?s)position.*\b14\b.*cache"):
        runner.run([torch.randn(1, 3, 8), torch.arange(14, 17)])
    x, pos = torch.randn(1, 2, 8), torch.arange(2)
    with torch.no_grad():
        assert (runner.run([x, pos])[0] - eager(x, pos)).abs().max() < 1e-5
