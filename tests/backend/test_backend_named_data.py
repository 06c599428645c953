"""Engines and weights as ExecuTorch named data (issue 27; builder/named_data.py, blob NAMED_DATA): stored once per
program, in the .pte or a .ptd beside it, read at init as views of ExecuTorch's data. Also the lowering's memory
discipline that makes large models fit: the partition ExecuTorch hands preprocess shares the program's weights, and
each stage's time and memory are recorded (et_tensorrt.progress)."""

from __future__ import annotations

import gc
import logging
import os

import pytest
import torch

import et_tensorrt
from et_tensorrt.builder import named_data
from et_tensorrt.errors import OptionError, RunnerError
from et_tensorrt.format import blob as B
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.progress import Progress


class Mlp(torch.nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, 2 * width)
        self.fc2 = torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Shared(torch.nn.Module):
    """One linear used twice, a host op between: two partitions that both read its weight."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.fc(torch.sigmoid(self.fc(x)))


X = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))


def _model(cls=Mlp, *args):
    torch.manual_seed(0)
    return cls(*args).eval()


def _eager(model, x):
    with torch.no_grad():
        return model(x)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("named")
    return et_tensorrt.save(folder / "mlp.pte", _model(), (X,), min_block_size=1, named_data="ptd", cache=False)


def test_ptd_keeps_every_engine_and_weight_byte_out_of_the_pte(saved):
    assert saved.data_path == os.path.splitext(saved.path)[0] + ".ptd"
    weights = sum(p.numel() * p.element_size() for p in _model().parameters())
    assert saved.pte_bytes < weights < saved.ptd_bytes
    with open(saved.path, "rb") as f:
        (blob,) = [B.read_blob(b) for b in delegate_blobs(f.read())]
    assert blob.engine is None and blob.named_engine is not None and blob.metadata["named_data"] == "ptd"
    assert all(blob.named_weight(i) is not None for i in range(len(blob.weights)))
    keys = {n.key for n in blob.named}
    assert all(k.startswith(named_data.KEY_PREFIX) and len(k) == len(named_data.KEY_PREFIX) + 64 for k in keys)


def test_the_program_runs_with_its_ptd_and_says_what_is_missing_without_it(saved):
    got = et_tensorrt.Runner(saved.path, data_path=saved.data_path).run([X])[0]
    torch.testing.assert_close(got, _eager(_model(), X))
    with pytest.raises(RunnerError, match=r"named data 'et_tensorrt:[0-9a-f]{64}'.*data_path"):
        et_tensorrt.Runner(saved.path).run([X])


def test_executorchs_own_runtime_reads_the_ptd(saved):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(saved.path, data_path=saved.data_path)
    got = program.load_method("forward").execute([X])[0]
    torch.testing.assert_close(got, _eager(_model(), X))


def test_named_data_in_the_pte_is_one_file_that_runs_from_bytes():
    pte = et_tensorrt.lower(_model(), (X,), min_block_size=1, named_data="pte", cache=False)
    (blob,) = [B.read_blob(b) for b in delegate_blobs(pte)]
    assert blob.named and blob.engine is None
    torch.testing.assert_close(et_tensorrt.Runner(pte).run([X])[0], _eager(_model(), X))


def test_lower_refuses_ptd_before_any_work():
    with pytest.raises(OptionError, match="et_tensorrt.save"):
        et_tensorrt.lower(_model(), (X,), named_data="ptd")


def test_a_weight_two_partitions_read_is_stored_once(tmp_path):
    x = torch.randn(2, 32, generator=torch.Generator().manual_seed(1))
    kwargs = dict(min_block_size=1, torch_executed_ops=["aten.sigmoid.default"], cache=False, weights="both")
    shared = et_tensorrt.save(tmp_path / "shared.pte", _model(Shared), (x,), named_data="ptd", **kwargs)
    with open(shared.path, "rb") as f:
        blobs = [B.read_blob(b) for b in delegate_blobs(f.read())]
    assert len(blobs) == 2
    weight_keys = [{blobs[i].named_weight(j).key for j in range(len(blobs[i].weights))} for i in (0, 1)]
    assert weight_keys[0] == weight_keys[1]  # the same bytes under the same key
    engines = sum(b.named_engine.nbytes for b in blobs)
    weights = sum(p.numel() * p.element_size() for p in _model(Shared).parameters())
    assert shared.ptd_bytes < engines + 2 * weights  # the program's weights once (+ alignment and the header)
    got = et_tensorrt.Runner(shared.path, data_path=shared.data_path).run([x])[0]
    torch.testing.assert_close(got, _eager(_model(Shared), x))


def test_methods_of_one_program_share_one_copy(tmp_path):
    """Two methods over the same module (as prefill and decode are): ExecuTorch merges their named data by key."""
    from executorch.exir import to_edge_transform_and_lower

    from et_tensorrt import lowering

    model = _model()
    programs = {
        "forward": torch.export.export(model, (X,)),
        "single": torch.export.export(model, (X[:1],)),
    }
    options = dict(min_block_size=1, named_data="ptd", cache=False)
    partitioners = {name: [lowering.make_partitioner(options)] for name in programs}
    edge = to_edge_transform_and_lower(programs, partitioner=partitioners)
    saved = lowering.write_program(edge.to_executorch(lowering.executorch_config()), tmp_path / "two.pte")
    with open(saved.path, "rb") as f:
        blobs = [B.read_blob(b) for b in delegate_blobs(f.read())]
    assert len(blobs) == 2
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    engines = sum(b.named_engine.nbytes for b in blobs)
    assert saved.ptd_bytes < engines + weights + 16 * 1024  # one copy of the weights for both methods
    runner = et_tensorrt.Runner(saved.path, data_path=saved.data_path)
    torch.testing.assert_close(runner.run([X])[0], _eager(model, X))
    torch.testing.assert_close(runner.run([X[:1]], method="single")[0], _eager(model, X[:1]))


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def test_loaded_weights_are_views_of_the_mapped_ptd(tmp_path):
    """With the .ptd mapped, the embedded program's weights are its pages (file-backed resident memory), not a
    copy (anonymous memory)."""
    model = _model(Mlp, 1024)  # 16 MiB of weights
    x = torch.randn(2, 1024)
    saved = et_tensorrt.save(tmp_path / "big.pte", model, (x,), min_block_size=1, named_data="ptd", cache=False)
    expected = _eager(model, x)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    anon, file = _status("RssAnon:"), _status("RssFile:")
    runner = et_tensorrt.Runner(saved.path, data_path=saved.data_path)
    torch.testing.assert_close(runner.run([x])[0], expected)
    assert _status("RssAnon:") - anon < weights / 2  # not copied
    assert _status("RssFile:") - file >= weights * 0.9  # read in place


def test_preprocess_gets_the_programs_own_weights_and_records_its_stages(caplog, monkeypatch):
    """ExecuTorch deep-copies each partition before preprocess; the backend's copy shares the weights (no copy of
    the model's size before any work). Each stage is a progress step, with its time and peak memory."""
    from et_tensorrt.backend import preprocess

    seen = []
    real = preprocess.EtTensorRTBackend.copy_exported_program_for_preprocess.__func__

    def spy(cls, edge_program, compile_specs):
        copy = real(cls, edge_program, compile_specs)
        seen.append({n: (t.data_ptr(), copy.state_dict[n].data_ptr()) for n, t in edge_program.state_dict.items()})
        return copy

    monkeypatch.setattr(preprocess.EtTensorRTBackend, "copy_exported_program_for_preprocess", classmethod(spy))
    progress = Progress(show="log", measure_memory=True)
    with caplog.at_level(logging.INFO, logger="et_tensorrt"):
        et_tensorrt.lower(_model(), (X,), min_block_size=1, cache=False, progress=progress)
    assert seen and all(a == b for a, b in seen[0].values())
    steps = [(r.label, r.step) for r in progress.records]
    for step in ("options", "to_onnx", "build", "serialize"):
        assert ("engine 1/1", step) in steps
    assert ("program", "partition and lower") in steps
    assert all(r.peak_bytes and r.peak_bytes >= 0.5 * r.rss_bytes for r in progress.records)
    assert any("engine 1/1: engine build" in r.getMessage() for r in caplog.records)


def test_a_build_cache_hit_names_the_same_engine(tmp_path, monkeypatch):
    """The cached engine is read in place (a private link to the entry) and named by the same content key."""
    from et_tensorrt.builder import build_cache

    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path / "cache"))
    first, second = (
        et_tensorrt.lower(_model(), (X,), min_block_size=1, named_data="pte", cache=True) for _ in range(2)
    )
    (a,), (b,) = ([B.read_blob(x) for x in delegate_blobs(pte)] for pte in (first, second))
    assert (a.metadata["cache"], b.metadata["cache"]) == ("miss", "hit")
    assert a.named_engine == b.named_engine
    torch.testing.assert_close(et_tensorrt.Runner(second).run([X])[0], _eager(_model(), X))
    gc.collect()  # ExecuTorch's program objects hold cycles
    assert not list((tmp_path / "cache").glob(build_cache.HELD_PREFIX + "*"))  # held links go with their owner


def test_nothing_keeps_a_lowered_models_weights_alive():
    """After the lowering, the program bytes are all there is: the named data viewed the model's weights, and
    process-wide caches (ExecuTorch's, torch's) must not keep them (or the engines) alive."""
    import weakref

    model = _model()
    weight = weakref.ref(model.fc1.weight)
    pte = et_tensorrt.lower(model, (X,), min_block_size=1, named_data="pte", cache=False)
    del model
    gc.collect()
    assert weight() is None
    torch.testing.assert_close(et_tensorrt.Runner(pte).run([X])[0], _eager(_model(), X))


def test_tools_read_named_weights_from_the_program():
    """Outside the delegate (``check``'s reference, inspection tools) a blob's named weights come out of the
    program's own named data."""
    from et_tensorrt.embedded_program import load_program
    from et_tensorrt.errors import ProgramRefusedError
    from et_tensorrt.inspection import named_data as program_named_data

    pte = et_tensorrt.lower(_model(), (X,), min_block_size=1, named_data="pte", cache=False)
    (blob,) = [B.read_blob(b) for b in delegate_blobs(pte)]
    named = program_named_data(pte)
    assert {n.key for n in blob.named} <= set(named)
    out = load_program(blob, named).module()(X)
    torch.testing.assert_close(out[0] if isinstance(out, (tuple, list)) else out, _eager(_model(), X))
    with pytest.raises(ProgramRefusedError, match="named data"):
        load_program(blob)


def test_a_weight_digest_is_its_bytes_computed_once_and_again_after_an_in_place_write():
    import hashlib

    weight = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    first = named_data.tensor_digest(weight)
    assert first == hashlib.sha256(weight.numpy().tobytes()).digest()
    assert named_data.tensor_digest(weight.detach()) == first  # a view of the same storage: the same entry
    weight.add_(1)  # the version counter moves: the bytes are hashed again
    assert named_data.tensor_digest(weight) == hashlib.sha256(weight.numpy().tobytes()).digest() != first


def test_weights_with_the_same_bytes_and_other_shapes_share_a_key_and_keep_their_shapes(_engine_cache_dir):
    """Named data is keyed by bytes: a constant-filled (128, 64) and (64, 128) weight are one datum. Each is still
    rebuilt in its own shape: a bf16 engine's transposed initializers verify, and the program runs."""
    model = Mlp(width=64).to(torch.bfloat16).eval()
    with torch.no_grad():
        model.fc1.weight.fill_(0.5)
        model.fc2.weight.fill_(0.5)
    x = torch.randn(2, 64, dtype=torch.bfloat16)
    pte = et_tensorrt.lower(torch.export.export(model, (x,)), min_block_size=1, named_data="pte")
    (blob,) = [B.read_blob(b) for b in delegate_blobs(pte)]
    keys = {blob.weights[n.index].name: n.key for n in blob.named if n.target == B.NAMED_WEIGHT}
    assert keys["fc1.weight"] == keys["fc2.weight"]
    torch.testing.assert_close(et_tensorrt.Runner(pte).run([x])[0], model(x), atol=0.05, rtol=0.05)
