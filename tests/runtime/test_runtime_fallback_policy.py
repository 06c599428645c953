"""ET_TENSORRT_FALLBACK accepts pytorch (the default) or error; anything else is refused by name."""

from __future__ import annotations

import pytest

from et_tensorrt.runtime.executors import fallback_policy


@pytest.mark.parametrize(
    "value, policy", [(None, "pytorch"), ("", "pytorch"), ("PyTorch", "pytorch"), ("error", "error")]
)
def test_known_values(monkeypatch, value, policy):
    if value is None:
        monkeypatch.delenv("ET_TENSORRT_FALLBACK", raising=False)
    else:
        monkeypatch.setenv("ET_TENSORRT_FALLBACK", value)
    assert fallback_policy() == policy


def test_other_values_are_refused(monkeypatch):
    monkeypatch.setenv("ET_TENSORRT_FALLBACK", "bogus")
    with pytest.raises(ValueError, match="ET_TENSORRT_FALLBACK='bogus' is not one of pytorch, error"):
        fallback_policy()
