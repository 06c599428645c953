"""The suite's engine build cache, kept between runs where the machine keeps it (issue 53, item 5).

``ET_TENSORRT_TEST_CACHE_DIR`` names its folder (default ``~/.cache/et_tensorrt/test-engines``; ``off``: a fresh
folder each session, as a cold run). It is never the user's own engine cache (``ET_TENSORRT_CACHE_DIR``, default
``~/.cache/et_tensorrt/engines``): the suite builds thousands of throw-away engines.

The build cache's key covers the partition, the options and the tools' versions, but not this package's code: its
version is a fixed string while the code changes under it, and a hit skips the ONNX export, validation and build.
So the entries sit in a subfolder named by a digest of et_tensorrt's sources (its ``.py`` files and native
modules) but for the subpackages that make or drive programs (``NOT_BUILDING``: the exporters, the command line, the
test models), whose changes reach the key through the program's graph and weights: a run of other lowering code
starts cold, a run of the same (a rerun, a change to tests, docs or those subpackages) reuses what the last one built.
The few most recently used subfolders are kept, older ones removed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import warnings
from pathlib import Path

ENV = "ET_TENSORRT_TEST_CACHE_DIR"
OFF = "off"
DEFAULT = Path.home() / ".cache" / "et_tensorrt" / "test-engines"
KEEP = 3  # subfolders (code versions) kept: the current one and the last two
PACKAGE = Path(__file__).resolve().parents[1] / "et_tensorrt"
NOT_BUILDING = ("llm", "cli", "testing")  # subpackages of et_tensorrt left out of the digest (see the module)


def sources_digest(package: Path = PACKAGE) -> str:
    """sha256 of et_tensorrt's Python sources and native modules (relative path and bytes) but NOT_BUILDING's,
    16 hex digits."""
    h = hashlib.sha256()
    files = [*package.rglob("*.py"), *package.rglob("*.so")]
    left_out = {package / name for name in NOT_BUILDING}
    for path in sorted(p for p in files if "__pycache__" not in p.parts and not left_out & set(p.parents)):
        h.update(str(path.relative_to(package)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _user_cache() -> Path:
    from et_tensorrt.builder import build_cache

    return build_cache.cache_dir().resolve()  # as the user's environment names it (the suite has not set it yet)


def folder(tmp_path_factory) -> Path:
    """The build cache folder of this session (see the module)."""
    text = os.environ.get(ENV, "").strip()
    if text.lower() == OFF:
        return tmp_path_factory.mktemp("engines")
    root = Path(text).expanduser() if text else DEFAULT
    user, mine = _user_cache(), root.resolve()
    if mine == user or user in mine.parents or mine in user.parents:  # pruning would remove the user's entries
        raise RuntimeError(
            f"{ENV}={root} is, holds or is inside your own engine cache {user}: give the suite a folder of its "
            f"own, or {ENV}={OFF} for a fresh one each session"
        )
    here = root / sources_digest()
    try:
        here.mkdir(parents=True, exist_ok=True)
        os.utime(here)  # the most recently used: kept by _prune
    except OSError as exc:  # a read-only or full home: the run goes on, cold
        warnings.warn(f"{ENV}: cannot use {here} ({exc.strerror}); a fresh engine cache for this session", stacklevel=1)
        return tmp_path_factory.mktemp("engines")
    _prune(root)
    return here


def _prune(root: Path) -> None:
    """Remove the subfolders of code versions older than the KEEP most recently used (another worker may be
    removing the same: errors ignored)."""
    try:
        used = {p: p.stat().st_mtime for p in root.iterdir() if p.is_dir()}
    except OSError:
        return
    for old in sorted(used, key=used.get, reverse=True)[KEEP:]:
        if time.time() - used[old] > 60:  # not one another session has just made
            shutil.rmtree(old, ignore_errors=True)
