"""Deserializing a TensorRT engine from a blob without running code from it.

A serialized engine can carry host code: a version-compatible engine embeds a lean runtime library, and
an engine can embed plugin libraries; TensorRT loads and runs those while deserializing. That is code
chosen by whoever wrote the file, so the runtime is configured to refuse it: ``engine_host_code_allowed``
stays off and (where the runtime has it) ``tempfile_control_flags`` is cleared, so no library is written
out to be loaded. An engine that needs host code is then refused with :class:`EngineRefusedError`,
unless the caller opts in with ``ET_TENSORRT_TRUST_ENGINE_CODE=1`` (only for engines you trust: it lets
the engine run its own code in this process). Engines et_tensorrt builds never need host code.
"""

from __future__ import annotations

import os

from et_tensorrt.errors import EngineRefusedError

TRUST_ENGINE_CODE_ENV = "ET_TENSORRT_TRUST_ENGINE_CODE"

# What TensorRT says (through its logger) when it refuses an engine for needing host code.
_HOST_CODE_WORDS = ("host code", "lean runtime", "plugin", "version compatible", "version-compatible")


def engine_code_trusted() -> bool:
    return os.environ.get(TRUST_ENGINE_CODE_ENV, "") == "1"


def make_logger(trt):
    """A TensorRT logger that keeps the messages of one deserialization (to explain a refusal)."""

    class _Collecting(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.messages: list[str] = []

        def log(self, severity, msg):
            if severity <= trt.ILogger.Severity.WARNING:
                self.messages.append(str(msg))

    return _Collecting()


def configure_runtime(runtime, trusted: bool) -> None:
    """Host code off (and no temporary library files) unless the caller trusts the engine's code."""
    runtime.engine_host_code_allowed = bool(trusted)
    if not trusted and hasattr(runtime, "tempfile_control_flags"):
        runtime.tempfile_control_flags = 0


def deserialize_engine(trt, engine_bytes, runtime=None, logger=None):
    """(engine, reason): the engine, or None and why not. Raises EngineRefusedError for an engine that
    needs host code while that is not trusted. ``runtime``/``logger`` are injectable for tests."""
    trusted = engine_code_trusted()
    logger = logger if logger is not None else make_logger(trt)
    runtime = runtime if runtime is not None else trt.Runtime(logger)
    configure_runtime(runtime, trusted)
    engine = runtime.deserialize_cuda_engine(engine_bytes)
    if engine is not None:
        return engine, ""
    said = " | ".join(getattr(logger, "messages", [])[-4:])
    if not trusted and any(word in said.lower() for word in _HOST_CODE_WORDS):
        raise EngineRefusedError(
            f"the TensorRT engine needs host code to load (an embedded lean runtime or plugin library), which "
            f"would run code from the file; refused. TensorRT said: {said}. Set {TRUST_ENGINE_CODE_ENV}=1 only "
            "for engines you trust, or re-lower the model with et_tensorrt (its engines need no host code)"
        )
    return None, "the engine does not deserialize on this GPU (built for another GPU or TensorRT version)" + (
        f": {said}" if said else ""
    )
