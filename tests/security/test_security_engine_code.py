"""TensorRT engines that need host code are refused unless ET_TENSORRT_TRUST_ENGINE_CODE=1.

No engine is deserialized here (no GPU on CI): the decision logic runs against a fake TensorRT runtime
that behaves as TensorRT documents (it refuses an engine with an embedded lean runtime or plugin when
``engine_host_code_allowed`` is off, and says so through the logger). What TensorRT really logs for such
an engine is matched by keywords; only a GPU run with a version-compatible engine can confirm the words
(docs/security.md). Safety does not depend on the words: an engine TensorRT refuses is never run.
"""

from __future__ import annotations

from types import SimpleNamespace

import blob_fixtures as F
import pytest
import torch

from et_tensorrt.errors import EngineRefusedError
from et_tensorrt.runtime import engine_loading

HOST_CODE_ENGINE = b"vtrt-with-lean-runtime"
PLAIN_ENGINE = b"vtrt-plain"
HOST_CODE_MESSAGE = "Cannot deserialize the engine: it contains host code (a lean runtime), which is not allowed"


class FakeLogger:
    def __init__(self):
        self.messages = []


class FakeRuntime:
    """TensorRT's Runtime as documented; starts permissive so the test sees what the loader switches off."""

    def __init__(self, logger):
        self.logger = logger
        self.engine_host_code_allowed = True
        self.tempfile_control_flags = 3
        self.deserialized = []

    def deserialize_cuda_engine(self, data):
        data = bytes(data)
        self.deserialized.append(data)
        if data == HOST_CODE_ENGINE and not self.engine_host_code_allowed:
            self.logger.messages.append(HOST_CODE_MESSAGE)
            return None
        if data.startswith(b"vtrt"):
            return SimpleNamespace(name=data.decode())
        self.logger.messages.append("Serialization assertion failed: magic tag mismatch")
        return None


def _deserialize(data):
    logger = FakeLogger()
    runtime = FakeRuntime(logger)
    result = engine_loading.deserialize_engine(None, data, runtime=runtime, logger=logger)
    return result, runtime


def test_host_code_is_off_and_an_engine_that_needs_it_is_refused(monkeypatch):
    monkeypatch.delenv(engine_loading.TRUST_ENGINE_CODE_ENV, raising=False)
    with pytest.raises(EngineRefusedError, match="needs host code.*ET_TENSORRT_TRUST_ENGINE_CODE=1") as refused:
        _deserialize(HOST_CODE_ENGINE)
    assert "lean runtime" in str(refused.value)
    (engine, reason), runtime = _deserialize(PLAIN_ENGINE)
    assert engine.name == "vtrt-plain" and reason == ""
    assert runtime.engine_host_code_allowed is False and runtime.tempfile_control_flags == 0


def test_trusting_engine_code_is_an_explicit_opt_in(monkeypatch):
    monkeypatch.setenv(engine_loading.TRUST_ENGINE_CODE_ENV, "1")
    (engine, reason), runtime = _deserialize(HOST_CODE_ENGINE)
    assert engine.name == "vtrt-with-lean-runtime" and runtime.engine_host_code_allowed is True
    for not_quite in ("true", "yes", "0", ""):  # only the documented value opts in
        monkeypatch.setenv(engine_loading.TRUST_ENGINE_CODE_ENV, not_quite)
        with pytest.raises(EngineRefusedError):
            _deserialize(HOST_CODE_ENGINE)


def test_an_engine_that_fails_for_another_reason_is_not_called_host_code(monkeypatch):
    monkeypatch.delenv(engine_loading.TRUST_ENGINE_CODE_ENV, raising=False)
    (engine, reason), _ = _deserialize(b"xxxx")
    assert engine is None and "does not deserialize on this GPU" in reason and "magic tag" in reason


def test_the_delegate_refuses_at_init_rather_than_falling_back(monkeypatch):
    """Through create_executor (GPU claimed, a fake TensorRT module): a host-code engine fails init with
    the refusal; the PyTorch fallback would hide that the file tried to run code."""
    from et_tensorrt import trt
    from et_tensorrt.format import blob as B
    from et_tensorrt.runtime import executors

    class FakeTrt:
        class ILogger:
            class Severity:
                WARNING = 2

            def __init__(self):
                pass

        @staticmethod
        def Runtime(logger):  # noqa: N802 - TensorRT's spelling
            return FakeRuntime(logger)

    blob = B.write_blob(F.IO, engine=HOST_CODE_ENGINE, graph=F.GRAPH, weights=F.WEIGHTS, exec_device_type=1)
    monkeypatch.delenv(engine_loading.TRUST_ENGINE_CODE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device", lambda d: __import__("contextlib").nullcontext())
    monkeypatch.setattr(trt, "module", lambda: FakeTrt)
    monkeypatch.setattr(engine_loading, "make_logger", lambda trt: FakeLogger())
    with pytest.raises(EngineRefusedError, match="needs host code"):
        executors.create_executor(blob, cuda_devices=1)


def test_tensorrt_rtx_has_the_switches_the_loader_sets():
    """The attributes exist on the installed TensorRT(-RTX) runtime (creating one needs no GPU)."""
    from et_tensorrt import trt

    runtime = trt.module().Runtime(engine_loading.make_logger(trt.module()))
    assert hasattr(runtime, "engine_host_code_allowed")
    engine_loading.configure_runtime(runtime, trusted=False)
    assert runtime.engine_host_code_allowed is False
    if hasattr(runtime, "tempfile_control_flags"):
        assert runtime.tempfile_control_flags == 0


def test_an_engine_only_blob_fails_init_with_the_reason_where_its_engine_cannot_run():
    from et_tensorrt.format import blob as B
    from et_tensorrt.runtime import executors

    engine_only = B.write_blob(F.IO, engine=PLAIN_ENGINE, exec_device_type=1)
    with pytest.raises(RuntimeError, match=r"no CUDA device.*engine-only"):
        executors.create_executor(engine_only)


def test_a_weight_stripped_engine_is_never_run_unrefitted(monkeypatch):
    """A blob with REFIT_MAP: its engine runs only once refitted; a refit that cannot complete (the engine asks
    for a weight the map does not describe) leaves the engine unused, with the reason (issue 17)."""
    import struct

    from et_tensorrt import trt
    from et_tensorrt.format import blob as B
    from et_tensorrt.runtime import executors

    class FakeRefitter:
        def __init__(self, engine, logger):
            pass

        def get_all_weights(self):
            return ["fc.weight"]

    class FakeTrt:
        Refitter = FakeRefitter

        @staticmethod
        def Runtime(logger):  # noqa: N802 - TensorRT's spelling
            return FakeRuntime(logger)

    sections = [
        (B.SECTION_IO_TABLE, B.encode_io_table(F.IO)),
        (B.SECTION_ENGINE, PLAIN_ENGINE),
        (B.SECTION_GRAPH, F.GRAPH),
        (B.SECTION_WEIGHTS, B.encode_weights(F.WEIGHTS)),
        (B.SECTION_REFIT_MAP, struct.pack("<II", 0, 0)),
    ]
    blob = B.read_blob(B.write_sections(sections, 1, 0))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device", lambda d: __import__("contextlib").nullcontext())
    monkeypatch.setattr(trt, "module", lambda: FakeTrt)
    monkeypatch.setattr(engine_loading, "make_logger", lambda trt: FakeLogger())
    engine, _, reason = executors._deserialize(blob, torch.device("cuda", 0))
    assert engine is None and "weight-stripped engine could not be refitted" in reason and "fc.weight" in reason
