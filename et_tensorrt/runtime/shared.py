"""What the delegates of one loaded program share, by key: created by the first that needs it, freed when the last
that holds it lets go (each delegate lets go when its method goes: the C++ handle calls its executor's ``close``).

Keys start with the loaded program's scope (extension/runtime/program_scope.h), so two loads of one program share
nothing. Used for the program's states (runtime/state.py) and its TensorRT engines (runtime/executors.py: a
``prefill`` and a ``decode`` that run one engine deserialize it once, each with its own execution context).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, list] = {}  # key -> [value, what made it, holders]

    def acquire(self, key: Hashable, make: Callable[[], Any], maker: str = "") -> tuple[Any, str]:
        """(the value held under ``key``, who made it), made now by ``make`` if nobody holds it; the caller holds
        it until :meth:`release`. ``make`` runs under the registry's lock."""
        with self._lock:
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = [make(), maker, 0]
            held[2] += 1
            return held[0], held[1]

    def release(self, key: Hashable) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                held[2] -= 1
                if held[2] == 0:
                    del self._held[key]

    def holders(self) -> dict[Hashable, int]:
        """Key -> how many delegates hold it now (tests, tools)."""
        with self._lock:
            return {key: held[2] for key, held in self._held.items()}
