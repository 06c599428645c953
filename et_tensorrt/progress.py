"""Progress of a lowering, per partition and stage, with elapsed time: what a long lowering is doing now.

:func:`et_tensorrt.lower` (and ``save``) run their steps — ``export``, ``partition and lower`` (ExecuTorch calls
``preprocess`` once per partition: its stages, backend/stages/, one step each), ``to_executorch``, ``write`` —
inside :meth:`Progress.step`. A :class:`Progress` shows them: on a terminal, a progress bar over the partitions
(tqdm) whose text is the current step; otherwise one line per step that took a while (the ``et_tensorrt``
logger, INFO). It records every step (:class:`StepRecord`: seconds, and with ``measure_memory`` the process's
peak resident memory during the step), so benchmarks read where time and memory go.

Measuring memory resets the kernel's peak-RSS mark at each step boundary (``/proc/self/clear_refs``): the
process's own ``ru_maxrss`` then no longer holds the whole run's peak, :attr:`Progress.peak_bytes` does. So it
is off unless asked for.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

logger = logging.getLogger("et_tensorrt")

# What users read for each preprocess stage (backend/stages/__init__.py names them).
STAGE_TITLES = {
    "legalize_quant": "quantization legalization",
    "cache_lookup": "build-cache lookup",
    "to_onnx": "ONNX export",
    "validate": "validation",
    "recipe": "build recipe",
    "build": "engine build",
    "embed": "embedding",
    "serialize": "serialization",
}
_ALWAYS_SHOWN = frozenset({"to_onnx", "validate", "build", "serialize"})
_SLOW_SECONDS = 1.0  # other steps get a log line when they take this long


@dataclass
class StepRecord:
    label: str  # "program", or the partition ("engine 2/5")
    step: str  # "export", "to_onnx", "build", ...
    seconds: float
    rss_bytes: int  # resident memory when the step ended
    peak_bytes: int | None = None  # peak resident memory during the step (measure_memory only)


def _status_bytes(key: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss_bytes() -> int:
    return _status_bytes("VmRSS:")


@dataclass
class _Open:
    label: Callable[[], str]
    step: str
    start: float
    peak: int = 0


@dataclass
class Progress:
    """``show``: ``"auto"`` (a bar on a terminal, log lines otherwise), ``"bar"``, ``"log"`` or ``"off"``."""

    show: str = "auto"
    measure_memory: bool = False
    stream: object = None  # where the bar goes (default: stderr)
    records: list[StepRecord] = field(default_factory=list)
    peak_bytes: int = 0  # with measure_memory: the largest resident memory seen at any step boundary
    _open: list[_Open] = field(default_factory=list)
    _bar: object = None
    _start: float = field(default_factory=time.perf_counter)
    _partitions: set = field(default_factory=set)

    def __post_init__(self):
        stream = self.stream or sys.stderr
        if self.show == "auto":
            self.show = "bar" if getattr(stream, "isatty", lambda: False)() else "log"
        if self.show not in ("bar", "log", "off"):
            raise ValueError(f"progress show {self.show!r} is not one of auto, bar, log, off")
        if self.measure_memory:
            self._boundary()

    def _boundary(self) -> None:
        """With measure_memory: fold the peak since the last boundary into every open step, then reset the mark."""
        if not self.measure_memory:
            return
        peak = _status_bytes("VmHWM:")
        self.peak_bytes = max(self.peak_bytes, peak)
        for s in self._open:
            s.peak = max(s.peak, peak)
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.measure_memory = False  # not Linux, or not allowed: peaks are then not recorded

    @contextlib.contextmanager
    def step(self, label: str | Callable[[], str], name: str) -> Iterator[None]:
        """One step of ``label`` (a partition's label may be known only once its first stage ran: a callable)."""
        self._boundary()
        opened = _Open(label if callable(label) else (lambda: label), name, time.perf_counter())
        self._open.append(opened)
        self._show_start(opened)
        try:
            yield
        finally:
            self._boundary()
            self._open.remove(opened)
            seconds = time.perf_counter() - opened.start
            record = StepRecord(
                opened.label(), name, seconds, rss_bytes(), opened.peak if self.measure_memory else None
            )
            self.records.append(record)
            self._show_end(record)

    def _title(self, label: str, name: str) -> str:
        what = STAGE_TITLES.get(name, name)
        return what if label == "program" else f"{label}: {what}"

    def _show_start(self, opened: _Open) -> None:
        if self.show != "bar":
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=None, unit="partition", file=self.stream or sys.stderr, leave=False)
        label = opened.label() if opened.step != "options" else "partition"
        self._bar.set_description_str(self._title(label, opened.step), refresh=True)

    def _show_end(self, record: StepRecord) -> None:
        if record.label != "program" and record.label not in self._partitions:
            self._partitions.add(record.label)
            total = _partition_total(record.label)
            if self._bar is not None:
                if total is not None and self._bar.total != total:
                    self._bar.total = total
                self._bar.update(1)
        if self.show == "log" and (record.step in _ALWAYS_SHOWN or record.seconds >= _SLOW_SECONDS):
            memory = "" if record.peak_bytes is None else f", peak {record.peak_bytes / 2**30:.2f} GiB"
            logger.info(
                "%s: %.1f s (%.0f s elapsed%s)",
                self._title(record.label, record.step),
                record.seconds,
                time.perf_counter() - self._start,
                memory,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.measure_memory:
            self._boundary()

    def seconds(self, step: str, label: str | None = None) -> float:
        """Total seconds of ``step`` (of one ``label``, or every partition's)."""
        return sum(r.seconds for r in self.records if r.step == step and (label is None or r.label == label))

    def peak(self, step: str) -> int | None:
        """The largest peak of ``step`` over the records (measure_memory only)."""
        peaks = [r.peak_bytes for r in self.records if r.step == step and r.peak_bytes is not None]
        return max(peaks) if peaks else None


def _partition_total(label: str) -> int | None:
    """5 from ``engine 2/5``."""
    _, _, total = label.rpartition("/")
    return int(total) if total.isdigit() else None


_active: list[Progress] = []


@contextlib.contextmanager
def reporting(progress: Progress | bool | None) -> Iterator[Progress | None]:
    """While active, every step (the lowering's, each partition's stages) is reported to ``progress`` (True: a
    new ``Progress()``; None or False: nothing new; one already reporting is not added twice)."""
    if progress is True:
        progress = Progress()
    if not progress or progress in _active:
        yield progress or None
        return
    _active.append(progress)
    try:
        yield progress
    finally:
        _active.remove(progress)
        progress.close()


@contextlib.contextmanager
def step(label: str | Callable[[], str], name: str) -> Iterator[None]:
    """A step reported to the active :class:`Progress` objects (none: only timed into nothing)."""
    with contextlib.ExitStack() as stack:
        for progress in list(_active):
            stack.enter_context(progress.step(label, name))
        yield
