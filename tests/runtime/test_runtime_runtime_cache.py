"""TensorRT-RTX's runtime cache kept on disk (runtime/runtime_cache.py), against a stand-in for its API (no GPU
here): a context starts from the file of its engine and GPU, the kernels compiled by the first call are saved
after it and at close, a file TensorRT-RTX refuses is removed, and `cache clear` removes them with the engines."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from et_tensorrt.builder import build_cache
from et_tensorrt.format import blob as B
from et_tensorrt.runtime import executors, runtime_cache


class FakeRuntimeCache:
    def __init__(self, accepts=True):
        self.data, self.accepts, self.given = b"", accepts, None

    def deserialize(self, data):
        self.given = bytes(data)
        if self.accepts:
            self.data = bytes(data)
        return self.accepts

    def serialize(self):
        return self.data


class FakeConfig:
    def __init__(self, cache):
        self.cache, self.set = cache, None

    def create_runtime_cache(self):
        return self.cache

    def set_runtime_cache(self, cache):
        self.set = cache
        return True


class Context:
    def __init__(self, cache):
        self.cache = cache

    def set_input_shape(self, name, shape):
        pass

    def get_tensor_shape(self, name):
        return (2, 4)

    def set_tensor_address(self, name, address):
        pass

    def execute_async_v3(self, stream):
        self.cache.data += b"kernel;"  # what TensorRT-RTX compiled for this call
        return True


def _engine(cache):
    config = FakeConfig(cache)
    made = []

    def context(config_given=None):
        assert config_given is config and config.set is cache  # the context runs with the cache
        made.append(Context(cache))
        return made[-1]

    return SimpleNamespace(
        create_runtime_config=lambda: config, create_execution_context=context, num_optimization_profiles=1
    )


def _executor(monkeypatch, engine, path):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "current_stream", lambda index=None: SimpleNamespace(cuda_stream=1, synchronize=lambda: None)
    )
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    f32 = B.scalar_type_code(torch.float32)
    io = [
        B.IOEntry(B.ROLE_INPUT, "x", f32, (B.DimRange.static(2), B.DimRange.static(8))),
        B.IOEntry(B.ROLE_OUTPUT, "y", f32, (B.DimRange.static(2), B.DimRange.static(4))),
    ]
    return executors.TensorRTExecutor(B.Blob(io=io, program=b""), torch.device("cpu"), engine, runtime_cache_path=path)


def test_the_first_call_saves_the_compiled_kernels_and_the_next_load_starts_from_them(monkeypatch, tmp_path):
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path))
    path = runtime_cache.path_for("engine-a", "NVIDIA H100 sm90")
    assert path.parent == tmp_path / "runtime" and path.suffix == ".rtcache"
    first = _executor(monkeypatch, _engine(FakeRuntimeCache()), path)
    assert first.runtime_cache.loaded_bytes == 0 and not path.exists()
    first.run([torch.randn(2, 8)], [None])
    assert path.read_bytes() == b"kernel;"  # saved after the first call
    first.run([torch.randn(2, 8)], [None])
    first.close()
    assert path.read_bytes() == b"kernel;kernel;"  # and at close, grown

    cache = FakeRuntimeCache()
    second = _executor(monkeypatch, _engine(cache), path)
    assert cache.given == b"kernel;kernel;" and second.runtime_cache.loaded_bytes == len(b"kernel;kernel;")


def test_a_file_tensorrt_rtx_refuses_is_removed(monkeypatch, tmp_path):
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path))
    path = runtime_cache.path_for("engine-b", "NVIDIA H100 sm90")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"from another driver")
    executor = _executor(monkeypatch, _engine(FakeRuntimeCache(accepts=False)), path)
    assert executor.runtime_cache.loaded_bytes == 0 and not path.exists()


def test_engines_and_gpus_have_their_own_files_and_cache_clear_removes_them(monkeypatch, tmp_path):
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path))
    paths = {runtime_cache.path_for(e, g) for e in ("a", "b") for g in ("H100 sm90", "RTX 4090 sm89")}
    assert len(paths) == 4
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"123")
    assert build_cache.clear() == (4, 12)
    assert not any(p.exists() for p in paths)


def test_an_engine_without_a_runtime_cache_gets_its_default_context(monkeypatch, tmp_path):
    context = Context(FakeRuntimeCache())
    engine = SimpleNamespace(create_execution_context=lambda: context, num_optimization_profiles=1)
    executor = _executor(monkeypatch, engine, tmp_path / "x.rtcache")
    assert executor.runtime_cache is None and executor._context is context


def test_a_file_per_engine_and_gpu_named_by_what_identifies_the_engine(monkeypatch, tmp_path, mlp_blob):
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path))
    gpus = iter(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: next(gpus))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    blob, cuda = B.read_blob(mlp_blob), torch.device("cuda", 0)
    own = executors._runtime_cache_path(blob, "", cuda)
    assert own == executors._runtime_cache_path(blob, "", cuda)  # the blob's own engine: the same file each load
    built = executors._runtime_cache_path(blob, "built here for sm90 with TensorRT-RTX 1.7 in 3.0 s", cuda)
    assert built != own  # a device-built engine is another engine
    assert executors._runtime_cache_path(blob, "", cuda) != own  # another GPU
