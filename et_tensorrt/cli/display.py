"""How the commands print tensors, placement plans and comparisons."""

from __future__ import annotations

import statistics
import zlib

import torch

from .._text import table
from ..inspection import format_spec
from ..parity import Comparison


def checksum(t: torch.Tensor) -> str:
    """crc32 of the tensor's bytes (device-independent)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return f"{zlib.crc32(flat.view(torch.uint8).numpy().tobytes()):08x}"


def summarize(t) -> str:
    if not isinstance(t, torch.Tensor):
        return f"{type(t).__name__} {t!r}"
    text = f"{format_spec(str(t.dtype).replace('torch.', ''), t.shape)} on {t.device}"
    if t.numel() and not t.dtype.is_complex:
        text += f"  sum={t.detach().double().sum().item():+.6e}"
    return text + f"  crc32={checksum(t)}"


def print_tensors(role: str, tensors) -> None:
    for i, t in enumerate(tensors):
        print(f"  {role} {i}: {summarize(t)}")


def print_table(rows) -> None:
    for line in table(rows, indent="  ", width=100):
        print(line)


def timing(seconds: list[float], warmup: int) -> str:
    """``median of 20 calls after 1 warm-up: 0.012 ms (min 0.011 ms)``: the timed calls only."""
    ms = sorted(t * 1e3 for t in seconds)
    after = f"after {warmup} warm-up{'s' * (warmup != 1)}" if warmup else "without warm-up (first-call costs included)"
    if len(ms) == 1:
        return f"1 call {after}: {ms[0]:.3f} ms"
    return f"median of {len(ms)} calls {after}: {statistics.median(ms):.3f} ms (min {ms[0]:.3f} ms)"


def print_plan(plan) -> None:
    """The placement plan of the Runner's last call (``Runner.last_plan``): each method input and output end
    to end, then one line per delegate call."""
    head = "placement plan of the call"
    if plan is None:
        print(f"{head}: none (the method did not run)")
        return
    n = len(plan.delegates)
    delegates = "no et_tensorrt delegate" if n == 0 else f"{n} delegate call{'s' * (n != 1)}, executor {plan.executor}"
    print(f"{head}: {delegates} on {plan.execution_device}, {plan.bytes_copied:,} B copied per call")
    inside = sum(d.bytes_copied for d in plan.delegates)
    if inside and plan.boundary_bytes:
        print(
            f"  {plan.bytes_copied:,} B = {inside:,} B by the delegates + {plan.boundary_bytes:,} B at the method "
            "boundary (copy planned, copy out)"
        )
    rows = [("tensor", "action", "from -> to", "bytes", "why")]
    for p in list(plan.inputs) + list(plan.outputs):
        rows.append(
            (
                f"{p.role} {p.index}",
                p.action,
                f"{p.source} -> {p.destination}",
                f"{p.bytes:,}",
                p.reason or "zero copy: the caller's memory is bound",
            )
        )
    print_table(rows)
    for i, d in enumerate(plan.delegates):
        origin = f", engine {d.engine_origin}" if d.engine_origin else ""
        print(
            f"  delegate {i}: {d.executor} ({d.executor_detail}{origin}) on {d.execution_device}, "
            f"{d.bytes_copied:,} B copied, {d.executor_ns / 1e3:.1f} us executor"
            f" + {d.delegate_ns / 1e3:.1f} us delegate"
        )
        if d.executor_reason:
            print(f"    why not TensorRT: {d.executor_reason}")


def print_comparison(title: str, comparison: Comparison) -> None:
    print(f"{title} ({comparison.tolerances}):")
    print_table(comparison.rows())
