"""What the benchmarks share (scripts/bench_*.py import it from their own folder, which Python puts on sys.path):
the XNNPACK baseline's lowering, the median of timed blocks, and the tables' number format."""

from __future__ import annotations

import statistics
import time


def xnnpack_edge(program):
    """``program`` (an ExportedProgram) lowered with ExecuTorch's XNNPACK partitioner: the edge program manager
    (``.to_executorch().buffer`` is its .pte). The baseline every benchmark compares et_tensorrt with."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])


def median_per_call(fn, calls: int, blocks: int, warmup: int = 0) -> float:
    """Seconds per call of ``fn``: ``warmup`` untimed calls, then ``blocks`` timed blocks of ``calls`` calls each;
    the median over the blocks."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def fmt(value, spec: str = ".2f") -> str:
    """A table cell: ``value`` formatted by ``spec``, or "-" for None."""
    return "-" if value is None else format(value, spec)
