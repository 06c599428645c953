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


def print_plan(plan, n_delegates: int | None) -> None:
    """The runtime's placement plan of the last delegate call (``Runner.last_plan``)."""
    head = "placement plan, last delegate call"
    if plan is None:
        print(f"{head}: none (the method ran no et_tensorrt delegate)")
        return
    print(f"{head}: executor {plan.executor} on {plan.execution_device}, {plan.bytes_copied:,} B copied per call")
    if n_delegates is not None and n_delegates > 1:
        print(f"  (the method has {n_delegates} delegates; the runtime keeps the plan of the last call)")
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


def print_comparison(title: str, comparison: Comparison) -> None:
    print(f"{title} ({comparison.tolerances}):")
    print_table(comparison.rows())
