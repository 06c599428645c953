"""Progress of a lowering (et_tensorrt.progress): each partition's stages with elapsed time, a bar on a terminal,
log lines otherwise, and on request each step's peak memory (a nested step's peak counts in its parent's)."""

from __future__ import annotations

import io
import logging

import pytest

from et_tensorrt import progress as P


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _lowering(progress: P.Progress, grow: int = 0) -> bytearray:
    """The steps a two-partition lowering reports; ``grow`` bytes are held from the second engine's build on."""
    held = bytearray()
    with P.reporting(progress), P.step("program", "partition and lower"):
        for label in ("engine 1/2", "engine 2/2"):
            for stage in ("options", "to_onnx", "build", "serialize"):
                with P.step(lambda label=label: label, stage):
                    if label == "engine 2/2" and stage == "build" and grow:
                        held = bytearray(grow)
                        held[::4096] = b"\1" * len(held[::4096])  # resident, not just reserved
    return held


def test_log_lines_name_partition_stage_and_elapsed_time(caplog):
    with caplog.at_level(logging.INFO, logger="et_tensorrt"):
        _lowering(P.Progress(show="log"))
    lines = [r.getMessage() for r in caplog.records]
    for label in ("engine 1/2", "engine 2/2"):
        for title in ("ONNX export", "engine build", "serialization"):
            assert any(line.startswith(f"{label}: {title}: ") and "s elapsed" in line for line in lines), lines
    assert not any("options" in line for line in lines)  # quick steps are recorded, not shown


def test_a_terminal_gets_a_bar_over_the_partitions():
    stream = Terminal()
    progress = P.Progress(stream=stream)
    _lowering(progress)
    assert progress.show == "bar"
    text = stream.getvalue()
    assert "engine 2/2: engine build" in text and "2/2" in text


def test_steps_are_recorded_and_memory_peaks_fold_into_the_enclosing_step():
    progress = P.Progress(show="off", measure_memory=True)
    held = _lowering(progress, grow=64 * 2**20)
    steps = {(r.label, r.step): r for r in progress.records}
    assert len(progress.records) == 9 and progress.seconds("build") >= 0
    build, whole = steps[("engine 2/2", "build")], steps[("program", "partition and lower")]
    assert build.peak_bytes >= steps[("engine 1/2", "build")].peak_bytes + 32 * 2**20
    assert whole.peak_bytes >= build.peak_bytes and progress.peak_bytes >= build.peak_bytes
    assert progress.peak("build") == build.peak_bytes
    del held


def test_a_bad_show_is_refused():
    with pytest.raises(ValueError, match="auto, bar, log, off"):
        P.Progress(show="loud")
