"""A small MLP lowered once for the security tests (the crafted-file and verification tests start from it)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def lowered(_engine_cache_dir):
    """(program bytes, model, example input): Linear(8, 16) -> ReLU -> Linear(16, 4), fully delegated."""
    import et_tensorrt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    return et_tensorrt.lower(model, (x,), min_block_size=1), model, x
