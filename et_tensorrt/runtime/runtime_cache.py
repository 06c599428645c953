"""TensorRT-RTX's runtime cache, kept on disk beside the engine cache.

A TensorRT-RTX engine is portable across GPUs because it compiles its kernels for the GPU it runs on, at run time
(the first call of each shape); its ``IRuntimeCache`` holds what was compiled. Kept in a file, the next load of
the same engine on the same machine starts with its kernels compiled. One file per engine and GPU:
``<engine cache>/runtime/<key>.rtcache`` (``ET_TENSORRT_CACHE_DIR``; ``et-tensorrt cache clear`` removes them too).
TensorRT-RTX validates a file against this environment itself (its version, the GPU, the driver) and ignores one
that does not match; a file it refuses is removed. Saved after an executor's first call and when it closes,
whenever the cache grew; written to a temp file and renamed, so a reader sees a whole file or none.

Full TensorRT has no runtime cache (its engines carry compiled kernels): its contexts are made as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from ..builder import build_cache

log = logging.getLogger("et_tensorrt")


def folder() -> Path:
    return build_cache.cache_dir() / build_cache.RUNTIME_FOLDER


def path_for(engine_identity: str, gpu: str) -> Path:
    """The file of one engine's runtime cache on one GPU (``gpu``: its name and compute capability); TensorRT-RTX
    checks its own version and the driver when it reads it."""
    key = hashlib.sha256("\0".join((engine_identity, gpu)).encode("utf-8")).hexdigest()[:40]
    return folder() / f"{key}{build_cache.RUNTIME_SUFFIX}"


class RuntimeCache:
    """One execution context's runtime cache and the file it is kept in."""

    def __init__(self, cache, path: Path, loaded: int):
        self._cache, self.path = cache, path
        self.loaded_bytes = loaded  # what the file held at load (0: none, or refused)
        self._saved = loaded

    def save(self) -> int:
        """Writes the cache if it grew since it was loaded or last saved; returns its size."""
        data = bytes(memoryview(self._cache.serialize()))
        if len(data) == self._saved or not data:
            return len(data)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=build_cache.TEMP_PREFIX, dir=self.path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, self.path)
            self._saved = len(data)
        except OSError as e:  # a read-only cache folder costs the next load its compile time, nothing else
            log.warning("et_tensorrt: TensorRT-RTX runtime cache not saved to %s: %s", self.path, e)
        return len(data)


def execution_context(engine, path: Path | None):
    """(context, RuntimeCache or None): a context whose runtime cache starts from ``path``'s file where the engine
    has one (TensorRT-RTX), else the engine's default context."""
    make_config = getattr(engine, "create_runtime_config", None)
    config = make_config() if make_config is not None and path is not None else None
    if config is None or not hasattr(config, "create_runtime_cache"):
        return engine.create_execution_context(), None
    cache = config.create_runtime_cache()
    loaded = 0
    if path.is_file():
        data = path.read_bytes()
        if cache.deserialize(data):
            loaded = len(data)
        else:
            log.info("et_tensorrt: TensorRT-RTX refused the runtime cache %s (another GPU, driver or version)", path)
            path.unlink(missing_ok=True)
    config.set_runtime_cache(cache)
    return engine.create_execution_context(config), RuntimeCache(cache, path, loaded)
