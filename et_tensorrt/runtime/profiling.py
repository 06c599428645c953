"""The per-phase table of a profile (docs/profiling.md): the delegate events of ExecuTorch's ETDump, one row per event
name — calls, median and total time, bytes copied.

``Runner(..., profile=True)`` keeps a copy of every delegate event its ETDump generator logs
(``extension/runner/event_profile.h``), so :meth:`ProfileTable.from_events` needs neither an ETDump parser nor
``executorch.exir``. An ETDump written by ExecuTorch's own runtime (``executorch.runtime`` with
``enable_etdump=True``) gives the same table through :meth:`ProfileTable.from_etdump`, which reads it with
``executorch.devtools.Inspector``.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The delegate's metadata counts the bytes a phase copied as "bytes=N" (extension/runtime/delegate_events.h); the
# executor's "state_bytes=N" is another key.
_BYTES = re.compile(rb"(?:^|[;\s])bytes=(\d+)")


@dataclass(frozen=True)
class PhaseRow:
    """One event name of a profile: ``calls`` events, their median and total time in microseconds, and the bytes
    their metadata counts over all calls (None where it counts none: an executor's run, a layer)."""

    name: str
    calls: int
    median_us: float
    total_us: float
    bytes: int | None


def _bytes_of(metadata: bytes) -> int | None:
    found = _BYTES.search(metadata)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class ProfileTable:
    """Rows in the order their events first appeared (init first, then a call's phases as they ran)."""

    rows: tuple[PhaseRow, ...]

    @classmethod
    def from_samples(cls, samples: Iterable[tuple[str, float, bytes]]) -> ProfileTable:
        """From (name, microseconds, metadata) per event."""
        order: dict[str, list[tuple[float, bytes]]] = {}
        for name, us, metadata in samples:
            order.setdefault(name, []).append((us, metadata))
        rows = []
        for name, events in order.items():
            times = [us for us, _ in events]
            counted = [b for b in (_bytes_of(m) for _, m in events) if b is not None]
            rows.append(
                PhaseRow(
                    name=name,
                    calls=len(events),
                    median_us=statistics.median(times),
                    total_us=sum(times),
                    bytes=sum(counted) if counted else None,
                )
            )
        return cls(tuple(rows))

    @classmethod
    def from_events(cls, events: Sequence[tuple[str, int, int, bytes]]) -> ProfileTable:
        """From ``_C.EventProfile.events()``: (name, start_ns, end_ns, metadata)."""
        return cls.from_samples((name, (end - start) / 1e3, metadata) for name, start, end, metadata in events)

    @classmethod
    def from_etdump(cls, etdump_path: str, backend: str | None = "EtTensorRTBackend") -> ProfileTable:
        """From an ETDump file (any runtime's: ExecuTorch's ``write_etdump_result_to_file`` too), read with
        ``executorch.devtools.Inspector``: its delegate events, of ``backend`` where the ETDump's reader can tell
        (Inspector names an event's backend only with the lowering's ETRecord; None: every backend's)."""
        from executorch.devtools import Inspector
        from executorch.devtools.inspector import TimeScale

        inspector = Inspector(etdump_path=etdump_path, target_time_scale=TimeScale.US)
        samples = []
        for block in inspector.event_blocks:
            for event in block.events:
                named = event.delegate_backend_name
                if not event.is_delegated_op or event.perf_data is None:
                    continue
                if backend is not None and named is not None and named != backend:
                    continue
                metadata = list(event.raw_delegate_debug_metadatas or [])
                for i, us in enumerate(event.perf_data.raw):
                    samples.append((event.name, float(us), metadata[i] if i < len(metadata) else b""))
        return cls.from_samples(samples)

    def row(self, name: str) -> PhaseRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"no event {name!r} in this profile (events: {', '.join(r.name for r in self.rows) or 'none'})")

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rows]

    def __str__(self) -> str:
        width = max([len("event"), *(len(r.name) for r in self.rows)])
        lines = [f"{'event':<{width}}  {'calls':>6}  {'median us':>11}  {'total us':>11}  {'bytes':>12}"]
        lines.append("-" * len(lines[0]))
        for r in self.rows:
            copied = "-" if r.bytes is None else f"{r.bytes:,}"
            lines.append(f"{r.name:<{width}}  {r.calls:>6}  {r.median_us:>11.1f}  {r.total_us:>11.1f}  {copied:>12}")
        return "\n".join(lines)
