"""What torch keeps of every partition program the PyTorch executor loads, and dropping it again.

Loading a partition's embedded program (torch.export's deserializer, then ``GraphModule.recompile``) leaves two
things in process-wide caches that torch never prunes, so a ``Runner`` per conversation, or ``Runner.reset()``,
grew by about 200-470 KiB per load, forever (issue 45):

* the Python source fx generates for every ``recompile``: ``torch.fx.graph_module._loader.eval_cache`` and a
  ``linecache`` entry per key (a 2-layer Llama partition: about 40 KB each, three per load: the deserializer's
  module, its copy in the ExportedProgram, the executor's rewrite);
* the deserializer's ``ShapeEnv``: ShapeEnv's methods are memoized with class-level ``functools.lru_cache``\\ s
  whose keys hold ``self`` (some unbounded), so every ShapeEnv that evaluated a symbolic size stays alive, and with
  it its fake-tensor cache, its SymNodes and the fx nodes it evaluated.

:class:`LoadResidue` records the fx source keys made on this thread while it is entered (torch's loader numbers
them process-wide, so another thread's keys are never taken for ours), drops those of modules already gone when the
load ends, and the kept module's own at :meth:`LoadResidue.close` (its source is there for tracebacks while it
runs). It also empties ShapeEnv's memo caches when the load ends: torch clears them class-wide itself whenever a
ShapeEnv learns a new range (``_maybe_evaluate_static.cache_clear()``), so a clear is a recomputation for another
ShapeEnv in use, never a different answer.
"""

from __future__ import annotations

import linecache
import threading

import torch

_recording = threading.local()  # .keys: the list the innermost LoadResidue on this thread appends to
_install_lock = threading.Lock()
_installed = False


def _fx_loader():
    from torch.fx import graph_module

    loader = getattr(graph_module, "_loader", None)
    return loader if loader is not None and isinstance(getattr(loader, "eval_cache", None), dict) else None


def _install() -> bool:
    """Wraps torch's fx source loader once so that keys made on a recording thread are reported to it."""
    global _installed
    with _install_lock:
        if _installed:
            return True
        loader = _fx_loader()
        if loader is None or not callable(getattr(loader, "cache", None)):
            return False  # another torch: nothing to record (tests/runtime/test_runtime_load_memory.py notices)
        original = loader.cache

        def cache(*args, **kwargs):
            key = original(*args, **kwargs)
            keys = getattr(_recording, "keys", None)
            if keys is not None:
                keys.append(key)
            return key

        loader.cache = cache  # an instance attribute: torch's _exec_with_source calls _loader.cache(...)
        _installed = True
        return True


def _forget_source(keys) -> None:
    loader = _fx_loader()
    for key in keys:
        if loader is not None:
            loader.eval_cache.pop(key, None)
        linecache.cache.pop(key, None)


def clear_shape_env_caches() -> None:
    """Empties ShapeEnv's class-level memo caches, which hold every ShapeEnv that used them (and what it refers to)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for value in vars(ShapeEnv).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


def _source_keys(module: torch.nn.Module) -> set[str]:
    """The fx source keys the generated code of ``module`` and its submodules runs from."""
    keys = set()
    for m in module.modules():
        code = getattr(type(m).forward, "__code__", None)
        if isinstance(m, torch.fx.GraphModule) and code is not None:
            keys.add(code.co_filename)
    return keys


class LoadResidue:
    """``with LoadResidue() as residue: <load>; residue.keep(module)``; later ``residue.close()``."""

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._kept: set[str] = set()
        self._outer = None

    def __enter__(self) -> LoadResidue:
        if _install():
            self._outer = getattr(_recording, "keys", None)
            _recording.keys = self._keys
        return self

    def keep(self, module: torch.nn.Module) -> None:
        """Keeps the source of ``module``'s generated code until :meth:`close` (the rest goes when the load ends)."""
        self._kept |= _source_keys(module) & set(self._keys)

    def __exit__(self, *exc) -> None:
        if getattr(_recording, "keys", None) is self._keys:
            _recording.keys = self._outer
        _forget_source([k for k in self._keys if k not in self._kept])
        self._keys = [k for k in self._keys if k in self._kept]
        clear_shape_env_caches()

    def close(self) -> None:
        """Drops the kept module's source (its executor is gone)."""
        _forget_source(self._keys)
        self._keys, self._kept = [], set()
