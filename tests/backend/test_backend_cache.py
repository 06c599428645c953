"""The build cache, keyed before the ONNX export: a hit skips export, validation and build and writes the
same blob; every input of the key invalidates it; corrupt entries are misses; the folder stays bounded."""

from __future__ import annotations

import gc
import hashlib
import logging
import os
from pathlib import Path

import pytest
import torch

from et_tensorrt import compile_specs as cs
from et_tensorrt import trt
from et_tensorrt.backend import preprocess
from et_tensorrt.backend.stages import build as build_stage
from et_tensorrt.backend.stages import to_onnx as onnx_stage
from et_tensorrt.backend.stages import validate as validate_stage
from et_tensorrt.builder import build_cache
from et_tensorrt.format import blob as B
from et_tensorrt.testing import SplitPartitioner, Tester, check_blob

# METADATA that says how this blob was made (timings, cache outcome), not what it holds.
_HOW_MADE = {"onnx_seconds", "build_seconds", "cache", "cache_seconds"}


class Small(torch.nn.Module):
    def __init__(self, act=torch.tanh):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "engines"
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(folder))
    monkeypatch.delenv(build_cache.ENV_CACHE_MAX_BYTES, raising=False)
    return folder


def _model(seed=0, act=torch.tanh):
    torch.manual_seed(seed)
    return Small(act).eval()


def lower(model, args, dynamic_shapes=None, options=None) -> Tester:
    return Tester(model, args, dynamic_shapes).lower_with(SplitPartitioner(options))


def _one(tester: Tester):
    [(blob, part)] = tester.lowered_blobs()
    return blob, part


def _counts():
    return preprocess.stats["built"], preprocess.stats["cache_hits"]


def test_a_hit_skips_onnx_export_and_build_and_writes_the_same_blob(cache, monkeypatch, caplog):
    args = (torch.randn(2, 6),)
    built, hits = _counts()
    first, part = _one(lower(_model(), args))
    assert _counts() == (built + 1, hits)
    assert first.metadata["cache"] == "miss" and first.metadata["onnx_seconds"] >= 0
    assert len(list(cache.glob(f"*{build_cache.SUFFIX}"))) == 1

    def no_export(*a, **k):
        raise AssertionError("a cache hit must not export ONNX")

    monkeypatch.setattr(onnx_stage, "export_onnx", no_export)
    monkeypatch.setattr(build_stage, "build_engine", no_export)
    monkeypatch.setattr(validate_stage, "validate_onnx", no_export)
    with caplog.at_level(logging.INFO, logger="et_tensorrt"):
        second, _ = _one(lower(_model(), args))
    assert _counts() == (built + 1, hits + 1)
    assert any("from the build cache" in r.getMessage() for r in caplog.records)
    assert second.metadata["cache"] == "hit" and "onnx_seconds" not in second.metadata
    # the same blob: I/O table, engine, program and every recorded fact but how it was made
    assert (second.io, second.engine, second.graph, second.weights) == (
        first.io,
        first.engine,
        first.graph,
        first.weights,
    )
    strip = lambda m: {k: v for k, v in m.items() if k not in _HOW_MADE}  # noqa: E731
    assert strip(second.metadata) == strip(first.metadata)
    assert second.metadata["validation_max_abs_error"] == first.metadata["validation_max_abs_error"]
    check_blob(second, part)


def test_cache_off_neither_reads_nor_writes(cache):
    args = (torch.randn(2, 6),)
    blob, _ = _one(lower(_model(), args, options={cs.CACHE: False}))
    assert blob.metadata["cache"] == "off" and "engine_cache_key" not in blob.metadata
    assert not cache.exists() or not list(cache.iterdir())


# Each changes one input of the key; the baseline is _model(0) on a static [4, 6] input, fp32, default targets.
_CHANGES = {
    "graph": [{"model": lambda: _model(act=torch.sigmoid)}],
    "weights": [{"model": lambda: _model(seed=1)}],
    "dim range": [
        {"dynamic_shapes": lambda: ({0: torch.export.Dim("b", min=1, max=8)},)},
        {"dynamic_shapes": lambda: ({0: torch.export.Dim("b", min=1, max=16)},)},
    ],
    "precision": [{"options": {cs.PRECISION: "fp16"}}],
    "target archs": [{"options": {cs.TARGET_ARCHS: "sm86"}}, {"options": {cs.TARGET_ARCHS: "sm89"}}],
    "trt version": [{"trt_version": "0.0.1-other"}],
}


@pytest.mark.parametrize("change", list(_CHANGES))
def test_every_key_input_invalidates(change, cache, monkeypatch):
    args = (torch.randn(4, 6),)
    baseline, _ = _one(lower(_model(), args))
    again, _ = _one(lower(_model(), args))
    assert (baseline.metadata["cache"], again.metadata["cache"]) == ("miss", "hit")

    keys = {baseline.metadata["engine_cache_key"]}
    for spec in _CHANGES[change]:
        if "trt_version" in spec:
            monkeypatch.setattr(trt, "version", lambda version=spec["trt_version"]: version)
        built, hits = _counts()
        model = spec.get("model", _model)()
        dynamic = spec.get("dynamic_shapes", lambda: None)()
        changed, part = _one(lower(model, args, dynamic_shapes=dynamic, options=spec.get("options")))
        assert changed.metadata["cache"] == "miss", (change, spec)
        assert _counts() == (built + 1, hits), (change, spec)
        keys.add(changed.metadata["engine_cache_key"])
        check_blob(changed, part)
    assert len(keys) == 1 + len(_CHANGES[change])
    assert len(list(cache.glob(f"*{build_cache.SUFFIX}"))) == len(keys)


def test_a_lowering_that_asks_for_validation_does_not_take_an_unvalidated_entry(cache):
    args = (torch.randn(2, 6),)
    unchecked, _ = _one(lower(_model(), args, options={cs.VALIDATE: False}))
    assert "validation_max_abs_error" not in unchecked.metadata
    built, _ = _counts()
    checked, _ = _one(lower(_model(), args))  # the test partitioner validates by default
    assert checked.metadata["cache"] == "miss" and _counts()[0] == built + 1
    assert "validation_max_abs_error" in checked.metadata
    again, _ = _one(lower(_model(), args, options={cs.VALIDATE: False}))
    assert again.metadata["cache"] == "hit" and "validation_max_abs_error" not in again.metadata


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage"])
def test_a_corrupt_entry_is_a_miss_and_is_replaced(damage, cache, caplog):
    args = (torch.randn(2, 6),)
    first, _ = _one(lower(_model(), args))
    [path] = cache.glob(f"*{build_cache.SUFFIX}")
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped byte":
        data[build_cache._HEAD.size + 100] ^= 0xFF  # inside the engine: only the checksum can tell
    else:
        data = bytearray(b"not a cache entry")
    path.write_bytes(bytes(data))
    corrupt = build_cache.stats["corrupt"]
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        second, _ = _one(lower(_model(), args))
    assert build_cache.stats["corrupt"] == corrupt + 1
    assert any("build cache: removing" in r.getMessage() for r in caplog.records)
    assert second.metadata["cache"] == "miss" and second.engine == first.engine
    third, _ = _one(lower(_model(), args))
    assert third.metadata["cache"] == "hit"


def test_recording_for_check_exports_the_onnx_and_keeps_the_hit_only_if_it_is_the_same(cache, monkeypatch):
    args = (torch.randn(2, 6),)
    _one(lower(_model(), args))
    with preprocess.record_exports() as exports:
        blob, _ = _one(lower(_model(), args))
    assert blob.metadata["cache"] == "hit"
    (recorded,) = exports.values()
    assert recorded.export.model_bytes[:2]  # the ONNX check runs has been exported

    real = onnx_stage.export_onnx

    def other_onnx(*a, **k):  # an exporter that no longer writes the bytes the engine was built from
        export = real(*a, **k)
        export.model.producer_version += "-other"
        return export

    monkeypatch.setattr(onnx_stage, "export_onnx", other_onnx)
    built, _ = _counts()
    with preprocess.record_exports() as exports:
        rebuilt, _ = _one(lower(_model(), args))
    assert rebuilt.metadata["cache"] == "miss" and _counts()[0] == built + 1
    (recorded,) = exports.values()
    assert b"-other" in recorded.export.model_bytes  # check runs the ONNX this engine was built from


_MODEL_SOURCE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))
"""


def _model_from(folder: Path) -> torch.nn.Module:
    """The same model code, imported from a file in ``folder`` (a checkout of its own)."""
    import importlib.util

    folder.mkdir()
    (folder / "net.py").write_text(_MODEL_SOURCE)
    spec = importlib.util.spec_from_file_location("net", folder / "net.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Net().eval()


def test_the_same_code_in_two_checkouts_shares_one_entry(cache, tmp_path):
    """The key and the ONNX the engine was built from hold no source location: `check` from a second checkout
    takes the first one's engine (it was evicted, "the ONNX export differs", when stack traces named the files)."""
    args = (torch.randn(2, 6),)
    first, _ = _one(lower(_model_from(tmp_path / "checkout_a"), args))
    with preprocess.record_exports() as exports:
        second, _ = _one(lower(_model_from(tmp_path / "checkout_b"), args))
    assert (first.metadata["cache"], second.metadata["cache"]) == ("miss", "hit")
    (recorded,) = exports.values()
    assert b"checkout_" not in recorded.export.model_bytes
    assert len(list(cache.glob(f"*{build_cache.SUFFIX}"))) == 1


def _entry(key: str, size: int) -> build_cache.Entry:
    io = [B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange.static(2),))]
    return build_cache.Entry(key=key, engine=os.urandom(size), io=io, info={"label": key[:4]})


def test_an_entry_holds_the_engine_in_its_file_and_the_recipe_beside_it(cache):
    """Format 3: the engine (as a builder streams it), the RECIPE, the header last; a loaded engine is a region of
    the entry file, never read whole."""
    from et_tensorrt.builder.held_data import FileRegion

    entry = _entry("a" * 64, 3000)
    entry.recipe, entry.build_seconds = b"recipe" * 100, 1.25
    assert build_cache.store(entry)
    loaded = build_cache.load(entry.key)
    assert isinstance(loaded.engine, FileRegion) and loaded.engine.to_bytes() == entry.engine
    assert (
        bytes(loaded.engine.view()) == entry.engine and loaded.engine.sha256() == hashlib.sha256(entry.engine).digest()
    )
    assert loaded.recipe == entry.recipe and loaded.build_seconds == 1.25
    (listed,) = build_cache.entries()
    assert listed.engine_bytes == 3000 and listed.size > 3000 + len(entry.recipe)
    head = (cache / f"{entry.key}{build_cache.SUFFIX}").read_bytes()[: build_cache._HEAD.size]
    assert build_cache._HEAD.unpack(head)[:2] == (b"ETRTCACH", build_cache.FORMAT_VERSION)


def test_lru_eviction_keeps_the_folder_under_its_limit(cache, monkeypatch):
    monkeypatch.setenv(build_cache.ENV_CACHE_MAX_BYTES, "4K")  # three entries of ~1.2 KB fit, four do not
    assert build_cache.max_bytes() == 4096
    keys = [f"{i:064x}" for i in range(4)]
    for i, key in enumerate(keys[:3]):
        assert build_cache.store(_entry(key, 800))
        os.utime(cache / f"{key}{build_cache.SUFFIX}", (1000 + i, 1000 + i))  # an LRU order to test
    assert build_cache.load(keys[0]) is not None  # a hit makes keys[0] the most recently used
    assert build_cache.store(_entry(keys[3], 800))  # over the limit: keys[1], the least recently used, goes
    assert {e.key for e in build_cache.entries()} == {keys[0], keys[2], keys[3]}
    assert build_cache.total_bytes() <= 4096
    assert not build_cache.store(_entry("f" * 64, 5000))  # larger than the whole limit: not stored
    monkeypatch.setenv(build_cache.ENV_CACHE_MAX_BYTES, "0")
    assert not build_cache.store(_entry("e" * 64, 10))
    gc.collect()  # what is not stored leaves no file behind, and a loaded entry's private link goes with it
    assert [p.name for p in cache.iterdir() if p.name.startswith((".tmp-", build_cache.HELD_PREFIX))] == []


@pytest.mark.parametrize(
    "text, value", [("1000", 1000), ("2k", 2048), ("3 MiB", 3 * 2**20), ("1G", 2**30), ("0", 0), ("", None)]
)
def test_max_bytes_from_the_environment(text, value, monkeypatch):
    monkeypatch.setenv(build_cache.ENV_CACHE_MAX_BYTES, text)
    assert build_cache.max_bytes() == (build_cache.DEFAULT_MAX_BYTES if value is None else value)


def test_an_unreadable_limit_is_one_clear_error(monkeypatch):
    from et_tensorrt.errors import OptionError

    monkeypatch.setenv(build_cache.ENV_CACHE_MAX_BYTES, "lots")
    with pytest.raises(OptionError, match="ET_TENSORRT_CACHE_MAX_BYTES='lots' is not a size"):
        build_cache.max_bytes()


def test_default_cache_dir(monkeypatch):
    monkeypatch.delenv(build_cache.ENV_CACHE_DIR, raising=False)
    assert build_cache.cache_dir() == Path.home() / ".cache" / "et_tensorrt" / "engines"
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, "/tmp/x")
    assert build_cache.cache_dir() == Path("/tmp/x")


def test_clear_removes_entries_legacy_files_and_temp_files(cache):
    build_cache.store(_entry("a" * 64, 100))
    (cache / ("b" * 64 + ".engine")).write_bytes(b"old engine")
    (cache / ".tmp-dead.etrc").write_bytes(b"partial")
    (cache / "notes.txt").write_text("not ours")
    assert build_cache.clear()[0] == 3
    assert [p.name for p in cache.iterdir()] == ["notes.txt"]


def test_a_partition_lowered_again_in_one_process_is_a_hit_however_its_symbols_are_numbered(cache):
    """ExecuTorch's llama reads its position with ``.item()``: torch numbers those data-dependent symbols by what the
    process traced before (u36 in the first lowering, u102 in the next), which must not make the key another. And
    a hit (no ONNX export binding them) leaves none of ExecuTorch's retraces' symbols pending for the next export of
    the model, ours or ExecuTorch's own ``to_edge``."""
    import re

    from executorch.exir import to_edge

    import et_tensorrt
    from et_tensorrt.inspection import delegate_blobs
    from et_tensorrt.testing import decoders

    decoder = decoders.executorch_llama(dynamic=True, layers=1)
    blobs = [B.read_blob(delegate_blobs(et_tensorrt.lower(decoders.prefill_decode(decoder)["prefill"]))[0])]
    blobs.append(B.read_blob(delegate_blobs(et_tensorrt.lower(decoders.prefill_decode(decoder)["prefill"]))[0]))
    assert [b.metadata["cache"] for b in blobs] == ["miss", "hit"]
    symbols = [set(re.findall(rb"Symbol\('(u\d+)'", b.graph)) for b in blobs]
    assert symbols[0] and symbols[0] != symbols[1]  # numbered otherwise, the same partition
    assert blobs[0].engine == blobs[1].engine
    to_edge(decoders.prefill_decode(decoder))  # PendingUnbackedSymbolNotFound, had the hit left them


def test_shape_symbols_are_renumbered_in_the_order_they_appear():
    graph = (
        b"""{"size": "Symbol('s27')", "expr": "Add(s27, u60)", "u61": {}, "more": "u60 s3 zuf4", "x": "uint8 s2x"}"""
    )
    renamed = b"""{"size": "Symbol('s0')", "expr": "Add(s0, u0)", "u1": {}, "more": "u0 s1 zuf0", "x": "uint8 s2x"}"""
    assert build_cache.canonical_symbols(graph) == renamed
