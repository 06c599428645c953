"""On-disk cache of serialized engines, keyed by the ONNX bytes + builder settings + TensorRT flavour/version.

Default location ``~/.cache/et_tensorrt/engines``; ``ET_TENSORRT_CACHE_DIR`` overrides it. Writes are atomic
(temp file + rename) so concurrent lowerings never read a half-written engine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

logger = logging.getLogger("et_tensorrt")

ENV_CACHE_DIR = "ET_TENSORRT_CACHE_DIR"

# Process-wide counters (tests read them to prove a cache hit without timing).
stats = {"hits": 0, "misses": 0, "stores": 0}


def cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "et_tensorrt" / "engines"


def cache_key(onnx_bytes: bytes, settings: Mapping[str, object], flavour: str, version: str) -> str:
    h = hashlib.sha256()
    h.update(b"et_tensorrt-engine-cache-v1\0")
    h.update(f"{flavour}\0{version}\0".encode())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    h.update(b"\0")
    h.update(onnx_bytes)
    return h.hexdigest()


def _path(key: str) -> Path:
    return cache_dir() / f"{key}.engine"


def load(key: str) -> Optional[bytes]:
    path = _path(key)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        stats["misses"] += 1
        return None
    except OSError as exc:
        logger.warning("engine cache: cannot read %s (%s); rebuilding", path, exc)
        stats["misses"] += 1
        return None
    if not data:
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    return data


def store(key: str, engine: bytes) -> None:
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".engine")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(engine)
            os.replace(tmp, _path(key))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        stats["stores"] += 1
    except OSError as exc:  # a read-only home must not fail lowering
        logger.warning("engine cache: cannot write to %s (%s)", directory, exc)
