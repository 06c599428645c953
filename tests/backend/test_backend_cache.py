"""The engine build cache: re-lowering an unchanged model rebuilds nothing; settings change the key."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend import build_cache, preprocess
from et_tensorrt.testing import SplitPartitioner, Tester, check_blob


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def test_second_lowering_is_a_cache_hit(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path / "engines"))
    torch.manual_seed(0)
    model = Small()
    args = (torch.randn(2, 6),)
    built, hits = preprocess.stats["built"], preprocess.stats["cache_hits"]
    with caplog.at_level(logging.INFO, logger="et_tensorrt"):
        [(first, part)] = Tester(model, args).lower_with(SplitPartitioner()).lowered_blobs()
    assert (preprocess.stats["built"], preprocess.stats["cache_hits"]) == (built + 1, hits)
    assert len(list((tmp_path / "engines").glob("*.engine"))) == 1
    assert any("engine 1/1:" in r.getMessage() and "KiB" in r.getMessage() for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="et_tensorrt"):
        [(second, _)] = Tester(model, args).lower_with(SplitPartitioner()).lowered_blobs()
    assert (preprocess.stats["built"], preprocess.stats["cache_hits"]) == (built + 1, hits + 1)
    assert any("cache hit" in r.getMessage() for r in caplog.records)
    assert second.engine == first.engine
    assert second.metadata["engine_cache_key"] == first.metadata["engine_cache_key"]
    check_blob(second, part)

    # other builder settings -> another key -> a real build (also: fp16 and explicit target archs build)
    fp16 = SplitPartitioner({cs.PRECISION: "fp16", cs.TARGET_ARCHS: "sm80,sm86"})
    [(third, part3)] = Tester(model, args).lower_with(fp16).lowered_blobs()
    assert preprocess.stats["built"] == built + 2
    assert third.metadata["engine_cache_key"] != first.metadata["engine_cache_key"]
    assert third.metadata["precision"] == "fp16" and third.metadata["target_archs"] == ["sm80", "sm86"]
    check_blob(third, part3)
    assert third.inputs[0].dtype == first.inputs[0].dtype == 6  # I/O stays fp32; compute is fp16


def test_cache_key_covers_inputs():
    k = build_cache.cache_key(b"onnx", {"precision": "fp32"}, "tensorrt_rtx", "1.7")
    assert k == build_cache.cache_key(b"onnx", {"precision": "fp32"}, "tensorrt_rtx", "1.7")
    assert k != build_cache.cache_key(b"onnx2", {"precision": "fp32"}, "tensorrt_rtx", "1.7")
    assert k != build_cache.cache_key(b"onnx", {"precision": "fp16"}, "tensorrt_rtx", "1.7")
    assert k != build_cache.cache_key(b"onnx", {"precision": "fp32"}, "tensorrt", "1.7")
    assert k != build_cache.cache_key(b"onnx", {"precision": "fp32"}, "tensorrt_rtx", "1.8")


def test_default_cache_dir(monkeypatch):
    monkeypatch.delenv(build_cache.ENV_CACHE_DIR, raising=False)
    assert build_cache.cache_dir() == Path.home() / ".cache" / "et_tensorrt" / "engines"
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, "/tmp/x")
    assert build_cache.cache_dir() == Path("/tmp/x")
