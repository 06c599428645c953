"""No copies at load (issue 17): the delegate keeps ExecuTorch's processed buffer, and the PyTorch executor's
weights are views of it. Observable without timing: a Runner maps the .pte, so every weight the executor
computes with lies in a mapping of the .pte file itself (/proc/self/maps), not in anonymous memory."""

from __future__ import annotations

import gc

import pytest
import torch
from models import MLP

from et_tensorrt import lower
from et_tensorrt.runtime import executors
from et_tensorrt.runtime.runner import Runner


def _file_mappings(path: str) -> list[tuple[int, int]]:
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path:
                lo, hi = (int(v, 16) for v in fields[0].split("-"))
                spans.append((lo, hi))
    return spans


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    torch.manual_seed(0)
    model = MLP(64, 256, 8).eval()
    x = torch.randn(4, 64)
    path = tmp_path_factory.mktemp("views") / "wide.pte"
    path.write_bytes(lower(torch.export.export(model, (x,))))
    return str(path), model, x


def test_fallback_weights_are_views_of_the_mapped_pte(pte, monkeypatch):
    path, model, x = pte
    seen = {}
    create = executors.pytorch_executor

    def spy(parsed, device, reason):
        executor = create(parsed, device, reason)
        seen["views"] = [t.data_ptr() for t in parsed["weight_views"]]
        seen["lifted"] = [t.data_ptr() for t in executor._lifted]
        seen["maps"] = _file_mappings(path)
        return executor

    monkeypatch.setattr(executors, "pytorch_executor", spy)
    runner = Runner(path)
    (out,) = runner.run([x])
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    assert len(seen["views"]) == 4 and seen["maps"], seen
    # Every weight lives in the .pte's own pages (mapped, never copied), and the executor computes with them.
    for ptr in seen["views"]:
        assert any(lo <= ptr < hi for lo, hi in seen["maps"]), (hex(ptr), seen["maps"])
    assert sorted(seen["lifted"]) == sorted(seen["views"])
    runner.close()
    del runner
    gc.collect()


def test_views_keep_the_buffer_alive_after_the_delegate_is_gone(pte, monkeypatch):
    """A weight view that outlives its delegate still reads the right bytes: each view holds the buffer."""
    path, model, x = pte
    kept = {}
    create = executors.pytorch_executor

    def spy(parsed, device, reason):
        kept["views"] = list(parsed["weight_views"])
        return create(parsed, device, reason)

    monkeypatch.setattr(executors, "pytorch_executor", spy)
    runner = Runner(path)
    runner.run([x])
    runner.close()
    del runner
    gc.collect()
    by_shape = {tuple(t.shape): t for t in kept["views"]}
    torch.testing.assert_close(by_shape[(256, 64)], model.fc1.weight.detach(), rtol=0, atol=0)
