"""ExecuTorch's cache-update custom ops (``llama.update_cache``, ``llama.update_cache_with_indices``) as
``partition/llama_custom_ops.py`` rewrites them before lowering, against ExecuTorch's CPU kernels: as ``torch.export``
leaves them and wrapped in ``auto_functionalized_v2`` (what ExecuTorch's LLM export hands on after its
``run_decompositions({})``). The models that use them: tests/models/test_executorch_examples.py."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.partition import llama_custom_ops, pre_decomposition

pytest.importorskip("executorch.extension.llm.custom_ops.custom_ops")  # registers the ops and their CPU kernels


class _CacheWrite(torch.nn.Module):
    """A ``[B, L, H, D]`` cache buffer written by one of ExecuTorch's cache-update ops, then read."""

    def __init__(self, with_indices: bool):
        super().__init__()
        self.with_indices = with_indices
        self.register_buffer("cache", torch.randn(2, 8, 2, 4, generator=torch.Generator().manual_seed(1)))

    def forward(self, value, where):
        if self.with_indices:
            torch.ops.llama.update_cache_with_indices(value, self.cache, 0, where)
        else:
            torch.ops.llama.update_cache(value, self.cache, where[0].item())
        return self.cache * 2


@pytest.mark.parametrize("functionalized", [False, True], ids=["as exported", "after run_decompositions"])
@pytest.mark.parametrize("with_indices", [False, True], ids=["update_cache", "update_cache_with_indices"])
def test_cache_update_decomposition_is_the_kernel(with_indices, functionalized):
    """The rewrite of ``llama.update_cache(_with_indices)`` against ExecuTorch's CPU kernel, for the op as
    ``torch.export`` leaves it and wrapped in ``auto_functionalized_v2`` (what ExecuTorch's LLM export hands on):
    the cache written where the kernel writes it, the op gone."""
    torch.manual_seed(0)
    value = torch.randn(2, 3, 2, 4)
    where = torch.tensor([[5, 6, 7], [7, 0, 1]]) if with_indices else torch.tensor([4])
    program = torch.export.export(_CacheWrite(with_indices), (value, where))
    if functionalized:
        program = program.run_decompositions({})
    rewritten = pre_decomposition.transform(program)
    assert not any(llama_custom_ops.is_cache_update(n) for n in rewritten.graph.nodes)
    kernel, module = _CacheWrite(with_indices), rewritten.module()
    want = kernel(value, where)
    got = module(value, where)
    assert (got - want).abs().max() < 1e-6 and (module.cache - kernel.cache).abs().max() < 1e-6
    assert (got - _CacheWrite(with_indices).cache * 2).abs().max() > 0.1  # the write happened
