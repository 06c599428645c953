"""A small MLP lowered once for the security tests (the crafted-file and verification tests start from it)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def lowered(_engine_cache_dir):
    """(program bytes, model, example input): Linear(8, 16) -> ReLU -> Linear(16, 4), fully delegated."""
    from models import MLP

    from et_tensorrt.testing import Tester

    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(2, 8)
    tester = Tester(model, (x,)).lower(min_block_size=1).check_partitions(1).check_delegated_all()
    return tester.pte, tester.original_module, x
