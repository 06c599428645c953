"""Fixtures for the runtime tests: the fluent ``Tester`` (et_tensorrt/testing/tester.py) and three
models (tests/models.py) lowered once per session (MLP, conv net, dynamic-batch head), shared by the parity, zero-copy,
bad-input, layout and placement tests.

Lowering costs ~5-15 s per model here (ONNX export and edge decompositions dominate): models used by
one file only are lowered once per module (``scope="module"`` fixtures), the shared ones once per session.
"""

from __future__ import annotations

import pytest
import torch
from models import DYNAMIC_BATCH, MLP, ConvNet, DynamicHead

from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.testing import Tester


@pytest.fixture(autouse=True)
def _no_fallback_override(monkeypatch):
    """Every test starts from the default fallback policy (only the FALLBACK test sets it)."""
    monkeypatch.delenv("ET_TENSORRT_FALLBACK", raising=False)


@pytest.fixture(scope="session")
def mlp_tester(_engine_cache_dir) -> Tester:
    """An MLP (8 -> 16 -> 4) lowered with zero-copy inputs (the default), static shape (2, 8)."""
    torch.manual_seed(0)
    return Tester(MLP(), (torch.randn(2, 8),)).lower(min_block_size=1)


@pytest.fixture(scope="session")
def conv_tester(_engine_cache_dir) -> Tester:
    """Conv -> BatchNorm -> ReLU -> strided conv, input (2, 3, 8, 8)."""
    torch.manual_seed(1)
    model = ConvNet().eval()
    with torch.no_grad():  # non-trivial running statistics, so BatchNorm is not the identity
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return Tester(model, (torch.randn(2, 3, 8, 8),)).lower(min_block_size=1)


@pytest.fixture(scope="session")
def dynamic_tester(_engine_cache_dir) -> Tester:
    """Linear -> tanh -> * 0.5 with a dynamic batch in DYNAMIC_BATCH (example batch 4)."""
    torch.manual_seed(2)
    lo, hi = DYNAMIC_BATCH
    return Tester(
        DynamicHead(), (torch.randn(4, 8),), dynamic_shapes=({0: torch.export.Dim("batch", min=lo, max=hi)},)
    ).lower(min_block_size=1)


@pytest.fixture(scope="session")
def mlp_blob(mlp_tester) -> bytes:
    """The MLP's one delegate blob, read out of its .pte bytes."""
    blobs = delegate_blobs(mlp_tester.pte)
    assert len(blobs) == 1, len(blobs)
    return blobs[0]
