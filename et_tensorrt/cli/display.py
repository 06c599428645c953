"""How the commands print tensors, placement plans and comparisons."""

from __future__ import annotations

import zlib

import torch

from .._text import table
from ..parity import Comparison


def checksum(t: torch.Tensor) -> str:
    """crc32 of the tensor's bytes (device-independent)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return f"{zlib.crc32(flat.view(torch.uint8).numpy().tobytes()):08x}"


def summarize(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    shape = ", ".join(str(s) for s in t.shape)
    text = f"{str(t.dtype).replace('torch.', '')}[{shape}] on {t.device}"
    if t.numel() and not t.dtype.is_complex:
        text += f"  sum={t.detach().double().sum().item():+.6e}"
    return text + f"  crc32={checksum(t)}"


def print_tensors(role: str, tensors) -> None:
    for i, t in enumerate(tensors):
        print(f"  {role} {i}: {summarize(t)}")


def print_table(rows) -> None:
    for line in table(rows, indent="  ", width=100):
        print(line)


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
        print(
            f"  delegate {i}: {d.executor} ({d.executor_detail}) on {d.execution_device}, "
            f"{d.bytes_copied:,} B copied, {d.executor_ns / 1e3:.1f} us executor"
            f" + {d.delegate_ns / 1e3:.1f} us delegate"
        )
        if d.executor_reason:
            print(f"    why not TensorRT: {d.executor_reason}")


def print_comparison(title: str, comparison: Comparison) -> None:
    print(f"{title} ({comparison.tolerances}):")
    print_table(comparison.rows())
